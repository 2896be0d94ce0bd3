"""One nccl-tests result table: its columns, its rows (with their line numbers), its time unit.

A table starts at a ``size count type ...`` header and ends at the footer (``Out of bounds
values``, ``Avg bus bandwidth``), at the next header, or at the end of the text. Lines that
are not rows inside it (warnings, other ranks' output, blank lines) are skipped, never taken
as its end, so a table is not silently cut short. A line that starts with a number but does
not have the header's columns is an error naming the file and the line.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field

import numpy as np

from pybench.errors import FileFormatError
from pybench.model.logs.nccl_tests_failure import EmptyTable, reported_failure, wrong_note
from pybench.model.logs.nccl_tests_precision import Cell, half_last_digit

FOOTERS = ("Avg bus bandwidth", "Out of bounds", "Collective test concluded")
CPUTIME_NOTE = ("times are nccl-tests' cputime columns (-C 1): measured on the host, for non-blocking collectives "
                "the time to launch them, not to complete them; its algbw and busbw come from the operations' own time")


@dataclass(frozen=True)
class Columns:
    """Where each value sits in a row, from the header tokens."""

    names: tuple[str, ...]
    size: int
    count: int
    type: int
    time: tuple[int, ...]
    algbw: tuple[int, ...]
    busbw: tuple[int, ...]
    redop: int | None
    root: int | None
    p5: int | None
    p95: int | None
    wrong: tuple[int, ...] = ()
    """The ``#wrong`` columns: the elements -c found wrong in each half (N/A when it did not check)."""

    @property
    def old_layout(self) -> bool:
        """Pre-2020 layout: an ``error`` column and no ``redop``."""
        return "error" in self.names or "redop" not in self.names

    @property
    def cputime(self) -> bool:
        """``-C 1`` (nccl-tests 2022 and later): the time columns are named ``cputime``."""
        return "cputime" in self.names


@dataclass(kw_only=True)
class Rows:
    """What every nccl-tests results row gives, read from a text table or a ``-J`` JSON log alike."""

    sizes: list[int] = field(default_factory=list)
    counts: list[int] = field(default_factory=list)
    times: list[float] = field(default_factory=list)
    in_place: list[float] = field(default_factory=list)
    algbw: list[float] = field(default_factory=list)
    busbw: list[float] = field(default_factory=list)
    keys: list[tuple[str, str]] = field(default_factory=list)
    """(type, redop) of each row."""
    type_notes: list[tuple[str, str]] = field(default_factory=list)
    """(type, note) of a row skipped in one element type's sweep: that sweep's alone, not the other types'."""
    redops: set[str] = field(default_factory=set)
    roots: set[str] = field(default_factory=set)

    def groups(self) -> list[tuple[np.ndarray, tuple[str, str], list[str]]]:
        """(row mask, (type, redop), note) per element type and reduction, in order of appearance.

        ``-d all`` / ``-o all`` runs repeat every size once per type and op: each is its own
        sweep. The note names the group when there are several, else it is empty.
        """
        keys = list(dict.fromkeys(self.keys))
        return [(np.array([k == key for k in self.keys]), key,
                 ([f"rows with type {key[0]}" + (f", redop {key[1]}" if key[1] else "")] if len(keys) > 1 else [])
                 + [note for kind, note in self.type_notes if kind == key[0]])
                for key in keys]


@dataclass
class Table(Rows):
    """Rows of one table as parsed (times in the table's own unit until :func:`read_table` scales them)."""

    columns: Columns
    header_line: int
    lines: list[int] = field(default_factory=list)
    p5: list[float] = field(default_factory=list)
    p95: list[float] = field(default_factory=list)
    bw_half: list[tuple[float, float]] = field(default_factory=list)
    """Half the last printed digit of each row's algbw and busbw: how far the printed value may be from the true one."""
    cells: list[tuple[Cell, Cell | None]] = field(default_factory=list)
    """Each row's printed (time, algbw, busbw) tokens, out-of-place then in-place: how precise its time is."""
    unit_s: float | None = None
    notes: list[str] = field(default_factory=list)
    wrong: list[tuple[int, str]] = field(default_factory=list)
    """(size, half) of each timing left out for a non-zero #wrong; half ``""`` when the row had no other."""
    wrong_rows: int = 0
    """Rows left with no timing by :attr:`wrong`."""
    unchecked: dict[str, int] = field(default_factory=dict)
    """Per half, the rows of both halves whose #wrong printed N/A: no check reported there."""
    reported: dict[str, int] = field(default_factory=dict)
    """Per half, the rows of both halves that printed its #wrong cell."""


# The NCCL 1.x test programs (all_reduce_test ..., 2016-2017) named the columns differently.
_NCCL1_NAMES = {"bytes": "size", "N": "count", "op": "redop", "res": "error"}


def header_tokens(line: str) -> list[str] | None:
    """The header's column names when ``line`` is a table header, else None (NCCL 1.x names
    ``bytes N type op ... res`` read as ``size count type redop ... error``)."""
    toks = line.strip().lstrip("#").split()
    if len(toks) >= 5 and toks[0] == "bytes" and toks[1] == "N":
        toks = [_NCCL1_NAMES.get(t, t) for t in toks]
    if len(toks) >= 5 and toks[0] == "size" and toks[1] == "count":
        return toks
    return None


def _columns(path, names: list[str], lineno: int) -> Columns:
    def where(name: str) -> int | None:
        return names.index(name) if name in names else None

    tname = "cputime" if "cputime" in names else "time"
    time = tuple(k for k, n in enumerate(names) if n == tname)
    alg = tuple(k for k, n in enumerate(names) if n == "algbw")
    bus = tuple(k for k, n in enumerate(names) if n == "busbw")
    size, count, typ = where("size"), where("count"), where("type")
    if size is None or count is None or typ is None or not time or not alg or not bus:
        raise FileFormatError(f"{path}: line {lineno}: nccl-tests header lacks the size/count/type/time/algbw/"
                              f"busbw columns: {' '.join(names)}")
    wrong = tuple(k for k, n in enumerate(names) if n in ("#wrong", "wrong"))
    return Columns(tuple(names), size, count, typ, time, alg, bus, where("redop"), where("root"),
                   where("p5"), where("p95"), wrong)


# (half, time, algbw, busbw, #wrong) column indices of one half of a row.
Half = tuple[str, int, int, int, int | None]


def _row_layout(path, cols: Columns, toks: list[str], lineno: int) -> list[Half]:
    """The halves this row prints, out-of-place first (half ``""`` in a table of one)."""
    ncols = len(cols.names)
    names = ("out-of-place", "in-place") if len(cols.time) > 1 else ("",)
    wrong = cols.wrong + (None,) * len(names)
    halves = [(n, t, a, b, w) for n, t, a, b, w in zip(names, cols.time, cols.algbw, cols.busbw, wrong)]
    if len(toks) >= ncols - (1 if cols.names[-1] == "timestamp" else 0):
        return halves
    if len(toks) == ncols - 4 and len(cols.time) > 1:
        # Out-of-place left blank (trace replay): the in-place columns, shifted left by 4.
        n, t, a, b, w = halves[1]
        return [(n, t - 4, a - 4, b - 4, None if w is None else w - 4)]
    raise FileFormatError(f"{path}: line {lineno}: expected {ncols} columns as in the header, "
                          f"got {len(toks)}: {' '.join(toks)[:80]}")


def _number(toks: list[str], index: int | None) -> float:
    if index is None or index >= len(toks):
        return math.nan
    try:
        return float(toks[index])
    except ValueError:
        return math.nan  # e.g. "N/A": optional evidence only


def _blank_redop(cols: Columns, toks: list[str]) -> list[str]:
    """The row with its blank redop cell restored: old all_to_all_perf printed nothing there."""
    ncols = len(cols.names)
    if cols.redop is None or len(toks) != ncols - 1 or cols.redop >= len(toks):
        return toks
    try:
        float(toks[cols.redop])  # the cell holds the next column's number: redop was left blank
    except ValueError:
        return toks
    return [*toks[:cols.redop], "", *toks[cols.redop:]]


def is_wrong(value) -> bool:
    """Whether a #wrong / nwrong / wrong value counts wrong elements (``N/A``, no check, and 0 do not). A
    value that is neither a count nor "no check" cannot vouch for its row: it counts as wrong."""
    if value is None or str(value).strip().upper() in ("", "N/A", "NA", "-"):
        return False
    try:
        return not float(value) <= 0  # NaN too
    except (TypeError, ValueError):
        return True


def _right_halves(table: Table, toks: list[str], halves: list[Half], size: int) -> list[Half]:
    """``halves`` less those whose #wrong column counts wrong elements (-c checked them): a wrong result
    is no measurement. A right in-place half then stands for the row."""
    unchecked = [h for h in halves if h[4] is not None and h[4] < len(toks) and toks[h[4]].upper() == "N/A"]
    for h in halves if len(halves) > 1 else ():  # (a row of one half: cut short, or a trace replay's)
        if h[4] is not None and h[4] < len(toks):
            table.reported[h[0]] = table.reported.get(h[0], 0) + 1
            table.unchecked[h[0]] = table.unchecked.get(h[0], 0) + (h in unchecked)
    kept = [h for h in halves if not (h[4] is not None and h[4] < len(toks) and is_wrong(toks[h[4]]))]
    if len(kept) < len(halves) and all(h in unchecked for h in kept):  # no unchecked half vouches for a wrong row
        kept = []
    table.wrong.extend((size, h[0]) for h in halves if h not in kept)
    # an in-place half standing for the row must hold numbers where the out-of-place one did
    if kept and kept[0] is not halves[0] and not all(math.isfinite(_number(toks, k)) for k in kept[0][1:4]):
        kept = []
    if not kept:
        table.wrong_rows += 1
    return kept


def no_in_place_check(table: Table) -> bool:
    """Every in-place half printed no check while out of place reported (all_to_all_perf's, sendrecv_perf's)."""
    in_place = table.reported.get("in-place", 0)
    return bool(in_place) and table.unchecked.get("in-place") == in_place and not table.unchecked.get("out-of-place")


def alltoall_fingerprint(table: Table) -> str:
    """Why a table that reads as an all-gather (per-rank counts, no reduction) is nccl-tests' all-to-all ("" where
    nothing says so): a redop column blank on every row (all_to_all_perf in 2020-2022), or no in-place check."""
    if table.columns.redop is not None and table.redops == {""} and table.roots <= {"", "-1"}:
        return ("its redop column printed blank on every row, as all_to_all_perf printed it in 2020-2022 "
                "(all_gather_perf then printed no redop column)")
    if no_in_place_check(table):
        return ("its in-place #wrong printed N/A on every row while the out-of-place check reported: all_to_all_perf "
                "reports no in-place check, all_gather_perf does")
    return ""


def _add_row(path, table: Table, toks: list[str], lineno: int) -> None:
    cols = table.columns
    toks = _blank_redop(cols, toks)
    halves = _row_layout(path, cols, toks, lineno)
    _, tc, ac, bc, _ = halves[0]
    try:
        size = int(toks[cols.size])
        count = int(toks[cols.count])
        t, a, b = float(toks[tc]), float(toks[ac]), float(toks[bc])
    except ValueError:
        raise FileFormatError(f"{path}: line {lineno}: size/count/time/algbw/busbw are not numbers: "
                              f"{' '.join(toks)[:80]}") from None
    # nccl-tests prints nan/inf where a time rounds to 0 or a bus factor is undefined (hypercube_perf)
    finite = [h for h in halves if h[3] < len(toks) and all(math.isfinite(_number(toks, k)) for k in h[1:4])]
    bad = " ".join(x for x in (toks[tc], toks[ac], toks[bc]) if not math.isfinite(float(x)))
    if not finite or finite[0] is not halves[0]:  # (skipped, or the in-place half's numbers stand for the row)
        table.notes.append(f"line {lineno}: size {size} " + (f"read from its in-place half (out of place: {bad})"
                           if finite else f"skipped (its time or bandwidth printed as {bad}, not a number)"))
        if not finite:
            return
        halves, (_, tc, ac, bc, _) = finite, finite[0]
        t, a, b = float(toks[tc]), float(toks[ac]), float(toks[bc])
    if size == 0:
        # `-b 8` on many ranks: fewer bytes than one element per rank; nothing was measured.
        table.notes.append(f"line {lineno}: size 0 skipped (below one element per rank)")
        return
    right = _right_halves(table, toks, halves, size)
    if not right:
        return
    if right[0] is not halves[0]:
        _, tc, ac, bc, _ = right[0]
        t, a, b = float(toks[tc]), float(toks[ac]), float(toks[bc])
    ic = right[1][1] if len(right) > 1 else None
    cells = [(toks[h[1]], toks[h[2]], toks[h[3]]) if h[3] < len(toks) else None for h in right[:2]]
    table.lines.append(lineno)
    table.sizes.append(size)
    table.counts.append(count)
    table.times.append(t)
    table.algbw.append(a)
    table.busbw.append(b)
    table.bw_half.append((half_last_digit(toks[ac]), half_last_digit(toks[bc])))
    table.cells.append((cells[0] or (toks[tc], toks[ac], toks[bc]), cells[1] if len(cells) > 1 else None))
    table.in_place.append(_number(toks, ic))
    table.p5.append(_number(toks, cols.p5))
    table.p95.append(_number(toks, cols.p95))
    redop = toks[cols.redop] if cols.redop is not None else ""
    table.keys.append((toks[cols.type], redop))
    if cols.redop is not None:
        table.redops.add(redop)
    if cols.root is not None:
        table.roots.add(toks[cols.root])


def _unit_from_line(line: str) -> float | None:
    if "(ms)" in line:
        return 1e-3
    if "(us)" in line:
        return 1e-6
    return None


def _preamble_end(header: str, index: int) -> int | None:
    """Offset where the header's column ``index`` ends: rows print each value right-aligned under
    its name (the header's leading ``#`` stands in the size column's padding), so a row's first
    ``index + 1`` values end there too."""
    masked = re.sub(r"^(\s*)(#+)", lambda m: m.group(1) + " " * len(m.group(2)), header)
    ends = [m.end() for m in re.finditer(r"\S+", masked)]
    return ends[index] if 0 <= index < len(ends) else None


def _is_number(token: str) -> bool:
    try:
        float(token)
    except ValueError:
        return False
    return True


def _skipped_row_note(table: Table, cells: list[str], note: str) -> None:
    """A skipped row's note, for its element type's sweep (for every sweep where no other row has that type)."""
    kind = cells[table.columns.type] if len(cells) > table.columns.type else ""
    if kind and kind in {k for k, _ in table.keys}:
        table.type_notes.append((kind, note))
    else:
        table.notes.append(note)


def _split_head(line: str, table: Table, end_at: int | None) -> list[str] | None:
    """A row's leading values (size ... root) when ``line`` holds them and then no numbers: NCCL
    prints its INFO/WARN lines (lazy connection set-up at a size's first call, a failure) right
    after nccl-tests printed the start of a row, so the row's times follow on a later line."""
    first_time = table.columns.time[0]
    if end_at is None:
        return None
    head, rest = line[:end_at].split(), line[end_at:].split()
    if len(head) != first_time or not head[0].isdigit() or (rest and _is_number(rest[0])):
        return None
    return head


def _continues(toks: list[str], table: Table, have: int) -> bool:
    """Whether ``toks`` are times and bandwidths that go on a split row holding ``have`` values: the rest of it
    (a row's, or its in-place half's), or its out-of-place half alone when NCCL's INFO lines came between the
    halves too."""
    rest = len(table.columns.names) - have
    half = (len(table.columns.names) - table.columns.time[0]) // 2
    whole = len(toks) >= rest if have == table.columns.time[0] else len(toks) == rest
    fits = whole or (have == table.columns.time[0] and len(toks) == half)
    return rest > 0 and fits and all(_is_number(t) or t == "N/A" for t in toks[:rest])


def scan_rows(path, lines: list[str], start: int, names: list[str]) -> tuple[Table, int]:
    """Rows of the table whose header is ``lines[start]``; returns the table and the index after its last row."""
    table = Table(_columns(path, names, start + 1), header_line=start + 1)
    end_at = _preamble_end(lines[start], table.columns.time[0] - 1)
    j = start + 1
    if j < len(lines) and "(B)" in lines[j]:
        table.unit_s = _unit_from_line(lines[j])
        j += 1
    end = j
    cut: FileFormatError | None = None
    pending: tuple[list[str], int] | None = None   # a split row's leading values and line number
    while j < len(lines):
        ln = lines[j].strip()
        if any(f in ln for f in FOOTERS) or header_tokens(ln) is not None:
            break
        toks = ln.split()
        if pending is not None and toks and _continues(toks, table, len(pending[0])):
            merged = pending[0] + toks
            if len(merged) >= len(table.columns.names):
                _add_row(path, table, merged, pending[1])
                pending = None
            else:
                pending = (merged, pending[1])
            end = j + 1
        elif toks and toks[0].isdigit():
            if cut is not None:
                raise cut  # a short row with rows after it is malformed, not cut off
            if pending is not None:
                raise FileFormatError(f"{path}: line {pending[1]}: a row's size and type with no times after "
                                      f"them before the next row (line {j + 1})")
            try:
                _add_row(path, table, toks, j + 1)
            except FileFormatError as err:
                # only a row that does not parse whole is taken for a split one
                head = _split_head(lines[j], table, end_at)
                if head is not None:
                    pending = (head, j + 1)
                elif len(toks) >= len(table.columns.names):
                    raise
                else:
                    cut = err
            end = j + 1
        j += 1
    closed = j < len(lines) and any(f in lines[j] for f in FOOTERS)
    failed = reported_failure(lines, start + 1, j)
    said = f"; the test failed (line {failed[0]}: {failed[1][:160]})" if failed else ""
    if pending is not None and (closed or not table.sizes):  # (failed at its first size: later tests may have run)
        raise (EmptyTable(f"{path}: line {pending[1]}: the row of size {pending[0][0]} has no times{said}", failed,
                          start + 1) if failed and not table.sizes else
               FileFormatError(f"{path}: line {pending[1]}: a row's size and type with no times after them{said}"))
    if pending is not None:
        what = "has no times" if len(pending[0]) == table.columns.time[0] else "has its out-of-place half alone"
        _skipped_row_note(table, pending[0], f"line {pending[1]}: the row of size {pending[0][0]} {what} (the run "
                                             f"stopped during it) and is skipped")
    if cut is not None:
        if closed or not table.sizes:
            raise cut
        # A run killed mid-print (timeout, OOM, a failed rank) leaves its last row short: the
        # rows above it were measured in full and are kept.
        _skipped_row_note(table, cells := lines[end - 1].split(), f"line {end}: last row cut short ({len(cells)} "
                          f"of {len(table.columns.names)} columns; the run ended mid-row) and skipped")
    if table.wrong and not table.sizes:
        raise FileFormatError(f"{path}: line {start + 1}: every row of this nccl-tests table has wrong results "
                              f"(non-zero #wrong: the -c check failed); no valid measurement to read")
    if table.wrong:
        table.notes.append(wrong_note(table.wrong, table.wrong_rows, "nccl-tests' #wrong column"))
    if not table.sizes:
        skipped = f" ({len(table.notes)} row(s) skipped: {table.notes[0]}{'; ...' if len(table.notes) > 1 else ''})" \
            if table.notes else ""
        raise EmptyTable(f"{path}: line {start + 1}: nccl-tests table has no data rows{skipped}{said}", failed,
                         start + 1)
    # What follows the last row (Rank lines, a program name) belongs to the next table.
    return table, end


def check_values(path, table: Table) -> None:
    """Refuse impossible numbers, naming the first offending line."""
    for lineno, size, t in zip(table.lines, table.sizes, table.times):
        if t <= 0:
            raise FileFormatError(f"{path}: line {lineno}: zero or negative time {t}")
        # A hostile or corrupted log can hold 1e300: refuse it rather than let it overflow later.
        if t > 1e15 or t < 1e-6 or size > 2 ** 60:
            raise FileFormatError(f"{path}: line {lineno}: impossible size or time (over 2^60 B, or a time "
                                  f"outside 1e-6 .. 1e15 time units)")
    for lineno, alg, bus in zip(table.lines, table.algbw, table.busbw):
        if not (0 <= alg <= 1e9 and 0 <= bus <= 1e9):  # GB/s: an exabyte a second is no link
            raise FileFormatError(f"{path}: line {lineno}: impossible bandwidth (algbw {alg:g}, busbw {bus:g} "
                                  f"GB/s; expected 0 .. 1e9)")


def resolve_unit(path, table: Table) -> float:
    """Seconds per time unit, from the unit line or from algbw = size / time; checks they agree.

    Also returns, through ``table.notes``, how the unit was found. The printed algbw divided by
    size/time is kept in :func:`raw_algbw_ratio` for the pre-2020 layout's world size.
    """
    if table.columns.cputime:
        # -C 1 prints the host's time but the bandwidths of the operations' own: they need not agree,
        # and -C came (2022) long after the unit became microseconds.
        table.unit_s = table.unit_s or 1e-6
        table.notes.append(CPUTIME_NOTE)
        return table.unit_s
    size, time, alg = (np.array(v, dtype=float) for v in (table.sizes, table.times, table.algbw))
    good = alg >= 1.0   # bandwidths with 3+ significant digits
    est = {scale: float(np.median(alg[good] / (size[good] / (time[good] * scale) / 1e9)))
           for scale in (1e-6, 1e-3)} if np.any(good) else {}
    unit = table.unit_s
    if unit is None:
        if est:
            unit = min(est, key=lambda s_: abs(math.log(est[s_])) if est[s_] > 0 else math.inf)
            table.notes.append(f"time unit {'ms' if unit == 1e-3 else 'us'} inferred from algbw = size/time")
        else:
            unit = 1e-6
            table.notes.append("time unit assumed microseconds (no unit line, bandwidths too small to check)")
    if unit in est and not 0.45 < est[unit] < 1.05:
        raise FileFormatError(f"{path}: line {table.header_line}: algbw disagrees with size/time by a factor "
                              f"{est[unit]:.3g}; the time unit or the columns are not what the header says")
    table.unit_s = unit
    return unit


def raw_algbw_ratio(table: Table) -> list[float]:
    """Printed algbw / (size / time): about 1, or (n-1)/n in the pre-2020 all-gather layout; nothing
    under -C 1, whose algbw is not size over the printed time."""
    if table.columns.cputime:
        return []
    size, time, alg = (np.array(v, dtype=float) for v in (table.sizes, table.times, table.algbw))
    good = alg >= 1.0
    if not np.any(good) or table.unit_s is None:
        return []
    return [float(np.median(alg[good] / (size[good] / (time[good] * table.unit_s) / 1e9)))]


def world_from_counts(sizes: list[int], counts: list[int], keys: list[tuple[str, str]],
                      type_bytes: dict[str, int]) -> int | None:
    """Ranks from size = count x ranks x type size, exact when every row agrees; else None.

    nccl-tests prints the per-rank count for all-gather, reduce-scatter and all-to-all (every
    era), so this holds for them only; busbw/algbw, printed to 2 decimals, is rounded.
    """
    worlds = set()
    for size, count, (dtype, _) in zip(sizes, counts, keys):
        width = type_bytes.get(dtype)
        if width is None or count <= 0 or size % (count * width):
            return None
        worlds.add(size // (count * width))
    return worlds.pop() if len(worlds) == 1 else None


def bus_ratios(table: Table) -> list[float]:
    """busbw / algbw of the rows where both have 3+ significant digits; where no row has (a link slower than
    1 GB/s: TCP sockets, 1-10 GbE), of the rows with 2, whose median still tells the bus factors apart."""
    alg, bus = np.array(table.algbw, dtype=float), np.array(table.busbw, dtype=float)
    good = alg >= 1.0
    if not good.any():
        good = alg >= 0.1
    return list(bus[good] / alg[good])
