"""A single-file HTML report: environment, tables, plots with models, fit reports, CCR.

``python -m pybench report RESULTS.json... [--model M.json] [--ccr C.json] -o report.html``

The file stands alone: images are PNG data: URIs, styles are inline, there is no
script and nothing is fetched from the network, so it can be mailed, attached to
a ticket or opened from a CI artifact. This module turns the inputs into plain
values (text, numbers, base64 images); the markup lives in the Jinja2 template
``templates/report.html.j2``, rendered with autoescaping on, so everything read
from an input file (result files are plain JSON that anyone can edit) is escaped
by the template engine. A Content-Security-Policy that forbids scripts and remote
loads makes a slip there harmless as well.
"""

from __future__ import annotations

import base64
import datetime as _dt
import math
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pybench import __version__
from pybench.errors import UsageError
from pybench.io.files import refuse_existing, write_output
from pybench.measure.results import RunResult
from pybench.measure.table import threads_text
from pybench.report.ccr_plot import ccr_interval, load_ccr, overlapped, render_ccr_figure, render_efficiency_figure
from pybench.report.compare import Comparison, compare_results, run_label
from pybench.report.compare_plot import render_comparison
from pybench.report.heatmap import load_link_matrix, render_link_heatmap
from pybench.report.inputs import (
    DEVICE,
    Adjust,
    failed_check,
    import_notes,
    imported_from,
    load_one_result,
    load_results,
    refuse_unknown_worlds,
)
from pybench.report.plot import (
    matching_models,
    measured_panels,
    render_measurements,
    require_matplotlib,
    run_series,
    series_label,
)
from pybench.report.summary import peak_phrase, summarise
from pybench.sizes import format_size

TEMPLATE = "report.html.j2"


@dataclass(frozen=True)
class Image:
    """A figure for the template: written as a data: URI, never fetched."""

    alt: str
    base64: str
    mime: str = "image/png"


def _img(png: bytes, alt: str) -> Image:
    return Image(alt, base64.b64encode(png).decode("ascii"))


def _num(x: Any, fmt: str = ".2f") -> str:
    try:
        v = float(x)
    except (TypeError, ValueError):
        return "-"
    return format(v, fmt) if math.isfinite(v) else "-"


# ---------------------------------------------------------------------------
# sections, as plain values for the template

def _environment_rows(result: RunResult, source: str) -> list[tuple[str, str]]:
    env = result.environment if isinstance(result.environment, dict) else {}
    build = _dict(env.get("build"))
    mpi = _dict(env.get("mpi"))
    machine = _dict(env.get("machine"))
    imported = imported_from(result)
    unrecorded = f"not recorded ({imported} file)" if imported else _UNRECORDED
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
                                               f"{machine.get('cores', '?')} core(s)" if machine else unrecorded),
            ("BLAS/OpenMP threads", threads_text(machine.get("threads")) if machine else unrecorded),
            ("CPU governor", machine.get("cpu_governor") or "not readable" if machine else unrecorded),
            ("MPI library", mpi.get("library") or mpi.get("error") or "?"),
            ("system", _system_text(result, source)),
            ("build", ", ".join(f"{k} {v}" for k, v in build.items()) or "?"),
            ("buffers", result.options.get("buffer_allocation", "?")),
            ("huge pages", unrecorded if imported else "on" if result.options.get("huge_pages", True) else "off"),
            ("options", ", ".join(f"{k}={v}" for k, v in result.options.items()
                                  if k not in ("buffer_allocation", "huge_pages"))),
            ("command", " ".join(str(c) for c in result.command))]
    return [(k, str(v)) for k, v in rows]


_UNRECORDED = "not recorded (a result of an older pybench)"


def _system_text(result: RunResult, source: str) -> str:
    """The machine the run recorded, as the description ``fit`` prices with, or why it is none."""
    from pybench.errors import UsageError
    from pybench.model.system_detect import recorded_system

    imported = imported_from(result)
    if imported:  # no pybench wrote it: what the other tool's file says of the machine, or that it says nothing
        env = _dict(result.environment)
        named = f"; the GPUs its ranks ran on, as it names them: {env[DEVICE]}" if env.get(DEVICE) else ""
        return f"not recorded: another tool's file ({imported}), which records no system description{named}"
    doc = {"environment": result.environment, "hosts": dict(result.hosts)}
    try:
        described = recorded_system(doc, source)
    except UsageError as exc:  # a CPU-only host: what it lacks, in the detector's words
        return str(exc)
    return described.summary() if described is not None else _UNRECORDED


def _dict(x: Any) -> dict:
    return x if isinstance(x, dict) else {}


def _load(x: Any) -> str:
    return " ".join(_num(v) for v in x) if isinstance(x, list) and x else "?"


_RESULT_HEADER = ("size", "bytes", "count", "type", "redop", "time (us)", "p5 (us)", "p95 (us)", "algbw (GB/s)",
                  "busbw (GB/s)", "#wrong", "iters", "ci (±%)")


def _run_section(result: RunResult, source: str) -> dict[str, Any]:
    """One run's table and the notes under it (the template says how a wrong count is shown)."""
    rows = []
    imported = imported_from(result) is not None
    for r in sorted(result.records, key=lambda r: r.size_bytes):
        # (another tool's log prints no percentiles or per-size iterations: its times are one or two a size)
        rows.append((format_size(r.size_bytes), r.size_bytes, r.count, r.dtype, r.redop,
                     _num(r.time_s * 1e6), "n/a" if imported else _num(r.time_p5_s * 1e6),
                     "n/a" if imported else _num(r.time_p95_s * 1e6), _num(r.algbw_gbps), _num(r.busbw_gbps),
                     r.wrong if r.check_iters else "N/A", "n/a" if imported else r.iterations,
                     "n/a" if imported else  # another tool's log prints no interval of its time
                     _num(100 * r.ci_rel if r.time_s > 0 else math.nan, ".1f") + ("" if r.precision_met else "*")))
    return {"benchmark": result.benchmark, "backend": result.backend, "dtype": result.dtype,
            "world_size": result.world_size, "source": source, "header": _RESULT_HEADER, "rows": rows,
            "peak": peak_phrase(result),
            "wrong": result.total_wrong(), "checked": any(r.check_iters for r in result.records),
            "failed_check": failed_check(result), "notes": import_notes(result),
            "imprecise": any(not r.precision_met for r in result.records)}


_CCR_HEADER = ("strategy", "workers", "batch", "tp", "CCR", "CCR interval", "exposed", "band", "comm (ms)",
               "compute (ms)", "step (ms)", "samples/s", "efficiency", "memory")


def _ccr_section(doc: dict, source: str) -> dict[str, Any]:
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
    lists = [(key, doc[key]) for key in ("notes", "warnings") if isinstance(doc.get(key), list) and doc[key]]
    return {"facts": facts, "what": "exposed fraction (overlap on)" if overlapped(doc) else "CCR",
            "ccr_image": _img(render_ccr_figure(doc), "CCR against batch size, one panel per strategy"),
            "efficiency_image": _img(render_efficiency_figure(doc), "scaling efficiency against workers"),
            "header": _CCR_HEADER, "rows": rows, "lists": lists}


def _matrix_section(doc: dict, source: str) -> dict[str, Any]:
    rows = [(p["src"], p["dst"], _num(p["bandwidth_gbps"]), _num(p["latency_s"] * 1e6), p.get("link", ""),
             "slow" if p.get("slow_bandwidth") or p.get("slow_latency") else "") for p in doc["pairs"]]
    return {"source": source, "image": _img(render_link_heatmap(doc), "link-matrix heatmap"),
            "header": ("from", "to", "bandwidth (GB/s)", "latency (us)", "link", "flag"), "rows": rows}


def _comparison_section(comp: Comparison) -> dict[str, Any]:
    rows = [(format_size(s.size_bytes), _num(s.time_a_s * 1e6), _num(s.time_b_s * 1e6), _num(s.time_ratio, ".3f"),
             f"{_num(s.ratio_ci_low, '.3f')}..{_num(s.ratio_ci_high, '.3f')}" if math.isfinite(s.ratio_ci_low)
             else "n/a (one time)", _num(100 * s.busbw_change, "+.1f"),
             f"{s.p_holm:.1e}", s.verdict) for s in comp.sizes]
    return {"label_a": comp.label_a, "label_b": comp.label_b, "summary": comp.summary(),
            "image": _img(render_comparison(comp.to_dict()), "comparison: time ratio per size with its interval"),
            "header": ("size", "time A (us)", "time B (us)", "ratio B/A", "95% interval", "busbw change %",
                       "p (Holm)", "verdict"), "rows": rows}


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


def _measurements(inputs: ReportInputs) -> dict[str, Any]:
    """The environment table, the two plots and one table per run."""
    results, models = inputs.results, inputs.models
    many = len(results) > 1
    series = [run_series(r, series_label(r, src if many else None)) for r, src in results]
    drawn = matching_models(models, series)
    columns = [_environment_rows(r, src) for r, src in results]
    keys = [k for k, _ in columns[0]]
    environment = {"header": ["", *(src for _, src in results)],
                   "rows": [(k, *(dict(col)[k] for col in columns)) for k in keys], "left": 1 + len(results)}
    alt = {"busbw": "bus bandwidth against size", "time": "time per operation against size"}
    images = [_img(render_measurements(series, drawn, panels=(kind,)), alt[kind]) for kind in measured_panels(series)]
    return {"environment": environment, "models_drawn": bool(drawn), "measurement_images": images,
            "runs": [_run_section(r, src) for r, src in results]}


def _context(inputs: ReportInputs, title: str) -> dict[str, Any]:
    """Every value the template shows, as text, numbers and images (no markup)."""
    extras = "".join(what for what, given in ((", a model file", inputs.models), (", a CCR file", inputs.ccr),
                                              (", a pair matrix", inputs.matrix), (", a baseline", inputs.comparison))
                     if given)
    return {"title": title, "summary": summarise(inputs.results, inputs.models, inputs.comparison),
            "generated": _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"),
            "version": __version__, "n_results": len(inputs.results), "extras": extras,
            "model_source": inputs.model_source, **_measurements(inputs),
            "comparison": _comparison_section(inputs.comparison) if inputs.comparison is not None else None,
            "models": [m.report() for m in inputs.models],
            "ccr": _ccr_section(inputs.ccr, inputs.ccr_source or "ccr") if inputs.ccr is not None else None,
            "matrix": (_matrix_section(inputs.matrix, inputs.matrix_source or "pair matrix")
                       if inputs.matrix is not None else None)}


def render_template(context: dict[str, Any], name: str = TEMPLATE) -> str:
    """Render one of the package's templates with autoescaping on.

    Parameters
    ----------
    context : the values the template shows; strings are escaped by the template engine
    name : a file under ``pybench/report/templates``

    Returns
    -------
    str
        The rendered text.
    """
    import jinja2  # here, not at the top: `import pybench` stays light

    env = jinja2.Environment(loader=jinja2.PackageLoader("pybench.report", "templates"),
                             autoescape=True, undefined=jinja2.StrictUndefined, keep_trailing_newline=True)
    return env.get_template(name).render(context)


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
    return render_template(_context(inputs, title))


def report_files(result_paths: Sequence[str | Path], output: str | Path, model_path: str | Path | None = None,
                 ccr_path: str | Path | None = None, force: bool = False, title: str = "pybench report",
                 matrix_path: str | Path | None = None, baseline_path: str | Path | None = None,
                 worlds: Sequence[int | None] | None = None, adjusts: Sequence[Adjust | None] | None = None,
                 collective: str | None = None) -> Path:
    """Read the inputs, build the report, write it atomically; returns the path.

    ``worlds`` and ``adjusts`` (one each per result path) give what a log does not say, as ``pybench fit``'s
    ``--world`` and ``--nodes``, and ``collective`` what no log says, as its ``--collective`` (see
    :func:`pybench.report.inputs.load_results`)."""
    from pybench.model.model_files import load_models
    out = Path(output)
    if out.suffix.lower() not in (".html", ".htm"):
        raise UsageError(f"the report is HTML; name the output .html (got {out.name!r})")
    refuse_existing(out, force)
    require_matplotlib()
    if not result_paths:
        raise UsageError("give at least one result file (from `python -m pybench <collective> --json FILE`)")
    worlds = list(worlds) if worlds is not None else [None] * len(result_paths)
    adjusts = list(adjusts) if adjusts is not None else [None] * len(result_paths)
    if len(worlds) != len(result_paths) or len(adjusts) != len(result_paths):
        raise UsageError(f"give one rank count and one node count per input ({len(result_paths)}), or none")
    results = [(r, Path(p).name) for p, w, a in zip(result_paths, worlds, adjusts)
               for r in refuse_unknown_worlds(load_results(p, w, a, collective), p)]
    comparison = None
    if baseline_path is not None:
        base = load_one_result(baseline_path)
        comparison = compare_results(base, results[0][0], label_a=run_label(base, Path(baseline_path).name),
                                     label_b=run_label(results[0][0], results[0][1]))
    text = build_report(results, load_models(model_path) if model_path is not None else [],
                        model_source=Path(model_path).name if model_path else None,
                        ccr=load_ccr(ccr_path) if ccr_path is not None else None,
                        ccr_source=Path(ccr_path).name if ccr_path else None, title=title,
                        matrix=load_link_matrix(matrix_path) if matrix_path is not None else None,
                        matrix_source=Path(matrix_path).name if matrix_path else None, comparison=comparison)
    write_output(out, text, force)
    return out
