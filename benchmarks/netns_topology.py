"""Issue 13's testbed: fit the topology model on one multi-host layout, predict others, measure them.

Four network-namespace hosts joined through a bridge, every host's link shaped to RATE each
way with tbf (its "NIC"), native MPI ranks launched on them (pybench.measure.netns_mpi).
The model prices what Open MPI 5 runs (``schedule="openmpi"``, pybench.model.mpi_openmpi): HAN
when nodes hold several ranks (reduce inside the node, libnbc ireduce + ibcast between node
leaders, 64 KiB segments), coll/tuned's fixed choice when each node holds one rank (Rabenseifner
for 4 ranks from 8 KiB up). One layout cannot tell these apart: the fit takes the schedule from
the caller. Steps, all in one run:

1. measure all-reduce on 2 hosts x 2 ranks and fit the model to it;
2. predict and measure 4 hosts x 1 rank and 4 hosts x 2 ranks;
3. run two 2-rank all-reduce jobs at once across the same two hosts (they share both NICs),
   one pair of jobs per size, each timing as long at every size (:func:`measure_shared`), and
   compare each job's times with the model's prediction for two groups sharing a NIC.

Prints, per layout and size, measured and predicted time and their ratio, then the median
and max relative error per layout. Needs root and `ip netns`; takes about 7 minutes at 1 Gbit/s
on a quiet machine (the figures are meaningless on a busy one: it says the load first).
Measured on 2 cores with the defaults (10 iterations, 5 rounds; six runs, median / max error
from 1 MiB): 4x1 1.5-6.4% / 3.6-9.2%, 4x2 5.0-10.1% / 9.0-20.6% (8 ranks on 2 cores: 1 MiB
swings from 0.8 to 1.2x the priced time between runs; both targets met in three runs of six),
two groups sharing a link 0.5-0.9% / 0.9-1.6% since they run one pair of jobs per size (two
runs; one job per sweep: up to 18.7% at one size); the fitted 2x2 0.0-6.3%. With 5 iterations
and 3 rounds 4x2 missed in four runs of four (8.6-28.9% / 20.5-33.0%). The testbed runs Open
MPI's TCP transport with 128 KiB fragments (pybench.measure.netns_mpi.TCP_FULL_DUPLEX); with
Open MPI's default (``--mca btl_tcp_rdma_pipeline_frag_size=2147482624``) a pairwise exchange
runs its two directions one after the other and 4x1 misses by 30-40%.

Every layout is measured ``--repeats`` times in interleaved rounds and the median per size is
used (fit and comparison alike): the machine's other work slows single runs by up to 7x.
Run: ``python benchmarks/netns_topology.py [--rate 1gbit] [--iters 10] [--repeats 5]``.
"""

from __future__ import annotations

import argparse
import functools
import os
import sys
import tempfile
import threading
import warnings
from collections.abc import Callable
from pathlib import Path

import numpy as np

from pybench.errors import PyBenchError
from pybench.io.files import read_json
from pybench.measure.netns import NetnsLab, netns_available
from pybench.measure.netns_mpi import TCP_FULL_DUPLEX, NetnsMpi, oversubscription
from pybench.model.topology import Observation, TopologyModel
from pybench.model.topology_fit import fit_topology
from pybench.sizes import parse_sizes

SIZES = "1M:16M"


MCA: dict[str, str] = {}  # --mca K=V: Open MPI parameters on top of the testbed's own


def measure(mpi: NetnsMpi, hosts: int, per_host: int, iters: int, workdir: Path, tag: str,
            sizes: str = SIZES) -> list[tuple[float, float]]:
    """(size, median seconds) of an all-reduce sweep on ``hosts x per_host`` ranks."""
    out = workdir / f"{tag}.json"
    proc = mpi.run(hosts, per_host, [sys.executable, "-m", "pybench", "allreduce", "--backend", "mpi",
                                     "--sizes", sizes, "--iters", str(iters), "--json", str(out), "--force"],
                   timeout=1800, mca=MCA)
    if proc.returncode != 0:
        raise SystemExit(f"{tag}: pybench exited {proc.returncode}: {proc.stderr.strip()[-800:]}")
    doc = read_json(out)
    return [(float(r["size_bytes"]), float(r["time_s"])) for r in doc["records"]]


def measure_shared(mpi: NetnsMpi, iters: int, work: Path) -> dict[str, list[tuple[float, float]]]:
    """Two 2-rank jobs at once, each with one rank on host 0 and one on host 1: one pair of jobs per size.

    Each job times ``2 x iters x (16 MiB / size)`` iterations, as long at every size as
    ``2 x iters`` at 16 MiB, so that the jobs' start-up skew (Python and MPI_Init, up to a
    second or so) falls on a minority of the iterations and their median is the time with both
    jobs on the links. One whole sweep per job left the first size of one job partly alone
    (run K: 1 MiB at 1.77 S/B against the other job's 2.06).
    """
    runs: dict[str, list[tuple[float, float]]] = {"groupA": [], "groupB": []}
    largest = max(parse_sizes(SIZES))
    for size in parse_sizes(SIZES):
        n = 2 * iters * max(1, largest // size)
        got = at_once({tag: functools.partial(measure, mpi, 2, 1, n, work, f"{tag}-{size}", sizes=str(size))
                       for tag in runs})
        for tag in runs:
            runs[tag].extend(got[tag])
    return runs


def at_once(jobs: dict[str, Callable[[], list[tuple[float, float]]]]) -> dict[str, list[tuple[float, float]]]:
    """Run the jobs in threads at the same time; their results, or the first one's failure once all ended."""
    got: dict[str, list[tuple[float, float]]] = {}
    failed: list[BaseException] = []

    def run(tag: str) -> None:
        try:
            got[tag] = jobs[tag]()
        except BaseException as e:  # measure's SystemExit too: a thread cannot end the program
            failed.append(e)

    threads = [threading.Thread(target=run, args=(tag,)) for tag in jobs]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    if failed:
        raise failed[0]
    return got


def measure_round(mpi: NetnsMpi, iters: int, work: Path) -> dict[str, list[tuple[float, float]]]:
    """One sweep of every layout, back to back: 2x2, 4x1, 4x2, then two 2-rank jobs at once on hosts 0 and 1."""
    runs = {tag: measure(mpi, hosts, per_host, iters, work, tag)
            for tag, hosts, per_host in (("2x2", 2, 2), ("4x1", 4, 1), ("4x2", 4, 2))}
    runs.update(measure_shared(mpi, iters, work))
    return runs


def median_rows(sweeps: list[list[tuple[float, float]]]) -> list[tuple[float, float]]:
    """Per size, the median time over repeated sweeps (a busy machine slows single runs by 2-7x)."""
    return [(size, float(np.median([sweep[i][1] for sweep in sweeps]))) for i, (size, _) in enumerate(sweeps[0])]


def report(label: str, model: TopologyModel, rows: list[tuple[float, float]], world: int, nodes: int,
           sharing: int = 1) -> np.ndarray:
    errs = []
    for size, measured in rows:
        pred = model.predict(int(size), world, nodes, sharing)
        errs.append(abs(pred.time_s / measured - 1))
        print(f"{label:>22} {int(size) >> 20:5d}M {measured * 1e3:10.2f} ms {pred.time_s * 1e3:10.2f} ms "
              f"{pred.time_s / measured:7.3f}  {pred.provenance}  {pred.schedule}")
    e = np.array(errs)
    print(f"{label:>22} median {100 * np.median(e):.1f}% max {100 * e.max():.1f}%")
    return e


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rate", default="1gbit")
    ap.add_argument("--iters", type=int, default=10, help="timed iterations per size in each run")
    ap.add_argument("--repeats", type=int, default=5, help="interleaved rounds of every layout; medians reported")
    ap.add_argument("--mca", action="append", default=[], metavar="K=V",
                    help="an Open MPI parameter for every run, e.g. btl_tcp_rdma_pipeline_frag_size=2147482624 "
                         "(Open MPI's default: one fragment per message) to see the testbed without its own")
    args = ap.parse_args()
    if args.iters < 1 or args.repeats < 1:
        print(f"--iters and --repeats must be at least 1, got {args.iters} and {args.repeats}", file=sys.stderr)
        return 2
    for item in args.mca:
        key, eq, value = item.partition("=")
        if not eq or not key:
            print(f"--mca {item!r}: give KEY=VALUE", file=sys.stderr)
            return 2
        MCA[key] = value
    ok, why = netns_available()
    if not ok:
        print(f"needs network namespaces: {why}", file=sys.stderr)
        return 2
    print(f"# load {os.getloadavg()[0]:.2f} on {os.cpu_count()} cores; rate {args.rate}; Open MPI's default "
          f"all-reduce (HAN across nodes with several ranks, coll/tuned's choice with one); transport "
          f"{ {**TCP_FULL_DUPLEX, **MCA} }")
    for hosts, per_host in ((2, 2), (4, 1), (4, 2)):
        crowded = oversubscription(hosts, per_host)
        if crowded:
            print(f"# warning: {crowded}")
    warnings.simplefilter("ignore", RuntimeWarning)  # said once above, not once per run
    try:
        with tempfile.TemporaryDirectory() as tmp, NetnsLab(4, rate=args.rate) as lab, NetnsMpi(lab) as mpi:
            rounds = [measure_round(mpi, args.iters, Path(tmp)) for _ in range(args.repeats)]
    except PyBenchError as e:  # a rate tc refuses, a tool missing: one line, not a traceback
        print(f"error: {e}", file=sys.stderr)
        return 2
    runs = {tag: median_rows([r[tag] for r in rounds]) for tag in rounds[0]}
    model = fit_topology("allreduce", [Observation(s, 4, 2, t) for s, t in runs["2x2"]], algorithm="ring",
                         schedule="openmpi")
    print(f"# fitted on 2 hosts x 2 ranks (median of {args.repeats} interleaved runs per layout): {model.inter}")
    report("2x2 (fitted)", model, runs["2x2"], 4, 2)
    report("4x1", model, runs["4x1"], 4, 4)
    report("4x2", model, runs["4x2"], 8, 4)
    for tag in ("groupA", "groupB"):
        report(f"{tag} (2 share a NIC)", model, runs[tag], 2, 2, sharing=2)
    print(f"# load {os.getloadavg()[0]:.2f} at the end")
    return 0


if __name__ == "__main__":
    sys.exit(main())
