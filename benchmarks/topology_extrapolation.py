"""World-size extrapolation of the topology-aware model on real sweeps (issue 13's acceptance).

The vTrain tables (tests/fixtures/shared_data/vtrain: one 8 x A100 NVSwitch node measured at
2..8 GPUs, 1 MiB to 1 GiB in 1 MiB steps) are fitted at some world sizes and every other world
size is predicted at every size, on the node's description (``dgx-a100``: a fit at one GPU count
cannot show that the node is switched, and without it says "not determined"). Prints, per fitted set and predicted world, the median and
max relative error, where the max falls, and the share of measurements inside the 95%
prediction interval. Run: ``python benchmarks/topology_extrapolation.py``.
"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np

from pybench.model.system import load_system
from pybench.model.topology import Observation
from pybench.model.topology_fit import fit_topology

VTRAIN = Path(__file__).resolve().parents[1] / "tests" / "fixtures" / "shared_data" / "vtrain"
FITS = ((2, 4), (4,), (2,), (2, 3, 4), (4, 8))


def load(world: int) -> list[Observation]:
    table = np.loadtxt(VTRAIN / f"a100_nvswitch_allreduce_{world}gpu.csv", delimiter=",", skiprows=1,
                       usecols=(0, 3))
    return [Observation(float(size), world, 1, float(ns) * 1e-9) for size, ns in table]


def main() -> int:
    missing = [w for w in range(2, 9) if not (VTRAIN / f"a100_nvswitch_allreduce_{w}gpu.csv").is_file()]
    if missing:
        print(f"missing vTrain tables for {missing} GPUs in {VTRAIN}", file=sys.stderr)
        return 2
    data = {w: load(w) for w in range(2, 9)}
    print(f"{'fitted at':>10} {'world':>5} {'median':>8} {'max':>8} {'at':>8} {'covered':>8}  provenance")
    for fitted in FITS:
        model = fit_topology("allreduce", [o for w in fitted for o in data[w]]).with_system(load_system("dgx-a100"))
        for world in range(2, 9):
            errs, inside = [], 0
            for o in data[world]:
                pred = model.predict(int(o.size_bytes), world)
                errs.append(abs(pred.time_s / o.time_s - 1))
                inside += pred.low_s <= o.time_s <= pred.high_s
            e = np.array(errs)
            worst = data[world][int(e.argmax())].size_bytes / 2**20
            print(f"{','.join(map(str, fitted)):>10} {world:>5} {100 * np.median(e):7.1f}% {100 * e.max():7.1f}% "
                  f"{worst:6.0f}Mi {100 * inside / len(e):7.0f}%  {pred.provenance}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
