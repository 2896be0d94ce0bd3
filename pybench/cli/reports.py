"""The ``compare``, ``plot`` and ``report`` subcommands (registered by pybench.cli.main via add_parsers).

``python -m pybench compare A.json B.json [--fail-on-regression PCT] [--json FILE]``
    Size by size, B against the reference A: change in time and busbw, its 95%
    interval and significance from the raw samples, and a summary line. Exit 0,
    or 1 with --fail-on-regression when a significant slowdown exceeds PCT %.

``python -m pybench plot INPUT... [--model MODEL.json] -o FILE.png|svg [--force]``
    Results and logs: busbw and time against size, several runs on one figure,
    the fitted model's line and 95% band over the measurements. One CCR,
    pair-matrix or comparison file: its own figure (see pybench.report.figures).

``python -m pybench report RESULTS.json... [--model M] [--ccr C] [--matrix X] [--baseline B] [--world N[,N...]]
[--nodes N[,N...]] -o report.html``
    One self-contained HTML file: a summary paragraph, environment, tables,
    plots with models, fit reports, the comparison with a baseline, CCR per
    strategy, scaling efficiency and the link heatmap. ``--world``/``--nodes``
    give what a log does not say (OSU's rank count), as ``fit`` takes them.

Bad input raises a PyBenchError subclass (one line, exit 2).
"""

from __future__ import annotations

import sys
from pathlib import Path

from pybench.cli import argtypes
from pybench.errors import UsageError

_percent = argtypes.percent
_fraction = argtypes.fraction()
_noise = argtypes.fraction(allow_zero=True)


def _examples(*lines: str) -> str:
    return "examples:\n" + "\n".join(f"  {line}" for line in lines)


def add_parsers(subparsers) -> None:
    """Register ``compare``, ``plot`` and ``report`` on an argparse subparsers object.

    Each subparser sets ``func`` (callable(args) -> int exit status) via set_defaults.
    """
    import argparse

    from pybench.cli.fit_inputs import per_input, ranks
    from pybench.report.compare import DEFAULT_ALPHA, DEFAULT_NOISE
    raw = argparse.RawDescriptionHelpFormatter

    p = subparsers.add_parser(
        "compare", help="compare two result files size by size, with significance", formatter_class=raw,
        description="Compare run B against reference run A size by size: change in time and busbw, the 95% "
                    "bootstrap interval of the median ratio and a Mann-Whitney U test on the raw samples. Only "
                    "sizes must match; runs of other backends, dtypes or versions can be compared.",
        epilog=_examples("pybench compare base.json new.json", "pybench compare base.json new.json "
                         "--fail-on-regression 10 --json cmp.json", "pybench plot cmp.json -o cmp.png"))
    p.add_argument("a", metavar="A", help="reference (baseline): a pybench result, a nccl-tests/OSU/vTrain log or a "
                   "pytest-benchmark save")
    p.add_argument("b", metavar="B", help="candidate, in any of those formats")
    p.add_argument("--fail-on-regression", type=_percent, default=None, metavar="PCT",
                   help="exit 1 when a significant slowdown exceeds PCT %% (time ratio above 1 + PCT/100), at a "
                        "size or over the sweep as a whole (its geometric-mean time, where the sizes' signs say it "
                        "is slower) (default: never exit 1)")
    p.add_argument("--alpha", type=_fraction, default=DEFAULT_ALPHA,
                   help=f"significance level over all sizes, Holm-corrected (default {DEFAULT_ALPHA:g})")
    p.add_argument("--noise", type=_noise, default=DEFAULT_NOISE,
                   help=f"changes whose 95%% interval reaches into 1 +- NOISE are not significant "
                        f"(default {DEFAULT_NOISE:g} = {100 * DEFAULT_NOISE:g}%%, run-to-run spread measured "
                        f"here; raise it on noisier machines)")
    p.add_argument("--json", default=None, metavar="FILE", type=argtypes.output_file,
                   help="also write the comparison as JSON (default: none)")
    p.add_argument("--force", action="store_true", help="overwrite --json FILE if it exists (default off)")
    p.set_defaults(func=run_compare)

    q = subparsers.add_parser(
        "plot", help="plot results and logs (busbw, time), a CCR file, a pair matrix or a comparison",
        formatter_class=raw,
        description="The figure follows from the inputs: pybench results and any log `pybench fit` reads "
                    "(nccl-tests, OSU, vTrain) give busbw (linear) and time against size (log2, labelled), "
                    "with --model's fitted lines and 95% bands in the colour of their data; a CCR file gives "
                    "CCR against batch, one panel per strategy; a pair-matrix file the link heatmap; a "
                    "comparison file the time ratio per size. Needs matplotlib.",
        epilog=_examples("pybench plot ar.json --model model.json -o ar.png", "pybench plot nccl_log.txt "
                         "osu_bw.txt -o logs.svg", "pybench plot ccr.json -o ccr.png",
                         "pybench plot matrix.json -o links.png", "pybench plot cmp.json -o cmp.png"))
    q.add_argument("results", nargs="+", metavar="INPUT",
                   help="result files, logs, or one CCR, pair-matrix or comparison file")
    q.add_argument("--model", default=None, metavar="MODEL.json",
                   help="model file from `pybench fit` (default: no model lines)")
    q.add_argument("-o", "--output", required=True, metavar="FILE.png|svg", help="image to write (.png or .svg)")
    q.add_argument("--force", action="store_true", help="overwrite the output if it exists (default off)")
    q.set_defaults(func=run_plot)

    r = subparsers.add_parser(
        "report", help="one self-contained HTML report: summary, tables, plots, models, CCR, links, comparison",
        formatter_class=raw,
        description="Write one HTML file that needs no network. It opens with a summary (peak busbw, fitted "
                    "alpha and B, the worst size, a verdict), then the environment (load, threads), result "
                    "tables, bandwidth and latency plots with fitted models, the fit reports and, when given, "
                    "the comparison with a baseline, CCR per strategy, scaling efficiency and the link heatmap. "
                    "Needs matplotlib.",
        epilog=_examples("pybench report ar.json -o report.html", "pybench report new.json --baseline base.json "
                         "--model model.json --ccr ccr.json --matrix matrix.json -o report.html",
                         "pybench report osu_allreduce.txt --world 576 --nodes 2 -o report.html   "
                         "# an OSU log, which says neither"))
    r.add_argument("results", nargs="+", metavar="INPUT", help="pybench results, nccl-tests/OSU/vTrain logs, "
                   "pytest-benchmark saves")
    r.add_argument("--model", default=None, metavar="MODEL.json", help="model file from `pybench fit` (default: none)")
    r.add_argument("--ccr", default=None, metavar="CCR.json", help="CCR file from `pybench ccr ... --json` "
                   "(default: none)")
    r.add_argument("--matrix", default=None, metavar="MATRIX.json",
                   help="pair matrix from `pybench p2p --matrix --json` (default: none)")
    r.add_argument("--baseline", default=None, metavar="BASE.json",
                   help="compare the first result with this one, as `pybench compare` (default: none)")
    r.add_argument("--world", type=per_input(ranks), default=None, metavar="N[,N...]",
                   help="rank count, for logs that do not show it (OSU's), as `pybench fit --world`: one for every "
                        "input, or one per input in their order (default: what each log says)")
    r.add_argument("--nodes", type=per_input(ranks), default=None, metavar="N[,N...]",
                   help="nodes the ranks ran on, for logs that do not list their hosts, as `pybench fit --nodes`: "
                        "one for every input, or one per input in their order (default: what each log says)")
    r.add_argument("--collective", default=None,
                   help="collective, for logs that do not name it (one-rank tables, some OSU and vTrain files), as "
                        "`pybench fit --collective` (default: what each log says)")
    r.add_argument("--title", default="pybench report", help="title of the report (default 'pybench report')")
    r.add_argument("-o", "--output", required=True, metavar="REPORT.html", help="HTML file to write")
    r.add_argument("--force", action="store_true", help="overwrite the output if it exists (default off)")
    r.set_defaults(func=run_report)


def run_compare(args) -> int:
    """Body of ``pybench compare``; returns the exit status."""
    from pybench.io.files import null_non_finite, refuse_existing, write_json
    from pybench.report.compare import compare_results, run_label
    from pybench.report.inputs import paired_results
    out = Path(args.json) if args.json else None
    if out is not None:
        refuse_existing(out, args.force, [args.a, args.b])
    pairs, unpaired = paired_results(args.a, args.b)
    for note in unpaired:
        print(f"pybench: compare: {note}", file=sys.stderr)
    comps, wrong = [], 0
    for a, b in pairs:
        comp = compare_results(a, b, alpha=args.alpha, noise=args.noise, label_a=run_label(a, args.a),
                               label_b=run_label(b, args.b))
        if not comp.sizes:  # a gate that compared nothing must not pass
            raise UsageError(f"{args.a} and {args.b} share no measured size of {a.benchmark} {a.dtype}: nothing to "
                             f"compare; measure the same sizes in both")
        for label, run in (("A", a), ("B", b)):
            failed = sum(1 for r in run.records if r.wrong)
            if failed:
                print(f"pybench: compare: {label} ({run_label(run, args.a if label == 'A' else args.b)}) has {failed} "
                      f"size(s) with wrong values (#wrong > 0): their times are not those of a correct "
                      f"{run.benchmark}", file=sys.stderr)
                wrong += failed
        if len(pairs) > 1:
            print(f"# {a.benchmark} {a.dtype}" + (f" {a.redop}" if a.redop not in ("", "none") else ""))
        print(comp.table())
        comps.append(comp)
    if out is not None:
        doc = comps[0].to_dict() if len(comps) == 1 else {"comparisons": [c.to_dict() for c in comps]}
        write_json(out, null_non_finite(doc), args.force)
        print(f"# wrote {out}", file=sys.stderr)
    if args.fail_on_regression is not None:
        bad = [s for c in comps for s in c.regressions_over(args.fail_on_regression / 100.0)]
        whole = [c for c in comps if c.sweep_slower_over(args.fail_on_regression / 100.0)]
        if whole and not bad:  # too few samples per size to test one alone (a log's two halves): the sweep's
            up, down, p = whole[0].sweep_test
            print(f"pybench: regression: the sweep is slower as a whole: {up} of {len(whole[0].sizes)} sizes beyond "
                  f"+{100 * whole[0].noise:g}% and {down} below (sign test p {p:.1e}), geometric-mean time "
                  f"x{whole[0].geomean_time_ratio:.3f}, more than {args.fail_on_regression:g}%", file=sys.stderr)
            return 1
        if bad:
            worst = max(bad, key=lambda s: s.time_ratio)
            print(f"pybench: regression: {len(bad)} size(s) significantly slower by more than "
                  f"{args.fail_on_regression:g}% (worst {worst.size_bytes} B: time x{worst.time_ratio:.3f})",
                  file=sys.stderr)
            return 1
        if wrong:
            return 1  # wrong values fail a check, as in a run (exit 1)
    return 0


def run_plot(args) -> int:
    """Body of ``pybench plot``; returns the exit status."""
    from pybench.report.figures import plot_files
    out = plot_files(args.results, args.output, model_path=args.model, force=args.force)
    print(f"# wrote {out}", file=sys.stderr)
    return 0


def run_report(args) -> int:
    """Body of ``pybench report``; returns the exit status."""
    from functools import partial

    from pybench.cli.fit_inputs import one_per_input, refuse_repeated, with_nodes
    from pybench.report.html import report_files
    refuse_repeated(args.results)
    worlds = one_per_input(args.world, args.results, "--world")
    nodes = one_per_input(args.nodes, args.results, "--nodes")
    out = report_files(args.results, args.output, model_path=args.model, ccr_path=args.ccr, force=args.force,
                       title=args.title, matrix_path=args.matrix, baseline_path=args.baseline, worlds=worlds,
                       adjusts=[None if n is None else partial(with_nodes, nodes=n) for n in nodes],
                       collective=args.collective)
    print(f"# wrote {out}", file=sys.stderr)
    return 0
