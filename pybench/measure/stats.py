"""Statistics of raw timing samples: derived lazily from the samples, never stored instead of them."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from statistics import NormalDist

import numpy as np

Z_95 = NormalDist().inv_cdf(0.975)  # two-sided 95% normal quantile, 1.95996...


def median_ci_indices(n: int, z: float = Z_95) -> tuple[int, int]:
    """0-based order-statistic indices bounding a distribution-free ~95% CI of the median.

    Uses the normal approximation to the binomial (Conover): the CI of the median
    is [x_(j), x_(k)] with j = floor((n - z sqrt(n)) / 2), k = ceil(1 + (n + z sqrt(n)) / 2)
    in 1-based ranks, clamped to the sample.
    """
    if n <= 0:
        raise ValueError("no samples")
    half = z * math.sqrt(n)
    j = max(1, math.floor((n - half) / 2))
    k = min(n, math.ceil(1 + (n + half) / 2))
    return j - 1, k - 1


def median_ci_rel_halfwidth(samples: Sequence[float]) -> float:
    """:attr:`SampleStats.ci_rel_halfwidth` of ``samples`` without the rest of the summary: the stop
    rule asks after every chunk, and numpy's percentiles cost more than the sort on a few samples."""
    a = sorted(samples)
    n = len(a)
    if n == 0:
        raise ValueError("no samples")
    median = a[n // 2] if n % 2 else (a[n // 2 - 1] + a[n // 2]) / 2
    lo, hi = median_ci_indices(n)
    return _rel_halfwidth(median, a[lo], a[hi])


def _rel_halfwidth(median: float, low: float, high: float) -> float:
    if median <= 0:
        return math.inf
    return max(median - low, high - median) / median


@dataclass(frozen=True)
class SampleStats:
    """Summary of per-operation times in seconds."""

    n: int
    median_s: float
    mean_s: float
    min_s: float
    max_s: float
    p5_s: float
    p95_s: float
    p99_s: float
    ci_low_s: float
    ci_high_s: float

    @classmethod
    def from_samples(cls, samples: Sequence[float]) -> SampleStats:
        """Compute the summary; ``samples`` must be non-empty and finite."""
        a = np.sort(np.asarray(samples, dtype=float))
        if a.size == 0:
            raise ValueError("no samples")
        lo, hi = median_ci_indices(a.size)
        p5, p95, p99 = np.percentile(a, [5, 95, 99])
        return cls(n=int(a.size), median_s=float(np.median(a)), mean_s=float(a.mean()), min_s=float(a[0]),
                   max_s=float(a[-1]), p5_s=float(p5), p95_s=float(p95), p99_s=float(p99), ci_low_s=float(a[lo]),
                   ci_high_s=float(a[hi]))

    @property
    def ci_rel_halfwidth(self) -> float:
        """Half-width of the median's 95% CI relative to the median (the precision reached)."""
        return _rel_halfwidth(self.median_s, self.ci_low_s, self.ci_high_s)

    @property
    def spread_rel(self) -> float:
        """(p95 - p5) / median: how noisy the samples were."""
        return (self.p95_s - self.p5_s) / self.median_s if self.median_s > 0 else math.inf

    def __repr__(self) -> str:
        wide = self.spread_rel > 0.5
        warn = "  WARNING: wide spread, rerun with more --warmup or on a quieter machine" if wide else ""
        return (f"SampleStats(n={self.n}, median={self.median_s * 1e6:.3f} us, "
                f"p5..p95={self.p5_s * 1e6:.3f}..{self.p95_s * 1e6:.3f} us, "
                f"ci=±{100 * self.ci_rel_halfwidth:.2f}%){warn}")
