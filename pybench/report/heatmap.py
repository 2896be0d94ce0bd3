"""The link-matrix heatmap: bandwidth of every GPU pair from ``pybench p2p --matrix --json``.

Rows are senders, columns receivers; each cell holds its bandwidth (GB/s) and link class,
and pairs the matrix flagged as slow are outlined, so one bad NVLink stands out of eight
good ones at a glance.
"""

from __future__ import annotations

import io
import math
from pathlib import Path

from pybench.errors import FileFormatError
from pybench.io.files import read_json
from pybench.io.formats import P2P_MATRIX

_PAIR_FIELDS = ("src", "dst", "bandwidth_gbps", "latency_s")


def load_link_matrix(path: str | Path) -> dict:
    """Read a pair-matrix file and check its pairs. Reads the ``schema_version`` key, and the
    ``version`` key that the first matrix files carried."""
    doc = read_json(path)
    if not isinstance(doc, dict) or doc.get("schema") != P2P_MATRIX.schema:
        got = doc.get("schema") if isinstance(doc, dict) else None
        raise FileFormatError(f"{path}: schema {got!r} is not {P2P_MATRIX.schema!r} (a pybench "
                              f"{P2P_MATRIX.what}, written by `{P2P_MATRIX.made_by}`)")
    version = doc.get("schema_version", doc.get("version"))
    if version not in P2P_MATRIX.reads:
        raise FileFormatError(f"{path}: {P2P_MATRIX.schema} version {version!r} is not one this pybench reads "
                              f"({', '.join(map(str, P2P_MATRIX.reads))})")
    pairs = doc.get("pairs")
    if not isinstance(pairs, list) or not pairs:
        raise FileFormatError(f"{path}: 'pairs' must be a non-empty list of GPU pairs")
    for k, p in enumerate(pairs):
        if not isinstance(p, dict):
            raise FileFormatError(f"{path}: pair {k} is not an object")
        for f in _PAIR_FIELDS:
            v = p.get(f)
            if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v) or v < 0:
                raise FileFormatError(f"{path}: pair {k}: {f!r} must be a number of at least 0")
        if p["src"] != int(p["src"]) or p["dst"] != int(p["dst"]) or max(p["src"], p["dst"]) > 1023:
            raise FileFormatError(f"{path}: pair {k}: 'src' and 'dst' must be GPU indices")
    return doc


def render_link_heatmap(doc: dict, fmt: str = "png", dpi: int = 110) -> bytes:
    """The bandwidth matrix as a heatmap, each cell labelled with GB/s and link class."""
    import numpy as np
    from matplotlib.patches import Rectangle

    from pybench.report.plot import mpl_text, require_matplotlib
    Figure, FigureCanvasAgg = require_matplotlib()
    pairs = doc["pairs"]
    n = int(max(max(p["src"], p["dst"]) for p in pairs)) + 1
    bw = np.full((n, n), np.nan)
    for p in pairs:
        bw[int(p["src"]), int(p["dst"])] = p["bandwidth_gbps"]
    side = min(1.0 + 0.9 * n, 14.0)
    fig = Figure(figsize=(side + 1.6, side), layout="constrained")
    FigureCanvasAgg(fig)
    ax = fig.subplots()
    image = ax.imshow(np.ma.masked_invalid(bw), cmap="viridis", vmin=0)
    fig.colorbar(image, ax=ax, label="bandwidth (GB/s = 1e9 B/s)", shrink=0.85)
    top = np.nanmax(bw) if np.any(np.isfinite(bw)) else 1.0
    for p in pairs:
        i, j = int(p["src"]), int(p["dst"])
        dark = p["bandwidth_gbps"] < 0.6 * top
        ax.text(j, i, mpl_text(f"{p['bandwidth_gbps']:.0f}\n{p.get('link', '')}"), ha="center", va="center",
                fontsize=7 if n <= 8 else 5, color="white" if dark else "black")
        if p.get("slow_bandwidth") or p.get("slow_latency"):
            ax.add_patch(Rectangle((j - 0.5, i - 0.5), 1, 1, fill=False, ec="#d50000", lw=2.5))
    ax.set_xticks(range(n), [str(k) for k in range(n)])
    ax.set_yticks(range(n), [str(k) for k in range(n)])
    ax.set_xlabel("receiving GPU")
    ax.set_ylabel("sending GPU")
    size = doc.get("bandwidth_size_bytes")
    from pybench.sizes import format_size
    at = f" at {format_size(int(size))}" if isinstance(size, (int, float)) and size >= 1 else ""
    ax.set_title(f"GPU pair bandwidth{at} (red outline: flagged slow)", fontsize=10)
    buf = io.BytesIO()
    fig.savefig(buf, format=fmt, dpi=dpi, metadata={"Date": None} if fmt == "svg" else {})
    return buf.getvalue()
