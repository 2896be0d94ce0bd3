"""Communicator set-up under a deadline on a real GPU (csrc/cuda/nccl_setup.cpp): the
launcher path sets up non-blocking and splits off a blocking communicator, and a
rank that never joins ends in one line at the deadline. Skipped without a GPU; the
same logic runs on a fake NCCL in test_nccl_selection.py."""

from __future__ import annotations

import subprocess
import sys
import textwrap

import pytest
from conftest import gpu_with_nccl

pytestmark = pytest.mark.gpu


@pytest.fixture(scope="module")
def cuda_module():
    return gpu_with_nccl()[0]


def test_one_rank_world_is_set_up_under_the_deadline_and_runs(cuda_module):
    c = cuda_module
    w = c.NcclWorld(0, 1, 0, c.nccl_unique_id(), 60.0)
    assert w.multi_process and w.world == 1 and w.setup_bounded  # NCCL >= 2.18: non-blocking set-up + split
    b = c.NcclBench(w, "allreduce", "float32", "sum", 1 << 20, 0, False, "graph")
    assert b.check(2) == 0
    samples, wall = b.measure(5, 4)
    assert len(samples) == 5 and all(0 < s < wall for s in samples)


def test_a_rank_that_never_joins_fails_the_set_up_at_the_deadline():
    script = textwrap.dedent("""
        import time
        from pybench.measure.gpu.nccl_lib import load_nccl
        from pybench._native import cuda
        from pybench.errors import NativeError
        load_nccl()
        c = cuda()
        t0 = time.monotonic()
        try:
            c.NcclWorld(0, 2, 0, c.nccl_unique_id(), 3.0)  # rank 1 never starts
        except NativeError as e:
            print("refused after", round(time.monotonic() - t0, 1), "s:", e, flush=True)
    """)
    gpu_with_nccl()  # skips without a GPU and NCCL
    # A normal exit after the abort: nothing of NCCL's is left to hang or crash the process.
    proc = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "refused after" in proc.stdout and "rank 0 of 2" in proc.stdout and "did not join" in proc.stdout
