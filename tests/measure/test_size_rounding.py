"""Sizes and worlds (issue 15, item 8): the 2**31-element count limit belongs to MPI,
not NCCL, and power-of-two sizes on 3, 6 or 12 ranks are rounded down as nccl-tests
does for all-gather, reduce-scatter and all-to-all, said once and kept in the result."""

from __future__ import annotations

import json

import pytest

from pybench.errors import SizeError, UsageError
from pybench.measure.benchmark import MPI_MAX_COUNT, BenchConfig, check_device_memory, max_count
from pybench.measure.results import OutputFiles
from pybench.measure.runner import RunPlan, fit_plans
from pybench.sizes import parse_sizes

README_SWEEP = tuple(parse_sizes("8:8G:2"))


# ---------------------------------------------------------------- the count limit is MPI's
def test_nccl_validation_takes_the_readme_sweep_to_8g():
    cfg = BenchConfig(benchmark="allreduce", sizes=README_SWEEP)
    assert README_SWEEP[-1] // cfg.elem_bytes == 2**31 > MPI_MAX_COUNT
    cfg.validate(2, single_rank_ok=True, backend="nccl")  # no error: NCCL counts are size_t
    cfg.validate(1, single_rank_ok=True, backend="nccl")


@pytest.mark.parametrize("backend", ["mpi", "torch"])
def test_mpi_and_torch_keep_the_32_bit_count_limit(backend):
    cfg = BenchConfig(benchmark="allreduce", sizes=README_SWEEP)
    with pytest.raises(SizeError, match=f"over the {backend} backend's 32-bit count limit"):
        cfg.validate(2, backend=backend)
    assert max_count(backend) == 2**31 - 1 < max_count("nccl")
    BenchConfig(benchmark="allreduce", sizes=README_SWEEP[:-1]).validate(2, backend=backend)  # 4 GiB: 2**30 floats


def test_p2p_is_held_to_mpi_whatever_the_backend_name():
    with pytest.raises(SizeError, match="MPI's 32-bit count"):
        BenchConfig(benchmark="p2p_bw", sizes=(4 << 30,)).validate(2, backend="nccl")


def test_device_memory_check_refuses_what_the_gpu_cannot_hold():
    cfg = BenchConfig(benchmark="allreduce", sizes=README_SWEEP)
    check_device_memory(cfg, 2, 141 << 30)  # an H200 holds 2 x 8 GiB
    with pytest.raises(SizeError, match="needs 16.0 GiB of device buffers per GPU"):
        check_device_memory(cfg, 2, 16 << 30)
    small = BenchConfig(benchmark="allreduce", sizes=(8,))
    with pytest.raises(SizeError, match="needs 0.5 GiB"):  # two 256 MiB rotation pools even for 8 B
        check_device_memory(small, 2, 512 << 20)


# ---------------------------------------------------------------- rounding, through the plans the runner uses
@pytest.mark.parametrize("world", [3, 6, 12])
@pytest.mark.parametrize("collective", ["allgather", "reducescatter", "alltoall"])
def test_power_of_two_sweeps_are_rounded_not_refused(collective, world):
    cfg = BenchConfig(benchmark=collective, sizes=tuple(parse_sizes("8:1G")))
    with pytest.raises(SizeError, match="multiple of ranks x element size"):
        cfg.validate(world)  # as requested, the sweep cannot run at this world
    (plan,) = fit_plans([RunPlan(cfg, OutputFiles())], world, "mpi", 1)
    unit = 4 * world
    assert all(s % unit == 0 for s in plan.config.sizes) and plan.config.sizes[-1] == (1 << 30) // unit * unit
    plan.config.validate(world)
    rounding = plan.size_rounding
    assert rounding is not None and rounding["world"] == world and rounding["unit_bytes"] == unit
    assert all(s < unit for s in rounding["dropped"]) and [1 << 30, (1 << 30) // unit * unit] in rounding["rounded"]
    note = plan.rounding_note or ""
    assert note.startswith(f"{collective} over {world} ranks: ") and "\n" not in note
    assert f"{len(rounding['rounded'])} size(s) rounded down to a multiple of {unit} B" in note
    assert f"{len(rounding['dropped'])} size(s) dropped" in note


def test_exact_sizes_and_other_collectives_are_left_alone():
    exact = RunPlan(BenchConfig(benchmark="allgather", sizes=(12, 24)), OutputFiles())
    other = RunPlan(BenchConfig(benchmark="allreduce", sizes=(8, 16)), OutputFiles())
    p2p = RunPlan(BenchConfig(benchmark="p2p_latency", sizes=(1, 3)), OutputFiles())
    for plan in (exact, other):
        (ready,) = fit_plans([plan], 3, "mpi", 1)
        assert ready.config is plan.config and ready.size_rounding is None and ready.rounding_note is None
    (ready,) = fit_plans([p2p], 2, "mpi", 1)
    assert ready.config.sizes == (1, 3) and ready.size_rounding is None


def test_a_sweep_that_rounds_to_nothing_is_one_line():
    plan = RunPlan(BenchConfig(benchmark="alltoall", sizes=(4, 8)), OutputFiles())
    with pytest.raises(SizeError, match="every size is below one element per rank") as err:
        fit_plans([plan], 3, "mpi", 1)
    assert "\n" not in str(err.value)
    with pytest.raises(UsageError, match="needs at least 2 ranks"):  # the world is still checked after rounding
        fit_plans([RunPlan(BenchConfig(benchmark="allgather", sizes=(64,)), OutputFiles())], 1, "mpi", 1)


# ---------------------------------------------------------------- end to end: 3 real MPI ranks
@pytest.mark.mpi
def test_three_rank_allgather_sweep_reports_the_rounded_sizes(pybench_cli, tmp_path, native):
    out = tmp_path / "ag.json"
    proc = pybench_cli("allgather", "--np", "3", "--oversubscribe", "--sizes", "8:1K", "-n", "5", "--json", str(out),
                       timeout=300)
    assert proc.returncode == 0, proc.stderr
    rows = [line.split() for line in proc.stdout.splitlines() if line.strip() and not line.startswith("#")]
    assert [int(r[0]) for r in rows] == [12, 24, 60, 120, 252, 504, 1020]
    assert [int(r[1]) for r in rows] == [3, 6, 15, 30, 63, 126, 255]
    assert all(r[8] == "0" for r in rows)  # #wrong
    notes = [line for line in proc.stderr.splitlines() if line.startswith("pybench: note:")]
    assert len(notes) == 1, proc.stderr  # the parent validates quietly; rank 0 alone says it
    assert ("allgather over 3 ranks: 7 size(s) rounded down to a multiple of 12 B (3 ranks x 4 B), as nccl-tests "
            "does: 16->12, 32->24, 64->60, 128->120, 256->252, 512->504, 1024->1020; 1 size(s) dropped") in notes[0]
    header = [line for line in proc.stdout.splitlines() if line.startswith("# note:")]
    assert header == [f"# note: {notes[0].removeprefix('pybench: note: ')}"]
    doc = json.loads(out.read_text())
    assert doc["world_size"] == 3 and doc["finished"]
    assert [r["size_bytes"] for r in doc["records"]] == [12, 24, 60, 120, 252, 504, 1020]
    assert all(r["wrong"] == 0 for r in doc["records"])
    assert doc["options"]["size_rounding"]["dropped"] == [8]
    assert doc["options"]["notes"] == [doc["options"]["size_rounding"]["note"]]
