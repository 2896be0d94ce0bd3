"""Models: prediction (incl. other world sizes), report, JSON persistence, CLI glue."""

from __future__ import annotations

import json
import math
import re
from pathlib import Path

import numpy as np
import pytest

from pybench.cli.main import main as main_for_tests
from pybench.errors import FileFormatError, NotDetermined, UsageError
from pybench.io.formats import MODEL
from pybench.model.build import fit_model, fit_models
from pybench.model.calibration import load_calibration
from pybench.model.logs import MeasurementSet
from pybench.model.model_files import load_model, load_models, save_models
from pybench.model.system import load_system

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"
from conftest import PUBLIC_LOGS, SHARED_DATA  # noqa: E402  (the repo's copies of ../shared/data)

SIZES = 2 ** np.arange(10, 31)


def _ring_allreduce(n, p, alpha, bw):
    return 2 * (p - 1) * alpha + 2 * (p - 1) / p * n / bw


def _ring_allgather(n, p, alpha, bw):
    return (p - 1) * alpha + (p - 1) / p * n / bw


_TIMES = {"ring_allreduce": _ring_allreduce, "ring_allgather": _ring_allgather,
          "tree_allreduce": lambda n, p, alpha, bw: 2 * np.ceil(np.log2(p)) * alpha + 2 * (p - 1) / p * n / bw}


def _set(world=8, alpha=20e-6, bw=100e9, algo="ring_allreduce", collective="allreduce",
         link="intra-node", sizes=SIZES):
    t = _TIMES[algo](sizes, world, alpha, bw)
    return MeasurementSet("pybench", collective, "nccl", world, link, "float32", sizes, t)


# -- prediction ---------------------------------------------------------------------------

def test_fit_and_predict_at_fitted_and_other_world():
    model = fit_model(_set(world=8))
    assert len(model.segments) == 1
    p = model.predict(1 << 24)
    truth8 = _ring_allreduce(1 << 24, 8, 20e-6, 100e9)
    assert p.time_s == pytest.approx(truth8, rel=1e-9)
    assert p.time_low_s <= p.time_s <= p.time_high_s
    # Issue 24: a curve alone never extrapolates silently; it names what is missing.
    with pytest.raises(UsageError, match="holds no topology model"):
        model.predict(1 << 24, world=32)
    # fit_models attaches the topology model. One GPU count cannot show that the node is switched, so
    # without its description another count is not determined; on a described switch it answers.
    (with_topology,) = fit_models([_set(world=8)])
    with pytest.raises(UsageError, match=r"not determined by these inputs: one GPU count \(8\).*--system"):
        with_topology.predict(1 << 24, world=4)
    (switched,) = fit_models([_set(world=8)], system=load_system("dgx-h100"))
    p4 = switched.predict(1 << 24, world=4)
    truth4 = _ring_allreduce(1 << 24, 4, 20e-6, 100e9)
    assert p4.world == 4 and p4.provenance == "another GPU count"
    assert p4.time_low_s <= truth4 <= p4.time_high_s


def test_predict_is_vectorised_and_band_contains_estimate():
    rng = np.random.default_rng(3)
    base = _set()
    noisy = MeasurementSet("pybench", "allreduce", "nccl", 8, "intra-node", "float32", base.size_bytes,
                           base.time_s * (1 + 0.02 * rng.standard_normal(len(base))))
    (model,) = fit_models([noisy], system=load_system("dgx-h100"))
    sizes = np.array([1024, 1 << 20, 1 << 30])
    p = model.predict(sizes, world=4)
    assert p.time_s.shape == (3,)
    assert np.all(p.time_low_s < p.time_s) and np.all(p.time_s < p.time_high_s)
    single = model.predict(1 << 20, world=4)
    assert single.time_s == pytest.approx(p.time_s[1])


def test_predict_errors():
    model = fit_model(_set())
    with pytest.raises(UsageError):
        model.predict(-5)
    with pytest.raises(UsageError):
        model.predict(1024, world=0)
    unknown = fit_model(MeasurementSet("x", "allreduce", "nccl", None, None, "float32", SIZES, 1e-5 + SIZES / 1e10))
    with pytest.raises(UsageError, match="no recorded world size"):
        unknown.predict(1024, world=4)


def test_report_mentions_everything():
    model = fit_model(_set())
    text = model.report()
    for fragment in ("allreduce", "nccl", "intra-node", "8 ranks", "other layouts: none",
                     "95% CI", "median APE", "one line instead"):
        assert fragment in text


def test_fit_models_selects_algorithm_across_worlds():
    sets = [_set(world=w, algo="tree_allreduce") for w in (4, 8, 16)]
    models = fit_models(sets)
    assert [m.world_size for m in models] == [4, 8, 16]
    assert {m.topology.algorithm for m in models} == {"tree"}
    p = models[0].predict(1 << 26, world=64, nodes=1)  # more ranks than any named node holds: one node, said
    assert p.time_s == pytest.approx(_TIMES["tree_allreduce"](1 << 26, 64, 20e-6, 100e9), rel=1e-3)
    with pytest.raises(UsageError, match="64 ranks of the allreduce model: more than the 16 GPUs"):
        models[0].predict(1 << 26, world=64)  # not silently 64 GPUs in one node


def test_fit_model_rejects_mixed_groups_and_single_size():
    with pytest.raises(UsageError, match="one collective"):
        fit_model([_set(world=4), _set(world=8)])
    one = MeasurementSet("x", "allgather", "nccl", 8, None, "float32", [1 << 30], [1e-2])
    with pytest.raises(UsageError, match="at least 2"):
        fit_model(one)


# -- persistence --------------------------------------------------------------------------

def test_save_load_round_trip(tmp_path):
    rng = np.random.default_rng(5)
    base = _set()
    m_set = MeasurementSet("pybench", "allreduce", "nccl", 8, "intra-node", "float32",
                           base.size_bytes, base.time_s * (1 + 0.03 * rng.standard_normal(len(base))))
    (m,) = fit_models([m_set])
    path = tmp_path / "model.json"
    m.save(path)
    back = load_model(path)
    assert back == m  # frozen dataclass equality, field by field
    assert back.topology == m.topology  # the topology model travels with it
    # the description given on reading prices as the one given to the fit
    (m,) = fit_models([m_set], system=load_system("dgx-h100"))
    back = load_model(path, system="dgx-h100")
    assert back.topology == m.topology
    sizes = np.array([4096, 1 << 22, 1 << 29])
    for world in (None, 2, 4):
        a, b = m.predict(sizes, world=world), back.predict(sizes, world=world)
        assert np.array_equal(a.time_s, b.time_s) and np.array_equal(a.time_high_s, b.time_high_s)
    doc = json.loads(path.read_text())
    assert doc["schema"] == MODEL.schema and doc["schema_version"] == MODEL.version == 1
    assert not [p for p in tmp_path.iterdir() if p.name != "model.json"]  # no temp file left


def test_a_model_file_records_the_t_quantile_so_reading_and_predicting_need_no_scipy(tmp_path):
    import subprocess
    import sys
    (m,) = fit_models([_set()])
    path = tmp_path / "model.json"
    m.save(path)
    doc = json.loads(path.read_text())
    seg = doc["models"][0]["segments"][0]
    assert seg["t"] == pytest.approx(m.segments[0].t) and seg["t"] > 1.96
    probe = (f"import sys; from pybench.model.model_files import load_model; "
             f"load_model({str(path)!r}).predict([4096, 1 << 30], band='confidence'); "
             f"print('scipy.special' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "False"
    # a file without it (older pybench) computes it; a nonsense one is refused with the remedy
    del seg["t"]
    path.write_text(json.dumps(doc))
    assert load_model(path).segments[0].t == pytest.approx(m.segments[0].t)
    seg["t"] = 0.5
    path.write_text(json.dumps(doc))
    with pytest.raises(FileFormatError, match="t quantile is 0.5; refit"):
        load_model(path)


def test_save_refuses_to_overwrite(tmp_path):
    m = fit_model(_set())
    path = tmp_path / "model.json"
    m.save(path)
    before = path.read_text()
    with pytest.raises(UsageError, match="already exists"):
        m.save(path)
    assert path.read_text() == before
    save_models([m, fit_model(_set(world=4))], path, overwrite=True)
    assert len(load_models(path)) == 2


def test_several_models_in_one_file(tmp_path):
    path = tmp_path / "models.json"
    save_models([fit_model(_set(world=4)), fit_model(_set(world=8, link="inter-node"))], path)
    with pytest.raises(UsageError, match="2 models match"):
        load_model(path)
    assert load_model(path, world_size=8).link_class == "inter-node"
    assert load_model(path, link_class="intra-node").world_size == 4
    with pytest.raises(UsageError, match="no model matches"):
        load_model(path, collective="broadcast")


def test_old_v1_fixture_still_loads_and_predicts_the_same():
    # Written by pybench.model schema v1 from tests/fixtures/nccl_tests_allreduce_8xa100.json.
    m = load_model(FIXTURES / "model_v1_allreduce.json")
    assert (m.collective, m.backend, m.link_class, m.world_size, m.algorithm) == \
        ("allreduce", "nccl", "intra-node", 8, "ring_allreduce")  # what v1 recorded, kept as read
    assert len(m.segments) == 2
    sizes = [4096, 1 << 20, 1 << 28]
    p = m.predict(sizes)
    np.testing.assert_allclose(p.time_s, [1.278334428808368e-05, 4.135444036862296e-05,
                                          0.002287611595458252], rtol=1e-12)
    # the band is log-symmetric (pybench.model.calibration's one scheme): t / (1 + h/t) below, t + h above
    np.testing.assert_allclose(p.time_low_s, [1.1534536989244422e-05, 3.8124148046906924e-05,
                                              0.0021726998131836673], rtol=1e-9)
    np.testing.assert_allclose(p.time_high_s, [1.4167355945024874e-05, 4.4858438176711945e-05,
                                               0.0024086009396792167], rtol=1e-9)
    # It holds no topology model: other world sizes are refused in one line saying how to refit.
    with pytest.raises(UsageError, match="holds no topology model.*pybench fit"):
        m.predict(sizes, world=16)


@pytest.mark.parametrize("content, fragment", [
    ("not json at all", "is not JSON"),
    ('{"schema": "pybench.result", "schema_version": 1}', "is not 'pybench.model'"),
    ('{"schema": "pybench.model", "schema_version": 2, "models": []}', "newer"),
    ('{"schema": "pybench.model", "schema_version": "1", "models": []}', "positive integer"),
    ('{"schema": "pybench.model", "schema_version": 1, "models": []}', "models: List should have at least 1 item"),
    ('{"schema": "pybench.model", "schema_version": 1, "models": [{"collective": "allreduce"}]}',
     "models[0]"),
    ('[1, 2, 3]', "a JSON list, expected an object"),
])
def test_bad_model_files(tmp_path, content, fragment):
    path = tmp_path / "bad.json"
    path.write_text(content)
    with pytest.raises(FileFormatError) as info:
        load_models(path)
    assert fragment in str(info.value) and "\n" not in str(info.value) and str(path) in str(info.value)


@pytest.mark.parametrize("name", ["public_logs/h100ib_gjaion_2node16_allreduce.log", "nccl_tests_allreduce_8xa100.json",
                                  "compare_allreduce_a.json"])
def test_a_measurement_given_as_a_model_says_to_fit_it_first(tmp_path, capsys, name):
    from pybench.cli.main import main
    with pytest.raises(FileFormatError, match=r"holds measurements, not a fitted model: fit it first \(`pybench fit "):
        load_models(FIXTURES / name)
    assert main(["predict", str(FIXTURES / name), "--sizes", "1M"]) == 2
    assert capsys.readouterr().err.count("\n") == 1


def test_unphysical_old_model_is_refused_with_the_remedy(tmp_path):
    # A file written before the fit was constrained, with the negative latency that
    # predicted -10015 us at 16 MiB on 8 ranks.
    doc = json.loads((FIXTURES / "model_v1_allreduce.json").read_text())
    doc["models"][0]["segments"][1]["alpha_s"] = -2151e-6
    path = tmp_path / "old.json"
    path.write_text(json.dumps(doc))
    with pytest.raises(FileFormatError, match="unphysical.*pybench fit") as info:
        load_models(path)
    assert "\n" not in str(info.value)


def test_cpu_run_fit_and_predict_positive_at_other_worlds(tmp_path, capsys):
    # The reported failure: `pybench fit` on a CPU run, then `predict --world 8` printed
    # negative times with "low 0.00". Now every piece is physical and so is every number.
    out = tmp_path / "m.json"
    assert main_for_tests(["fit", str(FIXTURES / "cpu_mpi2_allreduce.json"), "-o", str(out)]) == 0
    report = capsys.readouterr().out
    assert "-" not in report.split("95% CI")[-1].split("whole fit")[0].replace("..", "")
    model = load_model(out)
    for seg in model.segments:
        assert seg.alpha_s >= 0 and seg.inv_bw_s_per_byte > 0
    pj = tmp_path / "pred.json"
    for world in ("2", "8", "64"):
        assert main_for_tests(["predict", str(out), "--sizes", "1K:1G", "--world", world,
                               "--json", str(pj), "--force"]) == 0
        table = capsys.readouterr().out
        assert "n/a" not in table and "-" not in table.replace("# ", "").split("note", 1)[1]
        for r in json.loads(pj.read_text())["records"]:
            assert r["time_s"] > 0 and r["algbw_gbps"] > 0
            assert 0 <= r["time_low_s"] <= r["time_s"] <= r["time_high_s"] and math.isfinite(r["time_high_s"])
            # Clipped at 0 only where the band is wider than the time, and then it says so.
            assert r["band_reaches_zero"] == (r["time_low_s"] == 0)
        if any(r["band_reaches_zero"] for r in json.loads(pj.read_text())["records"]):
            assert "band reaches 0" in table


def test_report_and_json_say_when_an_interval_is_unbounded(tmp_path):
    sizes = 2 ** np.arange(10, 16)
    flat = MeasurementSet("x", "allreduce", "nccl", 8, None, "float32", sizes,
                          [250e-6, 248e-6, 246e-6, 245e-6, 243e-6, 240e-6])
    (m,) = fit_models([flat])
    assert m.segments[0].held == "inv_bw"
    text = m.report()
    assert "inf" in text and "flat" in text and "unbounded" in text
    path = tmp_path / "flat.json"
    m.save(path)
    seg = json.loads(path.read_text())["models"][0]["segments"][0]
    assert seg["held"] == "inv_bw" and seg["bw_ci_Bps"][1] is None
    assert any("unbounded" in n for n in seg["ci_notes"])
    assert load_model(path) == m
    p = m.predict([1.0, 1e6])
    assert np.all(p.time_s > 0) and np.all(np.isfinite(p.time_high_s))
    assert m.predict(1e12).time_s > 0  # links unknown: not known to cross nodes, where the 16M rule holds
    # Its hosts are unknown, so no topology model was fitted: 64 ranks are refused, not guessed.
    with pytest.raises(UsageError, match="holds no topology model"):
        m.predict([1.0, 1e12], world=64)


def test_garbage_bytes_and_pickle_are_refused(tmp_path):
    import pickle
    path = tmp_path / "model.pkl"
    path.write_bytes(pickle.dumps({"schema": "pybench.model"}))
    with pytest.raises(FileFormatError):
        load_models(path)


# -- CLI glue -------------------------------------------------------------------------------

def test_cli_fit_and_predict(tmp_path, capsys):
    out = tmp_path / "m.json"
    src = FIXTURES / "nccl_tests_allreduce_8xa100.json"
    assert main_for_tests(["fit", str(src), str(FIXTURES / "osu_latency_f.txt"), "-o", str(out)]) == 0
    text = capsys.readouterr().out
    assert "allreduce / nccl / intra-node / 8 ranks" in text and "p2p_latency" in text
    assert len(load_models(out)) == 2
    assert main_for_tests(["fit", str(src), "-o", str(out)]) == 2
    assert "--force" in capsys.readouterr().err
    assert main_for_tests(["fit", str(src), "-o", str(out), "--force"]) == 0
    capsys.readouterr()

    pj = tmp_path / "pred.json"
    assert main_for_tests(["predict", str(out), "--sizes", "1M:1G", "--world", "16", "--nodes", "2",
                           "--system", "dgx-a100", "--json", str(pj)]) == 0
    table = capsys.readouterr().out
    assert "1M" in table and "1G" in table and "busbw" in table
    doc = json.loads(pj.read_text())
    recs = doc["records"]
    assert len(recs) == 11
    r = recs[0]
    for key in ("collective", "size_bytes", "world", "time_s", "time_low_s", "time_high_s"):
        assert key in r
    assert (r["collective"], r["size_bytes"], r["world"]) == ("allreduce", 1 << 20, 16)
    assert r["busbw_gbps"] == pytest.approx(r["algbw_gbps"] * 2 * 15 / 16)
    assert r["time_low_s"] <= r["time_s"] <= r["time_high_s"]
    assert "note: other GPU counts in one node: not determined by these inputs" in text  # fit says so too
    # another GPU count of a one-count fit, no description: the row says so, and the run is not an error
    assert main_for_tests(["predict", str(out), "--sizes", "1M", "--world", "4", "--json", str(pj), "--force"]) == 0
    assert "not determined by these inputs: one GPU count (8)" in capsys.readouterr().out
    (r,) = json.loads(pj.read_text())["records"]
    assert r["determined"] is False and r["time_s"] is None and "--system" in r["undetermined"]


def test_cli_errors(tmp_path, capsys):
    """The real entry point: each error is one line on stderr and exit 2."""
    def one_line_error(argv):
        assert main_for_tests(argv) == 2
        lines = capsys.readouterr().err.strip().splitlines()
        assert len(lines) == 1 and lines[0].startswith("pybench: error: "), lines
        return lines[0]

    assert "missing.json" in one_line_error(["predict", str(tmp_path / "missing.json"), "--sizes", "1M"])
    out = tmp_path / "m.json"
    fit_model(_set()).save(out)
    one_line_error(["predict", str(out), "--sizes", "1M:1K"])
    assert "no model matches" in one_line_error(["predict", str(out), "--sizes", "1M", "--collective", "broadcast"])
    # an unknown --collective is named before the log is read (it said "give --world too" with --nodes)
    log = SHARED_DATA / "nccl-tests" / "h100_p5_2node_16gpu_efa_allreduce_srunprefix.txt"
    assert "--collective bogus: pybench fits allreduce" in one_line_error(
        ["fit", str(log), "--nodes", "2", "--collective", "bogus", "-o", str(tmp_path / "b.json")])


@pytest.mark.parametrize("key", ["schema", "results"])
def test_cli_fit_deeply_nested_json_is_one_line_exit_2(tmp_path, capsys, key):
    # Issue 12: nesting past the parser's recursion limit under the key that routes the file
    # (pybench result / nccl-tests -J) printed a RecursionError traceback and exited 1.
    path = tmp_path / f"deep_{key}.json"
    path.write_text('{"' + key + '": ' + "[" * 100_000 + "]" * 100_000 + "}")
    assert main_for_tests(["fit", str(path), "-o", str(tmp_path / "m.json")]) == 2
    lines = capsys.readouterr().err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("pybench: error: ") and str(path) in lines[0], lines
    assert "nested" in lines[0] and not (tmp_path / "m.json").exists()
    # Nested deeper than any pybench file but within the recursion limit: refused the same way.
    path.write_text('{"' + key + '": ' + "[" * 500 + "]" * 500 + "}")
    assert main_for_tests(["fit", str(path), "-o", str(tmp_path / "m.json")]) == 2
    assert len(capsys.readouterr().err.strip().splitlines()) == 1


@pytest.mark.skipif(not SHARED_DATA.is_dir(), reason=f"shared logs not found at {SHARED_DATA}")
def test_cli_fit_real_logs_skips_single_size_log(tmp_path, capsys):
    # The Polaris node-count sweeps have tests of their own (test_node_scaling.py).
    logs = sorted(str(p) for p in (SHARED_DATA / "nccl-tests").glob("*.txt") if not p.name.startswith("polaris_"))
    out = tmp_path / "real.json"
    # four systems' logs (A100, B200, H100, V100) are not one model file's
    assert main_for_tests(["fit", *logs, "-o", str(out)]) == 2
    assert "the logs name different GPUs" in capsys.readouterr().err
    models = []
    for k, log in enumerate(logs):
        code = main_for_tests(["fit", log, "-o", str(tmp_path / f"{k}.json")])
        err = capsys.readouterr().err
        if "v100_dgx1" in log:  # its one table of one size: skipped, and nothing is left
            assert code == 2 and "skipped" in err and "no input has enough sizes" in err
        else:
            assert code == 0
            models += load_models(tmp_path / f"{k}.json")
    assert sorted((m.collective, m.world_size) for m in models) == \
        [("allgather", 16), ("allreduce", 16), ("allreduce", 16)]
    # Real sweeps need several regimes: the DESIGN's point about one line.
    assert all(len(m.segments) >= 3 for m in models)
    assert all(m.single_line_max_ape > 2 * m.max_ape for m in models)


def test_prediction_band_is_wider_and_needs_residual_scale():
    rng = np.random.default_rng(11)
    base = _set()
    m = fit_model(MeasurementSet("pybench", "allreduce", "nccl", 8, "intra-node", "float32", base.size_bytes,
                                 base.time_s * (1 + 0.05 * rng.standard_normal(len(base)))))
    conf = m.predict(1 << 24, band="confidence")
    pred = m.predict(1 << 24, band="prediction")
    assert pred.time_s == conf.time_s
    assert pred.time_high_s - pred.time_low_s > 2 * (conf.time_high_s - conf.time_low_s)
    assert 0.03 < m.segments[0].rel_sigma < 0.07   # the 5% noise that was put in
    with pytest.raises(UsageError, match="band"):
        m.predict(1 << 24, band="wide")
    # The v1 fixture predates rel_sigma: confidence bands work, prediction bands say why not.
    old = load_model(FIXTURES / "model_v1_allreduce.json")
    with pytest.raises(UsageError, match="refit"):
        old.predict(1 << 20, band="prediction")
    # with no band asked, the CLI's records say the confidence band, as Python's provenance does
    from pybench.cli.prediction_table import prediction_records
    (record,) = prediction_records([old], [1 << 20])
    assert record["band"] == "confidence" and "the file predates prediction bands" in record["provenance"]
    assert "the file predates prediction bands" in old.predict(1 << 20).provenance


def test_prediction_band_holds_leave_one_out_errors_and_older_files_load_without_them(tmp_path):
    # Two regimes and 2% noise: the band of a size nobody measured holds the errors the fit made
    # on the measured sizes around it when they were left out (pybench.model.jackknife).
    rng = np.random.default_rng(3)
    t = np.where(SIZES < 2 ** 20, 10e-6 + SIZES / 5e9, 40e-6 + SIZES / 100e9)
    m = fit_model(MeasurementSet("pybench", "allreduce", "nccl", 8, "intra-node", "float32", SIZES,
                                 t * (1 + 0.02 * rng.standard_normal(SIZES.size))), anomaly_ratio=None)
    assert sum(len(s.loo_errors) for s in m.segments) == SIZES.size
    path = tmp_path / "model.json"
    m.save(path)
    doc = json.loads(path.read_text())
    assert all(len(s["loo_errors"]) == s_obj for s, s_obj in
               zip(doc["models"][0]["segments"], [len(s.loo_errors) for s in m.segments]))
    # A file written before the errors were recorded: same times and confidence band, a
    # prediction band from the pieces' own scatter only (never wider).
    for seg in doc["models"][0]["segments"]:
        del seg["loo_errors"]
    old_path = tmp_path / "old.json"
    old_path.write_text(json.dumps(doc))
    old = load_model(old_path)
    assert all(s.loo_errors == () for s in old.segments)
    between = np.sqrt(SIZES[:-1] * SIZES[1:])
    for world in (None, 8):  # other worlds are the topology model's, which these errors do not touch
        new_p = m.predict(between, world=world, band="prediction")
        old_p = old.predict(between, world=world, band="prediction")
        np.testing.assert_array_equal(new_p.time_s, old_p.time_s)
        assert np.all(new_p.time_high_s >= old_p.time_high_s) and np.any(new_p.time_high_s > old_p.time_high_s)
        np.testing.assert_array_equal(m.predict(between, world=world, band="confidence").time_high_s,
                                      old.predict(between, world=world, band="confidence").time_high_s)
    errors = {size: abs(err) for s in m.segments for size, err in s.loo_errors}
    p = m.predict(between, band="prediction")
    for i in range(between.size):
        around = max(errors[int(SIZES[i])], errors[int(SIZES[i + 1])])
        assert p.time_high_s[i] >= p.time_s[i] * (1 + around) * (1 - 1e-12)


# -- anomalies and real log variants through `pybench fit` (issue 13) -----------------------------

def test_fit_names_a_size_far_off_its_neighbours_in_one_line(tmp_path, capsys):
    out = tmp_path / "m.json"
    src = FIXTURES / "log_nccl_tests_allreduce_spike_4m.txt"   # 4 MiB alone runs 1.7x slow
    assert main_for_tests(["fit", str(src), "-o", str(out)]) == 0
    captured = capsys.readouterr()
    lines = [ln for ln in captured.err.splitlines() if "neighbours' trend" in ln]
    assert len(lines) == 1, captured.err
    assert re.search(r"size 4M is 1\.[5-8]\dx slower", lines[0]) and "protocol or algorithm switch" in lines[0]
    assert str(src) in lines[0] and "left out of the fit" in lines[0]
    assert "anomaly, left out of the fit: size 4M" in captured.out
    model = load_model(out)
    assert [a.size_bytes for a in model.anomalies] == [4 << 20]
    assert 1.5 < model.anomalies[0].ratio < 1.9   # 1.7 x the 1%-noisy times, against the neighbours' trend
    # Not absorbed: the fit follows the other sizes (1% noise), so the trend at 4 MiB is kept.
    assert model.max_ape < 5
    assert model.predict(4 << 20).time_s == pytest.approx(18e-6 + (4 << 20) / 100e9, rel=0.05)
    # Anomalies survive the model file, and predict says where the measurement was off the trend.
    assert load_models(out)[0].anomalies == model.anomalies
    pj = tmp_path / "p.json"
    assert main_for_tests(["predict", str(out), "--sizes", "2M,4M,8M", "--json", str(pj)]) == 0
    table = capsys.readouterr().out.splitlines()
    assert [("anomaly" in ln) for ln in table if ln.lstrip().startswith(("2M", "4M", "8M"))] == [False, True, False]
    ratios = [r["measured_anomaly_ratio"] for r in json.loads(pj.read_text())["records"]]
    assert ratios[0] is None and ratios[2] is None and ratios[1] == pytest.approx(model.anomalies[0].ratio)


def test_clean_sweeps_name_no_anomalies():
    sizes = 2 ** np.arange(10, 31)
    rng = np.random.default_rng(5)
    noisy = _set(sizes=sizes)
    m = fit_model(MeasurementSet("pybench", "allreduce", "nccl", 8, "intra-node", "float32", sizes,
                                 noisy.time_s * (1 + 0.03 * rng.standard_normal(sizes.size))))
    assert m.anomalies == ()


def test_fit_of_pybench_own_stdout_is_labelled_with_its_backend_and_link(tmp_path, capsys):
    out = tmp_path / "m.json"
    assert main_for_tests(["fit", str(FIXTURES / "log_pybench_stdout_mpi2_allreduce.txt"), "-o", str(out)]) == 0
    assert "allreduce / mpi / intra-node / 2 ranks" in capsys.readouterr().out
    (model,) = load_models(out)
    assert (model.backend, model.link_class, model.world_size) == ("mpi", "intra-node", 2)


def test_fit_vtrain_table_names_at_most_two_anomalies(tmp_path, capsys):
    out = tmp_path / "m.json"
    assert main_for_tests(["fit", str(SHARED_DATA / "vtrain" / "a100_nvswitch_allreduce_8gpu.csv"), "-o", str(out)]) == 0
    (model,) = load_models(out)
    assert (model.collective, model.world_size, model.link_class) == ("allreduce", 8, "intra-node")
    assert len(model.anomalies) <= 2 and len(model.segments) <= 10
    assert model.median_ape < 2.0
    assert capsys.readouterr().err.count("neighbours' trend") == len(model.anomalies)


def test_two_measured_times_are_refused_in_one_line_not_written_as_nan():
    """Two points fit a line exactly and leave no interval: fit_model refuses them in one line, and
    `fit` skips such a set with a warning (docs/running.md fits a 2-size result beside a real log)."""
    two = MeasurementSet("pybench", "reducescatter", "mpi", 2, "intra-node", "float32",
                         np.array([1024, 1 << 20]), np.array([20e-6, 120e-6]))
    with pytest.raises(UsageError, match="2 measured times; a model needs at least 3"):
        fit_models([two])


def _osu_allreduce(path: Path, ranks: int) -> Path:
    """An osu_allreduce log (OSU prints neither the rank count nor the hosts) of a tree-like allreduce."""
    rows = [f"{s:<12d}{5 + 3 * math.log2(ranks) + 2 * (ranks - 1) / ranks * s / 10e3:16.2f}"
            for s in (4 << k for k in range(25))]
    path.write_text("# OSU MPI Allreduce Latency Test v7.3\n# Datatype: MPI_FLOAT.\n# Size       Avg Latency(us)\n"
                    + "\n".join(rows) + "\n")
    return path


def test_fit_takes_the_world_and_nodes_of_each_log_that_does_not_say_them(tmp_path, capsys):
    """OSU logs of a 2-node and a 4-node run: --world and --nodes take one value per input, in order, so one
    fit spans both node counts and predicts a third."""
    logs = [str(_osu_allreduce(tmp_path / f"osu_{n}n.txt", 8 * n)) for n in (2, 4)]
    out = tmp_path / "osu.json"
    assert main_for_tests(["fit", *logs, "--world", "16,32", "--nodes", "2,4", "-o", str(out)]) == 0
    assert "fitted at 16 ranks on 2 nodes, 32 ranks on 4 nodes" in capsys.readouterr().out
    p = load_model(out, world_size=16).predict(1 << 20, world=64, nodes=8)
    truth = (5 + 3 * 6 + 2 * 63 / 64 * (1 << 20) / 10e3) * 1e-6
    assert p.provenance == "another node count" and p.time_low_s <= truth <= p.time_high_s
    assert p.time_s == pytest.approx(truth, rel=0.05)
    # a measured layout answers from its own sweep whichever sweep was loaded, as `pybench predict` does (the
    # 16-rank curve asked for 32 ranks on 4 nodes answered from the topology model, 52% off on an H100 cluster)
    own = load_model(out, world_size=32).predict(1 << 20)
    via = load_model(out, world_size=16).predict(1 << 20, world=32, nodes=4)
    assert (via.time_s, via.time_low_s, via.time_high_s, via.provenance) == \
        (own.time_s, own.time_low_s, own.time_high_s, own.provenance)
    for bad, said in ((["--world", "16,32,64", "--nodes", "2"], "--world gives 3 values for 2 inputs"),
                      (["--world", "16", "--nodes", "2,0"], "--nodes"), (["--world", "16,x"], "--world")):
        assert main_for_tests(["fit", *logs, *bad, "-o", str(tmp_path / "x.json")]) == 2
        err = capsys.readouterr().err.strip().splitlines()
        assert len(err) == 1 and said in err[0], err


def test_beyond_the_measured_sizes_the_measured_curves_band_widens_with_the_distance():
    # A sweep that ends while latency rules (4 B .. 8 KiB, flat) has no bandwidth to go on: at 1 GiB its
    # band must not stay the few percent it has at the measured sizes.
    sizes = np.array([4 << k for k in range(12)])
    ms = MeasurementSet(source="osu", collective="allreduce", backend="mpi", world_size=8, link_class=None,
                        dtype="byte", size_bytes=sizes, time_s=5e-6 * (1 + 0.003 * np.sin(np.arange(12))),
                        path="flat.txt")
    model = fit_model(ms)
    inside = model.predict(1024.0)
    far = model.predict(float(1 << 30))
    assert inside.time_high_s / inside.time_low_s < 1.1
    assert far.time_high_s / far.time_low_s > 100 and far.time_low_s < 5e-6 < far.time_high_s
    assert model.predict(float(1 << 14)).time_high_s / model.predict(float(1 << 14)).time_low_s < \
        far.time_high_s / far.time_low_s  # nearer, narrower


def test_a_curve_of_another_element_type_than_the_topology_models_refuses_other_layouts(tmp_path):
    # The topology model is fitted on the float32 sweeps (types are not pooled): the byte curve must not
    # borrow it silently at 4 nodes, where byte runs 1.3x slower than float32 at the measured 2.
    from pybench.model.build import fit_model_file

    sizes = np.array([1 << k for k in range(10, 25)])
    sets = [MeasurementSet(source="nccl-tests", collective="allreduce", backend="nccl", world_size=16,
                           link_class="inter-node",
                           dtype=dtype, size_bytes=sizes, time_s=slow * (20e-6 + sizes / 2e9), path=f"{dtype}.txt",
                           notes=("16 ranks on 2 host(s) per --nodes",))
            for dtype, slow in (("float32", 1.0), ("byte", 1.3))]
    models, topology, _ = fit_model_file(sets)
    path = tmp_path / "m.json"
    save_models(models, path, topology=topology)
    for loaded in (models, load_models(path)):
        by_type = {m.dtype: m for m in loaded}
        assert by_type["float32"].predict(1 << 20, world=32, nodes=4).time_s > 0
        with pytest.raises(UsageError, match="fitted on the float32 sweeps only"):
            by_type["byte"].predict(1 << 20, world=32, nodes=4)
        assert by_type["byte"].predict(1 << 20).time_s > 0  # its own layout still answers
    assert sum("fitted on the float32 sweeps only" in n for n in load_models(path)[1].notes) == 1


def test_python_and_the_cli_say_alike_what_a_prediction_at_the_fitted_layout_rests_on(tmp_path):
    log = SHARED_DATA / "nccl-tests" / "a100_2node_16gpu_oci_roce_allreduce.txt"
    path, out = tmp_path / "m.json", tmp_path / "p.json"
    assert main_for_tests(["fit", str(log), "-o", str(path)]) == 0
    sizes = [1 << 20, 3 << 20, 1 << 40]
    assert main_for_tests(["predict", str(path), "--sizes", ",".join(map(str, sizes)), "--json", str(out)]) == 0
    said = [r["provenance"] for r in json.loads(out.read_text())["records"]]
    model = load_model(path)
    assert said == [model.predict(s).provenance for s in sizes] == \
        ["measured", "between measured sizes", "fitted sweep, beyond the measured sizes"]
    assert model.predict(sizes).provenance == "; ".join(sorted(set(said)))


def test_a_measured_layout_with_a_system_answers_from_its_sweeps_in_the_cli_and_in_python(tmp_path, capsys):
    log = SHARED_DATA / "nccl-tests" / "a100_2node_16gpu_oci_roce_allreduce.txt"
    path, out = tmp_path / "m.json", tmp_path / "p.json"
    assert main_for_tests(["fit", str(log), "-o", str(path)]) == 0
    capsys.readouterr()
    assert main_for_tests(["predict", str(path), "--sizes", "1G", "--world", "16", "--nodes", "2",
                           "--system", "oci-bm-gpu4.8", "--json", str(out)]) == 0
    assert "were measured, and their sweeps answer" in capsys.readouterr().err
    (record,) = json.loads(out.read_text())["records"]
    python = load_model(path, system="oci-bm-gpu4.8").predict(1 << 30, world=16, nodes=2)
    assert record["provenance"] == python.provenance == "measured"
    assert record["time_s"] == pytest.approx(python.time_s, rel=1e-12)
    # nodes= without world= is a question about another layout: refused, not answered at the fitted one
    with pytest.raises(UsageError, match="nodes=4 needs world="):
        load_model(path).predict(1 << 20, nodes=4)
    assert load_model(path).predict(1 << 20, nodes=2).provenance == "measured"


def test_a_model_file_whose_fitted_layout_is_not_whole_nodes_is_refused(tmp_path):
    log = SHARED_DATA / "nccl-tests" / "a100_2node_16gpu_oci_roce_allreduce.txt"
    path = tmp_path / "m.json"
    assert main_for_tests(["fit", str(log), "-o", str(path)]) == 0
    doc = json.loads(path.read_text())
    doc["topology"][0]["fitted"] = [[16, 3]]
    path.write_text(json.dumps(doc))
    with pytest.raises(FileFormatError, match=r"fitted layout \[16, 3\] is not whole nodes"):
        load_models(path)


def test_an_empty_or_dash_json_path_and_a_size_as_text_are_one_line_errors(tmp_path, capsys):
    log = SHARED_DATA / "nccl-tests" / "a100_2node_16gpu_oci_roce_allreduce.txt"
    path = tmp_path / "m.json"
    assert main_for_tests(["fit", str(log), "-o", str(path)]) == 0
    capsys.readouterr()
    for bad, said in (("", "needs a file name"), ("-", "give a file name")):
        assert main_for_tests(["predict", str(path), "--sizes", "1M", "--json", bad]) == 2
        err = capsys.readouterr().err.strip()
        assert said in err and "\n" not in err
    with pytest.raises(UsageError, match="numbers of bytes, got '1M'"):
        load_model(path).predict("1M")


def test_sweeps_sharing_one_topology_model_are_told_apart_by_their_world(tmp_path):
    """A fit at 2 and 4 nodes holds two all-reduce sweeps and one topology model. load_model refused it, asking for
    world_size= while saying every sweep answers other layouts alike (the README's own `load_model(...).predict(size,
    world=..., nodes=...)` failed on any fit of two logs): it answers every layout as the CLI does, and only a
    prediction without world= asks which."""
    from pybench.model.build import fit_model_file

    sets = [MeasurementSet("nccl-tests", "allreduce", "nccl", 8 * n, "inter-node", "float32", SIZES,
                           _ring_allreduce(SIZES, 8 * n, 20e-6, 50e9), notes=(f"{8 * n} ranks on {n} host(s)",))
            for n in (2, 4)]
    models, topology, _ = fit_model_file(sets)
    path = tmp_path / "models.json"
    save_models(models, path, topology=topology)
    both = load_model(path, collective="allreduce")
    for world, nodes in ((16, 2), (32, 4)):
        mine = load_model(path, collective="allreduce", world_size=world)
        assert mine.predict(1 << 20).provenance == "measured"
        assert both.predict(1 << 20, world=world).time_s == mine.predict(1 << 20).time_s
        assert both.predict(1 << 20, world=world, nodes=nodes).time_s == mine.predict(1 << 20).time_s
    assert both.predict(1 << 20, world=64, nodes=8).time_s == mine.predict(1 << 20, world=64, nodes=8).time_s
    with pytest.raises(UsageError, match=r"^the file holds allreduce sweeps at 16, 32 ranks: give world= \(and nodes=\), "
                                         r"or load_model\(\.\.\., world_size=N\) to make one the default$"):
        both.predict(1 << 20)
    with pytest.raises(UsageError, match="holds allreduce sweeps at 16, 32 ranks: give world="):
        both.predict(1 << 20, nodes=4)  # (it named the 16-rank sweep's 2 nodes alone)
    # saved, it is the file it came from: a save that kept the first sweep alone answered 32 ranks from the topology
    # model, still labelled "measured", and predict() without world= at 16 ranks
    again = load_model(both.save(tmp_path / "again.json"), collective="allreduce")
    assert again.predict(1 << 20, world=32).time_s == both.predict(1 << 20, world=32).time_s
    with pytest.raises(UsageError, match="give world="):
        again.predict(1 << 20)


def test_a_table_prints_one_header_per_layout_whatever_each_size_was_raised_by(tmp_path, capsys):
    """A size raised to a fitted layout's time (more nodes add steps and bytes) carries its own share as the row's
    note, not the header's: a header that carried it split the table into one block per size. (One MI300X node with
    its description raised 2 nodes from 64 MiB up until the node's own links bounded the crossing itself; the rows
    here take such notes as node_count_bounds writes them.)"""
    from pybench.cli.prediction_table import format_prediction_table, topology_records
    from pybench.model.model_files import load_topology
    log, system = PUBLIC_LOGS / "mi300x_aac8_1node8_allreduce.log", PUBLIC_LOGS / "systems" / "amd-mi300x-aac10.json"
    assert main_for_tests(["fit", str(log), "-o", str(tmp_path / "m.json")]) == 0
    (model,) = load_topology(tmp_path / "m.json")
    model = model.with_system(load_system(str(system)))
    records = topology_records([model], [float(1 << k) for k in range(20, 31)], 16, 2)
    for k, r in enumerate(records[5:], 5):
        r["size_notes"] = [f"raised by {k}% to the time of 8 ranks on one node as its own links price it"]
    printed = format_prediction_table(records)
    assert printed.count("# allreduce") == 1
    rows = [line for line in printed.splitlines() if not line.startswith("#") and line.strip()]
    assert len(rows) == len(records) and sum("raised" in line for line in rows) == len(records) - 5


def test_beyond_a_sweep_that_ends_while_latency_rules_the_band_only_widens():
    """A 16 B - 1 KiB sweep says nothing of its bandwidth: beyond it the band takes the latency part of the
    widening all the way (the share of the bytes at the sweep's end), so it widens with the distance. Weighed by
    the share at the size asked for, it narrowed from 256 KiB to 1 MiB."""
    sizes = np.array([16.0 * 2 ** k for k in range(7)])
    ms = MeasurementSet("test", "allreduce", "mpi", 2, "intra-node", "float32", sizes, 20e-6 + sizes / 1e12,
                        None, None, None, "median")
    (model,) = fit_models([ms])
    widths = [model.predict(float(s)).time_high_s / model.predict(float(s)).time_s for s in (4 << 10, 256 << 10,
                                                                                            1 << 20, 8 << 20)]
    assert widths == sorted(widths) and widths[0] > 1.0, widths
    with pytest.raises(NotDetermined, match="the bytes' rate that rules at 1G is not measured"):
        model.predict(float(1 << 30))  # where its own line says the bytes rule: their rate was never measured


def test_below_a_sweep_whose_latency_was_never_resolved_the_answer_is_not_determined(tmp_path, capsys):
    """A 2-node sweep from 16 MiB whose times are all bytes (its latency held at 0) answered 1 KiB in 0.02 us: the
    curve carried down tends to 0. Below it only the time at its smallest size bounds the answer: not determined,
    with that bound and what to measure. A table that asks both keeps the sweep's own answer at its sizes."""
    sizes = np.array([float(1 << k) for k in range(24, 31)])
    ms = MeasurementSet("nccl-tests", "allreduce", "nccl", 16, "inter-node", "float32", sizes,
                        (sizes / 50e9 - 20e-6) * (1 + 0.03 * (-1.0) ** np.arange(sizes.size)),
                        None, None, None, "median")
    (model,) = fit_models([ms])
    assert model.segments[0].held == "alpha"
    with pytest.raises(NotDetermined, match=r"latency unresolved .held at 0, up to .* us., more than the bytes take "
                                            r"at 1K.*at most 3[0-9][0-9].[0-9] us .at 16M.*--sizes 1K:16M"):
        model.predict(1024.0)
    assert model.predict(float(8 << 20)).time_s > 0  # one octave below: the bytes take longer than it may
    # the planner's latency probe (a 1-byte call) takes the fit's word, 0, and prices the rest
    from pybench.planning.model_set import ModelSet
    assert ModelSet([model]).latency_s("allreduce", 16, "inter-node") == 0.0
    assert model.predict(float(1 << 25)).time_s == pytest.approx((1 << 25) / 50e9 - 20e-6, rel=0.05)  # answered
    from pybench.cli.prediction_table import prediction_records
    both = prediction_records([model], [1024, 1 << 26])
    assert both[0]["time_s"] is None and "latency unresolved" in both[0]["undetermined"]
    assert both[1]["time_s"] == pytest.approx(float(model.predict(float(1 << 26)).time_s))


def test_far_below_the_measured_sizes_the_upper_end_stays_that_of_the_first_octave_below(tmp_path):
    """An H100 cluster's 8-node sweep measured from 1 MiB answered 1 B with an upper end of 14,085 s: fewer bytes
    take no longer, but for a protocol switch just below the sweep (a B200 log runs 2 MiB slower than 4 MiB), so
    further below, the upper end is the first octave's; within that octave the widening stands."""
    from pybench.model.logs import load_measurements

    models = fit_models(load_measurements(PUBLIC_LOGS / "h100ib_gjaion_8node64_allreduce.log"))
    (m,) = [x for x in models if x.world_size == 64]
    octave = m.predict(float(m.size_min_bytes // 2))
    for size in (1.0, 1024.0, 65536.0, m.size_min_bytes / 4):
        p = m.predict(size)
        assert p.time_low_s <= p.time_s <= p.time_high_s <= max(octave.time_high_s, p.time_s), (size, p)
    out = tmp_path / "m.json"
    assert main_for_tests(["fit", str(PUBLIC_LOGS / "h100ib_gjaion_8node64_allreduce.log"), "-o", str(out)]) == 0
    via_topology = load_model(out).topology.predict(1, 64, 8)
    assert via_topology.high_s <= load_model(out).topology.predict(m.size_min_bytes // 2, 64, 8).high_s * (1 + 1e-9)


def test_a_described_node_of_two_gpus_is_not_told_to_measure_four(tmp_path, capsys):
    """`fit` of a 2-GPU PCIe node with its description (2 GPUs per node) ended on "other GPU counts in one node: ...
    measure it with `pybench allreduce --np 4`": that node holds no 4 GPUs."""
    log = PUBLIC_LOGS / "rtx4090_kalavai_docker_g2_allreduce.log"
    node = tmp_path / "two.json"
    node.write_text(json.dumps({"name": "two-pcie", "description": "2 GPUs on PCIe", "source": "this test",
                                "gpus_per_node": 2, "intra_fabric": "pcie", "intra_GBps_per_gpu": 32,
                                "nics_per_node": 1, "nic_Gbps": 100, "nic_kind": "ethernet"}))
    for extra, told in (([], True), (["--system", str(node)], False)):
        assert main_for_tests(["fit", str(log), *extra, "-o", str(tmp_path / "m.json"), "--force"]) == 0
        assert ("other GPU counts in one node" in capsys.readouterr().out) is told


def test_above_a_measured_sweep_a_system_keeps_the_low_end_no_faster_than_its_nics_carry(tmp_path, capsys):
    """Above a 2 x 8 H100 sweep (to 16 GiB) the low end stayed at the largest size's: a 1 TiB all-reduce 'could'
    take 61 ms (33 TB/s through the nodes), though --system aws-p5 says each node has 8 x 400 Gb/s. Now no
    faster than those carry 1 TiB (S through each node's NICs: NCCL's tree on two nodes), in the CLI and Python
    alike; without a description only the calibrated growth of the rate beyond a sweep bounds it."""
    log = SHARED_DATA / "nccl-tests" / "h100_p5_2node_16gpu_efa_allreduce_srunprefix.txt"
    path, out = tmp_path / "m.json", tmp_path / "p.json"
    assert main_for_tests(["fit", str(log), "--nodes", "2", "-o", str(path)]) == 0
    capsys.readouterr()
    assert main_for_tests(["predict", str(path), "--sizes", "1T", "--world", "16", "--nodes", "2", "--system",
                           "aws-p5", "--json", str(out)]) == 0
    assert "keeps sizes above theirs no faster than its NICs carry" in capsys.readouterr().err
    (record,) = json.loads(out.read_text())["records"]
    python = load_model(path, system="aws-p5").predict(1 << 40)
    floor = (1 << 40) / (8 * 400e9 / 8)
    assert record["time_low_s"] == pytest.approx(python.time_low_s, rel=1e-12) == pytest.approx(floor, rel=1e-9)
    assert python.time_low_s < python.time_s < python.time_high_s
    bare = load_model(path)  # no description: no NICs to go by, only the calibrated rate beyond the sweep's last
    rate_floor = (1 << 40) * bare.segments[-1].inv_bw_s_per_byte * math.exp(-load_calibration().beyond_bytes_speedup)
    assert bare.predict(1 << 40).time_low_s == pytest.approx(rate_floor, rel=1e-9) and rate_floor < floor / 5
