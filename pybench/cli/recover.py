"""``pybench recover``: rebuild result files from the journals of runs that died whole.

Argument parsing and output only; the work is :mod:`pybench.measure.recover`.
"""

from __future__ import annotations

import argparse


def add_parsers(subparsers) -> None:
    p = subparsers.add_parser(
        "recover", help="rebuild a result file from the journal of a run killed with its whole job",
        formatter_class=argparse.RawDescriptionHelpFormatter,
        description="A run journals every size it measures in its job folder (in the temporary folder). When "
                    "rank 0 dies alone, the file is rebuilt at once; when the whole job dies together (srun's "
                    "cgroup, the OOM killer), the file keeps only its last rewrite, marked in progress. This "
                    "rebuilds it from the journal, with every size measured, marked cut short. Run it where "
                    "rank 0 ran, with the same TMPDIR.",
        epilog="examples:\n  pybench recover ar.json\n  pybench recover p2p.latency.json p2p.bw.json p2p.bibw.json")
    p.add_argument("files", nargs="+", metavar="RESULT", help="result files (--json) of runs that were killed")
    p.set_defaults(func=run_recover)


def run_recover(args) -> int:
    from pybench.measure.recover import recover_result
    for name in args.files:
        done = recover_result(name)
        if done.already_complete:
            print(f"{done.path}: already complete ({done.sizes} size(s)); removed the stale journal {done.journal}")
        else:
            print(f"{done.path}: rebuilt with {done.sizes} size(s) from {done.journal}, marked cut short")
    return 0
