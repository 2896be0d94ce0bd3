"""Rebuild a result file from the journal of a run that died whole.

The guard rebuilds the file when rank 0 dies alone. When the whole job dies at once (srun's
cgroup, the OOM killer or a node reboot ending every process, guard included), no process is
left to do it, and the file holds only its last rewrite ("in progress"). The journal is still in
its job folder in the temporary folder (unless that was wiped with the job): this finds it by
the result's path, checks that no live run holds it, and writes the file from it, marked cut short.
"""

from __future__ import annotations

import os
import tempfile
from dataclasses import dataclass
from pathlib import Path

from pybench.errors import EnvironmentFault, FileFormatError, PyBenchError, UsageError
from pybench.io.files import read_json
from pybench.measure.job import JobFolder
from pybench.measure.result_journal import (
    JOB_PREFIX,
    orphaned_journals,
    read_header,
    write_from_journal,
)

REASON = "the run died before it finished, its guard too (the file was rebuilt from its journal by pybench recover)"


@dataclass(frozen=True)
class Recovered:
    path: Path
    journal: Path
    sizes: int  # records in the rebuilt file
    already_complete: bool = False


def recover_result(path: str | os.PathLike, temp_dir: str | None = None) -> Recovered:
    """Write ``path`` from the newest journal a dead run left for it; a one-line UsageError when there is none,
    when a live run still writes it, or when the file now holds another run."""
    path = Path(path)
    where = Path(temp_dir or tempfile.gettempdir()) / f"{JOB_PREFIX}*"
    dead, live = orphaned_journals(path, temp_dir)
    if not dead:
        if live:
            raise UsageError(f"{path} is still being written by a running pybench (its journal {live[0]} is "
                             "locked); wait for it to finish or stop it, then recover")
        raise UsageError(f"no journal of {path} in {where}: nothing to recover (a run removes its journal once the "
                         "file is complete; run this where rank 0 ran, with the same TMPDIR)")
    journal = dead[0]
    doc = read_header(journal)
    if doc is None:
        raise FileFormatError(f"{journal}: not even its first line is whole; nothing to recover")
    current = _current(path)
    if current is not None and current.get("started_at") != doc.get("started_at"):
        raise UsageError(f"{path} holds another run (started {current.get('started_at')}) than the journal {journal} "
                         f"(started {doc.get('started_at')}); move {path} away to recover into its place")
    if current is not None and current.get("finished"):
        _remove(journal)
        return Recovered(path, journal, len(current.get("records") or []), already_complete=True)
    doc["cut_short"] = REASON
    counted = [0]
    try:  # streamed from the journal: the records are never all in memory
        write_from_journal(path, doc, journal, counted)
    except OSError as exc:
        raise EnvironmentFault(f"cannot write {path}: {exc.strerror or exc}; the journal {journal} is kept") from None
    _remove(journal)
    return Recovered(path, journal, counted[0])


def _current(path: Path) -> dict | None:
    """The file as it is now, or None where there is none or nothing readable (a rewrite never finished)."""
    if not path.exists():
        return None
    try:
        doc = read_json(path)
    except PyBenchError:
        return None
    return doc if isinstance(doc, dict) else None


def _remove(journal: Path) -> None:
    """The journal, and its job folder once it holds no other journal and no rank of it still runs."""
    try:
        journal.unlink()
    except OSError:
        pass
    job = JobFolder(str(journal.parent))
    if any(journal.parent.glob("journal-*")) or any(_alive(pid) for pid in job.rank_pids()):
        return
    job.remove()


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except OSError:
        return True  # another user's process: alive
    return True
