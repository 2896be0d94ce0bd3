"""GPU commands and the CLI's GPU glue.

- ``pybench copy``: copy bandwidth references (d2d, h2d, d2h, p2p), as nvbandwidth.
- ``pybench p2p --matrix``: NCCL send/recv bandwidth and latency for every GPU
  pair, pairs below a fraction of the median flagged (``run_p2p_matrix``).
- Backend choice: ``select_backend`` picks nccl on a GPU node and falls back to
  the CPU (mpi) backend with one line on stderr where there is no usable GPU;
  ``--backend nccl`` without one is a one-line error (exit 3) saying why and
  what to install.

Options that the NCCL backend reads in every rank travel in the environment
(``apply_gpu_options``), so a launched job's ranks all see the same.

Runs stand-alone too: ``python -m pybench.cli.gpu copy ...``.
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

from pybench.cli.argtypes import number
from pybench.errors import BackendUnavailable, UsageError
from pybench.io.formats import COPY, P2P_MATRIX, FileFormat, stamp

# Parsed by the one strict parser (pybench.cli.argtypes) before any GPU is looked for, so a bad
# number is bad input (exit 2) on a machine without a GPU too.
_gpu_count = number(int, 1, strict=False, maximum=1 << 16)
_samples = number(int, 1, strict=False, maximum=1_000_000)
_share = number(float, 0, strict=True, maximum=1.0)


# ---------------------------------------------------------------- backend choice
def nccl_unavailable_reason(nccl_lib: str | None = None) -> str | None:
    """Why the nccl backend cannot run in this process (no CUDA module, no GPU, no NCCL), or None."""
    from pybench.measure.backends.nccl import no_gpu_reason
    from pybench.measure.gpu.nccl_lib import load_nccl
    reason = no_gpu_reason()
    if reason is not None:
        return reason
    try:
        load_nccl(nccl_lib)
    except BackendUnavailable as exc:
        return str(exc)
    return None


def require_nccl(nccl_lib: str | None = None) -> None:
    """Raise BackendUnavailable (one line, exit 3) when ``--backend nccl`` cannot run here."""
    reason = nccl_unavailable_reason(nccl_lib)
    if reason is not None:
        if reason.startswith("no GPU"):
            raise BackendUnavailable(f"--backend nccl needs a GPU: {reason}; on CPUs use --backend mpi")
        raise BackendUnavailable(f"--backend nccl cannot run: {reason}")


def select_backend(requested: str | None, nccl_lib: str | None = None) -> tuple[str, str | None]:
    """The backend to run and, when falling back, the one line to print on stderr.

    ``requested`` None or "auto": nccl where a GPU and NCCL are usable, else mpi with
    a note saying why. "nccl": nccl or BackendUnavailable. Anything else: as given.
    """
    if requested not in (None, "auto"):
        if requested == "nccl":
            require_nccl(nccl_lib)
        return requested, None
    reason = nccl_unavailable_reason(nccl_lib)
    if reason is None:
        return "nccl", None
    return "mpi", f"pybench: {reason}; running on CPUs with the mpi backend (--backend mpi to silence this)"


def add_gpu_run_options(p: argparse.ArgumentParser) -> None:
    """Options of GPU runs (collectives, p2p --matrix, copy)."""
    g = p.add_argument_group("GPU (nccl backend)")
    g.add_argument("--nccl-lib", default=None, metavar="PATH",
                   help="libnccl.so.2 (or its folder) to use; default: PYBENCH_NCCL_LIB, the nvidia-nccl wheel, "
                        "torch's copy, $NCCL_HOME/lib, the system library path")
    g.add_argument("--gpus", type=_gpu_count, default=None, metavar="N",
                   help="stand-alone: drive only the first N visible GPUs (default all)")
    if not any(a.dest == "in_place" for a in p._actions):
        g.add_argument("--in-place", action="store_true",
                       help="run collectives in place (nccl-tests' in-place convention); default out of place")


def apply_gpu_options(args) -> None:
    """Put the GPU options where every rank's NcclBackend reads them (the environment)."""
    from pybench.measure.backends.nccl import GPUS_ENV, IN_PLACE_ENV
    from pybench.measure.gpu.nccl_lib import ENV_PATH
    if getattr(args, "nccl_lib", None):
        os.environ[ENV_PATH] = str(args.nccl_lib)
    if getattr(args, "gpus", None) is not None:
        if args.gpus < 1:
            raise UsageError(f"--gpus {args.gpus} must be at least 1")
        os.environ[GPUS_ENV] = str(args.gpus)
    if getattr(args, "in_place", False):
        os.environ[IN_PLACE_ENV] = "1"


def local_gpus(args) -> list[int]:
    from pybench.measure.backends.nccl import gpu_probe, no_gpu_reason, requested_gpus
    reason = no_gpu_reason()
    if reason is not None:
        what = "p2p --matrix" if getattr(args, "matrix", False) else args.command
        raise BackendUnavailable(f"`pybench {what}` needs a GPU: {reason}")
    ndev = gpu_probe()["device_count"]
    env = dict(os.environ)
    if getattr(args, "gpus", None) is not None:
        env["PYBENCH_GPUS"] = str(args.gpus)
    return requested_gpus(ndev, env)


def _gpu_environment() -> dict:
    from pybench.measure.envinfo import environment
    env = environment()
    env["nccl_env"] = {k: v for k, v in sorted(os.environ.items()) if k.startswith("NCCL_")}
    return env


def _write_json(path: Path | None, force: bool, fmt: FileFormat, body: dict) -> None:
    if path is None:
        return
    from pybench.io.files import write_json
    write_json(path, stamp(fmt, body), force)  # (checked free before the run: exclusive unless --force)


# ---------------------------------------------------------------- copy
def cmd_copy(args) -> int:
    from pybench.measure.gpu.copy_bench import parse_engines, parse_kinds, run_copies, table_lines
    from pybench.sizes import parse_sizes
    kinds = parse_kinds(args.kinds)
    engines = parse_engines(args.engine)
    sizes = parse_sizes(args.sizes)
    if args.json is not None:
        from pybench.io.files import refuse_existing
        refuse_existing(args.json, args.force)
    devices = local_gpus(args)
    if "p2p" in kinds and len(devices) < 2:
        kinds = tuple(k for k in kinds if k != "p2p")
        print("pybench: one GPU: p2p copies skipped", file=sys.stderr)
    records = run_copies(kinds, devices, sizes, n_samples=args.samples, ops_per_sample=args.ops, engines=engines,
                         bidirectional=args.bidirectional)
    for line in table_lines(records):
        print(line, flush=True)
    _write_json(args.json, args.force, COPY,
                {"environment": _gpu_environment(), "records": [r.to_dict() for r in records]})
    wrong = sum(r.wrong_bytes for r in records)
    if wrong:
        print(f"pybench: error: {wrong} copied byte(s) differ from their source", file=sys.stderr, flush=True)
    return 1 if wrong else 0


def add_parsers(sub) -> None:
    """Add ``copy`` to the CLI's subparsers (each sets ``func(args) -> int``)."""
    p = sub.add_parser("copy", help="GPU copy bandwidth: d2d, h2d, d2h and peer (as nvbandwidth)",
                       description="Copy-engine bandwidth with CUDA events: within a GPU, to/from pinned host "
                                   "memory, and between GPUs. GB/s = 1e9 B/s.",
                       epilog="examples:\n  pybench copy --sizes 256M --kinds d2d,h2d,d2h --bidirectional",
                       formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--kinds", default="all", help="d2d, h2d, d2h, p2p, a comma list, or all (default all)")
    p.add_argument("--sizes", "-s", default="256M", help="copy sizes in bytes, as the collectives (default 256M)")
    p.add_argument("--gpus", type=_gpu_count, default=None, metavar="N",
                   help="use the first N visible GPUs (default all)")
    p.add_argument("--samples", type=_samples, default=20, help="timed samples per copy (default 20)")
    p.add_argument("--ops", type=_samples, default=5, help="copies per sample (default 5)")
    p.add_argument("--engine", default="ce", help="ce (copy engine, cudaMemcpy), sm (copy kernel), or all (default ce)")
    p.add_argument("--bidirectional", action="store_true",
                   help="run the reverse copy at the same time (h2d with d2h, p2p both ways), as nvbandwidth")
    p.add_argument("--json", type=Path, default=None, metavar="FILE", help="versioned JSON with raw samples")
    p.add_argument("--force", action="store_true", help="overwrite an existing --json file")
    p.set_defaults(func=cmd_copy)


# ---------------------------------------------------------------- p2p --matrix
def add_p2p_matrix_options(p: argparse.ArgumentParser) -> None:
    """Options of ``p2p --matrix`` for the existing p2p parser."""
    g = p.add_argument_group("GPU pair matrix (--matrix)")
    g.add_argument("--matrix", action="store_true",
                   help="NCCL send/recv bandwidth and latency for every pair of local GPUs, flagging slow pairs")
    g.add_argument("--threshold", type=_share, default=0.8,
                   help="flag pairs under this fraction of the median bandwidth, or over median latency / it "
                        "(default 0.8)")
    g.add_argument("--matrix-size", default="64M", help="message size for bandwidth (default 64M)")
    g.add_argument("--latency-size", default="8", help="message size for latency (default 8 bytes)")
    g.add_argument("--samples", type=_samples, default=10, help="timed samples per pair and size (default 10)")
    if not any(a.dest == "nccl_lib" for a in p._actions):
        g.add_argument("--nccl-lib", default=None, metavar="PATH", help="libnccl.so.2 to use (see --backend nccl)")
    if not any(a.dest == "gpus" for a in p._actions):
        g.add_argument("--gpus", type=_gpu_count, default=None, metavar="N", help="use the first N visible GPUs")


def run_p2p_matrix(args) -> int:
    """Entry point of ``pybench p2p --matrix`` (one process, every local GPU)."""
    from pybench.measure.backends.nccl import launch_mode
    from pybench.measure.gpu.nccl_lib import load_nccl
    from pybench.measure.gpu.p2p_matrix import flag_pairs, matrix_lines, measure_pairs
    from pybench.sizes import parse_sizes
    if launch_mode() != "single":
        raise UsageError("p2p --matrix runs as one process driving every local GPU; "
                         "run it without mpirun/srun/torchrun")
    bw_bytes = parse_sizes(args.matrix_size)[-1]
    lat_bytes = parse_sizes(args.latency_size)[0]
    if not 0 < args.threshold <= 1:
        raise UsageError(f"--threshold {args.threshold} must be in (0, 1]")
    json_path = getattr(args, "json", None)
    if json_path is not None:
        from pybench.io.files import refuse_existing
        refuse_existing(json_path, getattr(args, "force", False))
    devices = local_gpus(args)
    if len(devices) < 2:
        raise UsageError(f"p2p --matrix needs at least 2 GPUs; this node shows {len(devices)}")
    lib = load_nccl(getattr(args, "nccl_lib", None))
    from pybench._native import cuda
    c = cuda()
    world = c.NcclWorld(devices, float(getattr(args, "timeout", 30.0) or 0.0))
    report = c.link_report(len(devices))
    links = {(a, b): link for a, b, link in report["pairs"]}
    print(f"# p2p matrix: {len(devices)} GPUs, {lib}; bandwidth at {args.matrix_size}, latency at "
          f"{args.latency_size} B; threshold {args.threshold:g} of the median", flush=True)
    pairs = flag_pairs(measure_pairs(world.pair_times, len(devices), bw_bytes, lat_bytes, args.samples, links),
                       args.threshold)
    for line in matrix_lines(pairs, len(devices)):
        print(line, flush=True)
    _write_json(json_path, getattr(args, "force", False), P2P_MATRIX,
                {"environment": _gpu_environment(), "nccl": lib.to_dict(), "threshold": args.threshold,
                 "bandwidth_size_bytes": bw_bytes, "latency_size_bytes": lat_bytes,
                 "pairs": [p.to_dict() for p in pairs]})
    return 1 if any(p.slow_bandwidth or p.slow_latency for p in pairs) else 0
