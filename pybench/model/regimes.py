"""Protocol regimes: a link's cost as the fastest of a few fitted regimes, as NCCL picks a protocol.

NCCL prices every algorithm x protocol pair (LL: the least latency at half the bandwidth,
LL128, Simple: the full bandwidth at the most latency) and runs the fastest. A measured sweep
is therefore the lower envelope of a few lines, concave in the size: each regime's line wins
over a range of sizes, and the switch between two falls where NCCL finds them equal. One frame
``T = base + hops step + data S / B`` through a full 8 B .. 8 GiB sweep misses its middle.

:func:`fit_regimes` fits K such frames and predicts their minimum (the fastest regime), by
min-assignment: start from K contiguous size ranges (the first split point tried at up to 40
distinct sizes, each further split likewise), fit each range by non-negative least squares on
relative error, give every point to the regime that predicts the least time there, refit, until
nothing moves. Every regime keeps 3 or more distinct sizes, or it is dropped. Adding one split to
the last finds no good K where the best K ranges share no split with the best K - 1 (a sweep that
bends twice above where it first does), so each K also starts from the best split into K contiguous
ranges (dynamic programming over up to 48 candidate points), and the better of the two is kept.

K is chosen by BIC on the relative residuals with a 3% noise floor (no regime is added for
misfit below the floor). The floor is what keeps bends that do not carry across world sizes out
of the model: a small bend split into its own regime at two GPU counts moves the prediction at a
third the wrong way, while the protocol steps of a full sweep are far above the floor.

The regime that wins at the largest measured size is the link's bandwidth regime; a regime with
a higher bandwidth would take over beyond the measured sizes with nothing measured to say so,
so it is dropped and the rest refitted.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from pybench.io.model_names import MAX_LINK_REGIMES
from pybench.model.relative_lsq import solve_nonnegative

MAX_REGIMES = MAX_LINK_REGIMES
"""LL, LL128 and Simple, plus one algorithm switch (ring to tree): what a model file may hold."""
NOISE_FLOOR = 0.03
"""Relative rms below which a sweep is not split further (see the module text)."""
MIN_DISTINCT_SIZES = 3
BANDWIDTH_COLUMN = 2
"""The frame's columns are (base, hops, data/B, fill/B): theta[2] is 1/B."""
# Which columns a fit keeps when the data cannot tell some apart: the bandwidth always, then the
# per-call latency, the per-step latency, and last the pipeline fill.
_COLUMN_PREFERENCE = (BANDWIDTH_COLUMN, 0, 1, 3)
_CANDIDATE_SPLITS = 40
_MAX_ROUNDS = 30
_SEARCH_ROUNDS = 8      # per candidate split; the chosen one is refined up to _MAX_ROUNDS
_SEARCH_ROWS = 2048     # rows a candidate split is judged on (a 60 000-row fit took 80 s on all of them)



@dataclass(frozen=True)
class Regime:
    """One fitted frame: its parameters and which of the candidate designs (algorithms) it uses."""

    theta: np.ndarray
    design: int = 0


def _best_design(designs: Sequence[np.ndarray], sel: np.ndarray, y: np.ndarray) -> Regime | None:
    """The candidate design that fits the selected rows best; on a tie (data that cannot tell the
    algorithms apart) the one listed first."""
    best: tuple[float, Regime] | None = None
    for d, x in enumerate(designs):
        solved = solve_nonnegative(x[sel], y[sel], _COLUMN_PREFERENCE, BANDWIDTH_COLUMN)
        if solved is not None and (best is None or solved[1] < best[0] * (1 - 1e-6) - 1e-12):
            best = (solved[1], Regime(solved[0], d))
    return None if best is None else best[1]


def envelope(designs: Sequence[np.ndarray], regimes: Sequence[Regime]) -> tuple[np.ndarray, np.ndarray]:
    """(time of the fastest regime, its index) for every row."""
    times = np.stack([designs[r.design] @ r.theta for r in regimes])
    return times.min(axis=0), times.argmin(axis=0)


def _refine(designs: Sequence[np.ndarray], y: np.ndarray, sizes: np.ndarray, assign: np.ndarray,
            rounds: int = _MAX_ROUNDS) -> tuple[list[Regime], float] | None:
    """Min-assignment from ``assign`` until stable (at most ``rounds``): (regimes, relative RSS of the
    envelope) or None."""
    regimes: list[Regime] = []
    for _ in range(rounds):
        regimes = []
        for k in np.unique(assign):
            sel = assign == k
            if np.unique(sizes[sel]).size < MIN_DISTINCT_SIZES:
                return None
            regime = _best_design(designs, sel, y)
            if regime is None:
                return None
            regimes.append(regime)
        _, new = envelope(designs, regimes)
        if np.array_equal(new, assign):
            break
        assign = new
    time, _ = envelope(designs, regimes)
    return regimes, float(np.sum((time / y - 1.0) ** 2))


def _bic(rss: float, n: int, regimes: int, noise_floor: float) -> float:
    return n * math.log(max(rss / n, noise_floor * noise_floor)) + 4 * regimes * math.log(n)


def _split_once(designs, y, sizes, bounds: list[float]) -> tuple[tuple[list[Regime], float], list[float]] | None:
    """The best fit with one more split point than ``bounds`` (points in size, ascending).

    Candidates are compared on at most :data:`_SEARCH_ROWS` rows (every k-th in size order) with a
    few rounds each; the winner is then refined on every row.
    """
    distinct = np.unique(sizes)
    if distinct.size < 2 * MIN_DISTINCT_SIZES:
        return None  # no split leaves MIN_DISTINCT_SIZES on both sides
    order = np.argsort(sizes, kind="stable")
    rows = order[::max(1, -(-sizes.size // _SEARCH_ROWS))]
    thinned = [x[rows] for x in designs]
    best_bounds = None
    best_rss = math.inf
    for i in np.unique(np.linspace(MIN_DISTINCT_SIZES, distinct.size - MIN_DISTINCT_SIZES,
                                   _CANDIDATE_SPLITS).astype(int)):
        if distinct[i] in bounds:
            continue
        trial = sorted(bounds + [float(distinct[i])])
        fitted = _refine(thinned, y[rows], sizes[rows], np.searchsorted(np.array(trial), sizes[rows], side="right"),
                         rounds=_SEARCH_ROUNDS)
        if fitted is not None and fitted[1] < best_rss:
            best_bounds, best_rss = trial, fitted[1]
    if best_bounds is None:
        return None
    full = _refine(designs, y, sizes, np.searchsorted(np.array(best_bounds), sizes, side="right"))
    return (full, best_bounds) if full is not None else None


def _drop_weak(designs, y, sizes, regimes: list[Regime]) -> list[Regime]:
    """``regimes`` without those that are the fastest at fewer than MIN_DISTINCT_SIZES measured sizes
    (after a refit a regime can end up winning at one or two, or none), the rest refitted."""
    for _ in range(MAX_REGIMES):
        if len(regimes) == 1:
            return regimes
        _, winner = envelope(designs, regimes)
        weak = {k for k in range(len(regimes)) if np.unique(sizes[winner == k]).size < MIN_DISTINCT_SIZES}
        if not weak:
            return regimes
        keep = [r for k, r in enumerate(regimes) if k not in weak]
        refit = _refine(designs, y, sizes, envelope(designs, keep)[1])
        if refit is None:
            return keep
        regimes = refit[0]
    return regimes


def _inverse_bandwidth(regime: Regime) -> float:
    return float(regime.theta[BANDWIDTH_COLUMN])


def _bandwidth_regime_last(designs, y, sizes, regimes: list[Regime]) -> list[Regime] | None:
    """``regimes`` with the one that wins at the largest size last; regimes of higher bandwidth
    (they would win past the measured sizes, unmeasured) dropped and the rest refitted."""
    for _ in range(MAX_REGIMES):
        _, winner = envelope(designs, regimes)
        top = _inverse_bandwidth(regimes[int(winner[np.argmax(sizes)])])
        keep = [r for r in regimes if _inverse_bandwidth(r) >= top]  # larger 1/B is slower
        if len(keep) == len(regimes):
            return sorted(regimes, key=lambda r: -_inverse_bandwidth(r))
        if len(keep) == 1:
            return keep
        refit = _refine(designs, y, sizes, envelope(designs, keep)[1])
        if refit is None:
            return None
        regimes = refit[0]
    return None


def fit_regimes(designs: np.ndarray | Sequence[np.ndarray], y: np.ndarray, sizes: np.ndarray, *,
                max_regimes: int = MAX_REGIMES, noise_floor: float = NOISE_FLOOR) -> list[Regime] | None:
    """The regimes that explain times ``y`` as their minimum.

    ``designs`` holds one matrix per candidate algorithm (or one matrix), each with the frame's
    four columns per point (base, hops, data/B, fill/B); every regime takes the design that fits
    its points best, as NCCL picks an algorithm per size. ``sizes`` is each point's size. Returns
    the regimes, the bandwidth regime (the one that wins at the largest size) last; None when not
    even one regime fits with non-negative parameters.
    """
    designs = [designs] if isinstance(designs, np.ndarray) else list(designs)
    one = _refine(designs, y, sizes, np.zeros(y.size, dtype=int))
    if one is None:
        return None
    best, bounds = one, list[float]()
    n = y.size
    segmented: dict | None = None  # computed where a split is first tried (a sweep within the floor needs none)
    while len(best[0]) < max_regimes and best[1] / n > noise_floor * noise_floor:
        more = _split_once(designs, y, sizes, bounds)
        if segmented is None:
            segmented = _segmentations(designs, y, sizes, max_regimes)
        # the best contiguous split into as many ranges, where the greedy search's split points are worse
        other = segmented.get(len(bounds) + 2)
        if other is not None and (more is None or other[0][1] < more[0][1]):
            more = other
        if more is None:
            break
        if _bic(more[0][1], n, len(more[0][0]), noise_floor) >= _bic(best[1], n, len(best[0]), noise_floor):
            # one more regime may not pay where two more do (a bend in the middle and one at the top)
            two = segmented.get(len(bounds) + 3)
            if two is None or len(bounds) + 3 > max_regimes or \
                    _bic(two[0][1], n, len(two[0][0]), noise_floor) >= _bic(best[1], n, len(best[0]), noise_floor):
                break
            more = two
        best, bounds = more
    return _bandwidth_regime_last(designs, y, sizes, _drop_weak(designs, y, sizes, best[0])) or [one[0][0]]


_SEGMENT_CUTS = 48  # candidate split points of the contiguous search (distinct sizes, evenly spread)


def _segmentations(designs, y, sizes, max_regimes: int) -> dict[int, tuple[tuple[list[Regime], float], list[float]]]:
    """For each count of regimes from 2 up, the split of the sizes into that many contiguous ranges whose own
    fits leave the least relative RSS (dynamic programming over up to :data:`_SEGMENT_CUTS` split points), refined
    by min-assignment: {count: ((regimes, RSS), split points)}. The greedy search adds one split to the last; where
    the best ranges for k regimes share no split with those for k - 1 it cannot reach them."""
    distinct = np.unique(sizes)
    if distinct.size < 2 * MIN_DISTINCT_SIZES:
        return {}
    order = np.argsort(sizes, kind="stable")
    rows = order[::max(1, -(-sizes.size // _SEARCH_ROWS))]
    thin_sizes, thin_y = sizes[rows], y[rows]
    thinned = [x[rows] for x in designs]
    index = np.unique(np.linspace(0, distinct.size, _SEGMENT_CUTS + 1).astype(int))
    edges = [float(distinct[i]) if i < distinct.size else math.inf for i in index]
    m = len(edges) - 1
    cost = np.full((m + 1, m + 1), math.inf)
    for i in range(m):
        for j in range(i + 1, m + 1):
            sel = (thin_sizes >= edges[i]) & (thin_sizes < edges[j])
            if np.unique(thin_sizes[sel]).size < MIN_DISTINCT_SIZES:
                continue
            fits = [solve_nonnegative(x[sel], thin_y[sel], _COLUMN_PREFERENCE, BANDWIDTH_COLUMN) for x in thinned]
            cost[i, j] = min((f[1] for f in fits if f is not None), default=math.inf)
    total = np.full((max_regimes + 1, m + 1), math.inf)
    back = np.zeros((max_regimes + 1, m + 1), dtype=int)
    total[0, 0] = 0.0
    for k in range(1, max_regimes + 1):
        for j in range(1, m + 1):
            options = total[k - 1, :j] + cost[:j, j]
            back[k, j] = int(np.argmin(options))
            total[k, j] = options[back[k, j]]
    out = {}
    for k in range(2, max_regimes + 1):
        if not math.isfinite(total[k, m]):
            continue
        cuts, j = [], m
        for kk in range(k, 0, -1):
            j = back[kk, j]
            cuts.append(edges[j])
        bounds = sorted(c for c in cuts if c > edges[0])
        assign = np.searchsorted(np.array(bounds), sizes, side="right")
        # min-assignment may strip a range of its sizes; the ranges' own fits are then the answer
        full = _refine(designs, y, sizes, assign) or _refine(designs, y, sizes, assign, rounds=1)
        if full is not None:
            out[k] = (full, bounds)
    return out
