"""Acceptance table of the alpha-beta fitter: leave-one-size-out cross-validation.

The criterion (issue "alpha-beta model"): for each all-reduce and all-gather log of the
shared data (verbatim copies in tests/fixtures/shared_data/, see tests/fixtures/SHARED_SOURCES.md)
and for the CPU runs of the foundation (tests/fixtures/cpu_mpi2_*.json),
leave-one-size-out cross-validation over every size from 64 KiB up must give a median
absolute percentage error of at most 5% and a maximum of at most 15%; the single-line
fit's errors on the same data are shown beside it.

Run from the repository root::

    python benchmarks/model_cross_validation.py            # the table
    python benchmarks/model_cross_validation.py --detail   # plus every held-out size
    python benchmarks/model_cross_validation.py FILE...    # other logs or result files

Method, the same for every file (no per-file setting, no point excluded): the piecewise
fit of :func:`pybench.model.fit.fit_alpha_beta` with its defaults, every measurement the file
holds (nccl-tests: out-of-place and in-place times, see
:meth:`pybench.model.logs.MeasurementSet.fit_points`). The ``oop-only`` column repeats the
piecewise cross-validation on the out-of-place column alone, for comparison.

This is a script, not a pytest-benchmark suite (its name does not start with
``test_``); the same criterion is asserted in tests/model/test_fit.py.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

import numpy as np

from pybench.errors import PyBenchError
from pybench.model.fit import cross_validate, fit_alpha_beta
from pybench.model.logs import load_measurements

REPO = Path(__file__).resolve().parents[1]
FIXTURES = REPO / "tests" / "fixtures"
SHARED_DATA = FIXTURES / "shared_data"  # the repository's copies of the shared logs
MIN_SIZE = 64 * 1024
MEDIAN_LIMIT, MAX_LIMIT = 5.0, 15.0

# The acceptance set, named file by file: a missing one is said, never silently dropped.
ACCEPTANCE_SET = (
    SHARED_DATA / "nccl-tests" / "a100_2node_16gpu_oci_roce_allreduce.txt",
    SHARED_DATA / "nccl-tests" / "h100_p5_2node_16gpu_efa_allreduce_srunprefix.txt",
    SHARED_DATA / "nccl-tests" / "b200_2node_16gpu_gke_a4_allgather.txt",
    SHARED_DATA / "nccl-tests" / "v100_dgx1_8gpu_allgather_4g_issue37_oldformat.txt",
    FIXTURES / "cpu_mpi2_allreduce.json",
    FIXTURES / "cpu_mpi2_allgather.json",
)


def default_files() -> list:
    """The acceptance set that is present (see :func:`missing_inputs` for the rest)."""
    return [p for p in ACCEPTANCE_SET if p.is_file()]


def missing_inputs(files=None) -> list:
    """Inputs of the table that do not exist: the acceptance set's by default, else the given files."""
    wanted = ACCEPTANCE_SET if files is None else [Path(f) for f in files]
    return [p for p in wanted if not Path(p).is_file()]


def acceptance_table(files=None) -> list:
    """One dict per measurement set of an all-reduce / all-gather sweep.

    Keys: ``name``, ``collective``, ``sizes`` (held out), ``segments`` (pieces of the
    fit to all the data), ``pw_median``, ``pw_max`` (piecewise, %), ``line_median``,
    ``line_max`` (single line, %), ``oop_median``, ``oop_max`` (piecewise on the first
    time column only; equal to pw where there is one column), ``verdict`` (``pass``,
    ``FAIL`` or why it cannot be judged), ``worst_size`` and ``cv`` (the
    :class:`~pybench.model.fit.CrossValidation`).
    """
    rows = []
    for path in (default_files() if files is None else [Path(f) for f in files]):
        for m in load_measurements(path):
            if m.collective not in ("allreduce", "allgather"):
                continue
            row: dict[str, Any] = {"name": Path(path).name, "collective": m.collective}
            distinct = np.unique(m.size_bytes)
            if distinct.size < 3 or not np.any(distinct >= MIN_SIZE):
                row.update(verdict=f"n/a: {distinct.size} size(s), nothing to hold out", sizes=0)
                rows.append(row)
                continue
            size, time = m.fit_points()
            pw = cross_validate(m, min_size=MIN_SIZE)
            line = cross_validate(m, min_size=MIN_SIZE, single_line=True)
            oop = cross_validate((m.size_bytes, m.time_s), min_size=MIN_SIZE)
            ok = pw.median_ape <= MEDIAN_LIMIT and pw.max_ape <= MAX_LIMIT
            row.update(
                sizes=int(pw.size_bytes.size),
                segments=len(fit_alpha_beta(size, time).segments),
                pw_median=pw.median_ape, pw_max=pw.max_ape,
                line_median=line.median_ape, line_max=line.max_ape,
                oop_median=oop.median_ape, oop_max=oop.max_ape,
                verdict="pass" if ok else "FAIL",
                worst_size=int(pw.size_bytes[int(np.argmax(pw.ape_percent))]), cv=pw)
            rows.append(row)
    return rows


def format_table(rows) -> str:
    """Plain-text table of :func:`acceptance_table` rows."""
    head = (f"{'file':<50} {'coll':<9} {'sizes':>5} {'pieces':>6} | {'piecewise med':>13} {'max':>6} "
            f"| {'1 line med':>10} {'max':>6} | {'oop-only med':>12} {'max':>6} | verdict")
    out = [f"leave-one-size-out from {MIN_SIZE // 1024} KiB; criterion median <= {MEDIAN_LIMIT:g}%, "
           f"max <= {MAX_LIMIT:g}% (APE, %)", head, "-" * len(head)]
    for r in rows:
        if "pw_median" not in r:
            out.append(f"{r['name']:<50} {r['collective']:<9} {r['sizes']:>5} {'':>6} | "
                       f"{'':>13} {'':>6} | {'':>10} {'':>6} | {'':>12} {'':>6} | {r['verdict']}")
            continue
        out.append(
            f"{r['name']:<50} {r['collective']:<9} {r['sizes']:>5} {r['segments']:>6} | "
            f"{r['pw_median']:>13.1f} {r['pw_max']:>6.1f} | {r['line_median']:>10.1f} "
            f"{r['line_max']:>6.1f} | {r['oop_median']:>12.1f} {r['oop_max']:>6.1f} | "
            f"{r['verdict']}" + (f" (worst at {r['worst_size']} B)" if r["verdict"] != "pass" else ""))
    return "\n".join(out)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("files", nargs="*", help="logs or result files (default: the acceptance set)")
    parser.add_argument("--detail", action="store_true", help="also print every held-out size")
    args = parser.parse_args(argv)
    missing = missing_inputs(args.files or None)
    try:
        rows = acceptance_table([p for p in (args.files or ACCEPTANCE_SET) if Path(p).is_file()])
    except PyBenchError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    print(format_table(rows))
    for path in missing:
        # fewer rows than the README's table must never pass unnoticed
        print(f"missing input (no row for it): {path}", file=sys.stderr)
    if missing:
        return 1
    if args.detail:
        for r in rows:
            if "cv" in r:
                print(f"\n# {r['name']} ({r['collective']})\n{r['cv'].table()}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
