"""The comparison figure: time ratio B/A per size with its 95% interval, the noise band shaded.

Drawn from a comparison document (``pybench compare A B --json FILE``, or
``Comparison.to_dict()``): one point per size at the median ratio, a bar over the bootstrap
interval, coloured by verdict (red slower, green faster, grey not significant), and the
band 1 +- noise inside which no change counts.
"""

from __future__ import annotations

import io
import math
from pathlib import Path

from pybench.io.files import read_document
from pybench.io.formats import COMPARISON

VERDICT_COLOURS = {"slower": "#c62828", "faster": "#2e7d32", "not significant": "#757575"}


def load_comparison(path: str | Path) -> dict:
    """Read a comparison file, checked against its schema (pybench.io.document_schemas)."""
    return read_document(path, COMPARISON)


def render_comparison(doc: dict, fmt: str = "png", dpi: int = 110) -> bytes:
    """Time ratio B/A against size with intervals and verdict colours, as PNG or SVG bytes."""
    import numpy as np

    from pybench.report.plot import mpl_text, require_matplotlib, size_axis, wrap_to
    Figure, FigureCanvasAgg = require_matplotlib()
    rows = [s for s in doc["sizes"] if s.get("time_ratio") is not None and math.isfinite(s["time_ratio"])]
    fig = Figure(figsize=(7.4, 4.4), layout="constrained")
    FigureCanvasAgg(fig)
    ax = fig.subplots()
    noise = float(doc.get("noise") or 0.0)
    ax.axhspan(1 / (1 + noise), 1 + noise, color="#9e9e9e", alpha=0.18, lw=0,
               label=f"noise band 1 ± {100 * noise:g}%")
    ax.axhline(1.0, color="black", lw=0.8)
    for verdict, colour in VERDICT_COLOURS.items():
        pts = [s for s in rows if s["verdict"] == verdict]
        if not pts:
            continue
        x = np.array([s["size_bytes"] for s in pts], dtype=float)
        y = np.array([s["time_ratio"] for s in pts])
        lo = np.array([s["ratio_ci"][0] if s["ratio_ci"][0] is not None else s["time_ratio"] for s in pts])
        hi = np.array([s["ratio_ci"][1] if s["ratio_ci"][1] is not None else s["time_ratio"] for s in pts])
        ax.errorbar(x, y, yerr=np.vstack([np.clip(y - lo, 0, None), np.clip(hi - y, 0, None)]), fmt="o", ms=5,
                    capsize=3, color=colour, label=verdict)
    sizes = np.array([s["size_bytes"] for s in rows], dtype=float)
    size_axis(ax, sizes)
    ax.set_yscale("log", base=2)
    from matplotlib.ticker import FuncFormatter
    ax.yaxis.set_major_formatter(FuncFormatter(lambda v, _pos: f"{v:g}x"))
    ax.set_ylabel("time ratio B/A (median; bars: 95% interval)")
    ax.set_title(wrap_to(mpl_text(f"B against A: {doc.get('summary', '')}"), 6.0, 8), fontsize=8)
    ax.grid(True, alpha=0.3)
    ax.legend(fontsize=8, loc="best")
    buf = io.BytesIO()
    fig.savefig(buf, format=fmt, dpi=dpi, metadata={"Date": None} if fmt == "svg" else {})
    return buf.getvalue()
