"""Import measurements from other tools' logs and from pybench result files.

``load_measurements(path)`` sniffs the format and returns a list of
:class:`MeasurementSet` (a log may hold several sweeps):

* pybench result JSON (``"schema": "pybench.result"``);
* nccl-tests text output of any era, and its ``-J`` JSON;
* OSU Micro-Benchmarks latency / bandwidth / collective output;
* vTrain's CSV tables of nccl-tests sweeps (``size(B),count,type,time(ns),busbw(GB/s),...``);
* rccl-tests' JSON (``-Z json``): an array with one object to a line, or (older) JSON lines.

Text logs are read without the labels launchers and log collectors put before each line
(srun -l, Open MPI --tag-output, MPICH -prepend-rank, kubectl --timestamps: see
:mod:`pybench.model.logs.launcher_labels`).

Every failure is a one-line :class:`~pybench.errors.FileFormatError` naming the file (and, in a
text log, the line); JSON is parsed only by :func:`pybench.io.files.parse_json`.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import numpy as np

from pybench.collectives import MODELLED
from pybench.errors import FileFormatError, UsageError
from pybench.io.files import parse_json, read_bytes
from pybench.model.logs.launcher_labels import strip_launcher_labels
from pybench.model.logs.log_bytes import decode_log
from pybench.model.logs.measurements import LINK_CLASSES, MeasurementSet
from pybench.model.logs.nccl_tests import looks_like_nccl_tests, parse_nccl_tests_text
from pybench.model.logs.nccl_tests_failure import reported_failure
from pybench.model.logs.nccl_tests_json import parse_cut_nccl_tests_json, parse_nccl_tests_json
from pybench.model.logs.osu import looks_like_osu, parse_osu_text
from pybench.model.logs.pybench_json import parse_pybench_result
from pybench.model.logs.rccl_tests_jsonl import looks_like_json_lines, parse_rccl_tests_jsonl
from pybench.model.logs.vtrain import looks_like_vtrain_csv, parse_vtrain_csv

NAMEABLE = (*MODELLED, "gather", "scatter")
"""What a log that does not say its test may be named: what pybench fits, and the rooted collectives it reads."""

__all__ = ["MeasurementSet", "LINK_CLASSES", "load_measurements", "sniff_format"]

# Larger files are not logs of a size sweep; refuse before reading them into memory.
MAX_LOG_BYTES = 64 << 20
# A text log holds a header and a row per size (per dtype with nccl-tests' -d all, 5 of them)
# of a sweep of at most MAX_SWEEP_SIZES: more lines than that is not one, and is refused before
# any line is parsed, so a hostile log costs a count of newlines, not a parse.
MAX_SWEEP_SIZES = 65536
_MAX_LINES = 8 * MAX_SWEEP_SIZES


def _read(path: Path) -> str:
    """The log's text through pybench's one bounded reader (regular files only, at most MAX_LOG_BYTES).

    Logs are decoded leniently (a stray byte in shell noise must not refuse a whole sweep);
    JSON documents are then parsed strictly by :func:`pybench.io.files.parse_json`.
    """
    return decode_log(read_bytes(path, MAX_LOG_BYTES), path)


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
        ``pybench-json``, ``nccl-tests-json``, ``rccl-tests-jsonl``, ``nccl-tests``, ``osu`` or
        ``vtrain-csv``; ``unknown`` if none matches. JSON documents are recognised by their keys,
        text by headers (under launcher labels, if any).
    """
    if looks_like_json_lines(text):
        return "rccl-tests-jsonl"
    body = _json_text(text)
    if body is not None:
        try:
            return _json_format(parse_json(body, "<text>"))
        except FileFormatError:
            return "unknown"
    return _text_format(strip_launcher_labels(text))


def _json_text(text: str) -> str | None:
    """``text`` when it opens a JSON document, or its lines without launcher labels when a collector labelled
    each (an nccl-tests -J file shown by ``kubectl logs --timestamps``); else None."""
    head = text[:4096]
    labelled = strip_launcher_labels(head) != head  # a collector labelled the lines (not always the first)
    if text.lstrip().startswith("{") and (not labelled or _parses(text)):  # a notebook's strings look labelled
        return text
    if strip_launcher_labels(head).lstrip().startswith("{") and text.count("\n") <= _MAX_LINES:
        return strip_launcher_labels(text)
    return None


def _parses(text: str) -> bool:
    try:
        json.loads(text)
    except ValueError:
        return False
    return True


def _notebook_text(data: Any) -> str | None:
    """The text a Jupyter notebook's cells printed (streams and plain-text results), or None for other JSON."""
    if not (isinstance(data, dict) and "nbformat" in data and isinstance(data.get("cells"), list)):
        return None
    out: list[str] = []
    for cell in data["cells"]:
        for o in cell.get("outputs", []) if isinstance(cell, dict) else []:
            if not isinstance(o, dict):
                continue
            text = o.get("text", (o.get("data") or {}).get("text/plain", ""))
            out.append("".join(text) if isinstance(text, list) else str(text))
    return "\n".join(out)


def _text_format(text: str) -> str:
    """The format of a text log already stripped of launcher labels."""
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
    if collective is not None and collective not in NAMEABLE:
        raise UsageError(f"collective {collective!r}: a log can be named one of {', '.join(NAMEABLE)}; give one "
                         f"of them")
    if not isinstance(path, (str, os.PathLike)):
        raise UsageError(f"path must be a file's path (str or Path), not {path!r}")
    p = Path(path)
    text = _read(p)
    if looks_like_json_lines(text) and text.count("\n") <= _MAX_LINES:
        return _bounded(parse_rccl_tests_jsonl(text, p, collective, world_size), p)
    body = _json_text(text)
    if body is not None:
        # Strict JSON, depth-checked: a deeply nested file is one line, never a RecursionError.
        try:
            data = parse_json(body, str(p))
        except FileFormatError:
            cut = parse_cut_nccl_tests_json(body, p, collective, world_size)  # an -J file of a killed run
            if cut is None:
                raise
            return _bounded(cut, p)
        fmt = _json_format(data)
        if fmt == "pybench-json":  # its own record of what ran rules: an override can only contradict it
            sets = parse_pybench_result(data, p)
            for given, recorded, flag in ((world_size, sets[0].world_size, "--world"),
                                          (collective, sets[0].collective, "--collective")):
                if given is not None and recorded is not None and given != recorded:
                    raise UsageError(f"{flag} {given}: {p} is a pybench result of {recorded}"
                                     f"{' ranks' if flag == '--world' else ''} by its own record; leave {flag} out "
                                     f"for it")
            return _bounded(sets, p)
        if fmt == "nccl-tests-json":
            return _bounded(parse_nccl_tests_json(data, p, collective, world_size), p)
        text = _notebook_text(data) or ""  # a notebook: the logs its cells printed
        if not text.strip():
            raise FileFormatError(f"{p}: JSON but neither a pybench result ('schema' key), an nccl-tests -J file "
                                  f"('results' key) nor a Jupyter notebook whose cells printed a log")
    lines = text.count("\n")
    if lines > _MAX_LINES:
        raise FileFormatError(f"{p}: {lines} lines, more than a log of a sweep of at most {MAX_SWEEP_SIZES} sizes "
                              f"holds ({_MAX_LINES}); split it into one file per sweep")
    # Stripped here, line for line, for every text format: srun -l labels only the lines srun printed,
    # and a collector may indent or timestamp them (nccl_tests.clean_lines then finds nothing left to strip).
    text = strip_launcher_labels(text)
    fmt = _text_format(text)
    parsers = {"vtrain-csv": parse_vtrain_csv, "nccl-tests": parse_nccl_tests_text, "osu": parse_osu_text}
    if fmt in parsers:
        return _bounded(parsers[fmt](text, p, collective, world_size), p)
    every = text.splitlines()
    failure = reported_failure(every, 0, len(every))
    if failure is not None:  # (nccl-tests failed before it printed its table: in its setup, most often)
        raise FileFormatError(f"{p}: the test failed before it printed any row (line {failure[0]}: "
                              f"{failure[1][:120]}); nothing was measured: fix the run (NCCL_DEBUG=INFO says why) "
                              f"and rerun it")
    raise FileFormatError(f"{p}: not a recognised benchmark log (expected nccl-tests output with "
                          f"a '# size count type ...' header, OSU output with '# Size ...', a vTrain "
                          f"'size(B),count,type,time(ns),...' table, or pybench/nccl-tests JSON)")


def _bounded(sets: list[MeasurementSet], path: Path) -> list[MeasurementSet]:
    """``sets`` when no sweep has more than MAX_SWEEP_SIZES distinct sizes (the fit's work grows
    with the square of that count); else one FileFormatError line."""
    for m in sets:
        distinct = int(np.unique(m.size_bytes).size)
        if distinct > MAX_SWEEP_SIZES:
            raise FileFormatError(f"{path}: a {m.collective} sweep of {distinct} distinct sizes, more than the "
                                  f"{MAX_SWEEP_SIZES} of the longest sweep pybench runs; thin it before fitting")
    return sets
