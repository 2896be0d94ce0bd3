"""Regression-tracking benchmarks: real collectives on 2 MPI ranks (CPU, host buffers).

Each benchmark measures one (collective, size, dtype) through pybench's native
harness on the persistent rank job of conftest.py, asserts the exact check found
no wrong value, and reports the native per-operation samples to pytest-benchmark
(see conftest.py for why and how). Sizes follow pybench's conventions (bytes;
all-gather: the output buffer; reduce-scatter: the input buffer).

    pytest benchmarks/ --benchmark-only                       # measure and print
    pytest benchmarks/ --benchmark-autosave --benchmark-compare --benchmark-compare-fail=median:25%
"""

from __future__ import annotations

import pytest

from pybench.sizes import format_size

K, M = 1 << 10, 1 << 20

# Latency-bound, middle and bandwidth-bound sizes; kept few so the whole suite takes
# well under a minute on 2 cores. All are multiples of 2 ranks x 8 bytes.
ALLREDUCE_SIZES = (8, 1 * K, 64 * K, 1 * M, 16 * M)
SPLIT_SIZES = (64 * K, 1 * M, 16 * M)  # collectives that split the buffer into one block per rank
P2P_LIKE_SIZES = (64 * K, 1 * M)


def _ids(sizes):
    return [format_size(s) for s in sizes]


@pytest.mark.benchmark(group="allreduce")
@pytest.mark.parametrize("size", ALLREDUCE_SIZES, ids=_ids(ALLREDUCE_SIZES))
def test_allreduce(measure_collective, size):
    measure_collective("allreduce", size, dtype="float32", op="sum")


@pytest.mark.benchmark(group="allreduce-16bit")
@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
def test_allreduce_16bit_user_op(measure_collective, dtype):
    # MPI has no 16-bit float type: these run pybench's user-defined reduction op.
    measure_collective("allreduce", 1 * M, dtype=dtype, op="sum")


@pytest.mark.benchmark(group="allgather")
@pytest.mark.parametrize("size", SPLIT_SIZES, ids=_ids(SPLIT_SIZES))
def test_allgather(measure_collective, size):
    measure_collective("allgather", size, dtype="float32")


@pytest.mark.benchmark(group="reducescatter")
@pytest.mark.parametrize("size", SPLIT_SIZES, ids=_ids(SPLIT_SIZES))
def test_reducescatter(measure_collective, size):
    measure_collective("reducescatter", size, dtype="float32", op="sum")


@pytest.mark.benchmark(group="broadcast")
@pytest.mark.parametrize("size", SPLIT_SIZES, ids=_ids(SPLIT_SIZES))
def test_broadcast(measure_collective, size):
    measure_collective("broadcast", size, dtype="float32", root=0)


@pytest.mark.benchmark(group="alltoall")
@pytest.mark.parametrize("size", P2P_LIKE_SIZES, ids=_ids(P2P_LIKE_SIZES))
def test_alltoall(measure_collective, size):
    measure_collective("alltoall", size, dtype="float32")


@pytest.mark.benchmark(group="sendrecv")
@pytest.mark.parametrize("size", P2P_LIKE_SIZES, ids=_ids(P2P_LIKE_SIZES))
def test_sendrecv(measure_collective, size):
    measure_collective("sendrecv", size, dtype="float32")
