"""Several element types in one table (``-d all``), as nccl-tests prints them: one header naming every
type, the rows of each type in turn, then one footer. Its ``# Out of bounds values`` counts the wrong
elements of every type and its ``# Avg bus bandwidth`` is the mean busbw of every row of every type
(both blocks where both were measured), as nccl-tests averages them, so a script that takes exactly one
average (PerfKitBenchmarker) reads the run. The ``--min-busbw`` gate compares that one average.

pybench's own lines follow per type, each named (``# float64: Peak bus bandwidth: ...``); each type
keeps its own result files (``--json``, ``--csv``, ``-J``), whose averages are that type's.
"""

from __future__ import annotations

import math
import sys

from pybench.measure.record_tally import MIN_BW_TOLERANCE
from pybench.measure.results import RunResult
from pybench.measure.table import busy_warning, end_load_line, nccl_tests_footer, summary_lines


class TypeTable:
    """The results of one table, added as each type's sweep ends."""

    def __init__(self, dtypes: list[str], min_busbw_gbps: float | None) -> None:
        self.dtypes = dtypes
        self.min_busbw_gbps = min_busbw_gbps
        self.results: list[RunResult] = []

    def add(self, result: RunResult) -> None:
        self.results.append(result)  # its records are spilled to its journal: only its tally stays

    def average_busbw(self) -> float:
        """The mean busbw over every row of every type (nan when none was measured)."""
        tallies = [r.tally() for r in self.results]
        count = sum(t.busbw_count for t in tallies)
        return sum(t.busbw_sum for t in tallies) / count if count else math.nan

    def gate_failed(self) -> bool | None:
        """None without a gate; else whether the one average is below 0.9 x the gate, as nccl-tests decides."""
        if self.min_busbw_gbps is None:
            return None
        return not self.average_busbw() >= MIN_BW_TOLERANCE * self.min_busbw_gbps

    def footer_lines(self) -> list[str]:
        """nccl-tests' one footer, the end load, then each type's own lines; busy warnings once on stderr."""
        wrong = sum(r.tally().wrong for r in self.results)
        lines = nccl_tests_footer(wrong, self.average_busbw(), self.gate_failed(),
                                  self.results[0].benchmark if self.results else "")
        load = end_load_line(self.results[-1]) if self.results else None
        if load:
            lines.append(load)
        warned: set[str] = set()
        for r in self.results:
            lines += summary_lines(r, f"{r.dtype}: ")
            warning = busy_warning(r)
            if warning and warning not in warned:
                warned.add(warning)
                print(warning, file=sys.stderr, flush=True)
        return lines
