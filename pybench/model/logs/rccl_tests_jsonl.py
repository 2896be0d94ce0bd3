"""Read the JSON rccl-tests writes with ``-X F -Z json`` (``--output_file F --output_format json``).

Current rccl-tests write a JSON array, one object to a line (``[``, ``{...},`` per row, ``]``);
older ones wrote JSON lines (the same objects without the brackets and commas). Both are read
line by line, so an error names the line. One object per timing: ``name`` (``AllReduce`` ...),
``size`` (bytes), ``type``, ``redop``, ``inPlace`` (0 or 1), ``time`` (us), ``algBw`` and
``busBw`` (GB/s, full precision), and the rank layout: ``gpus`` from a build without MPI (one
process drives every GPU), ``ranks`` (MPI processes) and ``gpusPerRank`` (the GPUs each drives,
-t x -g) from an MPI build. The bandwidths are not rounded, so busbw/algbw gives the exact rank
count of the collectives whose bus factor depends on it; for the others the layout fields do:
ranks x gpusPerRank, else gpus.
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from typing import Annotated

import numpy as np
from pydantic import Field

from pybench.errors import FileFormatError
from pybench.io.files import parse_json
from pybench.io.foreign_schemas import MAX_TIME_US, validate_foreign
from pybench.io.schemas import MAX_WORLD, Rate, Size, Text, _Body
from pybench.model.logs.measurements import MeasurementSet
from pybench.model.logs.nccl_tests import canonical_dtype, redop_name

# rccl-tests' names, lower case -> pybench's.
_NAMES = {"allreduce": "allreduce", "allgather": "allgather", "reducescatter": "reducescatter",
          "broadcast": "broadcast", "reduce": "reduce", "alltoall": "alltoall", "sendrecv": "sendrecv",
          "gather": "gather", "scatter": "scatter", "alltoallv": "alltoallv"}


class RcclRowSchema(_Body):
    """One line of the file."""

    name: Text
    size: Size
    time: Annotated[float, Field(gt=0, le=MAX_TIME_US, allow_inf_nan=False)]
    algBw: Rate
    busBw: Rate
    inPlace: Annotated[int, Field(ge=0, le=1)] = 0
    type: Text | None = None
    redop: Text | None = None
    gpus: Annotated[int, Field(ge=1, le=MAX_WORLD)] | None = None
    ranks: Annotated[int, Field(ge=1, le=MAX_WORLD)] | None = None
    gpusPerRank: Annotated[int, Field(ge=1, le=MAX_WORLD)] | None = None


def _object_line(line: str) -> bool:
    return line.startswith("{") and line.endswith("}")


def looks_like_json_lines(text: str) -> bool:
    """True when the first two non-blank lines are each one JSON object (not one document), or
    the text opens rccl-tests' JSON array: a ``[`` line, then one object to a line."""
    lines = [ln.strip() for ln in text[:20000].splitlines() if ln.strip()]
    if lines[:1] == ["["]:
        return len(lines) >= 2 and _object_line(lines[1].removesuffix(","))
    return len(lines) >= 2 and all(_object_line(ln) for ln in lines[:2])


def _object_lines(text: str) -> Iterator[tuple[int, str]]:
    """(line number, text) of each row: a JSON line, or an element of the array current rccl-tests
    write (its ``[`` and ``]`` lines and the comma after each element dropped)."""
    lines = text.splitlines()
    filled = [k for k, ln in enumerate(lines) if ln.strip()]
    array = bool(filled) and lines[filled[0]].strip() == "["
    for k in filled:
        ln = lines[k].strip()
        if array and (k == filled[0] or (k == filled[-1] and ln == "]")):
            continue
        yield k + 1, ln.removesuffix(",") if array else ln


def _ranks(row: dict) -> int | None:
    """The row's rank count: an MPI build's processes x GPUs each (its ``ranks`` counts processes, each
    driving ``gpusPerRank`` GPUs with -t x -g), else the ``gpus`` one process drives."""
    if row.get("ranks") is not None:
        return int(row["ranks"]) * int(row.get("gpusPerRank") or 1)
    return None if row.get("gpus") is None else int(row["gpus"])


def _world(coll: str, rows: list[dict], notes: list[str]) -> int | None:
    ratios = [r["busBw"] / r["algBw"] for r in rows if r["algBw"] > 0]
    f = float(np.median(ratios)) if ratios else math.nan
    n = math.nan
    if coll == "allreduce" and f < 2:
        n = 2.0 / (2.0 - f)
    elif coll in ("allgather", "reducescatter", "alltoall") and f < 1:
        n = 1.0 / (1.0 - f)
    if math.isfinite(n) and abs(n - round(n)) < 0.01 and round(n) >= 2:
        notes.append(f"world size {round(n)} from busbw/algbw = {f:.6f}")
        return int(round(n))
    counts = {n for n in map(_ranks, rows) if n is not None}
    if len(counts) != 1 or (world := counts.pop()) > MAX_WORLD:
        return None  # rows that disagree, or more ranks than any run, say nothing
    first = next(r for r in rows if _ranks(r) is not None)
    if first.get("ranks") is None:
        notes.append(f"world size {world} from the 'gpus' field")
    else:
        notes.append(f"world size {world} from the 'ranks' x 'gpusPerRank' fields ({first['ranks']} "
                     f"process(es) x {first.get('gpusPerRank') or 1} GPU(s) each)")
    return world


def parse_rccl_tests_jsonl(text: str, path="<jsonl>", collective: str | None = None,
                           world_size: int | None = None) -> list[MeasurementSet]:
    """One :class:`MeasurementSet` per (test, type, redop) of an rccl-tests JSON file (array or lines).

    Raises
    ------
    FileFormatError
        A line that is not a JSON object of the row's fields, or no rows; the line is named.
    """
    groups: dict[tuple[str, str, str], list[dict]] = {}
    for k, ln in _object_lines(text):
        where = f"{path}: line {k}"
        row = validate_foreign(parse_json(ln, where), RcclRowSchema, where, "expected rccl-tests' JSON rows, "
                               "one object to a line (name, size, time, algBw, busBw ...)")
        key = (str(row["name"]), str(row.get("type") or ""), str(row.get("redop") or ""))
        groups.setdefault(key, []).append(row)
    if not groups:
        raise FileFormatError(f"{path}: no rows in this JSON-lines file")
    out = []
    for (name, dtype, redop), rows in groups.items():
        coll = collective or _NAMES.get(name.lower().replace("_", ""), name)
        notes = [f"rows named {name}, type {dtype or '?'}"] if len(groups) > 1 else []
        world = world_size if world_size is not None else _world(coll, rows, notes)
        # Out-of-place rows in file order (a size may repeat); each takes the next in-place row of its size.
        oop = [r for r in rows if not r.get("inPlace")]
        ip: dict[int, list[float]] = {}
        for r in rows:
            if r.get("inPlace"):
                ip.setdefault(r["size"], []).append(r["time"])
        main = oop or [r for r in rows if r.get("inPlace")]
        in_place = [ip[r["size"]].pop(0) if ip.get(r["size"]) else math.nan for r in oop] if oop and ip else None
        left = sum(len(v) for v in ip.values()) if oop else 0
        if left:
            notes.append(f"{left} in-place row(s) without an out-of-place row of their size left out")
        out.append(MeasurementSet(
            source="rccl-tests", collective=coll, backend="nccl", world_size=world, link_class=None,
            dtype=canonical_dtype(dtype) if dtype else "",
            size_bytes=np.array([r["size"] for r in main], dtype=np.int64),
            time_s=np.array([r["time"] for r in main]) * 1e-6,
            time_in_place_s=None if in_place is None else np.array(in_place) * 1e-6,
            path=str(path), time_statistic="mean", notes=tuple(notes), redop=redop_name(redop)))
    return out
