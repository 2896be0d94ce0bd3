"""Read vTrain's CSV tables of nccl-tests sweeps, as they are.

vTrain (github VIA-Research/vTrain, ``trace/a100/AR_GPU{n}_1M_1024M_LUT``) tabulates
nccl-tests runs one file per world size::

    size(B),count,type,time(ns),busbw(GB/s),time(ns),busbw(GB/s)
    1048576,262144,float,44210,23.72,45100,23.25

The columns are nccl-tests' out-of-place and in-place time and busbw, with times in
nanoseconds. The table names neither the collective nor the rank count: both come from the
file name (``..._allreduce_{n}gpu.csv``, ``AR_GPU{n}_...``), and the rank count is checked
against busbw / (size / time) where the collective's bus factor tells it.
"""

from __future__ import annotations

import math
import re
from pathlib import Path

import numpy as np

from pybench.collectives import COLLECTIVES, dtype_name
from pybench.errors import FileFormatError
from pybench.model.logs.measurements import MeasurementSet

_HEADER_RE = re.compile(r"^\s*size\s*\(B\)\s*,\s*count\s*,\s*type\s*,\s*time\s*\(ns\)", re.IGNORECASE)
_WORLD_RES = (re.compile(r"(\d+)\s*gpus?(?![a-z])", re.IGNORECASE), re.compile(r"gpus?_?(\d+)", re.IGNORECASE))
# File-name words -> pybench collective (longest first; AR/AG/RS are vTrain's own abbreviations).
_NAME_WORDS = (("reduce_scatter", "reducescatter"), ("reducescatter", "reducescatter"),
               ("all_reduce", "allreduce"), ("allreduce", "allreduce"), ("all_gather", "allgather"),
               ("allgather", "allgather"), ("alltoall", "alltoall"), ("all_to_all", "alltoall"),
               ("broadcast", "broadcast"), ("ar", "allreduce"), ("ag", "allgather"), ("rs", "reducescatter"))
_INTRA_WORDS = ("nvswitch", "nvlink", "pcie")


def looks_like_vtrain_csv(text: str) -> bool:
    """True when the first non-comment line is vTrain's ``size(B),count,type,time(ns),...`` header."""
    for ln in text[:4096].splitlines():
        if ln.strip() and not ln.lstrip().startswith("#"):
            return bool(_HEADER_RE.match(ln))
    return False


def _collective_from_name(name: str) -> str | None:
    lower = name.lower()
    # Words and letter/digit runs: "AR_GPU8_1M" -> ar, gpu, 8, 1, m.
    tokens = set(re.findall(r"[a-z]+|\d+", lower))
    for word, collective in _NAME_WORDS:
        if word in tokens or (len(word) > 2 and word in lower):
            return collective
    return None


def _world_from_name(name: str) -> int | None:
    for pattern in _WORLD_RES:
        m = pattern.search(name)
        if m and int(m.group(1)) >= 1:
            return int(m.group(1))
    return None


def _rows(text: str, path) -> tuple[list[int], list[str], list[float], list[float], list[float]]:
    """(sizes, dtypes, out-of-place ns, busbw GB/s, in-place ns) of every data row."""
    sizes: list[int] = []
    types: list[str] = []
    times: list[float] = []
    buses: list[float] = []
    in_place: list[float] = []
    seen_header = False
    for k, raw in enumerate(text.splitlines(), start=1):
        ln = raw.strip()
        if not ln or ln.startswith("#"):
            continue
        if not seen_header:
            seen_header = bool(_HEADER_RE.match(ln))
            continue
        cells = [c.strip() for c in ln.split(",")]
        try:
            if len(cells) < 5:
                raise ValueError
            size, t, bus = int(cells[0]), float(cells[3]), float(cells[4])
            ip = float(cells[5]) if len(cells) > 5 and cells[5] else math.nan
        except ValueError:
            raise FileFormatError(f"{path}: line {k}: expected size,count,type,time(ns),busbw(GB/s)"
                                  f"[,time(ns),busbw(GB/s)], got {ln[:80]!r}") from None
        if size <= 0 or not (math.isfinite(t) and t > 0) or not math.isfinite(bus):
            raise FileFormatError(f"{path}: line {k}: size {cells[0]} and time {cells[3]} ns must be "
                                  f"positive finite numbers")
        sizes.append(size)
        types.append(cells[2])
        times.append(t)
        buses.append(bus)
        in_place.append(ip if ip > 0 else math.nan)
    if not sizes:
        raise FileFormatError(f"{path}: vTrain table has no data rows under its header")
    return sizes, types, times, buses, in_place


def _bus_factor(sizes: np.ndarray, time_s: np.ndarray, busbw: np.ndarray) -> float:
    """busbw / algbw (the collective's bus factor), median over rows with 3+ significant digits."""
    algbw = sizes / time_s / 1e9
    good = busbw >= 1.0
    return float(np.median(busbw[good] / algbw[good])) if np.any(good) else math.nan


def parse_vtrain_csv(text: str, path="<csv>", collective: str | None = None,
                     world_size: int | None = None) -> list[MeasurementSet]:
    """Parse one vTrain CSV table into a :class:`MeasurementSet`.

    Parameters
    ----------
    text : str
        The table (header line first; ``#`` comment lines allowed).
    path : str or Path
        File name: it says the collective and the GPU count; named in every error.
    collective, world_size : optional
        Override what the file name says.

    Returns
    -------
    list of MeasurementSet
        One set: out-of-place times in ``time_s``, in-place times in ``time_in_place_s``.

    Raises
    ------
    FileFormatError
        A row that is not numbers (file and line named), no rows, a name that says neither
        collective nor GPU count (and no override), or busbw that contradicts the GPU count.
    """
    name = Path(str(path)).name
    sizes, types, times, buses, in_place = _rows(text, path)
    notes: list[str] = []
    coll = collective or _collective_from_name(name)
    if coll is None:
        raise FileFormatError(f"{path}: the file name does not say which collective the vTrain table "
                              f"measured (e.g. ..._allreduce_8gpu.csv); give --collective (collective=... in Python)")
    size_arr = np.array(sizes, dtype=np.int64)
    time_s = np.array(times) * 1e-9
    factor = _bus_factor(size_arr.astype(float), time_s, np.array(buses))
    world = world_size or _world_from_name(name)
    spec = COLLECTIVES.get(coll)
    if world is None:
        raise FileFormatError(f"{path}: the file name does not say the GPU count (e.g. ..._8gpu.csv); "
                              f"pass world_size=...")
    notes.append(f"world size {world} from the file name" if world_size is None else "world size given")
    if spec is not None and math.isfinite(factor) and abs(factor / spec.busbw_factor(world) - 1) > 0.05:
        raise FileFormatError(f"{path}: busbw/algbw = {factor:.3f} contradicts {world} ranks of {coll} "
                              f"(expected {spec.busbw_factor(world):.3f}); pass world_size=... or check the name")
    link = None
    if any(w in name.lower() for w in _INTRA_WORDS):
        link = "intra-node"
        notes.append("link class intra-node from the file name (one node's NVLink/NVSwitch/PCIe)")
    ip = np.array(in_place) * 1e-9
    return [MeasurementSet(source="vtrain", collective=coll, backend="nccl", world_size=world, link_class=link,
                           dtype=dtype_name(types[0]), size_bytes=size_arr, time_s=time_s,
                           time_in_place_s=ip if np.any(np.isfinite(ip)) else None, path=str(path),
                           time_statistic="mean", notes=tuple(notes))]
