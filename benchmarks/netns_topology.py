"""Issue 13's testbed: fit the topology model on one multi-host layout, predict others, measure them.

Four network-namespace hosts joined through a bridge, every host's link shaped to RATE each
way with tbf (its "NIC"), native MPI ranks launched on them (pybench.measure.netns_mpi).
Open MPI 5 runs a multi-node all-reduce with its HAN component: inside each node first (shared
memory), then between one leader per node. The model is told so (``schedule="hierarchical"``):
one layout cannot tell a ring from a hierarchical schedule. Steps, all in one run:

1. measure all-reduce on 2 hosts x 2 ranks and fit the model to it;
2. predict and measure 4 hosts x 1 rank and 4 hosts x 2 ranks;
3. run two 2-rank all-reduce jobs at once across the same two hosts (they share both NICs)
   and compare each job's times with the model's prediction for two groups sharing a NIC.

Prints, per layout and size, measured and predicted time and their ratio, then the median
and max relative error per layout. Needs root and `ip netns`; takes a few minutes at 1 Gbit/s
on a quiet machine (the figures are meaningless on a busy one: it says the load first).
Run: ``python benchmarks/netns_topology.py [--rate 1gbit] [--iters 5]``.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import threading
from pathlib import Path

import numpy as np

from pybench.io.files import read_json
from pybench.measure.netns import NetnsLab, netns_available
from pybench.measure.netns_mpi import NetnsMpi
from pybench.model.topology import Observation, TopologyModel, fit_topology

SIZES = "1M:16M"


def measure(mpi: NetnsMpi, hosts: int, per_host: int, iters: int, workdir: Path, tag: str,
            first_host: int = 0) -> list[tuple[float, float]]:
    """(size, median seconds) of an all-reduce sweep on ``hosts x per_host`` ranks."""
    out = workdir / f"{tag}.json"
    proc = mpi.run(hosts, per_host, [sys.executable, "-m", "pybench", "allreduce", "--backend", "mpi",
                                     "--sizes", SIZES, "--iters", str(iters), "--json", str(out), "--force"],
                   first_host=first_host, timeout=1800)
    if proc.returncode != 0:
        raise SystemExit(f"{tag}: pybench exited {proc.returncode}: {proc.stderr.strip()[-800:]}")
    doc = read_json(out)
    return [(float(r["size_bytes"]), float(r["time_s"])) for r in doc["records"]]


def report(label: str, model: TopologyModel, rows: list[tuple[float, float]], world: int, nodes: int,
           sharing: int = 1) -> np.ndarray:
    errs = []
    for size, measured in rows:
        pred = model.predict(int(size), world, nodes, sharing)
        errs.append(abs(pred.time_s / measured - 1))
        print(f"{label:>22} {int(size) >> 20:5d}M {measured * 1e3:10.2f} ms {pred.time_s * 1e3:10.2f} ms "
              f"{pred.time_s / measured:7.3f}  {pred.provenance}")
    e = np.array(errs)
    print(f"{label:>22} median {100 * np.median(e):.1f}% max {100 * e.max():.1f}%")
    return e


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rate", default="1gbit")
    ap.add_argument("--iters", type=int, default=5)
    args = ap.parse_args()
    ok, why = netns_available()
    if not ok:
        print(f"needs network namespaces: {why}", file=sys.stderr)
        return 2
    print(f"# load {os.getloadavg()[0]:.2f} on {os.cpu_count()} cores; rate {args.rate}; Open MPI's default "
          f"(HAN, hierarchical) all-reduce")
    with tempfile.TemporaryDirectory() as tmp, NetnsLab(4, rate=args.rate) as lab, NetnsMpi(lab) as mpi:
        work = Path(tmp)
        fit_rows = measure(mpi, 2, 2, args.iters, work, "2x2")
        model = fit_topology("allreduce", [Observation(s, 4, 2, t) for s, t in fit_rows], algorithm="ring",
                             schedule="hierarchical")
        print(f"# fitted on 2 hosts x 2 ranks: {model.inter}")
        report("2x2 (fitted)", model, fit_rows, 4, 2)
        report("4x1", model, measure(mpi, 4, 1, args.iters, work, "4x1"), 4, 4)
        report("4x2", model, measure(mpi, 4, 2, args.iters, work, "4x2"), 8, 4)
        shared: dict[str, list[tuple[float, float]]] = {}

        def job(tag: str) -> None:
            shared[tag] = measure(mpi, 2, 1, args.iters * 2, work, tag)

        threads = [threading.Thread(target=job, args=(tag,)) for tag in ("groupA", "groupB")]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        for tag, rows in sorted(shared.items()):
            report(f"{tag} (2 share a NIC)", model, rows, 2, 2, sharing=2)
    print(f"# load {os.getloadavg()[0]:.2f} at the end")
    return 0


if __name__ == "__main__":
    sys.exit(main())
