"""Acceptance table of the alpha-beta fitter: leave-one-size-out cross-validation.

The criterion (issue 13): for each all-reduce and all-gather log of the shared data
(verbatim copies in tests/fixtures/shared_data/, see tests/fixtures/SHARED_SOURCES.md) and for
the CPU runs of the foundation (tests/fixtures/cpu_mpi2_*.json), leave-one-size-out
cross-validation over every size from 64 KiB up, outside the sizes ``fit`` names as anomalies
(at most 1 per sweep), must give a median absolute percentage error of at most 5%, a maximum
of at most 15%, and the 95% prediction band of the fit that never saw a size must cover at
least 90% of them. The band's median half-width is printed beside its coverage, so that
coverage bought with wide bands shows. The errors with every size held out and the
single-line fit's are shown for comparison, and two yardsticks of the log itself: ``nbrs``,
each held-out size predicted by the straight log-log line between its two measured
neighbours (:func:`pybench.model.cross_validation.neighbour_baseline`), and ``repl``, how far
the log's own repeats of one size disagree (median (max - min) / median, %). A sweep whose
neighbours miss each other by more than the criterion, or whose repeats disagree by more than
twice it, holds steps and noise that no fit between measured sizes can recover.

The vTrain tables (one A100 node, 2..8 GPUs, 1 MiB steps) get a second table: the fit to
their power-of-two sizes only, asked for every 1 MiB step (target: median <= 1%, max <= 15%
outside at most 2 named anomalies per table).

Run from the repository root::

    python benchmarks/model_cross_validation.py            # the table
    python benchmarks/model_cross_validation.py --detail   # plus every held-out size
    python benchmarks/model_cross_validation.py --no-vtrain # without the vTrain table
    python benchmarks/model_cross_validation.py FILE...    # other logs or result files

Method, the same for every file (no per-file setting, no point excluded): the piecewise
fit of :func:`pybench.model.piecewise.fit_alpha_beta` with its defaults, every measurement the file
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
from pybench.model.cross_validation import cross_validate, neighbour_baseline, power_of_two_check, replicate_spread
from pybench.model.logs import load_measurements
from pybench.model.piecewise import fit_alpha_beta

REPO = Path(__file__).resolve().parents[1]
FIXTURES = REPO / "tests" / "fixtures"
SHARED_DATA = FIXTURES / "shared_data"  # the repository's copies of the shared logs
MIN_SIZE = 64 * 1024
MEDIAN_LIMIT, MAX_LIMIT, COVERAGE_LIMIT, ANOMALY_LIMIT = 5.0, 15.0, 0.90, 1
VTRAIN = SHARED_DATA / "vtrain"
VTRAIN_MEDIAN, VTRAIN_MAX, VTRAIN_ANOMALIES = 1.0, 15.0, 2

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

    Keys: ``name``, ``collective``, ``sizes`` (held out), ``segments`` (pieces of the fit to
    all the data), ``anomalies`` (sizes ``fit`` names), ``pw_median``, ``pw_max``,
    ``coverage``, ``half_width`` (leave-one-size-out outside the anomalies, %, share, %),
    ``all_median``, ``all_max`` (every size held out), ``line_median``, ``line_max`` (single
    line), ``oop_median``, ``oop_max`` (piecewise on the first time column only, outside the
    anomalies), ``nbrs_median``, ``nbrs_max`` (the neighbours' log-log line, same sizes),
    ``spread`` (the repeats' disagreement, %; nan when each size was measured once),
    ``verdict`` (``pass``, ``FAIL`` or why it cannot be judged), ``worst_size`` and ``cv``
    (the :class:`~pybench.model.cross_validation.CrossValidation` outside the anomalies).
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
            rows.append(_sweep_row(row, m))
    return rows


def _sweep_row(row: dict[str, Any], m) -> dict[str, Any]:
    size, time = m.fit_points()
    pw = cross_validate(m, min_size=MIN_SIZE, exclude_anomalies=True)
    every = cross_validate(m, min_size=MIN_SIZE)
    line = cross_validate(m, min_size=MIN_SIZE, single_line=True)
    oop = cross_validate((m.size_bytes, m.time_s), min_size=MIN_SIZE, exclude_anomalies=True)
    nbrs = neighbour_baseline(m, min_size=MIN_SIZE, exclude_anomalies=True)
    ok = (pw.median_ape <= MEDIAN_LIMIT and pw.max_ape <= MAX_LIMIT and pw.coverage >= COVERAGE_LIMIT
          and len(pw.anomalies) <= ANOMALY_LIMIT)
    row.update(
        sizes=int(pw.size_bytes.size), segments=len(fit_alpha_beta(size, time).segments),
        anomalies=pw.anomalies, pw_median=pw.median_ape, pw_max=pw.max_ape, coverage=pw.coverage,
        half_width=pw.median_half_width, all_median=every.median_ape, all_max=every.max_ape,
        line_median=line.median_ape, line_max=line.max_ape,
        oop_median=oop.median_ape, oop_max=oop.max_ape, nbrs_median=nbrs.median_ape, nbrs_max=nbrs.max_ape,
        spread=replicate_spread(m, min_size=MIN_SIZE), verdict="pass" if ok else "FAIL",
        worst_size=int(pw.size_bytes[int(np.argmax(pw.ape_percent))]), cv=pw)
    return row


def format_table(rows) -> str:
    """Plain-text table of :func:`acceptance_table` rows."""
    head = (f"{'file':<50} {'coll':<9} {'sizes':>5} {'pieces':>6} {'named':>5} | {'median':>6} {'max':>6} "
            f"{'cover':>5} {'+-band':>6} | {'all med':>7} {'max':>6} | {'1 line':>6} {'max':>6} "
            f"| {'oop med':>7} {'max':>6} | {'nbrs':>5} {'max':>5} {'repl':>5} | verdict")
    out = [f"leave-one-size-out from {MIN_SIZE // 1024} KiB outside the sizes fit names (named); "
           f"criterion median <= {MEDIAN_LIMIT:g}%, max <= {MAX_LIMIT:g}%, 95% band covers >= "
           f"{100 * COVERAGE_LIMIT:.0f}%, named <= {ANOMALY_LIMIT} (APE %; +-band: median half-width %)",
           head, "-" * len(head)]
    for r in rows:
        if "pw_median" not in r:
            out.append(f"{r['name']:<50} {r['collective']:<9} {r['sizes']:>5} {'':>6} {'':>5} | "
                       f"{'':>6} {'':>6} {'':>5} {'':>6} | {'':>7} {'':>6} | {'':>6} {'':>6} | "
                       f"{'':>7} {'':>6} | {'':>5} {'':>5} {'':>5} | {r['verdict']}")
            continue
        out.append(
            f"{r['name']:<50} {r['collective']:<9} {r['sizes']:>5} {r['segments']:>6} "
            f"{len(r['anomalies']):>5} | {r['pw_median']:>6.1f} {r['pw_max']:>6.1f} "
            f"{100 * r['coverage']:>4.0f}% {r['half_width']:>6.1f} | {r['all_median']:>7.1f} "
            f"{r['all_max']:>6.1f} | {r['line_median']:>6.1f} {r['line_max']:>6.1f} | "
            f"{r['oop_median']:>7.1f} {r['oop_max']:>6.1f} | {r['nbrs_median']:>5.1f} {r['nbrs_max']:>5.1f} "
            f"{r['spread']:>5.1f} | {r['verdict']}"
            + (f" (worst at {r['worst_size']} B)" if r["verdict"] != "pass" else ""))
    return "\n".join(out)


def vtrain_table() -> list:
    """One dict per vTrain table present: the power-of-two fit asked for every 1 MiB step.

    Keys: ``gpus``, ``median``, ``max`` (%, outside the anomalies), ``worst_mib``,
    ``coverage``, ``half_width``, ``anomalies``, ``verdict``, ``cv``.
    """
    rows = []
    for gpus in range(2, 9):
        path = VTRAIN / f"a100_nvswitch_allreduce_{gpus}gpu.csv"
        if not path.is_file():
            continue
        cv = power_of_two_check(load_measurements(path)[0])
        ok = cv.median_ape <= VTRAIN_MEDIAN and cv.max_ape <= VTRAIN_MAX and len(cv.anomalies) <= VTRAIN_ANOMALIES
        rows.append({"gpus": gpus, "median": cv.median_ape, "max": cv.max_ape,
                     "worst_mib": int(cv.size_bytes[int(np.argmax(cv.ape_percent))]) >> 20,
                     "coverage": cv.coverage, "half_width": cv.median_half_width,
                     "anomalies": cv.anomalies, "verdict": "pass" if ok else "FAIL", "cv": cv})
    return rows


def format_vtrain(rows) -> str:
    """Plain-text table of :func:`vtrain_table` rows."""
    out = [f"vTrain A100 tables: fit the power-of-two sizes, predict every 1 MiB step; criterion median "
           f"<= {VTRAIN_MEDIAN:g}%, max <= {VTRAIN_MAX:g}% outside <= {VTRAIN_ANOMALIES} named sizes",
           f"{'GPUs':>4} | {'median':>6} {'max':>6} {'at MiB':>6} | {'cover':>5} {'+-band':>6} | named | verdict"]
    for r in rows:
        named = ",".join(str(a >> 20) for a in r["anomalies"]) or "-"
        out.append(f"{r['gpus']:>4} | {r['median']:>6.2f} {r['max']:>6.1f} {r['worst_mib']:>6} | "
                   f"{100 * r['coverage']:>4.0f}% {r['half_width']:>6.1f} | {named:>5} | {r['verdict']}")
    return "\n".join(out)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("files", nargs="*", help="logs or result files (default: the acceptance set)")
    parser.add_argument("--detail", action="store_true", help="also print every held-out size")
    parser.add_argument("--no-vtrain", action="store_true", help="leave out the vTrain power-of-two table")
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
    if not args.no_vtrain and not args.files:
        print("\n" + format_vtrain(vtrain_table()))
    if args.detail:
        for r in rows:
            if "cv" in r:
                print(f"\n# {r['name']} ({r['collective']})\n{r['cv'].table()}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
