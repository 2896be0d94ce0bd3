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

import dataclasses
import math
import re

import numpy as np

from pybench.errors import FileFormatError, SeveralTestsNamed
from pybench.model.logs.flux_jobspec import flux_layout
from pybench.model.logs.launcher_labels import clean_lines
from pybench.model.logs.launcher_lines import continued_lines, read_launch
from pybench.model.logs.measurements import MeasurementSet, listed_hosts
from pybench.model.logs.nccl_tests_failure import EmptyTable

# Group 1: the library word (MPI, MPI-CUDA, NCCL, or MPI_Put / MPI_Get ... of the one-sided tests); 2: the test.
_TITLE_RE = re.compile(r"#\s*OSU\s+((?:MPI|OpenSHMEM|UPC\+*|NCCL)[-\w]*)\s+(.*?)\s+Test\b", re.IGNORECASE)
# A title and header whose '#' a README's Markdown removed: the title still starts its line with its version, the
# header follows within three lines and names OSU's columns ("  Size       Avg Latency(us) ...").
_BARE_TITLE_RE = re.compile(r"^\s*OSU\s+(?:MPI|OpenSHMEM|UPC\+*|NCCL)[-\w]*\s+.*?\s+Test\s+v\d", re.IGNORECASE)
_BARE_HEADER_RE = re.compile(r"^\s*Size\s+(?:Avg\s+)?(?:Latency|Bandwidth|Bi-Bandwidth|Overall|Pure|MB/s)",
                             re.IGNORECASE)
_ASCII_DIGITS = re.compile(r"[0-9]+")
# Latency in us, bandwidth in MB/s: beyond these no measurement lands (nccl-tests' reader bounds
# its times alike), and the fit would overflow.
_PLAUSIBLE = {"latency": (1e-6, 1e15), "bandwidth": (1e-9, 1e15)}
# A table's header; a collector may indent the output.
_HEADER_RE = re.compile(r"^\s*#\s*Size\s+\S")
# osu_mbw_mr: "# [ pairs: 48 ] [ window size: 64 ]"; each pair is two ranks.
_PAIRS_RE = re.compile(r"#\s*\[\s*pairs:\s*(\d+)\s*\]")

# The point-to-point tests' titles (what is left of them, lower case) -> pybench name. Only these
# are point-to-point: a title naming no collective and none of these is an unknown test.
_P2P_TITLES = [
    (re.compile(r"^bi-directional bandwidth$"), "p2p_bibw"),
    (re.compile(r"^multiple bandwidth\s*/\s*message rate$"), "p2p_mbw"),
    (re.compile(r"^bandwidth$"), "p2p_bw"),
    (re.compile(r"^latency$"), "p2p_latency"),
    # osu_latency_mt, osu_bw_mt ...: several threads per rank share its messages, another test than one
    # thread's (never pooled with it as a replicate)
    (re.compile(r"^multi-threaded\s+bi-directional bandwidth$"), "p2p_bibw_mt"),
    (re.compile(r"^multi-threaded\s+bandwidth$"), "p2p_bw_mt"),
    (re.compile(r"^multi-threaded\s+latency$"), "p2p_latency_mt"),
]
_COLLECTIVE_WORDS = {
    # The vector variants (equal counts in OSU, but their own call) keep their own names.
    "allgatherv": "allgatherv", "alltoallv": "alltoallv", "all-to-allv": "alltoallv", "alltoallw": "alltoallw",
    "all-to-allw": "alltoallw", "gatherv": "gatherv", "scatterv": "scatterv",
    "reduce_scatter_block": "reducescatter",
    "allreduce": "allreduce", "allgather": "allgather", "reduce_scatter": "reducescatter",
    "reduce scatter": "reducescatter", "reducescatter": "reducescatter", "broadcast": "broadcast",
    "bcast": "broadcast", "all-to-all": "alltoall", "alltoall": "alltoall", "reduce": "reduce",
    "gather": "gather", "scatter": "scatter", "barrier": "barrier",
}


_TWO_RANK_TESTS = ("p2p_latency", "p2p_bw", "p2p_bibw", "p2p_latency_mt", "p2p_bw_mt", "p2p_bibw_mt")
"""osu_latency, osu_bw and osu_bibw: exactly 2 ranks (osu_mbw_mr's pairs are counted from its header)."""

PER_RANK_SIZES = ("allgather", "alltoall")
"""Collectives whose OSU size is one rank's block; pybench's size is the whole buffer (DESIGN.md)."""


def looks_like_osu(text: str) -> bool:
    """True when ``text`` has an OSU title or an OSU ``# Size`` header (anywhere: a job's preamble may be long), or
    a title and header whose '#' was lost (:func:`_restore_lost_hashes`)."""
    return (bool(_TITLE_RE.search(text)) or bool(re.search(r"^#\s*Size\s+\S", text, re.MULTILINE))
            or (bool(re.search(r"^\s*OSU\s", text, re.MULTILINE)) and _restore_lost_hashes(text.splitlines())[1]))


def _restore_lost_hashes(lines: list[str]) -> tuple[list[str], bool]:
    """``lines`` with '#' put back before each OSU title that lost it and the lines down to its table's header
    (a '# Datatype:' line between them too), and whether any was; a line that merely starts with "Size" and no
    such title above it stays as it is."""
    out, restored = list(lines), False
    for k, line in enumerate(lines):
        if not _BARE_TITLE_RE.match(line):
            continue
        header = next((j for j in range(k + 1, min(k + 4, len(lines))) if _BARE_HEADER_RE.match(lines[j])), None)
        if header is not None:
            out[k:header + 1] = [ln if ln.lstrip().startswith("#") else "# " + ln.lstrip()
                                 for ln in lines[k:header + 1]]
            restored = True
    return out, restored


def _collective_from_title(library: str, title: str) -> str:
    """pybench's name for an OSU test from its title's library suffix and words; an unknown test
    keeps its title, so that fit refuses it by name rather than fitting it as something else."""
    if "_" in library:
        return f"one-sided {library.split('_', 1)[1].lower()}"  # osu_put_latency ...: RMA, not send/recv
    t = title.lower().strip()
    if "neighbo" in t:  # MPI_Neighbor_*: a graph's neighbours, not every rank: no collective pybench models
        return f"OSU {title.strip()} test"
    # Non-blocking tests (Iallreduce) time the same operation.
    t = re.sub(r"\bi(?=(allreduce|allgather|alltoall|bcast|reduce|gather|scatter))", "", t)
    for word in sorted(_COLLECTIVE_WORDS, key=len, reverse=True):
        if re.search(r"\b" + re.escape(word) + r"\b", t):
            return _COLLECTIVE_WORDS[word]
    for pattern, name in _P2P_TITLES:
        if pattern.match(t):
            return name
    return f"OSU {title.strip()} test"


Columns = tuple[int, int | None, int | None]
"""A table's columns of its value, its min and its max (None where absent)."""


def _headers(path, lines: list[str]) -> list[tuple[int, tuple[str, str] | None, str, Columns]]:
    """Every table: (index of its ``# Size`` header, the title above it, kind 'latency' or
    'bandwidth', the columns of its value, min and max (None where absent)). A log may hold several
    tests (one per pair, osu_bw then osu_bibw): each is a table of its own, none dropped."""
    title: tuple[str, str] | None = None
    found: list[tuple[int, tuple[str, str] | None, str, Columns]] = []
    for k, ln in enumerate(lines):
        m = _TITLE_RE.search(ln)
        if m:
            title = (m.group(1), m.group(2))
        if _HEADER_RE.match(ln):
            low = ln.lstrip().lstrip("#").strip().lower()
            if "mb/s" in low:
                found.append((k, title, "bandwidth", (1, None, None)))
            elif "latency" in low:
                # -f adds "Min Latency(us) Max Latency(us) Iterations" after the average.
                found.append((k, title, "latency", (1, 2, 3) if "min latency" in low and "max latency" in low
                              else (1, None, None)))
            elif "pure comm" in low:
                found.append((k, title, "latency", (_pure_comm_column(path, k, low), None, None)))
            else:
                raise FileFormatError(f"{path}: line {k + 1}: OSU header {ln.strip()!r} has neither "
                                      f"'Latency (us)' nor 'Bandwidth (MB/s)'")
            title = None
    if not found:
        raise FileFormatError(f"{path}: no OSU '# Size ...' header line found")
    return found


def _pure_comm_column(path, k: int, header: str) -> int:
    """Column of a non-blocking test's ``Pure Comm.(us)``: the operation timed without the compute it
    overlaps, which is the collective's own latency (``Overall`` adds that compute). Every name after
    ``Size`` ends in its unit, ``(us)`` or ``(%)``, some hold a space; ``-f`` adds names before it."""
    names = ["size", *re.findall(r"[^\s(][^()]*\([^)]*\)", header.strip()[len("size"):])]
    hits = [i for i, name in enumerate(names) if name.startswith("pure comm")]
    if not header.strip().startswith("size") or len(hits) != 1:
        raise FileFormatError(f"{path}: line {k + 1}: cannot find the one 'Pure Comm.(us)' column of this "
                              f"non-blocking OSU header; give the table as OSU printed it")
    return hits[0]


def _rows(path, lines: list[str], header: int, kind: str, columns: Columns,
          notes: list[str]) -> tuple[list[int], list[float], list[float], list[float]]:
    """Sizes, values and min/max of the table under ``header``.

    Lines that are not rows (MVAPICH or Open MPI warnings printed between rows, shell noise)
    are skipped, not taken as the end of the table: it ends at the next test's header or title.
    Size 0 (osu_latency's first row) moves no data: skipped, with a note.
    """
    sizes: list[int] = []
    values: list[float] = []
    lows: list[float] = []
    highs: list[float] = []
    printed: list[tuple[int, str]] = []  # (line, value as printed) of each row kept
    zeros = 0
    for k in range(header + 1, len(lines)):
        ln = lines[k].strip()
        if _HEADER_RE.match(ln) or _TITLE_RE.search(ln):
            break
        toks = ln.split()
        if not toks or not _ASCII_DIGITS.fullmatch(toks[0]):  # str.isdigit takes '²', which int() refuses
            continue
        if len(toks[0]) > 19 or int(toks[0]) > 2 ** 60:
            raise FileFormatError(f"{path}: line {k + 1}: impossible size {toks[0][:24]} (over 2^60 B)")
        value_col, low_col, high_col = columns
        try:
            value = float(toks[value_col])
            low, high = (float(toks[low_col]), float(toks[high_col])) if low_col and high_col else (value, value)
        except (ValueError, IndexError):
            if sum(1 for t in toks[1:] if re.search("[A-Za-z]", t)) >= 2:  # text that starts with a number
                notes.append(f"line {k + 1}: not a row of the table (text starting with a number), skipped")
                continue
            if sizes and len(toks) <= max(c for c in columns if c) and not any(ln.strip() for ln in lines[k + 1:]):
                # the log's last line, short of its columns: a run cut in its row
                notes.append(f"line {k + 1}: size {toks[0]} left out: the log ends inside its row ({ln[:40]!r}): "
                             f"a run cut short")
                break
            raise FileFormatError(f"{path}: line {k + 1}: expected size and {kind} numbers, "
                                  f"got {ln[:60]!r}") from None
        if toks[-1].lower() == "fail":  # -c: OSU checked the result and it was wrong
            notes.append(f"line {k + 1}: size {toks[0]} left out: it failed OSU's validation (-c)")
            continue
        if int(toks[0]) == 0:
            notes.append(f"line {k + 1}: size 0 skipped (no data moved)")
            zeros += 1
            continue
        if not (math.isfinite(value) and value > 0):
            raise FileFormatError(f"{path}: line {k + 1}: {kind} {toks[value_col]} at size {toks[0]} is not a "
                                  f"positive number")
        if not low - _PRINTED_STEP <= value <= high + _PRINTED_STEP:  # (OSU rounds each to 2 decimals)
            raise FileFormatError(f"{path}: line {k + 1}: size {toks[0]}: its average {toks[value_col]} is not between "
                                  f"its min {toks[low_col or 0]} and max {toks[high_col or 0]}: the columns are not "
                                  f"in OSU's order (Avg, Min, Max); give the table as OSU printed it")
        if not _PLAUSIBLE[kind][0] <= value <= _PLAUSIBLE[kind][1]:
            # 1e-300 MB/s would be a 1e294 s message: refuse it here, not overflow in the fit
            raise FileFormatError(f"{path}: line {k + 1}: impossible {kind} {toks[value_col]} at size {toks[0]} "
                                  f"(outside {_PLAUSIBLE[kind][0]:g} .. {_PLAUSIBLE[kind][1]:g} "
                                  f"{'us' if kind == 'latency' else 'MB/s'})")
        sizes.append(int(toks[0]))
        values.append(value)
        lows.append(low)
        highs.append(high)
        printed.append((k, toks[value_col]))
    if not sizes:
        raise EmptyTable(f"{path}: line {header + 1}: OSU table has no rows" + (" other than size 0" if zeros else ""),
                         None, header + 1)
    if _cut_short(lines, printed):
        k, as_printed = printed[-1]
        notes.append(f"line {k + 1}: size {sizes[-1]} left out: the log ends inside its row ({as_printed!r}, where OSU "
                     f"prints {_decimals(printed[0][1])} decimals): a run cut short")
        return sizes[:-1], values[:-1], lows[:-1], highs[:-1]
    return sizes, values, lows, highs


_PRINTED_STEP = 0.01
"""The last digit OSU prints (``%.2f``): an average, min and max each rounded to it."""


def _decimals(value: str) -> int:
    return len(value.partition(".")[2])


def _cut_short(lines: list[str], printed: list[tuple[int, str]]) -> bool:
    """Whether the table's last row is the log's last line and its value has fewer decimals than OSU printed on
    every other row (a log cut inside that row: ``69`` where ``6966.12`` was being written)."""
    if len(printed) < 2 or any(ln.strip() for ln in lines[printed[-1][0] + 1:]):
        return False
    return _decimals(printed[-1][1]) < min(_decimals(v) for _, v in printed[:-1])


# OSU 7 prints "# Datatype: MPI_FLOAT." above the table; older versions move bytes (MPI_CHAR).
_OSU_TYPES = {"MPI_CHAR": "byte", "MPI_SIGNED_CHAR": "byte", "MPI_BYTE": "byte", "MPI_INT": "int32",
              "MPI_FLOAT": "float32", "MPI_DOUBLE": "float64"}


# OSU's reductions (osu_allreduce, osu_reduce, osu_reduce_scatter) reduced floats before OSU 7.1 made the
# type an option and started printing it; the data-movement tests moved bytes (MPI_CHAR).
_FLOAT_REDUCTIONS = ("allreduce", "reduce", "reducescatter")


def _previous_header(lines: list[str], header: int) -> int:
    """Index after the table header before ``header`` (0 if none): where this table's preamble starts."""
    for k in range(header - 1, -1, -1):
        if _HEADER_RE.match(lines[k]):
            return k + 1
    return 0


def _dtype(preamble: list[str], collective: str, notes: list[str]) -> str:
    for ln in preamble:
        m = re.match(r"#\s*Datatype:\s*(MPI_[A-Z_]+)", ln.strip())
        if m:
            name = _OSU_TYPES.get(m.group(1))
            if name is None:
                notes.append(f"datatype {m.group(1)} (kept as bytes)")
                return "byte"
            return name
    if collective in _FLOAT_REDUCTIONS:
        notes.append(f"no '# Datatype:' line: OSU before 7.1 reduces MPI_FLOAT in {collective}")
        return "float32"
    return "byte"


def _world(preamble: list[str], name: str, world_size: int | None, notes: list[str]) -> int | None:
    """Ranks from the override, the launcher line above the table, osu_mbw_mr's pair count, or 2
    for the other point-to-point tests."""
    if name in _TWO_RANK_TESTS:  # OSU runs these between 2 ranks only
        if world_size not in (None, 2):
            notes.append(f"--world {world_size} not applied to this table: OSU's {name} runs between 2 ranks")
        notes.append("world size 2: point-to-point test")
        launch = next((x for ln in reversed(preamble) if (x := read_launch(ln)) is not None), None)
        if launch is not None and launch.hosts and launch.hosts <= 2:  # (its pair of ranks on one host or two)
            notes.append(f"2 ranks on {launch.hosts} host(s) per the {launch.launcher} command line")
        return 2
    if world_size is not None:
        return world_size
    for ln in reversed(preamble):
        launch = read_launch(ln)
        if launch is not None and launch.ranks:
            notes.append(f"world size {launch.ranks} from the {launch.launcher} command line")
            if launch.hosts:
                notes.append(f"{launch.ranks} ranks on {launch.hosts} host(s) per the {launch.launcher} command line")
            return launch.ranks
        pairs = _PAIRS_RE.search(ln)
        if pairs:
            notes.append(f"world size {2 * int(pairs.group(1))}: {pairs.group(1)} pairs of ranks")
            return 2 * int(pairs.group(1))
    return None


# osu_latency, osu_bw, osu_bibw (and their _mt, _mp, _persistent forms), osu_mbw_mr, osu_multi_lat: their ranks are
# pairs of a point-to-point test, never a collective's
_POINT_TO_POINT_PROGRAM = re.compile(r"\bosu_(?:latency|bw|bibw|mbw_mr|multi_lat)\w*")


def _world_of_table(lines: list[str], header: int, name: str, world_size: int | None,
                    notes: list[str]) -> int | None:
    """Ranks of the table under ``header``: from its own preamble (since the previous table); where that
    holds no launcher line at all, from the one rank count the log's launcher lines above agree on (of a
    collective, not those that run a point-to-point test). A launcher line of its own without a count says
    nothing: an earlier test's count is not this one's."""
    own = lines[_previous_header(lines, header):header]
    world = _world(own, name, world_size, notes)
    if world is not None or any(read_launch(ln) for ln in own):
        return world
    above = [ln for ln in lines[:header] if name in _TWO_RANK_TESTS or not _POINT_TO_POINT_PROGRAM.search(ln)]
    counts = {launch.ranks for ln in above if (launch := read_launch(ln)) and launch.ranks}
    if len(counts) == 1:
        return _world(above, name, world_size, notes)
    flux = None if counts else flux_layout(_trailer(lines, header))  # (under Flux, no launcher line is printed)
    if flux is None:
        return None
    notes.append(f"world size {flux.ranks} from the Flux jobspec after the table")
    notes.append(f"{flux.ranks} ranks on {flux.nodes} host(s) per the Flux jobspec")
    return flux.ranks


_BUFFERS_RE = re.compile(r"#\s*Send Buffer on (\w+).*Receive Buffer on (\w+)", re.IGNORECASE)


def _host_buffers(lines: list[str], header: int) -> bool:
    """Whether the table's preamble says both buffers were on the host (``# Send Buffer on HOST (H) and Receive
    Buffer on HOST (H)``): a CUDA build of OSU run without ``-d cuda``."""
    said = [m for ln in lines[_previous_header(lines, header):header] if (m := _BUFFERS_RE.search(ln))]
    return bool(said) and all(g.upper() == "HOST" for g in said[-1].groups())


def _trailer(lines: list[str], header: int) -> list[str]:
    """The lines after the table under ``header``, up to the next test's title or header."""
    rest = lines[header + 1:]
    end = next((i for i, ln in enumerate(rest) if _HEADER_RE.match(ln) or _TITLE_RE.search(ln)), len(rest))
    return rest[:end]


def parse_osu_text(text: str, path="<text>", collective: str | None = None,
                   world_size: int | None = None) -> list[MeasurementSet]:
    """Parse OSU benchmark output into one :class:`MeasurementSet` per table.

    Parameters
    ----------
    text : str
        The output, with or without the command line and ``-f`` columns; several tests (one
        after the other in one log) give one set each.
    path : str or Path
        For messages and provenance.
    collective, world_size : optional
        Override the title / command line.

    Returns
    -------
    list of MeasurementSet
        One set per table; ``time_low_s``/``time_high_s`` from the Min/Max columns when present.

    Raises
    ------
    FileFormatError
        No ``# Size`` header, rows that are not numbers, or an unknown unit (file and line named).
    """
    lines = continued_lines(clean_lines(text))  # without mpirun --tag-output / srun --label prefixes; commands joined
    lines = _restore_lost_hashes(lines)[0]
    tables = _headers(path, lines)
    named = {f"{t[0]} {t[1]}".lower() for _, t, _, _ in tables if t}
    if collective is not None and len(named) > 1:
        raise SeveralTestsNamed(f"{path}: --collective {collective} would name all {len(named)} tests of this log "
                              f"alike ({', '.join(sorted(named))[:200]}); split the log into one file per test, "
                              f"or fit it without --collective")
    previous_title = None
    sets: list[MeasurementSet] = []
    skipped: list[str] = []
    for number, (header, title, kind, columns) in enumerate(tables, start=1):
        if title is None and previous_title is not None and _kind_of(previous_title) == kind:
            title = previous_title  # a header repeated without its title belongs to the same test, if of its kind
        previous_title = title
        notes = [f"table {number} of {len(tables)} (line {header + 1})"] if len(tables) > 1 else []
        try:
            sets.append(_one_table(path, lines, header, title, kind, columns, collective, world_size, notes))
        except EmptyTable as empty:
            if len(tables) == 1:
                raise
            skipped.append(f"{str(empty).removeprefix(f'{path}: ')}: that test printed nothing (it failed or was "
                           f"cut short), skipped")
    if not sets:
        raise FileFormatError(f"{path}: none of its {len(tables)} OSU tables has rows")
    return [dataclasses.replace(m, notes=(*m.notes, *skipped)) for m in sets]


def _kind_of(title: tuple[str, str]) -> str:
    """'bandwidth' or 'latency': the header a test of ``title`` prints (a latency header after a bandwidth
    test's title is another test, whose title a README left out)."""
    return "bandwidth" if _collective_from_title(*title) in ("p2p_bw", "p2p_bibw", "p2p_mbw") else "latency"


def _one_table(path, lines: list[str], header: int, title: tuple[str, str] | None, kind: str,
               columns: Columns, collective: str | None, world_size: int | None,
               notes: list[str]) -> MeasurementSet:
    """One OSU table as a MeasurementSet."""
    name = collective or (_collective_from_title(*title) if title else None)
    if name is None:
        name = "p2p_bw" if kind == "bandwidth" else "p2p_latency"
    world = _world_of_table(lines, header, name, world_size, notes)
    sizes, values, lows, highs = _rows(path, lines, header, kind, columns, notes)
    if columns[0] > 1:
        notes.append("non-blocking test: its 'Pure Comm.' column (the operation without the compute it overlaps) "
                     "is the latency")
    size_arr = np.array(sizes, dtype=np.int64)
    if name in PER_RANK_SIZES and world is not None:
        # OSU's size is each rank's block (MPI_Allgather(sendbuf, size, ...)); pybench's is the whole buffer
        size_arr = size_arr * world
        notes.append(f"sizes x {world} ranks: OSU prints each rank's block of an {name}, pybench the whole buffer")
    val = np.array(values, dtype=float)
    time_low = time_high = None
    if kind == "bandwidth":
        # MB/s with MB = 1e6 B; bibw moved 2 x size per message pair.
        moved = size_arr * (2.0 if name == "p2p_bibw" else 1.0)
        time_s = moved / (val * 1e6)
        notes.append("time per message = size / bandwidth (inverse throughput of a window)")
    else:
        time_s = val * 1e-6
        if columns[1]:
            time_low, time_high = np.array(lows) * 1e-6, np.array(highs) * 1e-6
    backend = "nccl" if title and title[0].upper().startswith("NCCL") else "mpi"
    if backend == "mpi" and title and "-" in title[0] and not _host_buffers(lines, header):
        # "MPI-CUDA": OSU's title when it was built with CUDA; -d cuda (D D) puts the buffers there
        notes.append(f"buffers in {title[0].split('-', 1)[1].lower()} device memory (OSU {title[0]})")
    # "# Datatype:" sits above the header (OSU 7.3+) or just below it (7.2)
    dtype = _dtype(lines[_previous_header(lines, header):header + 2], name, notes)
    # the hosts a launcher line or Flux's jobspec names say which links the ranks crossed
    hosts = listed_hosts(notes, world)
    link = None if hosts is None else "inter-node" if hosts > 1 else "intra-node"
    return MeasurementSet(source="osu", collective=name, backend=backend, world_size=world,
                          link_class=link, dtype=dtype, size_bytes=size_arr, time_s=time_s,
                          time_low_s=time_low, time_high_s=time_high, path=str(path),
                          time_statistic="mean", notes=tuple(notes))
