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
import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pybench import __version__
from pybench.errors import UsageError
from pybench.io.files import refuse_existing, write_atomic
from pybench.measure.results import RunResult
from pybench.measure.table import threads_text
from pybench.report.ccr_plot import ccr_interval, load_ccr, overlapped, render_ccr_figure, render_efficiency_figure
from pybench.report.compare import Comparison, compare_results, run_label
from pybench.report.compare_plot import render_comparison
from pybench.report.heatmap import load_link_matrix, render_link_heatmap
from pybench.report.plot import (
    load_checked_result,
    matching_models,
    render_measurements,
    require_matplotlib,
    run_series,
    series_label,
)
from pybench.report.summary import summarise
from pybench.sizes import format_size

# A constant (never from a file), written into a double-quoted attribute as is.
CSP = "default-src 'none'; img-src data:; style-src 'unsafe-inline'; base-uri 'none'; form-action 'none'"

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
.plots.single { grid-template-columns: minmax(420px, 820px); }
.plots.single.wide { grid-template-columns: minmax(420px, 1300px); }
.warn { color: #9a4a00; } .bad { color: #b00020; font-weight: bold; } .muted { color: #666; }
.summary { font-size: 1.05em; background: #f4f8fc; border-left: 4px solid #1565c0; padding: .7em 1em; }
.summary .ok { color: #1b5e20; font-weight: bold; }
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
    build = _dict(env.get("build"))
    mpi = _dict(env.get("mpi"))
    machine = _dict(env.get("machine"))
    rows = [("benchmark", result.benchmark), ("backend", result.backend),
            ("dtype / redop", f"{result.dtype} / {result.redop}"), ("timing", result.timing),
            ("world size", result.world_size),
            ("hosts (ranks)", ", ".join(f"{h}: {n}" for h, n in dict(result.hosts).items())),
            ("link class", result.link_class), ("started at", result.started_at),
            ("finished", "yes" if result.finished else f"no ({result.cut_short or 'incomplete'})"),
            ("pybench", env.get("pybench_version", "?")), ("python", env.get("python", "?")),
            ("platform", env.get("platform", "?")), ("cpu", env.get("cpu_model", "?")),
            ("load (1/5/15 min) start / end", f"{_load(machine.get('load_average_start'))} / "
                                               f"{_load(machine.get('load_average_end'))} on "
                                               f"{machine.get('cores', '?')} core(s)" if machine else _UNRECORDED),
            ("BLAS/OpenMP threads", threads_text(machine.get("threads")) if machine else _UNRECORDED),
            ("CPU governor", machine.get("cpu_governor") or "not readable" if machine else _UNRECORDED),
            ("MPI library", mpi.get("library") or mpi.get("error") or "?"),
            ("build", ", ".join(f"{k} {v}" for k, v in build.items()) or "?"),
            ("buffers", result.options.get("buffer_allocation", "?")),
            ("huge pages", "on" if result.options.get("huge_pages", True) else "off"),
            ("options", ", ".join(f"{k}={v}" for k, v in result.options.items()
                                  if k not in ("buffer_allocation", "huge_pages"))),
            ("command", " ".join(str(c) for c in result.command))]
    return [(k, str(v)) for k, v in rows]


_UNRECORDED = "not recorded (a result of an older pybench)"


def _dict(x: Any) -> dict:
    return x if isinstance(x, dict) else {}


def _load(x: Any) -> str:
    return " ".join(_num(v) for v in x) if isinstance(x, list) and x else "?"


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


def _ccr_section(doc: dict, source: str) -> str:
    ccr_png, eff_png = render_ccr_figure(doc), render_efficiency_figure(doc)
    cfg = _dict(doc.get("config"))
    facts = [("file", source), ("parameters", cfg.get("params", "?")), ("sequence", cfg.get("seq", "?")),
             ("GPUs per node", cfg.get("gpus_per_node", "?")),
             ("compute", f"{_num(float(cfg['flops_per_s']) / 1e12 if _is_num(cfg.get('flops_per_s')) else None)} "
                         f"TFLOP/s ({cfg.get('flops_source', '?')})"),
             ("overlap", cfg.get("overlap", "?"))]
    rows = []
    for r in doc["rows"]:
        lo, hi = ccr_interval(r)
        rows.append((r["strategy"], r["world"], r["batch"], _dict(r.get("layout")).get("tp", ""),
                     _num(r["ccr"], ".3f"), f"{_num(lo, '.3f')}..{_num(hi, '.3f')}",
                     _num(r.get("exposed_fraction"), ".3f"), r.get("band", ""), _num(r["comm_s"] * 1e3, ".2f"),
                     _num(r["compute_s"] * 1e3, ".2f"), _num(r["step_s"] * 1e3, ".2f"),
                     _num(r["samples_per_s"], ".4g"), _num(r["efficiency_vs_device"], ".3f"),
                     _dict(r.get("memory")).get("fits", "")))
    what = "exposed fraction (overlap on)" if overlapped(doc) else "CCR"
    parts = ["<h2>Communication-to-computation ratio</h2>",
             _table(["input", "value"], facts, left=2),
             f"<p>One panel per strategy: {what} against batch size, one line per world size, the interval "
             "of the communication time shaded; below 0.15 the strategy fits the hardware, above 0.30 "
             "communication eats the reason to scale.</p>",
             '<div class="plots single wide">' + _img(ccr_png, "CCR against batch size, one panel per strategy")
             + "</div>",
             '<div class="plots single">' + _img(eff_png, "scaling efficiency against workers") + "</div>",
             _table(["strategy", "workers", "batch", "tp", "CCR", "CCR interval", "exposed", "band", "comm (ms)",
                     "compute (ms)", "step (ms)", "samples/s", "efficiency", "memory"], rows, left=1)]
    for key in ("notes", "warnings"):
        items = doc.get(key) if isinstance(doc.get(key), list) else []
        if items:
            parts.append(f"<p><b>{key}</b></p><ul>" + "".join(f"<li>{esc(i)}</li>" for i in items) + "</ul>")
    return "\n".join(parts)


def _matrix_section(doc: dict, source: str) -> str:
    rows = [(p["src"], p["dst"], _num(p["bandwidth_gbps"]), _num(p["latency_s"] * 1e6), p.get("link", ""),
             "slow" if p.get("slow_bandwidth") or p.get("slow_latency") else "") for p in doc["pairs"]]
    return "\n".join(["<h2>Links between GPU pairs</h2>", f'<p class="muted">{esc(source)}</p>',
                      '<div class="plots single">' + _img(render_link_heatmap(doc), "link-matrix heatmap") + "</div>",
                      _table(["from", "to", "bandwidth (GB/s)", "latency (us)", "link", "flag"], rows)])


def _comparison_section(comp: Comparison) -> str:
    rows = [(format_size(s.size_bytes), _num(s.time_a_s * 1e6), _num(s.time_b_s * 1e6), _num(s.time_ratio, ".3f"),
             f"{_num(s.ratio_ci_low, '.3f')}..{_num(s.ratio_ci_high, '.3f')}", _num(100 * s.busbw_change, "+.1f"),
             f"{s.p_holm:.1e}", s.verdict) for s in comp.sizes]
    return "\n".join(["<h2>Comparison with the baseline</h2>",
                      f"<p>A (baseline): {esc(comp.label_a)}<br>B: {esc(comp.label_b)}</p>",
                      '<div class="plots single">' + _img(render_comparison(comp.to_dict()),
                                                   "comparison: time ratio per size with its interval") + "</div>",
                      _table(["size", "time A (us)", "time B (us)", "ratio B/A", "95% interval", "busbw change %",
                              "p (Holm)", "verdict"], rows),
                      f"<p>{esc(comp.summary())}</p>"])


def _is_num(x: Any) -> bool:
    try:
        return math.isfinite(float(x))
    except (TypeError, ValueError):
        return False


# ---------------------------------------------------------------------------
# the document

@dataclass(frozen=True)
class ReportInputs:
    """Everything a report is built from; only ``results`` is required."""

    results: Sequence[tuple[RunResult, str]]
    models: Sequence = ()
    model_source: str | None = None
    ccr: dict | None = None
    ccr_source: str | None = None
    matrix: dict | None = None
    matrix_source: str | None = None
    comparison: Comparison | None = None


def _summary_html(inputs: ReportInputs) -> str:
    s = summarise(inputs.results, inputs.models, inputs.comparison)
    return (f'<p id="summary" class="summary">{esc(s.text())} <span class="{esc(s.verdict_kind)}">'
            f"{esc(s.verdict)}</span></p>")


def _measurement_sections(inputs: ReportInputs) -> list[str]:
    results, models = inputs.results, inputs.models
    many = len(results) > 1
    series = [run_series(r, series_label(r, src if many else None)) for r, src in results]
    drawn = matching_models(models, series)
    body = ["<h2>Environment</h2>"]
    columns = [_environment_rows(r, src) for r, src in results]
    keys = [k for k, _ in columns[0]]
    body.append(_table(["", *(src for _, src in results)],
                       [(k, *(dict(col)[k] for col in columns)) for k in keys], left=1 + len(results)))
    body.append("<h2>Bandwidth and latency</h2>")
    if drawn:
        body.append(f"<p>Dashed lines: fitted alpha-beta models in the colour of their data, with their 95% "
                    f"confidence band{' (' + esc(inputs.model_source) + ')' if inputs.model_source else ''}.</p>")
    body.append('<div class="plots">' + _img(render_measurements(series, drawn, panels=("busbw",)),
                                             "bus bandwidth against size")
                + _img(render_measurements(series, drawn, panels=("time",)), "time per operation against size")
                + "</div>")
    body.append("<h2>Measurements</h2>")
    for r, src in results:
        body.append(f"<h3>{esc(r.benchmark)} / {esc(r.backend)} / {esc(r.dtype)} / {esc(r.world_size)} ranks "
                    f'<span class="muted">({esc(src)})</span></h3>')
        body.append(_results_table(r))
    return body


def build_report(results: Sequence[tuple[RunResult, str]], models: Sequence = (), model_source: str | None = None,
                 ccr: dict | None = None, ccr_source: str | None = None, title: str = "pybench report",
                 matrix: dict | None = None, matrix_source: str | None = None,
                 comparison: Comparison | None = None) -> str:
    """The report as one HTML string.

    Parameters
    ----------
    results : sequence of (RunResult, source name)
    models : AlphaBetaModel objects to draw over the measurements and whose fit reports to show
    ccr : a ``pybench.ccr`` document (see :func:`pybench.report.ccr_plot.load_ccr`), optional
    matrix : a pair-matrix document (see :func:`pybench.report.heatmap.load_link_matrix`), optional
    comparison : the first result compared with a baseline, optional
    """
    if not results:
        raise UsageError("give at least one result file (from `python -m pybench <collective> --json FILE`)")
    inputs = ReportInputs(results, models, model_source, ccr, ccr_source, matrix, matrix_source, comparison)
    now = _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds")
    extras = "".join(what for what, given in ((", a model file", models), (", a CCR file", ccr),
                                              (", a pair matrix", matrix), (", a baseline", comparison)) if given)
    body = [f"<h1>{esc(title)}</h1>", _summary_html(inputs),
            f'<p class="muted">Generated {esc(now)} by pybench {esc(__version__)} from {len(results)} result '
            f"file(s){extras}. Sizes in bytes (K/M/G = 2^10/2^20/2^30); GB/s = 1e9 B/s; "
            "time = median over samples of the slowest rank's time per operation.</p>"]
    body += _measurement_sections(inputs)
    if comparison is not None:
        body.append(_comparison_section(comparison))
    if models:
        body.append("<h2>Fitted models</h2>")
        if model_source:
            body.append(f'<p class="muted">{esc(model_source)}</p>')
        body += [f"<pre>{esc(m.report())}</pre>" for m in models]
    if ccr is not None:
        body.append(_ccr_section(ccr, ccr_source or "ccr"))
    if matrix is not None:
        body.append(_matrix_section(matrix, matrix_source or "pair matrix"))
    return ("<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
            f'<meta http-equiv="Content-Security-Policy" content="{CSP}">'
            '<meta name="viewport" content="width=device-width, initial-scale=1">'
            f"<title>{esc(title)}</title><style>{_STYLE}</style></head>\n<body>\n"
            + "\n".join(body) + "\n</body></html>\n")


def report_files(result_paths: Sequence[str | Path], output: str | Path, model_path: str | Path | None = None,
                 ccr_path: str | Path | None = None, force: bool = False, title: str = "pybench report",
                 matrix_path: str | Path | None = None, baseline_path: str | Path | None = None) -> Path:
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
    comparison = None
    if baseline_path is not None:
        base = load_checked_result(baseline_path)
        comparison = compare_results(base, results[0][0], label_a=run_label(base, Path(baseline_path).name),
                                     label_b=run_label(results[0][0], results[0][1]))
    text = build_report(results, load_models(model_path) if model_path is not None else [],
                        model_source=Path(model_path).name if model_path else None,
                        ccr=load_ccr(ccr_path) if ccr_path is not None else None,
                        ccr_source=Path(ccr_path).name if ccr_path else None, title=title,
                        matrix=load_link_matrix(matrix_path) if matrix_path is not None else None,
                        matrix_source=Path(matrix_path).name if matrix_path else None, comparison=comparison)
    write_atomic(out, text)
    return out
