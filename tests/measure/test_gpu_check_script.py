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


def _check(tmp_path: Path, stages: str, python: str = sys.executable) -> tuple[subprocess.CompletedProcess, dict]:
    env = dict(os.environ, OUT=str(tmp_path), GPU_CHECK_STAGES=stages, PYTHON=python)
    proc = subprocess.run(["bash", str(SCRIPT)], capture_output=True, text=True, timeout=120, env=env,
                          stdin=subprocess.DEVNULL)
    return proc, json.loads((tmp_path / "gpu_check.json").read_text())


@pytest.mark.skipif(_has_gpu(), reason="this machine has a GPU: the stages would run for real")
def test_without_a_gpu_every_stage_passes_or_needs_a_gpu(tmp_path):
    stages = "machine,nccl-init,gpu-tests,compare,cli,benchmarks,p2p-matrix"
    proc, summary = _check(tmp_path, stages)
    assert proc.returncode == 0, proc.stdout[-2000:]
    results = {s["stage"]: s["result"] for s in summary["stages"]}
    assert list(results) == stages.split(",")  # in order, each once
    assert results["machine"] == "PASS"
    assert {results[s] for s in stages.split(",")[1:]} == {"needs a GPU"}
    assert summary["have_gpu"] == 0 and summary["failed"] == 0
    log = (tmp_path / "gpu_check.log").read_text()
    assert "stage summary" in log and "needs a GPU: no NVIDIA GPU visible" in log and "Python.h: found" in log


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
     1048576        262144     float     sum      -1    10.00  104.86    0.00       0     9.00  116.51    0.00       0
   268435456      67108864     float     sum      -1   200.00 1342.18    0.00       0   190.00 1412.82    0.00       0
  1073741824     268435456     float     sum      -1   800.00 1342.18    0.00       0   790.00 1359.17    0.00       0
# Out of bounds values : 0 OK
"""


def test_nccl_tests_rows_are_read_by_size():
    rows = _compare_module().parse_nccl_tests(NCCL_TESTS_OUTPUT)
    assert sorted(rows) == [8, 1 << 20, 256 << 20, 1 << 30]
    assert rows[1 << 30]["time_us"] == 800.0 and rows[1 << 30]["algbw"] == 1342.18 and rows[8]["wrong"] == 0


def test_side_by_side_ratios_and_targets():
    mod = _compare_module()
    theirs = {"all_reduce_perf/batched": mod.parse_nccl_tests(NCCL_TESTS_OUTPUT),
              "all_reduce_perf/graph": mod.parse_nccl_tests(NCCL_TESTS_OUTPUT)}

    def ours_row(time_us: float, size: int) -> dict:
        return {"time_us": time_us, "algbw": size / time_us / 1e3, "busbw": 0.0, "wrong": 0, "p5_us": time_us,
                "p95_us": time_us, "iterations": 10}

    ours = {"allreduce/batched": {s: ours_row(t, s) for s, t in ((8, 4.5), (1 << 30, 810.0))},
            "allreduce/graph": {s: ours_row(t, s) for s, t in ((8, 4.2), (1 << 30, 900.0))},
            "allreduce/per-op": {8: ours_row(6.0, 8)}}
    lines, targets = mod.side_by_side(ours, theirs)
    # busbw is 0 at world 1 for both tools: the bandwidth ratio is that of algbw
    assert targets["allreduce events 1 GiB algbw within 2%"] is True  # 800 / 810
    assert targets["allreduce graph 1 GiB algbw within 2%"] is False  # 800 / 900
    assert targets["allreduce graph 8 B time within 5%"] is True  # 4.2 / 4.1
    row = next(x for x in lines if "events" in x and "1 GiB" in x)
    assert "810.00" in row and "800.00" in row and "1.012" in row
    assert any(x.startswith("# per-op 8 B latency, allreduce: pybench 6.00 us") for x in lines)
    assert not any("sendrecv" in x for x in lines[1:])  # nothing measured, nothing printed
