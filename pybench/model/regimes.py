"""Protocol regimes: a link's cost as the fastest of a few fitted regimes, as NCCL picks a protocol.

NCCL prices every algorithm x protocol pair (LL: the least latency at half the bandwidth,
LL128, Simple: the full bandwidth at the most latency) and runs the fastest. A measured sweep
is therefore the lower envelope of a few lines, concave in the size: each regime's line wins
over a range of sizes, and the switch between two falls where NCCL finds them equal. One frame
``T = base + hops step + data S / B`` through a full 8 B .. 8 GiB sweep misses its middle:
A100 2x8 RoCE all-reduce by 35% (max), B200 2x8 all-gather by 81%.

:func:`fit_regimes` fits K such frames and predicts their minimum (the fastest regime), by
min-assignment: start from K contiguous size ranges (the first split point tried at up to 40
distinct sizes, each further split likewise), fit each range by non-negative least squares on
relative error, give every point to the regime that predicts the least time there, refit, until
nothing moves. Every regime keeps 3 or more distinct sizes, or it is dropped.

K is chosen by BIC on the relative residuals with a 3% noise floor (no regime is added for
misfit below the floor). The floor is what keeps bends that do not carry across world sizes out
of the model: on the vTrain A100 tables (1 MiB and up) one frame fits 2 and 4 GPUs to 2.2% rms,
and splitting them into 2 regimes (rms 1.1%) took the 8-GPU prediction's max error from 18% to
28%. On the 2-node nccl-tests sweeps one frame misses by 20% (A100) and 43% (B200) rms, far
above the floor: A100 takes 4 regimes (max 35% -> 9.4%), B200 2 (81% -> 35%).

The regime that wins at the largest measured size is the link's bandwidth regime; a regime with
a higher bandwidth would take over beyond the measured sizes with nothing measured to say so,
so it is dropped and the rest refitted.
"""

from __future__ import annotations

import math

import numpy as np

MAX_REGIMES = 4
"""LL, LL128 and Simple, plus one algorithm switch (ring to tree)."""
NOISE_FLOOR = 0.03
"""Relative rms below which a sweep is not split further (see the module text)."""
MIN_DISTINCT_SIZES = 3
_CANDIDATE_SPLITS = 40
_MAX_ROUNDS = 30
_SEARCH_ROUNDS = 8      # per candidate split; the chosen one is refined up to _MAX_ROUNDS
_SEARCH_ROWS = 2048     # rows a candidate split is judged on (a 60 000-row fit took 80 s on all of them)

# Column sets of the frame (base, step, data/B, fill/B), most detailed first: the first the data
# can identify is used. The last: no latency the data can see.
_COLUMN_SETS = ((0, 1, 2, 3), (0, 1, 2), (0, 2, 3), (0, 2), (1, 2), (2,))


def solve_nonnegative(x: np.ndarray, y: np.ndarray) -> tuple[np.ndarray, float] | None:
    """Least squares on relative error over the first identifiable column set, every parameter
    non-negative and the bandwidth term positive; (theta, relative RSS) or None."""
    weights = 1.0 / y  # relative error: every size counts alike
    for cols in _COLUMN_SETS:
        sub = x[:, cols] * weights[:, None]
        norms = np.linalg.norm(sub, axis=0)
        # Columns differ by 1e15 in scale (seconds per call against seconds per byte x bytes):
        # identifiability is judged on unit columns, or a small one reads as absent.
        if np.any(norms == 0) or np.linalg.matrix_rank(sub / norms, tol=1e-9) < len(cols):
            continue
        theta_sub, *_ = np.linalg.lstsq(sub, np.ones_like(y), rcond=None)
        if np.any(theta_sub < 0) or theta_sub[cols.index(2)] <= 0:
            continue
        theta = np.zeros(4)
        theta[list(cols)] = theta_sub
        return theta, float(np.sum((x @ theta / y - 1.0) ** 2))
    return None


def envelope(x: np.ndarray, thetas: list[np.ndarray]) -> tuple[np.ndarray, np.ndarray]:
    """(time of the fastest regime, its index) for every row of ``x``."""
    times = np.stack([x @ th for th in thetas])
    return times.min(axis=0), times.argmin(axis=0)


def _refine(x: np.ndarray, y: np.ndarray, sizes: np.ndarray, assign: np.ndarray,
            rounds: int = _MAX_ROUNDS) -> tuple[list[np.ndarray], float] | None:
    """Min-assignment from ``assign`` until stable (at most ``rounds``): (thetas, relative RSS of the
    envelope) or None."""
    thetas: list[np.ndarray] = []
    for _ in range(rounds):
        thetas = []
        for k in np.unique(assign):
            sel = assign == k
            if np.unique(sizes[sel]).size < MIN_DISTINCT_SIZES:
                return None
            solved = solve_nonnegative(x[sel], y[sel])
            if solved is None:
                return None
            thetas.append(solved[0])
        _, new = envelope(x, thetas)
        if np.array_equal(new, assign):
            break
        assign = new
    time, _ = envelope(x, thetas)
    return thetas, float(np.sum((time / y - 1.0) ** 2))


def _bic(rss: float, n: int, regimes: int, noise_floor: float) -> float:
    return n * math.log(max(rss / n, noise_floor * noise_floor)) + 4 * regimes * math.log(n)


def _split_once(x, y, sizes, bounds: list[float]) -> tuple[tuple[list[np.ndarray], float], list[float]] | None:
    """The best fit with one more split point than ``bounds`` (points in size, ascending).

    Candidates are compared on at most :data:`_SEARCH_ROWS` rows (every k-th in size order) with a
    few rounds each; the winner is then refined on every row.
    """
    distinct = np.unique(sizes)
    if distinct.size < 2 * MIN_DISTINCT_SIZES:
        return None  # no split leaves MIN_DISTINCT_SIZES on both sides
    order = np.argsort(sizes, kind="stable")
    rows = order[::max(1, -(-sizes.size // _SEARCH_ROWS))]
    best_bounds = None
    best_rss = math.inf
    for i in np.unique(np.linspace(MIN_DISTINCT_SIZES, distinct.size - MIN_DISTINCT_SIZES,
                                   _CANDIDATE_SPLITS).astype(int)):
        if distinct[i] in bounds:
            continue
        trial = sorted(bounds + [float(distinct[i])])
        fitted = _refine(x[rows], y[rows], sizes[rows], np.searchsorted(np.array(trial), sizes[rows], side="right"),
                         rounds=_SEARCH_ROUNDS)
        if fitted is not None and fitted[1] < best_rss:
            best_bounds, best_rss = trial, fitted[1]
    if best_bounds is None:
        return None
    full = _refine(x, y, sizes, np.searchsorted(np.array(best_bounds), sizes, side="right"))
    return (full, best_bounds) if full is not None else None


def _drop_weak(x, y, sizes, thetas: list[np.ndarray]) -> list[np.ndarray]:
    """``thetas`` without regimes that are the fastest at fewer than MIN_DISTINCT_SIZES measured sizes
    (after a refit a regime can end up winning at one or two, or none), the rest refitted."""
    for _ in range(MAX_REGIMES):
        if len(thetas) == 1:
            return thetas
        _, winner = envelope(x, thetas)
        weak = {k for k in range(len(thetas)) if np.unique(sizes[winner == k]).size < MIN_DISTINCT_SIZES}
        if not weak:
            return thetas
        keep = [th for k, th in enumerate(thetas) if k not in weak]
        refit = _refine(x, y, sizes, envelope(x, keep)[1])
        if refit is None:
            return keep
        thetas = refit[0]
    return thetas


def _bandwidth_regime_last(x, y, sizes, thetas: list[np.ndarray]) -> list[np.ndarray] | None:
    """``thetas`` with the regime that wins at the largest size last; regimes of higher bandwidth
    (they would win past the measured sizes, unmeasured) dropped and the rest refitted."""
    for _ in range(MAX_REGIMES):
        _, winner = envelope(x, thetas)
        top = int(winner[np.argmax(sizes)])
        keep = [th for th in thetas if th[2] >= thetas[top][2]]  # theta[2] is 1/B: larger is slower
        if len(keep) == len(thetas):
            return sorted(thetas, key=lambda th: -th[2])
        if len(keep) == 1:
            return keep
        _, assign = envelope(x, keep)
        refit = _refine(x, y, sizes, assign)
        if refit is None:
            return None
        thetas = refit[0]
    return None


def fit_regimes(x: np.ndarray, y: np.ndarray, sizes: np.ndarray, *, max_regimes: int = MAX_REGIMES,
                noise_floor: float = NOISE_FLOOR) -> list[np.ndarray] | None:
    """The regimes of the frame ``x @ theta`` that explain times ``y`` as their minimum.

    ``x`` has the frame's four columns per point (base, step, data/B, fill/B), ``sizes`` each
    point's size. Returns the regimes' parameter vectors, the bandwidth regime (the one that
    wins at the largest size) last; None when not even one regime fits with non-negative
    parameters.
    """
    one = _refine(x, y, sizes, np.zeros(y.size, dtype=int))
    if one is None:
        return None
    best, bounds = one, list[float]()
    n = y.size
    while len(best[0]) < max_regimes and best[1] / n > noise_floor * noise_floor:
        more = _split_once(x, y, sizes, bounds)
        if more is None or _bic(more[0][1], n, len(more[0][0]), noise_floor) >= _bic(best[1], n, len(best[0]),
                                                                                    noise_floor):
            break
        best, bounds = more
    return _bandwidth_regime_last(x, y, sizes, _drop_weak(x, y, sizes, best[0])) or [one[0][0]]
