"""``python -m pybench profile``: measured CCR of a real DDP training step beside the prediction.

    python -m pybench profile --params 20M --batch 1,4,16 [-n 2] [--model MODEL.json] [--json FILE] [--trace-dir DIR]
    python -m pybench profile --params 12M --batch 128,4096 --netns 1gbit   # one rank per namespace
    python -m pybench profile -n 1 --params 1M --batch 8,64 --loader-delay-ms 20 [--json FILE]

With ``-n 1`` no process group starts: one device's step is split into data wait,
host-to-device copy, forward, backward and optimizer (pybench.profile.pipeline), the
synthetic MLP fed by a loader that sleeps ``--loader-delay-ms`` per batch; the JSON
(a profile of kind "pipeline") gives ``pybench plan --profile`` the loader's rate.

Stand-alone, the ranks start through the MPI launcher (as the collective
commands do) and meet in torch.distributed through pybench's MPI core; under
torchrun (or mpirun) each process is one rank. With ``--netns RATE`` (root) the
command makes one network namespace per rank joined by a tbf-shaped link of
RATE (pybench.measure.netns) and starts one rank in each, torch env:// rendezvous at
the first namespace's address.
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

from pybench.cli.argtypes import number
from pybench.cli.parser import Parser, run, subcommands
from pybench.errors import UsageError

EXAMPLES = "\n".join([
    "examples:",
    "  pybench profile --params 20M --batch 1,4,16",
    "  pybench profile --params 12M --batch 128,4096 --netns 1gbit --model gloo_model.json   # root",
    "  pybench profile --params 1M --batch 8 --trace-dir traces   # then open traces/*.json in https://ui.perfetto.dev",
    "  pybench profile -n 1 --params 1M --batch 8,64 --loader-delay-ms 20 --json pipe.json   # input pipeline",
])


MAX_BATCH = 1 << 20
# Bytes a rank holds per parameter of the synthetic MLP: fp32 weights, gradients, two optimizer
# states and DDP's bucket copy of the gradients.
BYTES_PER_PARAM = 20


def _check_memory(params: int, batches: list[int], nprocs: int) -> None:
    """Refuse, before any rank starts, a model and batch that would not fit in this host's memory."""
    import os

    from pybench.profile.mlp import mlp_shape
    width, layers = mlp_shape(params)
    per_rank = BYTES_PER_PARAM * params + 4 * 2 * max(batches) * width * (layers + 1)  # weights + activations
    try:
        free = os.sysconf("SC_AVPHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
    except (ValueError, OSError):
        return
    if nprocs * per_rank > 0.8 * free:
        raise UsageError(f"--params {params:.3g} with --batch {max(batches)} on {nprocs} ranks needs about "
                         f"{nprocs * per_rank / 1e9:.1f} GB, more than 80% of the {free / 1e9:.1f} GB free here; "
                         f"use fewer parameters or a smaller batch")


def _batches(text: str) -> list[int]:
    out = []
    for item in str(text).split(","):
        try:
            v = int(item.strip())
        except ValueError:
            raise UsageError(f"--batch: {item!r} is not a whole number; use a comma list such as 1,4,16") from None
        if not 1 <= v <= MAX_BATCH:
            raise UsageError(f"--batch values must be 1 to {MAX_BATCH}, got {v}")
        out.append(v)
    return out


def add_parsers(sub) -> None:
    p = sub.add_parser("profile", help="measure compute, communication and exposed communication of a real DDP "
                                       "training step (torch) and compare with the predicted CCR",
                       description="Measure a real training step under torch DistributedDataParallel and put the "
                                   "measured CCR beside pybench's prediction for the same configuration.",
                       epilog=EXAMPLES, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--params", default="20M", help="parameters of the synthetic MLP (default 20M; K/M/B suffixes)")
    p.add_argument("--batch", default="1,4,16", help="per-rank batch sizes, a comma list (default 1,4,16)")
    p.add_argument("--strategy", default="ddp", help="ddp, the only strategy measured for now (default ddp)")
    p.add_argument("-n", "--nprocs", type=number(int, 1, strict=False, maximum=1024), default=2,
                   help="ranks to start when run stand-alone (default 2); 1: the input-pipeline profile "
                        "of one device, no process group")
    p.add_argument("--steps", type=number(int, 1, strict=False, maximum=10000), default=5,
                   help="measured steps per mode and batch size (default 5)")
    p.add_argument("--warmup", type=number(int, 0, strict=False, maximum=10000), default=2,
                   help="untimed steps first (default 2)")
    p.add_argument("--bucket-mb", type=number(float, 0, strict=True, maximum=1e6), default=25,
                   help="DDP bucket cap in MiB (default 25, DDP's)")
    p.add_argument("--model", default=None, metavar="MODEL.json",
                   help="fitted alpha-beta models (fit them from --backend torch runs); default: fit a quick gloo "
                        "all-reduce sweep on the spot")
    p.add_argument("--save-model", default=None, metavar="FILE",
                   help="save the quick on-the-spot model here (default: not saved)")
    p.add_argument("--calibrate", choices=("gemm", "nosync"), default="gemm",
                   help="FLOP/s of the prediction: the step's GEMMs timed on every rank at once (default), or the "
                        "no_sync steps themselves")
    p.add_argument("--netns", default=None, metavar="RATE",
                   help="run one rank per network namespace over a tbf link of RATE (e.g. 1gbit); needs root "
                        "(default: every rank on this host, over loopback)")
    p.add_argument("--loader-delay-ms", type=number(float, 0, strict=False, maximum=1e6), default=None,
                   metavar="MS", help="with -n 1: the synthetic loader sleeps MS per batch inside next(), a real "
                                      "data wait (default 0)")
    p.add_argument("--json", type=Path, default=None, metavar="FILE", help="write the result as JSON (default: none)")
    p.add_argument("--trace-dir", type=Path, default=None, metavar="DIR",
                   help="save the torch.profiler traces the decomposition read, one Chrome trace JSON per batch "
                        "size and rank (profile_batchB_rankR.json; open in https://ui.perfetto.dev); DIR is made "
                        "if missing (default: traces not saved)")
    p.add_argument("--force", action="store_true", help="overwrite an existing --json file or traces (default: refuse)")
    p.set_defaults(func=cmd_profile)


def _validate(args) -> tuple[int, list[int]]:
    """(parameters, batch sizes); every flag checked here so that errors name flags, before ranks start."""
    from pybench.io.files import refuse_existing
    from pybench.planning.transformer import parse_param_count
    from pybench.profile.mlp import mlp_shape
    params = parse_param_count(args.params)
    batches = _batches(args.batch)
    if args.strategy.strip().lower() != "ddp" and args.nprocs != 1:
        raise UsageError(f"profile measures --strategy ddp only (got {args.strategy!r}); "
                         "other strategies are predicted by `pybench ccr`")
    if args.nprocs < 1:
        raise UsageError(f"-n must be at least 1, got {args.nprocs}")
    if args.nprocs == 1:
        for flag, value in (("--netns", args.netns), ("--trace-dir", args.trace_dir), ("--model", args.model),
                            ("--save-model", args.save_model)):
            if value is not None:
                raise UsageError(f"{flag} is for the DDP profile (-n 2 or more); -n 1 profiles the input pipeline")
    elif args.loader_delay_ms is not None:
        raise UsageError("--loader-delay-ms is for the input-pipeline profile, -n 1")
    if args.steps < 1 or args.warmup < 0:
        raise UsageError("--steps must be at least 1 and --warmup 0 or more")
    if not args.bucket_mb > 0:
        raise UsageError(f"--bucket-mb must be positive, got {args.bucket_mb}")
    if args.json is not None:
        refuse_existing(args.json, args.force)
        if args.json.is_symlink():  # found now, not after the run, when the file is written
            raise UsageError(f"{args.json} is a symbolic link; pybench does not write through links: "
                             "give the real path")
    if args.trace_dir is not None:
        _trace_dir(args.trace_dir, batches, args.nprocs, args.force)
    if args.model is not None and not Path(args.model).is_file():
        raise UsageError(f"--model {args.model}: no such file")
    try:
        mlp_shape(params)
    except UsageError as exc:  # the library names its parameter; the user typed the flag
        raise UsageError(str(exc).replace("params", "--params", 1)) from None
    _check_memory(params, batches, args.nprocs)
    return params, batches


def _trace_dir(folder: Path, batches: list[int], nprocs: int, force: bool) -> None:
    """Make --trace-dir if missing; refuse traces of an earlier run without --force."""
    from pybench.io.files import refuse_existing
    from pybench.profile.trace_files import trace_file_names
    if folder.exists() and not folder.is_dir():
        raise UsageError(f"--trace-dir {folder} is not a folder")
    if not folder.exists():
        if not folder.parent.is_dir():
            raise UsageError(f"--trace-dir {folder}: folder {folder.parent} does not exist")
        try:
            folder.mkdir(exist_ok=True)  # exist_ok: every rank checks too
        except OSError as exc:
            raise UsageError(f"--trace-dir {folder}: cannot make it ({exc.strerror or exc})") from None
    _probe_writable(folder)
    for name in trace_file_names(folder, batches, nprocs):
        refuse_existing(name, force)


def _probe_writable(folder: Path) -> None:
    """Refuse a folder no trace can be written to (/proc, /sys, read-only or not ours) before any rank
    starts: one file made and removed there, as the ranks' traces will be."""
    import tempfile
    try:
        fd, probe = tempfile.mkstemp(dir=folder, prefix=".pybench-probe-")
    except OSError as exc:
        raise UsageError(f"--trace-dir {folder}: cannot make a file there ({exc.strerror or exc}); "
                         "give a folder of your own") from None
    os.close(fd)
    os.unlink(probe)


def cmd_profile(args) -> int:
    from pybench.measure.backends.torch import import_torch
    from pybench.measure.launch import under_launcher
    params, batches = _validate(args)
    import_torch()  # one line saying `pip install torch` before any rank starts
    argv = list(getattr(args, "argv", None) or sys.argv[1:])
    if args.nprocs == 1:
        return _pipeline(args, params, batches, argv)
    if under_launcher():
        return _as_rank(args, params, batches)
    if args.netns:
        return _in_namespaces(args, argv)
    return _spawn(args.nprocs, argv)


def _spawn(nprocs: int, argv: list[str]) -> int:
    # The same launch as the collective commands: Open MPI's banners condensed, Ctrl-C handled,
    # a launcher that fails to start retried; rank 0 hands back the exit code.
    from pybench.measure.launch import spawn_local_ranks
    return spawn_local_ranks(nprocs, argv)


# In namespaces the ranks run this module directly (no launcher; env:// rendezvous).
RANK_PROGRAM = ["-m", "pybench.cli.profile"]


def _as_rank(args, params: int, batches: list[int]) -> int:
    from pybench.io.files import write_json
    from pybench.measure.backends.torch import TorchBackend
    from pybench.profile.rank import run_profile_rank
    backend = TorchBackend()
    info = backend.start()
    is_root = info["rank"] == 0
    try:
        res = run_profile_rank(params, batches, steps=args.steps, warmup=args.warmup, bucket_mb=args.bucket_mb,
                               models=args.model, calibrate=args.calibrate, strategy=args.strategy.strip().lower(),
                               save_model=args.save_model, trace_dir=args.trace_dir)
    except RuntimeError as exc:  # a peer rank died mid-step: one line, not gloo's traceback
        from pybench.measure.peer_loss import leave_after_peer_loss, peer_lost
        fault = peer_lost(exc)
        if fault is None:
            raise
        return leave_after_peer_loss(fault, info["rank"], str(info.get("host", "?")))
    if is_root:
        res.notes.append("command: pybench " + " ".join(getattr(args, "argv", None) or sys.argv[1:]))
        print(res.table(), flush=True)
        if args.json is not None:
            write_json(args.json, res.to_dict(), args.force)
    backend.finish()
    from pybench.measure.launch import report_status
    return report_status(0, is_root)


def _pipeline(args, params: int, batches: list[int], argv: list[str]) -> int:
    """-n 1: one device's step split into data wait, copy, forward, backward and optimizer (no process group)."""
    from pybench.io.files import write_json
    from pybench.profile.synthetic_pipeline import profile_mlp_pipeline
    delay_ms = args.loader_delay_ms or 0.0
    res = profile_mlp_pipeline(params, batches, delay_s=delay_ms / 1e3, steps=args.steps, warmup=args.warmup)
    res.notes.append("command: pybench " + " ".join(argv))
    print(res.table(), flush=True)
    if args.json is not None:
        write_json(args.json, res.to_dict(), args.force)
    return 0


def _in_namespaces(args, argv: list[str]) -> int:
    from pybench.measure.netns import NetnsLab, netns_available
    ok, why = netns_available()
    if not ok:
        raise UsageError(f"--netns: {why}")
    # the ranks must not make namespaces themselves
    rank_argv = []
    skip = False
    for a in argv:
        if skip:
            skip = False
            continue
        if a == "--netns":
            skip = True
            continue
        if a.startswith("--netns="):
            continue
        rank_argv.append(a)
    with NetnsLab(args.nprocs, rate=args.netns) as lab:
        print(f"# {args.nprocs} namespaces {', '.join(lab.hosts)}; link: {lab.qdisc(0)}", file=sys.stderr)
        res = lab.run_ranks([*RANK_PROGRAM, *rank_argv], timeout=3600, cwd=str(Path.cwd()))
    for r, proc in enumerate(res):
        if r == 0:
            sys.stdout.write(proc.stdout)
        if proc.returncode != 0:
            tail = "\n".join(proc.stderr.strip().splitlines()[-5:])
            print(f"pybench: error: rank {r} exited with {proc.returncode}:\n{tail}", file=sys.stderr)
    return max((p.returncode for p in res), key=abs, default=1)


def main(argv=None) -> int:
    """``python -m pybench.cli.profile profile ...`` (what the ranks run; also usable directly)."""
    parser = Parser(prog="pybench")
    add_parsers(subcommands(parser))
    return run(parser, list(sys.argv[1:] if argv is None else argv), "`pybench profile --params 20M --batch 1,4,16`")


if __name__ == "__main__":
    sys.exit(main())
