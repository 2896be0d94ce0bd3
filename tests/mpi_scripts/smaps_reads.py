"""Run under mpiexec (one rank) by tests/measure/test_huge_page_reads.py: how many bytes reading a
size's huge-page backing reads, against the size of /proc/self/smaps (from /proc/self/io's rchar,
which counts every byte read() returns, /proc files included)."""

import json
import sys

from pybench._native import core


def rchar() -> int:
    with open("/proc/self/io") as f:
        return next(int(line.split()[1]) for line in f if line.startswith("rchar:"))


c = core()
c.mpi_init()
bench = c.CollectiveBench("allreduce", "float32", "sum", 4 << 20, 0, True)  # two 4 MiB buffers
_ = bench.huge_page_fraction  # once first: any lazy set-up is not counted below
with open("/proc/self/smaps", "rb") as f:
    smaps_bytes = len(f.read())
before = rchar()
fraction = bench.huge_page_fraction
read = rchar() - before
json.dump({"smaps_bytes": smaps_bytes, "read_bytes": read, "fraction": fraction}, open(sys.argv[1], "w"))
del bench
c.mpi_finalize()
