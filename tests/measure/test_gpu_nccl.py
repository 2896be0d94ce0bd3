"""The NCCL harness on a real GPU: every collective checked exactly on the device
(#wrong == 0) for each dtype and op, in place and out of place; an injected error
is seen; batched, per-op and CUDA-graph timing return sane samples; copies and
(with two or more GPUs) the pair matrix run. Skipped, with the reason, without a
GPU or without NCCL. One GPU is enough: NCCL runs a single-rank communicator."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap

import pytest
from conftest import gpu_with_nccl

pytestmark = pytest.mark.gpu


@pytest.fixture(scope="module")
def gpu():
    return gpu_with_nccl()


@pytest.fixture(scope="module")
def world(gpu):
    c, probe, _ = gpu
    return c.NcclWorld(list(range(probe["device_count"])), 60.0)


DTYPES = ["float32", "float64", "float16", "bfloat16", "int32", "int8", "uint8", "uint32", "int64", "uint64"]


@pytest.mark.parametrize("collective", ["allreduce", "allgather", "reducescatter", "broadcast", "alltoall",
                                        "sendrecv"])
@pytest.mark.parametrize("dtype", DTYPES)
def test_every_collective_and_dtype_is_exact(gpu, world, collective, dtype):
    c = gpu[0]
    size = 3 * 1024 * 8 * world.world  # divisible by every element size x world
    b = c.NcclBench(world, collective, dtype, "sum", size, 0, False, "batched")
    b.warmup(2)
    assert b.check(2) == 0


@pytest.mark.parametrize("op", ["sum", "prod", "max", "min", "avg"])
@pytest.mark.parametrize("dtype", ["float32", "bfloat16", "float16", "int32"])
@pytest.mark.parametrize("collective", ["allreduce", "reducescatter"])
def test_every_op_is_exact(gpu, world, collective, dtype, op):
    c = gpu[0]
    size = 1 << 20
    if op == "avg" and dtype == "int32":
        from pybench.errors import NativeError
        with pytest.raises(NativeError, match="avg needs a floating-point dtype"):
            c.NcclBench(world, collective, dtype, op, size, 0, False, "batched")
        return
    b = c.NcclBench(world, collective, dtype, op, size, 0, False, "batched")
    assert b.check(2) == 0


@pytest.mark.parametrize("collective", ["allreduce", "allgather", "reducescatter", "broadcast"])
def test_in_place_is_exact(gpu, world, collective):
    c = gpu[0]
    b = c.NcclBench(world, collective, "float32", "sum", 1 << 20, 0, True, "batched")
    assert b.check(2) == 0
    # one buffer (in place), of rotation slots each as large as the larger of send and recv
    assert b.slot_stride == (max(b.send_bytes, b.recv_bytes) + 255) // 256 * 256
    assert b.device_bytes == b.rotation_slots * b.slot_stride


@pytest.mark.parametrize("collective", ["alltoall", "sendrecv"])
def test_an_in_place_form_with_no_defined_result_is_timed_and_not_checked(gpu, world, collective):
    # as nccl-tests: each rank sends from the buffer it receives into, so no result is checked (-1)
    b = gpu[0].NcclBench(world, collective, "float32", "sum", 1 << 20, 0, True, "batched")
    assert b.check(2) == -1
    samples, wall = b.measure(3, 1)
    assert len(samples) == 3 and all(0 < s < wall for s in samples)
    assert b.device_bytes == b.rotation_slots * b.slot_stride  # one buffer


def test_injected_error_is_counted(gpu, world, monkeypatch):
    monkeypatch.setenv("PYBENCH_INJECT_WRONG", "0")
    b = gpu[0].NcclBench(world, "allreduce", "float32", "sum", 1 << 16, 0, False, "batched")
    assert b.check(3) == 3  # one element per iteration on rank 0


@pytest.mark.parametrize("timing", ["batched", "per-op", "graph", "host", "host-graph"])
def test_timing_modes_return_one_positive_sample_each(gpu, world, timing):
    b = gpu[0].NcclBench(world, "allreduce", "float32", "sum", 1 << 20, 0, False, timing)
    b.warmup(3)
    k = 1 if timing == "per-op" else 20
    samples, wall = b.measure(7, k)
    assert len(samples) == 7 and all(0 < s < 1.0 for s in samples)
    assert wall >= sum(samples) * k * 0.5
    if timing in ("graph", "host-graph"):
        again, _ = b.measure(3, k)  # the captured graph is reused for the same k
        assert len(again) == 3 and all(s > 0 for s in again)


def test_copy_bandwidths_are_positive(gpu):
    c = gpu[0]
    one_node = len(c.numa_memory_nodes()) == 1
    for kind in ("d2d", "h2d", "d2h"):
        samples, peer, wrong, node, placement = c.copy_times(kind, 0, 0, 64 << 20, 3, 2)
        assert len(samples) == 3 and all(s > 0 for s in samples)
        assert peer is False and wrong == 0
        if kind == "d2d":
            assert (node, placement) == (-1, "")  # no host buffer
            continue
        # As nvbandwidth: on the GPU's node; cudaHostAlloc with one node or where none is known.
        unplaced = ("no NUMA affinity known", "NUMA placement refused")
        assert placement.startswith(("gpu-local node", "one NUMA node") + unplaced), placement
        assert placement.startswith("one NUMA node") == one_node, placement
        assert (node >= 0) == (not placement.startswith(unplaced)), (node, placement)
        if placement.startswith("gpu-local node"):
            assert placement.startswith(f"gpu-local node {node} (mmap + mbind") and "cudaHostRegister" in placement
            assert "pages on other nodes" not in placement and "not verified" not in placement, placement


@pytest.mark.parametrize("engine", ["ce", "sm"])
@pytest.mark.parametrize("kind,both", [("d2d", False), ("h2d", False), ("d2h", False), ("h2d", True)])
def test_copies_by_both_engines_and_directions_move_every_byte(gpu, engine, kind, both):
    # odd size: the tail too; SM copies reach NUMA-placed host buffers through their registered device address
    samples, _, wrong, _, placement = gpu[0].copy_times(kind, 0, 0, (16 << 20) + 3, 3, 2, engine, both)
    assert wrong == 0 and len(samples) == 3 and all(s > 0 for s in samples)
    assert (placement != "") == (kind != "d2d")


def test_buffers_rotate_below_the_pool_size_and_not_above(gpu, world):
    c = gpu[0]
    small = c.NcclBench(world, "allreduce", "float32", "sum", 1 << 20, 0, False, "batched")
    assert small.slot_stride == 1 << 20 and small.rotation_slots == 256  # 256 MiB pool of 1 MiB slots
    small.warmup(300)  # wraps around the pool
    assert small.check(1) == 0
    big = c.NcclBench(world, "allreduce", "float32", "sum", 256 << 20, 0, False, "batched")
    assert big.rotation_slots == 1
    assert big.latched(1) and big.latched(128) and not big.latched(129)


def test_abort_with_live_graphs_returns_and_later_use_is_refused(gpu):
    # NCCL's abort waits for every graph that captured NCCL work: the world must destroy
    # them first. In a child process, so a regression is a timeout here, not a hung suite.
    script = textwrap.dedent("""
        from pybench.measure.gpu.nccl_lib import load_nccl
        from pybench._native import cuda
        from pybench.errors import NativeError
        load_nccl()
        c = cuda()
        w = c.NcclWorld([0], 30.0)
        b = c.NcclBench(w, "allreduce", "float32", "sum", 1 << 16, 0, False, "graph")
        b.measure(2, 10)  # the bench now owns a live graph exec
        w.abort()
        assert w.aborted
        try:
            b.measure(1, 10)
        except NativeError as e:
            print("refused:", e)
        del b
        print("done")
    """)
    proc = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "refused:" in proc.stdout and "aborted" in proc.stdout and proc.stdout.rstrip().endswith("done")


def test_pair_matrix_with_two_gpus(gpu, world):
    if world.world < 2:
        pytest.skip("the pair matrix needs two GPUs; this node has one")
    times = world.pair_times(0, 1, 1 << 20, 3, 4)
    assert len(times) == 3 and all(t > 0 for t in times)
    pingpong = world.pair_times(0, 1, 8, 3, 10, True)
    assert len(pingpong) == 3 and all(t > 0 for t in pingpong)


def test_backend_runs_the_python_measuring_loop(gpu, monkeypatch):
    # The backend object as the runner uses it, on every visible GPU of this node.
    from pybench.measure.backends.nccl import NcclBackend
    from pybench.measure.benchmark import BenchConfig, measure_size
    from pybench.measure.stopping import StopRule
    monkeypatch.delenv("PYBENCH_INJECT_WRONG", raising=False)
    backend = NcclBackend()
    info = backend.start()
    assert info["rank"] == 0 and info["world_size"] == gpu[1]["device_count"]
    cfg = BenchConfig(benchmark="allgather", sizes=(1 << 20,), stop=StopRule(precision=None, fixed_iters=10))
    rec = measure_size(cfg, backend.make_bench(cfg, 1 << 20), 1 << 20, info["world_size"])
    assert rec.wrong == 0 and rec.time_s > 0 and rec.iterations >= 10
    described = backend.describe_buffers(cfg)
    assert f"NCCL {gpu[2].version}" in described and gpu[2].path in described
    meta = backend.run_metadata()
    assert meta["nccl"]["version"] == gpu[2].version and meta["gpus"][0]["name"]
    assert backend.agree_max([3, 1]) == [3, 1]


def test_runner_end_to_end_records_nccl_in_the_result(gpu, tmp_path):
    # The runner with the nccl backend, stand-alone (one process, every GPU).
    if gpu[1]["device_count"] < 2:
        pytest.skip("the runner asks for 2 ranks per collective; this node has one GPU")
    script = textwrap.dedent("""
        import sys
        from pybench.measure.benchmark import BenchConfig
        from pybench.measure.results import OutputFiles
        from pybench.measure.runner import RunPlan, run_as_rank
        from pybench.measure.stopping import StopRule
        from pathlib import Path
        cfg = BenchConfig(benchmark="allreduce", sizes=(1024, 1 << 20), stop=StopRule(precision=None, fixed_iters=10))
        sys.exit(run_as_rank([RunPlan(cfg, OutputFiles(Path("out.json"), None))], ["allreduce"], True, "nccl", 60))
    """)
    proc = subprocess.run([sys.executable, "-c", script], cwd=tmp_path, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    data = json.loads((tmp_path / "out.json").read_text())
    text = json.dumps(data)
    assert "NCCL " + gpu[2].version in text and gpu[2].path in text
    assert len(data["records"]) == 2 and all(r["wrong"] == 0 for r in data["records"])


def test_one_rank_world_from_a_unique_id_checks_and_reduces_over_ranks(gpu):
    # The launcher path (ncclCommInitRank from a unique id) with one rank: the cross-rank
    # reductions (pinned host buffers, polled) run for real, through NCCL.
    c = gpu[0]
    w = c.NcclWorld(0, 1, 0, c.nccl_unique_id(), 60.0)
    assert w.multi_process and w.world == 1
    assert w.max_over_ranks([3, 1 << 40]) == [3, 1 << 40]
    b = c.NcclBench(w, "allreduce", "float32", "sum", 1 << 20, 0, False, "per-op")
    assert b.check(2) == 0
    samples, wall = b.measure(5, 1)
    assert len(samples) == 5 and all(0 < s < wall for s in samples)



@pytest.mark.parametrize("collective,checked", [("allreduce", True), ("alltoall", False)])
def test_the_table_has_both_blocks_as_nccl_tests(gpu, tmp_path, collective, checked):
    # As nccl-tests: every size out of place, then in place; all-to-all's in-place result is not checked (N/A).
    proc = subprocess.run([sys.executable, "-m", "pybench", collective, "--backend", "nccl", "--gpus", "1",
                           "--sizes", "1K:64K", "--json", str(tmp_path / "r.json")],
                          cwd=tmp_path, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-2000:]
    records = json.loads((tmp_path / "r.json").read_text())["records"]
    assert len(records) == 7
    for r in records:
        assert r["wrong"] == 0 and r["time_s"] > 0 and r["in_place_time_s"] > 0
        assert r["in_place_wrong"] == (0 if checked else None)
    rows = [line.split() for line in proc.stdout.splitlines() if line.strip() and not line.startswith("#")]
    assert len(rows) == 7 and all(row[12] == ("0" if checked else "N/A") for row in rows), proc.stdout
