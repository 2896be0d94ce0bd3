"""The append-only journal of a run's results, in the job folder, for recovery.

Rank 0 appends one JSON line per size measured (after a first line holding the result's
metadata), so saving a size costs the same at the 65536th size as at the first. The result
file itself is rewritten only at growing intervals (:class:`pybench.measure.results.OutputFiles`);
when rank 0 dies between two rewrites, the pybench parent (or its guard, when the parent
died too) assembles the full document from the journal, marked cut short, and the job
folder, journal included, is then removed with everything else the job left.

Under pybench's own launcher the journal is in its job folder (``PYBENCH_JOB_DIR``); under a
user's launcher (mpirun, srun, torchrun), and in a process run alone (one-process NCCL), rank 0
makes a job folder of its own and a guard process (:class:`pybench.measure.job.Guard`) that
outlives it to rebuild the file.

When everything dies at once (srun's cgroup or the OOM killer ending the whole job, guard
included), nothing is left running to rebuild the file, but the journal stays in its job folder:
rank 0 holds an flock on it while it runs, so :func:`orphaned_journals` can tell a dead run's
journal from a live one, and ``pybench recover FILE`` turns it into the file.
"""

from __future__ import annotations

import fcntl
import hashlib
import json
import os
import tempfile
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from pybench.io.files import null_non_finite

# A result file rewritten mid-run says so: its cut_short starts with this, and
# job.mark_cut_short replaces it with the reason when the run dies before its final write
# (here, below both: results and job read it).
IN_PROGRESS = "in progress"

JOB_DIR = "PYBENCH_JOB_DIR"  # the job folder (pybench.measure.job), set in every rank we start


JOB_PREFIX = "pybench-job-"  # job folders are tempfile.mkdtemp(prefix=JOB_PREFIX) (job.JobFolder)


def _journal_name(result_path: Path) -> str:
    key = hashlib.sha256(str(Path(result_path).absolute()).encode()).hexdigest()[:24]
    return f"journal-{key}.jsonl"


def journal_path(result_path: Path, job_dir: str | os.PathLike | None = None) -> Path | None:
    """Where the journal of ``result_path`` lives in the job folder; None outside a job of ours."""
    folder = job_dir if job_dir is not None else os.environ.get(JOB_DIR)
    if not folder:
        return None
    return Path(folder) / _journal_name(result_path)


def held_by_a_live_run(journal: Path) -> bool:
    """Whether the rank 0 that writes ``journal`` still runs: it holds an flock on it until it exits."""
    try:
        fd = os.open(journal, os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_CLOEXEC", 0))
    except OSError:
        return False
    try:
        fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
    except BlockingIOError:
        return True
    except OSError:
        return False  # a file system without flock: nothing to go by
    finally:
        os.close(fd)
    return False


def _mtime(path: Path) -> float:
    try:
        return path.stat().st_mtime
    except OSError:  # removed since it was listed
        return 0.0


def orphaned_journals(result_path: Path, temp_dir: str | None = None) -> tuple[list[Path], list[Path]]:
    """Journals of ``result_path`` in the job folders under ``temp_dir`` (the temporary folder jobs are
    made in), split into those of dead runs (newest first) and those a live run still writes."""
    folder = Path(temp_dir or tempfile.gettempdir())
    found = sorted(folder.glob(f"{JOB_PREFIX}*/{_journal_name(result_path)}"), key=_mtime, reverse=True)
    live = [j for j in found if held_by_a_live_run(j)]
    return [j for j in found if j not in live], live


class Journal:
    """Rank 0's append-only journal of one result file (see the module docstring)."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.fd: int | None = None
        self.records = 0

    def append(self, header: Callable[[], dict[str, Any]], records: Sequence[str]) -> None:
        """Journal the records of ``records`` (each a record encoded as one line of JSON) beyond those
        already journaled; ``header()``, the result's metadata, goes first, once. Costs what the new
        records cost, whatever came before."""
        lines = []
        if self.fd is None:
            # O_EXCL: never adopt a file someone else put there; O_APPEND: each line lands whole.
            self.fd = os.open(self.path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_APPEND
                              | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_CLOEXEC", 0), 0o600)
            try:  # held until this process exits, however it exits: the mark of a live run
                fcntl.flock(self.fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except OSError:
                pass  # no flock on this file system: a live run's journal then looks like a dead one's
            lines.append(_line(header()))
        lines += [records[i] + "\n" for i in range(self.records, len(records))]
        if lines:
            os.write(self.fd, "".join(lines).encode())
        self.records = len(records)

    def remove(self) -> None:
        """The result file is complete: the journal is no longer needed."""
        if self.fd is not None:
            os.close(self.fd)
            self.fd = None
        try:
            os.unlink(self.path)
        except OSError:
            pass


def _line(doc: dict[str, Any]) -> str:
    try:
        return json.dumps(doc, allow_nan=False, separators=(",", ":")) + "\n"
    except ValueError:  # a nan or inf: null, as in the result file
        return json.dumps(null_non_finite(doc), allow_nan=False, separators=(",", ":")) + "\n"


def assemble(path: Path) -> dict[str, Any] | None:
    """The result document a journal holds (metadata and every whole record line), or None
    when there is no journal or not even its first line is whole."""
    try:
        with open(path, "rb") as f:
            lines = f.read().split(b"\n")
    except OSError:
        return None
    docs = []
    for raw in lines[:-1]:  # the part after the last newline is a line rank 0 did not finish
        try:
            docs.append(json.loads(raw))
        except ValueError:
            break
    if not docs or not isinstance(docs[0], dict):
        return None
    doc = dict(docs[0])
    doc["records"] = [r for r in docs[1:] if isinstance(r, dict)]
    return doc
