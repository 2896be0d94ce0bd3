"""The stdout table, laid out so a nccl-tests user reads it at once.

Columns: size (B), count (elements), type, redop, root, time (us, median of the
slowest rank), algbw and busbw (GB/s, from the median), #wrong, then what
nccl-tests lacks: p5 and p95 time, iterations timed and the CI of the median.
"""

from __future__ import annotations

from pybench.measure.results import RunResult, SizeRecord
from pybench.measure.stopping import MIN_SAMPLES_FOR_CI
from pybench.sizes import format_size

_HEADER = ("size", "count", "type", "redop", "root", "time", "algbw", "busbw", "#wrong", "p5", "p95", "iters", "ci")
_UNITS = ("(B)", "(elements)", "", "", "", "(us)", "(GB/s)", "(GB/s)", "", "(us)", "(us)", "", "(±%)")
_WIDTHS = (12, 12, 9, 6, 5, 10, 8, 8, 7, 10, 10, 7, 7)


def _row(cells: tuple[str, ...]) -> str:
    return "  ".join(c.rjust(w) for c, w in zip(cells, _WIDTHS))


def header_lines(result: RunResult) -> list[str]:
    env = result.environment
    hosts = ", ".join(f"{h}: {n}" for h, n in result.hosts.items())
    opts = result.options
    if opts.get("iters"):
        how = f"fixed {opts['iters']} iterations"
    else:
        how = (f"adaptive to ±{100 * opts['precision']:g}% (95% CI of the median), "
               f"iterations {opts['min_iters']}..{opts['max_iters']}, budget {opts['time_budget_s']:g} s per size")
    # Open MPI: "Open MPI v5.0.11, package: ..."; MPICH: "MPICH Version:\t4.0.2\nMPICH Release date: ..."
    mpi = " ".join(env.get("mpi", {}).get("library", "").splitlines()[:1]).split(",")[0]
    mpi = " ".join(mpi.replace("Version:", "").split())
    return [
        f"# pybench {env.get('pybench_version', '?')}: {result.benchmark}, backend {result.backend} ({mpi})",
        f"# world {result.world_size} ranks on {len(result.hosts)} host(s) [{hosts}], link {result.link_class}",
        f"# dtype {result.dtype}, redop {result.redop}, timing {result.timing}, warmup {opts['warmup']}, "
        f"check {opts['check']} iteration(s), {how}",
        f"# cpu {env.get('cpu_model', '?')}; buffers: {opts.get('buffer_allocation', '?')}",
        "#",
        "# " + _row(_HEADER)[2:],
        "# " + _row(_UNITS)[2:],
    ]


def row_line(r: SizeRecord) -> str:
    root = str(r.root) if r.root >= 0 else "-1"
    if len(r.samples_s) < MIN_SAMPLES_FOR_CI:
        ci = "-"  # too few samples for a confidence interval of the median
    else:
        ci = f"{100 * r.ci_rel:.1f}" + ("" if r.precision_met or r.stop_reason == "fixed" else "*")
    wrong = str(r.wrong) if r.check_iters else "N/A"
    return _row((str(r.size_bytes), str(r.count), r.dtype, r.redop, root, f"{r.time_s * 1e6:.2f}",
                 f"{r.algbw_gbps:.2f}", f"{r.busbw_gbps:.2f}", wrong, f"{r.time_p5_s * 1e6:.2f}",
                 f"{r.time_p95_s * 1e6:.2f}", str(r.iterations), ci))


def footer_lines(result: RunResult) -> list[str]:
    lines = []
    peak = result.peak_busbw()
    if peak is not None:
        lines.append(f"# Peak bus bandwidth: {peak.busbw_gbps:.2f} GB/s at {format_size(peak.size_bytes)} "
                     f"(algbw {peak.algbw_gbps:.2f} GB/s)")
    missed = [r for r in result.records if not r.precision_met and r.stop_reason != "fixed"]
    if missed:
        lines.append(f"# * precision not reached at {len(missed)} size(s) within the budget; "
                     "raise --time-budget or --max-iters, or loosen --precision")
    wrong = result.total_wrong()
    lines.append(f"# Out of bounds values: {wrong} " + ("OK" if wrong == 0 else "FAILED"))
    if result.cut_short:
        lines.append(f"# Run cut short: {result.cut_short}")
    return lines
