"""Least squares on relative error under non-negative parameters: the model package's one solver.

Every fit in the model minimises sum((predicted / measured - 1)^2), since sizes span nine decades
and an absolute fit would ignore every small message, with every parameter >= 0, since a latency
or a time per byte below zero is no physics and predicts negative times:

* :func:`solve_nonnegative`: any number of columns (the topology model's frames), by scipy's
  ``nnls``;
* :func:`nonnegative_line`: the two columns of one straight piece, T = alpha + c size, with the
  parameter intervals a piece reports (the constrained optimum in closed form: a convex quadratic
  with one violated bound has its optimum on that bound);
* :func:`nonnegative_line_rss`: the same optimum's residual for thousands of candidate pieces at
  once, from their normal-equation sums (the breakpoint search of :mod:`pybench.model.piecewise`).
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np


def t_quantile(dof: float, confidence: float) -> float:
    """Student's t quantile of a two-sided ``confidence`` interval (scipy, imported when first needed:
    reading a model file or planning needs no quantile)."""
    from scipy.special import stdtrit  # scipy.stats.t.ppf without its import cost

    return float(stdtrit(dof, 0.5 + confidence / 2.0))


def solve_nonnegative(x: np.ndarray, y: np.ndarray, preference: Sequence[int],
                      required: int) -> tuple[np.ndarray, float] | None:
    """Non-negative least squares on relative error (scipy's ``nnls``), column ``required`` positive.

    Returns (theta, relative RSS), or None when the best non-negative fit has no ``required`` term
    (a frame's bandwidth: without it large messages would cost nothing). Columns the data cannot
    tell apart from those before them in ``preference`` (one world size cannot separate a per-call
    from a per-step latency, nor the pipeline fill from the bandwidth) are held at 0.
    """
    weighted = x / y[:, None]  # relative error: every size counts alike
    norms = np.linalg.norm(weighted, axis=0)
    # Columns differ by 1e15 in scale (seconds per call against seconds per byte x bytes): they are
    # compared and solved as unit columns, or a small one reads as absent.
    unit = np.divide(weighted, norms, out=np.zeros_like(weighted), where=norms > 0)
    kept: list[int] = []
    for col in preference:
        if col < x.shape[1] and norms[col] > 0 and \
                np.linalg.matrix_rank(unit[:, [*kept, col]], tol=1e-9) == len(kept) + 1:
            kept.append(col)
    if required not in kept:
        return None
    from scipy.optimize import nnls  # here, not at import: reading a model file needs no solver

    solution, _ = nnls(unit[:, kept], np.ones_like(y), maxiter=50 * len(kept))
    theta = np.zeros(x.shape[1])
    theta[kept] = solution / norms[kept]
    if theta[required] <= 0:
        return None
    return theta, float(np.sum((x @ theta / y - 1.0) ** 2))


def _line_unconstrained(size: np.ndarray, time: np.ndarray):
    """Weighted (1/T^2) least squares of T = a + c s; returns (a, c, cov(3), rss) or None.

    Unconstrained: :func:`nonnegative_line` applies alpha >= 0, c >= 0 on top of it.
    The final fit of a piece uses an orthogonal (SVD) solve on norm-scaled columns rather
    than the normal equations the breakpoint search uses: over nine decades of sizes the
    normal matrix is ill-conditioned, and the reported parameters should not inherit that.
    """
    x = np.column_stack([1.0 / time, size / time])
    norms = np.linalg.norm(x, axis=0)
    if np.any(norms == 0) or not np.all(np.isfinite(norms)):
        return None
    xs = x / norms
    if np.linalg.matrix_rank(xs) < 2:
        return None
    y = np.ones(size.size)
    coef_s, *_ = np.linalg.lstsq(xs, y, rcond=None)
    rss = float(np.sum((y - xs @ coef_s) ** 2))
    dof = size.size - 2
    sigma2 = rss / dof if dof > 0 else math.nan
    cov_s = sigma2 * np.linalg.inv(xs.T @ xs)
    cov = cov_s / np.outer(norms, norms)
    a, c = coef_s / norms
    return float(a), float(c), (float(cov[0, 0]), float(cov[0, 1]), float(cov[1, 1])), rss


def _one_column(x: np.ndarray):
    """Least squares of 1 = p x (one column); returns (p, var_p, rss) with dof = n - 1."""
    sxx = float(np.sum(x * x))
    p = float(np.sum(x)) / sxx
    rss = float(np.sum((1.0 - p * x) ** 2))
    dof = x.size - 1
    sigma2 = rss / dof if dof > 0 else math.nan
    return p, sigma2 / sxx, rss


def nonnegative_line(size: np.ndarray, time: np.ndarray, confidence: float):
    """Weighted least squares of T = a + c s under the physics a >= 0 and c >= 0.

    Returns (a, c, cov(3), rss, held, held_ci_high, n_free) or None (one distinct size).

    A convex quadratic with one violated bound has its constrained optimum on that bound,
    so when the unconstrained fit has a < 0 (or c < 0) the optimum is the better of the
    two one-parameter fits a = 0 (T = c s) and c = 0 (T = a); both are always feasible
    (with positive times, the free parameter of each comes out positive). The held
    parameter is not estimated: its variance is 0, the other's comes from the
    one-parameter fit (n - 1 residual degrees of freedom), and the piece counts one
    parameter, not two, in the information criterion. ``held_ci_high`` is the upper end
    of the held parameter's interval: the unconstrained interval intersected with
    [0, inf), which keeps its coverage for any true value >= 0 (0 when that interval lies
    wholly below 0; inf when the unconstrained fit has no residual freedom).
    """
    solved = _line_unconstrained(size, time)
    if solved is None:
        return None
    a, c, cov, rss = solved
    if a >= 0.0 and c >= 0.0:
        return a, c, cov, rss, "", 0.0, 2
    x1, x2 = 1.0 / time, size / time
    c1, var_c1, rss_c = _one_column(x2)      # alpha held at 0
    a1, var_a1, rss_a = _one_column(x1)      # 1/B held at 0 (a flat piece)
    dof2 = size.size - 2
    t2 = t_quantile(dof2, confidence) if dof2 >= 1 else math.inf
    if rss_c <= rss_a:
        high = a + t2 * math.sqrt(max(cov[0], 0.0)) if dof2 >= 1 else math.inf
        return 0.0, c1, (0.0, 0.0, var_c1), rss_c, "alpha", max(high, 0.0), 1
    high = c + t2 * math.sqrt(max(cov[2], 0.0)) if dof2 >= 1 else math.inf
    return a1, 0.0, (var_a1, 0.0, 0.0), rss_a, "inv_bw", max(high, 0.0), 1


def nonnegative_line_rss(s11, s12, s22, b1, b2, n):
    """RSS and free-parameter count of the constrained fit from normal-equation sums.

    Vectorised over arrays of pieces (the breakpoint search); the same optimum as
    :func:`nonnegative_line`.
    Returns (rss, n_free); rss is inf where the piece cannot be fitted.
    """
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        det = s11 * s22 - s12 * s12
        ok2 = np.isfinite(det) & (det > 1e-12 * s11 * s22)
        a = (s22 * b1 - s12 * b2) / det
        c = (s11 * b2 - s12 * b1) / det
        rss2 = n - 2 * (a * b1 + c * b2) + a * a * s11 + 2 * a * c * s12 + c * c * s22
        rss_c = n - b2 * b2 / s22            # alpha held at 0
        rss_a = n - b1 * b1 / s11            # 1/B held at 0
    interior = ok2 & (a >= 0) & (c >= 0)
    rss1 = np.minimum(rss_c, rss_a)
    rss = np.where(interior, rss2, np.where(ok2, rss1, np.inf))
    rss = np.where(np.isfinite(rss), np.maximum(rss, 0.0), np.inf)
    n_free = np.where(interior, 2, 1)
    return rss, n_free
