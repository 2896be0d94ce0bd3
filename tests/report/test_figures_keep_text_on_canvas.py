"""Every kind of figure, drawn at the extremes of its inputs, keeps all its text on the canvas (issue 26).

Each kind is drawn at the four corners of its inputs, 1 or 30 sizes (batch sizes for the CCR figures) with
1 or 8 series (runs, worlds and strategies, GPUs), with labels as long as real file names. Each
figure is drawn on matplotlib's Agg canvas where the renderer would save it, and the test fails on any
drawn text (titles, axis labels, tick labels, legend entries, cell labels) whose box leaves the canvas,
naming it.
"""

from __future__ import annotations

import numpy as np
import pytest

matplotlib = pytest.importorskip("matplotlib", reason="plots need matplotlib (pip install matplotlib)")
from matplotlib.backends.backend_agg import FigureCanvasAgg  # noqa: E402
from matplotlib.figure import Figure  # noqa: E402
from matplotlib.text import Text  # noqa: E402
from matrix_docs import link_matrix  # noqa: E402

LONG = "nightly/cluster-a/node-017/allreduce_float32_sum_2ranks_huge_pages_off_2026-12-01T18-00-00.json"
EXTREMES = [(1, 1), (1, 8), (30, 1), (30, 8)]
IDS = [f"{sizes}sizes-{series}series" for sizes, series in EXTREMES]
STRATEGIES = ("ddp", "zero1", "zero2", "zero3", "tp", "pp", "tp+dp", "tp+pp+dp")


def text_off_canvas(fig) -> list[str]:
    """The drawn texts of ``fig`` whose boxes leave its canvas (a pixel of slack for anti-aliasing)."""
    FigureCanvasAgg(fig)
    fig.canvas.draw()
    renderer = fig.canvas.get_renderer()
    ticks, drawn = set(), set()
    for ax in fig.axes:
        for axis in (ax.xaxis, ax.yaxis):
            for tick in axis.get_major_ticks() + axis.get_minor_ticks():
                ticks |= {id(tick.label1), id(tick.label2)}
            if ax.get_visible():
                drawn |= {id(t.label1) for t in axis._update_ticks() if t.label1.get_visible()}
    box = fig.bbox
    off = []
    for text in fig.findobj(Text):
        if not text.get_visible() or not text.get_text().strip() or (id(text) in ticks and id(text) not in drawn):
            continue
        if text.axes is not None and not text.axes.get_visible():
            continue
        ext = text.get_window_extent(renderer)
        if ext.x0 < box.x0 - 1 or ext.x1 > box.x1 + 1 or ext.y0 < box.y0 - 1 or ext.y1 > box.y1 + 1:
            off.append(f"{text.get_text()[:70]!r} at x {ext.x0:.0f}..{ext.x1:.0f}, y {ext.y0:.0f}..{ext.y1:.0f} "
                       f"(canvas {box.width:.0f} x {box.height:.0f})")
    return off


@pytest.fixture
def drawn(monkeypatch):
    """Figures the renderers would save, kept for inspection instead of being encoded."""
    figures: list = []

    def keep(fig, *args, **kwargs):
        figures.append(fig)
    monkeypatch.setattr(Figure, "savefig", keep)
    return figures


def _series(n_sizes: int, n_series: int, collective: str = "allreduce"):
    from pybench.report.plot import Series
    sizes = 2.0 ** np.arange(3, 3 + n_sizes)
    out = []
    for k in range(n_series):
        time = 1e-6 * (5 + k) + sizes / (1e9 + 1e8 * k)
        out.append(Series(f"{LONG} #{k}", collective, 2 + k, sizes, time, time * 0.9, time * 1.3,
                          sizes / time / 1e9))
    return out


def _ccr_doc(n_batches: int, n_series: int, overlap: bool) -> dict:
    rows = []
    for strategy in STRATEGIES[:n_series]:
        for w, world in enumerate(2 ** np.arange(1, 1 + n_series)):
            for b in range(n_batches):
                compute = 0.01 * 2 ** (b / 3)
                comm = 0.005 * (1 + w)
                rows.append({"strategy": strategy, "world": int(world), "batch": b + 1, "compute_s": compute,
                             "comm_s": comm, "comm_low_s": comm / 2, "comm_high_s": comm * 2,
                             "ccr": comm / (comm + compute), "exposed_fraction": comm / (comm + 2 * compute),
                             "efficiency_vs_device": compute / (comm + compute), "step_s": comm + compute,
                             "samples_per_s": (b + 1) / (comm + compute)})
    return {"schema": "pybench.ccr", "schema_version": 1, "config": {"overlap": overlap}, "rows": rows}


def _comparison(n_sizes: int) -> dict:
    verdicts = ("slower", "faster", "not significant")
    sizes = [{"size_bytes": 8 << k, "time_ratio": 1.0 + 0.3 * np.sin(k), "ratio_ci": [0.8, 1.5],
              "verdict": verdicts[k % 3]} for k in range(n_sizes)]
    return {"schema": "pybench.comparison", "schema_version": 1, "noise": 0.1, "sizes": sizes,
            "summary": f"{LONG} against {LONG.replace('017', '018')}: 3 sizes slower beyond the noise band"}


@pytest.mark.parametrize("n_sizes,n_series", EXTREMES, ids=IDS)
def test_measurement_figures_keep_their_text_on_the_canvas(n_sizes, n_series, drawn):
    from pybench.report.plot import render_measurements
    render_measurements(_series(n_sizes, n_series), title=LONG)
    render_measurements(_series(n_sizes, n_series, "p2p_latency"), title=LONG)  # latency alone: its own panel
    assert [text_off_canvas(fig) for fig in drawn] == [[]] * len(drawn)


@pytest.mark.parametrize("n_batches,n_series", EXTREMES, ids=IDS)
def test_ccr_and_efficiency_figures_keep_their_text_on_the_canvas(n_batches, n_series, drawn):
    from pybench.report.ccr_plot import render_ccr_figure, render_efficiency_figure
    render_ccr_figure(_ccr_doc(n_batches, n_series, overlap=n_series > 1))  # overlap: twice the legend entries
    render_efficiency_figure(_ccr_doc(n_batches, n_series, False))
    assert [text_off_canvas(fig) for fig in drawn] == [[]] * len(drawn)


@pytest.mark.parametrize("n_sizes", (1, 30))
def test_comparison_figures_keep_their_text_on_the_canvas(n_sizes, drawn):
    from pybench.report.compare_plot import render_comparison
    render_comparison(_comparison(n_sizes))
    assert text_off_canvas(drawn[0]) == []


@pytest.mark.parametrize("gpus", (2, 8))
def test_link_heatmaps_keep_their_text_on_the_canvas(gpus, drawn):
    from pybench.report.heatmap import render_link_heatmap
    render_link_heatmap(link_matrix(gpus, slow=(0, 1)))
    assert text_off_canvas(drawn[0]) == []
