"""Typed results and their files: versioned JSON and CSV, each size journaled as it is
measured and the files rewritten whole and atomically at growing intervals.

A reader never sees half a file (:func:`pybench.io.files.write_atomic`), and an interrupted
run keeps every size already measured (in the file, or in the journal the parent turns
into the file: :mod:`pybench.measure.result_journal`).
"""

from __future__ import annotations

import json
import math
import os
import time
from collections.abc import Iterator
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from pybench.errors import EnvironmentFault, FileFormatError, UsageError
from pybench.io.files import null_non_finite, read_json, refuse_existing, refuse_non_regular, write_atomic
from pybench.io.formats import RESULT, check_document, stamp
from pybench.measure.record_tally import RecordTally
from pybench.measure.result_csv import csv_chunks
from pybench.measure.result_journal import (
    CSV_KEY,
    IN_PROGRESS,
    NCCL_TESTS_KEY,
    Journal,
    document_chunks,
    journal_path,
    orphaned_journals,
)


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
    # The same size measured in place (nccl-tests' second block), under the same stop rule: median time,
    # its bandwidths and the check's wrong elements. None where it was not measured (a backend that runs
    # one buffer mode, a p2p test, a file from an older pybench).
    in_place_time_s: float | None = None
    in_place_algbw_gbps: float | None = None
    in_place_busbw_gbps: float | None = None
    in_place_wrong: int | None = None

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
        # The schema lets 0 through (its bound is for quantiles), but a sample is the time an operation
        # took: 0 s never is one, and all-zero samples would pass as a measurement.
        bad = next((k for k, x in enumerate(values["samples_s"]) if not x > 0), None)
        if bad is not None:
            raise FileFormatError(f"size record of {values['size_bytes']} B: samples_s[{bad}] is "
                                  f"{values['samples_s'][bad]!r}, but a timing sample must be above 0 s; the file "
                                  "was edited or damaged: measure this size again")
        return cls(**values)


@dataclass
class RunResult:
    """One run of one benchmark (one collective or p2p test over a list of sizes).

    Mutable on purpose: records are appended as sizes complete. A running sweep hands each
    record to its files and then drops it (:meth:`spill`), keeping only its :class:`RecordTally`,
    so ``records`` holds the records not yet spilled: all of them for a result read from a file.
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
    spilled: RecordTally = field(default_factory=RecordTally, compare=False, repr=False)

    @property
    def collective(self) -> str:
        return self.benchmark

    @property
    def size_count(self) -> int:
        """Sizes measured: those spilled and those held."""
        return self.spilled.count + len(self.records)

    def spill(self) -> None:
        """Drop the records held, keeping their tally: the files (the journal) hold them now."""
        for r in self.records:
            self.spilled.add(r)
        self.records.clear()

    def tally(self) -> RecordTally:
        """The summary of every record, spilled or held."""
        tally = replace(self.spilled)
        for r in self.records:
            tally.add(r)
        return tally

    def peak_busbw(self) -> SizeRecord | None:
        return max(self.records, key=lambda r: r.busbw_gbps, default=None)

    def total_wrong(self) -> int:
        return self.tally().wrong

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


def result_json(result: RunResult) -> str:
    """The result document (the records held): metadata indented, then one record per line
    (:func:`pybench.measure.result_journal.document_chunks`)."""
    head = replace(result, records=[]).to_dict()
    return b"".join(document_chunks(head, (record_json(r).encode() for r in result.records))).decode()


def record_json(record: SizeRecord) -> str:
    """One record as one line of JSON (no newline inside), as the result file and the journal hold it."""
    return _record_json(record.to_dict())


def _record_json(record: dict[str, Any]) -> str:
    try:
        return json.dumps(record, allow_nan=False)
    except ValueError:  # a nan or inf somewhere: written as null (rare, so walked only then)
        return json.dumps(null_non_finite(record), allow_nan=False)


def result_csv(result: RunResult) -> str:
    """The records held as CSV, one row per size."""
    return b"".join(csv_chunks(result, (r.to_dict() for r in result.records))).decode()


# Mid-run rewrites: whenever the count of sizes doubles, and otherwise after this many seconds
# unless the last rewrite took more than 1/REWRITE_SHARE of that (then that many times its
# duration): the doubling rewrites cost about twice one write of the file, the timed ones at most
# a 1/REWRITE_SHARE share of the run, so the time per size stays flat. The journal, not these
# rewrites, is what keeps every size when the run dies; where no journal can rebuild the files (-J or
# --csv without --json), they are rewritten at every size whose rewrite costs under that share.
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
    nccl_tests: Any = None  # the -J file's writer (pybench.measure.nccl_tests_json), rewritten with the others
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

    def also_write(self, nccl_tests: Any) -> None:
        """Rewrite nccl-tests' ``-J`` file too (a :class:`pybench.measure.nccl_tests_json.NcclTestsJsonWriter`),
        from the same journal and at the same times as the others."""
        self._state.nccl_tests = nccl_tests

    def write(self, result: RunResult) -> None:
        """Save ``result``: its new sizes to the journal, and the files when due (see the class
        docstring); a failing write (a full disk, any OS error) is one EnvironmentFault line.

        The records of ``result`` beyond those journaled are new; the caller may then drop them
        (:meth:`RunResult.spill`): every rewrite streams the records back from the journal.
        """
        st = self._state
        final = result.finished or result.cut_short is not None
        if not (self.paths() or st.nccl_tests is not None):
            return
        try:
            journal = st.journal
            if journal is not None and result.size_count < journal.records:  # another result than journaled
                if result.spilled.count:
                    raise UsageError("a result whose records were spilled cannot be written to other files")
                journal.reset()
            if journal is None:
                journal = st.journal = self._open_journal(final)
            new = result.records[max(0, journal.records - result.spilled.count):]
            journal.append(lambda: {**replace(result, records=[]).to_dict(), **self._journal_extra()},
                           [record_json(r) for r in new])
        except OSError as exc:
            raise EnvironmentFault(f"cannot write the run's journal {exc.filename or ''}: "
                                   f"{exc.strerror or exc}") from None
        count = result.size_count
        if not (final or self._rewrite_due(count)):
            return
        started = time.monotonic()
        snapshot = result if final else replace(
            result, cut_short=f"{IN_PROGRESS}: {count} size(s) measured when this was written")

        def documents() -> Iterator[tuple[Path, Any, bool]]:
            if self.json_path is not None:
                yield self.json_path, document_chunks(replace(snapshot, records=[]).to_dict(),
                                                      journal.record_lines()), True
            if self.csv_path is not None:
                yield self.csv_path, csv_chunks(snapshot, map(json.loads, journal.record_lines())), True
            if st.nccl_tests is not None:
                yield st.nccl_tests.path, st.nccl_tests.chunks(result, map(json.loads, journal.record_lines()),
                                                               finished=result.finished), False

        for path, chunks, exclusive in documents():
            try:
                write_atomic(path, chunks, replace=not (exclusive and st.exclusive) or path in st.written)
            except FileExistsError:
                raise UsageError(f"{path} already exists (another run writing it?); pass --force to overwrite "
                                 "it or choose another file name") from None
            except OSError as exc:
                raise EnvironmentFault(f"cannot write {path}: {exc.strerror or exc}") from None
            st.written.add(path)
        st.last_write_at = time.monotonic()
        st.last_write_cost_s = st.last_write_at - started
        st.rewritten_at_count = count
        if final:
            if st.nccl_tests is not None:  # (a -J file over several tests holds this one's before the next's)
                st.nccl_tests.test_done(result, map(json.loads, journal.record_lines()))
            journal.remove()
            st.journal = None
            self._end_own_job()

    def _journal_extra(self) -> dict[str, Any]:
        """What the journal's first line holds beyond the result's metadata: the CSV and -J files rebuilt with the
        JSON (:data:`pybench.measure.result_journal.CSV_KEY`, :data:`~pybench.measure.result_journal.NCCL_TESTS_KEY`)
        when the run dies."""
        extra: dict[str, Any] = {CSV_KEY: str(Path(self.csv_path).absolute())} if self.csv_path is not None else {}
        if self._state.nccl_tests is not None:
            extra[NCCL_TESTS_KEY] = self._state.nccl_tests.journal_entry()
        return extra

    def _open_journal(self, final: bool) -> Journal:
        """The journal of this run: in the job folder of pybench's launcher when it started us (it
        rebuilds the file if we die); as rank 0 of the user's launcher (mpirun, srun, torchrun), or
        alone when asked (:meth:`journal_when_alone`), in a job folder of our own with a guard process
        that does the same when this process dies; otherwise (no JSON file, or nobody to rebuild it,
        or a first write that is the last) a nameless one that only holds the records between rewrites."""
        if self.json_path is None or final:
            return Journal(None)
        where = journal_path(self.json_path)
        if where is None:
            from pybench.measure.launch import under_launcher
            if not (under_launcher() or self._state.journal_alone):
                return Journal(None)
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
        wait = REWRITE_SHARE * st.last_write_cost_s
        if st.journal is None or st.journal.path is not None:  # a named journal rebuilds the files if we die
            wait = max(REWRITE_INTERVAL_S, wait)
        # else (-J or --csv alone) the files are all there is: rewritten at every size their cost allows
        return time.monotonic() - st.last_write_at >= wait
