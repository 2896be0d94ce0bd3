"""What an NCCL run measures and on which GPU, checked on CPUs: device choice per
rank, nccl-tests' size rounding, no MPI count limit, the world-1 label in the
header and the file, and the order in which a world tears down its graphs and
communicators (the C++ registry, driven with stand-ins)."""

from __future__ import annotations

import pytest

from pybench._native import build_info
from pybench.errors import SizeError, UsageError
from pybench.measure.backends import nccl as nccl_backend
from pybench.measure.backends.selection import device_for_rank, nccl_count_limit, round_sizes_for_world, world_one_note
from pybench.sizes import parse_sizes


# ---------------------------------------------------------------- device per rank
def test_ranks_take_gpus_by_local_rank():
    assert [device_for_rank(r, 8, 8) for r in range(8)] == list(range(8))
    assert device_for_rank(1, 2, 8) == 1


def test_one_visible_gpu_per_rank_is_device_0():
    # srun --gpus-per-task=1 / CUDA_VISIBLE_DEVICES per rank: each rank sees only its own GPU
    assert [device_for_rank(r, 4, 1) for r in range(4)] == [0, 0, 0, 0]


def test_more_ranks_than_gpus_is_refused_in_one_line():
    with pytest.raises(UsageError, match="4 ranks on this host but only 2 GPU"):
        device_for_rank(3, 4, 2)
    with pytest.raises(UsageError, match="no GPU is visible"):
        device_for_rank(0, 1, 0)
    with pytest.raises(UsageError, match="local rank 5 is outside"):
        device_for_rank(5, 2, 2)


def test_backend_uses_the_same_device_rule():
    b = object.__new__(nccl_backend.NcclBackend)
    assert b._device_for(3, 4, 1) == 0 and b._device_for(3, 4, 4) == 3


# ---------------------------------------------------------------- sizes
@pytest.mark.parametrize("world", [3, 6, 12])
def test_power_of_two_sizes_round_down_as_nccl_tests_on_3_6_12_gpus(world):
    sizes = parse_sizes("8:1G")
    r = round_sizes_for_world("allgather", sizes, 4, world)
    assert all(s % (4 * world) == 0 for s in r.sizes)
    # nccl-tests: count / nranks * nranks elements
    expected = [s // (4 * world) * 4 * world for s in sizes if s // (4 * world)]
    assert list(r.sizes) == list(dict.fromkeys(expected))
    assert any("rounded down as nccl-tests does" in n for n in r.notes)
    assert any("dropped" in n for n in r.notes)  # 8 B and 16 B hold no element per rank at 3+ ranks x 4 B


def test_collectives_that_do_not_split_keep_their_sizes():
    sizes = parse_sizes("8:1G")
    for coll in ("allreduce", "broadcast", "sendrecv"):
        assert round_sizes_for_world(coll, sizes, 4, 3).sizes == tuple(sizes)
        assert round_sizes_for_world(coll, sizes, 4, 3).notes == ()


def test_exact_multiples_are_untouched_and_tiny_sweeps_refused():
    r = round_sizes_for_world("reducescatter", [96, 192], 4, 3)
    assert r.sizes == (96, 192) and r.notes == ()
    with pytest.raises(SizeError, match="every size is below one element per rank"):
        round_sizes_for_world("alltoall", [4, 8], 4, 3)
    with pytest.raises(UsageError, match="must be positive"):
        round_sizes_for_world("alltoall", [4], 4, 0)


def test_one_summary_line_names_how_many_sizes_changed_and_to_what():
    r = round_sizes_for_world("reducescatter", [4, 8, 24, 100], 4, 6)
    assert r.sizes == (24, 96) and r.unit == 24 and r.changes == ((4, 0), (8, 0), (100, 96))
    assert r.summary("reducescatter") == (
        "reducescatter over 6 ranks: 1 size(s) rounded down to a multiple of 24 B (6 ranks x 4 B), as nccl-tests "
        "does: 100->96; 2 size(s) dropped (below 24 B, one element per rank): 4, 8")
    assert r.record("reducescatter") == {"world": 6, "unit_bytes": 24, "rounded": [[100, 96]], "dropped": [4, 8],
                                         "note": r.summary("reducescatter")}
    untouched = round_sizes_for_world("reducescatter", [96], 4, 3)
    assert untouched.summary("reducescatter") is None and untouched.record("reducescatter") is None


def test_nccl_counts_have_no_mpi_int_limit():
    eight_gib_of_bytes = 8 << 30
    assert eight_gib_of_bytes > 2**31 - 1
    assert nccl_count_limit() >= eight_gib_of_bytes


# ---------------------------------------------------------------- world 1
def test_world_one_says_what_was_measured():
    for coll in ("allreduce", "allgather", "reducescatter", "broadcast"):
        out_of_place = world_one_note(coll, False)
        assert out_of_place and "device-to-device copy" in out_of_place and "busbw is 0" in out_of_place
        assert "no data movement" in (world_one_note(coll, True) or "")
    for coll in ("sendrecv", "alltoall"):
        assert "real NCCL send/recv kernel" in (world_one_note(coll, False) or "")


def test_world_one_label_reaches_the_header_and_the_file(monkeypatch):
    from pybench.measure.benchmark import BenchConfig
    from pybench.measure.gpu.nccl_lib import NcclLibrary
    b = object.__new__(nccl_backend.NcclBackend)
    b.library = NcclLibrary(path="/x/libnccl.so.2", source="wheel", version="2.32.3", version_code=23203)
    b._in_place = False
    b._info = {"world_size": 1}
    cfg = BenchConfig(benchmark="allreduce", sizes=(8,))
    text = b.describe_buffers(cfg)  # the runner stores it in the JSON and prints it in the header
    assert "world 1: NCCL runs allreduce as a device-to-device copy" in text and "256 MiB pool" in text
    assert b.measured_what(cfg).startswith(world_one_note("allreduce", False))
    b._info = {"world_size": 2}
    assert "world 1" not in b.describe_buffers(cfg) and b.measured_what(cfg) is None


# ---------------------------------------------------------------- graphs before communicators
def _cuda():
    if build_info().get("cuda_module") != "ON":
        pytest.skip("pybench was built without the CUDA module (no nvcc at build time)")
    from pybench._native import cuda
    return cuda()


def test_abort_destroys_every_graph_before_the_communicators():
    log = _cuda().teardown_order_selftest(3)
    assert log == ["destroy graph 0", "destroy graph 1", "destroy graph 2", "abort communicators (0 graphs live)"]


def test_a_graph_its_bench_freed_is_not_destroyed_twice():
    log = _cuda().teardown_order_selftest(3, 1)
    assert log[0] == "destroy graph 1"  # freed by its bench before the abort
    assert sorted(log[1:3]) == ["destroy graph 0", "destroy graph 2"]
    assert log[3:] == ["abort communicators (0 graphs live)"]  # and nothing after: releases are no-ops
    assert _cuda().teardown_order_selftest(0) == ["abort communicators (0 graphs live)"]



# ---------------------------------------------------------------- communicator set-up under a deadline
# csrc/cuda/nccl_setup.cpp on a fake NCCL (csrc/cuda/nccl_setup_selftest.cpp): the calls and their order.
def _cuda_module():
    if build_info().get("cuda_module") != "ON":
        pytest.skip("pybench was built without the CUDA module (no nvcc at build time)")
    from pybench._native import cuda
    return cuda()


def test_set_up_is_non_blocking_then_splits_a_blocking_communicator():
    calls, error, bounded = _cuda_module().nccl_setup_selftest(3)
    assert error is None and bounded
    # every rank joined: the work communicator is split off blocking, the set-up one destroyed
    assert calls == ["InitRankConfig(blocking=0)", "Split(setup, blocking=1)", "Destroy(setup)", "-> work"]


def test_a_rank_that_never_joins_ends_at_the_deadline_in_one_line():
    calls, error, bounded = _cuda_module().nccl_setup_selftest(-1, timeout_s=0.2)
    assert calls == ["InitRankConfig(blocking=0)", "Abort(setup)"]  # the half-built communicator is freed
    assert "rank 1 of 4" in error and "within its timeout of 0.2 s" in error and "did not join" in error
    assert "\n" not in error and not bounded


def test_a_failed_set_up_or_split_aborts_what_it_made_and_names_the_error():
    calls, error, _ = _cuda_module().nccl_setup_selftest(2, init_error=2)
    assert calls[-1] == "Abort(setup)" and "failed: unhandled system error (ncclResult 2)" in error
    # the split never completes: the set-up communicator is aborted first (that stops NCCL's thread)
    calls, error, _ = _cuda_module().nccl_setup_selftest(1, split_polls=-1, timeout_s=0.2)
    assert calls == ["InitRankConfig(blocking=0)", "Split(setup, blocking=1)", "Abort(setup)"]
    assert "split did not finish" in error and "stopped answering" in error
    calls, error, _ = _cuda_module().nccl_setup_selftest(0, split_polls=1, split_error=2)
    assert calls[-1] == "Abort(setup)" and "ncclCommSplit failed" in error


def test_no_deadline_waits_as_long_as_it_takes():
    calls, error, bounded = _cuda_module().nccl_setup_selftest(2000, timeout_s=0.0)  # ~0.2 s of polls
    assert error is None and bounded and calls[-1] == "-> work"


def test_nccl_older_than_2_18_sets_up_blocking_and_says_so():
    calls, error, bounded = _cuda_module().nccl_setup_selftest(0, legacy=True)
    assert calls == ["InitRank", "-> work"] and error is None and not bounded


def test_a_config_this_nccl_refuses_falls_back_to_the_blocking_set_up():
    calls, error, bounded = _cuda_module().nccl_setup_selftest(0, refuses_config=True)
    assert calls == ["InitRankConfig(blocking=0)", "InitRank", "-> work"] and error is None and not bounded


def test_set_up_deadline_follows_the_run_timeout_with_two_minutes_at_least():
    b = object.__new__(nccl_backend.NcclBackend)
    b.set_setup_timeout(30.0)
    assert b._setup_timeout_s == nccl_backend.INIT_TIMEOUT_S == 120.0
    b.set_setup_timeout(600.0)
    assert b._setup_timeout_s == 600.0
    b.set_setup_timeout(0.0)  # --timeout 0 / inf: never
    assert b._setup_timeout_s == 0.0


# ---------------------------------------------------------------- both buffer modes
class _RecordingCuda:
    """Stands in for pybench._cuda (no GPU here): records the benches asked for."""

    def __init__(self):
        self.asked: list[tuple[str, bool]] = []

    def NcclBench(self, world, collective, dtype, op, size, root, in_place, timing):  # noqa: N802 (the native name)
        self.asked.append((collective, in_place))
        return object()


def _backend(in_place_flag: bool):
    from pybench.measure.gpu.nccl_lib import NcclLibrary
    b = object.__new__(nccl_backend.NcclBackend)
    b.library = NcclLibrary(path="/x/libnccl.so.2", source="wheel", version="2.32.3", version_code=23203)
    b._in_place, b._info, b._world, b._cuda = in_place_flag, {"world_size": 2}, None, _RecordingCuda()
    return b


@pytest.mark.parametrize("collective", ["allreduce", "allgather", "reducescatter", "broadcast"])
def test_every_size_gets_an_in_place_bench_as_nccl_tests_measures(collective):
    from pybench.measure.benchmark import BenchConfig
    b = _backend(False)
    cfg = BenchConfig(benchmark=collective, sizes=(1 << 20,))
    b.make_bench(cfg, 1 << 20)
    assert b.make_in_place_bench(cfg, 1 << 20) is not None
    assert b._cuda.asked == [(collective, False), (collective, True)]
    assert "out of place, then in place" in b.describe_buffers(cfg)


@pytest.mark.parametrize("collective", ["alltoall", "sendrecv"])
def test_an_in_place_bench_nothing_checks_is_made_and_said_so(collective):
    """As nccl-tests: all-to-all and send/recv in place send from the buffer they receive into, timed unchecked."""
    from pybench.measure.benchmark import BenchConfig
    b = _backend(False)
    cfg = BenchConfig(benchmark=collective, sizes=(1 << 20,))
    assert b.make_in_place_bench(cfg, 1 << 20) is not None and b._cuda.asked == [(collective, True)]
    assert ", out of place, then in place (not checked: it sends from the buffer it receives into" in \
        b.describe_buffers(cfg)


def test_an_in_place_run_is_measured_once():
    from pybench.measure.benchmark import BenchConfig
    b = _backend(True)
    cfg = BenchConfig(benchmark="allreduce", sizes=(1 << 20,))
    b.make_bench(cfg, 1 << 20)
    assert b.make_in_place_bench(cfg, 1 << 20) is None
    assert b._cuda.asked == [("allreduce", True)] and ", in place," in b.describe_buffers(cfg)


def test_world_one_note_names_both_blocks():
    from pybench.measure.benchmark import BenchConfig
    b = _backend(False)
    b._info = {"world_size": 1}
    note = b.measured_what(BenchConfig(benchmark="allreduce", sizes=(8,)))
    assert note and "device-to-device copy" in note and "in-place block moves no data" in note
