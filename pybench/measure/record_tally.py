"""What a run's summary needs of its records, kept in constant memory.

A running sweep hands each record to its files (the journal) and drops it; the footer, the
exit code and nccl-tests' ``-J`` header need only counts, sums and a few extreme records, which
this tally keeps as records arrive. A result read from a file tallies its records the same way,
so both paths print the same summary.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import NamedTuple, Protocol


class Record(Protocol):
    """What the tally reads of a record (pybench.measure.results.SizeRecord, which imports this module)."""

    @property
    def size_bytes(self) -> int: ...
    @property
    def time_s(self) -> float: ...
    @property
    def algbw_gbps(self) -> float: ...
    @property
    def busbw_gbps(self) -> float: ...
    @property
    def wrong(self) -> int: ...
    @property
    def precision_met(self) -> bool: ...
    @property
    def stop_reason(self) -> str: ...
    @property
    def in_place_busbw_gbps(self) -> float | None: ...
    @property
    def in_place_wrong(self) -> int | None: ...


class Extreme(NamedTuple):
    """The figures of one record the footer names (its raw samples are not kept)."""

    size_bytes: int
    time_s: float
    algbw_gbps: float
    busbw_gbps: float


# The gate compares the average bus bandwidth with 0.9 x the threshold, as nccl-tests does.
MIN_BW_TOLERANCE = 0.9


def precision_met(r: Record) -> bool:
    """Whether a record's figure is as precise as asked (a fixed iteration count always is)."""
    return r.precision_met or r.stop_reason == "fixed"


@dataclass
class RecordTally:
    count: int = 0
    wrong: int = 0
    busbw_sum: float = 0.0
    busbw_count: int = 0  # figures in busbw_sum: a size measured in place too adds both, as nccl-tests averages
    met: int = 0  # records whose figure met the precision (precision_met)
    adaptive: int = 0  # records measured by the adaptive stop rule (not a fixed count)
    adaptive_missed: int = 0
    # The extremes the footer names, without their raw samples: highest busbw and lowest time,
    # among all records and among those that met the precision.
    peak_any: Extreme | None = None
    peak_met: Extreme | None = None
    lowest_any: Extreme | None = None
    lowest_met: Extreme | None = None
    # Sizes, for nccl-tests' config block: the first two, the extremes, and whether every step
    # so far kept the first step's factor.
    first_sizes: tuple[int, ...] = ()
    min_size: int | None = None
    max_size: int | None = None
    last_size: int | None = None
    same_factor: bool = True

    @classmethod
    def of(cls, records: Iterable[Record]) -> RecordTally:
        tally = cls()
        for r in records:
            tally.add(r)
        return tally

    def add(self, r: Record) -> None:
        self.count += 1
        self.wrong += r.wrong + (r.in_place_wrong or 0)
        self.busbw_sum += r.busbw_gbps
        self.busbw_count += 1
        if r.in_place_busbw_gbps is not None:
            self.busbw_sum += r.in_place_busbw_gbps
            self.busbw_count += 1
        met = precision_met(r)
        self.met += met
        if r.stop_reason != "fixed":
            self.adaptive += 1
            self.adaptive_missed += not r.precision_met
        lean = Extreme(r.size_bytes, r.time_s, r.algbw_gbps, r.busbw_gbps)
        if self.peak_any is None or r.busbw_gbps > self.peak_any.busbw_gbps:
            self.peak_any = lean
        if self.lowest_any is None or r.time_s < self.lowest_any.time_s:
            self.lowest_any = lean
        if met and (self.peak_met is None or r.busbw_gbps > self.peak_met.busbw_gbps):
            self.peak_met = lean
        if met and (self.lowest_met is None or r.time_s < self.lowest_met.time_s):
            self.lowest_met = lean
        self._add_size(r.size_bytes)

    def _add_size(self, size: int) -> None:
        if len(self.first_sizes) < 2:
            self.first_sizes += (size,)
        elif self.same_factor and self.last_size is not None:
            a, b = self.first_sizes
            self.same_factor = a > 0 and b % a == 0 and size == self.last_size * (b // a)
        self.min_size = size if self.min_size is None else min(self.min_size, size)
        self.max_size = size if self.max_size is None else max(self.max_size, size)
        self.last_size = size

    def average_busbw(self) -> float:
        """nccl-tests' ``Avg bus bandwidth``: the mean busbw over every size run, out of place and in place
        where both were measured (nan when none was)."""
        return self.busbw_sum / self.busbw_count if self.busbw_count else float("nan")

    def size_step(self) -> dict[str, int]:
        """nccl-tests' ``step_factor`` when every size is the one before times one integer factor, else
        ``step_bytes`` (the first two sizes' difference)."""
        if len(self.first_sizes) == 2:
            a, b = self.first_sizes
            if self.same_factor and a > 0 and b % a == 0 and b // a > 1:
                return {"step_factor": b // a}
            return {"step_bytes": b - a}
        return {"step_bytes": 0}
