"""Statistics and the adaptive stop rule, exactly, with seeded fake samples and a fake clock."""

import json
import math

import numpy as np
import pytest

from pybench.errors import UsageError
from pybench.measure.benchmark import BenchConfig, measure_size
from pybench.measure.stats import SampleStats, median_ci_indices
from pybench.measure.stopping import MIN_SAMPLES_FOR_CI, StopRule


def test_sample_stats_on_known_data():
    s = SampleStats.from_samples([5.0, 1.0, 3.0, 2.0, 4.0])
    assert (s.n, s.median_s, s.min_s, s.max_s, s.mean_s) == (5, 3.0, 1.0, 5.0, 3.0)
    assert s.p5_s == pytest.approx(1.2) and s.p95_s == pytest.approx(4.8)


def test_median_ci_indices_match_binomial_order_statistics():
    # Conover's normal approximation: n=100 -> ranks 40 and 61 (1-based)
    assert median_ci_indices(100) == (39, 60)
    lo, hi = median_ci_indices(1000)
    assert (lo + 1, hi + 1) == (469, 532)
    assert median_ci_indices(1) == (0, 0)


def test_ci_covers_true_median_about_95_percent():
    rng = np.random.default_rng(1)
    covered = 0
    for _ in range(2000):
        s = SampleStats.from_samples(rng.exponential(1.0, size=50))
        covered += s.ci_low_s <= math.log(2) <= s.ci_high_s
    assert 0.93 <= covered / 2000 <= 0.985


def test_stop_rule_rejects_bad_settings():
    with pytest.raises(UsageError):
        StopRule(precision=0)
    with pytest.raises(UsageError):
        StopRule(min_iters=10, max_iters=5)
    with pytest.raises(UsageError):
        StopRule(fixed_iters=0)
    with pytest.raises(UsageError):
        StopRule(budget_s=0)


class FakeBench:
    """Seeded samples and a fake clock in place of the native bench.

    Each operation takes ``base_s`` times lognormal noise; the wall time a call
    reports is the time its operations took plus a fixed overhead per sample, as
    the native loop's barrier would add.
    """

    def __init__(self, base_s=1e-3, sigma=0.01, seed=0, overhead_s=1e-5, wrong=0):
        self.rng = np.random.default_rng(seed)
        self.base_s, self.sigma, self.overhead_s, self.wrong = base_s, sigma, overhead_s, wrong
        self.calls = []
        self.warmed = 0

    def warmup(self, n):
        self.warmed += n

    def check(self, iters):
        return self.wrong * iters

    def measure(self, n_samples, ops_per_sample):
        self.calls.append((n_samples, ops_per_sample))
        per_op = self.base_s * self.rng.lognormal(0.0, self.sigma, size=n_samples)
        wall = float(np.sum(per_op) * ops_per_sample + self.overhead_s * n_samples)
        return per_op.tolist(), wall


def _cfg(**kw):
    defaults = dict(benchmark="allreduce", sizes=(4096,), timing="per-op", warmup=3, check_iters=2)
    defaults.update(kw)
    return BenchConfig(**defaults)


def test_quiet_samples_stop_on_precision_quickly():
    bench = FakeBench(sigma=0.005)
    rec = measure_size(_cfg(stop=StopRule(precision=0.02, min_iters=5)), bench, 4096, 2)
    assert rec.stop_reason == "precision" and rec.precision_met
    assert rec.iterations == MIN_SAMPLES_FOR_CI  # one first chunk was enough
    assert bench.warmed == 3 and rec.wrong == 0 and rec.check_iters == 2
    assert rec.time_s == pytest.approx(1e-3, rel=0.02)
    assert rec.algbw_gbps == pytest.approx(4096 / rec.time_s / 1e9)
    assert rec.busbw_gbps == pytest.approx(rec.algbw_gbps * 1.0)  # 2 ranks: 2(n-1)/n = 1


def test_noisier_samples_need_more_iterations_but_meet_precision():
    quiet = measure_size(_cfg(stop=StopRule(precision=0.02)), FakeBench(sigma=0.005, seed=3), 4096, 2)
    noisy = measure_size(_cfg(stop=StopRule(precision=0.02, budget_s=100)), FakeBench(sigma=0.2, seed=3), 4096, 2)
    assert noisy.precision_met and noisy.stop_reason == "precision"
    assert noisy.iterations > 5 * quiet.iterations
    assert noisy.ci_rel <= 0.02


def test_budget_stops_a_run_that_cannot_converge():
    bench = FakeBench(sigma=1.0, seed=5)
    rec = measure_size(_cfg(stop=StopRule(precision=0.001, budget_s=0.05)), bench, 4096, 2)
    assert rec.stop_reason == "budget" and not rec.precision_met
    # the rule only overshoots the budget by less than one chunk
    assert 0.05 <= rec.wall_s < 0.2


def test_max_iters_caps_the_run():
    rec = measure_size(_cfg(stop=StopRule(precision=0.0001, max_iters=50, budget_s=100)), FakeBench(sigma=0.5), 4096, 2)
    assert rec.stop_reason == "max-iters" and rec.iterations == 50


def test_fixed_iterations_are_exact_and_split_into_samples():
    bench = FakeBench(base_s=1e-5)  # the 1 ms batch target would want 100 ops per sample
    rec = measure_size(_cfg(timing="batched", stop=StopRule(precision=None, fixed_iters=60)), bench, 4096, 2)
    assert rec.stop_reason == "fixed" and rec.iterations == 60
    # batched: a 1-op probe, then batches of 60 // 6 = 10 ops
    assert bench.calls[0] == (1, 1)
    assert rec.ops_per_sample == 10 and len(rec.samples_s) == 6


def test_batched_mode_sizes_batches_to_the_target():
    bench = FakeBench(base_s=1e-5, sigma=0.001)
    rec = measure_size(_cfg(timing="batched", batch_target_s=1e-3), bench, 4096, 2)
    assert rec.ops_per_sample == pytest.approx(100, abs=1)
    assert rec.iterations == len(rec.samples_s) * rec.ops_per_sample


def test_identical_samples_give_identical_decisions():
    # Every rank receives the same max-reduced samples, so the rule must be a pure function of them.
    a = measure_size(_cfg(), FakeBench(sigma=0.1, seed=11), 4096, 2)
    b = measure_size(_cfg(), FakeBench(sigma=0.1, seed=11), 4096, 2)
    assert a == b


def test_wrong_values_are_reported():
    rec = measure_size(_cfg(), FakeBench(wrong=3), 4096, 2)
    assert rec.wrong == 6


@pytest.mark.parametrize("fixed", [1, 5, 6, 7, 60, 400, 401, 1000])
def test_fixed_counts_are_exact_whatever_the_batch(fixed):
    rule = StopRule(precision=None, fixed_iters=fixed)
    k = rule.ops_per_sample(1000)
    n = rule.first_chunk(k)
    assert n * k == fixed
    assert n >= min(fixed, MIN_SAMPLES_FOR_CI)


@pytest.mark.parametrize("max_iters", [1, 5, 7, 50, 1001])
def test_max_iters_is_never_exceeded_whatever_the_batch(max_iters):
    # Fast operations want big batches (1000 ops per 1 ms sample); the cap still holds.
    bench = FakeBench(base_s=1e-6, sigma=0.5)
    rule = StopRule(precision=0.0001, min_iters=1, max_iters=max_iters, budget_s=100)
    rec = measure_size(_cfg(timing="batched", stop=rule), bench, 4096, 2)
    timed = sum(n * k for n, k in bench.calls[1:])  # calls[0] is the one-operation probe
    assert rec.iterations == timed <= max_iters and rec.stop_reason in ("max-iters", "precision")


def test_max_iters_holds_on_the_native_path(pybench_cli, native, tmp_path):
    proc = pybench_cli("allreduce", "--sizes", "8,64K", "--max-iters", "40", "--min-iters", "1", "--precision",
                       "0.0001", "--backend", "mpi", "--json", "r.json", timeout=300)
    assert proc.returncode == 0, proc.stderr
    records = json.loads((tmp_path / "r.json").read_text())["records"]
    assert [r["iterations"] <= 40 for r in records] == [True, True], [r["iterations"] for r in records]
    assert all(len(r["samples_s"]) * r["ops_per_sample"] == r["iterations"] for r in records)


def test_the_stop_rules_precision_is_the_summarys_exactly():
    # decide() reads the CI's half-width without numpy's percentiles; it must be the same number
    from pybench.measure.stats import median_ci_rel_halfwidth
    rng = np.random.default_rng(5)
    for n in [*range(1, 40), 101, 1000]:
        samples = rng.lognormal(-9, 0.3, size=n).tolist()
        assert median_ci_rel_halfwidth(samples) == SampleStats.from_samples(samples).ci_rel_halfwidth
    assert median_ci_rel_halfwidth([0.0, 0.0]) == math.inf
