"""``pybench nccl-tests-bin DIR``: nccl-tests' program names in DIR, each running pybench.

Harnesses run nccl-tests by its programs' names from a folder they are told (CloudAI's
``all_reduce_perf_mpi``, SuperBench's ``bin_dir/all_reduce_perf``, Azure's health checks, ``mpirun ...
all_reduce_perf``). Pointing that folder here makes them run pybench with their own command lines, which
pybench reads as nccl-tests does (``-b -e -f -g -n -w -c -d -o -r -a -J``). The programs go only into a
folder the user names, never onto the PATH, and never over a file pybench did not write (a real nccl-tests).
"""

from __future__ import annotations

import argparse
import contextlib
import os
import shlex
import sys
import tempfile
from pathlib import Path

from pybench.collectives import COLLECTIVES, NCCL_TESTS_PROGRAMS
from pybench.errors import UsageError

# The first line after the interpreter line of every program written here: what may be replaced.
MARK = "# written by `pybench nccl-tests-bin`"


# nccl-tests programs of collectives pybench does not measure (all_to_allv_perf's name included): each one says so
# in one line and exits 2, where a harness would otherwise meet "not found"
UNMEASURED = {**{program: collective for collective, program in NCCL_TESTS_PROGRAMS.items()
                 if collective not in COLLECTIVES}, "alltoallv_perf": "alltoallv"}


def programs() -> dict[str, str]:
    """Program name -> pybench collective: nccl-tests' name of each collective pybench measures (and of those it
    does not, :data:`UNMEASURED`), and the ``_mpi`` name that nccl-tests' MPI build gets in some harnesses
    (CloudAI's)."""
    named = {program: collective for collective, program in NCCL_TESTS_PROGRAMS.items() if collective in COLLECTIVES}
    named |= UNMEASURED
    return {**named, **{f"{program}_mpi": collective for program, collective in named.items()}}


def program_text(collective: str, python: str = sys.executable) -> str:
    if collective not in COLLECTIVES:
        program = NCCL_TESTS_PROGRAMS.get(collective, f"{collective}_perf")
        said = (f"pybench: error: {program}: pybench does not measure {collective} (it measures "
                f"{', '.join(COLLECTIVES)}); run nccl-tests' own {program} for it")
        return (f"#!/bin/sh\n{MARK}: nccl-tests' {program}, not measured by pybench\n"
                f"echo {shlex.quote(said)} >&2\nexit 2\n")
    return (f"#!/bin/sh\n{MARK}: nccl-tests' {NCCL_TESTS_PROGRAMS[collective]}, measured by pybench\n"
            f"exec {shlex.quote(python)} -m pybench {collective} \"$@\"\n")


def write_programs(folder: str | os.PathLike) -> list[Path]:
    """Write every program into ``folder`` (made if missing), all or none (a harness finding some of them would
    run half a suite); a file there that pybench did not write is never replaced (UsageError, before anything
    is written)."""
    if not str(folder).strip():
        raise UsageError("an empty folder name (an unset variable?): name the folder for nccl-tests' programs")
    root = Path(folder)
    if root.is_symlink() and not root.exists():
        raise UsageError(f"{root}: a symbolic link to nothing ({os.readlink(root)}); name an existing folder or a "
                         "new path")
    if root.exists() and not root.is_dir():
        raise UsageError(f"{root}: not a folder; name a folder for nccl-tests' programs (it is made if missing)")
    targets = {root / name: collective for name, collective in programs().items()}
    # a real nccl-tests program of a collective pybench does not measure, put beside pybench's, stays and is used
    targets = {p: c for p, c in targets.items() if c in COLLECTIVES or not (p.exists() or p.is_symlink()) or _ours(p)}
    foreign = [p for p in targets if (p.exists() or p.is_symlink()) and not _ours(p)]
    if foreign:
        raise UsageError(f"{foreign[0]}: exists and was not written by pybench (a real nccl-tests build?); "
                         f"name another folder: pybench replaces only its own programs")
    root.mkdir(parents=True, exist_ok=True)
    staged: dict[Path, str] = {}
    try:
        for path, collective in targets.items():
            fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", dir=root)
            staged[path] = tmp
            with os.fdopen(fd, "w", encoding="utf-8") as f:
                f.write(program_text(collective))
            os.chmod(tmp, 0o755)
        for path, tmp in staged.items():
            os.replace(tmp, path)
    except BaseException as exc:
        for tmp in staged.values():
            with contextlib.suppress(OSError):
                os.unlink(tmp)
        if isinstance(exc, OSError) and exc.filename is None:  # (a write to a descriptor names no file)
            raise type(exc)(exc.errno, exc.strerror, str(root)) from None
        raise
    return list(targets)


def _ours(path: Path) -> bool:
    if path.is_symlink() or not path.is_file():
        return False
    try:
        with path.open("rb") as f:
            head = f.read(4096).decode("utf-8", "replace").splitlines()
    except OSError:
        return False
    return len(head) > 1 and head[1].startswith(MARK)


def add_parsers(subparsers) -> None:
    p = subparsers.add_parser(
        "nccl-tests-bin", help="write nccl-tests' program names into a folder, each running pybench",
        formatter_class=argparse.RawDescriptionHelpFormatter,
        description="Writes all_reduce_perf, all_gather_perf, reduce_scatter_perf, broadcast_perf, alltoall_perf, "
                    "sendrecv_perf (and their _mpi names) into FOLDER: each runs `python -m pybench COLLECTIVE` "
                    "with this Python and the arguments it is given, so a harness told to run nccl-tests from "
                    "FOLDER (or `mpirun ... FOLDER/all_reduce_perf -b 8 -e 1G -f 2`) runs pybench. A file there "
                    "that pybench did not write is never replaced.",
        epilog="examples:\n  pybench nccl-tests-bin ~/pybench-nccl-tests\n"
               "  mpirun -np 2 ~/pybench-nccl-tests/all_reduce_perf -b 8 -e 128M -f 2")
    p.add_argument("folder", metavar="FOLDER", help="the folder to write them into (made if missing)")
    p.set_defaults(func=run_nccl_tests_bin)


def run_nccl_tests_bin(args) -> int:
    written = write_programs(args.folder)
    print(f"wrote {len(written)} programs into {Path(args.folder).resolve()}: "
          f"{', '.join(p.name for p in written if not p.name.endswith('_mpi'))} (and each with _mpi)")
    return 0
