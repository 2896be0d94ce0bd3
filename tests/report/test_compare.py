"""pybench.report.compare and `pybench compare`: exact statistics on synthetic samples, real files end to end."""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pybench.cli.main import main as main_for_tests
from pybench.measure.results import RunResult, SizeRecord, result_json
from pybench.measure.stats import SampleStats
from pybench.report.compare import average_ranks, bootstrap_median_ratio_ci, compare_results, holm, mann_whitney_u

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"
SAME_A = FIXTURES / "compare_allreduce_a.json"
SAME_B = FIXTURES / "compare_allreduce_b.json"
FP16 = FIXTURES / "compare_allreduce_fp16.json"


def _record(size: int, samples, dtype: str = "float32") -> SizeRecord:
    st_ = SampleStats.from_samples(samples)
    algbw = size / st_.median_s / 1e9
    return SizeRecord(size_bytes=size, count=size // 4, dtype=dtype, redop="sum", root=-1, time_s=st_.median_s,
                      time_mean_s=st_.mean_s, time_min_s=st_.min_s, time_max_s=st_.max_s, time_p5_s=st_.p5_s,
                      time_p95_s=st_.p95_s, time_p99_s=st_.p99_s, time_ci_low_s=st_.ci_low_s,
                      time_ci_high_s=st_.ci_high_s, algbw_gbps=algbw, busbw_gbps=algbw, wrong=0, check_iters=2,
                      iterations=len(samples), ops_per_sample=1, precision_met=True, stop_reason="fixed",
                      wall_s=float(np.sum(samples)), samples_s=[float(s) for s in samples])


def _run(records, dtype: str = "float32", backend: str = "mpi", version: str = "0.1.0") -> RunResult:
    return RunResult(benchmark="allreduce", backend=backend, dtype=dtype, redop="sum", timing="per-op", world_size=2,
                     hosts={"h": 2}, link_class="intra-node", environment={"pybench_version": version},
                     options={"huge_pages": True}, command=["pybench"], started_at="2026-01-01T00:00:00+00:00",
                     records=list(records), finished=True)


def _noisy(rng, base_s: float, n: int = 200, cv: float = 0.03):
    """Per-operation times with a realistic right tail (lognormal body)."""
    return base_s * rng.lognormal(0.0, cv, size=n)


# -- statistics, exact -------------------------------------------------------------------

def test_average_ranks_gives_ties_their_mean_rank():
    assert average_ranks(np.array([3.0, 1.0, 3.0, 2.0, 3.0])).tolist() == [4.0, 1.0, 4.0, 2.0, 4.0]


@settings(max_examples=60, deadline=None)
@given(st.lists(st.integers(0, 6), min_size=1, max_size=15), st.lists(st.integers(0, 6), min_size=1, max_size=15))
def test_mann_whitney_u_statistic_counts_pairs(x, y):
    u, p = mann_whitney_u(x, y)
    pairs = sum(1.0 if a > b else 0.5 if a == b else 0.0 for a in x for b in y)
    assert u == pytest.approx(pairs)
    assert 0.0 <= p <= 1.0
    assert mann_whitney_u(y, x)[1] == pytest.approx(p)  # two-sided: symmetric


def test_mann_whitney_u_matches_the_normal_approximation_by_hand():
    # x entirely below y: U = 0, mean 50, variance 10*10*21/12 = 175, continuity-corrected z = 49.5/sqrt(175)
    u, p = mann_whitney_u(range(1, 11), range(11, 21))
    assert u == 0
    assert p == pytest.approx(math.erfc(49.5 / math.sqrt(175) / math.sqrt(2)), rel=1e-12)
    assert p == pytest.approx(1.8267e-4, rel=1e-3)  # scipy.stats.mannwhitneyu(..., method="asymptotic")


def test_mann_whitney_u_of_identical_constant_samples_is_not_significant():
    assert mann_whitney_u([1.0] * 5, [1.0] * 7)[1] == 1.0


def test_holm_adjustment():
    assert holm([0.01, 0.04, 0.03, 0.005]) == pytest.approx([0.03, 0.06, 0.06, 0.02])
    assert holm([]) == []
    assert holm([0.9, 0.8]) == pytest.approx([1.0, 1.0])  # 2 x 0.8 capped at 1, then monotone
    assert holm([0.01, 0.5]) == pytest.approx([0.02, 0.5])


def test_bootstrap_ci_covers_the_true_ratio_and_is_reproducible():
    rng = np.random.default_rng(1)
    a, b = _noisy(rng, 100e-6, 300), _noisy(rng, 130e-6, 300)
    lo, hi = bootstrap_median_ratio_ci(a, b)
    assert lo < 1.3 < hi and hi - lo < 0.05
    assert bootstrap_median_ratio_ci(a, b) == (lo, hi)


def test_large_sample_bootstrap_matches_the_resampling_one(monkeypatch):
    import pybench.report.compare as compare
    rng = np.random.default_rng(4)
    a, b = _noisy(rng, 1e-4, 3000, cv=0.1), _noisy(rng, 1.1e-4, 2500, cv=0.1)
    fast = bootstrap_median_ratio_ci(a, b)  # above the threshold: the median's large-sample law
    monkeypatch.setattr(compare, "_EXACT_BOOTSTRAP_MAX_N", 10**9)
    exact = bootstrap_median_ratio_ci(a, b)
    assert fast == pytest.approx(exact, rel=2e-3)


# -- comparisons of synthetic runs -----------------------------------------------------------

def test_same_distribution_is_not_significant_at_any_size():
    rng = np.random.default_rng(7)
    sizes = [2**k for k in range(10, 21)]
    base = {s: 2e-6 + s / 10e9 for s in sizes}
    a = _run(_record(s, _noisy(rng, base[s])) for s in sizes)
    b = _run(_record(s, _noisy(rng, base[s])) for s in sizes)
    comp = compare_results(a, b)
    assert [s.verdict for s in comp.sizes] == ["not significant"] * 11
    assert comp.summary().startswith("0 of 11 size(s) slower (significant), 0 faster, 11 not significant")
    assert comp.geomean_time_ratio == pytest.approx(1.0, abs=0.02)
    assert comp.regressions_over(0.0) == ()


def test_slower_and_faster_sizes_are_found_and_summarised():
    rng = np.random.default_rng(11)
    sizes = [2**k for k in range(10, 21)]
    factor = {sizes[3]: 1.30, sizes[8]: 1.25, sizes[5]: 0.70}
    a = _run(_record(s, _noisy(rng, 1e-5)) for s in sizes)
    b = _run(_record(s, _noisy(rng, 1e-5 * factor.get(s, 1.0))) for s in sizes)
    comp = compare_results(a, b)
    verdicts = {s.size_bytes: s.verdict for s in comp.sizes}
    assert verdicts[sizes[3]] == verdicts[sizes[8]] == "slower"
    assert verdicts[sizes[5]] == "faster"
    assert sum(v == "not significant" for v in verdicts.values()) == 8
    assert comp.summary().startswith("2 of 11 size(s) slower (significant), 1 faster, 8 not significant")
    assert "worst 8K x1.3" in comp.summary()
    slow = next(s for s in comp.sizes if s.size_bytes == sizes[3])
    assert slow.busbw_change == pytest.approx(1 / slow.time_ratio - 1)
    assert [s.size_bytes for s in comp.regressions_over(0.27)] == [sizes[3]]
    table = comp.table()
    assert table.splitlines()[-1] == "# " + comp.summary()


def test_a_small_shift_inside_the_noise_band_is_not_significant():
    # 3% slower with 2000 samples: the rank test alone would flag it; the 5% noise band does not.
    rng = np.random.default_rng(3)
    a = _run([_record(1 << 20, _noisy(rng, 1e-4, 2000))])
    b = _run([_record(1 << 20, _noisy(rng, 1.03e-4, 2000))])
    comp = compare_results(a, b)
    assert comp.sizes[0].p_holm < 1e-6
    assert comp.sizes[0].verdict == "not significant"
    assert compare_results(a, b, noise=0.0).sizes[0].verdict == "slower"


def test_only_size_must_match_other_differences_are_notes():
    rng = np.random.default_rng(5)
    a = _run([_record(s, _noisy(rng, 1e-5)) for s in (1024, 4096, 16384)], dtype="float32")
    b = _run([_record(s, _noisy(rng, 1e-5)) for s in (4096, 16384, 65536)], dtype="bfloat16", backend="torch",
             version="0.2.0")
    comp = compare_results(a, b)
    assert [s.size_bytes for s in comp.sizes] == [4096, 16384]
    assert comp.only_in_a == (1024,) and comp.only_in_b == (65536,)
    assert any("dtype differs" in n for n in comp.notes) and any("backend differs" in n for n in comp.notes)
    assert any("pybench version differs" in n for n in comp.notes)
    text = comp.table()
    assert "sizes only in A (not compared): 1K" in text and "sizes only in B (not compared): 64K" in text


def test_no_common_size_is_reported_not_an_error():
    rng = np.random.default_rng(2)
    comp = compare_results(_run([_record(1024, _noisy(rng, 1e-5))]), _run([_record(2048, _noisy(rng, 1e-5))]))
    assert comp.sizes == () and "nothing to compare" in " ".join(comp.notes)
    assert comp.summary().startswith("0 of 0 size(s)")


# -- the command, on real files ------------------------------------------------------------

def test_cli_same_build_reports_no_significant_change(capsys):
    assert main_for_tests(["compare", str(SAME_A), str(SAME_B), "--fail-on-regression", "10"]) == 0
    out = capsys.readouterr().out
    assert out.strip().splitlines()[-1].startswith("# 0 of 5 size(s) slower (significant)")


def test_cli_slower_configuration_is_a_regression(capsys):
    # Same collective and sizes, float16 (MPI user-defined reduction op) instead of float32.
    assert main_for_tests(["compare", str(SAME_A), str(FP16)]) == 0
    out = capsys.readouterr().out
    assert "# note: dtype differs: A float32, B float16" in out
    assert out.strip().splitlines()[-1].startswith("# 5 of 5 size(s) slower (significant)")
    assert main_for_tests(["compare", str(SAME_A), str(FP16), "--fail-on-regression", "25"]) == 1
    assert "pybench: regression: 5 size(s) significantly slower by more than 25%" in capsys.readouterr().err


def test_cli_json_output_is_written_once_without_force(tmp_path, capsys):
    out = tmp_path / "cmp.json"
    assert main_for_tests(["compare", str(SAME_A), str(FP16), "--json", str(out)]) == 0
    doc = json.loads(out.read_text())
    assert doc["schema"] == "pybench.comparison" and doc["slower"] == 5 and len(doc["sizes"]) == 5
    assert main_for_tests(["compare", str(SAME_A), str(FP16), "--json", str(out)]) == 2
    assert "already exists; pass --force" in capsys.readouterr().err
    assert main_for_tests(["compare", str(SAME_A), str(FP16), "--json", str(out), "--force"]) == 0


def test_cli_a_gate_that_compared_nothing_or_wrong_values_does_not_pass(tmp_path, capsys):
    doc = json.loads(SAME_B.read_text())
    moved = tmp_path / "moved.json"  # every size doubled: none in common with A
    for r in doc["records"]:
        r["size_bytes"] *= 2
        r["count"] *= 2
    moved.write_text(json.dumps(doc))
    assert main_for_tests(["compare", str(SAME_A), str(moved), "--fail-on-regression", "10"]) == 2
    err = capsys.readouterr().err.strip()
    assert "share no measured size" in err and "\n" not in err
    doc = json.loads(SAME_B.read_text())
    doc["records"][0]["wrong"] = 5
    wrong = tmp_path / "wrong.json"
    wrong.write_text(json.dumps(doc))
    assert main_for_tests(["compare", str(SAME_A), str(wrong), "--fail-on-regression", "10"]) == 1
    assert "1 size(s) with wrong values" in capsys.readouterr().err


@pytest.mark.parametrize("argv, message", [
    (["compare", "missing.json", str(SAME_B)], "cannot read missing.json"),
    (["compare", str(SAME_A), str(SAME_B), "--fail-on-regression", "ten"], "is not a percentage"),
    (["compare", str(SAME_A), str(SAME_B), "--noise", "2"], "must be at least 0 and below 1"),
    (["compare", str(SAME_A)], "the following arguments are required"),
])
def test_cli_bad_input_is_one_line_and_exit_2(argv, message, capsys):
    assert main_for_tests(argv) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("pybench: error: ") and message in err


def test_cli_rejects_a_malformed_result_file(tmp_path, capsys):
    rng = np.random.default_rng(0)
    doc = json.loads(result_json(_run([_record(1024, _noisy(rng, 1e-5, 20))])))
    doc["records"][0]["time_s"] = "fast"
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps(doc))
    assert main_for_tests(["compare", str(SAME_A), str(bad)]) == 2
    err = capsys.readouterr().err
    assert "bad.json" in err and "time_s" in err and err.count("\n") == 1
