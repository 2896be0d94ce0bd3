"""Typed results and their files: versioned JSON and CSV, rewritten atomically after every size.

A reader never sees half a file (write to a temporary file in the same folder,
then ``os.replace``), and an interrupted run keeps every size already measured.
"""

from __future__ import annotations

import csv
import io
import json
import math
import os
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from pybench.errors import EnvironmentFault, FileFormatError, UsageError
from pybench.io.files import null_non_finite, read_json, refuse_existing, refuse_non_regular, write_atomic
from pybench.io.formats import RESULT, check_document, stamp


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
    # Share of rank 0's buffers the kernel really backed with huge pages (None: not known).
    huge_page_fraction: float | None = None

    @property
    def ci_rel(self) -> float:
        return max(self.time_s - self.time_ci_low_s, self.time_ci_high_s - self.time_s) / self.time_s

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

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


def result_json(result: RunResult) -> str:
    # a figure that could not be measured (nan) is null; json's `default` never sees floats
    return json.dumps(null_non_finite(result.to_dict()), indent=1, allow_nan=False) + "\n"


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


@dataclass(frozen=True)
class OutputFiles:
    """Where a run writes its JSON and CSV; checked before measuring starts."""

    json_path: Path | None = None
    csv_path: Path | None = None

    def paths(self) -> list[Path]:
        return [p for p in (self.json_path, self.csv_path) if p is not None]

    def check_writable(self, force: bool) -> None:
        """Refuse to clobber existing files without --force, and fail early on unwritable folders."""
        for p in self.paths():
            refuse_existing(p, force)
            refuse_non_regular(p)  # a device, FIFO or link: refused before any rank starts, --force or not

    def claim(self, force: bool) -> list[Path]:
        """Create the files now, exclusively, unless ``force``: of two runs given the same file,
        the second fails in one line instead of silently overwriting the first's results.
        Returns the files created (empty), for :meth:`release` when the run does not start."""
        claimed: list[Path] = []
        for p in self.paths():
            refuse_existing(p, force)
            refuse_non_regular(p)
            if force:
                continue
            try:
                fd = os.open(p, os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0), 0o666)
            except FileExistsError:
                self.release(claimed)
                raise UsageError(f"{p} already exists (another run writing it?); pass --force to overwrite it "
                                 "or choose another file name") from None
            except OSError as exc:
                self.release(claimed)
                raise EnvironmentFault(f"cannot create {p}: {exc.strerror or exc}") from None
            os.close(fd)
            claimed.append(p)
        return claimed

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
        """Rewrite the files; a failing write (a full disk, any OS error) is one EnvironmentFault line."""
        for path, text in ((self.json_path, result_json), (self.csv_path, result_csv)):
            if path is None:
                continue
            try:
                write_atomic(path, text(result))
            except OSError as exc:
                raise EnvironmentFault(f"cannot write {path}: {exc.strerror or exc}") from None
