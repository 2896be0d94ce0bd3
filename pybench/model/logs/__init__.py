"""Import measurements from other tools' logs and from pybench result files.

``load_measurements(path)`` sniffs the format and returns a list of
:class:`MeasurementSet` (a log may hold several sweeps):

* pybench result JSON (``"schema": "pybench.result"``);
* nccl-tests text output of any era, and its ``-J`` JSON;
* OSU Micro-Benchmarks latency / bandwidth / collective output;
* vTrain's CSV tables of nccl-tests sweeps (``size(B),count,type,time(ns),busbw(GB/s),...``).

Every failure is a one-line :class:`~pybench.errors.FileFormatError` naming the file (and, in a
text log, the line); JSON is parsed only by :func:`pybench.io.files.parse_json`.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from pybench.errors import FileFormatError
from pybench.io.files import parse_json, read_bytes
from pybench.model.logs.measurements import LINK_CLASSES, MeasurementSet
from pybench.model.logs.nccl_tests import looks_like_nccl_tests, parse_nccl_tests_text
from pybench.model.logs.nccl_tests_json import parse_nccl_tests_json
from pybench.model.logs.osu import looks_like_osu, parse_osu_text
from pybench.model.logs.pybench_json import parse_pybench_result
from pybench.model.logs.vtrain import looks_like_vtrain_csv, parse_vtrain_csv

__all__ = ["MeasurementSet", "LINK_CLASSES", "load_measurements", "sniff_format"]

# Larger files are not logs of a size sweep; refuse before reading them into memory.
_MAX_BYTES = 64 << 20


def _read(path: Path) -> str:
    """The log's text through pybench's one bounded reader (regular files only, at most _MAX_BYTES).

    Logs are decoded leniently (a stray byte in shell noise must not refuse a whole sweep);
    JSON documents are then parsed strictly by :func:`pybench.io.files.parse_json`.
    """
    raw = read_bytes(path, _MAX_BYTES)
    if b"\x00" in raw[:4096]:
        raise FileFormatError(f"{path}: binary file, not a benchmark log or result JSON")
    return raw.decode("utf-8", errors="replace")


def _json_format(data: Any) -> str:
    if isinstance(data, dict) and "schema" in data:
        return "pybench-json"
    if isinstance(data, dict) and "results" in data:
        return "nccl-tests-json"
    return "unknown"


def sniff_format(text: str) -> str:
    """Name the format of a file's text.

    Returns
    -------
    str
        ``pybench-json``, ``nccl-tests-json``, ``nccl-tests``, ``osu`` or ``vtrain-csv``;
        ``unknown`` if none matches. JSON documents are recognised by their keys, text by headers.
    """
    if text.lstrip().startswith("{"):
        try:
            return _json_format(parse_json(text, "<text>"))
        except FileFormatError:
            return "unknown"
    if looks_like_vtrain_csv(text):
        return "vtrain-csv"
    if looks_like_nccl_tests(text):
        return "nccl-tests"
    if looks_like_osu(text):
        return "osu"
    return "unknown"


def load_measurements(path: str | Path, *, collective: str | None = None,
                      world_size: int | None = None) -> list[MeasurementSet]:
    """Read a benchmark log or result file of any supported format.

    Parameters
    ----------
    path : str or Path
        pybench result JSON, nccl-tests text or JSON, OSU output, or a vTrain CSV table.
    collective, world_size : optional
        Override what the file says or what can be recovered from it (for logs that
        omit the program name or the rank list). Ignored for pybench results, which
        always say.

    Returns
    -------
    list of MeasurementSet
        At least one.

    Raises
    ------
    FileFormatError
        Unreadable file, unknown format, or a malformed table; the message names the
        file (and the line, for text) and what was wrong.
    """
    p = Path(path)
    text = _read(p)
    if text.lstrip().startswith("{"):
        # Strict JSON, depth-checked: a deeply nested file is one line, never a RecursionError.
        data = parse_json(text, str(p))
        fmt = _json_format(data)
        if fmt == "pybench-json":
            return parse_pybench_result(data, p)
        if fmt == "nccl-tests-json":
            return parse_nccl_tests_json(data, p, collective, world_size)
        raise FileFormatError(f"{p}: JSON but neither a pybench result ('schema' key) nor an "
                              f"nccl-tests -J file ('results' key)")
    fmt = sniff_format(text)
    if fmt == "vtrain-csv":
        return parse_vtrain_csv(text, p, collective, world_size)
    if fmt == "nccl-tests":
        return parse_nccl_tests_text(text, p, collective, world_size)
    if fmt == "osu":
        return parse_osu_text(text, p, collective, world_size)
    raise FileFormatError(f"{p}: not a recognised benchmark log (expected nccl-tests output with "
                          f"a '# size count type ...' header, OSU output with '# Size ...', a vTrain "
                          f"'size(B),count,type,time(ns),...' table, or pybench/nccl-tests JSON)")
