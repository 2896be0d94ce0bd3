"""How precisely an nccl-tests row prints its time, and the time its bandwidths pin down more tightly.

nccl-tests prints a time of 10 s and more in e-notation with one decimal (``1.9e+07`` us): two
significant digits, so the printed time may be off by half a unit of its second digit. The row's
algbw (size / time) and busbw (algbw times the bus factor) come from the same measured time and
print three or more digits there.
Each printed cell bounds the true time to an interval (half its last digit either way); where a
bandwidth's interval is narrower than the time's, a time printed to two significant digits or fewer
is read as the middle of the intervals' overlap. Other times are left as printed.
"""

from __future__ import annotations

import math

import numpy as np

Cell = tuple[str, str, str]
"""The printed (time, algbw, busbw) tokens of one half of a row."""


def half_last_digit(token: str) -> float:
    """Half a unit of the last digit ``token`` prints: 0.005 for ``45.87``, 0.05 for ``1234.6`` (nccl-tests
    drops decimals to keep a value in its 6-character column), 5e2 for ``1.2e+03``."""
    mantissa, _, exponent = token.lower().partition("e")
    decimals = len(mantissa.partition(".")[2])
    try:
        shift = int(exponent) if exponent else 0
    except ValueError:
        shift = 0
    return 0.5 * 10.0 ** (shift - decimals)


def _digits(token: str) -> int:
    """The significant digits ``token`` prints: 2 for ``1.9e+07``, 3 for ``0.105``."""
    mantissa = token.lower().partition("e")[0].lstrip("+-").replace(".", "")
    return len(mantissa.lstrip("0")) or 1


def _from_bandwidth(size: int, token: str, factor: float) -> tuple[float, float] | None:
    """The (shortest, longest) time in seconds a printed bandwidth ``token`` (GB/s) of ``size`` bytes allows,
    the bandwidth being ``factor`` times size / time; None where it bounds nothing (0.00, N/A)."""
    try:
        bw = float(token)
    except ValueError:
        return None
    half = half_last_digit(token)
    if not (math.isfinite(bw) and factor > 0 and bw > 2 * half):
        return None
    return factor * size / ((bw + half) * 1e9), factor * size / ((bw - half) * 1e9)


def sharpest_time(size: int, cell: Cell, unit_s: float, factor: float | None) -> float | None:
    """The time in seconds that ``cell``'s printed time and bandwidths together allow, where a bandwidth bounds
    it more tightly than the printed time does; None where the printed time stands (it is the most precise,
    or the cells disagree: a pre-scaled algbw, a busbw of another bus factor). ``factor``: busbw/algbw at the
    table's world, None where it is not known."""
    try:
        printed = float(cell[0]) * unit_s
    except ValueError:
        return None
    if _digits(cell[0]) > 2:
        return None  # three digits or more: the printed time stands (the reading of every table to date)
    half = half_last_digit(cell[0]) * unit_s
    lo, hi = printed - half, printed + half
    bounds = [_from_bandwidth(size, cell[1], 1.0)]
    if factor is not None:
        bounds.append(_from_bandwidth(size, cell[2], factor))
    known = [b for b in bounds if b is not None]
    if not known or min(b[1] - b[0] for b in known) >= hi - lo:
        return None
    for b_lo, b_hi in known:
        lo, hi = max(lo, b_lo), min(hi, b_hi)
    if lo > hi * (1 + 1e-9):
        return None
    return (lo + hi) / 2


def sharpen_times(sizes: list[int], cells: list[tuple[Cell, Cell | None]], lines: list[int], time_s: np.ndarray,
                  in_place_s: np.ndarray, unit_s: float, factor: float | None) -> list[str]:
    """Put :func:`sharpest_time` in ``time_s`` and ``in_place_s`` (seconds, one per row, changed in place) where it
    reads a row's time more precisely than its printed time; the note saying so, if any row changed."""
    if len(cells) != len(sizes):
        return []  # a table built without its printed text
    fixed: list[tuple[int, str, float]] = []
    for k, (size, halves) in enumerate(zip(sizes, cells)):
        for times, cell in zip((time_s, in_place_s), halves):
            if cell is None or not math.isfinite(times[k]):
                continue
            sharp = sharpest_time(size, cell, unit_s, factor)
            if sharp is not None:
                times[k] = sharp
                fixed.append((lines[k], cell[0], sharp))
    if not fixed:
        return []
    shown = ", ".join(f"line {ln}: {tok} read as {t:.4g} s" for ln, tok, t in fixed[:4])
    return [f"{len(fixed)} time(s) printed to fewer significant digits than the row's algbw/busbw, read from "
            f"what all three allow ({shown}{', ...' if len(fixed) > 4 else ''}): nccl-tests prints a time of "
            f"10 s or more in e-notation with two digits"]
