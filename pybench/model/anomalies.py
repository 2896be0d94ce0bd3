"""Sizes that sit far off their neighbours' trend: named, left out of the fit, never absorbed.

nccl-tests sweeps show single sizes that are much slower (or faster) than the sizes around
them: NCCL switching protocol (LL, LL128, Simple) or algorithm (ring, tree) at that size only,
MPI's eager/rendezvous switch, or a disturbed run. A piecewise fit that takes such a point in
bends a whole piece towards it (or spends a piece on it); people read these sweeps to find
exactly these points. So they are found first, reported in one line each, and fitted around.

The trend at a size is drawn through its two neighbours (the two nearest on one side at either
end) twice: as a straight line in log(size)-log(time), which follows convex stretches, and as
the alpha-beta line T = a + size / B, exact at the latency-bandwidth knee however sparse the
sweep; the one nearer the measured time counts. A size whose time is :data:`ANOMALY_RATIO`
times off it is an anomaly; the worst is taken out and the others are measured again without it (a spike
also distorts its neighbours' trends), at most ``1 + sizes // 10`` times: a sweep that is rough
everywhere has no anomalies, it has noise. The largest size is named only where its replicates
disagree: nothing measured after it tells a spike from the start of a regime. Where it is slower
than its trend, the size before it is judged by its smaller neighbours too, and the trend nearer its time counts.
Of two sizes off their trends, the one whose removal leaves the rest nearer theirs is taken out first (a spike makes
its neighbour look off too), and a size whose replicates disagree stands in its neighbours' trends by its fastest.

On the real logs in shared/data the smooth sweeps' largest deviations and the named steps (the B200
all-gather's 2 MiB, OSU's 8 KiB eager/rendezvous switch) lie on either side of 1.4 (tests/model/test_fit.py
checks which sizes each log names).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np

from pybench.sizes import format_size

ANOMALY_RATIO = 1.4
# Replicates of one size (nccl-tests' out-of-place and in-place, repeated sweeps) this far apart were not
# measuring one thing: a disturbed run. Twice the ratio that names a size off its neighbours' trend.
REPLICATE_RATIO = 2 * ANOMALY_RATIO
_CAUSE_SLOWER = ("likely a protocol or algorithm switch at this size only (NCCL LL/LL128/Simple, "
                 "ring/tree; MPI eager/rendezvous) or a disturbed run; rerun to check")
_CAUSE_FASTER = "likely a different algorithm or protocol chosen at this size only; rerun to check"


@dataclass(frozen=True)
class Anomaly:
    """One size off its neighbours' trend.

    Attributes
    ----------
    size_bytes : int
    time_s : float
        Measured (median of the measurements at this size).
    expected_s : float
        The neighbours' trend at this size.
    neighbours : tuple of int
        The two sizes the trend was drawn through.
    faster_larger_bytes : int
        The nearest larger size measured faster (time fell with size, the mark of a switch);
        0 when there is none.
    """

    size_bytes: int
    time_s: float
    expected_s: float
    neighbours: tuple[int, int]
    faster_larger_bytes: int = 0

    @property
    def ratio(self) -> float:
        """Measured / expected: above 1 slower than the trend, below 1 faster."""
        return self.time_s / self.expected_s

    @property
    def cause(self) -> str:
        """The likely cause, in words."""
        return _CAUSE_SLOWER if self.ratio > 1 else _CAUSE_FASTER

    @property
    def how_far(self) -> str:
        """How far off its trend, in words: ``1.73x slower``, ``2.98x faster``."""
        return f"{self.ratio:.2f}x slower" if self.ratio > 1 else f"{1 / self.ratio:.2f}x faster"

    def describe(self) -> str:
        """One line: size, ratio, the figures behind it, likely cause."""
        how = self.how_far
        mono = (f", slower than the larger {format_size(self.faster_larger_bytes)}"
                if self.faster_larger_bytes else "")
        return (f"size {format_size(self.size_bytes)} is {how} than its neighbours' trend "
                f"({self.time_s * 1e6:.1f} us measured, {self.expected_s * 1e6:.1f} us from "
                f"{format_size(self.neighbours[0])} and {format_size(self.neighbours[1])}{mono}): {self.cause}")

    def to_dict(self) -> dict[str, Any]:
        """Plain dict for a model file."""
        return {"size_bytes": int(self.size_bytes), "time_s": float(self.time_s),
                "expected_s": float(self.expected_s), "ratio": float(self.ratio),
                "neighbours": [int(n) for n in self.neighbours], "faster_larger_bytes": int(self.faster_larger_bytes),
                "cause": self.cause}

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> Anomaly:
        """Inverse of :meth:`to_dict` (raises KeyError/TypeError/ValueError on bad input)."""
        lo, hi = (int(x) for x in d["neighbours"])
        anomaly = cls(int(d["size_bytes"]), float(d["time_s"]), float(d["expected_s"]), (lo, hi),
                      int(d.get("faster_larger_bytes", 0)))
        if not (anomaly.time_s > 0 and anomaly.expected_s > 0 and math.isfinite(anomaly.ratio)):
            raise ValueError("anomaly times must be positive")
        return anomaly


def _trend_ratios(size: np.ndarray, time: np.ndarray,
                  anchor: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Ratio of each time to its neighbours' trend (drawn through their ``anchor`` times, default their own), and
    the indices of those neighbours.

    Two trends through the same two neighbours: the straight line in log-log (follows convex
    stretches, e.g. CPU sweeps leaving the caches) and the alpha-beta line T = a + s / B (exact
    at the latency-bandwidth knee however far apart the sizes are). The ratio kept is the one
    nearer 1: a size is an anomaly only when neither trend explains it.
    """
    n = size.size
    k = np.arange(n)
    a = np.where(k == 0, 1, np.where(k == n - 1, n - 3, k - 1))
    b = np.where(k == 0, 2, np.where(k == n - 1, n - 2, k + 1))
    at = time if anchor is None else anchor
    ls, lt = np.log(size), np.log(at)
    w_log = (ls - ls[a]) / (ls[b] - ls[a])
    loglog = time / np.exp(lt[a] + w_log * (lt[b] - lt[a]))
    line = at[a] + (size - size[a]) / (size[b] - size[a]) * (at[b] - at[a])
    with np.errstate(divide="ignore", invalid="ignore"):
        linear = np.where(line > 0, time / line, loglog)
    ratio = np.where(np.abs(np.log(linear)) < np.abs(np.log(loglog)), linear, loglog)
    return ratio, a, b


def find_anomalies(size_bytes, time_s, threshold: float = ANOMALY_RATIO,
                   max_count: int | None = None) -> tuple[Anomaly, ...]:
    """Sizes whose time is ``threshold`` times off their neighbours' trend (see the module doc).

    Parameters
    ----------
    size_bytes, time_s : array_like
        Measurements, repeated sizes allowed (their median is used).
    threshold : float
        Ratio (either way) that makes a size an anomaly.
    max_count : int, optional
        Most anomalies named (default ``1 + distinct sizes // 10``).

    Returns
    -------
    tuple of Anomaly
        By size; empty for fewer than 4 distinct sizes (3 must remain to draw trends).
    """
    size = np.asarray(size_bytes, dtype=float).reshape(-1)
    time = np.asarray(time_s, dtype=float).reshape(-1)
    sizes, med = _medians_by_size(size, time)
    limit = 1 + sizes.size // 10 if max_count is None else max_count
    disturbed = {u for u, _ in disturbed_sizes(size, time)}
    # a disturbance only slows a run: a size whose replicates disagree by as much as names a size off its trend
    # stands in its neighbours' trends by its fastest (its median, the mean of a pair 1.5x or 4x apart, had a clean
    # size beside it named as an anomaly)
    anchor = med.copy()
    for u, _ in disturbed_sizes(size, time, threshold):
        anchor[sizes == u] = time[size == u].min()
    keep = np.ones(sizes.size, dtype=bool)
    found: list[Anomaly] = []
    def judged(idx: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        ratio, a, b = _trend_ratios(sizes[idx], med[idx], anchor[idx])
        # The largest size has neighbours on one side only: off their trend, it may as well be where a regime
        # starts (a CPU sweep leaving its caches) as a spike, and nothing measured after it says which; left
        # out, every larger size would be priced at the regime before it. Named only where its replicates
        # disagree (a disturbed run). Where it is slower than its trend, the size before it is judged by its
        # smaller neighbours too, and the trend nearer its time counts (its own runs through what may be a new
        # regime, the other through what may be a spike).
        if int(sizes[idx[-1]]) not in disturbed:
            if ratio[-1] > 1.0 and idx.size >= 4:
                below = _trend_ratios(sizes[idx[-4:-1]], med[idx[-4:-1]], anchor[idx[-4:-1]])[0][-1]
                if abs(math.log(below)) < abs(math.log(ratio[-2])):
                    ratio[-2] = below
                    a[-2], b[-2] = idx.size - 4, idx.size - 3
            ratio[-1] = 1.0
        return ratio, a, b

    def left_off(idx: np.ndarray) -> float:
        """How far the sizes ``idx`` stray from their trends at most, in log."""
        return float(np.max(np.abs(np.log(judged(idx)[0])))) if idx.size >= 4 else 0.0

    while len(found) < limit and keep.sum() >= 4:
        idx = np.flatnonzero(keep)
        ratio, a, b = judged(idx)
        first, second = np.argsort(-np.abs(np.log(ratio)))[:2]
        k = int(first)
        if abs(math.log(ratio[k])) < math.log(threshold):
            break
        # Two sizes off their trends, side by side: a spike makes its neighbour look off too. The one whose removal
        # leaves the rest nearer their trends is the anomaly (the explanation needing fewer of them).
        if abs(math.log(ratio[second])) >= math.log(threshold) and \
                left_off(np.delete(idx, second)) < left_off(np.delete(idx, k)):
            k = int(second)
        i, lo, hi = idx[k], idx[a[k]], idx[b[k]]
        faster = [j for j in idx[k + 1:] if med[j] < med[i]]
        found.append(Anomaly(int(sizes[i]), float(med[i]), float(med[i] / ratio[k]),
                             (int(sizes[lo]), int(sizes[hi])), int(sizes[faster[0]]) if faster else 0))
        keep[i] = False
    return tuple(sorted(found, key=lambda x: x.size_bytes))


def _medians_by_size(size: np.ndarray, time: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(distinct sizes, median time at each) in one sort: a mask per size would be n x sizes."""
    order = np.lexsort((time, size))
    size, time = size[order], time[order]
    sizes, start, count = np.unique(size, return_index=True, return_counts=True)
    return sizes, (time[start + (count - 1) // 2] + time[start + count // 2]) / 2


def disturbed_sizes(size_bytes, time_s, ratio: float = REPLICATE_RATIO) -> list[tuple[int, float]]:
    """(size, slowest / fastest) of each size whose replicates differ by more than ``ratio``."""
    size = np.asarray(size_bytes, dtype=float).reshape(-1)
    time = np.asarray(time_s, dtype=float).reshape(-1)
    out = []
    for u in np.unique(size):
        at = time[size == u]
        if at.max() > ratio * at.min():
            out.append((int(u), float(at.max() / at.min())))
    return out


def without(size_bytes, time_s, anomalies: tuple[Anomaly, ...]) -> tuple[np.ndarray, np.ndarray]:
    """The measurements at every size that is not an anomaly."""
    size = np.asarray(size_bytes, dtype=float).reshape(-1)
    time = np.asarray(time_s, dtype=float).reshape(-1)
    drop = np.isin(size, [x.size_bytes for x in anomalies])
    return size[~drop], time[~drop]
