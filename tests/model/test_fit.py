"""The fitter: exact on synthetic data, honest intervals, and the acceptance criterion
(leave-one-size-out cross-validation) on the real logs."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pybench.errors import NotDetermined, UsageError
from pybench.model.anomalies import find_anomalies
from pybench.model.build import fit_model, fit_models
from pybench.model.cross_validation import cross_validate
from pybench.model.logs import load_measurements
from pybench.model.piecewise import fit_alpha_beta, fit_single_line
from pybench.model.segment import fit_segment

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"
from conftest import SHARED_DATA  # noqa: E402  (the repo's copies of ../shared/data)

needs_shared = pytest.mark.skipif(not SHARED_DATA.is_dir(),
                                  reason=f"shared measurement logs not found at {SHARED_DATA}")

SIZES = 2.0 ** np.arange(3, 34)  # 8 B .. 8 GiB, as a real sweep


# -- one line ----------------------------------------------------------------------------

def test_exact_line_recovered():
    t = 5e-6 + SIZES / 20e9
    seg = fit_segment(SIZES, t)
    assert seg.alpha_s == pytest.approx(5e-6, rel=1e-9)
    assert seg.bw_Bps == pytest.approx(20e9, rel=1e-9)
    assert seg.max_ape < 1e-7 and seg.r2 == pytest.approx(1.0)


def test_noisy_line_intervals_cover_truth():
    rng = np.random.default_rng(1234)
    covered_alpha = covered_bw = 0
    trials = 200
    for _ in range(trials):
        t = (8e-6 + SIZES / 50e9) * (1 + 0.03 * rng.standard_normal(SIZES.size))
        seg = fit_segment(SIZES, t)
        lo, hi = seg.alpha_ci_s
        covered_alpha += lo <= 8e-6 <= hi
        lo, hi = seg.bw_ci_Bps
        covered_bw += lo <= 50e9 <= hi
    # 95% intervals: coverage 0.95 +- 3 binomial s.d. (0.015) over 200 trials.
    assert 0.90 <= covered_alpha / trials <= 0.995
    assert 0.90 <= covered_bw / trials <= 0.995


# -- piecewise ---------------------------------------------------------------------------

def _two_regimes(size):
    # Latency-bound protocol below 1 MiB, bandwidth-bound one above (discontinuous).
    return np.where(size < 2 ** 20, 10e-6 + size / 5e9, 40e-6 + size / 100e9)


def test_piecewise_finds_known_breakpoint():
    t = _two_regimes(SIZES)
    fit = fit_alpha_beta(SIZES, t)
    assert len(fit.segments) == 2
    lo, hi = fit.segments
    assert lo.size_max_bytes == 2 ** 19 and hi.size_min_bytes == 2 ** 20
    assert lo.alpha_s == pytest.approx(10e-6, rel=1e-6) and lo.bw_Bps == pytest.approx(5e9, rel=1e-6)
    assert hi.alpha_s == pytest.approx(40e-6, rel=1e-6) and hi.bw_Bps == pytest.approx(100e9, rel=1e-6)
    assert fit.max_ape < 1e-5


def test_piecewise_with_noise_recovers_parameters_within_ci():
    rng = np.random.default_rng(7)
    t = _two_regimes(SIZES) * (1 + 0.02 * rng.standard_normal(SIZES.size))
    fit = fit_alpha_beta(SIZES, t)
    assert len(fit.segments) == 2
    lo, hi = fit.segments
    assert lo.size_max_bytes in (2 ** 18, 2 ** 19, 2 ** 20)
    # Interval coverage is tested statistically above; here the estimates must be close
    # and the intervals must bracket the estimates with a sane width.
    for seg, alpha, bw in ((lo, 10e-6, 5e9), (hi, 40e-6, 100e9)):
        a_lo, a_hi = seg.alpha_ci_s
        b_lo, b_hi = seg.bw_ci_Bps
        assert a_lo < seg.alpha_s < a_hi and a_hi - a_lo < 0.5 * alpha
        assert b_lo < seg.bw_Bps < b_hi and b_hi - b_lo < 0.5 * bw
        assert seg.alpha_s == pytest.approx(alpha, rel=0.15)
        assert seg.bw_Bps == pytest.approx(bw, rel=0.15)
    single = fit_single_line(SIZES, t)
    assert single.max_ape > 5 * fit.max_ape


def test_pure_noise_does_not_split():
    rng = np.random.default_rng(99)
    t = (3e-6 + SIZES / 10e9) * (1 + 0.02 * rng.standard_normal(SIZES.size))
    assert len(fit_alpha_beta(SIZES, t).segments) == 1


def test_min_points_and_repeated_sizes():
    size = np.repeat(SIZES[:12], 3)
    t = np.repeat(_two_regimes(SIZES[:12]), 3)
    fit = fit_alpha_beta(size, t, min_points=5)
    assert all(seg.n_points >= 5 for seg in fit.segments)
    assert all(seg.n_points % 3 == 0 for seg in fit.segments)  # repeats never split


def test_bad_input_is_usage_error():
    with pytest.raises(UsageError):
        fit_alpha_beta([8, 8], [1e-6, 1e-6])
    with pytest.raises(UsageError):
        fit_alpha_beta([8, 16], [1e-6, -1.0])
    with pytest.raises(UsageError):
        fit_alpha_beta([8, 16], [1e-6])
    with pytest.raises(UsageError):
        fit_alpha_beta(SIZES, _two_regimes(SIZES), criterion="magic")


def test_cross_validation_on_synthetic_data_is_exact():
    cv = cross_validate((SIZES, _two_regimes(SIZES)))
    assert cv.size_bytes[0] == 65536 and cv.size_bytes[-1] == SIZES[-1]
    # Sizes away from the breakpoint are predicted exactly; at the switch itself the
    # held-out size can only be guessed by the neighbouring regime.
    inside = (cv.size_bytes <= 2 ** 17) | (cv.size_bytes >= 2 ** 22)
    assert np.max(cv.ape_percent[inside]) < 1e-6
    assert "median APE" in cv.table()
    # The prediction band is honest at the switch (the held-out sizes there, missed by 37% and
    # 109%, fall inside it) without widening the exact stretches: far from it the band is 0.
    assert cv.coverage == 1.0
    missed = cv.ape_percent > 1
    assert missed.sum() == 2 and np.all(cv.half_width_percent[missed] >= cv.ape_percent[missed] * (1 - 1e-9))
    far = (cv.size_bytes <= 2 ** 16) | (cv.size_bytes >= 2 ** 23)
    assert np.max(cv.half_width_percent[far]) < 1e-6 and cv.median_half_width < 1e-6


def test_prediction_band_in_a_gap_holds_both_pieces():
    # Between two pieces nobody measured where the switch is: the band holds both lines.
    fit = fit_alpha_beta(SIZES, _two_regimes(SIZES))
    lo, hi = fit.segments
    gap = np.sqrt(lo.size_max_bytes * hi.size_min_bytes)
    t, half = fit.predict(gap, band="prediction")
    for seg in (lo, hi):
        line, _ = seg.predict(gap)
        assert t - half <= line <= t + half
    # Inside a piece of exact data, a size left out is predicted exactly: no band to add.
    _, inner = fit.predict(2.0 ** 25 * 1.5, band="prediction")
    assert inner < 1e-12


def test_leave_one_out_errors_are_recorded_per_piece():
    rng = np.random.default_rng(11)
    t = _two_regimes(SIZES) * (1 + 0.02 * rng.standard_normal(SIZES.size))
    fit = fit_alpha_beta(SIZES, t)
    recorded = [size for seg in fit.segments for size, _ in seg.loo_errors]
    assert recorded == [int(s) for s in SIZES]
    for seg in fit.segments:
        assert all(seg.size_min_bytes <= size <= seg.size_max_bytes for size, _ in seg.loo_errors)
        assert type(seg).from_dict(json.loads(json.dumps(seg.to_dict()))) == seg
    # The band at a measured size's neighbour is at least as wide as the errors around it.
    errors = {size: abs(err) for seg in fit.segments for size, err in seg.loo_errors}
    t_mid, half = fit.predict(2.0 ** 12 * 1.5, band="prediction")
    assert half / t_mid >= max(errors[2 ** 12], errors[2 ** 13]) * 0.999


# -- physics: alpha >= 0, B > 0, positive predictions ------------------------------------

CPU_SIZES = 2.0 ** np.arange(16, 29)  # 64 KiB .. 256 MiB, as `pybench allreduce --sizes 64K:256M`


def _cpu_convex(size, cache_gbps=10.0, mem_gbps=2.5, llc_bytes=8 * 2 ** 20, alpha=3e-6):
    # Cache-resident bytes at cache speed, the rest at memory speed: convex in size, and a
    # line through the memory-bound stretch has a negative intercept.
    cached = np.minimum(size, llc_bytes)
    return alpha + cached / (cache_gbps * 1e9) + (size - cached) / (mem_gbps * 1e9)


def _assert_physical(fit_or_segments):
    segs = getattr(fit_or_segments, "segments", fit_or_segments)
    for seg in segs:
        assert seg.alpha_s >= 0.0 and seg.inv_bw_s_per_byte >= 0.0
        assert seg.alpha_s > 0.0 or seg.inv_bw_s_per_byte > 0.0
        a_lo, a_hi = seg.alpha_ci_s
        assert 0.0 <= a_lo <= seg.alpha_s <= a_hi
        b_lo, b_hi = seg.bw_ci_Bps
        assert 0.0 < b_lo <= seg.bw_Bps <= b_hi


def test_convex_line_holds_alpha_at_zero_and_counts_one_parameter():
    size = CPU_SIZES[8:]                     # 16 MiB .. 256 MiB: past the 8 MiB cache
    t = _cpu_convex(size)
    unconstrained_alpha = np.linalg.lstsq(np.column_stack([1 / t, size / t]), np.ones(size.size),
                                          rcond=None)[0][0]
    assert unconstrained_alpha < 0           # what the old fit reported
    seg = fit_segment(size, t)
    assert seg.held == "alpha" and seg.alpha_s == 0.0
    assert seg.dof == size.size - 1 and seg.cov[0] == 0.0 and seg.cov[1] == 0.0
    assert 2.5e9 < seg.bw_Bps < 3.5e9        # the memory-bound rate, not the cache one
    _assert_physical([seg])
    assert seg.alpha_ci_s[0] == 0.0 and np.isfinite(seg.alpha_ci_s[1])
    assert any("held at its bound 0" in n for n in seg.ci_notes())
    # Constrained optimum of T = s/B on relative residuals: 1/B = sum(s/T) / sum((s/T)^2).
    x = size / t
    assert seg.inv_bw_s_per_byte == pytest.approx(x.sum() / (x * x).sum(), rel=1e-12)
    # One piece, one free parameter: BIC = n log(RSS/n) + 1 log n.
    fit = fit_alpha_beta(size, t, max_segments=1)
    rss = float(np.sum(((t - seg.inv_bw_s_per_byte * size) / t) ** 2))
    n = size.size
    assert fit.criterion_value == pytest.approx(n * np.log(max(rss, n * 1e-4) / n) + np.log(n))


@pytest.mark.parametrize("source", ["synthetic", "cpu_mpi2_allreduce.json", "cpu_mpi2_allgather.json"])
def test_criterion_charges_each_piece_its_free_parameters(source):
    if source == "synthetic":
        # A latency-bound piece, then a memory-bound stretch whose best line has alpha < 0.
        size = CPU_SIZES
        t = np.where(size < 2 ** 22, 10e-6 + size / 5e9, _cpu_convex(size, llc_bytes=2 ** 23))
    else:
        size, t = load_measurements(FIXTURES / source)[0].fit_points()
    fit = fit_alpha_beta(size, t)
    _assert_physical(fit)
    n = size.size
    rss = sum(seg.rel_sigma ** 2 * seg.dof for seg in fit.segments)
    q = sum(seg.n_points - seg.dof for seg in fit.segments)   # 1 for a held piece, else 2
    assert all(seg.n_points - seg.dof == (1 if seg.held else 2) for seg in fit.segments)
    k = len(fit.segments)
    expected = n * np.log(max(rss, n * 1e-4) / n) + (q + k - 1) * np.log(n)
    assert fit.criterion_value == pytest.approx(expected, rel=1e-6)
    if source == "synthetic":
        assert k >= 2 and fit.segments[0].held == "" and fit.segments[-1].held == "alpha"


def test_time_falling_with_size_gives_a_flat_piece():
    size = 2.0 ** np.arange(10, 16)
    t = np.array([250e-6, 248e-6, 246e-6, 245e-6, 243e-6, 240e-6])
    seg = fit_segment(size, t)
    assert seg.held == "inv_bw" and seg.inv_bw_s_per_byte == 0.0 and seg.bw_Bps == np.inf
    assert 240e-6 < seg.alpha_s < 250e-6
    assert seg.bw_ci_Bps[1] == np.inf and seg.bw_ci_Bps[0] > 0
    assert any("flat" in n for n in seg.ci_notes())
    d = seg.to_dict()
    assert d["bw_Bps"] is None and d["bw_ci_Bps"][1] is None and d["ci_notes"]
    json.dumps(d, allow_nan=False)
    back = type(seg).from_dict(json.loads(json.dumps(d)))
    assert back == seg


def test_unbounded_and_undefined_intervals_are_said_not_invented():
    # Two points: no residual freedom, so the intervals are undefined (nan), and say so.
    seg = fit_segment([1e6, 2e6], [1e-4, 1.8e-4])
    assert seg.dof == 0 and seg.held == ""
    assert all(np.isnan(seg.alpha_ci_s)) and all(np.isnan(seg.bw_ci_Bps))
    assert any("undefined" in n for n in seg.ci_notes())
    d = seg.to_dict()
    assert d["alpha_ci_s"] == [None, None] and "undefined" in " ".join(d["ci_notes"])
    # A noisy, nearly flat piece: the interval of 1/B reaches 0, so B is unbounded above.
    size = 2.0 ** np.arange(10, 16)
    t = 100e-6 + size / 1e12 + np.array([3, -3, 2, -2, 3, -1]) * 1e-6
    seg = fit_segment(size, t)
    if seg.held == "":
        assert seg.bw_ci_Bps[1] == np.inf
        assert any("unbounded" in n for n in seg.ci_notes())
        assert seg.to_dict()["bw_ci_Bps"][1] is None


def _answered(model, sizes, world):
    """The sizes the fitted sweep answers at its own world: the rest (a part of the time it never measured) are
    refused as not determined, which the test checks too."""
    if world != model.world_size:
        return sizes
    unknown = [s for s in sizes if model.undetermined_at(float(s))]
    for s in unknown[:1]:
        with pytest.raises(NotDetermined):
            model.predict(s, world=world)
    return np.array([s for s in sizes if s not in unknown])


def test_convex_cpu_sweep_fits_physically_with_positive_predictions():
    from pybench.model.logs import MeasurementSet

    rng = np.random.default_rng(2026)
    t = _cpu_convex(CPU_SIZES) * (1 + 0.03 * rng.standard_normal(CPU_SIZES.size))
    fit = fit_alpha_beta(CPU_SIZES, t)
    _assert_physical(fit)
    assert fit.median_ape < 5
    (model,) = fit_models([MeasurementSet("pybench", "allreduce", "mpi", 2, "intra-node", "float32",
                                          CPU_SIZES, t)])
    sizes = 2.0 ** np.arange(0, 41)          # 1 B .. 1 TiB, far outside the sweep both ways
    for world in (2, 3, 4, 8, 16, 128, 4096):
        for band in ("confidence", "prediction"):
            p = model.predict(_answered(model, sizes, world), world=world, band=band)
            assert np.all(p.time_s > 0)
            assert np.all(np.isfinite(p.time_low_s)) and np.all(np.isfinite(p.time_high_s))
            assert np.all(p.time_low_s <= p.time_s) and np.all(p.time_s <= p.time_high_s)


@settings(max_examples=60, deadline=None, database=None)
@given(cache_gbps=st.floats(3.0, 40.0), ratio=st.floats(1.5, 10.0), llc_log2=st.integers(17, 26),
       alpha_us=st.floats(0.0, 20.0), noise=st.floats(0.0, 0.2), seed=st.integers(0, 2 ** 16))
def test_any_convex_sweep_gives_a_physical_model(cache_gbps, ratio, llc_log2, alpha_us, noise, seed):
    rng = np.random.default_rng(seed)
    t = _cpu_convex(CPU_SIZES, cache_gbps, cache_gbps / ratio, 2.0 ** llc_log2, alpha_us * 1e-6)
    t = t * np.exp(noise * rng.standard_normal(CPU_SIZES.size))
    fit = fit_alpha_beta(CPU_SIZES, t)
    _assert_physical(fit)
    sizes = 2.0 ** np.arange(0, 41)
    pred, half = fit.predict(sizes)
    assert np.all(pred > 0) and np.all(np.isfinite(half)) and np.all(half >= 0)


# -- acceptance criterion on real logs ---------------------------------------------------

def _real(name):
    path = SHARED_DATA / "nccl-tests" / name
    if not path.exists():
        pytest.skip(f"shared log {path} not found")
    return load_measurements(path)[0]


# Leave-one-size-out from 64 KiB with the sizes `fit` names as anomalies left out (issue 13's
# acceptance: median <= 5%, max <= 15%, the 95% prediction band covering >= 90% of held-out
# sizes). Each row pins today's figures a little above what was measured, so a regression
# fails; where the target is missed the reason is in the comment and in the closing note, not
# hidden behind an expected failure. The band's median half-width is pinned from above too, so
# that coverage cannot be bought with wider bands unnoticed.
#   sweep: (median %, max %, coverage, median band half-width %) measured -> pinned
LOO_PINS = {
    # meets all three; the band (jackknife: the fit's own leave-one-size-out errors near each
    # size, and both pieces' lines in a gap) covers 18 of 18; it covered 12 (median half-width
    # 6.1%) with the pieces' parametric band alone, which knew nothing of the steps between them.
    # 2.73 -> 2.94% median since predictions carry the measured neighbours' residuals, 2.64%
    # since each residual is shrunk by the noise of its own median (out-of-place vs in-place)
    "a100_2node_16gpu_oci_roce_allreduce.txt": (2.64, 12.45, 1.00, 12.4),
    # missed by 0.14 points: the max was 16.6% (16 MiB, between two pieces), 14.3% once the
    # breakpoint search weighted points by Huber's rule, and is 15.14% at 64 KiB since
    # predictions carry the measured neighbours' residuals (32 KiB and 128 KiB both sit above
    # their line; 64 KiB does not). That carry put every vTrain power-of-two fit under 1% median.
    # Met since each carried residual is shrunk by the noise of its own median: 32 KiB's two
    # columns differ by 22%, so its +residual is mostly noise (13.82% max, 3.67% median).
    "h100_p5_2node_16gpu_efa_allreduce_srunprefix.txt": (3.67, 13.82, 1.00, 16.5),
    # missed: non-monotone in both columns; `fit` names 1 MiB and 2 MiB (2 anomalies, above the
    # 1 the issue allows) and 8 MiB still misses by 40.5% with them left out (36.9% before the
    # residual carry, which took the median from 14.05 to 12.53%; 12.17% / 40.87% with the
    # carried residuals shrunk by their own noise)
    "b200_2node_16gpu_gke_a4_allgather.txt": (12.17, 40.87, 0.94, 32.8),
}
LOO_TARGET = (5.0, 15.0, 0.90)


@needs_shared
@pytest.mark.parametrize("name", sorted(LOO_PINS))
def test_acceptance_loo_cross_validation(name):
    cv = cross_validate(_real(name), min_size=64 * 1024, exclude_anomalies=True)
    assert cv.size_bytes[0] == 64 * 1024
    median, worst, coverage, half_width = LOO_PINS[name]
    assert cv.median_ape <= median * 1.03 + 0.05, cv.table()
    assert cv.max_ape <= worst * 1.03 + 0.05, cv.table()
    assert cv.coverage >= coverage - 0.02, cv.table()
    assert cv.median_half_width <= half_width * 1.03 + 0.05, cv.table()
    meets = (cv.median_ape <= LOO_TARGET[0], cv.max_ape <= LOO_TARGET[1], cv.coverage >= LOO_TARGET[2])
    assert meets == (median <= LOO_TARGET[0], worst <= LOO_TARGET[1], coverage >= LOO_TARGET[2]), \
        "a target is now met or missed differently: update LOO_PINS and the README table"


# The CPU runs of the foundation (tests/fixtures/README.md: real runs on the 2-core shared
# development VM, 2 MPI ranks), all sizes held out. They miss the targets by far, for reasons
# of the machine, not the fit:
# - allreduce: regimes change every 2-3 sizes: 1 MiB 111.9 us and 2 MiB 117.8 us (huge pages
#   from 2 MiB), then the last-level cache runs out: 4 MiB 264 us, 8 MiB 1061 us, 16 MiB
#   6906 us; and runs are not reproducible to 15%: three more runs that morning measured
#   16 MiB at 11243, 2916 and 19279 us (this one: 6906 us)
# - allgather: non-monotone: 4 MiB 80.5 us < 2 MiB 100.6 us (huge pages from 2 MiB), then
#   8 MiB 289 us, 16 MiB 4790 us (its 95% CI of the median is +-66%)
# The bands are honest about it: they cover every size, at a median half-width of 141% / 137%.
CPU_PINS = {"cpu_mpi2_allreduce.json": (29.23, 63.88, 1.00), "cpu_mpi2_allgather.json": (30.28, 251.03, 1.00)}


@pytest.mark.parametrize("name", sorted(CPU_PINS))
def test_acceptance_loo_cross_validation_cpu_runs(name):
    m = load_measurements(FIXTURES / name)[0]
    assert (m.backend, m.world_size) == ("mpi", 2)
    cv = cross_validate(m, min_size=64 * 1024)
    assert cv.size_bytes[0] == 64 * 1024 and cv.size_bytes.size == 13
    median, worst, coverage = CPU_PINS[name]
    assert cv.median_ape <= median * 1.03 + 0.05, cv.table()
    assert cv.max_ape <= worst * 1.03 + 0.05, cv.table()
    assert cv.coverage >= coverage - 0.02, cv.table()


@pytest.mark.parametrize("name", ["cpu_mpi2_allreduce.json", "cpu_mpi2_allgather.json"])
def test_cpu_runs_fit_physically_and_beat_one_line(name):
    m = load_measurements(FIXTURES / name)[0]
    (model,) = fit_models([m])
    for seg in model.segments:
        assert seg.alpha_s >= 0 and seg.inv_bw_s_per_byte > 0
    sizes = 2.0 ** np.arange(0, 41)
    for world in (2, 3, 8, 64, 1024):
        p = model.predict(_answered(model, sizes, world), world=world)
        assert np.all(p.time_s > 0)
        assert np.all(np.isfinite(p.time_low_s)) and np.all(np.isfinite(p.time_high_s))
        assert np.all(p.time_low_s <= p.time_s) and np.all(p.time_s <= p.time_high_s)
    pw, line = cross_validate(m), cross_validate(m, single_line=True)
    assert pw.median_ape < line.median_ape


def test_both_nccl_tests_columns_are_used():
    m = load_measurements(FIXTURES / "nccl_tests_allreduce_8xa100.json")[0]
    size, time = m.fit_points()
    assert size.size == 2 * len(m)
    cv = cross_validate(m)
    k = int(np.flatnonzero(m.size_bytes == cv.size_bytes[0])[0])
    assert cv.time_s[0] == pytest.approx((m.time_s[k] + m.time_in_place_s[k]) / 2)


@needs_shared
@pytest.mark.parametrize("name, pw_median_max, line_median_min", [
    ("a100_2node_16gpu_oci_roce_allreduce.txt", 5.0, 20.0),
    ("h100_p5_2node_16gpu_efa_allreduce_srunprefix.txt", 5.0, 20.0),
    # 10.07% since every piece needs 3 distinct sizes (issue 13; 9.4% with 2-size pieces); 11.11%
    # since the breakpoint search weights points by Huber's rule (with its anomalies left in, this
    # sweep's median lost 1 point; outside them it did not move, and H100 and vTrain gained);
    # 12.65% since predictions carry the measured residuals (outside the anomalies 14.05 -> 12.53%).
    ("b200_2node_16gpu_gke_a4_allgather.txt", 13.0, 40.0),
])
def test_piecewise_beats_single_line_out_of_sample(name, pw_median_max, line_median_min):
    m = _real(name)
    pw = cross_validate(m)
    line = cross_validate(m, single_line=True)
    assert pw.median_ape <= pw_median_max
    assert line.median_ape >= line_median_min
    assert pw.median_ape < line.median_ape / 3


# Leave-one-size-out outside the sizes fit names as anomalies (issue 13's criterion), pinned at
# today's figures: (anomalies named, median %, max %).
@needs_shared
@pytest.mark.parametrize("name, named, median_max, max_max", [
    ("a100_2node_16gpu_oci_roce_allreduce.txt", [], 2.7, 12.5),
    ("h100_p5_2node_16gpu_efa_allreduce_srunprefix.txt", [], 3.7, 13.9),
    ("b200_2node_16gpu_gke_a4_allgather.txt", [1 << 20, 2 << 20], 12.2, 41.0),
])
def test_loo_outside_named_anomalies(name, named, median_max, max_max):
    m = _real(name)
    assert [a.size_bytes for a in find_anomalies(*m.fit_points())] == named
    cv = cross_validate(m, exclude_anomalies=True)
    assert not set(named) & set(cv.size_bytes.tolist())
    assert cv.median_ape <= median_max and cv.max_ape <= max_max, cv.table()


@needs_shared
def test_every_piece_spans_three_distinct_sizes():
    for path in sorted((SHARED_DATA / "nccl-tests").glob("*.txt")):
        for m in load_measurements(path):
            if len(m) < 3:
                continue
            size, time = m.fit_points()
            for seg in fit_alpha_beta(size, time).segments:
                inside = np.unique(size[(size >= seg.size_min_bytes) & (size <= seg.size_max_bytes)])
                assert inside.size >= 3, (path.name, seg)


def test_two_size_steps_are_not_pieces():
    # A sweep whose last two sizes jump to a faster regime: before issue 13 a piece through
    # just those two sizes reported their slope as the "bandwidth".
    sizes = 2.0 ** np.arange(10, 22)
    time = 20e-6 + sizes / 10e9
    time[-2:] = 60e-6 + sizes[-2:] / 100e9
    fit = fit_alpha_beta(np.repeat(sizes, 2), np.repeat(time, 2))
    assert all(np.sum((sizes >= s.size_min_bytes) & (sizes <= s.size_max_bytes)) >= 3 for s in fit.segments)


@needs_shared
def test_single_size_log_cannot_be_cross_validated():
    with pytest.raises(UsageError, match="at least 3 distinct sizes"):
        cross_validate(_real("v100_dgx1_8gpu_allgather_4g_issue37_oldformat.txt"))


# -- properties -----------------------------------------------------------------------------



@settings(max_examples=40, deadline=None, database=None)
@given(alpha_us=st.floats(0.5, 500.0), bw_gbps=st.floats(0.1, 1000.0),
       lo=st.integers(0, 12), n=st.integers(4, 20))
def test_exact_data_recovered_exactly(alpha_us, bw_gbps, lo, n):
    sizes = 2.0 ** np.arange(lo, lo + n)
    t = alpha_us * 1e-6 + sizes / (bw_gbps * 1e9)
    fit = fit_alpha_beta(sizes, t)
    # Exact data needs one piece whatever its range, and predicts itself.
    assert len(fit.segments) == 1
    assert fit.max_ape < 1e-6
    pred, _ = fit.predict(sizes)
    np.testing.assert_allclose(pred, t, rtol=1e-8)


# -- anomalies ------------------------------------------------------------------------------

@pytest.mark.parametrize("factor", [2, 8, 32, 1024])
def test_no_anomaly_on_exact_alpha_beta_data_however_sparse(factor):
    # The latency-bandwidth knee bends the curve in log-log; sparse sweeps must not turn it into anomalies.
    sizes = 1024.0 * float(factor) ** np.arange(0, 7)
    assert find_anomalies(sizes, 20e-6 + sizes / 10e9) == ()


def test_anomaly_slower_and_faster_sizes_are_named_with_their_cause():
    sizes = 2.0 ** np.arange(10, 28)
    time = 20e-6 + sizes / 50e9
    time[5] *= 1.7          # 32 KiB slow, and slower than 64 KiB: the mark of a switch
    time[12] /= 1.6         # 4 MiB fast
    found = find_anomalies(np.repeat(sizes, 2), np.repeat(time, 2))
    assert [a.size_bytes for a in found] == [32768, 4194304]
    slow, fast = found
    assert slow.ratio == pytest.approx(1.7, rel=0.02) and fast.ratio == pytest.approx(1 / 1.6, rel=0.02)
    assert slow.faster_larger_bytes == 65536 and "protocol or algorithm switch" in slow.cause
    assert "size 32K is 1.6" in slow.describe() and "slower than the larger 64K" in slow.describe()
    assert "size 4M is 1.6" in fast.describe() and "x faster" in fast.describe()
    assert "different algorithm or protocol" in fast.cause
    assert type(slow).from_dict(slow.to_dict()) == slow
    # Too few sizes to draw a trend without the point: nothing is named.
    assert find_anomalies(sizes[:3], time[:3]) == ()


# Issue 13: fit the power-of-two sizes of each vTrain table (one A100 node, 1 MiB steps), predict
# every 1 MiB step; target median <= 1%, max <= 15% outside at most 2 named sizes per table.
# Pinned at today's figures: GPUs: (median %, max %, coverage, median band half-width %).
# Missed: the median on 4, 5 and 8 GPUs. Most 1 MiB steps lie in the top octaves (512 of 1024
# between 512 MiB and 1 GiB), so the median is the error there: one straight piece from 8 or
# 64 MiB to 1 GiB bends through the busbw curve and sits 1-3% off in the top octaves; with 11
# sizes the criterion does not pay for one more piece. 7 GPUs met (3.22% before the Huber-weighted
# breakpoint search: its 16 MiB, 10% off every line, hid the misfit at the top).
# Every table meets both targets since predictions between measured sizes carry the measured
# neighbours' residuals (pybench.model.residuals); before, 4, 5 and 8 GPUs missed the median
# (1.56, 1.11, 1.48%): one straight piece over the top octaves sits 1-3% off the curve.
VTRAIN_POW2_PINS = {2: (0.25, 3.50, 1.00, 2.9), 3: (0.24, 6.33, 1.00, 2.0), 4: (0.21, 6.35, 1.00, 5.6),
                    5: (0.62, 12.49, 1.00, 3.2), 6: (0.32, 8.90, 1.00, 1.9), 7: (0.53, 12.58, 0.99, 2.5),
                    8: (0.42, 12.16, 1.00, 7.1)}


@needs_shared
@pytest.mark.parametrize("gpus", sorted(VTRAIN_POW2_PINS))
def test_vtrain_power_of_two_fit_predicts_every_step(gpus):
    from pybench.model.cross_validation import power_of_two_check

    path = SHARED_DATA / "vtrain" / f"a100_nvswitch_allreduce_{gpus}gpu.csv"
    cv = power_of_two_check(load_measurements(path)[0])
    assert cv.size_bytes.size + len(cv.anomalies) == 1024 and len(cv.anomalies) <= 2
    median, worst, coverage, half_width = VTRAIN_POW2_PINS[gpus]
    assert cv.median_ape <= median * 1.03 + 0.02, cv.table()
    assert cv.max_ape <= worst * 1.03 + 0.05, cv.table()
    assert cv.coverage >= coverage - 0.02
    assert cv.median_half_width <= half_width * 1.03 + 0.05
    assert (cv.median_ape <= 1.0, cv.max_ape <= 15.0) == (median <= 1.0, worst <= 15.0), \
        "a target is now met or missed differently: update VTRAIN_POW2_PINS"


def test_prediction_band_grows_beyond_the_measured_sizes():
    # Issue 13: intervals that widen with the distance of extrapolation. Beyond the sweep the
    # band grows by the median leave-one-out error per octave, both ways, and stays finite.
    rng = np.random.default_rng(21)
    sizes = 2.0 ** np.arange(16, 31)
    fit = fit_alpha_beta(sizes, (20e-6 + sizes / 50e9) * (1 + 0.02 * rng.standard_normal(sizes.size)))
    up = 2.0 ** np.arange(30, 40)
    down = 2.0 ** np.arange(16, 2, -1)
    for far in (up, down):
        t, half = fit.predict(far, band="prediction")
        rel = half / t
        assert np.all(np.diff(rel) > 0) and np.all(np.isfinite(rel))
    t, huge = fit.predict(2.0 ** 200, band="prediction")   # the growth is capped: finite
    assert np.isfinite(huge) and huge / t < 10


@needs_shared
def test_a_piece_steeper_than_the_largest_sizes_is_called_a_step_not_a_rate():
    # Issue 13: pieces across a protocol step report slopes far above any link rate. The B200
    # all-gather's 256 MiB..1 GiB piece is 709 GB/s against 280 GB/s at 2..8 GiB; A100's climb
    # to its bandwidth piece by piece and is not flagged.

    b200 = fit_model(_real("b200_2node_16gpu_gke_a4_allgather.txt")).report()
    steep = [ln for ln in b200.splitlines() if "step of the curve" in ln]
    assert len(steep) == 1 and steep[0].strip().startswith("[5] B 708.8 GB/s is above the largest sizes' 279.5")
    a100 = fit_model(_real("a100_2node_16gpu_oci_roce_allreduce.txt")).report()
    assert "step of the curve" not in a100


def test_replicates_that_disagree_are_named_and_an_anomaly_is_not_labelled_measured():
    """An out-of-place 459 us beside an in-place 70 ms at one size (a disturbed run, seen in a public log) is no
    measurement to trust; a size left out as an anomaly answers with the fit's trend, and says so."""
    from pybench.model.logs import MeasurementSet

    sizes = np.array([2 ** k for k in range(10, 25)], dtype=np.int64)
    oop = 20e-6 + sizes / 30e9
    inplace = oop.copy()
    inplace[12] *= 150.0
    disturbed = fit_model(MeasurementSet("nccl-tests", "allreduce", "nccl", 16, "inter-node", "float32", sizes, oop,
                                         time_in_place_s=inplace))
    assert any("differ between their replicates" in n and "4M (150x)" in n for n in disturbed.notes)
    assert not any("replicates" in n for n in fit_model(MeasurementSet(
        "nccl-tests", "allreduce", "nccl", 16, "inter-node", "float32", sizes, oop, time_in_place_s=oop * 1.1)).notes)
    spiked = oop.copy()
    spiked[8] *= 3.0  # one size off its neighbours' trend
    model = fit_model(MeasurementSet("nccl-tests", "allreduce", "nccl", 16, "inter-node", "float32", sizes, spiked))
    assert [a.size_bytes for a in model.anomalies] == [int(sizes[8])]
    at_spike = model.predict(int(sizes[8]))
    assert at_spike.provenance.startswith("the fit's trend")
    assert at_spike.time_low_s < at_spike.time_s < at_spike.time_high_s >= spiked[8]  # reaches the measurement
    assert model.predict(int(sizes[3])).provenance == "measured"


def test_the_topology_model_leaves_out_a_size_whose_replicates_disagree():
    """A public H100 log's out-of-place 1 MiB took 317 us beside 93 us in place (a disturbed run): the shape every
    layout shares is fitted without that size."""
    from pybench.model.logs import MeasurementSet
    from pybench.model.topology_fit import fit_topology_models

    sizes = np.array([2 ** k for k in range(20, 31)], dtype=np.int64)
    oop = 60e-6 + 2 * 15 / 16 * sizes / 300e9
    inplace = oop * 1.01
    oop_spiked = oop.copy()
    oop_spiked[0] *= 3.4
    sweep = MeasurementSet("nccl-tests", "allreduce", "nccl", 16, "inter-node", "float32", sizes, oop_spiked,
                           notes=("16 ranks on 2 host(s) per the Rank lines",), time_in_place_s=inplace)
    (topology,), _ = fit_topology_models([sweep])
    assert int(sizes[0]) not in {int(s) for s in topology.residual_sizes}
    assert topology.predict(int(sizes[0]), 16, 2).time_s == pytest.approx(oop[0], rel=0.05)
    curve = fit_model(sweep)  # the curve names the size too: off its trend here, else as disagreeing replicates
    assert [a.size_bytes for a in curve.anomalies] == [int(sizes[0])]


def test_a_largest_size_slower_than_its_trend_starts_a_regime_unless_its_replicates_disagree():
    """A CPU sweep leaving its caches at its last size (pybench's own 2-rank all-reduce here: 4M at 2.8x the
    time of 2M) had that size called a spike and left out; every larger size was then priced at the cached
    rate, 15-44x too fast with an interval that missed. Nothing after the last size says spike or regime, so
    a slower last size is kept; one whose replicates disagree (a disturbed run) is still left out."""
    from pybench.model.logs import MeasurementSet
    sizes = np.array([2 ** k for k in range(10, 23)], dtype=np.int64)
    cached = 5e-6 + sizes / 12e9
    times = cached.copy()
    times[-1] = 5e-6 + sizes[-1] / 3e9  # out of the caches
    assert find_anomalies(sizes, times) == ()
    model = fit_model(MeasurementSet("pybench", "allreduce", "mpi", 2, "intra-node", "float32", sizes, times))
    assert model.predict(int(sizes[-1])).time_s == pytest.approx(times[-1], rel=0.1)
    assert model.predict(int(sizes[-1]) * 4).time_s > 3 * times[-1]
    disturbed = times.copy()
    disturbed[-1] = cached[-1] * 6  # one replicate of the last size 6x the other
    both = (np.concatenate([sizes, sizes]), np.concatenate([cached, disturbed]))
    assert [a.size_bytes for a in find_anomalies(*both)] == [int(sizes[-1])]


@pytest.mark.parametrize("factor", [2.0, 0.5])
def test_a_spike_just_before_the_largest_size_is_named_and_the_largest_kept(factor):
    """A 2x spike (either way) at the size before the last: the last size's one-sided trend runs through the
    spike, and a rule that judged the last size by it named a good size and kept the spike."""
    sizes = np.array([2.0 ** k for k in range(10, 31)])
    times = 2e-5 + sizes / 2e10
    times[-2] *= factor
    assert [a.size_bytes for a in find_anomalies(sizes, times)] == [int(sizes[-2])]


def test_a_clean_smallest_size_beside_a_size_whose_replicates_disagree_is_kept():
    """A V100 PCIe TCP all-reduce: 16 B ran 17.4 us out of place and 26.1 us in place (1.5x apart); their mean drew
    the trend that named a clean 8 B (16.8 us) 1.44x faster than it."""
    sizes = np.array([8.0, 16.0, 32.0, 64.0, 128.0, 256.0, 512.0, 1024.0])
    out = np.array([16.8, 17.45, 17.1, 17.3, 17.6, 18.0, 18.9, 20.2]) * 1e-6
    inp = out.copy()
    inp[1] = 26.12e-6
    assert find_anomalies(np.concatenate([sizes, sizes]), np.concatenate([out, inp])) == ()


def test_of_a_spike_and_the_size_beside_it_the_spike_is_named():
    """OSU all-reduce on 576 ranks: 256K ran 765 us between 378 us at 128K and 515 us at 512K, and 1M ran on at
    512K's rate; 512K was named 2.98x faster than a trend drawn through the spike, and the spike too."""
    sizes = np.array([float(1 << k) for k in range(10, 21)])
    times = np.array([40.0, 52.0, 70.0, 100.0, 150.0, 210.0, 290.0, 378.0, 765.0, 515.0, 1065.0]) * 1e-6
    assert [a.size_bytes for a in find_anomalies(sizes, times)] == [256 << 10]


def test_tables_pooled_as_replicates_that_disagree_may_have_run_with_other_settings():
    """Five broadcast runs of one log, each under another NCCL_PROTO, were pooled and called a disturbed run
    ("rerun"); where several tables are pooled, the note says their settings may differ and to fit them apart."""
    from pybench.model.build import fit_model
    from pybench.model.logs import MeasurementSet
    sizes = np.array([2.0 ** k for k in range(10, 24)])
    fast = MeasurementSet("x", "broadcast", "nccl", 2, "intra-node", "float32", sizes, 10e-6 + sizes / 100e9)
    slow = dataclasses.replace(fast, time_s=np.where(sizes < 8192, 40, 1) * fast.time_s)  # a protocol's sizes
    pooled = fit_model([fast, slow])
    assert any("2 tables pooled as replicates" in n and "fit each table apart" in n for n in pooled.notes)
    # apart at most sizes, they are no replicates of one system: refused (a curve through both is neither)
    from pybench.errors import UsageError
    with pytest.raises(UsageError, match=r"2 tables of broadcast at 2 ranks differ 40x-40x at 14 of their 14 sizes: "
                                         r"not replicates of one system .*fit each table from a log of its own"):
        fit_model([fast, dataclasses.replace(fast, time_s=40 * fast.time_s)])
    single = fit_model(dataclasses.replace(fast, time_in_place_s=40 * fast.time_s))
    assert any("(out-of-place and in-place)" in n and "fit each table apart" not in n for n in single.notes)


def test_a_table_too_short_to_fit_is_told_how_its_tool_sweeps_once_per_kind(tmp_path, capsys):
    """An OSU table of one size was told to sweep with nccl-tests' `-b 8 -e 8G`, and a log of twenty such tables
    printed twenty identical lines."""
    from pybench.cli.main import main
    table = "# OSU MPI Allreduce Latency Test v7.0\n# Size       Avg Latency(us)\n{size}      {t}\n"
    one = tmp_path / "one.txt"
    one.write_text("mpirun -np 4 osu_allreduce\n" + table.format(size=8, t=3.2) + "\n" + table.format(size=8, t=3.4))
    full = tmp_path / "full.txt"
    full.write_text("mpirun -np 4 osu_allreduce\n# OSU MPI Allreduce Latency Test v7.0\n# Size       Avg Latency(us)\n"
                    + "".join(f"{2 ** k}      {3 + 0.01 * 2 ** k:.2f}\n" for k in range(2, 12)))
    assert main(["fit", str(one), str(full), "-o", str(tmp_path / "m.json")]) == 0
    err = [ln for ln in capsys.readouterr().err.splitlines() if "skipped" in ln]
    assert len(err) == 1 and "-m 1:8G" in err[0] and "(2 tables alike)" in err[0], err


# -- one system per model file -------------------------------------------------------------

def test_logs_of_different_gpus_are_refused_not_pooled(tmp_path, capsys):
    from conftest import PUBLIC_LOGS

    from pybench.cli.main import main
    h100 = PUBLIC_LOGS / "h100ib_gjaion_2node16_allreduce.log"
    mi300x = PUBLIC_LOGS / "mi300x_aac10_2node16_allreduce.log"
    assert {m.device for m in load_measurements(mi300x)} == {"AMD Instinct MI300X"}
    assert {m.device for m in load_measurements(h100)} == {"NVIDIA H100 80GB HBM3"}
    with pytest.raises(UsageError, match="different GPUs.*'NVIDIA H100 80GB HBM3'.*'AMD Instinct MI300X'"):
        fit_models(load_measurements(h100) + load_measurements(mi300x))
    assert main(["fit", str(h100), str(mi300x), "-o", str(tmp_path / "m.json")]) == 2
    err = capsys.readouterr().err
    assert not (tmp_path / "m.json").exists()
    assert err.count("\n") == 1 and "fit each system's logs into a file of its own" in err


def test_one_gpu_named_by_drivers_of_other_ages_is_one_system(tmp_path):
    from conftest import PUBLIC_LOGS
    def log(name: str, rank_device: str) -> Path:
        def row(s: int) -> str:
            us = 1 + s / 2e4
            half = f"{us:8.2f}  {s / us / 1e3:6.2f}  {s / us / 1e3:6.2f}       0"
            return f"{s:>12} {s // 4:>12}  float     sum      -1  {half}  {half}"
        rows = "\n".join(row(2 ** k) for k in range(10, 24))
        path = tmp_path / name
        path.write_text("# nThread 1 nGpus 1 minBytes 1024 maxBytes 8388608 step: 2(factor) warmup iters: 5\n"
                        f"#  Rank  0 Pid 1 on node1 device  0 [0x07] {rank_device}\n"
                        f"#  Rank  1 Pid 2 on node1 device  1 [0x0a] {rank_device}\n"
                        "#       size         count      type   redop    root     time   algbw   busbw #wrong"
                        "     time   algbw   busbw #wrong\n" + rows + "\n")
        return path
    sets = load_measurements(log("old.log", "Tesla V100-SXM2-32GB")) + load_measurements(
        log("new.log", "NVIDIA V100-SXM2-32GB"))
    assert [m.device for m in sets] == ["Tesla V100-SXM2-32GB", "NVIDIA V100-SXM2-32GB"]
    assert fit_models(sets)[0].n_points == 2 * 2 * 14
    with pytest.raises(UsageError, match="different GPUs"):
        fit_models(sets + load_measurements(log("other.log", "NVIDIA A100-SXM4-40GB")))
    # pybench's own Rank lines name other hosts' GPUs "GPU"; some logs print a bus id and no name: no name
    unnamed = load_measurements(log("pybench.log", "GPU")) + load_measurements(log("bare.log", ""))
    assert [m.device for m in unnamed] == ["", ""]
    assert fit_models(sets + unnamed)[0].n_points == 4 * 2 * 14
    assert {m.device for m in load_measurements(PUBLIC_LOGS / "mi355x_aac14_2node16_pollara_allreduce.log")} == {""}


def test_in_place_times_off_the_out_of_place_ones_size_after_size_are_said_to_run_another_path():
    """RCCL's in-place all-to-all ran 1.5x its out-of-place one from 128 B to 512 KiB on an MI355X node: pooled as
    replicates of one size with no word (median APE 20%), as if it were scatter."""
    from pybench.model.logs.measurements import MeasurementSet
    size = 2.0 ** np.arange(3, 24)
    time = 20e-6 + size / 50e9
    slower = np.where((size >= 128) & (size <= 1 << 19), 1.5, 1.0)

    def model(in_place):
        return fit_model(MeasurementSet("nccl-tests", "alltoall", "nccl", 8, "intra-node", "float32", size, time,
                                        time_in_place_s=in_place))

    note = next(n for n in model(time * slower).notes if n.startswith("in-place times are"))
    assert "1.5x" in note and "at 13 consecutive sizes (128 to 512K)" in note
    assert not any("in-place times are" in n for n in model(time * 1.02).notes)
    few = np.where((size >= 128) & (size <= 512), 1.5, 1.0)  # three sizes: no code path to name
    assert not any("in-place times are" in n for n in model(time * few).notes)
    sides = np.where(np.arange(size.size) % 2, 1.5, 1 / 1.5)  # off both ways in turn: scatter
    assert not any("in-place times are" in n for n in model(time * sides).notes)


def test_a_size_whose_replicates_disagree_does_not_make_its_clean_neighbour_an_anomaly():
    """Sigma2's GH200 log: 1 B took 26.95 / 22.40 us, 2 B 97.16 / 22.58 us (one replicate disturbed), 4 B 21.8 us.
    The 2 B median, the mean of a 4x-apart pair, drew 1 B's trend: the clean 1 B was named 3.2x faster and left out.
    A disturbance only slows a run: in its neighbours' trends a disturbed size stands by its fastest replicate."""
    from pybench.model.anomalies import find_anomalies
    sizes = [1, 1, 2, 2] + [s for k in range(2, 12) for s in (2 ** k, 2 ** k)]
    times = [26.95e-6, 22.40e-6, 97.16e-6, 22.58e-6] + [t for k in range(2, 12) for t in
                                                          (21.8e-6 * (1 + k / 50), 21.9e-6 * (1 + k / 50))]
    named = [a.size_bytes for a in find_anomalies(sizes, times)]
    assert 1 not in named and named == [2]  # the disturbed size itself is still named by its median
