"""Faults with real processes: a rank killed, a rank stalled, Ctrl-C. Every
process must be gone afterwards and every completed size kept in the file."""

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

pytestmark = pytest.mark.mpi

# 1 KiB completes at once; 512 MiB x 400 fixed iterations takes minutes, so the
# fault always lands in the middle of the second size.
SWEEP = ["allreduce", "--sizes", "1K,512M", "--iters", "400", "--backend", "mpi"]


def _processes_with(marker: str) -> list[int]:
    pids = []
    for d in Path("/proc").iterdir():
        if not d.name.isdigit():
            continue
        try:
            if marker in (d / "cmdline").read_bytes().decode(errors="replace"):
                pids.append(int(d.name))
        except OSError:
            continue
    return pids


def _rank_pid(marker: str, rank: int) -> int | None:
    for pid in _processes_with(marker):
        try:
            env = Path(f"/proc/{pid}/environ").read_bytes().split(b"\0")
        except OSError:
            continue
        if f"OMPI_COMM_WORLD_RANK={rank}".encode() in env:
            return pid
    return None


@pytest.fixture
def sweep(tmp_path, native):
    """Start the sweep in its own session; yield (proc, json path); kill anything left."""
    out = tmp_path / "faults.json"
    procs = []

    def start(*extra: str):
        p = subprocess.Popen([sys.executable, "-m", "pybench", *SWEEP, "--json", str(out), *extra], cwd=tmp_path,
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True)
        procs.append(p)
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:  # wait until the first size is on disk
            try:
                if json.loads(out.read_text())["records"]:
                    break
            except (OSError, ValueError, KeyError):
                pass
            time.sleep(0.1)
        else:
            pytest.fail("the sweep never completed its first size")
        time.sleep(0.5)  # now inside the 512 MiB size
        return p, out

    yield start
    for p in procs:
        try:
            os.killpg(p.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        p.communicate()
    for pid in _processes_with(str(out)):
        os.kill(pid, signal.SIGKILL)


def _finish(proc, out: Path, limit_s: float):
    t0 = time.monotonic()
    stdout, stderr = proc.communicate(timeout=limit_s + 30)
    elapsed = time.monotonic() - t0
    time.sleep(0.5)
    assert _processes_with(str(out)) == [], "a process outlived the run"
    doc = json.loads(out.read_text())
    assert doc["finished"] is False and doc["cut_short"]
    assert [r["size_bytes"] for r in doc["records"]] == [1024] and doc["records"][0]["wrong"] == 0
    return stdout, stderr, elapsed, doc


def test_a_killed_rank_ends_the_run_and_keeps_results(sweep):
    proc, out = sweep()
    victim = _rank_pid(str(out), 1)
    assert victim is not None
    os.kill(victim, signal.SIGKILL)
    _, stderr, elapsed, doc = _finish(proc, out, limit_s=30)
    assert proc.returncode != 0
    lines = [l for l in stderr.splitlines() if l.strip()]
    assert len(lines) == 1, stderr
    assert lines[0].startswith("pybench: error: rank 1 (") and "killed by signal 9" in lines[0]
    assert "rank 1" in doc["cut_short"]
    assert elapsed < 30


def test_a_stalled_rank_is_named_after_the_timeout(sweep):
    proc, out = sweep("--timeout", "3")
    victim = _rank_pid(str(out), 1)
    assert victim is not None
    os.kill(victim, signal.SIGSTOP)
    try:
        stdout, stderr, elapsed, doc = _finish(proc, out, limit_s=3)
    finally:
        try:
            os.kill(victim, signal.SIGCONT)
        except ProcessLookupError:
            pass
    assert proc.returncode != 0
    lines = [l for l in stderr.splitlines() if l.strip()]
    assert len(lines) == 1, stderr
    assert "rank 1 (" in lines[0] and f"pid {victim}) is stopped" in lines[0] and "no progress for 3" in lines[0]
    assert "is stopped" in doc["cut_short"]
    assert "# Run cut short:" in stdout


def test_ctrl_c_stops_every_rank_within_seconds(sweep):
    proc, out = sweep()
    os.killpg(proc.pid, signal.SIGINT)  # what a terminal does: the whole foreground group
    _, stderr, elapsed, doc = _finish(proc, out, limit_s=5)
    assert proc.returncode == 130
    assert elapsed < 5
    assert "interrupted" in stderr and doc["cut_short"] == "interrupted (SIGINT)"


# Open MPI 5's launcher sometimes fails before any rank runs ("The PMIx server's listener
# thread failed to start", seen here about once in 30 launches under load). The wrapper
# below stands in for that race, which cannot be provoked on demand: it prints the real
# banner and exits 213 the first FAIL times, then runs the real mpiexec.
_RACY_MPIEXEC = """#!/bin/sh
case "$1" in --version) exec "{real}" "$@";; esac
n=$(cat "{count}" 2>/dev/null || echo 0)
echo $((n + 1)) > "{count}"
if [ "$n" -lt {fail} ]; then
  echo "--------------------------------------------------------------------------" >&2
  echo "The PMIx server's listener thread failed to start. We cannot" >&2
  echo "continue." >&2
  echo "--------------------------------------------------------------------------" >&2
  exit 213
fi
exec "{real}" "$@"
"""


def _racy_launcher(tmp_path: Path, fail: int) -> tuple[dict, Path]:
    from pybench.measure.launch import find_launcher
    real = find_launcher().path
    count = tmp_path / "launches"
    script = tmp_path / "mpiexec"
    script.write_text(_RACY_MPIEXEC.format(real=real, count=count, fail=fail))
    script.chmod(0o755)
    return dict(os.environ, PYBENCH_MPIEXEC=str(script)), count


def test_a_launcher_that_fails_to_start_is_tried_again(tmp_path, native):
    env, count = _racy_launcher(tmp_path, fail=1)
    proc = subprocess.run([sys.executable, "-m", "pybench", "allreduce", "--sizes", "1K", "--backend", "mpi",
                           "--json", "r.json"], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert "launching again (2 of 3)" in proc.stderr and "Traceback" not in proc.stderr
    assert count.read_text().strip() == "2"
    assert json.loads((tmp_path / "r.json").read_text())["records"]


def test_a_launcher_that_never_starts_gives_up_in_one_line(tmp_path, native):
    env, count = _racy_launcher(tmp_path, fail=99)
    proc = subprocess.run([sys.executable, "-m", "pybench", "allreduce", "--sizes", "1K", "--backend", "mpi"],
                          cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 213 and count.read_text().strip() == "3"
    errors = [ln for ln in proc.stderr.splitlines() if ln.startswith("pybench: error:")]
    assert len(errors) == 1 and "mpiexec could not start" in errors[0] and "Traceback" not in proc.stderr
