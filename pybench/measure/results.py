"""Typed results and their files: versioned JSON and CSV, each size journaled as it is
measured and the files rewritten whole and atomically at growing intervals.

A reader never sees half a file (:func:`pybench.io.files.write_atomic`), and an interrupted
run keeps every size already measured (in the file, or in the journal the parent turns
into the file: :mod:`pybench.measure.result_journal`).
"""

from __future__ import annotations

import csv
import io
import json
import math
import os
import time
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from pybench.errors import EnvironmentFault, FileFormatError, UsageError
from pybench.io.files import null_non_finite, read_json, refuse_existing, refuse_non_regular, write_atomic
from pybench.io.formats import RESULT, check_document, stamp
from pybench.measure.result_journal import IN_PROGRESS, Journal, journal_path, orphaned_journals


@dataclass(frozen=True)
class SizeRecord:
    """Everything measured at one message size. Times are seconds per operation."""

    size_bytes: int
    count: int
    dtype: str
    redop: str
    root: int
    time_s: float  # median over samples of the slowest rank's time
    time_mean_s: float
    time_min_s: float
    time_max_s: float
    time_p5_s: float
    time_p95_s: float
    time_p99_s: float
    time_ci_low_s: float
    time_ci_high_s: float
    algbw_gbps: float
    busbw_gbps: float
    wrong: int
    check_iters: int
    iterations: int
    ops_per_sample: int
    precision_met: bool
    stop_reason: str
    wall_s: float
    samples_s: list[float] = field(repr=False)
    # Share of rank 0's buffers the kernel really backed with huge pages (None: not read, where no buffer
    # reaches one huge page, or not known).
    huge_page_fraction: float | None = None

    @property
    def ci_rel(self) -> float:
        return max(self.time_s - self.time_ci_low_s, self.time_ci_high_s - self.time_s) / self.time_s

    def to_dict(self) -> dict[str, Any]:
        # Shallow (dataclasses.asdict deep-copies every float): saving a size must stay cheap.
        d = {name: getattr(self, name) for name in self.__dataclass_fields__}
        d["samples_s"] = list(self.samples_s)
        return d

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> SizeRecord:
        """Build from a JSON record, checking every field's type: files can be hostile."""
        if not isinstance(d, dict):
            raise FileFormatError(f"a size record is {type(d).__name__}, not an object")
        values: dict[str, Any] = {}
        for name, f in cls.__dataclass_fields__.items():
            optional = str(f.type).endswith("| None")
            if name not in d:
                if optional:
                    continue  # written by an older pybench
                raise FileFormatError(f"a size record has no {name!r}")
            if optional and d[name] is None:
                values[name] = None
                continue
            values[name] = _checked(name, d[name], str(f.type).replace(" | None", ""))
        return cls(**values)


@dataclass
class RunResult:
    """One run of one benchmark (one collective or p2p test over a list of sizes).

    Mutable on purpose: records are appended as sizes complete and the file is
    rewritten each time.
    """

    benchmark: str  # collective name, or p2p_latency / p2p_bw / p2p_bibw
    backend: str
    dtype: str
    redop: str
    timing: str
    world_size: int
    hosts: dict[str, int]
    link_class: str
    environment: dict[str, Any]
    options: dict[str, Any]
    command: list[str]
    started_at: str
    records: list[SizeRecord] = field(default_factory=list)
    finished: bool = False
    cut_short: str | None = None

    @property
    def collective(self) -> str:
        return self.benchmark

    def peak_busbw(self) -> SizeRecord | None:
        return max(self.records, key=lambda r: r.busbw_gbps, default=None)

    def total_wrong(self) -> int:
        return sum(r.wrong for r in self.records)

    def to_dict(self) -> dict[str, Any]:
        return stamp(RESULT, {
            "benchmark": self.benchmark, "collective": self.benchmark, "backend": self.backend,
            "dtype": self.dtype, "redop": self.redop, "timing": self.timing,
            "world_size": self.world_size, "hosts": self.hosts, "link_class": self.link_class,
            "environment": self.environment, "options": self.options, "command": self.command,
            "started_at": self.started_at, "finished": self.finished, "cut_short": self.cut_short,
            "records": [r.to_dict() for r in self.records],
        })

    @classmethod
    def from_dict(cls, d: dict[str, Any], source: str = "result") -> RunResult:
        d = check_document(d, RESULT, source)
        try:
            return cls(benchmark=d["benchmark"], backend=d["backend"], dtype=d["dtype"], redop=d["redop"],
                       timing=d["timing"], world_size=d["world_size"], hosts=d["hosts"], link_class=d["link_class"],
                       environment=d["environment"], options=d["options"], command=d["command"],
                       started_at=d["started_at"], records=[SizeRecord.from_dict(r) for r in _list(d["records"])],
                       finished=d["finished"], cut_short=d["cut_short"])
        except (KeyError, TypeError, AttributeError) as exc:
            raise FileFormatError(f"pybench result is missing or has a malformed field: {exc}") from None


def _list(v: Any) -> list:
    if not isinstance(v, list):
        raise FileFormatError(f"'records' must be a list, got {type(v).__name__}")
    return v


def load_result(path: str | os.PathLike) -> RunResult:
    """Read a result JSON file written by pybench."""
    doc = read_json(path)
    try:
        return RunResult.from_dict(doc, str(path))
    except FileFormatError as exc:
        message = str(exc)
        raise FileFormatError(message if message.startswith(str(path)) else f"{path}: {message}") from None


def _checked(name: str, value: Any, type_name: str) -> Any:
    ok = {
        "int": lambda v: isinstance(v, int) and not isinstance(v, bool),
        "float": lambda v: isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v),
        "str": lambda v: isinstance(v, str),
        "bool": lambda v: isinstance(v, bool),
        "list[float]": lambda v: isinstance(v, list) and all(
            isinstance(x, (int, float)) and not isinstance(x, bool) and math.isfinite(x) for x in v),
    }[type_name]
    if not ok(value):
        raise FileFormatError(f"size record field {name!r} must be a finite {type_name}, got {str(value)[:40]!r}")
    return value


def result_json(result: RunResult, record_lines: Sequence[str] | None = None) -> str:
    """The result document: metadata indented, then one record per line.

    json.dumps uses its C encoder only without ``indent``; indenting the records too takes the
    pure-Python one, about 20 times slower on a 65536-size result. A figure that could not be
    measured (nan) is null. ``record_lines``: the records already encoded (:func:`record_json`, one
    per record, in order), so that a rewrite mid-run does not encode every size again.
    """
    doc = replace(result, records=[]).to_dict()
    doc.pop("records")
    head = json.dumps(null_non_finite(doc), indent=1, allow_nan=False)
    lines = record_lines if record_lines is not None else [record_json(r) for r in result.records]
    body = "[\n  " + ",\n  ".join(lines) + "\n ]" if lines else "[]"
    return head[:-2] + f',\n "records": {body}\n}}\n'


def record_json(record: SizeRecord) -> str:
    """One record as one line of JSON (no newline inside), as the result file and the journal hold it."""
    return _record_json(record.to_dict())


def _record_json(record: dict[str, Any]) -> str:
    try:
        return json.dumps(record, allow_nan=False)
    except ValueError:  # a nan or inf somewhere: written as null (rare, so walked only then)
        return json.dumps(null_non_finite(record), allow_nan=False)


CSV_COLUMNS = ["size_bytes", "count", "dtype", "redop", "root", "time_s", "time_p5_s", "time_p95_s", "time_p99_s",
               "time_min_s", "time_max_s", "time_ci_low_s", "time_ci_high_s", "algbw_gbps", "busbw_gbps", "wrong",
               "iterations", "ops_per_sample", "precision_met", "stop_reason"]


def result_csv(result: RunResult) -> str:
    buf = io.StringIO()
    w = csv.writer(buf, lineterminator="\n")
    w.writerow(["benchmark", "backend", "world_size", "timing"] + CSV_COLUMNS)
    for r in result.records:
        d = r.to_dict()
        w.writerow([result.benchmark, result.backend, result.world_size, result.timing] + [d[c] for c in CSV_COLUMNS])
    return buf.getvalue()


# Mid-run rewrites: whenever the count of sizes doubles, and otherwise after this many seconds
# unless the last rewrite took more than 1/REWRITE_SHARE of that (then that many times its
# duration): the doubling rewrites cost about twice one write of the file, the timed ones at most
# a 1/REWRITE_SHARE share of the run, so the time per size stays flat. The journal, not these
# rewrites, is what keeps every size when the run dies.
REWRITE_INTERVAL_S = 10.0
REWRITE_SHARE = 50


@dataclass
class _WriteState:
    exclusive: bool = False  # claimed without --force: the first write must create each file
    written: set[Path] = field(default_factory=set)
    journal: Journal | None = None
    own_job: Any = None  # JobFolder and Guard of a rank 0 no pybench launcher watches (see _open_journal)
    own_guard: Any = None
    journal_alone: bool = False  # a process of its own journals too (the CLI's one-process run; see _open_journal)
    record_lines: list[str] = field(default_factory=list)  # each record encoded once (record_json)
    last_write_at: float = 0.0
    last_write_cost_s: float = 0.0
    rewritten_at_count: int = -1


@dataclass(frozen=True)
class OutputFiles:
    """Where a run writes its JSON and CSV; checked before measuring starts.

    Each size goes to the run's journal (:mod:`pybench.measure.result_journal`) at a constant
    cost; the files themselves are written when the run starts, at growing intervals, and when
    it ends, each time whole and atomically, and never before they are valid: a result file
    exists only as a complete document.
    """

    json_path: Path | None = None
    csv_path: Path | None = None
    _state: _WriteState = field(default_factory=_WriteState, compare=False, repr=False)

    def paths(self) -> list[Path]:
        return [p for p in (self.json_path, self.csv_path) if p is not None]

    def check_writable(self, force: bool) -> None:
        """Refuse to clobber existing files without --force, and fail early on unwritable folders."""
        for p in self.paths():
            if not force and p == self.json_path and Path(p).exists() and orphaned_journals(Path(p))[0]:
                raise UsageError(f"{p} already exists, and a run of it that was killed left a journal: "
                                 f"`pybench recover {p}` rebuilds it with every size measured; or pass --force to "
                                 "overwrite it")
            refuse_existing(p, force)
            refuse_non_regular(p)  # a device, FIFO or link: refused before any rank starts, --force or not

    def claim(self, force: bool) -> list[Path]:
        """Check the files can be written (:meth:`check_writable`) and remember ``force``.

        Nothing is created here: the first write creates each file exclusively (unless
        ``force``), complete, so that of two runs given the same file the second fails in one
        line, and no empty file is ever left. Returns the files created (none), for :meth:`release`.
        """
        self.check_writable(force)
        self._state.exclusive = not force
        return []

    def journal_when_alone(self) -> None:
        """Journal this run, with a guard, even in a process that no launcher started (one-process
        NCCL): only the CLI's runs ask, so that a library or test writing results starts no guard."""
        self._state.journal_alone = True

    @staticmethod
    def release(claimed: list[Path]) -> None:
        """Remove files :meth:`claim` created that are still empty."""
        for p in claimed:
            try:
                if p.stat().st_size == 0:
                    p.unlink()
            except OSError:
                pass

    def write(self, result: RunResult) -> None:
        """Save ``result``: its new sizes to the journal, and the files when due (see the class
        docstring); a failing write (a full disk, any OS error) is one EnvironmentFault line."""
        st = self._state
        final = result.finished or result.cut_short is not None
        lines = st.record_lines
        if len(lines) > len(result.records):  # not the result encoded so far: encode it afresh
            lines.clear()
        lines += [record_json(r) for r in result.records[len(lines):]]
        try:
            if self.json_path is not None and not final:
                if st.journal is None:
                    st.journal = self._open_journal()
                if st.journal is not None:
                    st.journal.append(lambda: replace(result, records=[]).to_dict(), lines)
        except OSError as exc:
            raise EnvironmentFault(f"cannot write the run's journal {exc.filename or ''}: "
                                   f"{exc.strerror or exc}") from None
        if not (final or self._rewrite_due(len(result.records))):
            return
        started = time.monotonic()
        snapshot = result if final else replace(
            result, cut_short=f"{IN_PROGRESS}: {len(result.records)} size(s) measured when this was written")
        for path, text in ((self.json_path, lambda r: result_json(r, lines)), (self.csv_path, result_csv)):
            if path is None:
                continue
            try:
                write_atomic(path, text(snapshot), replace=not st.exclusive or path in st.written)
            except FileExistsError:
                raise UsageError(f"{path} already exists (another run writing it?); pass --force to overwrite "
                                 "it or choose another file name") from None
            except OSError as exc:
                raise EnvironmentFault(f"cannot write {path}: {exc.strerror or exc}") from None
            st.written.add(path)
        st.last_write_at = time.monotonic()
        st.last_write_cost_s = st.last_write_at - started
        st.rewritten_at_count = len(result.records)
        if final and st.journal is not None:
            st.journal.remove()
            st.journal = None
        if final:
            self._end_own_job()

    def _open_journal(self) -> Journal | None:
        """The journal of this run: in the job folder of pybench's launcher when it started us (it
        rebuilds the file if we die); as rank 0 of the user's launcher (mpirun, srun, torchrun), or
        alone when asked (:meth:`journal_when_alone`), in a job folder of our own with a guard process
        that does the same when this process dies; otherwise none (the file's rewrites are all there is)."""
        assert self.json_path is not None
        where = journal_path(self.json_path)
        if where is None:
            from pybench.measure.launch import under_launcher
            if not (under_launcher() or self._state.journal_alone):
                return None
            from pybench.measure.job import Guard, JobFolder
            st = self._state
            st.own_job = JobFolder()
            st.own_guard = Guard(st.own_job, [self.json_path], rank0=True)
            where = journal_path(self.json_path, st.own_job.path)
            assert where is not None
        return Journal(where)

    def _end_own_job(self) -> None:
        st = self._state
        if st.own_guard is not None:
            st.own_guard.stop(clean=True)
            st.own_guard = None
        if st.own_job is not None:
            st.own_job.remove()
            st.own_job = None

    def _rewrite_due(self, count: int) -> bool:
        st = self._state
        if count == st.rewritten_at_count:
            return False
        if not st.written or count & (count - 1) == 0:  # the first write, then at 1, 2, 4, 8 ... sizes
            return True
        wait = max(REWRITE_INTERVAL_S, REWRITE_SHARE * st.last_write_cost_s)
        return time.monotonic() - st.last_write_at >= wait
