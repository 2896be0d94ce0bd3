"""Piecewise alpha-beta fit: the regimes (protocol and algorithm switches) found from the data.

Breakpoints are chosen by exact dynamic programming over every split into k pieces and every
count of free parameters; the number of pieces by an information criterion (BIC or AICc) on
the weighted residual sum of squares with a relative noise floor. The search is repeated with
Huber weights (:func:`_robust_split`) so that one size off every line cannot hide a misfit
elsewhere; the pieces themselves are then fitted by plain relative least squares. Each piece
records the fit's leave-one-size-out errors (:mod:`pybench.model.jackknife`), which the
prediction band holds.

* Each piece is fitted by least squares on *relative* residuals ``(T_i - alpha - s_i c) / T_i``
  (weights 1/T^2), with ``c = 1/B``: sizes span nine decades, and an absolute fit would ignore
  every small message (:mod:`pybench.model.segment`).
* alpha >= 0 and 1/B >= 0 in every piece, as constraints: where the unconstrained fit breaks one
  (a CPU sweep that grows faster than linearly as buffers leave the caches), the constrained
  optimum holds that parameter at 0 and the piece counts one parameter in the criterion, so every
  predicted time is positive.
* Each piece keeps ``min_points - 2`` residual degrees of freedom; breakpoints count as
  parameters; pieces are fitted independently, so the model may jump where a protocol switches.
* The residual sum of squares gets a floor of ``noise_floor`` relative error per point: without
  one the criterion would keep splitting to chase noise it cannot see.
* Between measured sizes a prediction carries the measured neighbours' relative residuals
  (:mod:`pybench.model.residuals`); outside the measured sizes the lines answer.
"""

from __future__ import annotations

import dataclasses
import math
import numbers
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from pybench.errors import UsageError
from pybench.model.jackknife import local_half_width, loo_relative_errors
from pybench.model.relative_lsq import nonnegative_line_rss
from pybench.model.residuals import correction_at, measured_residuals
from pybench.model.segment import (
    DEFAULT_CONFIDENCE,
    DEFAULT_MIN_POINTS,
    DEFAULT_NOISE_FLOOR,
    SegmentFit,
    _ape,
    _check_xy,
    fit_segment,
)
from pybench.sizes import MAX_SIZE_BYTES, format_size

# Issue 13: a piece over 2 distinct sizes is a line through two points whatever its "bandwidth"
# (real sweeps gave 1-2 TB/s); 3 sizes at least let the data contradict the line.
MIN_DISTINCT_SIZES = 3
# Real sweeps show at most a handful of regimes (LL, LL128, Simple x ring, tree, NVLS); the cap
# keeps the search (pieces x parameters x points^2) small on dense sweeps such as vTrain's
# 1024 sizes, where it would otherwise need gigabytes. Sweeps of up to 31 sizes never chose more than 6.
MAX_PIECES = 10
# Most places a breakpoint may sit (size changes) searched exactly; the search holds about a dozen
# (cuts x cuts) float matrices, so 1024 keeps it near 100 MB and covers the densest real sweep
# in the fixtures (vTrain's 1024 sizes) exactly. Longer sweeps search a thinned grid.
MAX_SEARCH_CUTS = 1024
# Huber's constant (95% efficiency on Gaussian noise) and the most search passes with robust
# weights: one size far off every line must not hide a misfit spanning octaves.
ROBUST_TUNING = 1.345
ROBUST_PASSES = 3


@dataclass(frozen=True)
class PiecewiseFit:
    """Result of :func:`fit_alpha_beta`: pieces in order of size plus goodness of fit.

    Attributes
    ----------
    segments : tuple of SegmentFit
        Ordered by size; they do not overlap.
    criterion : str
        ``bic`` or ``aicc`` (how the number of pieces was chosen).
    criterion_value : float
    n_points : int
    r2 : float
        Weighted R^2 of the whole piecewise fit.
    median_ape, max_ape : float
        In-sample absolute percentage errors, in %.
    """

    segments: tuple[SegmentFit, ...]
    criterion: str
    criterion_value: float
    n_points: int
    r2: float
    median_ape: float
    max_ape: float

    def predict(self, size_bytes, band: str = "confidence"):
        """(time_s, half_width_s) arrays at ``size_bytes``; see :func:`predict_segments`."""
        return predict_segments(self.segments, size_bytes, band)


def predict_segments(segments: Sequence[SegmentFit], size_bytes, band: str = "confidence"):
    """Evaluate ordered pieces at ``size_bytes`` (scalar or array).

    Inside a piece's measured range its line is used; below the first piece or above the
    last, that piece is extrapolated. Between two pieces (sizes nobody measured, where the
    protocol switch happened somewhere) the two lines are blended geometrically, linearly
    in log(size): it avoids claiming a jump at a place the data does not pin down, and it
    is the expected log-time when the switch point is equally likely anywhere in the gap
    (in log size). Every piece is positive at every size > 0 (alpha >= 0, 1/B >= 0, not
    both 0), so every prediction is a positive time, at any world size.

    The other natural choices (a power law between the two pieces' values at the gap's ends,
    weights linear in size, the faster of the two lines as NCCL's tuner would pick) were
    measured in leave-one-size-out on the real logs (CHANGELOG.md); none was better on every
    log, so the blend with a physical rationale stays.

    Between measured sizes the line's time is multiplied by ``1 + r``, ``r`` the measured
    neighbours' relative residuals interpolated in log size (:mod:`pybench.model.residuals`;
    pieces without recorded residuals, and sizes outside the measured range, get the line).

    Bands: in a gap the band holds both pieces' bands (the size may follow either regime).
    The ``prediction`` band is also at least as wide as the fit's leave-one-size-out errors
    at the measured sizes around the size (``SegmentFit.loo_errors``; see
    :mod:`pybench.model.jackknife`), so that it covers sizes nobody measured, not only
    repeats of measured ones.

    Returns
    -------
    (time_s, half_width_s) : ndarrays of the same shape as ``size_bytes``
    """
    arr = np.asarray(size_bytes, dtype=float)
    s = arr.reshape(-1)
    segs = list(segments)
    if not segs:
        raise UsageError("a model without segments cannot predict")
    # Piece k covers sizes up to its largest measured size; beyond the last, the last.
    upper = np.array([seg.size_max_bytes for seg in segs], dtype=float)
    k = np.minimum(np.searchsorted(upper, s, side="left"), len(segs) - 1)
    time_s = np.empty_like(s)
    half_s = np.empty_like(s)
    for i, seg in enumerate(segs):
        sel = k == i
        if not np.any(sel):
            continue
        t, h = seg.predict(s[sel], band)
        if i > 0:
            gap = s[sel] < seg.size_min_bytes
            if np.any(gap):
                prev = segs[i - 1]
                lo, hi = math.log(prev.size_max_bytes), math.log(seg.size_min_bytes)
                w = (np.log(s[sel][gap]) - lo) / (hi - lo) if hi > lo else np.ones(int(gap.sum()))
                t0, h0 = prev.predict(s[sel][gap], band)
                t = t.copy()
                h = h.copy()
                # Both lines are positive (alpha >= 0, 1/B >= 0, not both 0), so the
                # logarithms exist.
                t1, h1 = t[gap], h[gap]
                t[gap] = np.exp((1 - w) * np.log(t0) + w * np.log(t1))
                # Nobody measured where the switch is, so a size in the gap may follow either
                # piece: the band holds both pieces' bands (the blend alone claimed to know).
                h[gap] = np.maximum(np.abs(t[gap] - t0) + h0, np.abs(t[gap] - t1) + h1)
        time_s[sel] = t
        half_s[sel] = h
    # Above the sweep, a last piece left flat after the bytes ruled carries on at the bytes' rate, not at none.
    rate, top = bytes_rate_above(segs), segs[-1].size_max_bytes
    if rate > segs[-1].inv_bw_s_per_byte and np.any(above := s > top):
        top_t = float(segs[-1].predict(np.array([float(top)]), band)[0][0])
        time_s[above] = np.maximum(time_s[above], top_t + (s[above] - top) * rate)
    # Between measured sizes, the measured neighbours' residuals (pybench.model.residuals).
    time_s = time_s * (1.0 + correction_at(segs, s))
    if band == "prediction":
        half_s = np.maximum(half_s, _jackknife_half(segs, s) * time_s)
    if arr.ndim == 0:
        return float(time_s[0]), float(half_s[0])
    return time_s.reshape(arr.shape), half_s.reshape(arr.shape)


def bytes_rate_above(segments: Sequence[SegmentFit]) -> float:
    """Seconds per byte a sweep's curve carries on with above its sizes: its last piece's, or, where that piece is
    flat (its 1/B held at 0: a long sweep's top sizes scattered in noise) after a piece whose bytes ruled at its
    largest size, that piece's: a flat piece carried on would move any number of bytes in no more time."""
    last = segments[-1]
    if last.inv_bw_s_per_byte > 0 or last.alpha_s <= 0:  # (a piece is never both 0: no line to meet)
        return last.inv_bw_s_per_byte
    top = last.size_max_bytes
    for seg in reversed(segments[:-1]):
        data = seg.size_max_bytes * seg.inv_bw_s_per_byte
        if data > 0 and data >= seg.alpha_s:  # (its bytes took at least half the time at its largest size)
            # its line meets the flat piece's top within noise (not a protocol that ran faster there: its rate
            # above is no measured one)
            carried = seg.alpha_s + top * seg.inv_bw_s_per_byte
            return seg.inv_bw_s_per_byte if abs(math.log(carried / last.alpha_s)) <= _SAME_LINE else 0.0
    return 0.0  # a sweep that ended while latency ruled: no rate measured


_SAME_LINE = math.log(1.25)
"""How far (log) a piece's line may lie from the flat last piece at its top and still be the line it stayed on."""


def _jackknife_half(segments: Sequence[SegmentFit], size: np.ndarray) -> np.ndarray:
    """Relative half-width from the fit's leave-one-size-out errors near ``size`` (0 if none)."""
    pairs = [pair for seg in segments for pair in seg.loo_errors]
    sizes = np.array([p[0] for p in pairs], dtype=float)
    errors = np.array([p[1] for p in pairs], dtype=float)
    return local_half_width(sizes, errors, size)


def _piece_costs(size: np.ndarray, time: np.ndarray, min_points: int,
                 weights: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """RSS and free-parameter count of the constrained fit of every piece that may be chosen.

    A piece never starts or ends inside a run of repeated sizes, so pieces are indexed by the
    positions where the size changes, ``cuts`` (0 and n included): piece (a, b) holds the points
    cuts[a]..cuts[b]-1. On nccl-tests logs (two times per size) that halves each dimension.
    Returns (rss, n_free, cuts); rss is inf for pieces that are not allowed (fewer than
    ``min_points - 2`` residual degrees of freedom or fewer than :data:`MIN_DISTINCT_SIZES`
    distinct sizes).
    """
    n = size.size
    cuts = np.concatenate([[0], np.flatnonzero(size[1:] > size[:-1]) + 1, [n]])
    runs = np.arange(cuts.size)
    if cuts.size - 1 > MAX_SEARCH_CUTS:
        # A long sweep: breakpoints on an evenly thinned grid of the size changes, so that the
        # (cuts x cuts) matrices below stay bounded; the pieces are still fitted to every point.
        runs = np.unique(np.round(np.linspace(0, cuts.size - 1, MAX_SEARCH_CUTS + 1)).astype(np.int64))
        cuts = cuts[runs]
    x1 = 1.0 / time
    x2 = size / time
    z = np.zeros(1)
    w = np.ones(n) if weights is None else weights
    sums = [np.concatenate([z, np.cumsum(v)]) for v in (w * x1 * x1, w * x1 * x2, w * x2 * x2, w * x1, w * x2, w)]
    i = cuts[:, None]
    j = cuts[None, :]
    s11, s12, s22, b1, b2, wsum = (v[j] - v[i] for v in sums)
    count = (j - i).astype(float)
    rss, n_free = nonnegative_line_rss(s11, s12, s22, b1, b2, wsum)
    distinct = runs[None, :] - runs[:, None]  # distinct sizes in each piece
    # The same residual freedom for every piece: min_points - 2 degrees of freedom, so a
    # piece whose latency is held at 0 (one parameter) needs one point fewer.
    allowed = (j > i) & (count - n_free >= min_points - 2) & (distinct >= MIN_DISTINCT_SIZES)
    return np.where(allowed, rss, np.inf), n_free, cuts


def _criterion(name: str, rss: float, n: int, k_segments: int, n_free: int,
               noise_floor: float) -> float:
    # The free line parameters of every piece (2, or 1 where a bound holds one) plus one
    # per breakpoint.
    p = n_free + k_segments - 1
    rss = max(rss, n * noise_floor * noise_floor)
    if name == "bic":
        return n * math.log(rss / n) + p * math.log(n)
    if name == "aicc":
        if n - p - 1 <= 0:
            return math.inf
        return n * math.log(rss / n) + 2 * p + 2 * p * (p + 1) / (n - p - 1)
    raise UsageError(f"unknown information criterion {name!r}; use 'bic' or 'aicc'")


def fit_alpha_beta(size_bytes, time_s, *, min_points: int = DEFAULT_MIN_POINTS,
                   max_segments: int | None = None, criterion: str = "bic",
                   noise_floor: float = DEFAULT_NOISE_FLOOR,
                   confidence: float = DEFAULT_CONFIDENCE) -> PiecewiseFit:
    """Fit T(size) = alpha_k + size / B_k piecewise, finding the regimes from the data.

    Every piece obeys the physics alpha_k >= 0 and B_k > 0 (constrained least squares;
    see :func:`fit_segment`), in the search as well as in the final fit.

    Parameters
    ----------
    size_bytes, time_s : array_like
        Measured sizes (bytes) and times per operation (seconds); any order, repeated
        sizes allowed (they are never split across two pieces).
    min_points : int
        Fewest points in a piece with two free parameters; a piece with one (its
        latency held at 0) may have one point fewer, so that every piece keeps
        ``min_points - 2`` residual degrees of freedom. Every piece also spans at least
        :data:`MIN_DISTINCT_SIZES` distinct sizes when the data has that many.
    max_segments : int, optional
        Cap on the number of pieces (default: as many as ``min_points`` allows, at most
        :data:`MAX_PIECES`).
        ``max_segments=1`` gives the single-line fit.
    criterion : {'bic', 'aicc'}
        Information criterion choosing the number of pieces.
    noise_floor : float
        Relative error per point below which the fit is not rewarded (see module doc).
    confidence : float
        Level of the parameter intervals.

    Returns
    -------
    PiecewiseFit

    Raises
    ------
    UsageError
        Fewer than two distinct sizes, or non-positive times/sizes.
    """
    size, time = _sorted_points(size_bytes, time_s)
    if criterion not in ("bic", "aicc"):
        raise UsageError(f"unknown information criterion {criterion!r}; use 'bic' or 'aicc'")
    _check_settings(min_points, max_segments, noise_floor, confidence)
    n = size.size
    min_points = max(2, int(min_points))
    k_cap = max(1, min(n // max(min_points - 1, 2), MAX_PIECES))
    if max_segments is not None:
        k_cap = max(1, min(k_cap, int(max_segments)))
    bounds = _robust_split(size, time, min_points, k_cap, criterion, noise_floor, confidence)
    if bounds is None:
        # Too few points for min_points: one line through everything.
        bounds = [(0, n)]
    segments = tuple(fit_segment(size[i:j], time[i:j], confidence) for i, j in bounds)
    # The criterion of the split chosen, on the plain (unweighted) relative residuals.
    rss = sum(float(np.sum((1.0 - (seg.alpha_s + seg.inv_bw_s_per_byte * size[i:j]) / time[i:j]) ** 2))
              for seg, (i, j) in zip(segments, bounds))
    value = _criterion(criterion, rss, n, len(segments), sum(seg.n_points - seg.dof for seg in segments),
                       noise_floor)
    sizes, errors = loo_relative_errors(size, time, segments, _point_prediction)
    r_sizes, residuals = measured_residuals(size, time, _point_prediction(segments, size))
    segments = tuple(dataclasses.replace(
        seg,
        loo_errors=tuple((int(u), float(e)) for u, e in zip(sizes, errors)
                         if seg.size_min_bytes <= u <= seg.size_max_bytes and math.isfinite(e)),
        residuals=tuple((int(u), float(r)) for u, r in zip(r_sizes, residuals)
                        if seg.size_min_bytes <= u <= seg.size_max_bytes and math.isfinite(r)))
        for seg in segments)
    return _summarise(segments, size, time, criterion, value)


def _robust_split(size: np.ndarray, time: np.ndarray, min_points: int, k_cap: int, criterion: str,
                  noise_floor: float, confidence: float) -> list[tuple[int, int]] | None:
    """Point ranges of the pieces, found with Huber weights; None when no split is allowed.

    Least squares lets one size that sits off every line (a step just past a protocol switch)
    dominate the residual sum, so the criterion cannot see a small misfit that spans the top
    octaves: it then keeps one line across them. Each pass fits the split found, weights every point by Huber's rule
    (1 within ``ROBUST_TUNING`` robust standard deviations of its line, less beyond) and
    searches again, until the split stops changing. Exact and Gaussian data keep weights
    of (nearly) 1 and the plain least-squares split.
    """
    weights = None
    bounds: list[tuple[int, int]] | None = None
    for _ in range(ROBUST_PASSES):
        cost, n_free, cuts = _piece_costs(size, time, min_points, weights)
        best, back = _best_splits(cost, n_free, k_cap)
        chosen = _choose_split(best, k_cap, size.size, criterion, noise_floor)
        if chosen is None:
            return None
        (k, q), _ = chosen
        found = [(int(cuts[a]), int(cuts[b])) for a, b in _trace_back(back, n_free, k, q)]
        if found == bounds:
            break
        bounds = found
        segments = [fit_segment(size[i:j], time[i:j], confidence) for i, j in bounds]
        residual = np.abs(np.asarray(predict_segments(segments, size)[0]) / time - 1.0)
        # 1.4826 x the median absolute residual: the standard deviation for Gaussian noise.
        scale = max(1.4826 * float(np.median(residual)), noise_floor)
        weights = np.minimum(1.0, ROBUST_TUNING * scale / np.maximum(residual, 1e-300))
    return bounds


def _point_prediction(segments: Sequence[SegmentFit], size_bytes: np.ndarray) -> np.ndarray:
    """The pieces' lines alone (blended in gaps), without the measured residuals."""
    lines = [dataclasses.replace(seg, residuals=()) if seg.residuals else seg for seg in segments]
    return np.asarray(predict_segments(lines, size_bytes)[0])


def _check_settings(min_points: int, max_segments: int | None, noise_floor: float, confidence: float) -> None:
    """UsageError naming a fit setting out of its range (the CLI's flags bound them alike)."""
    def scalar(x: object) -> object:
        return x.item() if isinstance(x, np.ndarray) and x.ndim == 0 else x

    min_points, noise_floor, confidence = scalar(min_points), scalar(noise_floor), scalar(confidence)  # type: ignore

    def whole(x: object) -> bool:
        return not isinstance(x, bool) and isinstance(x, numbers.Real) and math.isfinite(x) and float(x).is_integer()

    def real(x: object) -> bool:
        return not isinstance(x, bool) and isinstance(x, numbers.Real) and math.isfinite(x)

    if not (whole(min_points) and 2 <= min_points <= 1000):
        raise UsageError(f"min_points must be a whole number in 2-1000, got {min_points!r}")
    if max_segments is not None and not (whole(max_segments) and max_segments >= 1):
        raise UsageError(f"max_segments must be a whole number of at least 1 (or None), got {max_segments!r}")
    if not (real(noise_floor) and 0 <= noise_floor < 1):
        raise UsageError(f"noise_floor must be a relative error in [0, 1), got {noise_floor!r}")
    if not (real(confidence) and 0 < confidence < 1):
        raise UsageError(f"confidence must lie strictly between 0 and 1 (0.95 for 95% intervals), got {confidence!r}")


def _sorted_points(size_bytes, time_s) -> tuple[np.ndarray, np.ndarray]:
    try:
        size = np.asarray(size_bytes, dtype=float).reshape(-1)
        time = np.asarray(time_s, dtype=float).reshape(-1)
    except (TypeError, ValueError) as exc:
        raise UsageError(f"sizes and times must be numbers (bytes and seconds): {exc}") from None
    _check_xy(size, time)
    if np.any(size > MAX_SIZE_BYTES):
        raise UsageError(f"a size above {format_size(MAX_SIZE_BYTES)} is no message any benchmark sends: "
                         f"give sizes in bytes")
    order = np.argsort(size, kind="stable")
    size, time = size[order], time[order]
    if np.unique(size).size < 2:
        raise UsageError("need at least two distinct sizes to fit a model")
    return size, time


_DP_BLOCK_ELEMENTS = 1 << 21
"""Sums the breakpoint search holds at once (16 MiB of floats), whatever the sweep's length."""


def _best_splits(cost: np.ndarray, n_free: np.ndarray, k_cap: int) -> tuple[np.ndarray, np.ndarray]:
    """Dynamic programme: best[k, q, j] is the least RSS of the points before cut j in k pieces with q
    free line parameters in all (k <= q <= 2k); back[k, q, j] where the last piece starts.

    The criterion charges a constrained piece one parameter, so the least RSS is needed for each
    parameter count, not just for each k.
    """
    inf = math.inf
    q_cap = 2 * k_cap
    m = cost.shape[0] - 1
    best = np.full((k_cap + 1, q_cap + 1, m + 1), inf)
    back = np.full((k_cap + 1, q_cap + 1, m + 1), -1, dtype=np.int64)
    best[0, 0, 0] = 0.0
    # A piece runs from cut i to a later cut j; its cost by free-parameter count (inf elsewhere).
    later = np.triu(np.ones((m + 1, m + 1), dtype=bool), 1)
    # Stored end-major (j, i): the minimum over starts i then runs along contiguous memory.
    pieces = {f: np.ascontiguousarray(np.where(later & (n_free == f), cost, inf).T) for f in (1, 2)}
    for k in range(1, k_cap + 1):
        # k - 1 pieces hold k - 1 to 2(k - 1) parameters: only those rows of best[k - 1] can be finite.
        # best[k] depends on best[k - 1] alone, so the end cuts j are solved together, in blocks that
        # keep the (parameters x start x end) sums within _DP_BLOCK_ELEMENTS.
        lo, hi = k - 1, 2 * (k - 1) + 1
        block = max(1, _DP_BLOCK_ELEMENTS // ((hi - lo) * (m + 1)))
        for j0 in range(k, m + 1, block):
            j1 = min(j0 + block, m + 1)
            for f in (1, 2):
                # prev[q', i] + piece[i, j] lands at q = q' + f
                total = best[k - 1, lo:hi, None, :] + pieces[f][None, j0:j1, :]
                arg = np.argmin(total, axis=2)
                val = np.take_along_axis(total, arg[:, :, None], axis=2)[:, :, 0]
                rows = slice(lo + f, hi + f)
                current = best[k, rows, j0:j1]
                better = val < current
                best[k, rows, j0:j1] = np.where(better, val, current)
                back[k, rows, j0:j1] = np.where(better, arg, back[k, rows, j0:j1])
    return best, back


def _choose_split(best: np.ndarray, k_cap: int, n: int, criterion: str,
                  noise_floor: float) -> tuple[tuple[int, int], float] | None:
    """(pieces, parameters) with the best criterion value over all ``n`` points, or None when no split is allowed."""
    choice, choice_value = None, math.inf
    for k in range(1, k_cap + 1):
        for q in range(k, 2 * k + 1):
            if not math.isfinite(best[k, q, -1]):
                continue
            value = _criterion(criterion, float(best[k, q, -1]), n, k, q, noise_floor)
            # Strictly better only: ties keep the simpler model (fewer pieces, then fewer parameters).
            if value < choice_value - 1e-9:
                choice, choice_value = (k, q), value
    return None if choice is None else (choice, float(choice_value))


def _trace_back(back: np.ndarray, n_free: np.ndarray, k: int, q: int) -> list[tuple[int, int]]:
    """(first, last) cut of each piece of the best split into k pieces with q parameters."""
    bounds = []
    j = back.shape[2] - 1
    while k > 0:
        i = int(back[k, q, j])
        bounds.append((i, j))
        q -= int(n_free[i, j])
        j = i
        k -= 1
    bounds.reverse()
    return bounds


def _summarise(segments: tuple[SegmentFit, ...], size: np.ndarray, time: np.ndarray, criterion: str,
               value: float) -> PiecewiseFit:
    pred = _point_prediction(segments, size)  # the lines' own fit (the residual carry would give 0)
    ape = _ape(pred, time)
    w = 1.0 / (time * time)
    rss = float(np.sum(w * (time - pred) ** 2))
    mean = np.sum(w * time) / np.sum(w)
    tss = float(np.sum(w * (time - mean) ** 2))
    return PiecewiseFit(
        segments=segments, criterion=criterion, criterion_value=float(value),
        n_points=int(size.size), r2=float(1.0 - rss / tss) if tss > 0 else 1.0,
        median_ape=float(np.median(ape)), max_ape=float(np.max(ape)))


def fit_single_line(size_bytes, time_s, confidence: float = DEFAULT_CONFIDENCE) -> PiecewiseFit:
    """The textbook one-line alpha-beta fit over every size (the baseline the piecewise fit is
    compared with): one line, without the measured residuals between sizes."""
    fit = fit_alpha_beta(size_bytes, time_s, max_segments=1, min_points=2, confidence=confidence)
    return dataclasses.replace(fit, segments=tuple(dataclasses.replace(seg, residuals=()) for seg in fit.segments))
