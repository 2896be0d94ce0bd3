"""Run under mpiexec by test_mpi_ranks.py: every collective x dtype x op on the
native harness, out of place and in place, plus the p2p tests, in one job. Each rank writes what it saw to
OUT_DIR/rank<r>.json so the test can check the ranks agree."""

import json
import sys
from pathlib import Path

from pybench._native import core
from pybench.collectives import COLLECTIVES, DTYPES, OPS

out_dir = Path(sys.argv[1])
c = core()
c.mpi_init()
info = c.rank_info()
world = info["world_size"]
results = []
for name, coll in COLLECTIVES.items():
    for dtype, elem in DTYPES.items():
        for op in (OPS if coll.reduces else ("sum",)):
            unit = elem * world
            # one element per rank, an odd multiple, a size past the 13-value period, and 1 MiB
            for size in (unit, 3 * unit, 40 * unit, 1 << 20):
                for root, in_place in ((r, i) for r in ((0, world - 1) if name == "broadcast" else (0,))
                                       for i in (False, True)):  # out of place, then MPI_IN_PLACE
                    bench = c.CollectiveBench(name, dtype, op, size, root, size >= (1 << 20), in_place)
                    bench.warmup(1)
                    wrong = bench.check(2)
                    samples, wall = bench.measure(3, 2)
                    results.append({"collective": name, "dtype": dtype, "op": op, "size": size, "root": root,
                                    "in_place": in_place, "wrong": wrong, "samples": samples, "wall": wall})
for test in ("latency", "bw", "bibw"):
    for size in (1, 3, 4096, 1 << 20):
        bench = c.P2PBench(test, size, 8, True)
        bench.warmup(1)
        wrong = bench.check(1)
        samples, wall = bench.measure(3, 2)
        results.append({"collective": "p2p_" + test, "dtype": "int8", "op": "none", "size": size, "root": 0,
                        "wrong": wrong, "samples": samples, "wall": wall})
doc = {"info": info, "thread_level": c.mpi_thread_level(), "results": results}
(out_dir / f"rank{info['rank']}.json").write_text(json.dumps(doc))
c.mpi_finalize()
