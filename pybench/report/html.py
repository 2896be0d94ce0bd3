"""A single-file HTML report: environment, tables, plots with models, fit reports, CCR.

``python -m pybench report RESULTS.json... [--model M.json] [--ccr C.json] -o report.html``

The file stands alone: images are PNG data: URIs, styles are inline, there is no
script and nothing is fetched from the network, so it can be mailed, attached to
a ticket or opened from a CI artifact. Everything read from an input file is
passed through ``html.escape`` (result files are plain JSON that anyone can
edit), and a Content-Security-Policy that forbids scripts and remote loads makes
a slip there harmless as well.
"""

from __future__ import annotations

import base64
import datetime as _dt
import html
import io
import json
import math
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

from pybench import __version__
from pybench.errors import FileFormatError, UsageError
from pybench.io.files import refuse_existing, write_atomic
from pybench.measure.results import RunResult
from pybench.report.plot import (
    load_checked_result,
    matching_models,
    mpl_text,
    render_measurements,
    require_matplotlib,
    run_series,
    series_label,
)
from pybench.sizes import format_size

# A constant (never from a file), written into a double-quoted attribute as is.
CSP = "default-src 'none'; img-src data:; style-src 'unsafe-inline'; base-uri 'none'; form-action 'none'"
CCR_SCHEMA = "pybench.ccr"

_STYLE = """
body { font-family: system-ui, -apple-system, "Segoe UI", sans-serif; margin: 2em auto; max-width: 1300px;
       color: #1b1b1b; padding: 0 1em; }
h1 { font-size: 1.6em; } h2 { border-bottom: 1px solid #ccc; padding-bottom: .2em; margin-top: 2em; }
table { border-collapse: collapse; font-size: .85em; margin: .5em 0 1.5em; }
th, td { border: 1px solid #ddd; padding: .25em .6em; text-align: right; }
th { background: #f3f3f3; } td.l, th.l { text-align: left; }
pre { background: #f7f7f7; padding: .8em; overflow-x: auto; font-size: .8em; }
img { max-width: 100%; height: auto; border: 1px solid #eee; }
.plots { display: grid; grid-template-columns: repeat(auto-fit, minmax(420px, 1fr)); gap: 1em; }
.plots img { width: 100%; }
.warn { color: #9a4a00; } .bad { color: #b00020; font-weight: bold; } .muted { color: #666; }
"""


def esc(value: Any) -> str:
    """Text for HTML (element content or a quoted attribute)."""
    return html.escape(str(value), quote=True)


def _img(png: bytes, alt: str) -> str:
    return (f'<img alt="{esc(alt)}" src="data:image/png;base64,{base64.b64encode(png).decode("ascii")}">')


def _table(header: Sequence[str], rows: Iterable[Sequence[Any]], left: int = 0) -> str:
    """An HTML table; every cell is escaped; the first ``left`` columns are left-aligned."""
    out = ["<table><thead><tr>"]
    out += [f'<th{" class=l" if k < left else ""}>{esc(h)}</th>' for k, h in enumerate(header)]
    out.append("</tr></thead><tbody>")
    for row in rows:
        out.append("<tr>" + "".join(f'<td{" class=l" if k < left else ""}>{esc(c)}</td>' for k, c in enumerate(row))
                   + "</tr>")
    out.append("</tbody></table>")
    return "".join(out)


def _num(x: Any, fmt: str = ".2f") -> str:
    try:
        v = float(x)
    except (TypeError, ValueError):
        return "-"
    return format(v, fmt) if math.isfinite(v) else "-"


# ---------------------------------------------------------------------------
# sections

def _environment_rows(result: RunResult, source: str) -> list[tuple[str, str]]:
    env = result.environment if isinstance(result.environment, dict) else {}
    build = env.get("build") if isinstance(env.get("build"), dict) else {}
    mpi = env.get("mpi") if isinstance(env.get("mpi"), dict) else {}
    rows = [("benchmark", result.benchmark), ("backend", result.backend),
            ("dtype / redop", f"{result.dtype} / {result.redop}"), ("timing", result.timing),
            ("world size", result.world_size),
            ("hosts (ranks)", ", ".join(f"{h}: {n}" for h, n in dict(result.hosts).items())),
            ("link class", result.link_class), ("started at", result.started_at),
            ("finished", "yes" if result.finished else f"no ({result.cut_short or 'incomplete'})"),
            ("pybench", env.get("pybench_version", "?")), ("python", env.get("python", "?")),
            ("platform", env.get("platform", "?")), ("cpu", env.get("cpu_model", "?")),
            ("MPI library", mpi.get("library") or mpi.get("error") or "?"),
            ("build", ", ".join(f"{k} {v}" for k, v in build.items()) or "?"),
            ("buffers", result.options.get("buffer_allocation", "?")),
            ("huge pages", "on" if result.options.get("huge_pages", True) else "off"),
            ("options", ", ".join(f"{k}={v}" for k, v in result.options.items()
                                  if k not in ("buffer_allocation", "huge_pages"))),
            ("command", " ".join(str(c) for c in result.command))]
    return [(k, str(v)) for k, v in rows]


def _results_table(result: RunResult) -> str:
    rows = []
    for r in sorted(result.records, key=lambda r: r.size_bytes):
        rows.append((format_size(r.size_bytes), r.size_bytes, r.count, r.dtype, r.redop,
                     _num(r.time_s * 1e6), _num(r.time_p5_s * 1e6), _num(r.time_p95_s * 1e6),
                     _num(r.algbw_gbps), _num(r.busbw_gbps), r.wrong if r.check_iters else "N/A", r.iterations,
                     _num(100 * r.ci_rel if r.time_s > 0 else math.nan, ".1f") + ("" if r.precision_met else "*")))
    table = _table(["size", "bytes", "count", "type", "redop", "time (us)", "p5 (us)", "p95 (us)", "algbw (GB/s)",
                    "busbw (GB/s)", "#wrong", "iters", "ci (±%)"], rows)
    peak = result.peak_busbw()
    notes = []
    if peak is not None:
        notes.append(f"Peak bus bandwidth {peak.busbw_gbps:.2f} GB/s at {format_size(peak.size_bytes)}.")
    wrong = result.total_wrong()
    notes.append(f'<span class="bad">{wrong} wrong value(s)</span>' if wrong else "#wrong: 0 OK.")
    if any(not r.precision_met for r in result.records):
        notes.append('<span class="warn">* precision not reached within the time budget.</span>')
    # notes are built from numbers and fixed text only
    return table + "<p>" + " ".join(notes) + "</p>"


def load_ccr(path: str | Path) -> dict:
    """Read a ``pybench ccr --json`` file and check the fields the report uses."""
    try:
        doc = json.loads(Path(path).read_text())
    except OSError as exc:
        raise FileFormatError(f"cannot read {path}: {exc.strerror}") from None
    except ValueError as exc:
        raise FileFormatError(f"{path} is not JSON: {exc}") from None
    if not isinstance(doc, dict) or doc.get("schema") != CCR_SCHEMA:
        got = doc.get("schema") if isinstance(doc, dict) else None
        raise FileFormatError(f"{path}: not a pybench CCR file (schema {got!r}, expected {CCR_SCHEMA!r}); "
                              "write one with `python -m pybench ccr ... --json FILE`")
    if doc.get("schema_version") != 1:
        raise FileFormatError(f"{path}: CCR schema version {doc.get('schema_version')!r} is not supported (reads 1)")
    rows = doc.get("rows")
    if not isinstance(rows, list) or not all(isinstance(r, dict) for r in rows):
        raise FileFormatError(f"{path}: 'rows' must be a list of objects")
    try:
        for r in rows:
            r["world"], r["batch"] = int(r["world"]), int(r["batch"])
            for k in ("ccr", "efficiency_vs_device", "comm_s", "compute_s", "step_s", "samples_per_s"):
                r[k] = float(r[k])
            r["strategy"] = str(r["strategy"])
            if r["world"] < 1 or r["batch"] < 1:
                raise ValueError(f"world {r['world']} and batch {r['batch']} must be at least 1")
    except (KeyError, TypeError, ValueError) as exc:
        raise FileFormatError(f"{path}: a CCR row is missing or has a malformed field: {exc}") from None
    return doc


def render_ccr_plots(doc: dict, dpi: int = 110) -> tuple[bytes, bytes]:
    """(CCR against batch size, scaling efficiency against workers) as PNG bytes."""
    Figure, FigureCanvasAgg = require_matplotlib()
    rows = doc["rows"]

    def lines(key_fields, x_field):
        groups: dict = {}
        for r in rows:
            groups.setdefault(tuple(r[k] for k in key_fields), []).append(r)
        return {k: sorted(v, key=lambda r: r[x_field]) for k, v in sorted(groups.items(), key=lambda kv: str(kv[0]))}

    out = []
    for kind in ("ccr", "efficiency"):
        fig = Figure(figsize=(7.0, 4.4), layout="constrained")
        FigureCanvasAgg(fig)
        ax = fig.subplots()
        if kind == "ccr":
            for k, ((strategy, world), rs) in enumerate(lines(("strategy", "world"), "batch").items()):
                ax.plot([r["batch"] for r in rs], [r["ccr"] for r in rs], "o-", ms=4, color=f"C{k % 10}",
                        label=mpl_text(f"{strategy}, {world} workers"))
            ax.axhline(0.15, color="green", ls=":", lw=1, label="0.15: fits the hardware")
            ax.axhline(0.30, color="red", ls=":", lw=1, label="0.30: communication-bound")
            ax.set_xscale("log", base=2)
            ax.set_xlabel("batch size per replica")
            ax.set_ylabel("CCR = t_comm / (t_comm + t_compute)")
            ax.set_ylim(0, 1)
            ax.set_title("CCR against batch size", fontsize=10)
        else:
            for k, ((strategy, batch), rs) in enumerate(lines(("strategy", "batch"), "world").items()):
                ax.plot([r["world"] for r in rs], [r["efficiency_vs_device"] for r in rs], "o-", ms=4,
                        color=f"C{k % 10}", label=mpl_text(f"{strategy}, batch {batch}"))
            ax.axhline(1.0, color="gray", ls=":", lw=1)
            ax.set_xscale("log", base=2)
            ax.set_xlabel("workers (world size)")
            ax.set_ylabel("scaling efficiency = throughput(N) / (N x throughput(1))")
            ax.set_ylim(0, 1.05)
            ax.set_title("scaling efficiency against workers", fontsize=10)
        ax.grid(True, which="both", alpha=0.3)
        xs = sorted({r["batch" if kind == "ccr" else "world"] for r in rows})
        if xs:
            from matplotlib.ticker import FixedLocator, NullLocator, StrMethodFormatter
            ax.xaxis.set_major_locator(FixedLocator(xs))
            ax.xaxis.set_minor_locator(NullLocator())
            ax.xaxis.set_major_formatter(StrMethodFormatter("{x:g}"))
        if rows:
            ax.legend(fontsize=7, loc="best")
        out.append(_png(fig, dpi))
    return out[0], out[1]


def _png(fig, dpi: int) -> bytes:
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=dpi)
    return buf.getvalue()


def _ccr_section(doc: dict, source: str) -> str:
    ccr_png, eff_png = render_ccr_plots(doc)
    cfg = doc.get("config") if isinstance(doc.get("config"), dict) else {}
    facts = [("file", source), ("parameters", cfg.get("params", "?")), ("sequence", cfg.get("seq", "?")),
             ("GPUs per node", cfg.get("gpus_per_node", "?")),
             ("compute", f"{_num(float(cfg['flops_per_s']) / 1e12 if _is_num(cfg.get('flops_per_s')) else None)} "
                         f"TFLOP/s ({cfg.get('flops_source', '?')})"),
             ("overlap", cfg.get("overlap", "?"))]
    rows = [(r["strategy"], r["world"], r["batch"], r.get("layout", {}).get("tp", "") if isinstance(
                r.get("layout"), dict) else "", _num(r["ccr"], ".3f"), r.get("band", ""),
             _num(r["comm_s"] * 1e3, ".2f"), _num(r["compute_s"] * 1e3, ".2f"), _num(r["step_s"] * 1e3, ".2f"),
             _num(r["samples_per_s"], ".4g"), _num(r["efficiency_vs_device"], ".3f"),
             (r.get("memory") or {}).get("fits", "") if isinstance(r.get("memory"), dict) else "")
            for r in doc["rows"]]
    parts = ["<h2>Communication-to-computation ratio</h2>",
             _table(["input", "value"], facts, left=2),
             '<div class="plots">' + _img(ccr_png, "CCR against batch size")
             + _img(eff_png, "scaling efficiency against workers") + "</div>",
             _table(["strategy", "workers", "batch", "tp", "CCR", "band", "comm (ms)", "compute (ms)", "step (ms)",
                     "samples/s", "efficiency", "memory"], rows, left=1)]
    for key in ("notes", "warnings"):
        items = doc.get(key) if isinstance(doc.get(key), list) else []
        if items:
            parts.append(f"<p><b>{key}</b></p><ul>" + "".join(f"<li>{esc(i)}</li>" for i in items) + "</ul>")
    return "\n".join(parts)


def _is_num(x: Any) -> bool:
    try:
        return math.isfinite(float(x))
    except (TypeError, ValueError):
        return False


# ---------------------------------------------------------------------------
# the document

def build_report(results: Sequence[tuple[RunResult, str]], models: Sequence = (), model_source: str | None = None,
                 ccr: dict | None = None, ccr_source: str | None = None, title: str = "pybench report") -> str:
    """The report as one HTML string.

    Parameters
    ----------
    results : sequence of (RunResult, source name)
    models : AlphaBetaModel objects to draw over the measurements and whose fit reports to show
    ccr : a ``pybench.ccr`` document (see :func:`load_ccr`), optional
    """
    if not results:
        raise UsageError("give at least one result file (from `python -m pybench <collective> --json FILE`)")
    many = len(results) > 1
    series = [run_series(r, series_label(r, src if many else None)) for r, src in results]
    drawn = matching_models(models, series)
    bw_png = render_measurements(series, drawn, fmt="png", panels=("busbw",))
    lat_png = render_measurements(series, drawn, fmt="png", panels=("time",))
    now = _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds")

    body = [f"<h1>{esc(title)}</h1>",
            f'<p class="muted">Generated {esc(now)} by pybench {esc(__version__)} from '
            f"{len(results)} result file(s){', a model file' if models else ''}"
            f"{', a CCR file' if ccr else ''}. Sizes in bytes (K/M/G = 2^10/2^20/2^30); GB/s = 1e9 B/s; "
            "time = median over samples of the slowest rank's time per operation.</p>"]

    body.append("<h2>Environment</h2>")
    columns = [_environment_rows(r, src) for r, src in results]
    keys = [k for k, _ in columns[0]]
    body.append(_table(["", *(src for _, src in results)],
                       [(k, *(dict(col)[k] for col in columns)) for k in keys], left=1 + len(results)))

    body.append("<h2>Bandwidth and latency</h2>")
    if drawn:
        body.append(f"<p>Dashed lines: fitted alpha-beta models with their 95% confidence band"
                    f"{' (' + esc(model_source) + ')' if model_source else ''}.</p>")
    body.append('<div class="plots">' + _img(bw_png, "bus bandwidth against size")
                + _img(lat_png, "time per operation against size") + "</div>")

    body.append("<h2>Measurements</h2>")
    for r, src in results:
        body.append(f"<h3>{esc(r.benchmark)} / {esc(r.backend)} / {esc(r.dtype)} / {esc(r.world_size)} ranks "
                    f'<span class="muted">({esc(src)})</span></h3>')
        body.append(_results_table(r))

    if models:
        body.append("<h2>Fitted models</h2>")
        if model_source:
            body.append(f'<p class="muted">{esc(model_source)}</p>')
        for m in models:
            body.append(f"<pre>{esc(m.report())}</pre>")

    if ccr is not None:
        body.append(_ccr_section(ccr, ccr_source or "ccr"))

    return ("<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
            f'<meta http-equiv="Content-Security-Policy" content="{CSP}">'
            '<meta name="viewport" content="width=device-width, initial-scale=1">'
            f"<title>{esc(title)}</title><style>{_STYLE}</style></head>\n<body>\n"
            + "\n".join(body) + "\n</body></html>\n")


def report_files(result_paths: Sequence[str | Path], output: str | Path, model_path: str | Path | None = None,
                 ccr_path: str | Path | None = None, force: bool = False, title: str = "pybench report") -> Path:
    """Read the inputs, build the report, write it atomically; returns the path."""
    from pybench.model.alpha_beta import load_models
    out = Path(output)
    if out.suffix.lower() not in (".html", ".htm"):
        raise UsageError(f"the report is HTML; name the output .html (got {out.name!r})")
    refuse_existing(out, force)
    require_matplotlib()
    if not result_paths:
        raise UsageError("give at least one result file (from `python -m pybench <collective> --json FILE`)")
    results = [(load_checked_result(p), Path(p).name) for p in result_paths]
    models = load_models(model_path) if model_path is not None else []
    ccr = load_ccr(ccr_path) if ccr_path is not None else None
    text = build_report(results, models, model_source=Path(model_path).name if model_path else None,
                        ccr=ccr, ccr_source=Path(ccr_path).name if ccr_path else None, title=title)
    write_atomic(out, text)
    return out
