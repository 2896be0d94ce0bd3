"""When to stop measuring one size: the adaptive rule and fixed counts.

An *iteration* is one timed operation. Samples come in batches of
``ops_per_sample`` operations (1 in per-op mode). The rule only looks at the
samples and at the wall time the native code reported, both of which every rank
receives identically (max-reduced in C++), so every rank makes the same decision
without exchanging a message.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from pybench.errors import UsageError
from pybench.measure.stats import median_ci_rel_halfwidth

# Fewest samples for which the order-statistic CI of the median is narrower than [min, max].
MIN_SAMPLES_FOR_CI = 6
# Most timed iterations per size any setting may ask for (the fastest operation, ~0.3 us,
# takes half a minute for this many): a larger count is a typo, not a measurement.
MAX_ITERATIONS = 100_000_000


@dataclass(frozen=True)
class Decision:
    done: bool
    reason: str  # "precision", "max-iters", "budget", "fixed" or "" while running
    precision_met: bool


@dataclass(frozen=True)
class StopRule:
    """Adaptive stop rule (``precision`` set) or fixed iteration count (``fixed_iters`` set).

    Adaptive: stop once the 95% CI of the median is within ``precision`` of it
    (and at least ``min_iters`` iterations and ``MIN_SAMPLES_FOR_CI`` samples
    were taken), or when ``max_iters`` iterations or ``budget_s`` seconds of
    measuring are spent.
    """

    precision: float | None = 0.02
    fixed_iters: int | None = None
    min_iters: int = 5
    max_iters: int = 20_000
    budget_s: float = 1.0

    def __post_init__(self) -> None:
        if self.fixed_iters is not None and not 1 <= self.fixed_iters <= MAX_ITERATIONS:
            raise UsageError(f"--iters must be 1 to {MAX_ITERATIONS:,}, got {self.fixed_iters}")
        if self.max_iters > MAX_ITERATIONS:
            raise UsageError(f"--max-iters must be at most {MAX_ITERATIONS:,}, got {self.max_iters}")
        if self.fixed_iters is None and (self.precision is None or not 0 < self.precision < 1):
            raise UsageError(f"--precision must be between 0 and 1 (e.g. 0.02 or 2%), got {self.precision}")
        if self.min_iters < 1 or self.max_iters < self.min_iters:
            raise UsageError(f"need 1 <= --min-iters <= --max-iters, got {self.min_iters} and {self.max_iters}")
        if not self.budget_s > 0:
            raise UsageError(f"--time-budget must be positive seconds, got {self.budget_s}")

    @property
    def adaptive(self) -> bool:
        return self.fixed_iters is None

    def ops_per_sample(self, wanted: int) -> int:
        """Batch size actually used. A fixed count is still split into enough samples
        to show a spread and a CI, rather than one batch of all iterations."""
        if self.fixed_iters is not None:
            # The largest batch that divides the count exactly and leaves enough samples.
            k = max(1, min(wanted, self.fixed_iters // MIN_SAMPLES_FOR_CI))
            while self.fixed_iters % k:
                k -= 1
            return k
        # Small enough that the first samples fit in max_iters: never more operations than that.
        return max(1, min(wanted, self.max_iters // MIN_SAMPLES_FOR_CI))

    def first_chunk(self, ops_per_sample: int) -> int:
        """Samples to take in the first native call."""
        if self.fixed_iters is not None:
            return math.ceil(self.fixed_iters / ops_per_sample)
        wanted = max(MIN_SAMPLES_FOR_CI, math.ceil(self.min_iters / ops_per_sample))
        return max(1, min(wanted, self.max_iters // ops_per_sample))

    def next_chunk(self, n_samples: int, ops_per_sample: int, elapsed_s: float) -> int:
        """Samples to take next: grow by half of what we have, within the iteration and time budgets."""
        left_iters = self.max_iters - n_samples * ops_per_sample
        by_iters = max(1, left_iters // ops_per_sample)  # decide() stops before this could overshoot
        per_sample_s = elapsed_s / n_samples if n_samples else 0.0
        by_time = max(1, int((self.budget_s - elapsed_s) / per_sample_s)) if per_sample_s > 0 else by_iters
        return max(1, min(max(MIN_SAMPLES_FOR_CI, n_samples // 2), by_iters, by_time))

    def decide(self, samples: list[float], ops_per_sample: int, elapsed_s: float) -> Decision:
        """Whether to stop after these samples and ``elapsed_s`` seconds of measuring."""
        n_iters = len(samples) * ops_per_sample
        if self.fixed_iters is not None:
            done = n_iters >= self.fixed_iters
            return Decision(done, "fixed" if done else "", False)
        precision = self.precision or 0.0  # set whenever fixed_iters is not (see __post_init__)
        met = len(samples) >= MIN_SAMPLES_FOR_CI and median_ci_rel_halfwidth(samples) <= precision
        if n_iters >= self.min_iters and met:
            return Decision(True, "precision", True)
        if n_iters + ops_per_sample > self.max_iters:  # another sample would time more than max_iters
            return Decision(True, "max-iters", met)
        if elapsed_s >= self.budget_s and n_iters >= self.min_iters:
            return Decision(True, "budget", met)
        return Decision(False, "", met)
