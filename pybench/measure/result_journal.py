"""The append-only journal of a run's results, in the job folder, for recovery.

Rank 0 appends one JSON line per size measured (after a first line holding the result's
metadata), so saving a size costs the same at the 65536th size as at the first. The result
file itself is rewritten only at growing intervals (:class:`pybench.measure.results.OutputFiles`);
when rank 0 dies between two rewrites, the pybench parent (or its guard, when the parent
died too) streams the full document from the journal, marked cut short, and the job
folder, journal included, is then removed with everything else the job left. Rank 0's own
rewrites stream their records from the journal too, so no process holds every record.

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

import errno
import fcntl
import hashlib
import json
import os
import tempfile
from collections.abc import Callable, Iterable, Iterator, Sequence
from pathlib import Path
from typing import Any

from pybench.io.files import null_non_finite, write_atomic

# A result file rewritten mid-run says so: its cut_short starts with this, and
# job.mark_cut_short replaces it with the reason when the run dies before its final write
# (here, below both: results and job read it).
IN_PROGRESS = "in progress"

JOB_DIR = "PYBENCH_JOB_DIR"  # the job folder (pybench.measure.job), set in every rank we start
# The journal's first line holds the result's metadata and, under this key (never written to the result),
# the CSV file the run writes with it: a rebuild from the journal writes both.
CSV_KEY = "pybench_journal_csv"
# ... and under this one the -J file (nccl-tests' layout) it writes, with what that file's head needs beyond the
# result (:meth:`pybench.measure.nccl_tests_json.NcclTestsJsonWriter.journal_entry`): rebuilt with them.
NCCL_TESTS_KEY = "pybench_journal_nccl_tests"


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
    """Rank 0's append-only journal of one result file (see the module docstring): a header line (the
    result's metadata when it started), then one line per record.

    It is also where a run's records are kept between rewrites of its files, which stream them
    back (:meth:`record_lines`), so rank 0 holds no record in memory. ``path`` None: a nameless
    spool in the temporary folder, for a run nobody could recover anyway (no job folder): the
    kernel frees it with the process, however the process ends.
    """

    def __init__(self, path: Path | None) -> None:
        self.path = path
        self.fd: int | None = None
        self.records = 0

    def __del__(self) -> None:
        if self.path is None and self.fd is not None:  # a spool nobody removed: freed with its descriptor
            os.close(self.fd)
            self.fd = None

    def _open(self) -> int:
        if self.path is None:
            return _nameless_file()
        # O_EXCL: never adopt a file someone else put there; O_APPEND: each line lands whole.
        fd = os.open(self.path, os.O_RDWR | os.O_CREAT | os.O_EXCL | os.O_APPEND
                     | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_CLOEXEC", 0), 0o600)
        try:  # held until this process exits, however it exits: the mark of a live run
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            pass  # no flock on this file system: a live run's journal then looks like a dead one's
        return fd

    def append(self, header: Callable[[], dict[str, Any]], records: Sequence[str]) -> None:
        """Journal ``records`` (new records, each encoded as one line of JSON); ``header()``, the
        result's metadata, goes first, once. Costs what the new records cost, whatever came before."""
        lines = []
        if self.fd is None:
            self.fd = self._open()
            lines.append(_line(header()))
        lines += [r + "\n" for r in records]
        if lines:
            _write_all(self.fd, "".join(lines).encode())
        self.records += len(records)

    def reset(self) -> None:
        """Forget every record (the writer was handed another result than the one journaled)."""
        if self.fd is not None:
            os.ftruncate(self.fd, 0)
            os.lseek(self.fd, 0, os.SEEK_SET)
            if self.path is not None:
                os.close(self.fd)
                os.unlink(self.path)
            self.fd = None
        self.records = 0

    def record_lines(self) -> Iterator[bytes]:
        """The records journaled so far, one encoded line each, read back in chunks."""
        if self.fd is None:
            return iter(())
        return _records(_lines(self.fd), validate=False)

    def remove(self) -> None:
        """The result file is complete: the journal is no longer needed."""
        if self.fd is not None:
            os.close(self.fd)
        self.fd = None
        if self.path is not None:
            try:
                os.unlink(self.path)
            except OSError:
                pass


def _nameless_file() -> int:
    """A file with no name in the temporary folder (O_TMPFILE; else one unlinked at once)."""
    folder = tempfile.gettempdir()
    flags = os.O_RDWR | getattr(os, "O_CLOEXEC", 0)
    if hasattr(os, "O_TMPFILE"):
        try:
            return os.open(folder, flags | os.O_TMPFILE, 0o600)
        except OSError as exc:
            if exc.errno not in (errno.EOPNOTSUPP, errno.EISDIR, errno.EINVAL):
                raise
    fd, name = tempfile.mkstemp(prefix=JOB_PREFIX, dir=folder)
    os.unlink(name)
    return fd


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view):]


def _line(doc: dict[str, Any]) -> str:
    try:
        return json.dumps(doc, allow_nan=False, separators=(",", ":")) + "\n"
    except ValueError:  # a nan or inf: null, as in the result file
        return json.dumps(null_non_finite(doc), allow_nan=False, separators=(",", ":")) + "\n"


_CHUNK_BYTES = 256 << 10


def _lines(fd: int) -> Iterator[bytes]:
    """Every whole line of the file ``fd`` (without its newline), read with pread in chunks, so that
    neither the file's offset nor its size matter; a last line with no newline is one unfinished."""
    offset, rest = 0, b""
    while True:
        chunk = os.pread(fd, _CHUNK_BYTES, offset)
        if not chunk:
            return
        offset += len(chunk)
        parts = (rest + chunk).split(b"\n")
        rest = parts.pop()
        yield from parts


def _records(lines: Iterator[bytes], validate: bool) -> Iterator[bytes]:
    next(lines, None)  # the header
    for raw in lines:
        if validate:
            try:
                record = json.loads(raw)
            except ValueError:
                return  # a line rank 0 did not finish: nothing after it is whole
            if not isinstance(record, dict):
                continue
        yield raw


def read_header(path: Path) -> dict[str, Any] | None:
    """The result's metadata a journal starts with, or None when there is no journal or not even its
    first line is whole."""
    try:
        with open(path, "rb") as f:
            first = f.readline(MAX_HEADER_BYTES)
    except OSError:
        return None
    if not first.endswith(b"\n"):
        return None
    try:
        header = json.loads(first)
    except ValueError:
        return None
    if not isinstance(header, dict):
        return None
    header.pop("records", None)
    return header


# The header holds the run's metadata (environment, options, command): kilobytes, not more.
MAX_HEADER_BYTES = 16 << 20


def journaled_records(path: Path) -> Iterator[bytes]:
    """The record lines of the journal at ``path`` that are whole JSON objects, streamed."""
    fd = os.open(path, os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_CLOEXEC", 0))
    try:
        yield from _records(_lines(fd), validate=True)
    finally:
        os.close(fd)


def document_chunks(head: dict[str, Any], record_lines: Iterable[bytes], counted: list[int] | None = None
                    ) -> Iterator[bytes]:
    """The result document, streamed: ``head`` (the metadata) indented, then the records, one per line.

    json.dumps uses its C encoder only without ``indent``, so the records, already encoded one per
    line, are joined as they are. ``counted``: a one-item list that ends holding the count of records.
    """
    text = json.dumps(null_non_finite({k: v for k, v in head.items() if k not in ("records", CSV_KEY, NCCL_TESTS_KEY)}),
                      indent=1,
                      allow_nan=False)
    yield (text[:-2] + ',\n "records": [').encode()
    batch: list[bytes] = []
    size = n = 0
    for line in record_lines:
        batch.append((b"\n  " if n == 0 else b",\n  ") + line)
        n += 1
        size += len(line)
        if size >= _CHUNK_BYTES:
            yield b"".join(batch)
            batch, size = [], 0
    if batch:
        yield b"".join(batch)
    if counted is not None:
        counted[:] = [n]
    yield b"\n ]\n}\n" if n else b"]\n}\n"


def write_from_journal(path: Path, head: dict[str, Any], journal: Path, counted: list[int] | None = None) -> None:
    """Write the result file ``path`` from a dead run's ``journal`` (``head``: its first line, cut short as the
    caller says), and the CSV and -J files the run wrote with it (:data:`CSV_KEY`, :data:`NCCL_TESTS_KEY`), so that
    none loses a size."""
    from pybench.measure.nccl_tests_document import rewrite
    from pybench.measure.result_csv import csv_chunks

    write_atomic(path, document_chunks(head, journaled_records(journal), counted))
    if head.get(CSV_KEY):
        write_atomic(Path(head[CSV_KEY]), csv_chunks(head, map(json.loads, journaled_records(journal))))
    if isinstance(head.get(NCCL_TESTS_KEY), dict):
        rewrite(head[NCCL_TESTS_KEY], {k: v for k, v in head.items() if k not in (CSV_KEY, NCCL_TESTS_KEY)},
                map(json.loads, journaled_records(journal)))
