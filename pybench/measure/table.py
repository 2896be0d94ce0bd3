"""The stdout table: nccl-tests' own, so that scripts written for nccl-tests read it.

Collectives print nccl-tests' 13 columns in its order under its ``out-of-place`` /
``in-place`` header: size (B), count (elements), type, redop, root, then time (us),
algbw, busbw (GB/s) and #wrong, once out of place and once in place. Numbers are
printed at nccl-tests' widths and precisions (:func:`nccl_number`). nccl-tests runs both
blocks and prints ``N/A`` for a figure it did not produce (#wrong without a check, or of an
in-place form with no defined result: all-to-all and send/recv). Every backend measures both
blocks at every size, as nccl-tests does (the record's ``in_place_*`` figures). An in-place block
pybench did not measure (a record from an older pybench) prints ``N/A`` in each of its four cells
the same way, so the row keeps nccl-tests' 13 fields: a reader taking ``$12`` or ``$(NF-1)`` gets
``N/A``, never the out-of-place figure. A run on one buffer (``--in-place`` on nccl) leaves its
out-of-place block blank. pybench's own statistics (p5, p95 time,
iterations, CI of the median) follow only with ``--stats-columns``, and then every unmeasured
block prints ``N/A`` cells so that they keep their positions. The footer starts with nccl-tests' two lines,
byte for byte (``# Out of bounds values : N OK``, ``# Avg bus bandwidth    : X``),
then pybench's own.

Point-to-point tests print OSU's layout instead: ``# Size  Latency (us)`` or
``# Size  Bandwidth (MB/s)`` (MB/s = 1e6 B/s), two columns, as osu_latency, osu_bw
and osu_bibw do; a size that missed the precision is marked ``*``.

Every header says how busy the machine was (load average against the cores, BLAS /
OpenMP threads, CPU governor); when the load exceeded the cores or most sizes missed
the precision, :func:`footer_lines` also prints one line on stderr saying so and what
to do, since such figures measure the other jobs as much as the collective.
"""

from __future__ import annotations

import sys
from typing import Any

from pybench.collectives import NCCL_TESTS_PROGRAMS, NCCL_TESTS_TYPE_NAMES
from pybench.measure.record_tally import MIN_BW_TOLERANCE, precision_met
from pybench.measure.results import RunResult, SizeRecord
from pybench.measure.stopping import MIN_SAMPLES_FOR_CI
from pybench.sizes import format_size


def nccl_number(value: float, width: int) -> str:
    """``value`` right-aligned in ``width`` characters with nccl-tests' precision rule.

    Two decimals while the integer part leaves room, then one, then none, then an
    exponent: a column never grows, so field positions and widths stay those of nccl-tests.
    """
    if value != value:  # nan
        return "nan".rjust(width)
    digits = len(str(int(abs(value)))) if abs(value) >= 1 else 0
    if digits < width - 2:
        return f"{value:{width}.2f}"
    if digits < width - 1:
        return f"{value:{width}.1f}"
    if digits < width + 1:
        return f"{value:{width}.0f}"
    return f"{value:{width}.{1 if width >= 7 else 0}e}"


def _prefix(cells: tuple[str, ...]) -> str:
    size, count, dtype, redop, root = cells
    return f"{size:>12}  {count:>12}  {dtype:>8}  {redop:>6}  {root:>6}"


def _block(time: str, algbw: str, busbw: str, wrong: str) -> str:
    return f"  {time:>7}  {algbw:>6}  {busbw:>6}  {wrong:>6}"


_STATS_NAMES = ("p5", "p95", "iters", "ci")
_STATS_UNITS = ("(us)", "(us)", "", "(±%)")
_STATS_WIDTHS = (7, 7, 6, 7)


def _stats(cells: tuple[str, ...]) -> str:
    return "".join(f"  {c:>{w}}" for c, w in zip(cells, _STATS_WIDTHS))


def nccl_tests_header(stats_columns: bool = False) -> list[str]:
    """nccl-tests' three header lines (the ``out-of-place`` line first), plus pybench's names if asked."""
    extra = (_stats(_STATS_NAMES), _stats(_STATS_UNITS)) if stats_columns else ("", "")
    lines = [
        "# " + f"{'':>10}  {'':>12}  {'':>8}  {'':>6}  {'':>6}           out-of-place                       in-place",
        "# " + f"{'size':>10}  {'count':>12}  {'type':>8}  {'redop':>6}  {'root':>6}"
        + _block("time", "algbw", "busbw", "#wrong") * 2 + extra[0],
        "# " + f"{'(B)':>10}  {'(elements)':>12}  {'':>8}  {'':>6}  {'':>6}"
        + _block("(us)", "(GB/s)", "(GB/s)", "") * 2 + extra[1],
    ]
    return [line.rstrip() for line in lines]


def nccl_tests_row(r: SizeRecord, in_place: bool = False, stats_columns: bool = False) -> str:
    """One data row. ``in_place``: the record was measured in place (its block is the second)."""
    root = str(r.root) if r.root >= 0 else "-1"
    head = _prefix((str(r.size_bytes), str(r.count), NCCL_TESTS_TYPE_NAMES.get(r.dtype, r.dtype), r.redop, root))
    measured = _measured(r.time_s, r.algbw_gbps, r.busbw_gbps, r.wrong, r.check_iters)
    if not in_place and r.in_place_time_s is not None:  # both measured (mpi), as nccl-tests measures them
        checked = r.check_iters if r.in_place_wrong is not None else 0  # (None: an in-place form not checked)
        line = head + measured + _measured(r.in_place_time_s, _or_nan(r.in_place_algbw_gbps),
                                           _or_nan(r.in_place_busbw_gbps), r.in_place_wrong or 0, checked)
    else:
        # The in-place block not measured: N/A cells, as nccl-tests marks a figure it lacks. An out-of-place
        # block not measured stays blank (32 spaces), which pybench's log reader reads as a trace replay's
        # row; with pybench's columns after it, N/A there too so that they keep their positions.
        not_run = _block("N/A", "N/A", "N/A", "N/A") if stats_columns or not in_place else " " * 32
        line = head + (not_run + measured if in_place else measured + not_run)
    if stats_columns:
        line += _stats((nccl_number(r.time_p5_s * 1e6, 7), nccl_number(r.time_p95_s * 1e6, 7), str(r.iterations),
                        _ci_text(r)))
    return line.rstrip()


def _measured(time_s: float, algbw: float, busbw: float, wrong: int, check_iters: int) -> str:
    """One measured block: time, algbw, busbw and #wrong at nccl-tests' widths."""
    block = _block(nccl_number(time_s * 1e6, 7), nccl_number(algbw, 6), nccl_number(busbw, 6),
                   f"{wrong:g}" if check_iters else "")
    # nccl-tests' unchecked cell, one space wider than #wrong's
    return block if check_iters else block[:-8] + "    N/A"


def _or_nan(value: float | None) -> float:
    return float("nan") if value is None else value


def _ci_text(r: SizeRecord) -> str:
    if len(r.samples_s) < MIN_SAMPLES_FOR_CI:
        return "-"  # too few samples for a confidence interval of the median
    return f"{100 * r.ci_rel:.1f}" + ("" if precision_met(r) else "*")


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
    """``# machine: load ... (1/5/15 min) at start, N core(s); BLAS/OpenMP threads ...; governor ...``."""
    m = _machine(env)
    # no " on " in pybench's own lines: health checks take the word after it in nccl-tests' Rank lines for a host
    return (f"# machine: load {_load_text(m.get('load_average_start'))} (1/5/15 min) at start, {m.get('cores', '?')} "
            f"core(s); BLAS/OpenMP threads: {threads_text(m.get('threads'))}; "
            f"CPU governor {m.get('cpu_governor') or 'not readable'}")


def busy_warning(result: RunResult) -> str | None:
    """One line when the figures are not to be trusted as they are, saying what to do; else None."""
    m = _machine(result.environment)
    cores = m.get("cores") if isinstance(m.get("cores"), int) else None
    loads = [x[0] for x in (m.get("load_average_start"), m.get("load_average_end")) if isinstance(x, list) and x]
    busy = cores is not None and bool(loads) and max(loads) > cores
    tally = result.tally()
    noisy = tally.adaptive > 0 and 2 * tally.adaptive_missed > tally.adaptive
    if not (busy or noisy):
        return None
    why, remedy = [], []
    if busy:
        why.append(f"the machine was busy (load {max(loads):.2f} with {cores} core(s))")
        remedy.append("rerun when `uptime` shows a load below the cores")
    if noisy:
        why.append(f"{tally.adaptive_missed} of {tally.adaptive} sizes missed the precision")
        remedy.append("raise --time-budget or --max-iters, or loosen --precision")
    return f"pybench: warning: {' and '.join(why)}, so these figures are noisy; {'; '.join(remedy)}"


def header_lines(result: RunResult, dtypes: list[str] | None = None) -> list[str]:
    """The comment lines above the table: what ran, where, how, on how busy a machine, and the columns;
    ``dtypes``: the element types one table holds (-d all), else the result's own."""
    _Layout.benchmark = result.benchmark
    _Layout.in_place = bool(result.options.get("in_place"))
    _Layout.stats_columns = bool(result.options.get("stats_columns"))
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
    types = f"all ({', '.join(dtypes)})" if dtypes else result.dtype
    return [
        f"# pybench {env.get('pybench_version', '?')}: {result.benchmark}, backend {result.backend}{library}",
        f"# world {result.world_size} ranks, {len(result.hosts)} host(s) [{hosts}], link {result.link_class}",
        f"# dtype {types}, redop {result.redop}, timing {result.timing}, warmup {opts['warmup']}, "
        f"check {opts['check']} iteration(s), {how}",
        f"# cpu {env.get('cpu_model', '?')}; buffers: {opts.get('buffer_allocation', '?')}",
        machine_line(env),
        "#",
        *(_osu_header(result) if _is_p2p(result) else nccl_tests_header(_Layout.stats_columns)),
    ]


def _osu_header(result: RunResult) -> list[str]:
    title = _OSU_TITLES.get(result.benchmark, result.benchmark)
    latency = result.benchmark == "p2p_latency"
    if _Layout.stats_columns:  # OSU's -f: the average, then the least and the most, and the iterations
        unit = "Latency(us)" if latency else "Bandwidth(MB/s)"
        columns = f"{'Avg ' + unit:>20}{'Min ' + unit:>20}{'Max ' + unit:>20}{'Iterations':>12}"
    else:
        columns = f"{'Latency (us)' if latency else 'Bandwidth (MB/s)':>18}"
    return [f"# OSU MPI {title} Test layout, measured by pybench", f"{'# Size':<10}{columns}"]


def osu_row_line(r: SizeRecord, benchmark: str) -> str:
    """One OSU row: size, then latency in us or bandwidth in MB/s (1e6 B/s), as OSU prints them (with ``-f``,
    also the least and the most of the samples and the iterations); ``*`` after a size whose figure missed the
    precision (explained in the footer)."""
    latency = benchmark == "p2p_latency"
    value = r.time_s * 1e6 if latency else r.algbw_gbps * 1e3
    mark = "" if precision_met(r) else " *"
    if not _Layout.stats_columns:
        return f"{r.size_bytes:<10d}{value:>18.2f}" + mark
    # the fastest sample is the least latency and the most bandwidth
    low, high = (r.time_min_s * 1e6, r.time_max_s * 1e6) if latency else \
        (value * r.time_s / r.time_max_s, value * r.time_s / r.time_min_s)
    return f"{r.size_bytes:<10d}{value:>20.2f}{low:>20.2f}{high:>20.2f}{r.iterations:>12d}" + mark


class _Layout:
    """The table being printed: the runner prints a header, then its rows."""

    benchmark = ""
    in_place = False
    stats_columns = False


def row_line(r: SizeRecord, benchmark: str | None = None) -> str:
    """One row, in the layout of ``benchmark`` (default: that of the last header printed)."""
    benchmark = _Layout.benchmark if benchmark is None else benchmark
    if benchmark.startswith("p2p_"):
        return osu_row_line(r, benchmark)
    return nccl_tests_row(r, _Layout.in_place, _Layout.stats_columns)


def average_busbw(result: RunResult) -> float:
    """nccl-tests' ``Avg bus bandwidth``: the mean busbw over every size run (nan when none was)."""
    return result.tally().average_busbw()


def min_bw_failed(result: RunResult) -> bool | None:
    """None without a gate; else whether the average busbw is below 0.9 x the gate, as nccl-tests decides."""
    gate = result.options.get("min_busbw_gbps")
    if gate is None:
        return None
    return not average_busbw(result) >= MIN_BW_TOLERANCE * gate


def _peak_line(result: RunResult) -> str | None:
    """The peak among the sizes whose figure met the precision, or a line saying none did."""
    tally = result.tally()
    if not tally.count:
        return None
    p2p = _is_p2p(result)
    if p2p and result.benchmark == "p2p_latency":
        low = tally.lowest_met or tally.lowest_any
        assert low is not None
        what = f"# Lowest latency: {low.time_s * 1e6:.2f} us at {format_size(low.size_bytes)}"
    else:
        peak = tally.peak_met or tally.peak_any
        assert peak is not None
        what = (f"# Peak bandwidth: {peak.algbw_gbps * 1e3:.2f} MB/s at {format_size(peak.size_bytes)}" if p2p else
                f"# Peak bus bandwidth: {peak.busbw_gbps:.2f} GB/s at {format_size(peak.size_bytes)} "
                f"(algbw {peak.algbw_gbps:.2f} GB/s)")
    if tally.met:
        return what + (f" (of the {tally.met} of {tally.count} sizes that met the precision)"
                       if tally.met < tally.count else "")
    return what + f", but none of the {tally.count} sizes met the precision, so it is as noisy as they are"


def nccl_tests_footer(wrong: int, average: float, gate_failed: bool | None, benchmark: str = "") -> list[str]:
    """nccl-tests' own two lines, byte for byte ("# %-20s : ..."), for the scripts that grep them, and its ``#``;
    then, as nccl-tests from 2.17 prints it, the line that ends ``benchmark``'s test."""
    verdict = "" if gate_failed is None else " FAILED" if gate_failed else " OK"
    program = NCCL_TESTS_PROGRAMS.get(benchmark)
    return [f"# {'Out of bounds values':<20} : {wrong} {'FAILED' if wrong else 'OK'}",
            f"# {'Avg bus bandwidth':<20} : {average:g}{verdict}", "#",
            *([f"# Collective test concluded: {program}", "#"] if program else [])]


def end_load_line(result: RunResult) -> str | None:
    """``# machine: load ... at end``, read when the result is written; None where the load is not recorded."""
    m = result.environment.get("machine")
    if not isinstance(m, dict):
        return None
    end = m.refresh().get("load_average_end") if hasattr(m, "refresh") else m.get("load_average_end")
    return f"# machine: load {_load_text(end)} (1/5/15 min) at end"


def summary_lines(result: RunResult, label: str = "") -> list[str]:
    """pybench's own lines about one result: its peak, the sizes that missed the precision, a run cut short;
    ``label`` (``float64: ``) names the result among several in one table."""
    lines = []
    peak = _peak_line(result)
    if peak:
        lines.append(peak)
    tally = result.tally()
    missed = tally.count - tally.met
    if missed:
        lines.append(f"# * precision not reached at {missed} size(s) within the budget; "
                     "raise --time-budget or --max-iters, or loosen --precision")
    if _is_p2p(result):
        lines.append(f"# Out of bounds values : {tally.wrong} " + ("OK" if tally.wrong == 0 else "FAILED"))
    if result.cut_short:
        lines.append(f"# Run cut short: {result.cut_short}")
    return [f"# {label}{line[2:]}" for line in lines] if label else lines


def footer_lines(result: RunResult) -> list[str]:
    """The lines below the table; also prints :func:`busy_warning` on stderr when there is one."""
    lines = []
    if not _is_p2p(result):
        lines += nccl_tests_footer(result.tally().wrong, average_busbw(result), min_bw_failed(result),
                                   result.benchmark)
    load = end_load_line(result)
    if load:
        lines.append(load)
    lines += summary_lines(result)
    warning = busy_warning(result)
    if warning:
        print(warning, file=sys.stderr, flush=True)
    return lines
