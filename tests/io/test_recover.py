"""A run that dies whole (its guard too, as when srun's cgroup or the OOM killer ends the job)
leaves its journal in the job folder; `pybench recover` turns it into the result file. A process
run alone (one-process NCCL, no launcher) journals and is guarded like rank 0 under a launcher."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from conftest import run_pybench

from pybench.errors import UsageError
from pybench.measure.recover import REASON, recover_result
from pybench.measure.result_journal import IN_PROGRESS

# Writes 10 sizes of a result through OutputFiles as the CLI's rank 0 does in a process of its own
# (the file is rewritten at 1, 2, 4 and 8 sizes), prints the guard's pid, then waits to be killed.
WRITER = """
import sys, time
from pybench.measure.results import OutputFiles, RunResult, SizeRecord
t = 1e-5
def record(size):
    return SizeRecord(size_bytes=size, count=size // 4, dtype="float32", redop="sum", root=-1, time_s=t,
                      time_mean_s=t, time_min_s=t, time_max_s=t, time_p5_s=t, time_p95_s=t, time_p99_s=t,
                      time_ci_low_s=t, time_ci_high_s=t, algbw_gbps=1.0, busbw_gbps=1.0, wrong=0, check_iters=0,
                      iterations=5, ops_per_sample=1, precision_met=True, stop_reason="fixed", wall_s=0.01,
                      samples_s=[t] * 3)
result = RunResult(benchmark="allreduce", backend="nccl", dtype="float32", redop="sum", timing="batched",
                   world_size=2, hosts={"h": 2}, link_class="intra-node", environment={}, options={},
                   command=["pybench"], started_at=sys.argv[2])
files = OutputFiles(json_path=sys.argv[1], csv_path=sys.argv[3] if len(sys.argv) > 3 else None)
files.claim(force=False)
files.journal_when_alone()
for k in range(10):
    result.records.append(record(1024 << k))
    files.write(result)
guard = files._state.own_guard
print(guard.proc.pid if guard is not None else 0, flush=True)
time.sleep(600)
"""


def _clean_env(tmp: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("OMPI_", "PMIX_", "PMI_", "SLURM_", "PYBENCH_", "TORCHELASTIC_"))}
    env.pop("RANK", None)
    env["TMPDIR"] = str(tmp)  # job folders go here, away from other runs'
    return env


def _start_writer(tmp_path: Path, out: Path, started_at: str = "2026-01-01T00:00:00+00:00", csv: Path | None = None):
    tmp = tmp_path / "tmp"
    tmp.mkdir(exist_ok=True)
    script = tmp_path / "writer.py"
    script.write_text(WRITER)
    p = subprocess.Popen([sys.executable, str(script), str(out), started_at, *([str(csv)] if csv else [])],
                         stdout=subprocess.PIPE, text=True, env=_clean_env(tmp))
    guard = int(p.stdout.readline())  # type: ignore[union-attr]
    return p, guard, tmp


def _kill(pid: int) -> None:
    try:
        os.kill(pid, signal.SIGKILL)
    except ProcessLookupError:
        pass


def _stop(p: subprocess.Popen) -> None:
    p.kill()
    p.wait()
    p.stdout.close()  # type: ignore[union-attr]


def _wait_gone(pid: int) -> None:
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline and Path(f"/proc/{pid}").exists() and \
            Path(f"/proc/{pid}/stat").read_text().split(") ")[1][0] != "Z":
        time.sleep(0.02)


def _csv_sizes(path: Path) -> list[int]:
    return [int(line.split(",")[4]) for line in path.read_text().splitlines()[1:]]


def test_a_process_run_alone_is_journaled_and_its_guard_rebuilds_the_file(tmp_path):
    out, csv = tmp_path / "r.json", tmp_path / "r.csv"
    p, guard, tmp = _start_writer(tmp_path, out, csv=csv)
    assert guard, "no guard for a process run alone"
    _stop(p)
    _wait_gone(guard)
    doc = json.loads(out.read_text())
    assert [r["size_bytes"] for r in doc["records"]] == [1024 << k for k in range(10)]
    assert "rank 0" in doc["cut_short"] and not doc["cut_short"].startswith(IN_PROGRESS)
    assert "pybench_journal_csv" not in doc  # the journal's own key stays out of the result
    assert _csv_sizes(csv) == [1024 << k for k in range(10)]  # the CSV is rebuilt with it, not left at 8 sizes
    assert sorted(os.listdir(tmp_path)) == ["r.csv", "r.json", "tmp", "writer.py"] and os.listdir(tmp) == []


def test_a_job_killed_whole_is_recovered_from_its_journal(tmp_path):
    out, csv = tmp_path / "r.json", tmp_path / "r.csv"
    p, guard, tmp = _start_writer(tmp_path, out, csv=csv)
    _kill(guard)  # the cgroup ends every process at once: the guard cannot rebuild anything
    _wait_gone(guard)
    _stop(p)
    doc = json.loads(out.read_text())
    assert len(doc["records"]) == 8 and doc["cut_short"].startswith(IN_PROGRESS)  # the last rewrite only
    rerun = run_pybench(["allreduce", "--sizes", "1K", "--json", str(out)], tmp_path, env=_clean_env(tmp))
    assert rerun.returncode == 2 and f"`pybench recover {out}`" in rerun.stderr.splitlines()[-1]
    done = run_pybench(["recover", str(out)], tmp_path, env=_clean_env(tmp))
    assert done.returncode == 0 and done.stderr == "", done.stderr
    assert "rebuilt with 10 size(s)" in done.stdout
    doc = json.loads(out.read_text())
    assert [r["size_bytes"] for r in doc["records"]] == [1024 << k for k in range(10)]
    assert doc["cut_short"] == REASON and doc["finished"] is False
    assert _csv_sizes(csv) == [1024 << k for k in range(10)]
    assert os.listdir(tmp) == []  # the dead job's folder is gone with its journal
    again = run_pybench(["recover", str(out)], tmp_path, env=_clean_env(tmp))
    assert again.returncode == 2 and again.stderr.count("\n") == 1 and "no journal of" in again.stderr


@pytest.mark.parametrize("case", ["live", "another run"])
def test_recover_leaves_a_live_run_and_another_runs_file_alone(tmp_path, case):
    out = tmp_path / "r.json"
    p, guard, tmp = _start_writer(tmp_path, out)
    try:
        if case == "another run":
            _kill(guard)
            _wait_gone(guard)
            _stop(p)
            doc = json.loads(out.read_text())
            doc["started_at"] = "2026-02-02T00:00:00+00:00"  # a later run (--force) wrote the name since
            out.write_text(json.dumps(doc))
        before = out.read_bytes()
        with pytest.raises(UsageError, match="still being written" if case == "live" else "holds another run"):
            recover_result(out, temp_dir=str(tmp))
        assert out.read_bytes() == before
    finally:
        if p.poll() is None:
            _stop(p)
        _wait_gone(guard)
