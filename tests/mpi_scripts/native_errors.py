"""Run under mpiexec by test_mpi_ranks.py: invalid native requests raise
pybench.errors.NativeError on every rank instead of crashing the job."""

import json
import sys
from pathlib import Path

from pybench._native import core
from pybench.errors import NativeError

out_dir = Path(sys.argv[1])
c = core()
c.mpi_init()
rank = c.rank_info()["rank"]
messages = {}
cases = {
    "not_divisible": lambda: c.CollectiveBench("allgather", "float32", "sum", 12, 0, True),
    "bad_element": lambda: c.CollectiveBench("allreduce", "float64", "sum", 12, 0, True),
    "bad_root": lambda: c.CollectiveBench("broadcast", "float32", "sum", 64, 5, True),
    "unknown": lambda: c.CollectiveBench("allfoo", "float32", "sum", 64, 0, True),
    "bad_dtype": lambda: c.CollectiveBench("allreduce", "float8", "sum", 64, 0, True),
    "too_many_elements": lambda: c.CollectiveBench("allreduce", "float16", "sum", 1 << 32, 0, True),
    "bad_p2p": lambda: c.P2PBench("pong", 64, 8, True),
}
for key, make in cases.items():
    try:
        make()
        messages[key] = None
    except NativeError as exc:
        messages[key] = str(exc)
(out_dir / f"rank{rank}.json").write_text(json.dumps(messages))
c.mpi_finalize()
