"""nccl-tests' and OSU's command-line flags, with their meanings where pybench can honour them.

A command line copied from nccl-tests (``all_reduce_perf -b 8 -e 8G -f 2 -g 1``) or from
OSU (``osu_latency -m 1:4M -i 1000 -x 100``) runs unchanged, or is refused in one line
that names pybench's way of doing the same thing. Nothing here measures: each flag is
turned into pybench's own options (:func:`apply_nccl_tests_flags`, :func:`apply_osu_flags`).
"""

from __future__ import annotations

import argparse
import os
import re
import sys
from pathlib import Path

from pybench.cli import argtypes
from pybench.collectives import canonical_op
from pybench.errors import UsageError

MIN_BW_ENV = "NCCL_TESTS_MIN_BW"


def _int(text: str) -> int:
    # nccl-tests reads these with strtol: whole numbers only, and pybench says so in one line
    return argtypes.number(int, -1, strict=False)(text)


# flag -> (long name, value that means "off" or the one pybench does, what to use instead)
_REFUSED_UNLESS_DEFAULT = {
    "-p": ("--parallel_init", 0, "pybench initialises one communicator per process; there is nothing to parallelise"),
    "-C": ("--report_cputime", 0, "pybench reports CUDA-event time on the nccl backend and host-clock time on "
                                  "--backend mpi; use --backend mpi for host-clock times"),
    "-R": ("--local_register", 0, "pybench does not register buffers with NCCL; --huge-pages sets how host "
                                  "buffers are allocated"),
    "-N": ("--run_cycles", 1, "run the command again and compare the files: pybench compare a.json b.json"),
    "-m": ("--agg_iters", 1, "pybench's batched timing sizes its batches itself (--timing batched); "
                             "use --timing per-op for one operation per sample"),
    "-y": ("--stream_null", 0, "pybench launches on its own stream"),
    "-S": ("--report_timestamps", 0, "the JSON file (--json) records when the run started"),
    "-u": ("--unalign", 0, "pybench's buffers are page-aligned; misaligned buffers are not offered"),
    "-M": ("--memory", 0, "`pybench env` reports the devices and their memory"),
    "-x": ("--cta_policy", -1, "pybench leaves NCCL's CTA policy at NCCL's default (set NCCL_CTA_POLICY yourself)"),
    "-D": ("--device_implementation", 0, "pybench runs NCCL's host API only"),
    "-V": ("--device_cta_count", 16, "pybench runs NCCL's host API only"),
    "-K": ("--per_iter_skip", 0, "use -w/--warmup to leave out the first operations"),
}


def add_nccl_tests_flags(p: argparse.ArgumentParser) -> None:
    """nccl-tests' flags that pybench's own options do not already cover (see --help)."""
    g = p.add_argument_group("nccl-tests flags (accepted with nccl-tests' meaning, or refused in one line "
                             "naming pybench's option)")
    g.add_argument("-t", "--nthreads", type=_int, default=None, metavar="N",
                   help="threads per process: 1 only (default 1; pybench runs one per process; more ranks: --np)")
    g.add_argument("-g", "--ngpus", type=_int, default=None, metavar="N",
                   help="GPUs per process: 1, or N stand-alone on the nccl backend (= --gpus N) (default 1)")
    g.add_argument("-a", "--average", type=_int, default=None, metavar="0-3",
                   help="3 (the slowest rank's time) is what pybench reports; 1, nccl-tests' default, is taken "
                        "and reported so (said on stderr); 0 and 2 are refused (default 3)")
    g.add_argument("-z", "--blocking", type=_int, default=None, metavar="0/1",
                   help="0 = --timing batched, 1 = --timing per-op (a barrier before each operation) (default 0)")
    g.add_argument("-I", "--per_iter_timing", type=_int, default=None, metavar="0/1",
                   help="1 = --stats-columns (per-iteration spread: p5, p95, iterations, CI) (default 0)")
    for flag, (long, default, _) in _REFUSED_UNLESS_DEFAULT.items():
        g.add_argument(flag, long, dest=f"nt_{long.lstrip('-')}", type=_int, default=None, metavar="N",
                       help=f"only {default}, nccl-tests' default, is accepted")
    g.add_argument("-J", "--output_file", dest="nccl_tests_json", default=None, metavar="FILE",
                   help="nccl-tests' own JSON layout; never overwritten: FILE.0, FILE.1 ... as nccl-tests "
                        "(pybench's schema: --json) (default: none)")


def _check_choice(flag: str, value: int | None, allowed: tuple[int, ...], taken: str) -> None:
    # ``taken``: the values pybench accepts, which the advice names (nccl-tests' others are refused)
    if value is not None and value not in allowed:
        raise UsageError(f"{flag} {value} is not one of nccl-tests' values {', '.join(map(str, allowed))}; "
                         f"pybench takes {taken}")


SPLIT_ENV = ("NCCL_TESTS_SPLIT_MASK", "NCCL_TESTS_SPLIT")


def refuse_split_groups() -> None:
    """nccl-tests' NCCL_TESTS_SPLIT_MASK / NCCL_TESTS_SPLIT run one collective per group of ranks at once; pybench
    times one over every rank, a different measurement: refused (one line) unless the value splits nothing."""
    mask = os.environ.get(SPLIT_ENV[0], "").strip()
    for name in SPLIT_ENV[:1] if mask else SPLIT_ENV[1:]:  # (nccl-tests reads the split only without a mask)
        text = os.environ.get(name, "").strip()
        split = re.fullmatch(r"(AND|&|MOD|%)\s*(\w+)", text, re.IGNORECASE)
        value = _number_or_none(split.group(2), 0) if split else None
        if not text or (name == SPLIT_ENV[0] and _number_or_none(text, 16) == 0) or (
                split is not None and (split.group(1).upper() in ("AND", "&") and value == 0 or
                                       split.group(1).upper() in ("MOD", "%") and value == 1)):
            continue  # (every rank gets colour 0: one group)
        raise UsageError(f"{name}={text}: nccl-tests then times one collective per group of ranks at once, and "
                         f"pybench times one over every rank (no split groups); unset {name}, or launch each group "
                         f"as its own run")


def _number_or_none(text: str, base: int) -> int | None:
    """The number nccl-tests reads from ``text`` (the mask hexadecimal, the split's value as C reads base 0), None
    where it is none."""
    try:
        return int(text, base)
    except ValueError:
        return None


def apply_nccl_tests_flags(args: argparse.Namespace, under_launcher: bool) -> None:
    """Turn nccl-tests' flags into pybench's options on ``args``, or raise UsageError (one line)."""
    refuse_split_groups()
    for flag, (long, default, instead) in _REFUSED_UNLESS_DEFAULT.items():
        value = getattr(args, f"nt_{long.lstrip('-')}", None)
        if value is not None and value != default:
            raise UsageError(f"nccl-tests' {flag} {value} ({long}) has no pybench equivalent: {instead}")
    if args.nthreads is not None and args.nthreads < 1:  # --np below 1 is refused: not advice to give
        raise UsageError(f"-t {args.nthreads}: the threads per process must be 1 (pybench runs one per process); "
                         "drop -t or pass -t 1")
    if args.nthreads is not None and args.nthreads != 1:
        raise UsageError(f"-t {args.nthreads}: pybench runs one thread per process; for {args.nthreads} ranks use "
                         f"--np {args.nthreads} stand-alone, or start them with mpirun/srun/torchrun")
    _ngpus(args, under_launcher)
    _check_choice("-a", args.average, (0, 1, 2, 3), "-a 3 (or nccl-tests' default -a 1, reported as -a 3)")
    if args.average in (0, 2):
        raise UsageError(f"-a {args.average}: pybench always reports the slowest rank's time (nccl-tests' -a 3), "
                         "the synchronous cost; drop -a or pass -a 3")
    args.flag_notes = []  # said by rank 0, however the ranks were started (:attr:`RunPlan.flag_notes`)
    if args.average == 1:  # nccl-tests' default, which generated command lines pass
        args.flag_notes.append("-a 1 (the mean of the ranks' times, nccl-tests' default) is reported as -a 3: the "
                               "slowest rank's time, the synchronous cost, which is no less")
    _check_choice("-z", args.blocking, (0, 1, 2, 3), "-z 0 or -z 1")
    if args.blocking in (2, 3):
        raise UsageError(f"-z {args.blocking} has no pybench equivalent; -z 1 (--timing per-op) times each operation "
                         "alone after a barrier")
    if args.blocking is not None:
        wanted = "per-op" if args.blocking == 1 else "batched"
        if args.timing not in (None, wanted):
            raise UsageError(f"-z {args.blocking} means --timing {wanted}, but --timing {args.timing} is given; "
                             "give one of them")
        args.timing = wanted
    if args.nccl_tests_json is not None and not Path(args.nccl_tests_json).resolve().parent.is_dir():
        raise UsageError(f"-J {args.nccl_tests_json}: the folder {Path(args.nccl_tests_json).parent} does not exist; "
                         "create it or choose another file")
    _unused_by_the_test(args)
    _check_choice("-I", args.per_iter_timing, (0, 1), "-I 0 or -I 1")
    if args.per_iter_timing == 1:
        args.stats_columns = True


def _unused_by_the_test(args: argparse.Namespace) -> None:
    """nccl-tests' -o and -r on a test that has no reduction or root (a script passing one set of flags to every
    binary, as CloudAI does): checked, then left aside, and said where they would have changed something."""
    said, lacks = [], []
    if getattr(args, "unused_op", None) is not None:
        lacks.append("reduction op")
        if canonical_op(args.unused_op) != "sum":
            said.append(f"-o {canonical_op(args.unused_op)}")
    if getattr(args, "unused_root", None) is not None:
        lacks.append("root")
        if args.unused_root:
            said.append(f"-r {args.unused_root}")
    if said:
        args.flag_notes.append(f"{args.command} has no {' or '.join(lacks)}: {' and '.join(said)} not used "
                               f"(nccl-tests takes and ignores {'them' if len(said) > 1 else 'it'} too)")


def _ngpus(args: argparse.Namespace, under_launcher: bool) -> None:
    n = args.ngpus
    if n is None or n == 1:
        return
    if n < 1:
        raise UsageError(f"-g {n}: the GPUs per process must be 1 or more")
    if under_launcher:
        raise UsageError(f"-g {n}: under a launcher pybench drives one GPU per process; start {n} processes per "
                         "node instead (mpirun -np / srun --ntasks-per-node)")
    if args.backend not in (None, "nccl"):
        raise UsageError(f"-g {n} asks for {n} GPUs, which only the nccl backend drives; on CPUs use --np {n}")
    if getattr(args, "gpus", None) not in (None, n):
        raise UsageError(f"-g {n} and --gpus {args.gpus} disagree; give one of them")
    args.gpus = n


def check_gpus_for_backend(args: argparse.Namespace, backend: str, why_not_nccl: str | None) -> None:
    """``-g N`` (N > 1) once the backend is known: only the nccl backend drives several GPUs."""
    n = getattr(args, "ngpus", None)
    if n is not None and n > 1 and backend != "nccl":
        reason = f" ({why_not_nccl})" if why_not_nccl else ""
        raise UsageError(f"-g {n} asks for {n} GPUs per process, which needs the nccl backend{reason}; on CPUs "
                         f"use --np {n} for {n} ranks")


def refuse_options_without_effect(args: argparse.Namespace, backend: str) -> None:
    """Options that would do nothing on ``backend`` are refused in one line, never ignored; on nccl, a run in
    place alone of a collective whose in-place result is not defined (nothing would be checked)."""
    if backend == "nccl":
        from pybench.measure.backends.nccl import IN_PLACE_ENV, UNCHECKED_IN_PLACE
        asked = "--in-place" if getattr(args, "in_place", False) else (
            IN_PLACE_ENV if os.environ.get(IN_PLACE_ENV, "") not in ("", "0") else None)
        if asked and args.command in UNCHECKED_IN_PLACE:
            raise UsageError(f"{args.command} cannot run in place alone ({asked}): each rank would send from the "
                             "buffer it receives into, so no result could be checked; drop it, and the in-place "
                             "block is timed beside the checked out-of-place one, as nccl-tests does")
        return
    for dest, flag, what in (("in_place", "--in-place", "runs NCCL collectives in place"),
                             ("gpus", "--gpus", "picks the GPUs NCCL drives (on CPUs --np sets the ranks)"),
                             ("nccl_lib", "--nccl-lib", "picks the NCCL library")):
        if getattr(args, dest, None) not in (None, False):
            raise UsageError(f"{flag} {what}, but this run uses the {backend} backend, where it does nothing; "
                             f"drop {flag} or run with --backend nccl on a GPU node")


def min_busbw_gate(flag_value: float | None) -> float | None:
    """The average-busbw gate: --min-busbw, else NCCL_TESTS_MIN_BW as nccl-tests reads it (GB/s)."""
    if flag_value is not None:
        return flag_value
    text = os.environ.get(MIN_BW_ENV)
    if text is None or text.strip() == "":
        return None
    try:
        return argtypes.nonneg_float(text)
    except argparse.ArgumentTypeError as exc:
        raise UsageError(f"{MIN_BW_ENV}={text!r}: {exc}; set it to a bus bandwidth in GB/s, e.g. 100") from None


def round_down_to_elements(sizes: list[int], elem_bytes: int, dtype: str) -> list[int]:
    """nccl-tests' sizes in whole elements: each size rounded down to the element size, as
    nccl-tests' count = size / element size does; sizes that hold no element are dropped
    (nccl-tests prints them as 0-byte rows) and repeats kept once, with one note on stderr."""
    rounded: list[int] = []
    for s in sizes:
        r = s // elem_bytes * elem_bytes
        if r > 0 and r not in rounded:
            rounded.append(r)
    if rounded != sizes and _first_process():
        dropped = sorted({s for s in sizes if s < elem_bytes})
        print(f"pybench: note: -b/-e/-i sizes rounded down to whole {dtype} elements ({elem_bytes} B) as nccl-tests "
              f"counts them" + (f"; {', '.join(map(str, dropped))} B hold no element and are left out" if dropped
                                else ""), file=sys.stderr)
    if not rounded:
        raise UsageError(f"-b/-e give no size of at least one {dtype} element ({elem_bytes} B); use -b {elem_bytes} "
                         "or more")
    return rounded


def _first_process() -> bool:
    """Whether this process says things once for the job: not a rank pybench started (its parent
    said it), and rank 0 under a user's launcher."""
    from pybench.measure.launch import RANK_MARKER
    if RANK_MARKER in os.environ:
        return False
    ranks = [os.environ[v] for v in ("OMPI_COMM_WORLD_RANK", "PMIX_RANK", "PMI_RANK", "SLURM_PROCID", "RANK")
             if v in os.environ]
    return not ranks or ranks[0] == "0"


# ---------------------------------------------------------------- OSU on `pybench p2p`
def add_osu_flags(p: argparse.ArgumentParser) -> None:
    """OSU's flags on ``p2p`` (osu_latency, osu_bw, osu_bibw)."""
    g = p.add_argument_group("OSU flags (accepted with OSU's meaning, or refused in one line naming pybench's option)")
    g.add_argument("-m", "--message-size", dest="osu_sizes", default=None, metavar="[MIN:]MAX",
                   help="OSU: sizes from MIN (default 1) to MAX, powers of two (= --sizes MIN:MAX) (default: --sizes)")
    g.add_argument("-i", "--iterations", dest="iters", type=argtypes.positive_int, default=None, metavar="N",
                   help="OSU: timed iterations per size (= -n N) (default: adaptive)")
    g.add_argument("-x", "--warmup-osu", dest="osu_warmup", type=argtypes.nonneg_int, default=None, metavar="N",
                   help="OSU: untimed iterations per size (= -w N) (default: -w)")
    g.add_argument("-f", "--full", dest="stats_columns", action="store_true", default=None,
                   help="OSU: full format, the spread after each figure (= --stats-columns) (default off)")
    g.add_argument("-c", "--validation", dest="check", type=argtypes.nonneg_int, nargs="?", const=2, default=2,
                   metavar="N", help="OSU: check the data received; pybench checks N iterations (default 2; -c alone: "
                                     "2; -c 0: no check)")
    g.add_argument("buffers", nargs="*", metavar="H|D", default=[],
                   help="OSU's buffer locations of the two ranks: H H (host, what pybench p2p measures); D (device) "
                        "is refused, naming `pybench p2p --matrix` (default: H H)")
    for flag, long in (("-z", "--tail-lat"), ("-T", "--type"), ("-M", "--mem-limit"), ("-d", "--accelerator")):
        g.add_argument(flag, long, dest=f"osu_{long.lstrip('-').replace('-', '_')}", default=None, metavar="X",
                       help="OSU's: refused in one line naming pybench's equivalent (default: unset)")


_OSU_INSTEAD = {
    "tail_lat": ("-z", "the percentiles are in the JSON file (--json: time_p5_s, time_p95_s, time_p99_s); "
                       "--stats-columns prints p5 and p95"),
    "type": ("-T", "OSU's p2p tests send bytes (MPI_CHAR), as pybench does; other types: the collectives' -d"),
    "mem_limit": ("-M", "pybench checks the memory a run needs before it starts"),
    "accelerator": ("-d", "GPU pairs are measured by `pybench p2p --matrix` over NCCL"),
}


def apply_osu_flags(args: argparse.Namespace) -> None:
    """Turn OSU's flags into pybench's options on ``args``, or raise UsageError (one line)."""
    for key, (flag, instead) in _OSU_INSTEAD.items():
        value = getattr(args, f"osu_{key}", None)
        if value is not None:
            raise UsageError(f"OSU's {flag} {value} has no pybench equivalent: {instead}")
    if args.buffers:
        if len(args.buffers) != 2 or any(b not in ("H", "D", "M") for b in args.buffers):
            raise UsageError(f"{' '.join(args.buffers)}: OSU's buffer locations are two of H (host), D (device), "
                             "M (managed), e.g. H H")
        if args.buffers != ["H", "H"]:
            raise UsageError(f"OSU's buffers {' '.join(args.buffers)} (on the GPU) have no pybench p2p equivalent: "
                             "`pybench p2p --matrix` measures NCCL send/recv between every GPU pair")
    if args.osu_sizes is not None:
        if args.sizes is not None:
            raise UsageError(f"-m {args.osu_sizes} and --sizes {args.sizes} both give the sizes; give one of them")
        lo, _, hi = args.osu_sizes.rpartition(":")
        args.sizes = f"{lo or '1'}:{hi}"
    if args.osu_warmup is not None:
        args.warmup = args.osu_warmup
