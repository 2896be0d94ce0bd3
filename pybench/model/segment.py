"""One straight piece T = alpha + size / B, fitted by relative-error least squares under alpha >= 0, 1/B >= 0.

Why relative errors: sizes span nine decades, and an absolute fit would ignore every small
message. Why constrained: a line through a convex stretch of a CPU sweep has a negative
intercept, which predicts negative times; the constrained optimum holds that parameter at 0
(:func:`pybench.model.relative_lsq.nonnegative_line`, the model's one solver). Intervals come
from the weighted least-squares covariance and Student's t, intersected with the physical range.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from functools import cached_property

import numpy as np

from pybench.errors import UsageError
from pybench.model.relative_lsq import nonnegative_line, t_quantile

# 4, not 3: a 3-point piece has one residual degree of freedom, so its 95% intervals use
# t = 12.7 and say nothing; 4 points give t = 4.3, and 3-point pieces chase single noisy sizes.
DEFAULT_MIN_POINTS = 4
DEFAULT_NOISE_FLOOR = 0.01
DEFAULT_CONFIDENCE = 0.95
# Which parameter a constrained piece holds at its physical bound 0 ("" = none).
HELD_CHOICES = ("", "alpha", "inv_bw")


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
    loo_errors : tuple of (int, float)
        (size, relative error) at each distinct size of the piece when the fit was asked to
        predict it without it (:mod:`pybench.model.jackknife`): how far a size nobody
        measured lands, misfit between sizes and piece ends included. The prediction band
        of :func:`pybench.model.piecewise.predict_segments` is at least as wide as these
        errors near the size predicted; empty where not computed (a piece fitted alone, or
        a file written before they were recorded).
    residuals : tuple of (int, float)
        (size, relative residual) at each distinct size of the piece: the measured time's
        median over the line's time, minus 1. Predictions between measured sizes carry
        them (see :func:`pybench.model.piecewise.predict_segments`); empty where not
        recorded (a piece fitted alone, older files, other world sizes).
    """

    size_min_bytes: int
    size_max_bytes: int
    alpha_s: float
    inv_bw_s_per_byte: float
    cov: tuple[float, float, float]
    dof: int
    n_points: int
    confidence: float = DEFAULT_CONFIDENCE
    r2: float = float("nan")
    median_ape: float = float("nan")
    max_ape: float = float("nan")
    rel_sigma: float = float("nan")
    held: str = ""
    held_ci_high: float = 0.0
    t_recorded: float = 0.0
    """The intervals' Student t quantile as the fit computed it (0.0: not recorded, computed when first
    needed): reading a model file then needs no quantile function (scipy.special's import)."""
    loo_errors: tuple[tuple[int, float], ...] = ()
    residuals: tuple[tuple[int, float], ...] = ()

    def __post_init__(self):
        if self.held not in HELD_CHOICES:
            raise ValueError(f"held {self.held!r} is not one of {HELD_CHOICES}")

    @cached_property
    def t(self) -> float:
        """Student t quantile used for the intervals (inf without residual freedom)."""
        if self.dof < 1:
            return math.inf
        return self.t_recorded or t_quantile(self.dof, self.confidence)

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
        fall, adding the residual scatter ``rel_sigma x time`` (a piece alone: the
        leave-one-size-out errors widen it in :func:`pybench.model.piecewise.predict_segments`).
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
            "loo_errors": [[int(size), float(err)] for size, err in self.loo_errors],
            "residuals": [[int(size), float(r)] for size, r in self.residuals],
            "bw_Bps": _json_float(self.bw_Bps),
            "alpha_ci_s": [_json_float(a_lo), _json_float(a_hi)],
            "bw_ci_Bps": [_json_float(bw_lo), _json_float(bw_hi)],
            "held": self.held,
            "held_ci_high": _json_float(self.held_ci_high) if self.held else None,
            "held_ci_high_unbounded": bool(self.held and math.isinf(self.held_ci_high)),
            "t": _json_float(self.t),
            "ci_notes": list(self.ci_notes()),
        }

    @classmethod
    def from_dict(cls, d: dict) -> SegmentFit:
        """Inverse of :meth:`to_dict` (raises KeyError/TypeError/ValueError on bad input)."""
        values = [float(x) for x in d["cov"]]
        if len(values) != 3 or not all(math.isfinite(v) for v in values) or values[0] < 0 or values[2] < 0:
            raise ValueError("cov must hold 3 finite numbers (var_alpha, cov, var_inv_bw), the variances >= 0")
        cov = (values[0], values[1], values[2])
        seg = cls(
            size_min_bytes=int(d["size_min_bytes"]), size_max_bytes=int(d["size_max_bytes"]),
            alpha_s=float(d["alpha_s"]), inv_bw_s_per_byte=float(d["inv_bw_s_per_byte"]),
            cov=cov, dof=int(d["dof"]), n_points=int(d["n_points"]),
            confidence=float(d.get("confidence", DEFAULT_CONFIDENCE)),
            r2=_from_json_float(d.get("r2")), median_ape=_from_json_float(d.get("median_ape")),
            max_ape=_from_json_float(d.get("max_ape")),
            rel_sigma=_from_json_float(d.get("rel_sigma")), held=str(d.get("held", "")),
            loo_errors=tuple((int(size), float(err)) for size, err in d.get("loo_errors", [])),
            residuals=tuple((int(size), float(r)) for size, r in d.get("residuals", [])),
            held_ci_high=(math.inf if d.get("held_ci_high_unbounded")
                          else float(d.get("held_ci_high") or 0.0)),
            t_recorded=float(d.get("t") or 0.0))
        _check_physical(seg)
        return seg


# What a fitted piece can physically be; a file outside this was edited or damaged, and its
# numbers would overflow the predictions (1e308 s latency) or the t quantile (confidence 1e308).
_MAX_ALPHA_S = 1e6            # 11 days per call
_MAX_INV_BW = 1e-3            # 1 kB/s
_MAX_SIZE = 1 << 50


def _check_physical(seg: SegmentFit) -> None:
    # (1/B is 0 only where the fit held it there, the piece flat: elsewhere an infinite bandwidth)
    if not (0 <= seg.alpha_s < _MAX_ALPHA_S and 0 <= seg.inv_bw_s_per_byte < _MAX_INV_BW
            and (seg.alpha_s > 0 or seg.inv_bw_s_per_byte > 0)
            and (seg.inv_bw_s_per_byte > 0 or seg.held == "inv_bw")):
        raise ValueError(f"an unphysical piece (alpha_s {seg.alpha_s!r}, inv_bw_s_per_byte "
                         f"{seg.inv_bw_s_per_byte!r}; expected 0 <= alpha_s < {_MAX_ALPHA_S:g} s and "
                         f"0 <= 1/B < {_MAX_INV_BW:g} s/B, not both 0): refit with `pybench fit`")
    if not 1 <= seg.size_min_bytes <= seg.size_max_bytes <= _MAX_SIZE:
        raise ValueError(f"a piece spans {seg.size_min_bytes}..{seg.size_max_bytes} bytes")
    if not 0 < seg.confidence < 1 or seg.dof < 1 or seg.n_points < 1:
        raise ValueError(f"a piece has confidence {seg.confidence!r}, dof {seg.dof}, n_points {seg.n_points}")
    if not all(-1 < err < 1e6 for _, err in seg.loo_errors + seg.residuals):
        raise ValueError("a piece's loo_errors and residuals must be relative errors above -1")
    if not all(1 <= size <= _MAX_SIZE for size, _ in seg.loo_errors + seg.residuals):
        raise ValueError(f"a piece's loo_errors and residuals must be at sizes from 1 to {_MAX_SIZE} bytes")
    # A quantile of Student's t lies above the normal one (1.64 at the least level a file may use with
    # any sense) and is finite with residual freedom; 0 is "not recorded".
    if not (seg.t_recorded == 0.0 or 1.0 < seg.t_recorded < 1e6):
        raise ValueError(f"a piece's t quantile is {seg.t_recorded!r}; refit with `pybench fit`")
    for name in ("r2", "median_ape", "max_ape", "rel_sigma"):
        value = getattr(seg, name)
        if not (math.isnan(value) or abs(value) < 1e12):
            raise ValueError(f"a piece's {name} is {value!r}")
    for name in ("median_ape", "max_ape", "rel_sigma"):  # scatters and errors, never below zero
        if getattr(seg, name) < 0:
            raise ValueError(f"a piece's {name} is {getattr(seg, name)!r}, below zero; refit with `pybench fit`")


def _json_float(x: float):
    # JSON has no inf/nan; None stands for "unbounded / not defined".
    x = float(x)
    return x if math.isfinite(x) else None


def _from_json_float(x) -> float:
    return float("nan") if x is None else float(x)


def _ape(pred: np.ndarray, time: np.ndarray) -> np.ndarray:
    return 100.0 * np.abs(pred - time) / time


def fit_segment(size_bytes, time_s, confidence: float = DEFAULT_CONFIDENCE) -> SegmentFit:
    """Fit one straight piece T = alpha + size/B by relative-error least squares.

    The fit is constrained to the physical range alpha >= 0, 1/B >= 0 (see
    :func:`~pybench.model.relative_lsq.nonnegative_line`): where the unconstrained optimum breaks a bound, that
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
    solved = nonnegative_line(size, time, confidence)
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
        inv_bw_s_per_byte=c, cov=(float(cov[0]), float(cov[1]), float(cov[2])), dof=dof,
        n_points=int(size.size), confidence=confidence, r2=float(r2),
        median_ape=float(np.median(ape)), max_ape=float(np.max(ape)),
        rel_sigma=math.sqrt(rss / dof) if dof > 0 else math.nan, held=held,
        held_ci_high=float(held_high), t_recorded=t_quantile(dof, confidence) if dof >= 1 else 0.0)


def _check_xy(size: np.ndarray, time: np.ndarray) -> None:
    if size.shape != time.shape or size.ndim != 1:
        raise UsageError("sizes and times must be 1-D arrays of the same length")
    if size.size < 2:
        raise UsageError(f"need at least 2 measured sizes to fit a model, got {size.size}")
    if not (np.all(np.isfinite(time)) and np.all(time > 0)):
        raise UsageError("every time must be a positive finite number of seconds")
    if not (np.all(np.isfinite(size)) and np.all(size > 0)):
        raise UsageError("every size must be a positive number of bytes")
