"""Under the user's own mpirun no pybench parent outlives rank 0, so rank 0 journals each size in a
job folder of its own, watched by a guard process: when rank 0 is killed, the guard rebuilds the
result file from the journal, marks it cut short, and removes the folder."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from conftest import start_ranks


def _rank0_pid(marker: str) -> int | None:
    for d in Path("/proc").iterdir():
        try:
            if d.name.isdigit() and marker in (d / "cmdline").read_bytes().decode(errors="replace") \
                    and b"OMPI_COMM_WORLD_RANK=0" in (d / "environ").read_bytes().split(b"\0"):
                return int(d.name)
        except OSError:
            continue
    return None


def test_rank0_killed_under_the_users_mpirun_keeps_every_size_measured(tmp_path, native):
    from pybench.measure.launch import find_launcher
    from pybench.measure.result_journal import journal_path
    out = tmp_path / "user.json"
    name = journal_path(out, "/")
    assert name is not None
    name = name.name  # journal-<hash of the result's path>.jsonl, in whichever job folder
    launcher = find_launcher()
    # Three small sizes, then one that takes seconds: the file is rewritten at 1 and 2 sizes (then every
    # 10 s), so the third size is only in the journal when rank 0 dies inside the fourth.
    argv = [sys.executable, "-m", "pybench", "allreduce", "--sizes", "1K,2K,4K,512M", "--iters", "400",
            "--backend", "mpi", "--json", str(out)]
    def journaled() -> Path | None:
        for journal in Path(tempfile.gettempdir()).glob(f"pybench-job-*/{name}"):
            try:
                if journal.read_text().count("\n") >= 4:  # the header and 3 sizes
                    return journal.parent
            except OSError:
                pass
        return None

    proc = start_ranks(launcher.command(2, argv), lambda: journaled() is not None, 90, cwd=tmp_path,
                       env=launcher.environment(), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                       start_new_session=True)
    try:
        folder = journaled()
        assert folder is not None, "rank 0 never journaled its third size"
        victim = _rank0_pid(str(out))
        assert victim is not None
        os.kill(victim, signal.SIGKILL)
        proc.communicate(timeout=60)
    finally:
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
    deadline = time.monotonic() + 15  # the guard rebuilds the file once rank 0's pipe closes
    doc: dict = {}
    while time.monotonic() < deadline:
        doc = json.loads(out.read_text())
        if doc.get("cut_short", "").startswith(f"rank 0 (pid {victim}) died"):
            break
        time.sleep(0.1)
    assert [r["size_bytes"] for r in doc["records"]] == [1024, 2048, 4096], doc.get("cut_short")
    assert doc["finished"] is False and doc["cut_short"].startswith(f"rank 0 (pid {victim}) died")
    assert not folder.exists(), "the guard left rank 0's job folder behind"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["user.json"]

