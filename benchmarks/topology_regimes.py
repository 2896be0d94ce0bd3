"""Protocol regimes in the topology model, side by side with one frame, on real sweeps.

For every nccl-tests log in tests/fixtures/shared_data/nccl-tests with a known node count (the
H100 log lists no hosts: it is read as the 2 nodes its source names), the topology model is
fitted twice on the sweep itself: with one frame (``max_regimes=1``) and with the regimes the
fit chooses (:mod:`pybench.model.regimes`). Prints the regimes chosen and the median / max
relative error of each at the sweep's own layout, 8 B to 8 GiB. Run:
``python benchmarks/topology_regimes.py``.
"""

from __future__ import annotations

import dataclasses
import functools
import sys
from pathlib import Path

import numpy as np

import pybench.model.topology_fit as topology
from pybench.model.logs import load_measurements
from pybench.model.regimes import MAX_REGIMES, fit_regimes

LOGS = Path(__file__).resolve().parents[1] / "tests" / "fixtures" / "shared_data" / "nccl-tests"
NODES_NAMED_BY_SOURCE = {"h100_p5_2node_16gpu_efa_allreduce_srunprefix.txt": 2}


def errors(path: Path, max_regimes: int) -> tuple[int, np.ndarray] | None:
    """(regimes, relative errors at every measured size) of the topology model fitted on ``path``."""
    sets = load_measurements(path)
    nodes = NODES_NAMED_BY_SOURCE.get(path.name)
    if nodes:
        sets = [dataclasses.replace(ms, notes=(*ms.notes, f"{ms.world_size} ranks on {nodes} host(s) per its source"))
                for ms in sets]
    topology.fit_regimes = functools.partial(fit_regimes, max_regimes=max_regimes)  # type: ignore[assignment]
    try:
        models, _ = topology.fit_topology_models(sets)
    finally:
        topology.fit_regimes = fit_regimes
    if not models:
        return None
    model, ms = models[0], sets[0]
    link = model.inter if model.inter is not None else model.intra
    layout_nodes = model.fitted[0][1]
    errs = np.array([abs(model.predict(int(s), ms.world_size, layout_nodes).time_s / t - 1.0)
                     for s, t in zip(ms.size_bytes, ms.time_s)])
    return len(link.all_regimes()), errs


def main() -> int:
    logs = sorted(LOGS.glob("*.txt"))
    if not logs:
        print(f"no logs in {LOGS}", file=sys.stderr)
        return 2
    print(f"{'log':<52} {'one frame med/max %':>20} {'regimes':>8} {'regimes med/max %':>18}")
    for path in logs:
        one, many = errors(path, 1), errors(path, MAX_REGIMES)
        if one is None or many is None:
            print(f"{path.name:<52} no topology model (one size, or no node count)")
            continue
        print(f"{path.name:<52} {100 * np.median(one[1]):9.1f} /{100 * one[1].max():6.1f}  {many[0]:>8} "
              f"{100 * np.median(many[1]):9.1f} /{100 * many[1].max():6.1f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
