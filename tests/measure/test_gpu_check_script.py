"""scripts/gpu_check.sh's stage runner and scripts/gpu_compare.py's reading of
nccl-tests, on CPUs: every stage reports "needs a GPU" or passes here, a failing
stage fails the check (and only then), the log and the JSON land in $OUT, and
the side-by-side table computes its ratios and targets from nccl-tests' own rows."""

from __future__ import annotations

import importlib.util
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
SCRIPT = REPO / "scripts" / "gpu_check.sh"


def _has_gpu() -> bool:
    if shutil.which("nvidia-smi") is None:
        return False
    proc = subprocess.run(["nvidia-smi", "-L"], capture_output=True, text=True)
    return proc.returncode == 0 and "GPU " in proc.stdout


def _check(tmp_path: Path, stages: str, python: str = sys.executable,
           **extra: str) -> tuple[subprocess.CompletedProcess, dict]:
    env = dict(os.environ, OUT=str(tmp_path), GPU_CHECK_STAGES=stages, PYTHON=python, **extra)
    proc = subprocess.run(["bash", str(SCRIPT)], capture_output=True, text=True, timeout=120, env=env,
                          stdin=subprocess.DEVNULL)
    return proc, json.loads((tmp_path / "gpu_check.json").read_text())


@pytest.mark.skipif(_has_gpu(), reason="this machine has a GPU: the stages would run for real")
def test_without_a_gpu_every_stage_passes_or_needs_a_gpu(tmp_path):
    stages = "machine,nccl-init,deadline,gpu-tests,compare,compare-single,compare-mpi,p2p-matrix,cli,benchmarks"
    proc, summary = _check(tmp_path, stages)
    assert proc.returncode == 0, proc.stdout[-2000:]
    results = {s["stage"]: s["result"] for s in summary["stages"]}
    assert list(results) == stages.split(",")  # in order, each once
    assert results["machine"] == "PASS"
    assert {results[s] for s in stages.split(",")[1:]} == {"needs a GPU"}
    assert summary["have_gpu"] == 0 and summary["failed"] == 0
    log = (tmp_path / "gpu_check.log").read_text()
    assert "stage summary" in log and "needs a GPU: no NVIDIA GPU visible" in log and "Python.h: found" in log
    assert "GPUs: 0" in log and "no comparison ran" in log


def _fake_nvidia_smi(tmp_path: Path, n_gpus: int) -> str:
    """A PATH whose nvidia-smi lists `n_gpus` GPUs (the stage logic only counts them)."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    smi = bin_dir / "nvidia-smi"
    listing = "\n".join(f"GPU {i}: NVIDIA H200 (UUID: GPU-{i})" for i in range(n_gpus))
    smi.write_text(f'#!/bin/sh\n[ "$1" = -L ] && printf "{listing}\\n"\nexit 0\n')
    smi.chmod(0o755)
    return f"{bin_dir}:{os.environ['PATH']}"


MULTI_GPU_STAGES = "compare-single,compare-mpi,p2p-matrix"


def test_on_one_gpu_the_multi_gpu_stages_say_they_could_not_run(tmp_path):
    proc, summary = _check(tmp_path, MULTI_GPU_STAGES, PATH=_fake_nvidia_smi(tmp_path, 1))
    assert proc.returncode == 0, proc.stdout[-2000:]
    assert {s["stage"]: s["result"] for s in summary["stages"]} == dict.fromkeys(MULTI_GPU_STAGES.split(","),
                                                                               "SKIPPED")
    log = (tmp_path / "gpu_check.log").read_text()
    assert "needs 2+ GPUs: this machine has 1; not run: compare-mpi (one process per GPU" in log
    assert "one GPU here: not run: compare-single (one process, all GPUs), compare-mpi" in log


def test_with_two_gpus_both_launch_modes_and_the_matrix_run_at_world_2(tmp_path):
    # Dry run: the stages print the measuring commands instead of running them (no GPU here).
    proc, summary = _check(tmp_path, "machine," + MULTI_GPU_STAGES, PATH=_fake_nvidia_smi(tmp_path, 2),
                           GPU_CHECK_DRY_RUN="1")
    assert proc.returncode == 0, proc.stdout[-2000:]
    assert {s["result"] for s in summary["stages"]} == {"PASS"}
    log = (tmp_path / "gpu_check.log").read_text()
    would = [line for line in log.splitlines() if line.startswith("would run: ")]
    assert len(would) == 3, would
    single, mpi, matrix = would
    assert "gpu_compare.py --gpus 2 --launch single" in single and "build/nccl-tests " in single
    assert "gpu_compare_single.json" in single
    assert "gpu_compare.py --gpus 2 --launch mpi" in mpi and "build/nccl-tests-mpi " in mpi
    assert "-m pybench p2p --matrix" in matrix
    assert "GPUs: 2 (the multi-GPU stages run at world 2)" in log and "one GPU here" not in log


def test_a_failing_stage_fails_the_check_and_the_rest_still_run(tmp_path):
    # A python3 that cannot run: the machine stage fails; p2p-matrix still runs and reports.
    proc, summary = _check(tmp_path, "machine,p2p-matrix", python="false")
    assert proc.returncode == 1
    results = {s["stage"]: s["result"] for s in summary["stages"]}
    assert results["machine"].startswith("FAIL (exit")
    assert results["p2p-matrix"] in ("needs a GPU", "SKIPPED", "PASS")
    assert summary["failed"] == 1
    assert "some stage FAILED" in (tmp_path / "gpu_check.log").read_text()


def test_unselected_stages_do_not_run(tmp_path):
    proc, summary = _check(tmp_path, "machine")
    assert proc.returncode == 0 and [s["stage"] for s in summary["stages"]] == ["machine"]


# ---------------------------------------------------------------- gpu_compare.py
def _compare_module():
    spec = importlib.util.spec_from_file_location("gpu_compare", REPO / "scripts" / "gpu_compare.py")
    assert spec and spec.loader
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


NCCL_TESTS_OUTPUT = """\
# nccl-tests version 2.17.6 nccl-headers=23203 nccl-library=23203
#                                                              out-of-place                       in-place
#       size         count      type   redop    root     time   algbw   busbw  #wrong     time   algbw   busbw  #wrong
#        (B)    (elements)                               (us)  (GB/s)  (GB/s)             (us)  (GB/s)  (GB/s)
           8             2     float     sum      -1     4.10    0.00    0.00       0     4.00    0.00    0.00       0
        4096          1024     float     sum      -1     5.00    0.82    0.00       0     5.00    0.82    0.00       0
     2097152        524288     float     sum      -1    10.00  209.72    0.00       0     9.00  233.02    0.00       0
  1073741824     268435456     float     sum      -1   800.00 1342.18    0.00       0   790.00 1359.17    0.00       0
# Out of bounds values : 0 OK
"""


def test_nccl_tests_rows_are_read_by_size():
    rows = _compare_module().parse_nccl_tests(NCCL_TESTS_OUTPUT)
    assert sorted(rows) == [8, 4 << 10, 2 << 20, 1 << 30]
    assert rows[1 << 30]["time_us"] == 800.0 and rows[1 << 30]["algbw"] == 1342.18 and rows[8]["wrong"] == 0


def test_side_by_side_ratios_and_targets_in_each_timing_mode():
    mod = _compare_module()
    theirs = {"all_reduce_perf/plain": mod.parse_nccl_tests(NCCL_TESTS_OUTPUT),
              "all_reduce_perf/graph": mod.parse_nccl_tests(NCCL_TESTS_OUTPUT)}

    def ours_row(time_us: float, size: int) -> dict:
        return {"time_us": time_us, "algbw": size / time_us / 1e3, "busbw": 0.0, "wrong": 0, "p5_us": time_us,
                "p95_us": time_us, "iterations": 10}

    ours = {"allreduce/batched": {s: ours_row(t, s) for s, t in ((8, 3.3), (1 << 30, 810.0))},
            "allreduce/host": {s: ours_row(t, s) for s, t in ((8, 4.2), (1 << 30, 805.0))},
            "allreduce/graph": {s: ours_row(t, s) for s, t in ((8, 3.4), (1 << 30, 900.0))},
            "allreduce/host-graph": {s: ours_row(t, s) for s, t in ((8, 4.2), (1 << 30, 801.0))},
            "allreduce/per-op": {8: ours_row(6.0, 8)}}
    lines, targets, ratios = mod.side_by_side(ours, theirs)
    # busbw is 0 at world 1 for both tools: the bandwidth ratio is that of algbw
    assert targets["allreduce events 1 GiB algbw within 2%"] is True  # 800 / 810
    assert targets["allreduce host 1 GiB algbw within 2%"] is True
    assert targets["allreduce graph 1 GiB algbw within 2%"] is False  # 800 / 900
    assert targets["allreduce host-graph 8 B time within 5%"] is True  # 4.2 / 4.1
    assert targets["allreduce host 8 B time within 5%"] is True
    assert targets["allreduce host-graph 1 GiB algbw within 2%"] is True
    # events and nccl-tests' host clock are different definitions: a ratio, no latency target
    assert "allreduce events 8 B time within 5%" not in targets and "allreduce graph 8 B time within 5%" not in targets
    assert ratios["allreduce graph 8 B time"] == pytest.approx(3.4 / 4.1)
    assert ratios["allreduce events 8 B time"] == pytest.approx(3.3 / 4.1)
    assert ratios["allreduce host 1 GiB algbw"] == pytest.approx(800 / 805, rel=1e-5)  # nccl-tests rounds algbw
    row = next(x for x in lines if "events" in x and "1 GiB" in x)
    assert "810.00" in row and "800.00" in row and "1.012" in row
    assert any(x.startswith("# per-op 8 B latency, allreduce: pybench 6.00 us") for x in lines)
    assert not any("sendrecv" in x for x in lines[1:])  # nothing measured, nothing printed


def test_nccl_tests_and_pybench_run_at_the_same_world_in_each_launch_mode():
    mod = _compare_module()
    exe = Path("/nt/all_reduce_perf")
    single = mod.nccl_tests_command(exe, 4, "single", False, [])
    assert single[:7] == [str(exe), "-b", "8", "-e", "1G", "-f", "512"] and single[7:9] == ["-g", "4"]
    mpi = mod.nccl_tests_command(exe, 4, "mpi", True, ["mpiexec", "-n", "4"])
    assert mpi[:4] == ["mpiexec", "-n", "4", str(exe)] and mpi[mpi.index("-g") + 1] == "1"
    assert mpi[-2:] == ["-G", str(mod.GRAPH_LAUNCHES)]
    # the sizes nccl-tests' -b 8 -e 1G -f 512 runs are exactly pybench's
    sizes, s = [], 8
    while s <= 1 << 30:
        sizes.append(s)
        s *= 512
    assert tuple(sizes) == mod.SIZES
    cli = mod.pybench_cli_command("sendrecv", "host", ["mpiexec", "-n", "4"], "nccl", Path("/tmp/x.json"))
    assert cli[:3] == ["mpiexec", "-n", "4"] and cli[cli.index("--timing") + 1] == "host"
    assert cli[cli.index("--backend") + 1] == "nccl"


def test_a_result_file_becomes_rows_and_the_torch_overhead_is_a_time_ratio():
    mod = _compare_module()
    doc = {"records": [{"size_bytes": 8, "time_s": 2e-5, "algbw_gbps": 0.0, "busbw_gbps": 0.0, "wrong": 0,
                        "time_p5_s": 1e-5, "time_p95_s": 3e-5, "iterations": 9}]}
    rows = mod.rows_from_result(doc)
    assert rows[8]["time_us"] == pytest.approx(20.0) and rows[8]["p95_us"] == pytest.approx(30.0)
    assert mod.torch_overhead({8: {"time_us": 10.0}}, rows) == {"8 B": pytest.approx(2.0)}


def test_the_summary_gives_ratios_per_mode_targets_torch_and_numa():
    mod = _compare_module()
    doc = {"world": 1, "launch": "single",
           "ratios": {"allreduce host 8 B time": 1.02, "allreduce host 1 GiB algbw": 0.995,
                      "allgather host 8 B time": 1.5, "sendrecv host-graph 8 B time": 0.98},
           "targets": {"allreduce host 8 B time within 5%": True, "sendrecv host-graph 8 B time within 5%": False},
           "torch_overhead": {"8 B": 3.5}, "failures": [],
           "copies": [{"kind": "d2d", "host_placement": ""},
                      {"kind": "h2d", "host_placement": "gpu-local node 1 (mmap + mbind)"}]}
    lines = mod.summarize([doc])
    assert "world 1 (one process), host: pybench / nccl-tests allreduce 8 B time 1.020; allreduce 1 GiB algbw 0.995" \
        in lines
    assert "world 1 (one process), host-graph: pybench / nccl-tests sendrecv 8 B time 0.980" in lines
    assert not any("allgather" in x for x in lines)  # the summary keeps to the targets' two collectives
    assert "world 1 (one process): 1 of 2 targets met (not met: sendrecv host-graph 8 B time within 5%)" in lines
    assert "world 1 (one process): torch nccl path time / native (batched): 8 B 3.50x" in lines
    assert "world 1 (one process): NUMA placement of the h2d host buffer: gpu-local node 1 (mmap + mbind)" in lines
