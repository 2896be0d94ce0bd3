"""Run under mpiexec by tests/measure/test_native_errors.py with
PYBENCH_INJECT_MPI_ERROR=all: the timed loop's first operation fails on every
rank (a real MPI error); each rank catches the NativeError, then stays alive
several watchdog timeouts long and still completes a barrier. A watchdog left
armed by the failed sample would end the rank (exit 124) during the sleep."""

import json
import sys
import time
from pathlib import Path

from pybench._native import core
from pybench.errors import NativeError

out_dir, timeout_s = Path(sys.argv[1]), float(sys.argv[2])
c = core()
c.mpi_init()
rank = c.rank_info()["rank"]
c.start_watchdog(timeout_s)
bench = c.CollectiveBench("allreduce", "float32", "sum", 1024, 0, False)
bench.warmup(1)
wrong = bench.check(1)
message = None
try:
    bench.measure(5, 4)
except NativeError as exc:
    message = str(exc)
time.sleep(4 * timeout_s)  # several watchdog intervals, unarmed
c.barrier()  # an armed operation that completes: the watchdog still works
result = {"rank": rank, "wrong": wrong, "message": message, "survived": True}
(out_dir / f"rank{rank}.json").write_text(json.dumps(result))
c.mpi_finalize()
