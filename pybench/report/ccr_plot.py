"""CCR figures: the CCR file (``pybench ccr ... --json``) read, checked and drawn.

One panel per parallelism strategy, CCR against the batch size per replica with one line
per world size (the same colour for a world size in every panel, the legend in numeric
order), the interval the file holds for each point shaded around its line, and the 0.15
and 0.30 lines that bound "fits the hardware" and "communication-bound". When the file was
computed with overlap, the panel shows the exposed fraction (what the step really waits
for) and CCR without overlap dashed beside it. A second figure gives the scaling
efficiency against workers.
"""

from __future__ import annotations

import io
import math
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from pybench.io.files import read_document
from pybench.io.formats import CCR

BAND_FITS, BAND_BOUND = 0.15, 0.30
_NUMBERS = ("ccr", "efficiency_vs_device", "comm_s", "compute_s", "step_s", "samples_per_s")


def load_ccr(path: str | Path) -> dict:
    """Read a ``pybench ccr --json`` file, checked against its schema (pybench.io.document_schemas),
    its numbers as floats for the figures."""
    doc = read_document(path, CCR)
    for r in doc["rows"]:
        for k in _NUMBERS + ("comm_low_s", "comm_high_s", "exposed_s", "exposed_fraction"):
            if r.get(k) is not None:
                r[k] = float(r[k])
    return doc


def _fraction(comm_s: float | None, compute_s: float) -> float:
    if comm_s is None or not math.isfinite(comm_s):
        return math.nan
    total = comm_s + compute_s
    return comm_s / total if total > 0 else math.nan


def ccr_interval(row: dict) -> tuple[float, float]:
    """CCR at the low and high ends of the communication time's interval (nan where the file has none)."""
    return _fraction(row.get("comm_low_s"), row["compute_s"]), _fraction(row.get("comm_high_s"), row["compute_s"])


def overlapped(doc: dict) -> bool:
    cfg = doc.get("config")
    return bool(cfg.get("overlap")) if isinstance(cfg, dict) else False


def _groups(rows: Sequence[dict], key: str) -> dict[Any, list[dict]]:
    out: dict[Any, list[dict]] = {}
    for r in rows:
        out.setdefault(r[key], []).append(r)
    return out


def _bands(ax) -> None:
    ax.axhspan(0, BAND_FITS, color="#2e7d32", alpha=0.06, lw=0)
    ax.axhspan(BAND_BOUND, 1, color="#c62828", alpha=0.05, lw=0)
    ax.axhline(BAND_FITS, color="#2e7d32", ls=":", lw=1.2, label=f"{BAND_FITS:.2f}: fits the hardware")
    ax.axhline(BAND_BOUND, color="#c62828", ls=":", lw=1.2, label=f"{BAND_BOUND:.2f}: communication-bound")


def _panel(ax, rows: list[dict], world_colour: dict[int, str], overlap: bool, mpl_text) -> None:
    import numpy as np
    for world, rs in sorted(_groups(rows, "world").items()):
        rs = sorted(rs, key=lambda r: r["batch"])
        x = np.array([r["batch"] for r in rs], dtype=float)
        ccr = np.array([r["ccr"] for r in rs])
        lo, hi = (np.array(v) for v in zip(*(ccr_interval(r) for r in rs)))
        colour = world_colour[world]
        if overlap:
            exposed = np.array([r.get("exposed_fraction", r["ccr"]) for r in rs], dtype=float)
            ax.plot(x, exposed, "o-", ms=4, color=colour, label=mpl_text(f"{world} workers: exposed"))
            ax.plot(x, ccr, "--", lw=1, color=colour, alpha=0.7, label=mpl_text(f"{world} workers: CCR, no overlap"))
        else:
            ax.plot(x, ccr, "o-", ms=4, color=colour, label=mpl_text(f"{world} workers"))
        ok = np.isfinite(lo) & np.isfinite(hi)
        if np.any(ok):
            ax.fill_between(x[ok], lo[ok], hi[ok], color=colour, alpha=0.12, lw=0)


def render_ccr_figure(doc: dict, fmt: str = "png", dpi: int = 110) -> bytes:
    """CCR (or exposed fraction) against batch size, one panel per strategy, as PNG or SVG bytes."""
    from matplotlib.ticker import FixedLocator, NullLocator, StrMethodFormatter

    from pybench.report.plot import legend_columns, mpl_text, require_matplotlib, wrap_to
    Figure, FigureCanvasAgg = require_matplotlib()
    rows = doc["rows"]
    strategies = sorted(_groups(rows, "strategy"))
    worlds = sorted({r["world"] for r in rows})
    world_colour = {w: f"C{k % 10}" for k, w in enumerate(worlds)}
    overlap = overlapped(doc)
    n = max(1, len(strategies))
    cols = min(n, 3)
    fig = Figure(figsize=(4.6 * cols, 3.8 * math.ceil(n / cols) + 0.4), layout="constrained")
    FigureCanvasAgg(fig)
    axes = fig.subplots(math.ceil(n / cols), cols, squeeze=False, sharey=True).ravel()
    batches = sorted({r["batch"] for r in rows})
    for ax, strategy in zip(axes, strategies):
        _bands(ax)
        _panel(ax, [r for r in rows if r["strategy"] == strategy], world_colour, overlap, mpl_text)
        ax.set_title(mpl_text(strategy), fontsize=10)
        ax.set_xscale("log", base=2)
        ax.xaxis.set_major_locator(FixedLocator(batches[::math.ceil(len(batches) / 8)]))  # labels apart
        ax.xaxis.set_minor_locator(NullLocator())
        ax.xaxis.set_major_formatter(StrMethodFormatter("{x:g}"))
        ax.set_xlabel("batch size per replica")
        ax.set_ylim(0, 1)
        ax.grid(True, alpha=0.3)
    for ax in axes[len(strategies):]:
        ax.set_visible(False)
    axes[0].set_ylabel("exposed fraction of the step" if overlap else "CCR = t_comm / (t_comm + t_compute)")
    handles, labels = axes[0].get_legend_handles_labels()
    fig.legend(handles, labels, loc="outside lower center", ncol=legend_columns(labels, 4.6 * cols - 0.2, 8),
               fontsize=8)
    fig.suptitle(wrap_to("exposed communication against batch size (shaded: CCR interval)" if overlap
                         else "CCR against batch size (shaded: interval of the communication time)",
                         4.6 * cols - 0.4, 11), fontsize=11)
    return _save(fig, fmt, dpi)


def render_efficiency_figure(doc: dict, fmt: str = "png", dpi: int = 110) -> bytes:
    """Scaling efficiency against workers, one line per (strategy, batch)."""
    import matplotlib
    import numpy as np
    from matplotlib.cm import ScalarMappable
    from matplotlib.colors import LogNorm
    from matplotlib.ticker import FixedLocator, NullLocator, StrMethodFormatter

    from pybench.report.plot import legend_columns, mpl_text, require_matplotlib
    Figure, FigureCanvasAgg = require_matplotlib()
    rows = doc["rows"]
    fig = Figure(figsize=(7.0, 4.4), layout="constrained")
    FigureCanvasAgg(fig)
    ax = fig.subplots()
    # Strategy by line style and marker, batch by a colour from a sequential map (with its colour bar):
    # one legend entry per strategy, so any number of batches fits.
    strategies = sorted({r["strategy"] for r in rows})
    batches = sorted({r["batch"] for r in rows})
    style = {s: (("-", "--", ":", "-.")[k % 4], "osD^v<>p"[k % 8]) for k, s in enumerate(strategies)}
    norm = LogNorm(batches[0], batches[-1]) if len(batches) > 1 else None
    cmap = matplotlib.colormaps["viridis"]  # its top 15% (yellow) is too pale on white: left out
    for strategy in strategies:
        for batch in batches:
            rs = sorted((r for r in rows if r["strategy"] == strategy and r["batch"] == batch),
                        key=lambda r: r["world"])
            if rs:
                ax.plot([r["world"] for r in rs], [r["efficiency_vs_device"] for r in rs], ls=style[strategy][0],
                        marker=style[strategy][1], ms=4, color=cmap(0.85 * norm(batch)) if norm else "C0")
        ax.plot([], [], ls=style[strategy][0], marker=style[strategy][1], ms=4, color="0.3",
                label=mpl_text(strategy))
    if norm:
        bar = ScalarMappable(norm=norm, cmap=matplotlib.colors.ListedColormap(cmap(np.linspace(0, 0.85, 256))))
        fig.colorbar(bar, ax=ax, label="batch size per replica", shrink=0.85)
    ax.axhline(1.0, color="gray", ls=":", lw=1)
    ax.set_xscale("log", base=2)
    worlds = sorted({r["world"] for r in rows})
    if worlds:
        ax.xaxis.set_major_locator(FixedLocator(worlds))
        ax.xaxis.set_minor_locator(NullLocator())
        ax.xaxis.set_major_formatter(StrMethodFormatter("{x:g}"))
    ax.set_xlabel("workers (world size)")
    ax.set_ylabel("scaling efficiency = throughput(N) / (N x throughput(1))")
    ax.set_ylim(0, 1.05)
    batch_note = f", batch {batches[0]}" if len(batches) == 1 else ""
    ax.set_title(f"scaling efficiency against workers{batch_note}", fontsize=10)
    ax.grid(True, alpha=0.3)
    if rows:
        ax.legend(fontsize=7, loc="best", ncol=legend_columns(strategies, 2.8, 7, most=2))
    return _save(fig, fmt, dpi)


def _save(fig, fmt: str, dpi: int) -> bytes:
    buf = io.BytesIO()
    fig.savefig(buf, format=fmt, dpi=dpi, metadata={"Date": None} if fmt == "svg" else {})
    return buf.getvalue()
