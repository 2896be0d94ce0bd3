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

from pybench import __version__
from pybench.cli import argtypes
from pybench.cli import gpu as cli_gpu
from pybench.cli import models as cli_models
from pybench.cli import planning as cli_planning
from pybench.cli import profile as cli_profile
from pybench.cli import reports as cli_reports
from pybench.cli.parser import Parser, run, subcommands
from pybench.collectives import COLLECTIVES, DTYPES, OPS, canonical_dtype, canonical_op
from pybench.errors import BackendUnavailable, UsageError
from pybench.measure.benchmark import BenchConfig, check_memory
from pybench.measure.p2p_tests import parse_p2p_tests
from pybench.measure.results import OutputFiles
from pybench.measure.stopping import StopRule
from pybench.sizes import parse_sizes

_precision = argtypes.fraction()
_positive_int, _nonneg_int = argtypes.positive_int, argtypes.nonneg_int
_positive_float, _nonneg_float = argtypes.positive_float, argtypes.nonneg_float


def _add_run_options(p: argparse.ArgumentParser, default_sizes: str) -> None:
    g = p.add_argument_group("what to run")
    g.add_argument("--sizes", "-s", default=default_sizes,
                   help=f"sizes in bytes: LO:HI (powers of two), LO:HI:FACTOR, or a list 8,1K,1M; K/M/G = 2^10/2^20/2^30 "
                        f"(default {default_sizes})")
    g.add_argument("-n", "--nprocs", type=_positive_int, default=2,
                   help="ranks to start when run stand-alone (default 2); ignored under mpirun/srun")
    g.add_argument("--backend", default=None,
                   help="nccl (GPU buffers), mpi (host buffers over MPI) or torch (torch.distributed); default: nccl "
                        "where a GPU and NCCL are usable, else mpi with one line on stderr saying so")
    m = p.add_argument_group("how to measure")
    m.add_argument("--timing", choices=("batched", "per-op", "graph"), default="batched",
                   help="batched: ops back to back, time / n (nccl-tests default); per-op: each op timed alone after "
                        "a barrier, giving a distribution; graph (nccl only): K ops captured in a CUDA graph and "
                        "replayed, free of launch overhead")
    m.add_argument("--iters", type=_positive_int, default=None, help="fixed number of timed iterations per size "
                   "(turns the adaptive rule off)")
    m.add_argument("--precision", type=_precision, default=None,
                   help="adaptive: stop when the 95%% CI of the median is within this fraction of it (default 2%%)")
    m.add_argument("--min-iters", type=_positive_int, default=5, help="fewest timed iterations per size (default 5)")
    m.add_argument("--max-iters", type=_positive_int, default=20000, help="most timed iterations per size (default 20000)")
    m.add_argument("--time-budget", type=_positive_float, default=1.0, metavar="SECONDS",
                   help="measuring time per size after which the adaptive rule stops (default 1.0)")
    m.add_argument("-w", "--warmup", type=_nonneg_int, default=5, help="untimed operations per size first (default 5)")
    m.add_argument("-c", "--check", type=_nonneg_int, default=2,
                   help="iterations whose output every rank verifies exactly (default 2; 0 disables)")
    m.add_argument("--timeout", type=_nonneg_float, default=30.0, metavar="SECONDS",
                   help="abort the run when one operation makes no progress for this long, naming the rank that "
                        "stopped answering (default 30; 0 disables). Raise it for huge messages on slow links: "
                        "1 GiB at 200 Mbit/s takes about 43 s")
    m.add_argument("--huge-pages", choices=("on", "off"), default="on",
                   help="transparent huge pages for buffers >= 2 MiB (default on, as numpy); moves large-message "
                        "results by 20-30%%, so match it when comparing with another tool")
    o = p.add_argument_group("output")
    o.add_argument("--json", type=Path, default=None, metavar="FILE", help="versioned JSON with raw samples, "
                   "rewritten after every size")
    o.add_argument("--csv", type=Path, default=None, metavar="FILE", help="one row per size, rewritten after every size")
    o.add_argument("--force", action="store_true", help="overwrite existing output files")
    o.add_argument("--min-busbw", type=_positive_float, default=None, metavar="GBPS",
                   help="exit 1 with a one-line reason when the peak busbw is below this (for scripts and health "
                        "checks that do not use pytest)")


def _stop_rule(args) -> StopRule:
    if args.iters is not None and args.precision is not None:
        raise UsageError("--iters and --precision are exclusive: give a fixed count or a precision, not both")
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
    if args.timing == "graph" and args.backend != "nccl":
        raise UsageError("--timing graph captures CUDA graphs: it needs --backend nccl")


def _collective_plans(args) -> list:
    from pybench.measure.runner import RunPlan
    cfg = BenchConfig(benchmark=args.command, sizes=tuple(parse_sizes(args.sizes)), dtype=canonical_dtype(args.dtype),
                      op=canonical_op(args.op), root=args.root, timing=args.timing, stop=_stop_rule(args),
                      warmup=args.warmup, check_iters=args.check, huge_pages=args.huge_pages == "on")
    return [RunPlan(cfg, OutputFiles(args.json, args.csv), args.min_busbw)]


def _p2p_plans(args) -> list:
    from pybench.measure.runner import RunPlan
    tests = parse_p2p_tests(args.test)
    plans = []
    for t in tests:
        cfg = BenchConfig(benchmark=t.benchmark, sizes=tuple(parse_sizes(args.sizes)), timing=args.timing,
                          stop=_stop_rule(args), warmup=args.warmup, check_iters=args.check, window=args.window,
                          huge_pages=args.huge_pages == "on")
        plans.append(RunPlan(cfg, OutputFiles(_per_test(args.json, t.name, len(tests)),
                                              _per_test(args.csv, t.name, len(tests))), args.min_busbw))
    return plans


def _per_test(path: Path | None, test: str, n_tests: int) -> Path | None:
    # Several tests in one run write one file each: out.json -> out.latency.json.
    if path is None or n_tests == 1:
        return path
    return path.with_name(f"{path.stem}.{test}{path.suffix}")


def _run_measurement(args) -> int:
    argv = args.argv
    from pybench.measure.launch import spawn_local_ranks, under_launcher
    from pybench.measure.runner import run_as_rank
    if getattr(args, "matrix", False):
        return cli_gpu.run_p2p_matrix(args)
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
        return run_as_rank(plans, argv, args.force, backend, args.timeout)
    backend, fallback_note = cli_gpu.select_backend(requested, nccl_lib)
    if args.timing == "graph" and backend != "nccl":
        raise UsageError("--timing graph captures CUDA graphs: it needs a GPU and the nccl backend")
    # Stand-alone: catch bad input here, before any rank starts. With NCCL one
    # process drives every local GPU; otherwise pybench starts -n MPI ranks.
    world = len(cli_gpu.local_gpus(args)) if backend == "nccl" else args.nprocs
    for plan in plans:
        plan.config.validate(world, single_rank_ok=backend == "nccl")
        if backend != "nccl":  # NCCL buffers live in device memory, which the backend checks itself
            check_memory(plan.config, world, world)
        plan.outputs.check_writable(args.force)
    if fallback_note:
        print(fallback_note, file=sys.stderr)
    if args.command.startswith("p2p") and len(plans) > 1 and args.json:
        names = ", ".join(str(p.outputs.json_path) for p in plans)
        print(f"pybench: writing one JSON file per test: {names}", file=sys.stderr)
    if backend == "nccl":
        return run_as_rank(plans, argv, args.force, "nccl", args.timeout)
    files = [p for plan in plans for p in (plan.outputs.json_path,) if p is not None]
    return spawn_local_ranks(args.nprocs, argv, result_files=files)


def _cmd_env(args) -> int:
    from pybench.measure.envinfo import environment, optional_version
    from pybench.measure.launch import find_launcher, under_launcher
    env = environment()
    try:
        launcher = find_launcher()
        env["launcher"] = {"path": launcher.path, "flavour": launcher.flavour}
    except BackendUnavailable as exc:
        env["launcher"] = {"error": str(exc)}
    env["under_launcher"] = under_launcher()
    nccl_reason = cli_gpu.nccl_unavailable_reason()
    env["backends"] = {"mpi": env["mpi"].get("available", False), "nccl": nccl_reason is None,
                       "torch": optional_version("torch") is not None}
    if nccl_reason:
        env["nccl_unavailable"] = nccl_reason
    if args.json:
        print(json.dumps(env, indent=1))
        return 0
    gpu = env["gpu"]
    lines = [
        f"pybench {env['pybench_version']} (Python {env['python']}, {env['platform']})",
        f"cpu:      {env['cpu_model']}",
        f"mpi:      {env['mpi'].get('library') or env['mpi'].get('error')}",
        f"launcher: {env['launcher'].get('path', env['launcher'].get('error'))} ({env['launcher'].get('flavour', '-')})",
        f"build:    MPI {env['build'].get('mpi', '?')}, CUDA module {env['build'].get('cuda_module', '?')} "
        f"(architectures {env['build'].get('cuda_architectures') or '-'})",
    ]
    if gpu.get("device_count"):
        for d in gpu["devices"]:
            lines.append(f"gpu {d['index']}:    {d['name']} ({d['total_memory_bytes'] / 2**30:.0f} GiB, "
                         f"sm {d['compute_capability']})")
    else:
        lines.append(f"gpu:      none ({gpu.get('no_gpu_reason')})")
    lines.append("backends: " + ", ".join(f"{k} {'yes' if v else 'no'}" for k, v in env["backends"].items()))
    print("\n".join(lines))
    return 0


def build_parser() -> argparse.ArgumentParser:
    parser = Parser(prog="pybench", description="Communication microbenchmarks and models for distributed training.")
    parser.add_argument("--version", action="version", version=f"pybench {__version__}")
    sub = subcommands(parser)
    for name, coll in COLLECTIVES.items():
        p = sub.add_parser(name, help=coll.description, description=f"{name}: {coll.description}.")
        _add_run_options(p, "1K:64M:4")
        p.add_argument("-d", "--dtype", default="float32", help=f"{', '.join(DTYPES)} (default float32)")
        p.add_argument("-o", "--op", default="sum", help=f"reduction op: {', '.join(OPS)} (default sum)")
        p.add_argument("--root", type=_nonneg_int, default=0, help="root rank of broadcast (default 0)")
        cli_gpu.add_gpu_run_options(p)
        p.set_defaults(func=_run_measurement)
    p = sub.add_parser("p2p", help="point-to-point latency, bandwidth and bidirectional bandwidth between ranks 0 and 1")
    _add_run_options(p, "1:4M")
    p.add_argument("--test", default="all", help="latency, bw, bibw, a comma list, or all (default all)")
    p.add_argument("--window", type=_positive_int, default=64, help="messages in flight for bw/bibw (default 64, as OSU)")
    cli_gpu.add_p2p_matrix_options(p)
    p.set_defaults(func=_run_measurement)
    p = sub.add_parser("env", help="what backends, devices, MPI and versions pybench sees")
    p.add_argument("--json", action="store_true", help="print JSON instead of text")
    p.set_defaults(func=_cmd_env)
    cli_gpu.add_parsers(sub)
    cli_models.add_parsers(sub)
    cli_planning.add_parsers(sub)
    cli_reports.add_parsers(sub)
    cli_profile.add_parsers(sub)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    return run(build_parser(), argv, "`pybench allreduce --sizes 1M:1G` or `pybench --help`")
