"""The ``compare``, ``plot`` and ``report`` subcommands (registered by pybench.cli.main via add_parsers).

``python -m pybench compare A.json B.json [--fail-on-regression PCT] [--json FILE]``
    Size by size, B against the reference A: change in time and busbw, its 95%
    interval and significance from the raw samples, and a summary line. Exit 0,
    or 1 with --fail-on-regression when a significant slowdown exceeds PCT %.

``python -m pybench plot RESULTS.json... [--model MODEL.json] -o FILE.png|svg [--force]``
    busbw and time against size (log axes), several runs on one figure, the
    fitted model's line and 95% band over the measurements.

``python -m pybench report RESULTS.json... [--model M.json] [--ccr C.json] -o report.html [--force]``
    One self-contained HTML file: environment, tables, plots with models, fit
    reports, and CCR against batch size / scaling efficiency against workers.

Bad input raises a PyBenchError subclass (one line, exit 2).
"""

from __future__ import annotations

import json
import math
import sys
from pathlib import Path

from pybench.cli import argtypes

_percent = argtypes.percent
_fraction = argtypes.fraction()
_noise = argtypes.fraction(allow_zero=True)


def add_parsers(subparsers) -> None:
    """Register ``compare``, ``plot`` and ``report`` on an argparse subparsers object.

    Each subparser sets ``func`` (callable(args) -> int exit status) via set_defaults.
    """
    from pybench.report.compare import DEFAULT_ALPHA, DEFAULT_NOISE

    p = subparsers.add_parser(
        "compare", help="compare two result files size by size, with significance",
        description="Compare run B against reference run A size by size: change in time and busbw, the 95%% "
                    "bootstrap interval of the median ratio and a Mann-Whitney U test on the raw samples. Only "
                    "sizes must match; runs of other backends, dtypes or versions can be compared.")
    p.add_argument("a", metavar="A.json", help="reference (baseline) result")
    p.add_argument("b", metavar="B.json", help="candidate result")
    p.add_argument("--fail-on-regression", type=_percent, default=None, metavar="PCT",
                   help="exit 1 when a significant slowdown exceeds PCT %% (time ratio above 1 + PCT/100)")
    p.add_argument("--alpha", type=_fraction, default=DEFAULT_ALPHA,
                   help=f"significance level over all sizes, Holm-corrected (default {DEFAULT_ALPHA:g})")
    p.add_argument("--noise", type=_noise, default=DEFAULT_NOISE,
                   help=f"changes whose 95%% interval reaches into 1 +- NOISE are not significant "
                        f"(default {DEFAULT_NOISE:g} = {100 * DEFAULT_NOISE:g}%%, run-to-run spread measured "
                        f"here; raise it on noisier machines)")
    p.add_argument("--json", default=None, metavar="FILE", help="also write the comparison as JSON")
    p.add_argument("--force", action="store_true", help="overwrite --json FILE if it exists")
    p.set_defaults(func=run_compare)

    q = subparsers.add_parser(
        "plot", help="plot busbw and time against size, with fitted models",
        description="busbw and time against size on log axes; several runs on one figure; with --model the "
                    "fitted alpha-beta model's line and 95%% band over the measurements. Needs matplotlib.")
    q.add_argument("results", nargs="+", metavar="RESULTS.json", help="pybench result files (--json output)")
    q.add_argument("--model", default=None, metavar="MODEL.json", help="model file from `pybench fit`")
    q.add_argument("-o", "--output", required=True, metavar="FILE.png|svg", help="image to write (.png or .svg)")
    q.add_argument("--force", action="store_true", help="overwrite the output if it exists")
    q.set_defaults(func=run_plot)

    r = subparsers.add_parser(
        "report", help="one self-contained HTML report: tables, plots, models, CCR",
        description="Write one HTML file that needs no network: environment, result tables, bandwidth and "
                    "latency plots with fitted models, the fit reports and, with --ccr, CCR against batch size "
                    "and scaling efficiency against workers. Needs matplotlib.")
    r.add_argument("results", nargs="+", metavar="RESULTS.json", help="pybench result files (--json output)")
    r.add_argument("--model", default=None, metavar="MODEL.json", help="model file from `pybench fit`")
    r.add_argument("--ccr", default=None, metavar="CCR.json", help="CCR file from `pybench ccr ... --json`")
    r.add_argument("--title", default="pybench report", help="title of the report")
    r.add_argument("-o", "--output", required=True, metavar="REPORT.html", help="HTML file to write")
    r.add_argument("--force", action="store_true", help="overwrite the output if it exists")
    r.set_defaults(func=run_report)


def run_compare(args) -> int:
    """Body of ``pybench compare``; returns the exit status."""
    from pybench.io.files import refuse_existing, write_atomic
    from pybench.report.compare import compare_results, run_label
    from pybench.report.plot import load_checked_result
    out = Path(args.json) if args.json else None
    if out is not None:
        refuse_existing(out, args.force)
    a, b = load_checked_result(args.a), load_checked_result(args.b)
    comp = compare_results(a, b, alpha=args.alpha, noise=args.noise, label_a=run_label(a, args.a),
                           label_b=run_label(b, args.b))
    print(comp.table())
    if out is not None:
        write_atomic(out, json.dumps(_finite(comp.to_dict()), indent=1, allow_nan=False) + "\n")
        print(f"# wrote {out}", file=sys.stderr)
    if args.fail_on_regression is not None:
        bad = comp.regressions_over(args.fail_on_regression / 100.0)
        if bad:
            worst = max(bad, key=lambda s: s.time_ratio)
            print(f"pybench: regression: {len(bad)} size(s) significantly slower by more than "
                  f"{args.fail_on_regression:g}% (worst {worst.size_bytes} B: time x{worst.time_ratio:.3f})",
                  file=sys.stderr)
            return 1
    return 0


def _finite(x):
    """JSON has no NaN/inf: undefined figures (a ratio against a zero time) are written as null."""
    if isinstance(x, float):
        return x if math.isfinite(x) else None
    if isinstance(x, dict):
        return {k: _finite(v) for k, v in x.items()}
    if isinstance(x, (list, tuple)):
        return [_finite(v) for v in x]
    return x


def run_plot(args) -> int:
    """Body of ``pybench plot``; returns the exit status."""
    from pybench.report.plot import plot_files
    out = plot_files(args.results, args.output, model_path=args.model, force=args.force)
    print(f"# wrote {out}", file=sys.stderr)
    return 0


def run_report(args) -> int:
    """Body of ``pybench report``; returns the exit status."""
    from pybench.report.html import report_files
    out = report_files(args.results, args.output, model_path=args.model, ccr_path=args.ccr, force=args.force,
                       title=args.title)
    print(f"# wrote {out}", file=sys.stderr)
    return 0
