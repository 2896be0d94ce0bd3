"""Read pybench's own result file (``"schema": "pybench.result"``, version 1).

Shape: a dict with ``schema``, ``schema_version``, ``backend``, ``collective``,
``dtype``, ``world_size``, ``link_class`` and ``records``: one per size with
``size_bytes``, ``time_s`` (median), ``time_p5_s``, ``time_p95_s`` and more
(count, algbw_gbps, busbw_gbps, wrong, iterations, samples_s) that the fitter does
not need. Newer schema versions are refused rather than half-read.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np

from pybench.errors import FileFormatError
from pybench.model.logs.measurements import LINK_CLASSES, MeasurementSet

RESULT_SCHEMA = "pybench.result"
RESULT_SCHEMA_VERSION = 1


def parse_pybench_result(data, path="<json>") -> list:
    """Turn a loaded pybench result document into a :class:`MeasurementSet`.

    Raises
    ------
    FileFormatError
        Wrong schema name, a newer schema version, or missing / non-numeric fields.
    """
    if not isinstance(data, dict):
        raise FileFormatError(f"{path}: a pybench result must be a JSON object")
    schema = data.get("schema")
    if schema != RESULT_SCHEMA:
        hint = " (a fitted model file: use 'pybench predict')" if schema == "pybench.model" else ""
        raise FileFormatError(f"{path}: schema {schema!r} is not {RESULT_SCHEMA!r}{hint}")
    version = data.get("schema_version")
    if not isinstance(version, int) or isinstance(version, bool) or version < 1:
        raise FileFormatError(f"{path}: schema_version {version!r} is not a positive integer")
    if version > RESULT_SCHEMA_VERSION:
        raise FileFormatError(f"{path}: {RESULT_SCHEMA} version {version} is newer than this pybench "
                              f"reads ({RESULT_SCHEMA_VERSION}); upgrade pybench")
    for key in ("collective", "backend"):
        if not isinstance(data.get(key), str) or not data[key]:
            raise FileFormatError(f"{path}: field {key!r} missing or not text")
    records = data.get("records")
    if not isinstance(records, list) or not records:
        raise FileFormatError(f"{path}: 'records' missing or empty")
    world = data.get("world_size")
    if world is not None and (not isinstance(world, int) or isinstance(world, bool) or world < 1):
        raise FileFormatError(f"{path}: world_size {world!r} is not a positive integer")
    link = data.get("link_class")
    if link is not None and link not in LINK_CLASSES:
        raise FileFormatError(f"{path}: link_class {link!r} is not one of {', '.join(LINK_CLASSES)}")
    sizes, times, lows, highs = [], [], [], []
    for k, rec in enumerate(records):
        try:
            sizes.append(int(rec["size_bytes"]))
            times.append(float(rec["time_s"]))
            lows.append(float(rec.get("time_p5_s", rec["time_s"])))
            highs.append(float(rec.get("time_p95_s", rec["time_s"])))
        except (KeyError, TypeError, ValueError, AttributeError):
            raise FileFormatError(f"{path}: records[{k}] lacks a numeric size_bytes/time_s") from None
    return [MeasurementSet(source="pybench", collective=data["collective"], backend=data["backend"],
                           world_size=world, link_class=link, dtype=str(data.get("dtype", "float32")),
                           size_bytes=np.array(sizes, dtype=np.int64), time_s=np.array(times),
                           time_low_s=np.array(lows), time_high_s=np.array(highs), path=str(path),
                           time_statistic="median")]


def load_pybench_result(path) -> list:
    """Read a pybench result JSON file; see :func:`parse_pybench_result`."""
    try:
        text = Path(path).read_text(encoding="utf-8")
    except OSError as e:
        raise FileFormatError(f"{path}: cannot read ({e.strerror})") from None
    except UnicodeDecodeError:
        raise FileFormatError(f"{path}: not UTF-8 text") from None
    try:
        data = json.loads(text)
    except json.JSONDecodeError as e:
        raise FileFormatError(f"{path}: not valid JSON (line {e.lineno}: {e.msg})") from None
    return parse_pybench_result(data, path)
