"""``pybench system``: the named system descriptions, one of them, or this machine's, detected.

Argument parsing and output only; detection lives in :mod:`pybench.measure.system_probe` and
:mod:`pybench.model.system_detect`.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path


def _examples(*lines: str) -> str:
    return "examples:\n" + "\n".join(f"  {line}" for line in lines)


def add_parsers(subparsers) -> None:
    p = subparsers.add_parser(
        "system", help="list the named systems, show one, or detect this machine's description",
        formatter_class=argparse.RawDescriptionHelpFormatter,
        description="Without arguments: the named systems, one line each. With NAME or FILE: that description "
                    "as JSON, validated. With --detect: this machine read from NVML (or nvidia-smi), sysfs and "
                    "NCCL's topology dump, printed as a description file that --system accepts; what cannot "
                    "be detected is named, never guessed.",
        epilog=_examples("pybench system", "pybench system dgx-h100 > mine.json",
                         "pybench system --detect > here.json && pybench predict model.json --world 16 --nodes 2 "
                         "--system here.json",
                         "pybench system --detect --evidence   # every field, where it came from, what is missing",
                         "pybench system --recorded ar.json   # the machine a result was measured on",
                         "NCCL_TOPO_DUMP_FILE=topo.xml pybench allreduce ...; pybench system --detect "
                         "--topology-dump topo.xml"))
    p.add_argument("name", nargs="*", metavar="NAME|FILE",
                   help="a named system or a description file to show (default: list the named systems; "
                        "`list` and `show NAME` read alike)")
    p.add_argument("--detect", action="store_true", help="describe this machine instead (default off)")
    p.add_argument("--evidence", action="store_true",
                   help="with --detect: print what was detected, from where, and what was not, as JSON, even "
                        "where it is not a whole description (default off)")
    p.add_argument("--topology-dump", default=None, metavar="XML",
                   help="with --detect: NCCL's topology dump to read as well (default: the file "
                        "NCCL_TOPO_DUMP_FILE names, if it exists)")
    p.add_argument("--recorded", default=None, metavar="RESULT",
                   help="the description of the machine a pybench result file was measured on, from what it "
                        "recorded (default: none)")
    p.set_defaults(func=run_system)


def run_system(args) -> int:
    from pybench.errors import UsageError
    from pybench.model.system import load_system, named_systems

    args.name = _one_name(args.name) if not args.detect else " ".join(args.name) or None
    if not args.detect and (args.evidence or args.topology_dump):
        raise UsageError("--evidence and --topology-dump describe this machine: give them with --detect")
    if args.recorded is not None:
        if args.detect or args.name is not None:
            raise UsageError("--recorded describes the machine of a result file: give it alone")
        return _recorded(args.recorded)
    if args.detect:
        if args.name is not None:
            raise UsageError(f"--detect describes this machine; {args.name!r} names another: give one of them")
        return _detect(args)
    if args.name is None:
        for name in named_systems():
            print(load_system(name).summary())
        return 0
    print(json.dumps(load_system(args.name).model_dump(exclude_none=True), indent=1))
    return 0


def _one_name(names: list[str]) -> str | None:
    """The one NAME or FILE given, None for none; `list` and `show NAME` (as users guess) read as none and NAME."""
    from pybench.errors import UsageError

    if names and names[0] in ("list", "show") and not Path(names[0]).exists():
        verb, names = names[0], names[1:]
        if verb == "show" and not names:
            raise UsageError("`system show` needs a NAME or FILE (`pybench system` lists the names)")
        if verb == "list" and names:
            raise UsageError(f"`system list` takes no name; show one with `pybench system show {names[-1]}`")
    if len(names) > 1:
        raise UsageError(f"give one NAME or FILE, not {len(names)} ({' '.join(names)})")
    return names[0] if names else None


def _detect(args) -> int:
    from pybench.measure.system_probe import probe_system
    from pybench.model.system_detect import description_from_probe

    # An interactive command may wait longer for nvidia-smi than a result's environment does.
    probe = probe_system(topology_dump=args.topology_dump, smi_timeout_s=5.0)
    if args.evidence:
        print(json.dumps(probe, indent=1))
        return 0
    description = description_from_probe(probe)
    for note in probe.get("notes", []):
        print(f"pybench: note: {note}", file=sys.stderr)
    print(json.dumps(description.model_dump(exclude_none=True), indent=1))
    return 0


def _recorded(path: str) -> int:
    from pybench.errors import UsageError
    from pybench.io.files import read_json
    from pybench.model.system_detect import recorded_system

    description = recorded_system(read_json(path), path)
    if description is None:
        raise UsageError(f"{path} records no detected system (a result of an older pybench, or not a pybench "
                         "result); run `pybench system --detect` on the machine it was measured on")
    print(json.dumps(description.model_dump(exclude_none=True), indent=1))
    return 0
