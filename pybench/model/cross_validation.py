"""Leave-one-size-out cross-validation: each size predicted by a fit that never saw it."""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from pybench.errors import UsageError
from pybench.model.anomalies import find_anomalies, without
from pybench.model.piecewise import fit_alpha_beta, fit_single_line
from pybench.model.segment import _ape, _check_xy


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
    covered: np.ndarray | None = None
    """Per held-out size: inside the 95% prediction band of the fit that never saw it."""
    half_width_percent: np.ndarray | None = None
    """Per held-out size: half-width of that band, in % of the predicted time."""
    anomalies: tuple[int, ...] = ()
    """Sizes :func:`~pybench.model.anomalies.find_anomalies` named, left out of fits and errors."""

    @property
    def median_half_width(self) -> float:
        """Median half-width of the prediction bands (%): coverage bought with wide bands shows here."""
        hw = self.half_width_percent
        return float(np.median(hw)) if hw is not None and hw.size else math.nan

    @property
    def coverage(self) -> float:
        """Share of held-out sizes inside their 95% prediction band (nan when not computed)."""
        return float(np.mean(self.covered)) if self.covered is not None and self.covered.size else math.nan

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
        rows = [f"{'size (B)':>14} {'measured (us)':>14} {'predicted (us)':>15} {'APE %':>7} {'band +-%':>8}"]
        n = self.size_bytes.size
        hw = self.half_width_percent if self.half_width_percent is not None else np.full(n, math.nan)
        inside = self.covered if self.covered is not None else np.ones(n, dtype=bool)
        for s, t, p, e, h, c in zip(self.size_bytes, self.time_s, self.predicted_s, self.ape_percent, hw, inside):
            rows.append(f"{int(s):>14} {t * 1e6:>14.2f} {p * 1e6:>15.2f} {e:>7.1f} {h:>8.1f}"
                        + ("" if c else "  outside the band"))
        rows.append(f"{self.method}: median APE {self.median_ape:.1f}%, max APE {self.max_ape:.1f}%, "
                    f"95% band covers {100 * self.coverage:.0f}% (median half-width {self.median_half_width:.1f}%)")
        return "\n".join(rows)


def cross_validate(measurements, min_size: int = 64 * 1024, *, single_line: bool = False,
                   exclude_anomalies: bool = False, **fit_kwargs) -> CrossValidation:
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
    exclude_anomalies : bool
        Leave out the sizes :func:`pybench.model.anomalies.find_anomalies` names, from the fits
        and from the held-out sizes, as :func:`pybench.model.build.fit_model` does.
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
    size, time, named = _held_out_points(measurements, exclude_anomalies)
    distinct = np.unique(size)
    held, measured, predicted, nseg, covered, halves = [], [], [], [], [], []
    for s in distinct[distinct >= min_size]:
        keep = size != s
        if single_line:
            fit = fit_single_line(size[keep], time[keep])
        else:
            fit = fit_alpha_beta(size[keep], time[keep], **fit_kwargs)
        p, _ = fit.predict(s)
        _, half = fit.predict(s, band="prediction")
        held.append(s)
        measured.append(float(np.median(time[~keep])))
        covered.append(abs(float(p) - measured[-1]) <= float(half))
        halves.append(100.0 * float(half) / float(p))
        predicted.append(p)
        nseg.append(len(fit.segments))
    measured_arr = np.array(measured)
    predicted_arr = np.array(predicted)
    return CrossValidation(
        method="single-line" if single_line else "piecewise",
        size_bytes=np.array(held, dtype=np.int64), time_s=measured_arr,
        predicted_s=predicted_arr, ape_percent=_ape(predicted_arr, measured_arr),
        n_segments=np.array(nseg, dtype=int), covered=np.array(covered, dtype=bool),
        half_width_percent=np.array(halves), anomalies=tuple(a.size_bytes for a in named))


def neighbour_baseline(measurements, min_size: int = 64 * 1024, *,
                       exclude_anomalies: bool = False) -> CrossValidation:
    """Leave-one-size-out by the plainest rule: a straight line in log-log between the two neighbours.

    The yardstick for :func:`cross_validate`: a model that cannot beat its own sweep's
    neighbours carries nothing, and a sweep whose neighbours miss each other by tens of percent
    (protocol steps, a curve that is not monotone) bounds what any fit can do on it. The
    held-out sizes are :func:`cross_validate`'s; the end sizes take the line through their two
    nearest neighbours on the one side. Replicates of a size count as their median.

    Returns
    -------
    CrossValidation
        ``method="neighbours"``, without bands (``covered`` and ``half_width_percent`` None).
    """
    size, time, named = _held_out_points(measurements, exclude_anomalies)
    distinct = np.unique(size)
    log_s = np.log(distinct)
    log_t = np.log([np.median(time[size == u]) for u in distinct])
    held = np.flatnonzero(distinct >= min_size)
    predicted = np.empty(held.size)
    for k, i in enumerate(held):
        # the two sizes around i, or the two nearest on one side at an end of the sweep
        a, b = (i - 1, i + 1) if 0 < i < distinct.size - 1 else ((1, 2) if i == 0 else (i - 2, i - 1))
        slope = (log_t[b] - log_t[a]) / (log_s[b] - log_s[a])
        predicted[k] = math.exp(log_t[a] + slope * (log_s[i] - log_s[a]))
    measured = np.exp(log_t[held])
    return CrossValidation(
        method="neighbours", size_bytes=distinct[held].astype(np.int64), time_s=measured,
        predicted_s=predicted, ape_percent=_ape(predicted, measured), n_segments=np.ones(held.size, dtype=int),
        anomalies=tuple(a.size_bytes for a in named))


def replicate_spread(measurements, min_size: int = 64 * 1024) -> float:
    """Median, over sizes from ``min_size`` with several measurements, of (max - min) / median in %.

    How far a log's own repeats of one size (nccl-tests' out-of-place and in-place columns,
    pybench's repeats) disagree: held-out errors below about half of it are luck. nan when no
    size is measured twice.
    """
    size, time = _points(measurements)
    spreads = [np.ptp(time[size == u]) / np.median(time[size == u]) for u in np.unique(size[size >= min_size])
               if np.count_nonzero(size == u) > 1]
    return 100.0 * float(np.median(spreads)) if spreads else math.nan


def power_of_two_check(measurements, **fit_kwargs) -> CrossValidation:
    """Fit the power-of-two sizes of a dense sweep only and predict every size it measured.

    Issue 13's interpolation check on the vTrain tables (1 MiB steps): the sizes
    :func:`~pybench.model.anomalies.find_anomalies` names among the powers of two are left out
    of the fit, as ``fit`` does, and out of the errors.

    Parameters
    ----------
    measurements : MeasurementSet or (size_bytes, time_s) pair
    **fit_kwargs
        Passed to :func:`fit_alpha_beta`.

    Returns
    -------
    CrossValidation
        ``method="power-of-two"``: one row per distinct measured size outside the anomalies,
        predicted by the fit to the powers of two (which are predicted in-sample).
    """
    size, time = _points(measurements)
    _check_xy(size, time)
    as_int = size.astype(np.int64)
    pow2 = (as_int & (as_int - 1)) == 0
    if np.unique(size[pow2]).size < 3:
        raise UsageError(f"the power-of-two check needs at least 3 power-of-two sizes, got "
                         f"{np.unique(size[pow2]).size}")
    named = find_anomalies(size[pow2], time[pow2])
    fit = fit_alpha_beta(*without(size[pow2], time[pow2], named), **fit_kwargs)
    held = np.unique(size)
    held = held[~np.isin(held, [a.size_bytes for a in named])]
    measured = np.array([np.median(time[size == u]) for u in held])
    predicted, _ = fit.predict(held)
    _, half = fit.predict(held, band="prediction")
    return CrossValidation(
        method="power-of-two", size_bytes=held.astype(np.int64), time_s=measured,
        predicted_s=predicted, ape_percent=_ape(predicted, measured),
        n_segments=np.full(held.size, len(fit.segments)),
        covered=np.abs(predicted - measured) <= half, half_width_percent=100.0 * half / predicted,
        anomalies=tuple(a.size_bytes for a in named))


def _held_out_points(measurements, exclude_anomalies: bool) -> tuple[np.ndarray, np.ndarray, tuple]:
    """(size, time, named anomalies) for leave-one-size-out, checked: at least 3 distinct sizes left."""
    size, time = _points(measurements)
    named: tuple = ()
    if exclude_anomalies and size.shape == time.shape and np.all(time > 0) and np.all(size > 0):
        named = find_anomalies(size, time)
        size, time = without(size, time, named)
    distinct = np.unique(size)
    if distinct.size < 3:
        raise UsageError(f"cross-validation needs at least 3 distinct sizes, got {distinct.size}")
    _check_xy(size, time)
    return size, time, named


def _points(measurements) -> tuple[np.ndarray, np.ndarray]:
    if hasattr(measurements, "fit_points"):
        size, time = measurements.fit_points()
    elif hasattr(measurements, "size_bytes"):
        size, time = measurements.size_bytes, measurements.time_s
    else:
        size, time = measurements
    return np.asarray(size, dtype=float).reshape(-1), np.asarray(time, dtype=float).reshape(-1)
