"""argparse glue for the planning subcommands: ``compute``, ``ccr`` and ``plan``.

``add_parsers(subparsers)`` registers them; each sets ``func(args) -> int``.
Errors are raised as PyBenchError subclasses (the main CLI prints them in one
line and exits 2); tables go to stdout, warnings to stderr. The library names its
own parameters in messages (``bucket_mb must be positive``); :func:`flag_names`
says them as the flags a user typed (``--bucket-mb must be positive``).
"""

from __future__ import annotations

import argparse
import re
import signal
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import replace
from typing import Any

from pybench.cli.argtypes import number, output_file
from pybench.errors import FileFormatError, PyBenchError, Terminated, UsageError
from pybench.io.files import refuse_existing, write_json
from pybench.planning.config import SLOWEST_NODE

# Every numeric option has a range (issue 16): finite, positive, and no larger than anything real,
# so a typo cannot send the plan search or a GEMM allocation past the machine.
_count = number(int, 1, strict=False, maximum=1 << 20)        # ranks, devices, layers, batches
_size = number(int, 1, strict=False, maximum=1 << 24)         # widths, sequence lengths, tokens
_nonneg_count = number(int, 0, strict=False, maximum=1 << 20)
_positive = number(float, 0, strict=True, maximum=1e12)        # rates, prices, sizes in MB/GB
_nonneg = number(float, 0, strict=False, maximum=1e12)
_share = number(float, 0, strict=True, maximum=1.0)            # memory headroom
_node_speed = number(float, SLOWEST_NODE, strict=False, maximum=1.0)

__all__ = ["add_parsers", "run_compute", "run_ccr", "run_plan", "flag_names"]

_COMM_DTYPE_BYTES = {"bf16": 2, "fp16": 2, "fp32": 4}

# Library parameter -> the flag that sets it. Names with an underscore are unambiguous anywhere
# in a message; plain words are mapped only as ``name=`` or when a message starts with them.
_FLAGS = {
    "bucket_mb": "--bucket-mb", "bucket_bytes": "--bucket-mb", "gpus_per_node": "--gpus-per-node",
    "device_memory_gb": "--device-memory-gb", "micro_batches": "--micro-batches", "tp_degree": "--tp-degree",
    "pp_degree": "--pp-degree", "price_per_node_hour": "--price-per-node-hour", "big_node_gpus": "--big-node-gpus",
    "big_node_price_per_hour": "--big-node-price-per-hour", "straggler_cv": "--straggler-cv",
    "max_world": "--max-world", "max_batch": "--max-batch", "target_samples_per_s": "--target-samples-per-s",
    "timed_tokens": "--timed-tokens", "micro_batch": "--micro-batch", "flops_per_s": "--tflops",
    "peak_flops_per_s": "--peak-tflops", "loader_samples_per_s": "--loader-samples-per-s",
    "slow_node": "--slow-node", "price_per_device_hour": "--price-per-device-hour",
    "global_batch_limit": "--global-batch-limit", "global_batch": "--global-batch",
    "memory_headroom": "--memory-headroom",
    "bytes_per_param": "--bytes-per-param", "comm_bytes_per_value": "--comm-dtype",
}
_WORDS = {"batch": "--batch", "seq": "--seq", "world": "--world", "hidden": "--hidden", "layers": "--layers",
          "repeats": "--repeats", "warmup": "--warmup", "params": "--params", "engine": "--engine",
          "backend": "--backend", "strategy": "--strategy", "links": "--link", "system": "--system"}


def flag_names(text: str) -> str:
    """``text`` with the library's parameter names said as this command line's flags."""
    for name, flag in {**_FLAGS, **_WORDS}.items():
        text = re.sub(rf"(?<![\w-]){name}=", f"{flag} ", text)
    for name, flag in _FLAGS.items():
        text = re.sub(rf"(?<![\w-]){name}\b", flag, text)
    text = text.replace("hidden/ffn", "--hidden/--ffn").replace("hidden and layers", "--hidden and --layers")
    first = re.match(r"(\w+)(?= must| is )", text)
    if first and first.group(1) in _WORDS:
        text = _WORDS[first.group(1)] + text[first.end():]
    return text


@contextmanager
def _flags_in_errors() -> Iterator[None]:
    """Re-raise a library error with its parameter names said as flags (same class, same exit code)."""
    try:
        yield
    except FileFormatError:
        raise  # about a file's own fields (a system description's gpus_per_node), not this command line's flags
    except PyBenchError as exc:
        mapped = flag_names(str(exc))
        if mapped == str(exc):
            raise
        raise type(exc)(mapped) from None


def _warn(msg: str) -> None:
    print(f"warning: {flag_names(msg)}", file=sys.stderr)  # idempotent: flags stay flags


_INPUT_FLAGS = ("model", "compute", "profile", "system")
"""The options of these commands that name files they read (--system also names a shipped system)."""


def _inputs(args: argparse.Namespace) -> list[str]:
    return [str(v) for name in _INPUT_FLAGS if (v := getattr(args, name, None)) is not None]


def _check_output(args: argparse.Namespace) -> None:
    """Before any work: --json must be a file this command may write, and none it reads (--force or not)."""
    if args.json:
        refuse_existing(args.json, args.force, _inputs(args))


def _save(args: argparse.Namespace, document: Callable[[], dict[str, Any]]) -> None:
    if args.json:
        refuse_existing(args.json, args.force, _inputs(args))  # (again: the work may have taken a while)
        write_json(args.json, document(), args.force)
        print(f"# wrote {args.json}", file=sys.stderr)


def _said_as_flags(doc: dict[str, Any], keys: tuple[str, ...]) -> dict[str, Any]:
    """``doc`` with the sentences under ``keys`` saying flags, as the printed text does."""
    return {k: [flag_names(x) for x in v] if k in keys else v for k, v in doc.items()}


def _shape_from_args(args: argparse.Namespace) -> tuple[int, Any]:
    """(params, shape) from --params and/or --hidden/--layers."""
    from pybench.planning.transformer import check_derivable, parse_param_count, shape_for_params, shape_from_dims
    if (args.hidden is None) != (args.layers is None):
        raise UsageError("give --hidden and --layers together (or --params alone)")
    if args.hidden is not None:
        shape = shape_from_dims(args.hidden, args.layers, getattr(args, "heads", None), getattr(args, "ffn", None))
        params = parse_param_count(args.params) if args.params else shape.param_count
        return params, shape
    if not args.params:
        raise UsageError("give --params (e.g. 7B) or --hidden and --layers")
    params = parse_param_count(args.params)
    check_derivable(params)  # no derived shape holds fewer: its activations would be a larger model's
    return params, shape_for_params(params)


def _check_flops_flags(args: argparse.Namespace) -> None:
    if args.compute is None and args.tflops is None:
        raise UsageError("give --compute COMPUTE.json (from `python -m pybench compute --json ...`) "
                         "or --tflops with a FLOP/s figure you measured")
    for flag, value in (("--tflops", args.tflops), ("--peak-tflops", getattr(args, "peak_tflops", None))):
        if value is not None and not value > 0:
            raise UsageError(f"{flag} must be positive, got {value}")


def _tflops(value: float | None) -> float | None:
    return None if value is None else value * 1e12


@contextmanager
def _terminated_says_so() -> Iterator[None]:
    """SIGTERM during a long timing (a job's time limit, `kill`) ends it with one line and 143, not in silence;
    nothing is written (a table of some GEMMs would be read as the step's)."""
    def stop(signum, frame):
        raise Terminated("terminated (SIGTERM) while timing the GEMMs; nothing was written: rerun it, with "
                         "--max-gemm-gflop or fewer --repeats to make it shorter")
    try:
        previous = signal.signal(signal.SIGTERM, stop)
    except ValueError:  # (not the main thread: the default stays)
        yield
        return
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


def run_compute(args: argparse.Namespace) -> int:
    """``python -m pybench compute``: time the step's GEMMs and print achieved FLOP/s."""
    from pybench.planning.compute import profile_compute
    _check_output(args)
    if args.max_gemm_gflop is not None and args.max_gemm_gflop < 0:
        raise UsageError(f"--max-gemm-gflop must be 0 (no cap) or positive, got {args.max_gemm_gflop}")
    max_flops = "auto" if args.max_gemm_gflop is None else (
        None if args.max_gemm_gflop == 0 else args.max_gemm_gflop * 1e9)
    with _flags_in_errors(), _terminated_says_so():
        params, shape = _shape_from_args(args)
        prof = profile_compute(shape, params=params, seq=args.seq, micro_batch=args.micro_batch, dtype=args.dtype,
                               engine=args.engine, repeats=args.repeats, warmup=args.warmup,
                               timed_tokens=args.timed_tokens, max_gemm_flops=max_flops)
    for w in prof.warnings:
        _warn(w)
    print(prof.table())
    _save(args, prof.to_dict)
    return 0


def _gpus_per_node(args: argparse.Namespace) -> int:
    """--gpus-per-node, else the GPUs of one host of --system (a GB200 NVL72 tray holds 4), else 8: as the
    Python ``ccr`` and ``plan`` take them (:func:`pybench.planning.config.node_gpus`)."""
    from pybench.planning.config import node_gpus
    with _flags_in_errors():
        return node_gpus(None if args.gpus_per_node is None else int(args.gpus_per_node), args.system)


def _worlds(text: str) -> str:
    """--world, refused in one line below 2 ranks (one rank exchanges nothing: there is no CCR to compute)
    or above the 16777216 ranks ``pybench predict --world`` takes."""
    from pybench.io.schemas import MAX_WORLD
    from pybench.planning.config import parse_list
    with _flags_in_errors():
        worlds = parse_list(text, "--world")
    for w in worlds:
        if not 2 <= w <= MAX_WORLD:
            raise UsageError(f"--world {w}: give 2 to {MAX_WORLD} ranks (one rank exchanges nothing, so it has no "
                             f"CCR; `pybench plan` checks one device's memory)")
    return text


def run_ccr(args: argparse.Namespace) -> int:
    """``python -m pybench ccr``: the CCR table for every strategy x world x batch."""
    from pybench.planning.grid import ccr
    _check_output(args)
    args.world = _worlds(args.world)
    args.gpus_per_node = _gpus_per_node(args)
    with _flags_in_errors():
        params, shape = _shape_from_args(args)
        _check_flops_flags(args)
        result = ccr(params, args.seq, args.batch, args.world, args.strategy, models=args.model,
                     compute=args.compute, flops_per_s=_tflops(args.tflops), gpus_per_node=args.gpus_per_node,
                     shape=shape, micro_batches=args.micro_batches, tp_degree=args.tp_degree,
                     pp_degree=args.pp_degree, overlap=args.overlap, bucket_mb=args.bucket_mb,
                     recompute=args.recompute, comm_bytes_per_value=_comm_bytes(args),
                     device_memory_gb=args.device_memory_gb, flash_attention=not args.no_flash_attention,
                     price_per_node_hour=args.price_per_node_hour, big_node_gpus=args.big_node_gpus,
                     price_per_device_hour=args.price_per_device_hour,
                     big_node_price_per_hour=args.big_node_price_per_hour, straggler_cv=args.straggler_cv,
                     slow_node=args.slow_node, memory_headroom=args.memory_headroom, backend=args.backend,
                     links=args.link, system=args.system, bytes_per_param=args.bytes_per_param)
    result = replace(result, notes=tuple(flag_names(n) for n in result.notes),
                     warnings=tuple(flag_names(w) for w in result.warnings))
    for w in result.warnings:
        _warn(w)
    print(result.table())
    _save(args, result.to_dict)
    return 0


def _comm_bytes(args: argparse.Namespace) -> int | None:
    """Bytes per value of the gradient exchange and parameter gathers: --comm-dtype, else None (defaults)."""
    return None if args.comm_dtype is None else _COMM_DTYPE_BYTES[args.comm_dtype]


def _loader_rate(args: argparse.Namespace) -> float | None:
    """Samples/s of one replica's loader: --loader-samples-per-s, or the rate measured in --profile's JSON."""
    if args.profile is None:
        return args.loader_samples_per_s
    if args.loader_samples_per_s is not None:
        raise UsageError("give --loader-samples-per-s or --profile, not both (the profile measured the loader's rate)")
    from pybench.io.files import read_document
    from pybench.io.formats import PROFILE
    from pybench.profile.pipeline_result import loader_rate
    rate, batch = loader_rate(read_document(args.profile, PROFILE), args.profile, args.batch)
    print(f"# loader: {rate:.4g} samples/s per replica, measured at batch {batch} ({args.profile})", file=sys.stderr)
    return rate


def run_plan(args: argparse.Namespace) -> int:
    """``python -m pybench plan``: the field's advice with the figures behind it."""
    from pybench.planning.advice import plan
    _check_output(args)
    args.gpus_per_node = _gpus_per_node(args)
    with _flags_in_errors():
        params, shape = _shape_from_args(args)
        _check_flops_flags(args)
        loader = _loader_rate(args)
        result = plan(params, args.seq, args.batch, models=args.model, compute=args.compute,
                      flops_per_s=_tflops(args.tflops), gpus_per_node=args.gpus_per_node, shape=shape,
                      max_world=args.max_world, device_memory_gb=args.device_memory_gb,
                      overlap=not args.no_overlap, bucket_mb=args.bucket_mb,
                      target_samples_per_s=args.target_samples_per_s, flash_attention=not args.no_flash_attention,
                      backend=args.backend, peak_flops_per_s=_tflops(args.peak_tflops), max_batch=args.max_batch,
                      loader_samples_per_s=loader, price_per_node_hour=args.price_per_node_hour,
                      price_per_device_hour=args.price_per_device_hour, global_batch_limit=args.global_batch_limit,
                      global_batch=args.global_batch, memory_headroom=args.memory_headroom, links=args.link,
                      system=args.system,
                      bytes_per_param=args.bytes_per_param,
                      straggler_cv=args.straggler_cv, slow_node=args.slow_node,
                      comm_bytes_per_value=_comm_bytes(args))
    for w in result.warnings:
        _warn(w)
    print(flag_names(result.text()))
    _save(args, lambda: _said_as_flags(result.to_dict(), ("advice", "notes")))
    return 0


def _add_shape_args(p: argparse.ArgumentParser, params_default: str | None) -> None:
    p.add_argument("--params", default=params_default,
                   help="parameter count, decimal suffixes: 125M, 1.3B, 7B, 70B (maps to a standard shape)")
    p.add_argument("--hidden", type=_size, help="model width (overrides the shape from --params; needs --layers)")
    p.add_argument("--layers", type=_count, help="number of layers (with --hidden)")
    p.add_argument("--heads", type=_count,
                   help="attention heads with --hidden (default hidden/128, else hidden/64, else 1)")
    p.add_argument("--ffn", type=_size, help="MLP inner width with --hidden (default 4 x hidden)")


def _add_model_args(p: argparse.ArgumentParser) -> None:
    """The inputs ccr and plan share: fitted models, measured compute, memory, output."""
    p.add_argument("--model", required=True, metavar="MODEL.json", help="fitted alpha-beta models (pybench fit)")
    p.add_argument("--backend", help="use only models of this backend (default: nccl if the file mixes backends)")
    p.add_argument("--link", action="append", default=[], metavar="PRESET",
                   help="a published link rate for a link class the model file's topology models lack (repeat): "
                        "nvlink3/4/5, nvswitch, pcie4/5, ib-hdr/ndr/xdr, eth-25g/100g/200g/400g")
    p.add_argument("--system", metavar="NAME|FILE",
                   help="the hardware: a named system (dgx-h100, aws-p5, gb200-nvl72, ...) or a description file; it "
                        "prices the link classes the model file did not measure, counting every NIC of a node")
    p.add_argument("--compute", metavar="COMPUTE.json", help="compute profile from `pybench compute --json`")
    p.add_argument("--tflops", type=_positive, help="use this measured TFLOP/s instead of --compute")
    p.add_argument("--device-memory-gb", type=_positive, default=80, help="device memory, GB = 1e9 B (default 80)")
    p.add_argument("--memory-headroom", type=_share, default=0.8, metavar="SHARE",
                   help="share of device memory a step may use to fit, one rule for every verdict (default 0.8: "
                        "the rest is the CUDA context, fragmentation and buffers the estimate does not count)")
    p.add_argument("--straggler-cv", type=_nonneg, default=0.0,
                   help="per-rank compute-time coefficient of variation (expected slowest of N); the wait "
                        "for the slowest counts as communication (sync column)")
    p.add_argument("--slow-node", type=_node_speed, default=1.0, metavar="F",
                   help=f"one node runs at F of the others' speed (0.9: 10%% slower), in [{SLOWEST_NODE:g}, 1] "
                        "(a slower one has failed: plan without it); default 1")
    p.add_argument("--bytes-per-param", type=int, choices=(16, 18), default=16,
                   help="optimizer-state accounting: 16 (bf16 gradients, default) or 18 (fp32 gradients, no "
                        "distributed optimizer)")
    p.add_argument("--no-flash-attention", action="store_true",
                   help="count attention-score activations (5 a s / h term)")
    p.add_argument("--comm-dtype", choices=tuple(_COMM_DTYPE_BYTES), default=None,
                   help="dtype of the gradient exchange and of ZeRO's parameter all-gathers (default: the "
                        "gradients' dtype, bf16 with --bytes-per-param 16, fp32 with 18, and the bf16 weights); "
                        "tensor- and pipeline-parallel activations keep the compute precision (bf16)")


def _add_output_args(p: argparse.ArgumentParser, what: str) -> None:
    p.add_argument("--json", metavar="FILE", type=output_file, help=f"save {what} as versioned JSON")
    p.add_argument("--force", action="store_true", help="overwrite --json FILE if it exists")


def _add_compute_parser(subparsers: Any) -> None:
    p = subparsers.add_parser(
        "compute", help="time the GEMMs of a transformer training step (achieved FLOP/s)",
        description="Time the GEMMs of one transformer layer's training step (QKV, attention output, MLP up "
                    "and down; forward, dgrad, wgrad) at their real shapes and report achieved FLOP/s. On CPU "
                    "engines the token dimension M is scaled down to keep the run short (recorded).",
        epilog="examples:\n  pybench compute --params 125M --seq 512 --json compute.json",
        formatter_class=argparse.RawDescriptionHelpFormatter)
    _add_shape_args(p, "125M")
    p.add_argument("--seq", type=_size, default=2048, help="sequence length (default 2048)")
    p.add_argument("--micro-batch", type=_count, default=1, help="sequences per micro-batch (default 1)")
    p.add_argument("--dtype", choices=("bf16", "fp16", "fp32"),
                   help="default bf16 on GPUs, fp32 on numpy (numpy has no bf16: falls back with a warning)")
    p.add_argument("--engine", default="auto", choices=("auto", "torch", "cupy", "numpy"),
                   help="auto: torch on CUDA, else cupy, else numpy")
    p.add_argument("--repeats", type=_count, default=5, help="timed calls per GEMM (median reported)")
    p.add_argument("--warmup", type=_nonneg_count, default=1, help="untimed calls per GEMM before timing")
    p.add_argument("--timed-tokens", type=_size,
                   help="time GEMMs with this M (tokens) instead of seq x micro-batch")
    p.add_argument("--max-gemm-gflop", type=_nonneg,
                   help="scale M down so no GEMM exceeds this many GFLOP (default 16 on CPU, no cap on GPU; 0 = none)")
    _add_output_args(p, "the profile (for ccr --compute)")
    p.set_defaults(func=run_compute)


def _add_ccr_parser(subparsers: Any) -> None:
    q = subparsers.add_parser(
        "ccr", help="communication-to-computation ratio of a training step by strategy",
        description="For every strategy x world x batch: bytes per rank and link class, communication time "
                    "from fitted models, compute time from measured FLOP/s, CCR and its band (<0.15 fits, "
                    "0.15-0.30 caution, >0.30 comm-bound), step time, samples/s, scaling efficiency, memory "
                    "per device and, with prices, samples per dollar and breakeven.",
        epilog="examples:\n  pybench ccr --params 7B --seq 4096 --batch 1,4 --world 8,16,64 --strategy ddp,zero3,tp+dp "
               "--model h100.json --tflops 400   # h100.json: see `pybench fit --help`",
        formatter_class=argparse.RawDescriptionHelpFormatter)
    _add_shape_args(q, None)
    q.add_argument("--seq", type=_size, default=2048, help="sequence length (default 2048)")
    q.add_argument("--batch", default="1", help="micro-batch sizes per data-parallel replica, e.g. 1,2,4,8")
    q.add_argument("--world", default="8", help="world sizes, e.g. 8,16,32,64")
    q.add_argument("--gpus-per-node", type=_count, default=None,
                   help="devices per node (default: the --system's GPUs per host, else 8)")
    q.add_argument("--strategy", default="ddp",
                   help="comma list of ddp, zero1, zero2, zero3 (fsdp), tp, pp, tp+dp, tp+pp+dp (default ddp)")
    _add_model_args(q)
    q.add_argument("--micro-batches", type=_count, help="micro-batches per step (default 1; pp: 4 x stages)")
    q.add_argument("--tp-degree", type=_count,
                   help="tensor-parallel degree for tp+dp and tp+pp+dp (default: GPUs per node; refused without "
                        "either: tp alone takes the world size)")
    q.add_argument("--pp-degree", type=_count, help="pipeline stages for tp+pp+dp (default 2; refused without it: pp "
                                                    "alone runs one stage per rank)")
    q.add_argument("--overlap", action="store_true", help="overlap the gradient exchange with backward in buckets")
    q.add_argument("--bucket-mb", type=_positive, default=25, help="gradient bucket size in MiB (default 25, as DDP)")
    q.add_argument("--recompute", action="store_true", help="full activation recomputation (8 x P x tokens)")
    q.add_argument("--price-per-node-hour", type=_positive, help="price of one node per hour (enables samples/$)")
    q.add_argument("--price-per-device-hour", type=_positive,
                   help="price of one device per hour, billed for the devices a layout uses (instead of "
                        "--price-per-node-hour)")
    q.add_argument("--big-node-gpus", type=_count, help="GPUs of one bigger machine to compare scale-out against")
    q.add_argument("--big-node-price-per-hour", type=_positive, help="price per hour of that bigger machine")
    _add_output_args(q, "the result")
    q.set_defaults(func=run_ccr)


def _add_plan_parser(subparsers: Any) -> None:
    r = subparsers.add_parser(
        "plan", help="advice: scale up or out, and how (DDP, ZeRO, TP/PP), with the figures",
        description="Checks memory on one device, then searches every layout (DDP, ZeRO-1/2/3, TP, PP, TP x PP "
                    "x DP; every device count up to 8 nodes, then whole nodes) on up to --max-world devices, at "
                    "micro-batches up to --max-batch with gradient accumulation (micro-batches per step) to "
                    "the --global-batch you train with (or any global batch within --global-batch-limit), with "
                    "activation checkpointing where a layout "
                    "needs it, and recommends the cheapest per sample that meets the named need "
                    "(--target-samples-per-s, or memory that does not fit one node) without being comm-bound (by the "
                    "communication overlap leaves exposed; by CCR with --no-overlap); "
                    "among equals, fewer nodes. Without a need it stays on one node. Every step quotes CCR, "
                    "samples/s, scaling efficiency and memory from the fitted models and the measured compute; "
                    "the plan states the bounds it searched.",
        epilog="examples:\n  pybench plan --params 7B --seq 4096 --model h100.json --tflops 400 "
               "--target-samples-per-s 60   # h100.json: see `pybench fit --help`",
        formatter_class=argparse.RawDescriptionHelpFormatter)
    _add_shape_args(r, None)
    r.add_argument("--seq", type=_size, default=2048, help="sequence length (default 2048)")
    r.add_argument("--batch", type=_count, default=1, help="micro-batch size per replica (default 1)")
    r.add_argument("--gpus-per-node", type=_count, default=None,
                   help="devices per node (default: the --system's GPUs per host, else 8)")
    r.add_argument("--max-world", type=_count, default=None,
                   help="largest world size searched (default 64, or one node when the model file prices no "
                        "inter-node link)")
    r.add_argument("--max-batch", type=_count, default=64,
                   help="largest micro-batch per device searched (default 64); the micro-batches per step "
                        "(gradient accumulation, pipeline micro-batches) are searched too")
    r.add_argument("--peak-tflops", type=_positive, default=None,
                   help="the device's datasheet peak, as a reference only: below 40%% of it the plan says to fix "
                        "utilisation before adding nodes")
    _add_model_args(r)
    r.add_argument("--no-overlap", action="store_true", help="do not overlap the gradient exchange with backward")
    r.add_argument("--bucket-mb", type=_positive, default=25, help="gradient bucket size in MiB (default 25)")
    r.add_argument("--target-samples-per-s", type=_positive,
                   help="throughput to reach, a named need: the smallest configuration reaching it, preferring one "
                        "not comm-bound (without a need, the plan stays on one node)")
    r.add_argument("--loader-samples-per-s", type=_positive,
                   help="samples/s one replica's data loader delivers (measured, e.g. by `pybench profile -n 1`); "
                        "caps throughput, and below the device's rate the advice is to fix the input pipeline")
    r.add_argument("--profile", metavar="PROFILE.json",
                   help="the loader's rate measured by `pybench profile -n 1 --json` (the row of --batch if it was "
                        "measured, else the fastest); caps throughput as --loader-samples-per-s does")
    r.add_argument("--price-per-node-hour", type=_positive, help="price of one node per hour (samples per dollar)")
    r.add_argument("--price-per-device-hour", type=_positive,
                   help="price of one device per hour (instead of --price-per-node-hour)")
    r.add_argument("--global-batch-limit", type=_count, default=1024, metavar="SEQUENCES",
                   help="the largest global batch (dp x micro-batch x micro-batches) searched, the user's own "
                        "micro-batch excepted; above it the plan says what it asks of the learning rate and "
                        "warm-up (default 1024)")
    r.add_argument("--global-batch", type=_count, default=None, metavar="SEQUENCES",
                   help="the global batch you train with (sequences per optimizer step, as Megatron's "
                        "--global-batch-size): every layout is weighed at exactly this batch, split into micro-batch "
                        "x micro-batches x data-parallel replicas; without it the global batch is free within "
                        "--global-batch-limit")
    _add_output_args(r, "the plan")
    r.set_defaults(func=run_plan)


def add_parsers(subparsers: Any) -> None:
    """Register ``compute``, ``ccr`` and ``plan`` on an argparse subparsers object."""
    _add_compute_parser(subparsers)
    _add_ccr_parser(subparsers)
    _add_plan_parser(subparsers)
