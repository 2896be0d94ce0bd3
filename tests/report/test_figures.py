"""Figures worth looking at: readable axes, models in their data's colour, any log `fit` reads,
CCR per strategy with bands and thresholds, the link heatmap and the comparison plot."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from conftest import SHARED_DATA
from matrix_docs import link_matrix

from pybench.cli.main import main as main_for_tests

matplotlib = pytest.importorskip("matplotlib", reason="plots need matplotlib (pip install matplotlib)")

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"
RUN_A = FIXTURES / "compare_allreduce_a.json"
RUN_B = FIXTURES / "compare_allreduce_b.json"
MODEL = FIXTURES / "report_model_allreduce.json"
CCR = FIXTURES / "report_ccr_ddp.json"
NCCL_LOG = SHARED_DATA / "nccl-tests" / "a100_2node_16gpu_oci_roce_allreduce.txt"
OSU_LOG = SHARED_DATA / "osu" / "osu_bw_cuda_a100_nvlink_eessi716.txt"
VTRAIN = SHARED_DATA / "vtrain" / "a100_nvswitch_allreduce_4gpu.csv"
PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


def test_busbw_is_linear_against_a_labelled_log2_size_axis_with_the_model_in_the_datas_colour():
    from pybench.model.model_files import load_models
    from pybench.report.plot import load_series, matching_models, measurement_figure
    series = load_series([RUN_A])
    models = matching_models(load_models(MODEL), series)
    fig = measurement_figure(series, models, panels=("busbw", "time"))
    bw, time = fig.axes[:2]
    assert bw.get_yscale() == "linear" and bw.get_ylim()[0] == 0
    assert bw.get_xscale() == "log" and time.get_yscale() == "log"
    labels = [t.get_text() for t in bw.get_xticklabels()]
    assert "64K" in labels and "1M" in labels and all(labels)
    data_line = next(ln for ln in bw.get_lines() if ln.get_linestyle() == "-")
    model_line = next(ln for ln in bw.get_lines() if ln.get_linestyle() == "--")
    assert model_line.get_color() == data_line.get_color()
    band = bw.collections[0]  # the 95% band, shaded in the same colour
    assert np.allclose(band.get_facecolor()[0][:3], matplotlib.colors.to_rgb(data_line.get_color()))


def test_models_take_their_datas_colour_and_others_a_colour_of_their_own():
    from pybench.report.plot import Series, colours

    def s(coll, world):
        return Series("x", coll, world, *(np.ones(2) for _ in range(5)))

    class M:
        def __init__(self, collective, world_size):
            self.collective, self.world_size = collective, world_size
    data, model = colours([s("allreduce", 2), s("allgather", 8)], [M("allgather", 8), M("alltoall", 4)])
    assert data == ["C0", "C1"] and model == ["C1", "C2"]


@pytest.mark.parametrize("log", [NCCL_LOG, OSU_LOG, VTRAIN], ids=["nccl-tests", "osu", "vtrain"])
def test_plot_reads_every_log_fit_reads(tmp_path, log):
    out = tmp_path / "log.png"
    assert main_for_tests(["plot", str(log), "-o", str(out)]) == 0
    assert out.read_bytes().startswith(PNG_MAGIC)


def test_logs_plot_with_their_busbw(tmp_path):
    from pybench.report.plot import load_series
    (nccl,) = load_series([NCCL_LOG])
    # the log's own busbw column: 16 ranks, all-reduce factor 2(n-1)/n
    assert nccl.world_size == 16 and nccl.busbw_gbps.max() == pytest.approx(nccl.busbw_gbps.max())
    big = np.argmax(nccl.size_bytes)
    assert nccl.busbw_gbps[big] == pytest.approx(nccl.size_bytes[big] / nccl.time_s[big] / 1e9 * 30 / 16)
    out = tmp_path / "both.svg"
    assert main_for_tests(["plot", str(NCCL_LOG), str(RUN_A), "--model", str(MODEL), "-o", str(out)]) == 0
    assert "nccl-tests 16r" in out.read_text()


def _ccr_with_worlds(tmp_path: Path, worlds=(8, 16, 32, 64)) -> Path:
    doc = json.loads(CCR.read_text())
    old = sorted({r["world"] for r in doc["rows"]})
    rows = []
    for w_new, w_old in zip(worlds, old + old[:1]):
        for r in doc["rows"]:
            if r["world"] == w_old:
                rows.append(dict(r, world=w_new))
    doc["rows"] = rows
    path = tmp_path / "ccr.json"
    path.write_text(json.dumps(doc))
    return path


def test_ccr_figure_has_one_panel_per_strategy_bands_thresholds_and_a_numeric_legend(tmp_path):
    from pybench.report.ccr_plot import load_ccr, render_ccr_figure
    doc = load_ccr(_ccr_with_worlds(tmp_path))
    fig_bytes = render_ccr_figure(doc, fmt="svg").decode()
    assert "ddp" in fig_bytes and "zero3" in fig_bytes
    # inspect the figure itself
    import pybench.report.ccr_plot as cp
    captured = {}
    real_save = cp._save

    def keep(fig, fmt, dpi):
        captured["fig"] = fig
        return real_save(fig, fmt, dpi)
    cp._save = keep
    try:
        render_ccr_figure(doc)
    finally:
        cp._save = real_save
    fig = captured["fig"]
    panels = [ax for ax in fig.axes if ax.get_visible()]
    assert sorted(ax.get_title() for ax in panels) == ["ddp", "zero3"]
    for ax in panels:
        levels = sorted({round(ln.get_ydata()[0], 2) for ln in ax.get_lines() if ln.get_linestyle() == ":"})
        assert levels == [0.15, 0.30]
        assert len(ax.collections) >= 4  # the CCR interval of each world size is shaded
    labels = [t.get_text() for t in fig.legends[0].get_texts()]
    worlds = [int(t.split()[0]) for t in labels if "workers" in t]
    assert worlds == sorted(worlds) == [8, 16, 32, 64]


def test_plot_draws_ccr_matrix_and_comparison_files(tmp_path, capsys):
    matrix = tmp_path / "matrix.json"
    matrix.write_text(json.dumps(link_matrix()))
    cmp_json = tmp_path / "cmp.json"
    assert main_for_tests(["compare", str(RUN_A), str(RUN_B), "--json", str(cmp_json)]) == 0
    for source, name in ((CCR, "ccr.png"), (matrix, "matrix.png"), (cmp_json, "cmp.png")):
        out = tmp_path / name
        assert main_for_tests(["plot", str(source), "-o", str(out)]) == 0, capsys.readouterr().err
        assert out.read_bytes().startswith(PNG_MAGIC) and out.stat().st_size > 10_000
    svg = tmp_path / "matrix.svg"
    assert main_for_tests(["plot", str(matrix), "-o", str(svg)]) == 0
    text = svg.read_text()
    assert "GPU pair bandwidth at 64M" in text and "receiving GPU" in text


@pytest.mark.parametrize("extra, message", [
    ([str(CCR)], "one figure per kind of input"),
    (["--model", str(MODEL)], "takes none"),
])
def test_plot_inputs_that_do_not_go_together_are_one_line_exit_2(tmp_path, capsys, extra, message):
    matrix = tmp_path / "matrix.json"
    matrix.write_text(json.dumps(link_matrix()))
    assert main_for_tests(["plot", str(matrix), *extra, "-o", str(tmp_path / "x.png")]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and message in err


def test_a_broken_matrix_file_is_one_line_exit_2(tmp_path, capsys):
    doc = link_matrix()
    doc["pairs"][0]["bandwidth_gbps"] = "fast"
    bad = tmp_path / "m.json"
    bad.write_text(json.dumps(doc))
    assert main_for_tests(["plot", str(bad), "-o", str(tmp_path / "m.png")]) == 2
    assert "pairs[0].bandwidth_gbps: Input should be a valid number, got 'fast'" in capsys.readouterr().err


def test_report_opens_with_a_summary_and_holds_heatmap_and_comparison(tmp_path):
    matrix = tmp_path / "matrix.json"
    matrix.write_text(json.dumps(link_matrix()))
    out = tmp_path / "r.html"
    assert main_for_tests(["report", str(RUN_B), "--baseline", str(RUN_A), "--model", str(MODEL), "--ccr", str(CCR),
                           "--matrix", str(matrix), "-o", str(out)]) == 0
    text = out.read_text()
    summary = text[text.index('<p id="summary"'):].split("</p>")[0]
    assert text.index('id="summary"') < text.index("<h2>")  # the report opens with it
    for fact in ("Peak bus bandwidth", "alpha", "GB/s on the largest", "Worst size", "Verdict:"):
        assert fact in summary
    assert 'alt="link-matrix heatmap"' in text and 'alt="comparison: time ratio per size' in text
    assert "Comparison with the baseline" in text and "Links between GPU pairs" in text
    assert "load (1/5/15 min) start / end" in text


def test_text_from_a_matrix_file_is_escaped_in_the_report_and_its_figure(tmp_path):
    hostile = '<script>alert(1)</script>$x^{2$'
    doc = link_matrix()
    for p in doc["pairs"]:
        p["link"] = hostile
    matrix = tmp_path / "m.json"
    matrix.write_text(json.dumps(doc))
    out = tmp_path / "r.html"
    assert main_for_tests(["report", str(RUN_A), "--matrix", str(matrix), "-o", str(out)]) == 0
    text = out.read_text()
    assert "<script>" not in text and "&lt;script&gt;alert(1)&lt;/script&gt;" in text


def test_with_overlap_the_ccr_figure_shows_the_exposed_fraction_beside_ccr(tmp_path):
    doc = json.loads(CCR.read_text())
    doc["config"]["overlap"] = True
    for r in doc["rows"]:
        r["exposed_fraction"] = r["ccr"] / 2
    path = tmp_path / "ccr_overlap.json"
    path.write_text(json.dumps(doc))
    out = tmp_path / "ccr.svg"
    assert main_for_tests(["plot", str(path), "-o", str(out)]) == 0
    text = out.read_text()
    assert "exposed fraction of the step" in text and "workers: exposed" in text and "CCR, no overlap" in text
