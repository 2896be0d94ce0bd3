"""A torch.distributed rank killed mid-run under the user's own mpirun: the survivor says so in
one line (never gloo's traceback), marks the result cut short, and exits 3."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import start_ranks


def _rank_pid(marker: str, rank: int) -> int | None:
    for d in Path("/proc").iterdir():
        try:
            if d.name.isdigit() and marker in (d / "cmdline").read_bytes().decode(errors="replace") \
                    and f"OMPI_COMM_WORLD_RANK={rank}".encode() in (d / "environ").read_bytes().split(b"\0"):
                return int(d.name)
        except OSError:
            continue
    return None


def _measured(out: Path) -> bool:
    try:
        return bool(json.loads(out.read_text()).get("records"))
    except (OSError, ValueError):
        return False


def test_the_survivor_of_a_killed_torch_rank_says_one_line(tmp_path, native):
    pytest.importorskip("torch.distributed")
    from pybench.measure.launch import find_launcher
    out = tmp_path / "torch.json"
    launcher = find_launcher()
    env = {k: v for k, v in launcher.environment().items() if k not in ("PYBENCH_STATUS_FILE", "PYBENCH_JOB_DIR")}
    argv = [sys.executable, "-m", "pybench", "allreduce", "--backend", "torch", "--sizes", "1K,2K,4K,128M",
            "--iters", "300", "--json", str(out)]
    # Both ranks are in the sweep once the file holds a measured size (files are replaced whole, never seen
    # half-written); a busy machine only makes that wait longer.
    proc = start_ranks(launcher.command(2, argv), lambda: _measured(out), 180, cwd=tmp_path, env=env,
                       stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True)
    try:
        assert _measured(out), f"no size measured in time: {proc.poll()=}"
        victim = _rank_pid(str(out), 1)
        assert victim is not None, "rank 1 never started"
        os.kill(victim, signal.SIGKILL)
        _, stderr = proc.communicate(timeout=60)
    finally:
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
    assert "Traceback" not in stderr and "RuntimeError" not in stderr, stderr
    ours = [ln for ln in stderr.splitlines() if ln.startswith("pybench:")]
    assert len(ours) == 1 and ours[0].startswith("pybench: error: rank 0 (") and "another rank is gone" in ours[0], \
        stderr
    doc = json.loads(out.read_text())
    assert doc["finished"] is False and "another rank is gone" in doc["cut_short"]
