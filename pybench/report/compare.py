"""Comparing two result files size by size, with significance from the raw samples.

``python -m pybench compare A.json B.json`` answers "is B slower than A, where,
and is it more than noise?". A is the reference (baseline), B the candidate;
ratios are B / A, so a time ratio above 1 is a slowdown.

For every size present in both files:

* time ratio = median(B) / median(A) and busbw change = busbw(B) / busbw(A) - 1
  (busbw comes from the median, so the two say the same thing in two units);
* a 95% bootstrap confidence interval of that median ratio (resampling each
  run's samples, seeded, so the same files always give the same answer);
* a two-sided Mann-Whitney U test on the raw samples (normal approximation with
  tie and continuity corrections), Holm-corrected over the compared sizes.

A change is *significant* when the rank test rejects "same distribution" (Holm
p < alpha) **and** the whole confidence interval of the ratio lies outside the
noise band 1 +- ``noise``. The band is needed because the samples of one run are
not independent of the machine's state during that run (core placement, page
layout, other jobs): with hundreds of samples the rank test alone flags the
run-to-run drift that two runs of the same build show. The within-run interval
cannot see that drift; the band is its allowance. How ``DEFAULT_NOISE`` was chosen
(repeated runs of one build) is in docs/tracking.md. Raise it on noisier machines;
lower it where runs repeat better.

Only ``size_bytes`` must match: runs of different backends, dtypes, world sizes
or pybench versions can be compared (a note says what differs), and sizes found
in only one file are listed, not treated as an error.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from statistics import NormalDist

import numpy as np

from pybench.io.formats import COMPARISON, stamp
from pybench.measure.results import RunResult, SizeRecord
from pybench.sizes import format_size

DEFAULT_ALPHA = 0.05
DEFAULT_NOISE = 0.10
DEFAULT_BOOTSTRAP = 2000
_SEED = 20261130
_STANDARD_NORMAL = NormalDist()


# ---------------------------------------------------------------------------
# statistics

def average_ranks(values: np.ndarray) -> np.ndarray:
    """1-based ranks of ``values`` with ties given their average rank."""
    a = np.asarray(values, dtype=float)
    _, inverse, counts = np.unique(a, return_inverse=True, return_counts=True)
    ends = np.cumsum(counts).astype(float)
    return (ends - (counts - 1) / 2.0)[inverse]


def mann_whitney_u(x: Sequence[float], y: Sequence[float]) -> tuple[float, float]:
    """Two-sided Mann-Whitney U test by the normal approximation.

    Parameters
    ----------
    x, y : sequences of float
        The two samples (at least one value each).

    Returns
    -------
    (u_x, p_value)
        ``u_x`` counts the pairs (x_i, y_j) with x_i > y_j, ties counting one half;
        ``p_value`` uses the tie-corrected variance and a continuity correction.
        When every value is tied the samples are indistinguishable and p is 1.
    """
    xa, ya = np.asarray(x, dtype=float), np.asarray(y, dtype=float)
    n1, n2 = xa.size, ya.size
    if n1 == 0 or n2 == 0:
        raise ValueError("Mann-Whitney U needs at least one value in each sample")
    ranks = average_ranks(np.concatenate([xa, ya]))
    u_x = float(ranks[:n1].sum() - n1 * (n1 + 1) / 2.0)
    n = n1 + n2
    _, counts = np.unique(np.concatenate([xa, ya]), return_counts=True)
    tie_term = float(np.sum(counts.astype(float) ** 3 - counts)) / (n * (n - 1)) if n > 1 else 0.0
    var = n1 * n2 / 12.0 * ((n + 1) - tie_term)
    if var <= 0:
        return u_x, 1.0
    diff = u_x - n1 * n2 / 2.0
    z = max(abs(diff) - 0.5, 0.0) / math.sqrt(var)
    return u_x, 2.0 * _STANDARD_NORMAL.cdf(-z)  # exact in the far tail (NormalDist uses erfc)


def holm(p_values: Sequence[float]) -> list[float]:
    """Holm-Bonferroni adjusted p-values (same order as given)."""
    p = np.asarray(p_values, dtype=float)
    m = p.size
    if m == 0:
        return []
    order = np.argsort(p, kind="mergesort")
    adjusted = np.empty(m)
    running = 0.0
    for k, idx in enumerate(order):
        running = max(running, min(1.0, (m - k) * p[idx]))
        adjusted[idx] = running
    return adjusted.tolist()


# Above this many samples the resampled median is drawn from its known large-sample law (below).
_EXACT_BOOTSTRAP_MAX_N = 1000


def bootstrap_median_ratio_ci(a: Sequence[float], b: Sequence[float], n_boot: int = DEFAULT_BOOTSTRAP,
                              confidence: float = 0.95, seed: int = _SEED) -> tuple[float, float]:
    """Percentile bootstrap CI of median(b) / median(a), each sample resampled independently.

    Up to ``_EXACT_BOOTSTRAP_MAX_N`` samples the resamples are drawn as usual. Beyond, the
    cost (n_boot x n draws and medians; seconds for 20,000 per-op samples) is avoided by
    drawing the resample's median directly: the number of resampled values at or below the
    j-th smallest value is Binomial(n, j/n), so the median of a resample is the order
    statistic x_(J) with J ~ n/2 + (sqrt(n)/2) Z, Z standard normal (the same law that gives
    the order-statistic confidence interval of the median in pybench.measure.stats).
    """
    xa, xb = np.sort(np.asarray(a, dtype=float)), np.sort(np.asarray(b, dtype=float))
    rng = np.random.default_rng(seed)
    if max(xa.size, xb.size) > _EXACT_BOOTSTRAP_MAX_N:
        def medians(x: np.ndarray) -> np.ndarray:
            j = np.rint((x.size - 1) / 2.0 + math.sqrt(x.size) / 2.0 * rng.standard_normal(n_boot))
            return x[np.clip(j, 0, x.size - 1).astype(int)]
        ratios = medians(xb) / medians(xa)
    else:
        ratios = (np.median(xb[rng.integers(0, xb.size, size=(n_boot, xb.size))], axis=1)
                  / np.median(xa[rng.integers(0, xa.size, size=(n_boot, xa.size))], axis=1))
    tail = (1.0 - confidence) / 2.0
    lo, hi = np.quantile(ratios, [tail, 1.0 - tail])
    return float(lo), float(hi)


# ---------------------------------------------------------------------------
# results

@dataclass(frozen=True)
class SizeComparison:
    """One size measured in both runs. Ratios are B / A (B the candidate)."""

    size_bytes: int
    time_a_s: float
    time_b_s: float
    time_ratio: float
    ratio_ci_low: float
    ratio_ci_high: float
    busbw_a_gbps: float
    busbw_b_gbps: float
    p_value: float  # Mann-Whitney U, two-sided
    p_holm: float  # Holm-adjusted over the compared sizes
    n_a: int
    n_b: int
    verdict: str  # "slower", "faster" or "not significant"

    @property
    def busbw_change(self) -> float:
        """busbw(B) / busbw(A) - 1 (negative: less bandwidth)."""
        if not (self.busbw_a_gbps > 0):
            return math.nan
        return self.busbw_b_gbps / self.busbw_a_gbps - 1.0

    @property
    def significant(self) -> bool:
        return self.verdict != "not significant"

    def to_dict(self) -> dict:
        return {"size_bytes": self.size_bytes, "time_a_s": self.time_a_s, "time_b_s": self.time_b_s,
                "time_ratio": self.time_ratio,
                "ratio_ci": [x if math.isfinite(x) else None for x in (self.ratio_ci_low, self.ratio_ci_high)],
                "busbw_a_gbps": self.busbw_a_gbps, "busbw_b_gbps": self.busbw_b_gbps,
                "busbw_change": self.busbw_change, "p_value": self.p_value, "p_holm": self.p_holm,
                "n_a": self.n_a, "n_b": self.n_b, "verdict": self.verdict}


@dataclass(frozen=True)
class Comparison:
    """Size-by-size comparison of run B against reference run A."""

    label_a: str
    label_b: str
    sizes: tuple[SizeComparison, ...]
    only_in_a: tuple[int, ...] = ()
    only_in_b: tuple[int, ...] = ()
    notes: tuple[str, ...] = ()
    alpha: float = DEFAULT_ALPHA
    noise: float = DEFAULT_NOISE

    @property
    def slower(self) -> tuple[SizeComparison, ...]:
        return tuple(s for s in self.sizes if s.verdict == "slower")

    @property
    def faster(self) -> tuple[SizeComparison, ...]:
        return tuple(s for s in self.sizes if s.verdict == "faster")

    @property
    def geomean_time_ratio(self) -> float:
        r = [s.time_ratio for s in self.sizes if s.time_ratio > 0 and math.isfinite(s.time_ratio)]
        return float(math.exp(np.mean(np.log(r)))) if r else math.nan

    def worst_slowdown(self) -> SizeComparison | None:
        """The significant slowdown with the largest time ratio, if any."""
        return max(self.slower, key=lambda s: s.time_ratio, default=None)

    def regressions_over(self, fraction: float) -> tuple[SizeComparison, ...]:
        """Significant slowdowns whose time grew by more than ``fraction`` (0.10 = 10%)."""
        return tuple(s for s in self.slower if s.time_ratio > 1.0 + fraction)

    @property
    def sweep_test(self) -> tuple[int, int, float]:
        """(sizes slower beyond the noise band, sizes faster beyond it, the two-sided sign test's p over them): the
        sweep's verdict as a whole, which holds where each size has too few samples to be tested alone (a log's
        two halves: no Mann-Whitney p of 2 against 2 samples is below 0.05)."""
        from scipy.stats import binomtest  # here: planning imports this module and never needs scipy

        up = sum(1 for s in self.sizes if s.time_ratio > 1.0 + self.noise)
        down = sum(1 for s in self.sizes if 0 < s.time_ratio < 1.0 / (1.0 + self.noise))
        return up, down, float(binomtest(up, up + down).pvalue) if up + down else 1.0

    def sweep_slower_over(self, fraction: float) -> bool:
        """Whether the sweep as a whole is significantly slower (:attr:`sweep_test`) with its geometric-mean time
        more than ``fraction`` above A's."""
        up, down, p = self.sweep_test
        return p < self.alpha and up > down and self.geomean_time_ratio > 1.0 + fraction

    def summary(self) -> str:
        n = len(self.sizes)
        parts = [f"{len(self.slower)} of {n} size(s) slower (significant)", f"{len(self.faster)} faster",
                 f"{n - len(self.slower) - len(self.faster)} not significant"]
        up, down, p = self.sweep_test
        line = ", ".join(parts) + f"; geometric-mean time ratio B/A {self.geomean_time_ratio:.3f}"
        line += f"; across sizes {up} slower and {down} faster beyond {100 * self.noise:g}% (sign test p {p:.1e})"
        worst = self.worst_slowdown()
        if worst is not None:
            line += (f"; worst {format_size(worst.size_bytes)} x{worst.time_ratio:.2f} "
                     f"(busbw {100 * worst.busbw_change:+.1f}%)")
        return line

    def table(self) -> str:
        lines = [f"# A (reference): {self.label_a}", f"# B (candidate): {self.label_b}",
                 f"# ratios are B/A; significant = Mann-Whitney U p < {self.alpha:g} (Holm over sizes) and the "
                 f"95% bootstrap CI of the median ratio outside 1 +- {100 * self.noise:g}%"]
        lines += [f"# note: {n}" for n in self.notes]
        lines.append(f"#{'size':>11} {'time A':>10} {'time B':>10} {'ratio':>7} {'95% CI':>15} "
                     f"{'busbw A':>8} {'busbw B':>8} {'busbw':>7} {'p(Holm)':>8}  verdict")
        lines.append(f"#{'(B)':>11} {'(us)':>10} {'(us)':>10} {'B/A':>7} {'':>15} "
                     f"{'(GB/s)':>8} {'(GB/s)':>8} {'change':>7} {'':>8}")
        for s in self.sizes:
            ci = f"[{s.ratio_ci_low:.3f},{s.ratio_ci_high:.3f}]" if math.isfinite(s.ratio_ci_low) else "n/a"
            lines.append(f"{s.size_bytes:>12} {s.time_a_s * 1e6:>10.2f} {s.time_b_s * 1e6:>10.2f} "
                         f"{s.time_ratio:>7.3f} {ci:>15} {s.busbw_a_gbps:>8.2f} {s.busbw_b_gbps:>8.2f} "
                         f"{100 * s.busbw_change:>+6.1f}% {s.p_holm:>8.1e}  {s.verdict}")
        if self.only_in_a:
            lines.append("# sizes only in A (not compared): " + ", ".join(format_size(x) for x in self.only_in_a))
        if self.only_in_b:
            lines.append("# sizes only in B (not compared): " + ", ".join(format_size(x) for x in self.only_in_b))
        lines.append("# " + self.summary())
        return "\n".join(lines)

    def to_dict(self) -> dict:
        return stamp(COMPARISON, {"a": self.label_a, "b": self.label_b,
                "alpha": self.alpha, "noise": self.noise, "sizes": [s.to_dict() for s in self.sizes],
                "only_in_a": list(self.only_in_a), "only_in_b": list(self.only_in_b), "notes": list(self.notes),
                "slower": len(self.slower), "faster": len(self.faster),
                "geomean_time_ratio": self.geomean_time_ratio, "summary": self.summary()})

    def __repr__(self) -> str:
        return f"Comparison({self.summary()})"


def run_label(result: RunResult, source: str = "") -> str:
    """One line naming a run: what, where, when."""
    mpi = str(result.environment.get("mpi", {}).get("library", "")).split(",")[0] if isinstance(
        result.environment.get("mpi"), dict) else ""
    ranks = result.world_size or "?"  # a log that does not say its rank count
    foreign = result.environment.get("source") if "pybench_version" not in result.environment else None
    if foreign:  # another tool's file: what pybench records of its own runs is not known
        parts = [f"{result.benchmark} / {result.backend} / {result.dtype} {result.redop} / {ranks} ranks "
                 f"/ {result.link_class}", f"a {foreign} file"]
    else:
        parts = [f"{result.benchmark} / {result.backend} / {result.dtype} {result.redop} / {ranks} ranks "
                 f"/ {result.link_class} / {result.timing}",
                 f"pybench {result.environment.get('pybench_version', '?')}"]
        if mpi:
            parts.append(mpi)
        parts.append(f"huge pages {'on' if result.options.get('huge_pages', True) else 'off'}")
    parts.append(result.started_at)
    if source:
        parts.append(source)
    return ", ".join(str(p) for p in parts if p != "")


def _differences(a: RunResult, b: RunResult) -> list[str]:
    notes = []
    for what, va, vb in (("collective", a.benchmark, b.benchmark), ("backend", a.backend, b.backend),
                         ("dtype", a.dtype, b.dtype), ("redop", a.redop, b.redop), ("timing", a.timing, b.timing),
                         ("world size", a.world_size, b.world_size), ("link class", a.link_class, b.link_class),
                         ("huge pages", a.options.get("huge_pages"), b.options.get("huge_pages")),
                         ("pybench version", a.environment.get("pybench_version"),
                          b.environment.get("pybench_version"))):
        if va != vb:
            notes.append(f"{what} differs: A {va}, B {vb}")
    return notes


def _by_size(run: RunResult) -> tuple[dict[int, SizeRecord], dict[int, list[float]]]:
    """Each size's first record, and the finite samples of every record of that size (its time where none)."""
    first: dict[int, SizeRecord] = {}
    samples: dict[int, list[float]] = {}
    for r in run.records:
        first.setdefault(r.size_bytes, r)
        samples.setdefault(r.size_bytes, []).extend(
            [s for s in r.samples_s if s is not None and math.isfinite(s)] or [r.time_s])
    return first, samples


def compare_results(a: RunResult, b: RunResult, *, alpha: float = DEFAULT_ALPHA, noise: float = DEFAULT_NOISE,
                    n_boot: int = DEFAULT_BOOTSTRAP, label_a: str | None = None,
                    label_b: str | None = None) -> Comparison:
    """Compare run ``b`` (candidate) against run ``a`` (reference), size by size.

    Parameters
    ----------
    a, b : RunResult
        Results with raw ``samples_s`` per size; only ``size_bytes`` must match.
    alpha : float
        Family-wise significance level over the compared sizes (Holm).
    noise : float
        Half-width of the noise band around a ratio of 1 (0.05 = 5%); a change whose
        confidence interval reaches into the band is not significant.
    n_boot : int
        Bootstrap resamples for the median-ratio interval.

    Returns
    -------
    Comparison
    """
    if not 0 < alpha < 1:
        raise ValueError(f"alpha must be in (0, 1), got {alpha}")
    if not 0 <= noise < 1:
        raise ValueError(f"noise must be in [0, 1), got {noise}")
    # a size measured more than once in a run (nccl-tests -N cycles, -r all roots, two processes each printing a
    # table): every measurement of it is a sample; the first record speaks for its other fields
    rec_a, samples_a = _by_size(a)
    rec_b, samples_b = _by_size(b)
    common = sorted(set(rec_a) & set(rec_b))
    raw = []
    for size in common:
        ra, rb = rec_a[size], rec_b[size]
        sa, sb = samples_a[size], samples_b[size]
        med_a, med_b = float(np.median(sa)), float(np.median(sb))
        ratio = med_b / med_a if med_a > 0 else math.nan
        # one time on a side has no spread to resample: its "interval" would be the ratio itself
        lo, hi = bootstrap_median_ratio_ci(sa, sb, n_boot=n_boot) if min(len(sa), len(sb)) > 1 else (math.nan,
                                                                                                    math.nan)
        _, p = mann_whitney_u(sa, sb)
        raw.append((size, ra, rb, med_a, med_b, ratio, lo, hi, p, len(sa), len(sb)))
    p_adj = holm([r[8] for r in raw])
    out = []
    for (size, ra, rb, med_a, med_b, ratio, lo, hi, p, n_a, n_b), ph in zip(raw, p_adj):
        if ph < alpha and lo > 1.0 + noise:
            verdict = "slower"
        elif ph < alpha and hi < 1.0 / (1.0 + noise):
            verdict = "faster"
        else:
            verdict = "not significant"
        out.append(SizeComparison(size_bytes=size, time_a_s=med_a, time_b_s=med_b, time_ratio=ratio,
                                  ratio_ci_low=lo, ratio_ci_high=hi, busbw_a_gbps=ra.busbw_gbps * ra.time_s / med_a
                                  if med_a > 0 else math.nan,
                                  busbw_b_gbps=rb.busbw_gbps * rb.time_s / med_b if med_b > 0 else math.nan,
                                  p_value=p, p_holm=ph, n_a=n_a, n_b=n_b, verdict=verdict))
    notes = _differences(a, b)
    for label, run, recs in (("A", a, rec_a), ("B", b, rec_b)):
        repeated = len(run.records) - len(recs)
        if repeated:
            notes.append(f"{label} measured {repeated} size(s) more than once (nccl-tests -N run cycles, -r all "
                         f"roots, or several processes printing a table each): each size's measurements are pooled")
    single = [label for label, samples in (("A", samples_a), ("B", samples_b))
              if any(len(samples[size]) < 2 for size in common)]
    if single:
        verb = "hold" if len(single) > 1 else "holds"
        notes.append(f"{' and '.join(single)} {verb} one time at some sizes (a log's row, not its samples): those "
                     f"sizes have no interval (n/a) and cannot be significant alone; the sign test across sizes "
                     f"(last line) judges the sweep")
    if not common:
        notes.append("no size is in both runs; nothing to compare")
    return Comparison(label_a=label_a or run_label(a), label_b=label_b or run_label(b), sizes=tuple(out),
                      only_in_a=tuple(sorted(set(rec_a) - set(rec_b))),
                      only_in_b=tuple(sorted(set(rec_b) - set(rec_a))), notes=tuple(notes), alpha=alpha,
                      noise=noise)


__all__ = ["Comparison", "SizeComparison", "compare_results", "mann_whitney_u", "holm",
           "bootstrap_median_ratio_ci", "average_ranks", "run_label", "DEFAULT_ALPHA", "DEFAULT_NOISE"]
