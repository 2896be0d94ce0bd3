"""The pair heatmap's cost does not grow with a text artist per cell: past LABELLED_GPUS GPUs
the cells carry no labels (a 300 x 300 matrix took 96 s with one per pair), and the slow pairs'
outlines are one collection, not one patch each."""

from __future__ import annotations

import pytest

pytest.importorskip("matplotlib")


def _matrix(n: int) -> dict:
    import sys
    from pathlib import Path
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    from format_cases import pair_matrix  # type: ignore[import-not-found]
    return pair_matrix(n)


@pytest.mark.parametrize("n", [8, 24])
def test_cells_are_labelled_only_while_they_can_be_read(n, monkeypatch):
    from matplotlib.axes import Axes

    from pybench.report.heatmap import LABELLED_GPUS, render_link_heatmap
    calls = {"text": 0, "patch": 0}
    text, patch = Axes.text, Axes.add_patch
    monkeypatch.setattr(Axes, "text", lambda self, *a, **k: calls.__setitem__("text", calls["text"] + 1)
                        or text(self, *a, **k))
    monkeypatch.setattr(Axes, "add_patch", lambda self, *a, **k: calls.__setitem__("patch", calls["patch"] + 1)
                        or patch(self, *a, **k))
    png = render_link_heatmap(_matrix(n), fmt="png", dpi=40)
    assert png.startswith(b"\x89PNG")
    assert calls["text"] == (n * (n - 1) if n <= LABELLED_GPUS else 0)
    assert calls["patch"] == 0  # outlines: one PatchCollection
