"""Read pybench's own result file (``"schema": "pybench.result"``; versions: ``pybench.io.formats.RESULT``).

Shape: a dict with ``schema``, ``schema_version``, ``backend``, ``collective``,
``dtype``, ``world_size``, ``link_class`` and ``records``: one per size with
``size_bytes``, ``time_s`` (median), ``time_p5_s``, ``time_p95_s`` and more
(count, algbw_gbps, busbw_gbps, wrong, iterations, samples_s) that the fitter does
not need. Newer schema versions are refused rather than half-read.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import numpy as np

from pybench.errors import FileFormatError
from pybench.io.formats import RESULT, check_document
from pybench.model.logs.measurements import LINK_CLASSES, MeasurementSet

OVERSUBSCRIBED = "oversubscribed: "
"""Starts the note of a result whose host ran more MPI ranks than it has cores (its times hold the turns)."""


def _number(value: object, kind: type) -> int | float:
    """A JSON number (not text, not a bool) that is finite and positive, as ``kind``."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise TypeError(f"{value!r} is not a number")
    if kind is int and (not float(value).is_integer() or value < 1):
        raise ValueError(f"{value!r} is not a whole positive number")
    if not (math.isfinite(value) and value > 0):
        raise ValueError(f"{value!r} is not finite and positive")
    return kind(value)


def parse_pybench_result(data: Any, path: str | Path = "<json>") -> list[MeasurementSet]:
    """Turn a loaded pybench result document into a :class:`MeasurementSet`.

    Raises
    ------
    FileFormatError
        Not a result document of a version this pybench reads (see :mod:`pybench.io.formats`),
        or missing / non-numeric fields.
    """
    data = check_document(data, RESULT, str(path))
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
    sizes, times, lows, highs, in_place = [], [], [], [], []
    for k, rec in enumerate(records):
        try:
            sizes.append(_number(rec["size_bytes"], int))
            times.append(_number(rec["time_s"], float))
            lows.append(_number(rec.get("time_p5_s", rec["time_s"]), float))
            highs.append(_number(rec.get("time_p95_s", rec["time_s"]), float))
            # the in-place block of a run that measured both (a replicate, as nccl-tests' logs give it)
            in_place.append(_number(rec["in_place_time_s"], float) if rec.get("in_place_time_s") is not None
                            else math.nan)
        except (KeyError, TypeError, ValueError, AttributeError):
            raise FileFormatError(f"{path}: records[{k}] needs a whole positive size_bytes and finite positive times "
                                  f"(time_s, time_p5_s, time_p95_s, in_place_time_s where given) as numbers") from None
    notes: tuple[str, ...] = ()
    hosts = data.get("hosts")
    if (isinstance(hosts, dict) and hosts and all(isinstance(n, int) and not isinstance(n, bool) and n > 0
                                                   for n in hosts.values())):
        # How many hosts the ranks ran on: the topology model needs the node count of multi-host runs.
        notes += (f"{sum(hosts.values())} ranks on {len(hosts)} host(s) per the result's hosts",)
    env = data.get("environment")
    machine = env.get("machine") if isinstance(env, dict) else None
    cores = machine.get("cores") if isinstance(machine, dict) else None
    crowded = max(hosts.values(), default=0) if isinstance(hosts, dict) and all(
        isinstance(n, int) for n in hosts.values()) else 0
    if isinstance(cores, int) and not isinstance(cores, bool) and 0 < cores < crowded and data.get("backend") == "mpi":
        # ranks taking turns on cores: the times hold the time-sharing, which another rank count shares otherwise
        notes += (f"{OVERSUBSCRIBED}{crowded} ranks on a host of {cores} cores took turns on them, and its times "
                  f"hold that: it prices no other rank count; measure at most {cores} ranks per host for that",)
    mpi = env.get("mpi") if isinstance(env, dict) else None
    library = mpi.get("library") if isinstance(mpi, dict) else None
    if isinstance(library, str) and library.strip():
        # Which MPI ran it: the topology model prices that library's own algorithms (Open MPI's rules).
        notes += (f"MPI library: {library.strip()[:160]}",)
    return [MeasurementSet(source="pybench", collective=data["collective"], backend=data["backend"],
                           world_size=world, link_class=link, dtype=str(data.get("dtype", "float32")),
                           size_bytes=np.array(sizes, dtype=np.int64), time_s=np.array(times),
                           time_low_s=np.array(lows), time_high_s=np.array(highs), path=str(path),
                           time_in_place_s=np.array(in_place) if any(math.isfinite(t) for t in in_place) else None,
                           time_statistic="median", notes=notes)]
