"""Fit the alpha-beta model T(size) = alpha + size / B, piecewise, to measured sweeps.

Why piecewise: NCCL and MPI switch algorithm and protocol with message size (LL, LL128,
Simple; ring, tree, NVLS), so a real sweep is a chain of roughly straight pieces in
(size, time), each with its own latency and bandwidth. The design brief cites one line
missing a real 8 x A100 sweep by more than 100% at 1-4 MiB; on the 2 x 8 A100 all-reduce
log in shared/data one line misses by up to 37% (leave-one-size-out: median 23%), the
piecewise fit by up to 6% (leave-one-size-out: median 2.7%, max 13%; both nccl-tests
columns used, see :meth:`pybench.model.logs.MeasurementSet.fit_points`). The table for every
log and CPU run: ``python benchmarks/model_cross_validation.py``.

How:

* Each piece is fitted by least squares on *relative* residuals
  ``(T_i - alpha - s_i c) / T_i`` (weights 1/T^2), with ``c = 1/B``: sizes span nine
  decades, and an absolute fit would ignore every small message.
* Physics is a constraint, not a hope: alpha >= 0 and 1/B >= 0 in every piece. Where the
  unconstrained fit breaks one (on CPU sweeps the time grows faster than linearly as
  buffers leave the caches, ~10 GB/s cache-resident against ~2.5 GB/s or less from
  memory, and a line through such a convex stretch has a negative intercept), the
  constrained optimum holds that parameter at 0 and fits the other alone; the piece then
  counts one parameter in the criterion. Predictions are therefore positive at every
  size and, through the algorithm formulas (positive factors), at every world size.
* Breakpoints are chosen by exact dynamic programming (the best split into k pieces
  for every k and every count of free parameters), and the number of pieces by an
  information criterion (BIC by default, AICc on request) on the weighted residual sum of
  squares. Each piece keeps ``min_points - 2`` residual degrees of freedom (4 points by
  default, 3 for a piece whose latency is held at 0). Breakpoints count as parameters.
  Pieces are fitted independently, so the model may jump at a breakpoint (a protocol
  switch does).
* The residual sum of squares gets a floor of ``noise_floor`` relative error per point
  (1% by default): these machines are noisy to at least that level, and without a floor
  the criterion would keep splitting to chase noise it cannot see.
* Confidence intervals come from the weighted least-squares covariance
  ``s^2 (X^T W X)^-1`` and Student's t quantile (``t_quantile``, computed here without
  scipy from the closed-form t distribution function for whole degrees of freedom),
  intersected with the physical range (alpha >= 0, 1/B >= 0): that keeps their coverage.
  The upper end of B is inf when the interval of 1/B reaches 0 (unbounded, said in
  words by :meth:`SegmentFit.ci_notes` and as null plus a note in JSON), and intervals
  are nan (undefined) without residual degrees of freedom.

Public entry points: :func:`fit_alpha_beta`, :func:`fit_single_line`,
:func:`fit_segment`, :func:`cross_validate`, :func:`t_quantile`.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from functools import cached_property

import numpy as np

from pybench.errors import UsageError

# 4, not 3: a 3-point piece has one residual degree of freedom, so its 95% intervals use
# t = 12.7 and say nothing; 4 points give t = 4.3. It also made leave-one-out on the real
# A100 sweep better (max 14% against 20%), since 3-point pieces chase single noisy sizes.
DEFAULT_MIN_POINTS = 4
DEFAULT_NOISE_FLOOR = 0.01
DEFAULT_CONFIDENCE = 0.95
# Which parameter a constrained piece holds at its physical bound 0 ("" = none).
HELD_CHOICES = ("", "alpha", "inv_bw")


# ----------------------------------------------------------------------------------------
# Student's t quantile without scipy
# ----------------------------------------------------------------------------------------

def _t_cdf(t: float, dof: int) -> float:
    """Student's t distribution function for a whole number of degrees of freedom.

    Closed form of Abramowitz & Stegun 26.7.3-26.7.4: with theta = atan(t / sqrt(dof)),
    A(t|dof) = P(|T| < t) is a finite trigonometric series, exact for integer dof.
    """
    if t == 0.0:
        return 0.5
    theta = math.atan(abs(t) / math.sqrt(dof))
    s, c = math.sin(theta), math.cos(theta)
    c2 = c * c
    if dof % 2 == 1:
        # odd: A = (2/pi) [theta + sin(theta) (cos + 2/3 cos^3 + 2*4/(3*5) cos^5 + ...)]
        total = 0.0
        if dof > 1:
            term = c
            total = term
            for k in range(1, (dof - 1) // 2):
                term *= c2 * (2 * k) / (2 * k + 1)
                total += term
        a = 2.0 / math.pi * (theta + s * total)
    else:
        # even: A = sin(theta) [1 + 1/2 cos^2 + 1*3/(2*4) cos^4 + ...]
        term = 1.0
        total = 1.0
        for k in range(1, dof // 2):
            term *= c2 * (2 * k - 1) / (2 * k)
            total += term
        a = s * total
    p = 0.5 + 0.5 * a
    return p if t > 0 else 1.0 - p


def _normal_quantile(p: float) -> float:
    lo, hi = -40.0, 40.0
    for _ in range(200):
        mid = 0.5 * (lo + hi)
        if 0.5 * (1.0 + math.erf(mid / math.sqrt(2.0))) < p:
            lo = mid
        else:
            hi = mid
    return 0.5 * (lo + hi)


def t_quantile(p: float, dof: int) -> float:
    """Quantile of Student's t distribution (e.g. ``t_quantile(0.975, 10) = 2.228``).

    Parameters
    ----------
    p : float
        Probability in (0, 1).
    dof : int
        Degrees of freedom, at least 1. Above 1000 the normal quantile is used
        (the difference is below 0.1%).

    Returns
    -------
    float
        t such that P(T <= t) = p.

    Notes
    -----
    Exact to about 1e-12: bisection on the closed-form distribution function for whole
    degrees of freedom (Abramowitz & Stegun 26.7.3/26.7.4), so no scipy and no table.
    """
    if not 0.0 < p < 1.0:
        raise ValueError(f"probability {p} must lie strictly between 0 and 1")
    dof = int(dof)
    if dof < 1:
        raise ValueError(f"degrees of freedom {dof} must be at least 1")
    if p < 0.5:
        return -t_quantile(1.0 - p, dof)
    if p == 0.5:
        return 0.0
    if dof > 1000:
        return _normal_quantile(p)
    if dof == 1:
        return math.tan(math.pi * (p - 0.5))
    lo, hi = 0.0, 1.0
    while _t_cdf(hi, dof) < p:
        hi *= 2.0
    for _ in range(200):
        mid = 0.5 * (lo + hi)
        if _t_cdf(mid, dof) < p:
            lo = mid
        else:
            hi = mid
        if hi - lo < 1e-13 * max(1.0, hi):
            break
    return 0.5 * (lo + hi)


# ----------------------------------------------------------------------------------------
# One straight piece
# ----------------------------------------------------------------------------------------

@dataclass(frozen=True)
class SegmentFit:
    """One regime: T = alpha_s + size_bytes / bw_Bps for sizes in [size_min_bytes, size_max_bytes].

    Attributes
    ----------
    size_min_bytes, size_max_bytes : int
        Smallest and largest measured size the piece was fitted to.
    alpha_s : float
        Latency term in seconds, never negative: the fit is constrained to alpha >= 0
        (see ``held``).
    inv_bw_s_per_byte : float
        Slope c = 1/B in seconds per byte, never negative (0: a flat piece, B = inf).
    cov : tuple of 3 floats
        Covariance of (alpha_s, inv_bw_s_per_byte): (var_alpha, cov, var_inv_bw); the
        held parameter, if any, has variance 0.
    dof : int
        Residual degrees of freedom (points - free parameters).
    n_points : int
        Sizes fitted.
    confidence : float
        Level of the intervals (0.95).
    r2 : float
        Weighted (relative-error) coefficient of determination.
    median_ape, max_ape : float
        Median / maximum absolute percentage error of the fit on its own points, in %.
    rel_sigma : float
        Residual standard deviation of the relative error, sqrt(RSS_w / dof): the scatter
        of one new measurement around the line, as a fraction of the time (nan in files
        written before it was recorded).
    held : str
        ``""`` when both parameters were fitted freely; ``"alpha"`` when the unconstrained
        fit had a negative latency, so alpha is held at its bound 0 and only B is fitted
        (T = size / B, typical of bandwidth-bound CPU pieces); ``"inv_bw"`` when it had a
        negative slope (time falling with size), so the piece is flat (B = inf).
    held_ci_high : float
        Upper end of the held parameter's interval (seconds for alpha, s/byte for 1/B;
        its lower end is 0); inf when unbounded; 0.0 (unused) when nothing is held, not
        nan, so that equal fits compare equal.
    """

    size_min_bytes: int
    size_max_bytes: int
    alpha_s: float
    inv_bw_s_per_byte: float
    cov: tuple
    dof: int
    n_points: int
    confidence: float = DEFAULT_CONFIDENCE
    r2: float = float("nan")
    median_ape: float = float("nan")
    max_ape: float = float("nan")
    rel_sigma: float = float("nan")
    held: str = ""
    held_ci_high: float = 0.0

    def __post_init__(self):
        if self.held not in HELD_CHOICES:
            raise ValueError(f"held {self.held!r} is not one of {HELD_CHOICES}")

    @cached_property
    def t(self) -> float:
        """Student t quantile used for the intervals (inf without residual freedom)."""
        if self.dof < 1:
            return math.inf
        return t_quantile(0.5 + self.confidence / 2.0, self.dof)

    @property
    def bw_Bps(self) -> float:
        """Bandwidth B in bytes/s (inf for a flat piece)."""
        return 1.0 / self.inv_bw_s_per_byte if self.inv_bw_s_per_byte > 0 else math.inf

    @property
    def alpha_ci_s(self) -> tuple:
        """Confidence interval of alpha in seconds, within the physical range [0, inf).

        Intersecting the t interval with alpha >= 0 keeps its coverage for every true
        alpha >= 0. (nan, nan) when undefined (no residual degrees of freedom).
        """
        if self.held == "alpha":
            return (0.0, self.held_ci_high)
        half = self.t * math.sqrt(self.cov[0]) if self.cov[0] >= 0 else math.nan
        if not math.isfinite(half):
            return (math.nan, math.nan)
        return (max(self.alpha_s - half, 0.0), self.alpha_s + half)

    @property
    def inv_bw_ci(self) -> tuple:
        """Confidence interval of 1/B in s/byte within [0, inf); (nan, nan) if undefined."""
        if self.held == "inv_bw":
            return (0.0, self.held_ci_high)
        half = self.t * math.sqrt(self.cov[2]) if self.cov[2] >= 0 else math.nan
        if not math.isfinite(half):
            return (math.nan, math.nan)
        return (max(self.inv_bw_s_per_byte - half, 0.0), self.inv_bw_s_per_byte + half)

    @property
    def bw_ci_Bps(self) -> tuple:
        """Confidence interval of B in bytes/s, mapped from the interval of 1/B.

        The upper end is inf (unbounded) when the interval of 1/B reaches zero: the data
        cannot rule out that this piece's time does not grow with size. (nan, nan) when
        undefined.
        """
        c_lo, c_hi = self.inv_bw_ci
        if not (math.isfinite(c_lo) and not math.isnan(c_hi)):
            return (math.nan, math.nan)
        bw_lo = 1.0 / c_hi if c_hi > 0 else math.inf
        bw_hi = 1.0 / c_lo if c_lo > 0 else math.inf
        return (bw_lo, bw_hi)

    def ci_notes(self) -> tuple:
        """Plain words for every interval that is not a finite pair (empty when all are)."""
        notes = []
        if self.held == "alpha":
            notes.append("alpha held at its bound 0 (the unconstrained fit gave a negative "
                         "latency); only B was fitted")
        elif self.held == "inv_bw":
            notes.append("1/B held at its bound 0 (time fell with size); the piece is flat, B = inf")
        a_lo, a_hi = self.alpha_ci_s
        b_lo, b_hi = self.bw_ci_Bps
        if math.isnan(a_lo) or math.isnan(b_lo):
            notes.append("intervals undefined: no residual degrees of freedom")
        else:
            if math.isinf(a_hi):
                notes.append("alpha interval unbounded above")
            if math.isinf(b_hi):
                notes.append("B interval unbounded above (the interval of 1/B reaches 0)")
        return tuple(notes)

    def predict(self, size_bytes, band: str = "confidence"):
        """Time in seconds and the half width of its band at ``size_bytes``.

        ``band="confidence"``: where the fitted line (the mean time) lies, from the
        parameter covariance. ``band="prediction"``: where one new measurement should
        fall, adding the residual scatter ``rel_sigma x time``.
        """
        s = np.asarray(size_bytes, dtype=float)
        time_s = self.alpha_s + s * self.inv_bw_s_per_byte
        var = self.cov[0] + 2.0 * s * self.cov[1] + s * s * self.cov[2]
        if band == "prediction":
            if not math.isfinite(self.rel_sigma):
                raise UsageError("this model has no residual scale (written by an older pybench); "
                                 "refit it to get prediction bands, or use the confidence band")
            var = var + (self.rel_sigma * time_s) ** 2
        elif band != "confidence":
            raise UsageError(f"unknown band {band!r}; use 'confidence' or 'prediction'")
        half = self.t * np.sqrt(np.maximum(var, 0.0))
        return time_s, half

    def to_dict(self) -> dict:
        """Plain dict for JSON (derived values included for readers, ignored on load)."""
        bw_lo, bw_hi = self.bw_ci_Bps
        a_lo, a_hi = self.alpha_ci_s
        # JSON has no inf/nan: an unbounded end or an undefined interval is null, and
        # ``ci_notes`` says which in words, so a reader never mistakes it for a number.
        return {
            "size_min_bytes": int(self.size_min_bytes),
            "size_max_bytes": int(self.size_max_bytes),
            "alpha_s": float(self.alpha_s),
            "inv_bw_s_per_byte": float(self.inv_bw_s_per_byte),
            "cov": [float(x) for x in self.cov],
            "dof": int(self.dof),
            "n_points": int(self.n_points),
            "confidence": float(self.confidence),
            "r2": _json_float(self.r2),
            "median_ape": _json_float(self.median_ape),
            "max_ape": _json_float(self.max_ape),
            "rel_sigma": _json_float(self.rel_sigma),
            "bw_Bps": _json_float(self.bw_Bps),
            "alpha_ci_s": [_json_float(a_lo), _json_float(a_hi)],
            "bw_ci_Bps": [_json_float(bw_lo), _json_float(bw_hi)],
            "held": self.held,
            "held_ci_high": _json_float(self.held_ci_high) if self.held else None,
            "held_ci_high_unbounded": bool(self.held and math.isinf(self.held_ci_high)),
            "ci_notes": list(self.ci_notes()),
        }

    @classmethod
    def from_dict(cls, d: dict) -> SegmentFit:
        """Inverse of :meth:`to_dict` (raises KeyError/TypeError/ValueError on bad input)."""
        cov = tuple(float(x) for x in d["cov"])
        if len(cov) != 3:
            raise ValueError("cov must hold 3 numbers (var_alpha, cov, var_inv_bw)")
        return cls(
            size_min_bytes=int(d["size_min_bytes"]), size_max_bytes=int(d["size_max_bytes"]),
            alpha_s=float(d["alpha_s"]), inv_bw_s_per_byte=float(d["inv_bw_s_per_byte"]),
            cov=cov, dof=int(d["dof"]), n_points=int(d["n_points"]),
            confidence=float(d.get("confidence", DEFAULT_CONFIDENCE)),
            r2=_from_json_float(d.get("r2")), median_ape=_from_json_float(d.get("median_ape")),
            max_ape=_from_json_float(d.get("max_ape")),
            rel_sigma=_from_json_float(d.get("rel_sigma")), held=str(d.get("held", "")),
            held_ci_high=(math.inf if d.get("held_ci_high_unbounded")
                          else float(d.get("held_ci_high") or 0.0)))


def _json_float(x: float):
    # JSON has no inf/nan; None stands for "unbounded / not defined".
    x = float(x)
    return x if math.isfinite(x) else None


def _from_json_float(x) -> float:
    return float("nan") if x is None else float(x)


def _solve_weighted(size: np.ndarray, time: np.ndarray):
    """Weighted (1/T^2) least squares of T = a + c s; returns (a, c, cov(3), rss) or None.

    Unconstrained: :func:`_solve_physical` applies alpha >= 0, c >= 0 on top of it.
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


def _solve_one(x: np.ndarray):
    """Least squares of 1 = p x (one column); returns (p, var_p, rss) with dof = n - 1."""
    sxx = float(np.sum(x * x))
    p = float(np.sum(x)) / sxx
    rss = float(np.sum((1.0 - p * x) ** 2))
    dof = x.size - 1
    sigma2 = rss / dof if dof > 0 else math.nan
    return p, sigma2 / sxx, rss


def _solve_physical(size: np.ndarray, time: np.ndarray, confidence: float):
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
    solved = _solve_weighted(size, time)
    if solved is None:
        return None
    a, c, cov, rss = solved
    if a >= 0.0 and c >= 0.0:
        return a, c, cov, rss, "", 0.0, 2
    x1, x2 = 1.0 / time, size / time
    c1, var_c1, rss_c = _solve_one(x2)      # alpha held at 0
    a1, var_a1, rss_a = _solve_one(x1)      # 1/B held at 0 (a flat piece)
    dof2 = size.size - 2
    t2 = t_quantile(0.5 + confidence / 2.0, dof2) if dof2 >= 1 else math.inf
    if rss_c <= rss_a:
        high = a + t2 * math.sqrt(max(cov[0], 0.0)) if dof2 >= 1 else math.inf
        return 0.0, c1, (0.0, 0.0, var_c1), rss_c, "alpha", max(high, 0.0), 1
    high = c + t2 * math.sqrt(max(cov[2], 0.0)) if dof2 >= 1 else math.inf
    return a1, 0.0, (var_a1, 0.0, 0.0), rss_a, "inv_bw", max(high, 0.0), 1


def _physical_from_sums(s11, s12, s22, b1, b2, n):
    """RSS and free-parameter count of the constrained fit from normal-equation sums.

    Vectorised over arrays of pieces (the breakpoint search); see :func:`_solve_physical`.
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


def _ape(pred: np.ndarray, time: np.ndarray) -> np.ndarray:
    return 100.0 * np.abs(pred - time) / time


def fit_segment(size_bytes, time_s, confidence: float = DEFAULT_CONFIDENCE) -> SegmentFit:
    """Fit one straight piece T = alpha + size/B by relative-error least squares.

    The fit is constrained to the physical range alpha >= 0, 1/B >= 0 (see
    :func:`_solve_physical`): where the unconstrained optimum breaks a bound, that
    parameter is held at 0 (``SegmentFit.held``) and the other fitted alone.

    Parameters
    ----------
    size_bytes, time_s : array_like
        At least two points with two distinct sizes; times must be positive.
    confidence : float
        Level of the parameter intervals.

    Returns
    -------
    SegmentFit
    """
    size = np.asarray(size_bytes, dtype=float)
    time = np.asarray(time_s, dtype=float)
    _check_xy(size, time)
    solved = _solve_physical(size, time, confidence)
    if solved is None:
        raise UsageError("cannot fit a line: need at least two distinct sizes")
    a, c, cov, rss, held, held_high, n_free = solved
    pred = a + c * size
    ape = _ape(pred, time)
    # Weighted R^2 on relative residuals, against the best constant (weighted mean).
    w = 1.0 / (time * time)
    mean = np.sum(w * time) / np.sum(w)
    tss = float(np.sum(w * (time - mean) ** 2))
    r2 = 1.0 - rss / tss if tss > 0 else 1.0
    dof = int(size.size - n_free)
    return SegmentFit(
        size_min_bytes=int(size.min()), size_max_bytes=int(size.max()), alpha_s=a,
        inv_bw_s_per_byte=c, cov=tuple(float(x) for x in cov), dof=dof,
        n_points=int(size.size), confidence=confidence, r2=float(r2),
        median_ape=float(np.median(ape)), max_ape=float(np.max(ape)),
        rel_sigma=math.sqrt(rss / dof) if dof > 0 else math.nan, held=held,
        held_ci_high=float(held_high))


def _check_xy(size: np.ndarray, time: np.ndarray) -> None:
    if size.shape != time.shape or size.ndim != 1:
        raise UsageError("sizes and times must be 1-D arrays of the same length")
    if size.size < 2:
        raise UsageError(f"need at least 2 measured sizes to fit a model, got {size.size}")
    if not (np.all(np.isfinite(time)) and np.all(time > 0)):
        raise UsageError("every time must be a positive finite number of seconds")
    if not (np.all(np.isfinite(size)) and np.all(size > 0)):
        raise UsageError("every size must be a positive number of bytes")


# ----------------------------------------------------------------------------------------
# Piecewise fit
# ----------------------------------------------------------------------------------------

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

    segments: tuple
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

    The other natural choice, a power law between the two pieces' values at the gap's
    ends (no extrapolation of either line), was tried in leave-one-size-out on the real
    logs: A100 max 15.2% against 13.0%, H100 14.0% against 16.6%, B200 43.5% against
    67.4%; neither is better on every log, so the blend with a physical rationale stays.

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
                t[gap] = np.exp((1 - w) * np.log(t0) + w * np.log(t[gap]))
                h[gap] = (1 - w) * h0 + w * h[gap]
        time_s[sel] = t
        half_s[sel] = h
    if arr.ndim == 0:
        return float(time_s[0]), float(half_s[0])
    return time_s.reshape(arr.shape), half_s.reshape(arr.shape)


def _piece_costs(size: np.ndarray, time: np.ndarray, min_points: int):
    """RSS and free-parameter count of the constrained fit of every piece i..j-1.

    Returns (rss, n_free) arrays of shape (n + 1, n + 1); rss is inf for pieces that are
    not allowed (fewer than ``min_points - 2`` residual degrees of freedom, one distinct
    size, or starting or ending inside a run of repeated sizes).
    """
    n = size.size
    x1 = 1.0 / time
    x2 = size / time
    z = np.zeros(1)
    sums = [np.concatenate([z, np.cumsum(v)]) for v in (x1 * x1, x1 * x2, x2 * x2, x1, x2)]
    i = np.arange(n + 1)[:, None]
    j = np.arange(n + 1)[None, :]
    s11, s12, s22, b1, b2 = (v[j] - v[i] for v in sums)
    count = (j - i).astype(float)
    rss, n_free = _physical_from_sums(s11, s12, s22, b1, b2, count)
    # Distinct sizes in piece i..j-1: run index of its last point minus that of its first, + 1.
    run = np.concatenate([[0], np.cumsum(size[1:] > size[:-1])])
    valid_ij = j > i
    distinct = np.where(valid_ij, run[np.clip(j - 1, 0, n - 1)] - run[np.clip(i, 0, n - 1)] + 1, 0)
    can_cut = np.ones(n + 1, dtype=bool)
    can_cut[1:n] = size[1:] > size[:-1]
    # The same residual freedom for every piece: min_points - 2 degrees of freedom, so a
    # piece whose latency is held at 0 (one parameter) needs one point fewer.
    allowed = (valid_ij & (j - i - n_free >= min_points - 2) & (distinct >= 2)
               & can_cut[i] & can_cut[j])
    return np.where(allowed, rss, np.inf), n_free


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
        ``min_points - 2`` residual degrees of freedom.
    max_segments : int, optional
        Cap on the number of pieces (default: as many as ``min_points`` allows).
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
    size = np.asarray(size_bytes, dtype=float).reshape(-1)
    time = np.asarray(time_s, dtype=float).reshape(-1)
    _check_xy(size, time)
    if criterion not in ("bic", "aicc"):
        raise UsageError(f"unknown information criterion {criterion!r}; use 'bic' or 'aicc'")
    order = np.argsort(size, kind="stable")
    size, time = size[order], time[order]
    n = size.size
    if np.unique(size).size < 2:
        raise UsageError("need at least two distinct sizes to fit a model")
    min_points = max(2, int(min_points))
    k_cap = max(1, n // max(min_points - 1, 2))
    if max_segments is not None:
        k_cap = max(1, min(k_cap, int(max_segments)))

    cost, n_free = _piece_costs(size, time, min_points)
    # best[k, q, j]: least RSS of the first j points in k pieces with q free line
    # parameters in all (k <= q <= 2k): the criterion charges constrained pieces one
    # parameter, so the least RSS for each parameter count is needed, not just for each k.
    inf = math.inf
    q_cap = 2 * k_cap
    best = np.full((k_cap + 1, q_cap + 1, n + 1), inf)
    back = np.full((k_cap + 1, q_cap + 1, n + 1), -1, dtype=np.int64)
    best[0, 0, 0] = 0.0
    for k in range(1, k_cap + 1):
        for j in range(k * 2, n + 1):
            col = cost[:j, j]
            if not np.any(np.isfinite(col)):
                continue
            for f in (1, 2):
                piece = np.where(n_free[:j, j] == f, col, inf)
                # prev[q', i] + piece[i] lands at q = q' + f
                total = best[k - 1, :q_cap + 1 - f, :j] + piece[None, :]
                arg = np.argmin(total, axis=1)
                val = total[np.arange(total.shape[0]), arg]
                better = val < best[k, f:, j]
                best[k, f:, j] = np.where(better, val, best[k, f:, j])
                back[k, f:, j] = np.where(better, arg, back[k, f:, j])

    choice, choice_value = None, inf
    for k in range(1, k_cap + 1):
        for q in range(k, 2 * k + 1):
            if not math.isfinite(best[k, q, n]):
                continue
            value = _criterion(criterion, float(best[k, q, n]), n, k, q, noise_floor)
            # Strictly better only: ties keep the simpler model (fewer pieces, then fewer
            # parameters).
            if value < choice_value - 1e-9:
                choice, choice_value = (k, q), value
    if choice is None:
        # Too few points for min_points: one line through everything.
        bounds = [(0, n)]
        seg = fit_segment(size, time, confidence)
        q_one = seg.n_points - seg.dof
        wrss = float(np.sum(((time - (seg.alpha_s + seg.inv_bw_s_per_byte * size)) / time) ** 2))
        choice_value = _criterion(criterion, wrss, n, 1, q_one, noise_floor)
    else:
        bounds = []
        j = n
        k, q = choice
        while k > 0:
            i = int(back[k, q, j])
            bounds.append((i, j))
            q -= int(n_free[i, j])
            j = i
            k -= 1
        bounds.reverse()
    segments = tuple(fit_segment(size[i:j], time[i:j], confidence) for i, j in bounds)

    pred, _ = predict_segments(segments, size)
    ape = _ape(pred, time)
    w = 1.0 / (time * time)
    rss = float(np.sum(w * (time - pred) ** 2))
    mean = np.sum(w * time) / np.sum(w)
    tss = float(np.sum(w * (time - mean) ** 2))
    return PiecewiseFit(
        segments=segments, criterion=criterion, criterion_value=float(choice_value),
        n_points=int(n), r2=float(1.0 - rss / tss) if tss > 0 else 1.0,
        median_ape=float(np.median(ape)), max_ape=float(np.max(ape)))


def fit_single_line(size_bytes, time_s, confidence: float = DEFAULT_CONFIDENCE) -> PiecewiseFit:
    """The one-line alpha-beta fit over every size (for comparison with the piecewise fit)."""
    return fit_alpha_beta(size_bytes, time_s, max_segments=1, min_points=2, confidence=confidence)


# ----------------------------------------------------------------------------------------
# Leave-one-size-out cross-validation
# ----------------------------------------------------------------------------------------

@dataclass(frozen=True, eq=False)
class CrossValidation:
    """Leave-one-size-out errors: each size predicted by a fit that never saw it.

    Attributes
    ----------
    method : str
        ``piecewise`` or ``single-line``.
    size_bytes, time_s, predicted_s, ape_percent : ndarray
        One entry per held-out size (measured time; for repeated sizes, their median).
    n_segments : ndarray of int
        Pieces found by each held-out fit.
    """

    method: str
    size_bytes: np.ndarray
    time_s: np.ndarray
    predicted_s: np.ndarray
    ape_percent: np.ndarray
    n_segments: np.ndarray

    @property
    def median_ape(self) -> float:
        """Median absolute percentage error over the held-out sizes (%)."""
        return float(np.median(self.ape_percent)) if self.ape_percent.size else math.nan

    @property
    def max_ape(self) -> float:
        """Largest absolute percentage error over the held-out sizes (%)."""
        return float(np.max(self.ape_percent)) if self.ape_percent.size else math.nan

    def table(self) -> str:
        """Plain-text table, one row per held-out size."""
        rows = [f"{'size (B)':>14} {'measured (us)':>14} {'predicted (us)':>15} {'APE %':>7}"]
        for s, t, p, e in zip(self.size_bytes, self.time_s, self.predicted_s, self.ape_percent):
            rows.append(f"{int(s):>14} {t * 1e6:>14.2f} {p * 1e6:>15.2f} {e:>7.1f}")
        rows.append(f"{self.method}: median APE {self.median_ape:.1f}%, max APE {self.max_ape:.1f}%")
        return "\n".join(rows)


def cross_validate(measurements, min_size: int = 64 * 1024, *, single_line: bool = False,
                   **fit_kwargs) -> CrossValidation:
    """Leave-one-size-out cross-validation of the piecewise (or single-line) fit.

    Each distinct size at or above ``min_size`` is removed in turn (all its repeats), the
    model is refitted on every other size (small sizes included) and asked to predict it.

    Parameters
    ----------
    measurements : MeasurementSet or (size_bytes, time_s) pair
        A MeasurementSet contributes every measurement it holds
        (:meth:`~pybench.model.logs.MeasurementSet.fit_points`: nccl-tests' out-of-place and
        in-place times), and the measured time of a held-out size is their median, which
        for two is their mean.
    min_size : int
        Smallest size held out (64 KiB by default: the acceptance criterion's range).
    single_line : bool
        Cross-validate the one-line fit instead, for comparison.
    **fit_kwargs
        Passed to :func:`fit_alpha_beta`.

    Returns
    -------
    CrossValidation

    Raises
    ------
    UsageError
        Fewer than three distinct sizes (nothing left to fit after holding one out).
    """
    if hasattr(measurements, "fit_points"):
        size, time = measurements.fit_points()
    elif hasattr(measurements, "size_bytes"):
        size, time = measurements.size_bytes, measurements.time_s
    else:
        size, time = measurements
    size = np.asarray(size, dtype=float)
    time = np.asarray(time, dtype=float)
    distinct = np.unique(size)
    if distinct.size < 3:
        raise UsageError(f"cross-validation needs at least 3 distinct sizes, got {distinct.size}")
    _check_xy(size, time)
    held, measured, predicted, nseg = [], [], [], []
    for s in distinct[distinct >= min_size]:
        keep = size != s
        if single_line:
            fit = fit_alpha_beta(size[keep], time[keep], max_segments=1, min_points=2)
        else:
            fit = fit_alpha_beta(size[keep], time[keep], **fit_kwargs)
        p, _ = fit.predict(s)
        held.append(s)
        measured.append(float(np.median(time[~keep])))
        predicted.append(p)
        nseg.append(len(fit.segments))
    measured_arr = np.array(measured)
    predicted_arr = np.array(predicted)
    return CrossValidation(
        method="single-line" if single_line else "piecewise",
        size_bytes=np.array(held, dtype=np.int64), time_s=measured_arr,
        predicted_s=predicted_arr, ape_percent=_ape(predicted_arr, measured_arr),
        n_segments=np.array(nseg, dtype=int))


# ----------------------------------------------------------------------------------------
# Which algorithm formula explains several world sizes
# ----------------------------------------------------------------------------------------

@dataclass(frozen=True)
class AlgorithmChoice:
    """Outcome of :func:`select_algorithm`.

    Attributes
    ----------
    name : str
        Chosen algorithm (key of :data:`pybench.model.algorithms.ALGORITHMS`).
    basis : str
        How it was chosen, in words (``assumed`` when the data cannot discriminate).
    scores : tuple of (name, float)
        Weighted relative RSS of each candidate's joint fit (lower is better); empty
        when not compared.
    """

    name: str
    basis: str
    scores: tuple = ()


def select_algorithm(collective: str, worlds, sizes, times, *, min_size: int = 0,
                     candidates=None) -> AlgorithmChoice:
    """Pick the algorithm formula that best explains sweeps at several world sizes.

    For each candidate, per-link (alpha, 1/B) are fitted jointly to every point with
    ``T_i = a(p_i) alpha + b(p_i) n_i / B`` (relative-error least squares, sizes at or
    above ``min_size``); candidates have the same number of parameters, so the smallest
    residual wins. With a single world size every candidate fits equally well (the
    coefficients are constants absorbed by alpha and B), so the collective's default
    (ring) is returned with ``basis`` saying it was assumed.

    Parameters
    ----------
    collective : str
    worlds : sequence of int
        World size of each measurement set.
    sizes, times : sequence of array_like
        One array per set.
    min_size : int
        Ignore smaller sizes (e.g. to compare in the bandwidth regime only).
    candidates : sequence of str, optional
        Algorithm names (default: every formula for the collective).

    Returns
    -------
    AlgorithmChoice
    """
    from pybench.model.algorithms import candidates_for, default_algorithm, get_algorithm

    worlds = [int(w) for w in worlds]
    if len(set(worlds)) < 2:
        return AlgorithmChoice(default_algorithm(collective),
                               "assumed: data at one world size cannot tell algorithms apart")
    algos = [get_algorithm(c) for c in candidates] if candidates else candidates_for(collective)
    if not algos:
        return AlgorithmChoice(default_algorithm(collective), "assumed: no candidate formulas")
    scores = []
    for algo in algos:
        x1, x2 = [], []
        for w, s, t in zip(worlds, sizes, times):
            s = np.asarray(s, dtype=float)
            t = np.asarray(t, dtype=float)
            keep = s >= min_size
            x1.append(algo.latency_coef(w) / t[keep])
            x2.append(algo.bandwidth_coef(w) * s[keep] / t[keep])
        a = np.column_stack([np.concatenate(x1), np.concatenate(x2)])
        y = np.ones(a.shape[0])
        coef, *_ = np.linalg.lstsq(a, y, rcond=None)
        rss = float(np.sum((y - a @ coef) ** 2))
        scores.append((algo.name, rss))
    best = min(scores, key=lambda kv: kv[1])
    text = ", ".join(f"{n} {v:.4g}" for n, v in sorted(scores, key=lambda kv: kv[1]))
    return AlgorithmChoice(best[0], f"best joint fit over world sizes {sorted(set(worlds))} "
                                    f"(relative RSS: {text})", tuple(scores))
