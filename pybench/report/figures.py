"""``pybench plot``: one figure from whatever the inputs are.

The kind of figure follows from the files given:

* pybench results and any log ``pybench fit`` reads (nccl-tests text or ``-J`` JSON, OSU,
  vTrain CSV): bus bandwidth and time against size, with ``--model``'s fitted lines;
* a CCR file (``pybench ccr --json``): CCR against batch, one panel per strategy;
* a pair-matrix file (``pybench p2p --matrix --json``): the link heatmap;
* a comparison file (``pybench compare A B --json``): the time ratio per size.

matplotlib is imported only when a figure is drawn (see :mod:`pybench.report.plot`).
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from pybench.errors import FileFormatError, UsageError
from pybench.io.files import read_json, refuse_existing, write_output
from pybench.io.formats import CCR, COMPARISON, P2P_MATRIX, schema_of
from pybench.report.plot import format_from_path, render_series_files, require_matplotlib

# schema -> kind of figure; anything else is a measurement (a result or a log)
_KINDS = {CCR.schema: "ccr", P2P_MATRIX.schema: "matrix", COMPARISON.schema: "comparison"}


def input_kind(path: str | Path) -> str:
    """``ccr``, ``matrix``, ``comparison`` or ``measurements`` (a result file or a log)."""
    try:
        schema = schema_of(read_json(path))
    except FileFormatError:
        return "measurements"  # not JSON: a text log, which the log readers judge
    return _KINDS.get(schema or "", "measurements")


def render_files(paths: Sequence[str | Path], fmt: str, model_path: str | Path | None = None) -> bytes:
    """The figure of ``paths`` (see the module docstring) as PNG or SVG bytes."""
    if not paths:
        raise UsageError("give at least one input: result files, logs, or one CCR, pair-matrix or comparison file")
    kinds = {input_kind(p) for p in paths}
    if len(kinds) > 1 or (kinds != {"measurements"} and len(paths) > 1):
        raise UsageError(f"one figure per kind of input: got {' and '.join(sorted(kinds))} files; give result "
                         "files and logs together, or one CCR, pair-matrix or comparison file")
    kind = kinds.pop()
    if kind != "measurements" and model_path is not None:
        raise UsageError(f"--model draws fitted lines over measurements; a {kind} file takes none")
    if kind == "ccr":
        from pybench.report.ccr_plot import load_ccr, render_ccr_figure
        return render_ccr_figure(load_ccr(paths[0]), fmt=fmt)
    if kind == "matrix":
        from pybench.report.heatmap import load_link_matrix, render_link_heatmap
        return render_link_heatmap(load_link_matrix(paths[0]), fmt=fmt)
    if kind == "comparison":
        from pybench.report.compare_plot import load_comparison, render_comparison
        return render_comparison(load_comparison(paths[0]), fmt=fmt)
    return render_series_files(paths, fmt, model_path)


def plot_files(paths: Sequence[str | Path], output: str | Path, model_path: str | Path | None = None,
               force: bool = False) -> Path:
    """Read the inputs, draw their figure, write it atomically; returns the path."""
    out = Path(output)
    fmt = format_from_path(out)
    refuse_existing(out, force)
    require_matplotlib()  # before reading anything, so a missing matplotlib is the first thing said
    write_output(out, render_files(paths, fmt, model_path), force)
    return out
