"""Run under mpiexec by tests/measure/test_native_errors.py: with a watchdog
timeout too large for a nanosecond deadline (1e12 s, inf), an armed operation
that waits must not be ended at once. Rank 1 sleeps before joining each barrier,
so rank 0 waits armed for many watchdog polls."""

import json
import sys
import time
from pathlib import Path

from pybench._native import core

out_dir = Path(sys.argv[1])
c = core()
c.mpi_init()
rank = c.rank_info()["rank"]
passed = []
for timeout_s in (1e12, float("inf")):
    c.start_watchdog(timeout_s)
    if rank == 1:
        time.sleep(1.0)  # ten polls of the watchdog thread while rank 0 waits armed
    c.barrier()
    passed.append(timeout_s)
(out_dir / f"rank{rank}.json").write_text(json.dumps({"rank": rank, "passed": [str(t) for t in passed]}))
c.mpi_finalize()
