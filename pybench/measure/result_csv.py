"""A run's CSV file: one row per size, streamed from its records (a run's, or a journal's when the file is
rebuilt after the run died: :func:`pybench.measure.result_journal.write_from_journal`).

The in-place figures (nccl-tests' second block) come last, so that readers of the older columns find
them where they were: empty where the size was not measured in place (a p2p test, a journal from an
older pybench); ``in_place_wrong`` empty where the in-place form has no defined result (all-to-all and
send/recv). A run on one buffer only (``--in-place`` on
nccl) fills them with its one measurement, which ``time_s`` also holds."""

from __future__ import annotations

import csv
import io
import math
from collections.abc import Iterable, Iterator
from typing import Any

CSV_COLUMNS = ["size_bytes", "count", "dtype", "redop", "root", "time_s", "time_p5_s", "time_p95_s", "time_p99_s",
               "time_min_s", "time_max_s", "time_ci_low_s", "time_ci_high_s", "algbw_gbps", "busbw_gbps", "wrong",
               "iterations", "ops_per_sample", "precision_met", "stop_reason"]
IN_PLACE_COLUMNS = ["in_place_time_s", "in_place_algbw_gbps", "in_place_busbw_gbps", "in_place_wrong"]
_MAIN_OF = dict(zip(IN_PLACE_COLUMNS, ["time_s", "algbw_gbps", "busbw_gbps", "wrong"]))


def _in_place_cells(d: dict[str, Any], one_buffer: bool) -> list[Any]:
    if one_buffer:  # its only block is the in-place one
        return ["" if d[_MAIN_OF[c]] is None else d[_MAIN_OF[c]] for c in IN_PLACE_COLUMNS]
    return ["" if d.get(c) is None else d[c] for c in IN_PLACE_COLUMNS]


def csv_chunks(result: Any, records: Iterable[dict[str, Any]]) -> Iterator[bytes]:
    """The CSV file, streamed from ``records`` (dicts as :meth:`SizeRecord.to_dict` makes them, or as
    the journal holds them: a figure that could not be measured, null there, is nan here); ``result``
    is the run or its document's metadata (a journal's first line, when the file is rebuilt from it)."""
    buf = io.StringIO()
    w = csv.writer(buf, lineterminator="\n")
    lead_names = ["benchmark", "backend", "world_size", "timing"]
    w.writerow(lead_names + CSV_COLUMNS + IN_PLACE_COLUMNS)
    lead = [result.get(k) if isinstance(result, dict) else getattr(result, k) for k in lead_names]
    options = result.get("options") if isinstance(result, dict) else result.options
    one_buffer = isinstance(options, dict) and bool(options.get("in_place"))
    for k, d in enumerate(records):
        w.writerow(lead + [math.nan if d[c] is None else d[c] for c in CSV_COLUMNS] + _in_place_cells(d, one_buffer))
        if k % 4096 == 4095:
            yield buf.getvalue().encode()
            buf.seek(0)
            buf.truncate()
    yield buf.getvalue().encode()
