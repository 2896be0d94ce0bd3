"""The link-matrix heatmap: bandwidth of every GPU pair from ``pybench p2p --matrix --json``.

Rows are senders, columns receivers; each cell holds its bandwidth (GB/s) and link class,
and pairs the matrix flagged as slow are outlined, so one bad NVLink stands out of eight
good ones at a glance.
"""

from __future__ import annotations

import io
from pathlib import Path

from pybench.io.files import read_json
from pybench.io.formats import P2P_MATRIX, check_document

#: Up to this many GPUs each cell is labelled with its bandwidth and link class (two 8-GPU nodes).
LABELLED_GPUS = 16


def load_link_matrix(path: str | Path) -> dict:
    """Read a pair-matrix file, checked against its schema (pybench.io.document_schemas). Reads the
    ``schema_version`` key, and the ``version`` key that the first matrix files carried."""
    doc = read_json(path)
    if isinstance(doc, dict) and "schema_version" not in doc and "version" in doc:
        doc["schema_version"] = doc["version"]
    return check_document(doc, P2P_MATRIX, str(path))


def render_link_heatmap(doc: dict, fmt: str = "png", dpi: int = 110) -> bytes:
    """The bandwidth matrix as a heatmap, each cell labelled with GB/s and link class."""
    import numpy as np
    from matplotlib.collections import PatchCollection
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
    # Cell labels only where they can be read: past LABELLED_GPUS the cells are too small for text, and
    # one text artist per pair would cost minutes at 300 x 300; outlines go in one collection.
    outlines = []
    for p in pairs:
        i, j = int(p["src"]), int(p["dst"])
        if n <= LABELLED_GPUS:
            dark = p["bandwidth_gbps"] < 0.6 * top
            ax.text(j, i, mpl_text(f"{p['bandwidth_gbps']:.0f}\n{p.get('link', '')}"), ha="center", va="center",
                    fontsize=7 if n <= 8 else 5, color="white" if dark else "black")
        if p.get("slow_bandwidth") or p.get("slow_latency"):
            outlines.append(Rectangle((j - 0.5, i - 0.5), 1, 1))
    if outlines:
        ax.add_collection(PatchCollection(outlines, facecolor="none", edgecolor="#d50000",
                                          linewidth=2.5 if n <= LABELLED_GPUS else 0.8))
    if n <= LABELLED_GPUS:
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
