"""Read the JSON rccl-tests writes with ``-X F -Z json`` (``--output_file F --output_format json``).

Current rccl-tests write a JSON array, one object to a line (``[``, ``{...},`` per row, ``]``);
older ones wrote JSON lines (the same objects without the brackets and commas). Both are read
line by line, so an error names the line. One object per timing: ``name`` (``AllReduce`` ...),
``size`` (bytes), ``type``, ``redop``, ``inPlace`` (0 or 1), ``time`` (us), ``algBw`` and
``busBw`` (GB/s, full precision), and the rank layout: ``gpus`` from a build without MPI (one
process drives every GPU), ``ranks`` (MPI processes), ``gpusPerRank`` (the GPUs each drives,
-t x -g) and ``nodes`` (the hosts they ran on) from an MPI build. The bandwidths are not rounded, so
busbw/algbw gives the exact rank count of the collectives whose bus factor depends on it; for the
others the layout fields do:
ranks x gpusPerRank, else gpus. ``wrong`` (quoted; ``#wrong`` read alike) counts the elements -c found
wrong, ``"N/A"`` when it did not check: a row with wrong values timed a broken collective and is left out.
Launcher and collector labels before each line (``kubectl logs --timestamps``, Open MPI's
``--tag-output``, srun -l) are stripped first, as for text logs, line for line.
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from dataclasses import replace
from typing import Annotated

import numpy as np
from pydantic import Field

from pybench.collectives import dtype_name
from pybench.errors import FileFormatError
from pybench.io.files import parse_json
from pybench.io.foreign_schemas import MAX_TIME_US, validate_foreign
from pybench.io.schemas import MAX_WORLD, Rate, Size, Text, _Body
from pybench.model.logs.launcher_labels import clean_lines
from pybench.model.logs.measurements import MeasurementSet
from pybench.model.logs.nccl_tests import RCCL_NOTE, redop_name
from pybench.model.logs.nccl_tests_failure import wrong_note
from pybench.model.logs.nccl_tests_table import is_wrong

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
    nodes: Annotated[int, Field(ge=1, le=MAX_WORLD)] | None = None
    ranksPerNode: Annotated[int, Field(ge=1, le=MAX_WORLD)] | None = None
    wrong: Text | Annotated[float, Field(ge=0, allow_inf_nan=False)] | None = None


def _object_line(line: str) -> bool:
    return line.startswith("{") and line.endswith("}")


def looks_like_json_lines(text: str) -> bool:
    """True when the first two non-blank lines are each one JSON object (not one document), or
    the text opens rccl-tests' JSON array: a ``[`` line, then one object to a line (under launcher labels)."""
    lines = [ln.strip() for ln in clean_lines(text[:20000]) if ln.strip()]
    if lines[:1] == ["["]:
        return len(lines) >= 2 and _object_line(lines[1].removesuffix(","))
    return len(lines) >= 2 and all(_object_line(ln) for ln in lines[:2])


def _object_lines(text: str) -> Iterator[tuple[int, str]]:
    """(line number, text) of each row: a JSON line, or an element of the array current rccl-tests
    write (its ``[`` and ``]`` lines and the comma after each element dropped)."""
    lines = clean_lines(text)  # one for one: line numbers still name the file's lines
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


def _hosts(rows: list[dict], world: int | None) -> tuple[list[str], str | None]:
    """The note that gives the node count (the topology model's) and the link class, from an MPI build's
    ``nodes`` field where every row agrees and it divides the world; none otherwise. The field counts the
    hosts the ranks ran on, as Rank lines on distinct hosts do for the text reader."""
    nodes = {r.get("nodes") for r in rows}
    if world is None or len(nodes) != 1 or (n := nodes.pop()) is None or world % n:
        return [], None
    return [f"{world} ranks on {n} host(s) per the 'nodes' field"], ("inter-node" if n > 1 else "intra-node")





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
    out, gone = [], []
    for (name, dtype, redop), rows in groups.items():
        coll = collective or _NAMES.get(name.lower().replace("_", ""), name)
        notes = [f"rows named {name}, type {dtype or '?'}"] if len(groups) > 1 else []
        pairs, wrong, lost = _right_pairs(rows, notes)
        if not pairs:
            gone.append(f"every row named {name}, type {dtype or '?'} left out: each has wrong results (-c)")
            continue
        if wrong:
            notes.append(wrong_note(wrong, lost, "rccl-tests' 'wrong' field"))
        world = world_size if world_size is not None else _world(coll, rows, notes)
        hosts, link = _hosts(rows, world)
        notes += hosts + [RCCL_NOTE]
        in_place = np.array([math.nan if i is None else i["time"] for _, i in pairs]) * 1e-6
        out.append(MeasurementSet(
            source="rccl-tests", collective=coll, backend="nccl", world_size=world, link_class=link,
            dtype=dtype_name(dtype) if dtype else "",
            size_bytes=np.array([m["size"] for m, _ in pairs], dtype=np.int64),
            time_s=np.array([m["time"] for m, _ in pairs]) * 1e-6,
            time_in_place_s=in_place if np.isfinite(in_place).any() else None,
            path=str(path), time_statistic="mean", notes=tuple(notes), redop=redop_name(redop)))
    if not out:
        raise FileFormatError(f"{path}: every row of this rccl-tests JSON has wrong results (non-zero 'wrong': "
                              f"the -c check failed); no valid measurement to read")
    return [replace(m, notes=m.notes + tuple(gone)) for m in out] if gone else out


def _right_pairs(rows: list[dict], notes: list[str]) -> tuple[list[tuple[dict, dict | None]],
                                                              list[tuple[int, str]], int]:
    """(timing, in-place row or None) per size measured, the (size, half) of each row left out for wrong
    values, and how many sizes that left with no timing. Out-of-place rows in file order (a size may
    repeat) each take the next in-place row of their size; a right in-place row stands in for a wrong
    out-of-place one, as a wrong result times a broken collective."""
    oop = [r for r in rows if not r.get("inPlace")]
    ip: dict[int, list[dict]] = {}
    for r in rows:
        if r.get("inPlace"):
            ip.setdefault(r["size"], []).append(r)
    pairs: list[tuple[dict | None, dict | None]] = [(None, r) for r in rows]
    if oop:
        pairs = [(r, ip[r["size"]].pop(0) if ip.get(r["size"]) else None) for r in oop]
        left = sum(len(v) for v in ip.values())
        if left:
            notes.append(f"{left} in-place row(s) without an out-of-place row of their size left out")
    out: list[tuple[dict, dict | None]] = []
    wrong: list[tuple[int, str]] = []
    lost = 0
    for o, i in pairs:
        wrong.extend((r["size"], half) for r, half in ((o, "out-of-place"), (i, "in-place"))
                     if r is not None and _wrong(r))
        right = [r for r in (o, i) if r is not None and not _wrong(r)]
        if right:
            out.append((right[0], right[1] if len(right) > 1 else None))
        else:
            lost += 1
    return out, wrong, lost


def _wrong(row: dict) -> bool:
    return is_wrong(row.get("wrong", row.get("#wrong")))
