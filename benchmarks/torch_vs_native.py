"""Framework overhead: torch.distributed (gloo) against pybench's native MPI harness.

All-reduce at a few sizes on the same 2 local ranks, the two backends run in
interleaved rounds (mpi, torch, mpi, torch, ...) so that the machine's drift
hits both alike; per size the median time of each backend over rounds and the
median of the per-round ratios torch / native are reported (DESIGN.md:
compare tools by interleaving their runs and quoting medians and ratios).

    python benchmarks/torch_vs_native.py [--sizes 1K,64K,1M,16M] [--rounds 3] [--iters 50] [--json FILE]

Not a pytest file: a measurement to read, not a test to pass. The ratio says
what a Python training loop pays over the native library for the same
collective on the same link (Python dispatch, tensor bookkeeping, gloo vs the
MPI library's algorithms and shared-memory transport).
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path


def run(backend: str, sizes: str, iters: int, out: Path) -> dict[int, float]:
    cmd = [sys.executable, "-m", "pybench", "allreduce", "--backend", backend, "--sizes", sizes, "--iters",
           str(iters), "-w", "5", "--json", str(out), "--force"]
    proc = subprocess.run(cmd, capture_output=True, text=True, stdin=subprocess.DEVNULL, timeout=1200)
    if proc.returncode != 0:
        raise SystemExit(f"{' '.join(cmd)} failed ({proc.returncode}):\n{proc.stderr[-2000:]}")
    return {r["size_bytes"]: r["time_s"] for r in json.loads(out.read_text())["records"]}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", default="1K,64K,1M,16M")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--iters", type=int, default=50)
    ap.add_argument("--json", type=Path, default=None)
    a = ap.parse_args(argv)
    times: dict[str, list[dict[int, float]]] = {"mpi": [], "torch": []}
    with tempfile.TemporaryDirectory() as tmp:
        for r in range(a.rounds):
            for backend in (("mpi", "torch") if r % 2 == 0 else ("torch", "mpi")):
                times[backend].append(run(backend, a.sizes, a.iters, Path(tmp) / f"{backend}{r}.json"))
                print(f"round {r + 1}/{a.rounds} {backend} done", file=sys.stderr, flush=True)
    sizes = sorted(times["mpi"][0])
    rows = []
    print(f"{'size (B)':>10}  {'native mpi (us)':>15}  {'torch gloo (us)':>15}  {'ratio torch/native':>18}  "
          f"(median of {a.rounds} interleaved rounds, {a.iters} iterations each)")
    for s in sizes:
        m = [t[s] for t in times["mpi"]]
        t = [x[s] for x in times["torch"]]
        ratio = statistics.median(tt / mm for tt, mm in zip(t, m))
        rows.append({"size_bytes": s, "mpi_s": m, "torch_s": t, "median_ratio": ratio})
        print(f"{s:>10}  {statistics.median(m) * 1e6:15.1f}  {statistics.median(t) * 1e6:15.1f}  {ratio:18.2f}")
    if a.json:
        a.json.write_text(json.dumps({"rounds": a.rounds, "iters": a.iters, "rows": rows}, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
