"""A run's CSV file: one row per size, streamed from its records (a run's, or a journal's when the file is
rebuilt after the run died: :func:`pybench.measure.result_journal.write_from_journal`)."""

from __future__ import annotations

import csv
import io
import math
from collections.abc import Iterable, Iterator
from typing import Any

CSV_COLUMNS = ["size_bytes", "count", "dtype", "redop", "root", "time_s", "time_p5_s", "time_p95_s", "time_p99_s",
               "time_min_s", "time_max_s", "time_ci_low_s", "time_ci_high_s", "algbw_gbps", "busbw_gbps", "wrong",
               "iterations", "ops_per_sample", "precision_met", "stop_reason"]


def csv_chunks(result: Any, records: Iterable[dict[str, Any]]) -> Iterator[bytes]:
    """The CSV file, streamed from ``records`` (dicts as :meth:`SizeRecord.to_dict` makes them, or as
    the journal holds them: a figure that could not be measured, null there, is nan here); ``result``
    is the run or its document's metadata (a journal's first line, when the file is rebuilt from it)."""
    buf = io.StringIO()
    w = csv.writer(buf, lineterminator="\n")
    lead_names = ["benchmark", "backend", "world_size", "timing"]
    w.writerow(lead_names + CSV_COLUMNS)
    lead = [result.get(k) if isinstance(result, dict) else getattr(result, k) for k in lead_names]
    for k, d in enumerate(records):
        w.writerow(lead + [math.nan if d[c] is None else d[c] for c in CSV_COLUMNS])
        if k % 4096 == 4095:
            yield buf.getvalue().encode()
            buf.seek(0)
            buf.truncate()
    yield buf.getvalue().encode()
