"""Read OSU Micro-Benchmarks output (osu_latency, osu_bw, osu_bibw, osu_allreduce ...).

Layouts: a title ``# OSU MPI[-CUDA] <Name> Test vX.Y``, option comments, then a header
``# Size  Latency (us)`` / ``# Size  Bandwidth (MB/s)`` / ``# Size  Avg Latency(us)``,
with ``-f`` adding ``Min Latency(us)  Max Latency(us)  Iterations``. MB/s is 1e6 bytes
per second (OSU's definition).

Bandwidth tests are turned into a time per message, size / bandwidth: a windowed
stream of messages, so it is the inverse throughput, not one message's latency.
osu_bibw counts both directions, so its time per message pair is 2 x size / bandwidth.
"""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np

from pybench.errors import FileFormatError
from pybench.model.logs.measurements import MeasurementSet

_TITLE_RE = re.compile(r"#\s*OSU\s+(?:MPI|OpenSHMEM|UPC\+*|NCCL)[-\w]*\s+(.*?)\s+Test\b", re.IGNORECASE)
_NP_RE = re.compile(r"(?:mpirun|mpiexec|srun|orterun)\b.*?\s-(?:np|n)\s+(\d+)")

# Words of the OSU test title -> pybench collective name.
_TITLES = [
    ("bi-directional bandwidth", "p2p_bibw"),
    ("multiple bandwidth", "p2p_mbw"),
    ("bandwidth", "p2p_bw"),
    ("latency", "p2p_latency"),
]
_COLLECTIVE_WORDS = {
    "allreduce": "allreduce", "allgather": "allgather", "reduce_scatter": "reducescatter",
    "reduce scatter": "reducescatter", "reducescatter": "reducescatter", "broadcast": "broadcast",
    "bcast": "broadcast", "all-to-all": "alltoall", "alltoall": "alltoall", "reduce": "reduce",
    "gather": "gather", "scatter": "scatter", "barrier": "barrier",
}


def looks_like_osu(text: str) -> bool:
    """True when ``text`` has an OSU title or an OSU ``# Size`` header."""
    head = text[:20000]
    return bool(_TITLE_RE.search(head)) or bool(re.search(r"^#\s*Size\s+\S", head, re.MULTILINE))


def _collective_from_title(title: str) -> str | None:
    t = title.lower()
    # Non-blocking tests (Iallreduce) time the same operation.
    t = re.sub(r"\bi(?=(allreduce|allgather|alltoall|bcast|reduce|gather|scatter))", "", t)
    for word in sorted(_COLLECTIVE_WORDS, key=len, reverse=True):
        if re.search(r"\b" + re.escape(word) + r"\b", t):
            return _COLLECTIVE_WORDS[word]
    for word, name in _TITLES:
        if word in t:
            return name
    return None


def parse_osu_text(text: str, path="<text>", collective: str | None = None,
                   world_size: int | None = None) -> list:
    """Parse one OSU benchmark output into a :class:`MeasurementSet`.

    Parameters
    ----------
    text : str
        The output, with or without the command line and ``-f`` columns.
    path : str or Path
        For messages and provenance.
    collective, world_size : optional
        Override the title / command line.

    Returns
    -------
    list of MeasurementSet
        One set; ``time_low_s``/``time_high_s`` from the Min/Max columns when present.

    Raises
    ------
    FileFormatError
        No ``# Size`` header, rows that are not numbers, or an unknown unit.
    """
    lines = text.splitlines()
    title = None
    header_idx = None
    for k, ln in enumerate(lines):
        m = _TITLE_RE.search(ln)
        if m and title is None:
            title = m.group(1)
        if re.match(r"^#\s*Size\s+\S", ln):
            header_idx = k
            break
    if header_idx is None:
        raise FileFormatError(f"{path}: no OSU '# Size ...' header line found")
    header = lines[header_idx].lstrip("#").strip()
    low = header.lower()
    if "mb/s" in low:
        kind = "bandwidth"
    elif "latency" in low:
        kind = "latency"
    else:
        raise FileFormatError(f"{path}: OSU header {header!r} has neither 'Latency (us)' nor "
                              f"'Bandwidth (MB/s)'")
    # -f adds "Min Latency(us) Max Latency(us) Iterations" after the average.
    has_minmax = "min latency" in low and "max latency" in low
    name = collective or (_collective_from_title(title) if title else None)
    if name is None:
        name = "p2p_bw" if kind == "bandwidth" else "p2p_latency"
    np_match = _NP_RE.search(text[:20000])
    world = world_size
    notes = []
    if world is None:
        if np_match:
            world = int(np_match.group(1))
            notes.append(f"world size {world} from the launcher command line")
        elif name.startswith("p2p_"):
            world = 2
            notes.append("world size 2: point-to-point test")

    sizes, values, lows, highs = [], [], [], []
    for k in range(header_idx + 1, len(lines)):
        ln = lines[k].strip()
        if not ln or ln.startswith("#"):
            continue
        toks = ln.split()
        if not toks[0].isdigit():
            # Trailing shell noise ends the table.
            if sizes:
                break
            continue
        try:
            sizes.append(int(toks[0]))
            values.append(float(toks[1]))
            if has_minmax:
                lows.append(float(toks[2]))
                highs.append(float(toks[3]))
        except (ValueError, IndexError):
            raise FileFormatError(f"{path}: line {k + 1}: expected size and "
                                  f"{'bandwidth' if kind == 'bandwidth' else 'latency'} numbers, "
                                  f"got {ln[:60]!r}") from None
    if not sizes:
        raise FileFormatError(f"{path}: OSU table under {header!r} has no rows")
    size_arr = np.array(sizes, dtype=np.int64)
    val = np.array(values, dtype=float)
    if np.any(val <= 0):
        bad = int(size_arr[np.argmax(val <= 0)])
        raise FileFormatError(f"{path}: zero or negative value at size {bad}")
    time_low = time_high = None
    if kind == "bandwidth":
        # MB/s with MB = 1e6 B; bibw moved 2 x size per message pair.
        moved = size_arr * (2.0 if name == "p2p_bibw" else 1.0)
        time_s = moved / (val * 1e6)
        notes.append("time per message = size / bandwidth (inverse throughput of a window)")
    else:
        time_s = val * 1e-6
        if has_minmax:
            time_low, time_high = np.array(lows) * 1e-6, np.array(highs) * 1e-6
    backend = "mpi"
    if title and "nccl" in title.lower():
        backend = "nccl"
    return [MeasurementSet(source="osu", collective=name, backend=backend, world_size=world,
                           link_class=None, dtype="byte", size_bytes=size_arr, time_s=time_s,
                           time_low_s=time_low, time_high_s=time_high, path=str(path),
                           time_statistic="mean", notes=tuple(notes))]


def load_osu(path, collective: str | None = None, world_size: int | None = None) -> list:
    """Read an OSU output file; see :func:`parse_osu_text`."""
    try:
        text = Path(path).read_text(encoding="utf-8", errors="replace")
    except OSError as e:
        raise FileFormatError(f"{path}: cannot read ({e.strerror})") from None
    return parse_osu_text(text, path, collective, world_size)
