"""Held-out check of a system description on a 2-node nccl-tests log that is not in this repository.

The calibration (pybench/model/calibration.json) was chosen on the logs in tests/fixtures only. This
script predicts another system's 2-node all-reduce from its named description, as the Python API
takes it: with no node measured (the description alone), and with the repository's A100 node (vTrain,
8 GPUs) under that description, as ``fit`` + ``predict --system`` give it. First used on a public
GCP A3 Mega run (2 x 8 H100, GPUDirect-TCPXO; github.com/lessizzmore/create-a3mega-ztan-fork at
02dd8f4, file ``ztan-NCCL-test-result``).

Each row: median and largest error from 1 MiB up, how many sizes the 95% interval covers, the median
half-width. Run: ``python benchmarks/described_external_check.py LOG --system gcp-a3-mega``.
"""

from __future__ import annotations

import argparse
import math
from pathlib import Path

import numpy as np

from pybench.model.logs import load_measurements
from pybench.model.system import load_system
from pybench.model.topology import TopologyModel
from pybench.model.topology_fit import fit_topology, observations_from

A100_NODE = Path(__file__).resolve().parents[1] / "tests" / "fixtures" / "shared_data" / "vtrain" / \
    "a100_nvswitch_allreduce_8gpu.csv"


def score(model: TopologyModel, observations, world: int, nodes: int) -> str:
    errors, covered, halves = [], 0, []
    for o in observations:
        if o.size_bytes < 1 << 20:
            continue
        p = model.predict(int(o.size_bytes), world, nodes)
        if not p.determined:
            return "| not determined | | | |"
        errors.append(abs(p.time_s / o.time_s - 1))
        covered += p.low_s <= o.time_s <= p.high_s
        halves.append(math.sqrt(p.high_s / p.low_s) - 1)
    return (f"| {100 * np.median(errors):.1f}% | {100 * max(errors):.1f}% | {covered}/{len(errors)} | "
            f"{100 * np.median(halves):.1f}% |")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("log", help="a 2-node nccl-tests all-reduce log")
    parser.add_argument("--system", required=True, help="the named system (or description file) it ran on")
    args = parser.parse_args()
    (measured,) = load_measurements(args.log)
    system = load_system(args.system)
    nodes = 2
    world = measured.world_size
    observations = observations_from([measured], lambda _: nodes)
    nothing = TopologyModel("allreduce", "ring", None, None, ((2, 1),), (1, 1 << 40))
    node = fit_topology("allreduce", observations_from(load_measurements(A100_NODE), lambda _: 1))
    print("| check | median error | max error | covered | median half-width |")
    print("|---|---|---|---|---|")
    print(f"| {args.system} description alone -> {world} on {nodes} " + score(nothing.with_system(system),
                                                                                observations, world, nodes))
    print(f"| A100 node (vTrain 8 GPUs) + {args.system} -> {world} on {nodes} " + score(node.with_system(system),
                                                                                       observations, world, nodes))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
