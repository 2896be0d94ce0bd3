"""Held-out check on logs that are not in this repository: ALCF's public nccl-tests runs.

The calibration (pybench/model/calibration.json) was chosen on the logs in tests/fixtures only. This
script scores it, as a user would run pybench (``fit``, then ``predict --json``), on the logs of
https://github.com/argonne-lcf/alcf-nccl-tests (commit 385be33; clone it and give its path):

- Polaris under NCCL 2.18 (the repository's logs are NCCL 2.21), setup 5 of that repository's README:
  fitted at 2 (+ 8) nodes, predicted at 8, 128 and 540 nodes;
- Sophia (DGX A100 nodes, eight 200 Gb/s HDR NICs each): one A100 NVSwitch node measured (the vTrain
  8-GPU table) with ``--system dgx-a100``, and with a ``--link ib-hdr`` preset instead, predicting its
  2-node all-reduce. Since session 37 Sophia's 2-node all-reduce and all-gather are calibration cases in
  the repository (tests/fixtures/public_logs/sophia_*), so its rows here are in-sample; the table's
  held-out figures for them are in docs/model-validation.md.

Each row: median and largest error from 1 MiB up, how many sizes the 95% interval covers, the median
half-width. Run: ``python benchmarks/alcf_external_check.py PATH/TO/alcf-nccl-tests``.
"""

from __future__ import annotations

import argparse
import json
import math
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np

from pybench.model.logs import load_measurements

REPO = Path(__file__).resolve().parents[1]
A100_NODE = REPO / "tests" / "fixtures" / "shared_data" / "vtrain" / "a100_nvswitch_allreduce_8gpu.csv"
POLARIS = "results_polaris/nccl_2_18/"
N2, N8 = POLARIS + "n2.g4.2024-04-29-18-41-24/", POLARIS + "n8.g4.2024-04-29-18-14-00/"
N128, N540 = POLARIS + "n128.g4.2024-04-29-18-31-53/", POLARIS + "n540.g4.2024-04-29-19-43-05/"
SOPHIA = "results_sophia/n2.g8/"
# (what is checked, logs fitted, fit options, the log predicted, world, nodes, predict options)
CHECKS = (
    ("Polaris all-reduce, fit 2 nodes -> 8", [N2 + "all_reduce_output.dat.5"], [],
     N8 + "all_reduce_output.dat.5", 32, 8, []),
    ("Polaris all-reduce, fit 2 nodes -> 540", [N2 + "all_reduce_output.dat.5"], [],
     N540 + "all_reduce_output.dat.5", 2160, 540, []),
    ("Polaris all-reduce, fit 2 + 8 nodes -> 540", [N2 + "all_reduce_output.dat.5", N8 + "all_reduce_output.dat.5"], [],
     N540 + "all_reduce_output.dat.5", 2160, 540, []),
    ("Polaris all-gather, fit 2 nodes -> 8", [N2 + "all_gather_output.dat.5"], [],
     N8 + "all_gather_output.dat.5", 32, 8, []),
    ("Polaris all-gather, fit 2 nodes -> 128", [N2 + "all_gather_output.dat.5"], [],
     N128 + "all_gather_output.dat.5", 512, 128, []),
    ("Polaris all-gather, fit 2 + 8 nodes -> 128", [N2 + "all_gather_output.dat.5", N8 + "all_gather_output.dat.5"], [],
     N128 + "all_gather_output.dat.5", 512, 128, []),
    *((f"Sophia all-reduce ({run}), A100 node + --system dgx-a100 -> 2 x 8", [str(A100_NODE)],
       ["--system", "dgx-a100"], SOPHIA + run, 16, 2, [])
      for run in ("2024-10-15-11-21-15/all_reduce_output.dat.2", "2024-10-15-11-21-15/all_reduce_output.dat.6",
                  "2024-10-15-11-28-16/all_reduce_output.dat.6")),
    ("Sophia all-reduce, A100 node + --link ib-hdr -> 2 x 8", [str(A100_NODE)], [],
     SOPHIA + "2024-10-15-11-21-15/all_reduce_output.dat.6", 16, 2, ["--link", "ib-hdr"]),
)


def _pybench(*argv: str) -> None:
    subprocess.run([sys.executable, "-m", "pybench", *argv], check=True, capture_output=True, text=True)


def check(root: Path, work: Path, fitted: list[str], fit_options: list[str], target: str, world: int, nodes: int,
          predict_options: list[str]) -> str:
    """One row of the table: fit, predict the target's layout, score from 1 MiB up."""
    model, out = work / "model.json", work / "predicted.json"
    _pybench("fit", *(str(root / f) for f in fitted), "-o", str(model), "--force", *fit_options)
    (measured,) = load_measurements(root / target)
    sizes = [int(s) for s in np.unique(measured.size_bytes) if s >= 1 << 20]
    _pybench("predict", str(model), "--sizes", ",".join(map(str, sizes)), "--world", str(world), "--nodes",
             str(nodes), "--json", str(out), "--force", *predict_options)
    errors, covered, halves, kinds = [], 0, [], set()
    for record in json.loads(out.read_text())["records"]:
        time_s = float(np.mean(measured.time_s[measured.size_bytes == record["size_bytes"]]))
        if record["time_s"] is None:
            kinds.add("not determined")
            continue
        errors.append(abs(record["time_s"] / time_s - 1))
        covered += record["time_low_s"] <= time_s <= record["time_high_s"]
        halves.append(math.sqrt(record["time_high_s"] / record["time_low_s"]) - 1)
        kinds.add(record["provenance"].split(",")[0])
    if not errors:
        return f"| {len(sizes)} | not determined | | | |"
    return (f"| {len(sizes)} | {100 * np.median(errors):.1f}% | {100 * max(errors):.1f}% | {covered}/{len(errors)} | "
            f"{100 * np.median(halves):.1f}% | {', '.join(sorted(kinds))} |")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("root", type=Path, help="a clone of github.com/argonne-lcf/alcf-nccl-tests")
    args = parser.parse_args()
    if not (args.root / POLARIS).is_dir():
        parser.error(f"{args.root} holds no {POLARIS}: give a clone of argonne-lcf/alcf-nccl-tests")
    print("| check | sizes | median error | max error | covered | median half-width | kind |")
    print("|---|---|---|---|---|---|---|")
    with tempfile.TemporaryDirectory() as work:
        for name, *rest in CHECKS:
            print(f"| {name} " + check(args.root, Path(work), *rest), flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
