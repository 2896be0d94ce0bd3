"""Command line: ``python -m pybench <command> ...``.

Subcommands are an argparse dispatch table (as pyperf does). Every error a user
can cause is a PyBenchError printed as one line on stderr with exit code 2;
argparse's own multi-line usage errors are turned into the same one line.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from pybench import __version__
from pybench.cli import argtypes, compat_flags
from pybench.cli import gpu as cli_gpu
from pybench.cli import models as cli_models
from pybench.cli import nccl_tests_bin as cli_nccl_tests_bin
from pybench.cli import planning as cli_planning
from pybench.cli import profile as cli_profile
from pybench.cli import recover as cli_recover
from pybench.cli import reports as cli_reports
from pybench.cli import system as cli_system
from pybench.cli.parser import Parser, run, subcommands
from pybench.collectives import COLLECTIVES, DTYPES, OPS, canonical_dtype, canonical_op
from pybench.errors import BackendUnavailable, UsageError
from pybench.sizes import parse_sizes

if TYPE_CHECKING:
    from pybench.measure.stopping import StopRule

# pybench.measure is imported where a measuring command needs it: plan, ccr, fit and the reports do not,
# and they should not pay for it at start-up.

_precision = argtypes.fraction()
_positive_int, _nonneg_int = argtypes.positive_int, argtypes.nonneg_int
_positive_float, _nonneg_float = argtypes.positive_float, argtypes.nonneg_float


def _examples(*lines: str) -> str:
    return "examples:\n" + "\n".join(f"  {line}" for line in lines)


_COLLECTIVE_EXAMPLES = {
    "allreduce": ("pybench allreduce --sizes 1M:1G", "pybench allreduce -b 8 -e 1M -f 2 -n 20 -w 5 -c 1   "
                  "# nccl-tests' options", "pybench allreduce --np 4 -o max --json ar.json"),
    "broadcast": ("pybench broadcast --sizes 1K:64M:4 --root 1", "pybench broadcast -b 1M -e 1G -f 4 -r 1"),
}


def _collective_epilog(name: str) -> str:
    lines = _COLLECTIVE_EXAMPLES.get(name, (f"pybench {name} --sizes 1K:64M:4", f"pybench {name} -b 8 -e 128M -f 2 "
                                            f"-n 20 -w 5 -c 1   # nccl-tests' options", f"pybench {name} --np 4 "
                                            f"-d bf16 --json {name}.json"))
    return _examples(*lines)


def _add_size_options(p: argparse.ArgumentParser, default_sizes: str, osu: bool = False) -> None:
    g = p.add_argument_group("sizes (bytes; K/M/G = 2^10/2^20/2^30)")
    g.add_argument("--sizes", "-s", default=None,
                   help=f"LO:HI (powers of two), LO:HI:FACTOR, LO:HI:+STEP or a list 8,1K,1M (default {default_sizes})")
    g.add_argument("-b", "--minbytes", default=None, metavar="SIZE",
                   help="nccl-tests: smallest size (default 32M when -e/-f/-i are given; not with --sizes)")
    g.add_argument("-e", "--maxbytes", default=None, metavar="SIZE",
                   help="nccl-tests: largest size (default 32M when -b/-f/-i are given)")
    # On p2p, -f and -i are OSU's (full format, iterations): the step options keep their long names.
    g.add_argument(*(() if osu else ("-f",)), "--stepfactor", type=_positive_int, default=None, metavar="FACTOR",
                   help="nccl-tests: multiply the size by FACTOR each step (default 1: add the step instead)")
    g.add_argument(*(() if osu else ("-i",)), "--stepbytes", default=None, metavar="SIZE",
                   help="nccl-tests: add SIZE each step when the factor is 1 (default 1M)")
    p.set_defaults(default_sizes=default_sizes)


def _add_measure_options(p: argparse.ArgumentParser, timings: tuple[str, ...], osu: bool = False) -> None:
    m = p.add_argument_group("how to measure")
    m.add_argument("--timing", choices=timings, default=None,
                   help="batched: ops back to back, time / n (nccl-tests' way); per-op: each op timed alone after "
                        "a barrier, giving a distribution"
                        + ("; graph (nccl only): K ops captured in a CUDA graph and replayed" if "graph" in timings
                           else "")
                        + ("; host (nccl only): nccl-tests' own definition, the host clock around K ops and one "
                           "stream synchronisation, averaged over ranks; host-graph (nccl only): the same clock "
                           "around one replay of a CUDA graph of the K ops, as nccl-tests -G" if "host" in timings
                           else "")
                        + " (default batched)")
    m.add_argument("-n", "--iters", type=_positive_int, default=None, metavar="N",
                   help="fixed number of timed iterations per size, as nccl-tests' -n (default: adaptive, see "
                        "--precision)")
    m.add_argument("--precision", type=_precision, default=None,
                   help="adaptive: stop when the 95%% CI of the median is within this fraction of it (default 2%%)")
    m.add_argument("--min-iters", type=_positive_int, default=5, help="fewest timed iterations per size (default 5)")
    m.add_argument("--max-iters", type=_positive_int, default=20000,
                   help="most timed iterations per size (default 20000)")
    m.add_argument("--time-budget", type=_positive_float, default=1.0, metavar="SECONDS",
                   help="measuring time per size after which the adaptive rule stops (default 1.0)")
    m.add_argument("-w", "--warmup", "--warmup_iters", dest="warmup", type=_nonneg_int, default=5,
                   help="untimed operations per size first (default 5)")
    m.add_argument(*(() if osu else ("-c",)), "--check", type=_nonneg_int, default=2,
                   help="iterations whose output every rank verifies exactly (default 2; 0 disables; nccl-tests' "
                        "-c 1 checks one)")
    m.add_argument("--timeout", *(() if osu else ("-T",)), type=argtypes.timeout_seconds, default=30.0,
                   metavar="SECONDS",
                   help="abort the run when one operation makes no progress for this long, naming the rank that "
                        "stopped answering (default 30; 0 or inf disables). Raise it for huge messages on slow links: "
                        "1 GiB at 200 Mbit/s takes about 43 s")
    m.add_argument("--huge-pages", choices=("on", "off"), default="on",
                   help="transparent huge pages for buffers >= 2 MiB (default on, as numpy); moves large-message "
                        "results by 20-30%%, so match it when comparing with another tool")


def _add_run_options(p: argparse.ArgumentParser, default_sizes: str, timings: tuple[str, ...],
                     osu: bool = False) -> None:
    _add_size_options(p, default_sizes, osu)
    g = p.add_argument_group("where to run")
    g.add_argument("--np", "--nprocs", dest="nprocs", type=_positive_int, default=2, metavar="N",
                   help="ranks to start when run stand-alone (default 2); ignored under mpirun/srun/torchrun")
    g.add_argument("--oversubscribe", action="store_true", default=None,
                   help="allow more ranks than cores, each waiting for a core (default: up to 8 per core, with a "
                        "warning past the cores)")
    g.add_argument("--backend", default=None,
                   help="nccl (GPU buffers), mpi (host buffers over MPI) or torch (torch.distributed) (default: nccl "
                        "where a GPU and NCCL are usable, else mpi with one line on stderr saying so)")
    _add_measure_options(p, timings, osu)
    o = p.add_argument_group("output")
    o.add_argument("--json", dest="json", type=Path, default=None, metavar="FILE",
                   help="pybench's versioned JSON with raw samples, journaled after every size and written whole "
                        "at growing intervals and at the end (default: none; "
                        "nccl-tests' own layout: -J)")
    o.add_argument("--csv", type=Path, default=None, metavar="FILE",
                   help="one row per size, written with the JSON (default: none)")
    o.add_argument("--force", action="store_true", help="overwrite existing output files (default off)")
    o.add_argument("--stats-columns", action="store_true", default=False,
                   help="print pybench's p5, p95, iterations and CI after the table's own columns (always in the "
                        "JSON and CSV files) (default off)")
    o.add_argument("--min-busbw", type=_positive_float, default=None, metavar="GBPS",
                   help="exit 1 with a one-line reason when the average busbw is below 0.9 x GBPS, as nccl-tests "
                        "gates with NCCL_TESTS_MIN_BW, which is read too (default: no gate)")


def _sizes(args) -> tuple[int, ...]:
    """--sizes, or nccl-tests' -b/-e/-f/-i; never both."""
    aliases = {"-b": args.minbytes, "-e": args.maxbytes, "-f": args.stepfactor, "-i": args.stepbytes}
    given = [flag for flag, value in aliases.items() if value is not None]
    if given and args.sizes is not None:
        raise UsageError(f"--sizes and {'/'.join(given)} both give the sizes; use --sizes {args.sizes} or "
                         f"{' '.join(given)}, not both")
    if given:
        return tuple(argtypes.nccl_tests_sizes(args.minbytes, args.maxbytes, args.stepfactor, args.stepbytes))
    return tuple(parse_sizes(args.sizes if args.sizes is not None else args.default_sizes))


def _timing(args) -> str:
    graphs = getattr(args, "graph_launches", 0) or 0
    if graphs and args.timing not in (None, "graph"):
        raise UsageError(f"-G {graphs} asks for CUDA graph timing but --timing is {args.timing}; give one of them")
    return "graph" if graphs else (args.timing or "batched")


def _stop_rule(args) -> StopRule:
    from pybench.measure.stopping import StopRule
    if args.iters is not None and args.precision is not None:
        raise UsageError("-n/--iters and --precision are exclusive: give a fixed count or a precision, not both")
    return StopRule(precision=None if args.iters else (args.precision or 0.02), fixed_iters=args.iters,
                    min_iters=args.min_iters, max_iters=args.max_iters, budget_s=args.time_budget)


def _check_backend(args) -> None:
    """Unknown backend names are bad input; whether a known one can run is decided later."""
    from pybench.measure.backends import BACKENDS, NOT_YET
    if args.backend is None:
        return
    if args.backend in NOT_YET:
        raise BackendUnavailable(NOT_YET[args.backend])
    if args.backend not in BACKENDS:
        raise UsageError(f"unknown backend {args.backend!r}; known: {', '.join(BACKENDS)}")
    if _timing(args) == "graph" and args.backend != "nccl":
        raise UsageError("--timing graph (-G) captures CUDA graphs: it needs --backend nccl")
    if _timing(args) in ("host", "host-graph") and args.backend != "nccl":
        raise UsageError(f"--timing {_timing(args)} is nccl-tests' host-clock timing of GPU streams: it needs "
                         "--backend nccl (the mpi backend's batched timing already uses the host clock)")


def _collective_plans(args) -> list:
    from pybench.measure.benchmark import BenchConfig
    from pybench.measure.results import OutputFiles
    from pybench.measure.runner import RunPlan
    # nccl-tests' -d all: one sweep per type, one file per type when files are asked for
    dtypes = list(DTYPES) if args.dtype.strip().lower() == "all" else [canonical_dtype(args.dtype)]
    plans = []
    for dtype in dtypes:
        sizes = _sizes(args)
        if _nccl_tests_sizes_given(args):
            sizes = tuple(compat_flags.round_down_to_elements(list(sizes), DTYPES[dtype], dtype))
        cfg = BenchConfig(benchmark=args.command, sizes=sizes, dtype=dtype,
                          op=canonical_op(getattr(args, "op", "sum")), root=getattr(args, "root", 0),
                          timing=_timing(args), stop=_stop_rule(args),
                          warmup=args.warmup, check_iters=args.check, huge_pages=args.huge_pages == "on")
        n = len(dtypes)
        plans.append(RunPlan(cfg, OutputFiles(_per_test(args.json, dtype, n), _per_test(args.csv, dtype, n)),
                             compat_flags.min_busbw_gate(args.min_busbw), stats_columns=args.stats_columns,
                             nccl_tests_json=_path(args.nccl_tests_json),  # (-d all: one file, as nccl-tests)
                             flag_notes=tuple(getattr(args, "flag_notes", ()))))
    return plans


def _outputs_apart(plans) -> None:
    """UsageError, before anything runs, when an output is '-' or two outputs of the run name one file (--json
    and --csv, -J, a test listed twice): the second write would destroy the first, or fail after measuring."""
    seen: dict[Path, str] = {}
    for plan in plans:
        for flag, path in (("--json", plan.outputs.json_path), ("--csv", plan.outputs.csv_path),
                           ("-J", plan.nccl_tests_json)):
            if path is None:
                continue
            if str(path) == "-":
                raise UsageError(f"{flag} -: measuring commands write files, not stdout; give a file name")
            if flag == "-J":  # it never overwrites (FILE.0 beside an existing FILE): not beside a device either
                from pybench.io.files import refuse_non_regular
                refuse_non_regular(Path(path))
            key = Path(path).absolute()
            if key in seen and not (flag == seen[key] == "-J"):  # (-d all's tests share one -J file)
                raise UsageError(f"{flag} {path} is also this run's {seen[key]} file: give each output its own file "
                                 f"(or list each test once)")
            seen[key] = flag


def _path(text: str | None) -> Path | None:
    return None if text is None else Path(text)


def _nccl_tests_sizes_given(args) -> bool:
    return any(v is not None for v in (args.minbytes, args.maxbytes, args.stepfactor, args.stepbytes))


def _p2p_plans(args) -> list:
    from pybench.measure.benchmark import BenchConfig
    from pybench.measure.p2p_tests import parse_p2p_tests
    from pybench.measure.results import OutputFiles
    from pybench.measure.runner import RunPlan
    tests = parse_p2p_tests(args.test)
    latency_only = all(t.benchmark == "p2p_latency" for t in tests)
    if args.window is not None and latency_only:
        raise UsageError(f"--window/-W {args.window} sets the messages in flight of the bw and bibw tests; the latency "
                         "test sends one at a time: drop it or add --test bw")
    # --min-busbw gates the bandwidth tests (NCCL_TESTS_MIN_BW is nccl-tests', for the collectives)
    if args.min_busbw is not None and latency_only:
        raise UsageError("the latency test prints latency, not bandwidth: --min-busbw gates bandwidth; use --test bw "
                         "or --test bibw with it, or drop it")
    plans = []
    for t in tests:
        cfg = BenchConfig(benchmark=t.benchmark, sizes=_sizes(args), timing=_timing(args),
                          stop=_stop_rule(args), warmup=args.warmup, check_iters=args.check,
                          window=args.window if args.window is not None else 64,
                          huge_pages=args.huge_pages == "on")
        plans.append(RunPlan(cfg, OutputFiles(_per_test(args.json, t.name, len(tests)),
                                              _per_test(args.csv, t.name, len(tests))),
                             None if t.benchmark == "p2p_latency" else args.min_busbw,
                             stats_columns=bool(args.stats_columns)))
    return plans


def _per_test(path: Path | None, test: str, n_tests: int) -> Path | None:
    # Several tests in one run write one file each: out.json -> out.latency.json.
    if path is None or n_tests == 1:
        return path
    return path.with_name(f"{path.stem}.{test}{path.suffix}")


def _run_measurement(args) -> int:
    argv = args.argv
    from pybench.measure.launch import check_rank_count, spawn_local_ranks, under_launcher
    from pybench.measure.runner import fit_plans, run_as_rank
    if getattr(args, "matrix", False):
        return cli_gpu.run_p2p_matrix(args)
    if args.command in COLLECTIVES:
        compat_flags.apply_nccl_tests_flags(args, under_launcher())
    else:
        compat_flags.apply_osu_flags(args)
    _check_backend(args)
    cli_gpu.apply_gpu_options(args)
    plans = _collective_plans(args) if args.command in COLLECTIVES else _p2p_plans(args)
    if args.backend == "torch":
        # torch missing, or a test gloo lacks: one line here, not one per rank through mpiexec
        from pybench.measure.backends.torch import check_config, import_torch
        import_torch()
        for plan in plans:
            check_config(plan.config)
    nccl_lib = getattr(args, "nccl_lib", None)
    # The point-to-point tests are OSU's, over MPI; GPU pairs are `p2p --matrix`.
    requested = args.backend or ("mpi" if args.command == "p2p" else None)
    if under_launcher():
        backend = requested or cli_gpu.select_backend(None, nccl_lib)[0]
        compat_flags.refuse_options_without_effect(args, backend)
        return run_as_rank(plans, argv, args.force, backend, args.timeout)
    backend, fallback_note = cli_gpu.select_backend(requested, nccl_lib)
    compat_flags.check_gpus_for_backend(args, backend, cli_gpu.nccl_unavailable_reason(nccl_lib)
                                        if getattr(args, "ngpus", None) and backend != "nccl" else None)
    compat_flags.refuse_options_without_effect(args, backend)
    if _timing(args) == "graph" and backend != "nccl":
        raise UsageError("--timing graph (-G) captures CUDA graphs: it needs a GPU and the nccl backend")
    if _timing(args) in ("host", "host-graph") and backend != "nccl":
        raise UsageError(f"--timing {_timing(args)} is nccl-tests' host-clock timing of GPU streams: it needs a GPU "
                         "and the nccl backend")
    # Stand-alone: catch bad input here, before any rank starts. With NCCL one
    # process drives every local GPU; otherwise pybench starts --np MPI ranks.
    # Sizes are rounded to the world here only to validate them: the ranks round them
    # again and rank 0 says so, once, on stderr and in the header and the file.
    gpus = cli_gpu.local_gpus(args) if backend == "nccl" else None
    world = len(gpus) if gpus is not None else args.nprocs
    fit_plans(plans, world, backend, world, gpus)
    _outputs_apart(plans)
    for plan in plans:
        plan.outputs.check_writable(args.force)
    if backend != "nccl":
        check_rank_count(args.nprocs, args.oversubscribe)  # a count this host cannot run: one line, before any note
    if fallback_note:
        print(fallback_note, file=sys.stderr)
    if backend != "nccl":
        _warn_oversubscribed(args.nprocs)
    if args.command.startswith("p2p") and len(plans) > 1 and args.json:
        names = ", ".join(str(p.outputs.json_path) for p in plans)
        print(f"pybench: writing one JSON file per test: {names}", file=sys.stderr)
    if backend == "nccl":
        return run_as_rank(plans, argv, args.force, "nccl", args.timeout)
    files = [p for plan in plans for p in (plan.outputs.json_path,) if p is not None]
    return spawn_local_ranks(args.nprocs, argv, result_files=files, oversubscribe=args.oversubscribe)


def _warn_oversubscribed(nprocs: int) -> None:
    from pybench.measure.envinfo import usable_cores
    cores = usable_cores()
    if nprocs > cores:
        print(f"pybench: warning: {nprocs} ranks on {cores} core(s): ranks wait for a core, so the times include "
              f"that wait; use --np {cores} or fewer (nccl-tests' -n is the iteration count here too)",
              file=sys.stderr)


def _cmd_env(args) -> int:
    from pybench.measure.envinfo import environment, optional_version
    from pybench.measure.launch import find_launcher, under_launcher
    from pybench.measure.table import machine_line
    env = environment()
    try:
        launcher = find_launcher()
        env["launcher"] = {"path": launcher.path, "flavour": launcher.flavour}
    except (BackendUnavailable, UsageError) as exc:  # (a bad PYBENCH_MPIEXEC is this report's to show)
        env["launcher"] = {"error": str(exc)}
    env["under_launcher"] = under_launcher()
    nccl_reason = cli_gpu.nccl_unavailable_reason()
    env["torch_version"] = optional_version("torch")  # from its metadata: importing torch takes seconds
    env["backends"] = {"mpi": env["mpi"].get("available", False), "nccl": nccl_reason is None,
                       "torch": env["torch_version"] is not None}
    if nccl_reason:
        env["nccl_unavailable"] = nccl_reason
    if args.json == "-":
        print(json.dumps(env, indent=1))
        return 0
    if args.json:
        from pybench.io.files import refuse_existing, write_json
        refuse_existing(args.json, args.force)
        write_json(args.json, env, args.force)
        print(f"# wrote {args.json}", file=sys.stderr)
        return 0
    gpu = env["gpu"]
    lines = [
        f"pybench {env['pybench_version']} (Python {env['python']}, {env['platform']})",
        f"cpu:      {env['cpu_model']}",
        f"mpi:      {env['mpi'].get('library') or env['mpi'].get('error')}",
        f"launcher: {env['launcher'].get('path', env['launcher'].get('error'))} "
        f"({env['launcher'].get('flavour', '-')})",
        f"build:    MPI {env['build'].get('mpi', '?')}, CUDA module {env['build'].get('cuda_module', '?')} "
        f"(architectures {env['build'].get('cuda_architectures') or '-'})",
    ]
    if gpu.get("device_count"):
        for d in gpu["devices"]:
            lines.append(f"gpu {d['index']}:    {d['name']} ({d['total_memory_bytes'] / 2**30:.0f} GiB, "
                         f"sm {d['compute_capability']})")
    else:
        lines.append(f"gpu:      none ({gpu.get('no_gpu_reason')})")
    from pybench.measure.system_probe import probe_summary
    lines.append(f"system:   {probe_summary(env['system'])} (`pybench system --detect --evidence` says from where)")
    torch = f" {env['torch_version']}" if env["torch_version"] else ""
    lines.append("backends: " + ", ".join(f"{k} {'yes' if v else 'no'}{torch if k == 'torch' and v else ''}"
                                          for k, v in env["backends"].items()))
    lines.append(machine_line(env).lstrip("# ").replace("machine: ", "machine:  ", 1).replace(" at start", ""))
    print("\n".join(lines))
    return 0


def _add_collective_parser(sub, name: str, coll) -> None:
    p = sub.add_parser(name, help=coll.description, description=f"{name}: {coll.description}.",
                       epilog=_collective_epilog(name), formatter_class=argparse.RawDescriptionHelpFormatter)
    w = p.add_argument_group("what to run")
    w.add_argument("-d", "--dtype", "--datatype", dest="dtype", default="float32",
                   help=f"{', '.join(DTYPES)}, or all: one sweep each, as nccl-tests' -d all (default float32)")
    if coll.reduces:
        w.add_argument("-o", "--op", default="sum", help=f"reduction op: {', '.join(OPS)} (default sum)")
    else:  # nccl-tests takes -o for every test: a script passing one set of flags to each must run here too
        w.add_argument("-o", "--op", dest="unused_op", default=None,
                       help=f"nccl-tests' reduction op, which {name} does not use: checked, then left aside "
                            f"(default none)")
    if name == "broadcast":
        w.add_argument("-r", "--root", type=_nonneg_int, default=0, help="root rank (default 0)")
    else:  # (as -o: nccl-tests takes it for every test)
        w.add_argument("-r", "--root", dest="unused_root", type=_nonneg_int, default=None,
                       help=f"nccl-tests' root rank, which {name} does not have: checked, then left aside "
                            f"(default none)")
    _add_run_options(p, "1K:64M:4", ("batched", "per-op", "graph", "host", "host-graph"))
    compat_flags.add_nccl_tests_flags(p)
    p.add_argument("-G", "--cudagraph", dest="graph_launches", type=_nonneg_int, default=0, metavar="N",
                   help="nccl-tests: N > 0 times CUDA graphs of the operations (--timing graph, nccl only) "
                        "(default 0: no graphs)")
    cli_gpu.add_gpu_run_options(p)
    p.set_defaults(func=_run_measurement)


def build_parser() -> argparse.ArgumentParser:
    parser = Parser(prog="pybench", description="Communication microbenchmarks and models for distributed training.")
    parser.add_argument("--version", action="version", version=f"pybench {__version__}")
    sub = subcommands(parser)
    for name, coll in COLLECTIVES.items():
        _add_collective_parser(sub, name, coll)
    p = sub.add_parser("p2p", help="point-to-point latency, bandwidth and bidirectional bandwidth between ranks 0, 1",
                       description="OSU's point-to-point tests between ranks 0 and 1 over MPI: latency (half a "
                                   "ping-pong), bandwidth and bidirectional bandwidth (a window of messages); the "
                                   "table is OSU's: size and latency (us) or bandwidth (MB/s = 1e6 B/s).",
                       epilog=_examples("pybench p2p --sizes 1:4M",
                                        "pybench p2p --test latency -m 1:64K -i 1000 -x 100   # OSU's options",
                                        "pybench p2p --matrix   # every GPU pair over NCCL"),
                       formatter_class=argparse.RawDescriptionHelpFormatter)
    _add_run_options(p, "1:4M", ("batched", "per-op"), osu=True)
    compat_flags.add_osu_flags(p)
    p.add_argument("--test", default="all", help="latency, bw, bibw, a comma list, or all (default all)")
    p.add_argument("--window", "-W", type=_positive_int, default=None,
                   help="messages in flight for bw/bibw (default 64, as OSU)")
    cli_gpu.add_p2p_matrix_options(p)
    p.set_defaults(func=_run_measurement)
    p = sub.add_parser("env", help="what backends, devices, MPI and versions pybench sees",
                       description="What pybench sees here: its version and build (MPI, CUDA module), the CPU, "
                                   "the MPI library and launcher, the GPUs, which backends can run, and how busy "
                                   "the machine is.",
                       epilog=_examples("pybench env", "pybench env --json env.json", "pybench env --json -"),
                       formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--json", default=None, metavar="FILE",
                   help="write JSON to FILE instead of text to stdout; - for stdout (default: text)")
    p.add_argument("--force", action="store_true", help="overwrite --json FILE if it exists (default off)")
    p.set_defaults(func=_cmd_env)
    cli_gpu.add_parsers(sub)
    cli_models.add_parsers(sub)
    cli_planning.add_parsers(sub)
    cli_reports.add_parsers(sub)
    cli_profile.add_parsers(sub)
    cli_system.add_parsers(sub)
    cli_recover.add_parsers(sub)
    cli_nccl_tests_bin.add_parsers(sub)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    return run(build_parser(), argv, "`pybench allreduce --sizes 1M:1G` or `pybench --help`")
