"""Plots: bus bandwidth and time per operation against size, with fitted models.

``python -m pybench plot RESULTS.json|LOG... [--model MODEL.json] -o FILE.png|svg``

Size is on a log2 axis labelled in sizes (8, 1K, 64M); bus bandwidth on a linear axis
from 0, so its values can be read off; time on a log axis (it spans decades). Several
runs (backends, dtypes, machines, other tools' logs) share one figure; a fitted
alpha-beta model is drawn dashed in the colour of the data it was fitted to, with its
95% confidence band shaded in that colour. matplotlib is imported only here, lazily, and
drives its Agg canvas directly (no pyplot, no global backend switch), so
``import pybench`` never needs it and a user's own matplotlib state is left alone.
"""

from __future__ import annotations

import io
import math
import textwrap
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from pybench.collectives import busbw_factor
from pybench.errors import BackendUnavailable, UsageError
from pybench.measure.results import RunResult
from pybench.sizes import format_size

FORMATS = ("png", "svg")


def require_matplotlib():
    """Import matplotlib's Figure and Agg canvas, or raise BackendUnavailable saying how to get them."""
    try:
        from matplotlib.backends.backend_agg import FigureCanvasAgg
        from matplotlib.figure import Figure
    except ImportError as exc:
        raise BackendUnavailable(f"plots need matplotlib ({str(exc).splitlines()[0]}); "
                                 "install it with `pip install matplotlib`") from None
    return Figure, FigureCanvasAgg


@dataclass(frozen=True)
class Series:
    """One run as plotted: label, sizes and the figures derived from its samples."""

    label: str
    collective: str
    world_size: int
    size_bytes: np.ndarray
    time_s: np.ndarray
    time_p5_s: np.ndarray
    time_p95_s: np.ndarray
    busbw_gbps: np.ndarray


_NUMERIC_FIELDS = ("size_bytes", "count", "time_s", "time_p5_s", "time_p95_s", "time_ci_low_s", "time_ci_high_s",
                   "algbw_gbps", "busbw_gbps", "wrong", "check_iters", "iterations")


def load_checked_result(path: str | Path) -> RunResult:
    """load_result plus the type checks that plots, reports and comparisons rely on, so a
    hand-edited or hostile file is a one-line FileFormatError, not a traceback."""
    from pybench.errors import FileFormatError
    from pybench.measure.results import load_result
    result = load_result(path)
    problems = []
    for name, want in (("environment", dict), ("options", dict), ("hosts", dict), ("command", list)):
        if not isinstance(getattr(result, name), want):
            problems.append(f"'{name}' is not a{'n object' if want is dict else ' list'}")
    for k, rec in enumerate(result.records):
        for f in _NUMERIC_FIELDS:
            v = getattr(rec, f)
            if isinstance(v, bool) or not isinstance(v, (int, float)):
                problems.append(f"record {k}: '{f}' is not a number")
        if not isinstance(rec.samples_s, list) or not all(
                isinstance(x, (int, float)) and not isinstance(x, bool) for x in rec.samples_s if x is not None):
            problems.append(f"record {k}: 'samples_s' is not a list of numbers")
        if isinstance(rec.size_bytes, (int, float)) and rec.size_bytes <= 0:
            problems.append(f"record {k}: 'size_bytes' must be positive")
    if problems:
        more = f" (and {len(problems) - 3} more)" if len(problems) > 3 else ""
        raise FileFormatError(f"{path}: malformed pybench result: {'; '.join(problems[:3])}{more}")
    return result


def run_series(result: RunResult, label: str) -> Series:
    recs = sorted((r for r in result.records if r.time_s > 0 and math.isfinite(r.time_s)),
                  key=lambda r: r.size_bytes)
    return Series(label=label, collective=result.benchmark, world_size=result.world_size,
                  size_bytes=np.array([r.size_bytes for r in recs], dtype=float),
                  time_s=np.array([r.time_s for r in recs]), time_p5_s=np.array([r.time_p5_s for r in recs]),
                  time_p95_s=np.array([r.time_p95_s for r in recs]),
                  busbw_gbps=np.array([r.busbw_gbps for r in recs]))


def mpl_text(text: str) -> str:
    """Text from a file as matplotlib must be given it to show it as typed ($...$ would be math)."""
    return str(text).replace("$", r"\$")


def wrap_to(text: str, width_in: float, fontsize: float) -> str:
    """``text`` in lines that fit ``width_in`` inches at ``fontsize`` points. Long file names are broken
    too (matplotlib's own wrapping breaks only at spaces); 0.62 em is a wide glyph of DejaVu Sans."""
    chars = max(16, int(width_in * 72 / (0.62 * fontsize)))
    return "\n".join(textwrap.wrap(text, chars, break_on_hyphens=False)) or text


def legend_columns(labels: Sequence[str], width_in: float, fontsize: float, most: int = 4) -> int:
    """How many legend columns of ``labels`` fit side by side in ``width_in`` inches (a handle and its
    padding take about 5 em more than the label)."""
    widest = max((len(line) for label in labels for line in str(label).splitlines()), default=1)
    column_in = (0.62 * widest + 5) * fontsize / 72
    return max(1, min(most, len(labels), int(width_in / column_in)))


def series_label(result: RunResult, source: str | None = None) -> str:
    label = f"{result.benchmark} {result.backend} {result.dtype} {result.world_size}r"
    if not result.options.get("huge_pages", True):
        label += " no-THP"
    return mpl_text(f"{label} ({source})" if source else label)


def model_curve(model, world: int | None = None, points: int = 200) -> dict:
    """Model line and 95% band on a log grid over its measured sizes: sizes, time, low, high, busbw and band."""
    lo, hi = max(model.size_min_bytes, 1), max(model.size_max_bytes, 1)
    sizes = np.geomspace(lo, hi, points) if hi > lo else np.array([float(lo)])
    pred = model.predict(sizes, world=world)
    w = pred.world if pred.world else model.world_size
    factor = busbw_factor(model.collective, w)
    t, t_lo, t_hi = (np.asarray(x, dtype=float) for x in (pred.time_s, pred.time_low_s, pred.time_high_s))
    with np.errstate(divide="ignore", invalid="ignore"):
        bus = np.where(t > 0, sizes / t / 1e9 * factor, np.nan)
        bus_hi = np.where(t_lo > 0, sizes / t_lo / 1e9 * factor, np.nan)  # a lower time is a higher bandwidth
        bus_lo = np.where(t_hi > 0, sizes / t_hi / 1e9 * factor, np.nan)
    return {"size_bytes": sizes, "time_s": t, "time_low_s": t_lo, "time_high_s": t_hi, "busbw_gbps": bus,
            "busbw_low_gbps": bus_lo, "busbw_high_gbps": bus_hi, "world": w}


def model_label(model) -> str:
    return mpl_text(f"model {model.collective} {model.backend} {model.world_size or '?'}r "
                    f"({len(model.segments)} piece{'s' if len(model.segments) != 1 else ''})")


def matching_models(models: Iterable, series: Sequence[Series]) -> list:
    """Models of a collective that is plotted (all models when no series is given)."""
    wanted = {s.collective for s in series}
    return [m for m in models if not wanted or m.collective in wanted]


def size_axis(ax, sizes: np.ndarray) -> None:
    """Log2 size axis with every label written as a size (8, 1K, 64M), at most about 12 of them."""
    from matplotlib.ticker import FixedLocator, FuncFormatter, NullLocator
    ax.set_xscale("log", base=2)
    ax.set_xlabel("size (bytes; K/M/G = 2^10/2^20/2^30)")
    if sizes.size == 0:
        return
    lo, hi = float(np.min(sizes)), float(np.max(sizes))
    k0, k1 = int(math.floor(math.log2(lo))), int(math.ceil(math.log2(hi)))
    step = max(1, math.ceil((k1 - k0 + 1) / 12))
    ticks = [2.0 ** k for k in range(k0, k1 + 1, step)]
    ax.xaxis.set_major_locator(FixedLocator(ticks))
    ax.xaxis.set_minor_locator(NullLocator())
    ax.xaxis.set_major_formatter(FuncFormatter(lambda x, _pos: format_size(int(round(x))) if x >= 1 else ""))
    for label in ax.get_xticklabels():
        label.set_rotation(0)


def colours(series: Sequence[Series], models: Sequence) -> tuple[list[str], list[str]]:
    """Colour of each series, and of each model: the colour of the data it was fitted to (same
    collective, and the same world size where both say), else one of its own."""
    data = [f"C{k % 10}" for k in range(len(series))]
    spare = len(series)
    of_models = []
    for m in models:
        match = next((k for k, s in enumerate(series) if s.collective == m.collective and (
            not m.world_size or not s.world_size or s.world_size == m.world_size)), None)
        if match is None:
            of_models.append(f"C{spare % 10}")
            spare += 1
        else:
            of_models.append(data[match])
    return data, of_models


def _is_latency(s: Series) -> bool:
    return s.collective == "p2p_latency"


def measured_panels(series: Sequence[Series], panels: Sequence[str] = ("busbw", "time")) -> tuple[str, ...]:
    """The panels worth drawing: OSU's latency test is latency, so a figure of latency tests alone
    has no bandwidth panel (and the latency series are left out of a bandwidth panel)."""
    if series and all(_is_latency(s) for s in series):
        return tuple(p for p in panels if p != "busbw") or ("time",)
    return tuple(panels)


def _draw_busbw(ax, series: Sequence[Series], curves: Sequence[tuple[str, dict]], data_c, model_c) -> None:
    top = 0.0
    for s, c in zip(series, data_c):
        if _is_latency(s):
            continue
        ok = s.busbw_gbps > 0
        ax.plot(s.size_bytes[ok], s.busbw_gbps[ok], "o-", ms=4, lw=1.4, color=c, label=s.label)
        top = max(top, float(np.max(s.busbw_gbps[ok], initial=0.0)))
    for (label, cv), c in zip(curves, model_c):
        y, lo, hi = cv["busbw_gbps"], cv["busbw_low_gbps"], cv["busbw_high_gbps"]
        ok = np.isfinite(y) & (y > 0)
        if not np.any(ok):
            continue
        ax.plot(cv["size_bytes"][ok], y[ok], "--", lw=1.5, color=c, label=label)
        top = max(top, float(np.max(y[ok])))
        cap = 10 * max(top, float(np.max(y[ok])))  # an open band bound (infinite bandwidth) runs off the axes
        lo = np.where(np.isfinite(lo) & (lo > 0), lo, 0.0)
        hi = np.where(np.isfinite(hi) & (hi > 0), np.minimum(hi, cap), cap)
        ax.fill_between(cv["size_bytes"][ok], lo[ok], hi[ok], color=c, alpha=0.18, lw=0, label="95% band")
    ax.set_ylim(0, top * 1.12 if top > 0 else 1.0)
    ax.set_ylabel("bus bandwidth (GB/s = 1e9 B/s)")


def _draw_time(ax, series: Sequence[Series], curves: Sequence[tuple[str, dict]], data_c, model_c) -> None:
    shown: list[np.ndarray] = []  # y values of measurements and model lines: they set the y range
    for s, c in zip(series, data_c):
        yerr = np.vstack([np.clip(s.time_s - s.time_p5_s, 0, None), np.clip(s.time_p95_s - s.time_s, 0, None)])
        ax.errorbar(s.size_bytes, s.time_s * 1e6, yerr=yerr * 1e6, fmt="o-", ms=4, lw=1.2, capsize=2, color=c,
                    label=s.label)
        shown += [s.time_s * 1e6, s.time_p95_s * 1e6]
    bands = []
    for (label, cv), c in zip(curves, model_c):
        y, lo, hi = cv["time_s"] * 1e6, cv["time_low_s"] * 1e6, cv["time_high_s"] * 1e6
        ok = np.isfinite(y) & (y > 0)
        if np.any(ok):
            ax.plot(cv["size_bytes"][ok], y[ok], "--", lw=1.5, color=c, label=label)
            shown.append(y[ok])
            bands.append((cv["size_bytes"][ok], lo[ok], hi[ok], c))
    finite = np.concatenate([a[np.isfinite(a) & (a > 0)] for a in shown]) if shown else np.array([])
    if finite.size:
        y_lo, y_hi = float(finite.min()) / 2, float(finite.max()) * 2
        ax.set_ylim(y_lo, y_hi)
        for x, lo, hi, c in bands:
            # A band bound of 0 time means "unbounded" on that side: let it run off the axes.
            lo = np.where(np.isfinite(lo) & (lo > 0), lo, y_lo / 10)
            hi = np.where(np.isfinite(hi) & (hi > 0), hi, y_hi * 10)
            ax.fill_between(x, np.maximum(lo, y_lo / 10), np.minimum(hi, y_hi * 10), color=c, alpha=0.18, lw=0,
                            label="95% band")
    ax.set_yscale("log")
    what = "latency" if series and all(_is_latency(s) for s in series) else "time per operation"
    ax.set_ylabel(f"{what} (us, median; bars p5..p95)")


def _draw_panel(ax, kind: str, series: Sequence[Series], models: Sequence, curves: Sequence[tuple[str, dict]]) -> None:
    data_c, model_c = colours(series, models)
    (_draw_time if kind == "time" else _draw_busbw)(ax, series, curves, data_c, model_c)
    all_sizes = [s.size_bytes for s in series] + [c["size_bytes"] for _, c in curves]
    size_axis(ax, np.concatenate([np.asarray(a, dtype=float) for a in all_sizes]) if all_sizes else np.array([]))
    ax.grid(True, which="major", alpha=0.3)
    if series or curves:
        ax.legend(fontsize=7, loc="best")


def measurement_figure(series: Sequence[Series], models: Sequence = (), panels: Sequence[str] = ("busbw", "time"),
                       title: str | None = None):
    """The matplotlib Figure with one panel per entry of ``panels`` ("busbw", "time")."""
    if not any(s.size_bytes.size for s in series) and not models:
        raise UsageError("nothing to plot: the result file(s) hold no measured size (a run cut short before its "
                         "first size?)")
    Figure, FigureCanvasAgg = require_matplotlib()
    panels = measured_panels(series, panels)
    latency = bool(series) and all(_is_latency(s) for s in series)
    curves = [(model_label(m), model_curve(m)) for m in models]
    fig = Figure(figsize=(6.4 * len(panels), 4.6), layout="constrained")
    FigureCanvasAgg(fig)
    axes = fig.subplots(1, len(panels), squeeze=False)[0]
    for ax, kind in zip(axes, panels):
        _draw_panel(ax, kind, series, models, curves)
        ax.set_title("bus bandwidth against size" if kind == "busbw" else
                     "latency against size" if latency else "time against size", fontsize=10)
    if title:
        fig.suptitle(wrap_to(title, 6.4 * len(panels) - 0.4, 11), fontsize=11)
    return fig


def render_measurements(series: Sequence[Series], models: Sequence = (), fmt: str = "png",
                        panels: Sequence[str] = ("busbw", "time"), title: str | None = None,
                        dpi: int = 110) -> bytes:
    """Figure bytes (PNG or SVG) of :func:`measurement_figure`."""
    if fmt not in FORMATS:
        raise UsageError(f"unknown plot format {fmt!r}; use one of {', '.join(FORMATS)}")
    fig = measurement_figure(series, models, panels, title)
    buf = io.BytesIO()
    fig.savefig(buf, format=fmt, dpi=dpi, metadata=_metadata(fmt))
    return buf.getvalue()


def _metadata(fmt: str) -> dict:
    # Reproducible files: no creation date in the output.
    return {"Date": None} if fmt == "svg" else {}


def format_from_path(path: Path) -> str:
    fmt = path.suffix.lower().lstrip(".")
    if fmt not in FORMATS:
        raise UsageError(f"cannot tell the plot format from {path.name!r}; name the file .png or .svg")
    return fmt


def log_series(m, label: str) -> Series:
    """A MeasurementSet (nccl-tests, OSU, vTrain log) as plotted: busbw from the time with the
    collective's bus factor at the log's world size (none where the log does not say and it depends on it)."""
    order = np.argsort(m.size_bytes)
    size = np.asarray(m.size_bytes, dtype=float)[order]
    t = np.asarray(m.time_s, dtype=float)[order]
    lo = np.asarray(m.time_low_s, dtype=float)[order] if m.time_low_s is not None else t
    hi = np.asarray(m.time_high_s, dtype=float)[order] if m.time_high_s is not None else t
    ok = np.isfinite(t) & (t > 0)
    factor = busbw_factor(m.collective, m.world_size, math.nan)
    return Series(label=label, collective=m.collective, world_size=m.world_size or 0, size_bytes=size[ok],
                  time_s=t[ok], time_p5_s=np.where(np.isfinite(lo[ok]), lo[ok], t[ok]),
                  time_p95_s=np.where(np.isfinite(hi[ok]), hi[ok], t[ok]), busbw_gbps=size[ok] / t[ok] / 1e9 * factor)


def load_series(paths: Sequence[str | Path]) -> list[Series]:
    """Series of pybench results (with their p5/p95) and of any log ``pybench fit`` reads."""
    from pybench.errors import FileFormatError
    from pybench.io.files import read_json
    from pybench.io.formats import RESULT, schema_of
    from pybench.model.logs import load_measurements
    many = len(paths) > 1
    series = []
    for p in paths:
        try:
            is_result = schema_of(read_json(p)) == RESULT.schema
        except FileFormatError:
            is_result = False  # a text log
        if is_result:
            r = load_checked_result(p)
            series.append(run_series(r, series_label(r, Path(p).stem if many else None)))
            continue
        for m in load_measurements(p):
            world = f"{m.world_size}r" if m.world_size else "?r"
            series.append(log_series(m, mpl_text(f"{m.collective} {m.source} {world} ({Path(p).stem})")))
    return series


def render_series_files(paths: Sequence[str | Path], fmt: str, model_path: str | Path | None = None) -> bytes:
    """The busbw and time figure of result files and logs, with the matching models of ``model_path``."""
    from pybench.model.model_files import load_models
    if not paths:
        raise UsageError("give at least one result file (from `python -m pybench <collective> --json FILE`) or log")
    series = load_series(paths)
    models = []
    if model_path is not None:
        all_models = load_models(model_path)
        models = matching_models(all_models, series)
        if not models:
            have = ", ".join(sorted({m.collective for m in all_models}))
            raise UsageError(f"{model_path}: no model of a plotted collective "
                             f"({', '.join(sorted({s.collective for s in series}))}); the file has: {have}")
    return render_measurements(series, models, fmt=fmt)
