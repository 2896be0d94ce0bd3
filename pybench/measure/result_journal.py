"""The append-only journal of a run's results, in the job folder, for recovery.

Rank 0 appends one JSON line per size measured (after a first line holding the result's
metadata), so saving a size costs the same at the 65536th size as at the first. The result
file itself is rewritten only at growing intervals (:class:`pybench.measure.results.OutputFiles`);
when rank 0 dies between two rewrites, the pybench parent (or its guard, when the parent
died too) assembles the full document from the journal, marked cut short, and the job
folder, journal included, is then removed with everything else the job left.

Under pybench's own launcher the journal is in its job folder (``PYBENCH_JOB_DIR``); under a
user's launcher (mpirun, srun, torchrun) rank 0 makes a job folder of its own and a guard process
(:class:`pybench.measure.job.Guard`) that outlives it to rebuild the file. A process run alone has
none: the result file's rewrites are all there is.
"""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from pybench.io.files import null_non_finite

# A result file rewritten mid-run says so: its cut_short starts with this, and
# job.mark_cut_short replaces it with the reason when the run dies before its final write
# (here, below both: results and job read it).
IN_PROGRESS = "in progress"

JOB_DIR = "PYBENCH_JOB_DIR"  # the job folder (pybench.measure.job), set in every rank we start


def journal_path(result_path: Path, job_dir: str | os.PathLike | None = None) -> Path | None:
    """Where the journal of ``result_path`` lives in the job folder; None outside a job of ours."""
    folder = job_dir if job_dir is not None else os.environ.get(JOB_DIR)
    if not folder:
        return None
    key = hashlib.sha256(str(Path(result_path).absolute()).encode()).hexdigest()[:24]
    return Path(folder) / f"journal-{key}.jsonl"


class Journal:
    """Rank 0's append-only journal of one result file (see the module docstring)."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.fd: int | None = None
        self.records = 0

    def append(self, header: Callable[[], dict[str, Any]], records: Sequence[Any]) -> None:
        """Journal the records of ``records`` (SizeRecords) beyond those already journaled; ``header()``,
        the result's metadata, goes first, once. Costs what the new records cost, whatever came before."""
        lines = []
        if self.fd is None:
            # O_EXCL: never adopt a file someone else put there; O_APPEND: each line lands whole.
            self.fd = os.open(self.path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_APPEND
                              | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_CLOEXEC", 0), 0o600)
            lines.append(_line(header()))
        lines += [_line(records[i].to_dict()) for i in range(self.records, len(records))]
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
