"""Import measurements from other tools' logs and from pybench result files.

``load_measurements(path)`` sniffs the format and returns a list of
:class:`MeasurementSet` (a log may hold several sweeps):

* pybench result JSON (``"schema": "pybench.result"``);
* nccl-tests text output of any era, and its ``-J`` JSON;
* OSU Micro-Benchmarks latency / bandwidth / collective output.

Every failure is a one-line :class:`~pybench.errors.FileFormatError` naming the file.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Optional

from pybench.errors import FileFormatError
from pybench.model.logs.measurements import LINK_CLASSES, MeasurementSet
from pybench.model.logs.nccl_tests import looks_like_nccl_tests, parse_nccl_tests_json, parse_nccl_tests_text
from pybench.model.logs.osu import looks_like_osu, parse_osu_text
from pybench.model.logs.pybench_json import parse_pybench_result

__all__ = ["MeasurementSet", "LINK_CLASSES", "load_measurements", "sniff_format"]

# Larger files are not logs of a size sweep; refuse before reading them into memory.
_MAX_BYTES = 64 << 20


def _read(path: Path) -> str:
    try:
        size = path.stat().st_size
        if size > _MAX_BYTES:
            raise FileFormatError(f"{path}: {size} bytes is too large for a benchmark log")
        raw = path.read_bytes()
    except OSError as e:
        raise FileFormatError(f"{path}: cannot read ({e.strerror or e})") from None
    if b"\x00" in raw[:4096]:
        raise FileFormatError(f"{path}: binary file, not a benchmark log or result JSON")
    return raw.decode("utf-8", errors="replace")


def sniff_format(text: str) -> str:
    """Name the format of a file's text.

    Returns
    -------
    str
        ``pybench-json``, ``nccl-tests-json``, ``nccl-tests`` or ``osu``; ``unknown`` if
        none matches. JSON documents are recognised by their keys, text by headers.
    """
    stripped = text.lstrip()
    if stripped.startswith("{"):
        try:
            data = json.loads(stripped)
        except json.JSONDecodeError:
            return "unknown"
        if isinstance(data, dict) and "schema" in data:
            return "pybench-json"
        if isinstance(data, dict) and "results" in data:
            return "nccl-tests-json"
        return "unknown"
    if looks_like_nccl_tests(text):
        return "nccl-tests"
    if looks_like_osu(text):
        return "osu"
    return "unknown"


def load_measurements(path, *, collective: str | None = None,
                      world_size: int | None = None) -> list:
    """Read a benchmark log or result file of any supported format.

    Parameters
    ----------
    path : str or Path
        pybench result JSON, nccl-tests text or JSON, or OSU output.
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
        file and what was wrong.
    """
    p = Path(path)
    text = _read(p)
    fmt = sniff_format(text)
    if fmt == "pybench-json":
        try:
            data = json.loads(text)
        except json.JSONDecodeError as e:
            raise FileFormatError(f"{p}: not valid JSON (line {e.lineno}: {e.msg})") from None
        return parse_pybench_result(data, p)
    if fmt == "nccl-tests-json":
        return parse_nccl_tests_json(json.loads(text), p, collective, world_size)
    if fmt == "nccl-tests":
        return parse_nccl_tests_text(text, p, collective, world_size)
    if fmt == "osu":
        return parse_osu_text(text, p, collective, world_size)
    if text.lstrip().startswith("{"):
        raise FileFormatError(f"{p}: JSON but neither a pybench result ('schema' key) nor an "
                              f"nccl-tests -J file ('results' key)")
    raise FileFormatError(f"{p}: not a recognised benchmark log (expected nccl-tests output with "
                          f"a '# size count type ...' header, OSU output with '# Size ...', or "
                          f"pybench/nccl-tests JSON)")
