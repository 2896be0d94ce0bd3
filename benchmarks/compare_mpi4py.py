"""Side by side, in one run on the same 2 ranks: all-reduce timed by pybench's
native loop against a plain Python loop over mpi4py.

Both sides use the same buffer sizes and the same allocation (page-aligned,
touched, transparent huge pages requested from 2 MiB up: numpy's default and
pybench's), float32 sum, the same batch structure
(barrier, n back-to-back blocking all-reduces, one clock read each side, the
slowest rank's time) and are interleaved round by round, so machine noise hits
both alike. Prints medians and the ratios the foundation targets:
  8 B median latency: pybench / mpi4py <= 0.7 (the native loop adds no interpreter overhead)
  64 MiB busbw: within 5% of mpi4py's (both are bound by the same MPI)

Run: python benchmarks/compare_mpi4py.py [--rounds 15] [--json FILE]
(it starts its own 2 ranks through the MPI launcher when not under one).
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time

SIZES = (8, 64 * 1024, 1 << 20, 64 << 20)
TARGET_BATCH_S = 2e-3


def _spawn(argv: list[str]) -> int:
    import subprocess

    from pybench.measure.launch import find_launcher
    launcher = find_launcher()
    cmd = launcher.command(2, [sys.executable, __file__, *argv])
    return subprocess.run(cmd, env=launcher.environment()).returncode


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=15, help="interleaved rounds per size (default 15)")
    ap.add_argument("--json", default=None, help="also write the figures as JSON here")
    args = ap.parse_args()

    from pybench.measure.launch import under_launcher
    if not under_launcher():
        return _spawn(sys.argv[1:])

    import numpy as np
    from mpi4py import MPI

    from pybench._native import core
    c = core()
    c.mpi_init()  # MPI is already initialised by mpi4py; this only registers pybench's ops
    comm = MPI.COMM_WORLD
    rank, world = comm.Get_rank(), comm.Get_size()
    factor = 2 * (world - 1) / world

    rows = []
    for size in SIZES:
        count = size // 4
        send = np.ones(count, dtype=np.float32)
        recv = np.empty_like(send)
        bench = c.CollectiveBench("allreduce", "float32", "sum", size, 0, True)
        bench.warmup(5)
        for _ in range(5):
            comm.Allreduce(send, recv, op=MPI.SUM)
        # Same batch length for both sides, from one native probe.
        probe, _ = bench.measure(3, 1)
        n = max(1, min(2000, int(TARGET_BATCH_S / max(min(probe), 1e-9))))
        native, python = [], []
        for _ in range(args.rounds):
            samples, _ = bench.measure(1, n)
            native.append(samples[0])
            comm.Barrier()
            t0 = time.perf_counter()
            for _ in range(n):
                comm.Allreduce(send, recv, op=MPI.SUM)
            dt = (time.perf_counter() - t0) / n
            python.append(comm.allreduce(dt, op=MPI.MAX))
        del bench
        t_native, t_python = statistics.median(native), statistics.median(python)
        rows.append({"size_bytes": size, "ops_per_sample": n, "rounds": args.rounds,
                     "pybench_time_s": t_native, "mpi4py_time_s": t_python,
                     "pybench_busbw_gbps": size / t_native / 1e9 * factor,
                     "mpi4py_busbw_gbps": size / t_python / 1e9 * factor,
                     "time_ratio": t_native / t_python})

    if rank == 0:
        print(f"# all-reduce float32 sum, {world} ranks, {args.rounds} interleaved rounds per size; "
              f"{MPI.Get_library_version().splitlines()[0][:40]}")
        print(f"# {'size':>10} {'ops/batch':>9} {'pybench us':>11} {'mpi4py us':>10} {'time ratio':>10} "
              f"{'pybench busbw':>13} {'mpi4py busbw':>12} {'busbw ratio':>11}")
        for r in rows:
            print(f"  {r['size_bytes']:>10} {r['ops_per_sample']:>9} {r['pybench_time_s'] * 1e6:>11.3f} "
                  f"{r['mpi4py_time_s'] * 1e6:>10.3f} {r['time_ratio']:>10.3f} {r['pybench_busbw_gbps']:>13.3f} "
                  f"{r['mpi4py_busbw_gbps']:>12.3f} {r['pybench_busbw_gbps'] / r['mpi4py_busbw_gbps']:>11.3f}")
        small, large = rows[0], rows[-1]
        lat_ok = small["time_ratio"] <= 0.7
        bw_ratio = large["pybench_busbw_gbps"] / large["mpi4py_busbw_gbps"]
        bw_ok = abs(bw_ratio - 1) <= 0.05
        print(f"# 8 B latency ratio {small['time_ratio']:.3f} (target <= 0.70): {'met' if lat_ok else 'NOT met'}")
        print(f"# 64 MiB busbw ratio {bw_ratio:.3f} (target 0.95..1.05): {'met' if bw_ok else 'NOT met'}")
        if args.json:
            with open(args.json, "w") as f:
                json.dump({"rows": rows, "latency_target_met": lat_ok, "busbw_target_met": bw_ok}, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
