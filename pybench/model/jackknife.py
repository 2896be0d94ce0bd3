"""How far a new size lands from the fit: leave-one-size-out errors of the fit's own pieces.

A piece's residual scatter (``rel_sigma``) says how far a repeat of a measured size falls from
its line; it does not say how far a size nobody measured falls, which also carries the line's
misfit between sizes (a curve through a straight piece) and, near a piece's ends, which regime
the size belongs to. The leave-one-size-out errors of the fit say exactly that: each distinct
size is taken out of its piece, the piece is refitted without it (the breakpoints stay where the
full fit put them, so this costs one line fit per size, even on 1024-size sweeps) and the size
is predicted as any unmeasured size is (:func:`pybench.model.piecewise.predict_segments`: in a
piece, or blended across the gap its absence opens). The prediction band at a size is at
least the largest of these errors among the measured sizes around it (a jackknife band, made
local: wide at protocol steps and piece ends, narrow where leaving a size out moved nothing).

The pieces' parametric band alone covers far fewer held-out sizes than this one; both, and the
alternatives tried (one neighbour per side, a conformal rescaling), are compared in CHANGELOG.md,
and today's coverage is generated in docs/model-validation.md.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence

import numpy as np

from pybench.model.segment import SegmentFit, fit_segment

Predictor = Callable[[Sequence[SegmentFit], np.ndarray], np.ndarray]


def loo_relative_errors(size: np.ndarray, time: np.ndarray, segments: Sequence[SegmentFit],
                        predict: Predictor) -> tuple[np.ndarray, np.ndarray]:
    """Relative error (predicted / measured - 1) at each distinct size, left out of its piece.

    Parameters
    ----------
    size, time : ndarray
        The points the pieces were fitted to (sorted by size; repeats allowed, their median
        is the measured time).
    segments : sequence of SegmentFit
        The fitted pieces, in order of size.
    predict : callable
        ``predict(segments, sizes) -> times``, the model's own prediction rule.

    Returns
    -------
    (sizes, errors) : ndarrays
        Distinct sizes and their leave-one-size-out relative errors (signed).
    """
    distinct, group = np.unique(size, return_inverse=True)
    measured = np.array([np.median(time[group == g]) for g in range(distinct.size)])
    errors = np.full(distinct.size, math.nan)
    for k, seg in enumerate(segments):
        in_piece = (distinct >= seg.size_min_bytes) & (distinct <= seg.size_max_bytes)
        inner = in_piece & (distinct > seg.size_min_bytes) & (distinct < seg.size_max_bytes)
        points = (size >= seg.size_min_bytes) & (size <= seg.size_max_bytes)
        if np.any(inner):
            lines = _lines_without_each(size[points], time[points], group[points], np.flatnonzero(inner))
            errors[inner] = lines / measured[inner] - 1.0
        for i in np.flatnonzero(in_piece & ~inner):
            # A piece's end: without it a gap opens, predicted by the model's own rule.
            pieces = list(segments)
            rest = points & (size != distinct[i])
            if np.unique(size[rest]).size >= 2:
                pieces[k] = fit_segment(size[rest], time[rest], seg.confidence)
            elif len(pieces) > 1:
                del pieces[k]
            else:
                continue
            errors[i] = float(predict(pieces, distinct[i:i + 1])[0]) / measured[i] - 1.0
    return distinct, errors


def _lines_without_each(size: np.ndarray, time: np.ndarray, group: np.ndarray, held: np.ndarray) -> np.ndarray:
    """The piece's line refitted without each held group of points, at that group's size.

    The same constrained relative least squares as :func:`pybench.model.segment.fit_segment`
    (alpha >= 0, 1/B >= 0; where the free optimum breaks one, the better of the two
    one-parameter fits), from normal-equation sums less the held group's: one pass instead
    of one fit per size (1024-size sweeps). Columns are scaled to unit norm first, since
    sizes span decades.
    """
    x1, x2 = 1.0 / time, size / time
    n1, n2 = float(np.linalg.norm(x1)), float(np.linalg.norm(x2))
    x1, x2 = x1 / n1, x2 / n2
    terms = (x1 * x1, x1 * x2, x2 * x2, x1, x2, np.ones(size.size))
    totals = [float(np.sum(v)) for v in terms]
    index = np.searchsorted(held, group)
    mine = (index < held.size) & (held[np.minimum(index, held.size - 1)] == group)
    s11, s12, s22, b1, b2, m = (t - np.bincount(index[mine], v[mine], held.size) for t, v in zip(totals, terms))
    with np.errstate(divide="ignore", invalid="ignore"):
        det = s11 * s22 - s12 * s12
        a = (s22 * b1 - s12 * b2) / det
        c = (s11 * b2 - s12 * b1) / det
        c_only = m - b2 * b2 / s22 <= m - b1 * b1 / s11
    free = (a >= 0) & (c >= 0)
    a = np.where(free, a, np.where(c_only, 0.0, b1 / s11))
    c = np.where(free, c, np.where(c_only, b2 / s22, 0.0))
    sizes = np.array([size[group == g][0] for g in held])
    return a / n1 + c / n2 * sizes


def _piece_of(segments: Sequence[SegmentFit], size: float) -> int:
    for k, seg in enumerate(segments):
        if seg.size_min_bytes <= size <= seg.size_max_bytes:
            return k
    raise ValueError(f"size {size} is in no piece")



# Sizes on each side of a predicted size whose leave-one-out errors bound its band: the
# nearest measured neighbours are the ones that say how well this stretch of the sweep is known.
NEIGHBOURS_PER_SIDE = 2
# Sizes span 1 B .. 2^50 B at most (segment._MAX_SIZE): more octaves than that are one request
# for a size of 0 or inf, where the growth must stay finite.
_MAX_OCTAVES = 64.0


def local_half_width(loo_sizes: np.ndarray, loo_errors: np.ndarray, at_sizes: np.ndarray,
                     per_side: int = NEIGHBOURS_PER_SIDE) -> np.ndarray:
    """Relative half-width at each of ``at_sizes`` from the leave-one-out errors around it.

    The largest absolute log error (10% too slow and 10% too fast weigh alike) among the
    ``per_side`` measured sizes at or below the size and the ``per_side`` above it: a
    localised jackknife band, wide where leaving a size out moved the fit (a protocol step,
    a piece's end), narrow where it did not, rather than one width for nine decades of
    sizes. Beyond the measured sizes it grows by the median of all the errors per octave of
    extrapolation (without that growth, sizes octaves beyond a sweep were mostly outside their
    band). 0 where no error is known.
    """
    order = np.argsort(loo_sizes)
    sizes, logs = loo_sizes[order], np.abs(np.log1p(loo_errors[order]))
    at = np.asarray(at_sizes, dtype=float).reshape(-1)
    if sizes.size == 0:
        return np.zeros(at.size)
    # The window of insertion point r is logs[r - per_side : r + per_side]; padding with 0
    # (no error) lets one sliding maximum serve every r = 0..n.
    padded = np.concatenate([np.zeros(per_side), logs, np.zeros(per_side)])
    window_max = np.lib.stride_tricks.sliding_window_view(padded, 2 * per_side).max(axis=1)
    half = window_max[np.searchsorted(sizes, at, side="right")]
    # Beyond the measured sizes nothing says where the next regime starts: the band grows by
    # the sweep's typical (median) leave-one-out error for every octave of extrapolation.
    with np.errstate(divide="ignore"):
        beyond = np.maximum(np.log2(at / sizes[-1]), 0.0) + np.maximum(np.log2(sizes[0] / at), 0.0)
    return np.expm1(half + float(np.median(logs)) * np.minimum(beyond, _MAX_OCTAVES))
