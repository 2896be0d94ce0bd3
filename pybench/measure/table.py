"""The stdout table, laid out so a nccl-tests user reads it at once.

Columns: size (B), count (elements), type, redop, root, time (us, median of the
slowest rank), algbw and busbw (GB/s, from the median), #wrong, then what
nccl-tests lacks: p5 and p95 time, iterations timed and the CI of the median.
The footer ends as nccl-tests' does (``# Avg bus bandwidth    : X``), so scripts
written for nccl-tests find their line.

Point-to-point tests print OSU's layout instead: ``# Size  Latency (us)`` or
``# Size  Bandwidth (MB/s)`` (MB/s = 1e6 B/s), two columns, as osu_latency, osu_bw
and osu_bibw do.

Every header says how busy the machine was (load average against the cores, BLAS /
OpenMP threads, CPU governor); when the load exceeded the cores or most sizes missed
the precision, :func:`footer_lines` also prints one line on stderr saying so and what
to do, since such figures measure the other jobs as much as the collective.
"""

from __future__ import annotations

import sys
from typing import Any

from pybench.measure.results import RunResult, SizeRecord
from pybench.measure.stopping import MIN_SAMPLES_FOR_CI
from pybench.sizes import format_size

_HEADER = ("size", "count", "type", "redop", "root", "time", "algbw", "busbw", "#wrong", "p5", "p95", "iters", "ci")
_UNITS = ("(B)", "(elements)", "", "", "", "(us)", "(GB/s)", "(GB/s)", "", "(us)", "(us)", "", "(±%)")
_WIDTHS = (12, 12, 9, 6, 5, 10, 8, 8, 7, 10, 10, 7, 7)


def _row(cells: tuple[str, ...]) -> str:
    return "  ".join(c.rjust(w) for c, w in zip(cells, _WIDTHS))


def _is_p2p(result: RunResult) -> bool:
    return result.benchmark.startswith("p2p_")


# OSU's own titles, so OSU readers (pybench's importer among them) recognise the table.
_OSU_TITLES = {"p2p_latency": "Latency", "p2p_bw": "Bandwidth", "p2p_bibw": "Bi-Directional Bandwidth"}


def threads_text(threads: Any) -> str:
    """BLAS / OpenMP threads as recorded by envinfo.thread_settings, in a few words."""
    if not isinstance(threads, dict):
        return "?"
    pools = threads.get("pools")
    if isinstance(pools, list) and pools:
        return ", ".join(f"{p.get('library') or p.get('user_api')} {p.get('threads')}" for p in pools
                         if isinstance(p, dict))
    variables = threads.get("variables")
    if isinstance(variables, dict) and variables:
        return ", ".join(f"{k}={v}" for k, v in variables.items())
    return "library defaults (no thread variable set)"


def _load_text(load: Any) -> str:
    return " ".join(f"{x:.2f}" for x in load) if isinstance(load, list) and load else "unknown"


def _machine(env: Any) -> dict:
    m = env.get("machine") if isinstance(env, dict) else None
    return m if isinstance(m, dict) else {}


def machine_line(env: dict) -> str:
    """``# machine: load ... on N cores at start; BLAS/OpenMP threads ...; governor ...``."""
    m = _machine(env)
    return (f"# machine: load {_load_text(m.get('load_average_start'))} (1/5/15 min) on {m.get('cores', '?')} "
            f"core(s) at start; BLAS/OpenMP threads: {threads_text(m.get('threads'))}; "
            f"CPU governor {m.get('cpu_governor') or 'not readable'}")


def busy_warning(result: RunResult) -> str | None:
    """One line when the figures are not to be trusted as they are, saying what to do; else None."""
    m = _machine(result.environment)
    cores = m.get("cores") if isinstance(m.get("cores"), int) else None
    loads = [x[0] for x in (m.get("load_average_start"), m.get("load_average_end")) if isinstance(x, list) and x]
    busy = cores is not None and bool(loads) and max(loads) > cores
    adaptive = [r for r in result.records if r.stop_reason != "fixed"]
    missed = [r for r in adaptive if not r.precision_met]
    noisy = bool(adaptive) and 2 * len(missed) > len(adaptive)
    if not (busy or noisy):
        return None
    why, remedy = [], []
    if busy:
        why.append(f"the machine was busy (load {max(loads):.2f} on {cores} core(s))")
        remedy.append("rerun when `uptime` shows a load below the cores")
    if noisy:
        why.append(f"{len(missed)} of {len(adaptive)} sizes missed the precision")
        remedy.append("raise --time-budget or --max-iters, or loosen --precision")
    return f"pybench: warning: {' and '.join(why)}, so these figures are noisy; {'; '.join(remedy)}"


def header_lines(result: RunResult) -> list[str]:
    """The comment lines above the table: what ran, where, how, on how busy a machine, and the columns."""
    _Layout.benchmark = result.benchmark
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
    # Only the mpi backend runs over that MPI; torch/gloo and NCCL use it at most to start ranks.
    library = f" ({mpi})" if result.backend == "mpi" and mpi else ""
    return [
        f"# pybench {env.get('pybench_version', '?')}: {result.benchmark}, backend {result.backend}{library}",
        f"# world {result.world_size} ranks on {len(result.hosts)} host(s) [{hosts}], link {result.link_class}",
        f"# dtype {result.dtype}, redop {result.redop}, timing {result.timing}, warmup {opts['warmup']}, "
        f"check {opts['check']} iteration(s), {how}",
        f"# cpu {env.get('cpu_model', '?')}; buffers: {opts.get('buffer_allocation', '?')}",
        machine_line(env),
        "#",
        *(_osu_header(result) if _is_p2p(result) else ["# " + _row(_HEADER)[2:], "# " + _row(_UNITS)[2:]]),
    ]


def _osu_header(result: RunResult) -> list[str]:
    title = _OSU_TITLES.get(result.benchmark, result.benchmark)
    column = "Latency (us)" if result.benchmark == "p2p_latency" else "Bandwidth (MB/s)"
    return [f"# OSU MPI {title} Test layout, measured by pybench", f"{'# Size':<10}{column:>18}"]


def osu_row_line(r: SizeRecord, benchmark: str) -> str:
    """One OSU row: size, then latency in us or bandwidth in MB/s (1e6 B/s), as OSU prints them."""
    value = r.time_s * 1e6 if benchmark == "p2p_latency" else r.algbw_gbps * 1e3
    return f"{r.size_bytes:<10d}{value:>18.2f}"


class _Layout:
    """The benchmark whose table is being printed: the runner prints a header, then its rows."""

    benchmark = ""


def row_line(r: SizeRecord, benchmark: str | None = None) -> str:
    """One row, in the layout of ``benchmark`` (default: that of the last header printed)."""
    benchmark = _Layout.benchmark if benchmark is None else benchmark
    if benchmark.startswith("p2p_"):
        return osu_row_line(r, benchmark)
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
    """The lines below the table; also prints :func:`busy_warning` on stderr when there is one."""
    lines = []
    m = result.environment.get("machine")
    if isinstance(m, dict):
        end = m.refresh().get("load_average_end") if hasattr(m, "refresh") else m.get("load_average_end")
        lines.append(f"# machine: load {_load_text(end)} (1/5/15 min) at end")
    peak = result.peak_busbw()
    if result.benchmark == "p2p_latency" and result.records:
        low = min(result.records, key=lambda r: r.time_s)
        lines.append(f"# Lowest latency: {low.time_s * 1e6:.2f} us at {format_size(low.size_bytes)}")
    elif peak is not None and _is_p2p(result):
        lines.append(f"# Peak bandwidth: {peak.algbw_gbps * 1e3:.2f} MB/s at {format_size(peak.size_bytes)}")
    elif peak is not None:
        lines.append(f"# Peak bus bandwidth: {peak.busbw_gbps:.2f} GB/s at {format_size(peak.size_bytes)} "
                     f"(algbw {peak.algbw_gbps:.2f} GB/s)")
        # nccl-tests' own line (a mean over the sizes run, so it depends on the sizes chosen), for its scripts
        avg = sum(r.busbw_gbps for r in result.records) / len(result.records)
        lines.append(f"# Avg bus bandwidth    : {avg:g}")
    missed = [r for r in result.records if not r.precision_met and r.stop_reason != "fixed"]
    if missed:
        lines.append(f"# * precision not reached at {len(missed)} size(s) within the budget; "
                     "raise --time-budget or --max-iters, or loosen --precision")
    wrong = result.total_wrong()
    lines.append(f"# Out of bounds values: {wrong} " + ("OK" if wrong == 0 else "FAILED"))
    if result.cut_short:
        lines.append(f"# Run cut short: {result.cut_short}")
    warning = busy_warning(result)
    if warning:
        print(warning, file=sys.stderr, flush=True)
    return lines
