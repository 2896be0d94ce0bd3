"""pybench beside nccl-tests (and copies) on this machine's first GPU: the GPU check's figures.

Runs, on one GPU (a one-rank NCCL communicator, as ``all_reduce_perf -g 1``):
pybench's sendrecv and allreduce at 8 B, 1 MiB, 256 MiB and 1 GiB with CUDA events
(batched) and CUDA graphs, pybench's per-op 8 B latency, and, when their binaries
are given, nccl-tests' ``sendrecv_perf`` and ``all_reduce_perf`` (events, then
``-G``, graphs) over 8 B..1 GiB; then prints both side by side with the ratio
pybench / nccl-tests of time and bus bandwidth, and the d2d/h2d/d2h copy bandwidths.

At world 1 NCCL runs allreduce as a device copy and busbw is 0 by definition (for
both tools): the time and algbw columns are what to compare there.

    python scripts/gpu_compare.py --nccl-tests DIR --json OUT.json

Exit codes: 0 figures printed (targets are reported, not enforced); 1 a wrong value
(pybench's check or nccl-tests' #wrong) or a tool failed; 3 no GPU here.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from pathlib import Path

SIZES = (8, 1 << 20, 256 << 20, 1 << 30)
COLLECTIVES = (("sendrecv", "sendrecv_perf"), ("allreduce", "all_reduce_perf"))
GRAPH_LAUNCHES = 10
TARGET_BUSBW = 0.02  # within 2% of nccl-tests at 1 GiB
TARGET_GRAPH_LATENCY = 0.05  # within 5% at 8 B with graphs


def label(size: int) -> str:
    for unit, shift in (("GiB", 30), ("MiB", 20), ("KiB", 10)):
        if size >= 1 << shift and size % (1 << shift) == 0:
            return f"{size >> shift} {unit}"
    return f"{size} B"


def parse_nccl_tests(text: str) -> dict[int, dict]:
    """Rows of an nccl-tests table by size: out-of-place time (us), algbw, busbw, #wrong (and in-place)."""
    rows: dict[int, dict] = {}
    for line in text.splitlines():
        fields = line.split()
        if len(fields) < 13 or line.lstrip().startswith("#") or not fields[0].isdigit():
            continue
        try:
            rows[int(fields[0])] = {"time_us": float(fields[5]), "algbw": float(fields[6]), "busbw": float(fields[7]),
                                    "wrong": float(fields[8]), "in_place_time_us": float(fields[9]),
                                    "in_place_busbw": float(fields[11])}
        except ValueError:
            continue
    return rows


def run_nccl_tests(binary: Path, graph: bool, log) -> dict[int, dict]:
    """One sweep 8 B..1 GiB (factor 2) on GPU 0; nccl-tests rotates buffers over the 1 GiB allocation."""
    cmd = [str(binary), "-b", "8", "-e", "1G", "-f", "2", "-g", "1", "-w", "10", "-n", "50", "-c", "1"]
    if graph:
        cmd += ["-G", str(GRAPH_LAUNCHES)]
    print(f"$ {' '.join(cmd)}", file=log, flush=True)
    env = dict(os.environ, NCCL_DEBUG=os.environ.get("NCCL_DEBUG", "WARN"))
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=180, env=env)
    print(proc.stdout + proc.stderr, file=log, flush=True)
    if proc.returncode != 0:
        raise RuntimeError(f"{binary.name} exited {proc.returncode}: {proc.stderr.strip()[-300:]}")
    return parse_nccl_tests(proc.stdout)


def run_pybench(backend, world: int) -> dict[str, dict]:
    """pybench's figures: {f"{coll}/{timing}": {size: {time_us, algbw, busbw, wrong}}}."""
    from pybench.measure.benchmark import BenchConfig, measure_size
    from pybench.measure.stopping import StopRule
    out: dict[str, dict] = {}
    plans = [(c, t, SIZES) for c, _ in COLLECTIVES for t in ("batched", "graph")]
    plans += [(c, "per-op", (8,)) for c, _ in COLLECTIVES]
    for coll, timing, sizes in plans:
        cfg = BenchConfig(benchmark=coll, sizes=tuple(sizes), timing=timing,
                          stop=StopRule(precision=0.01, budget_s=0.5))
        rows = {}
        for size in sizes:
            bench = backend.make_bench(cfg, size)
            try:
                r = measure_size(cfg, bench, size, world)
            finally:
                del bench
            rows[size] = {"time_us": r.time_s * 1e6, "algbw": r.algbw_gbps, "busbw": r.busbw_gbps, "wrong": r.wrong,
                          "p5_us": r.time_p5_s * 1e6, "p95_us": r.time_p95_s * 1e6, "iterations": r.iterations}
            print(f"  pybench {coll:>9} {timing:>7} {label(size):>8}: {r.time_s * 1e6:10.2f} us  "
                  f"algbw {r.algbw_gbps:8.2f}  busbw {r.busbw_gbps:8.2f}  #wrong {r.wrong}", flush=True)
        out[f"{coll}/{timing}"] = rows
    return out


def graph_latch_diagnostic(backend, theirs: dict) -> list[str]:
    """8 B with CUDA graphs of nccl-tests' shape (50 ops per graph), with and without pybench's latch.

    With the latch the events time GPU work only; without it the host's graph launch
    falls inside the timed region, as it does in nccl-tests' host-timed figure.
    """
    from pybench.measure.benchmark import BenchConfig
    lines = []
    for coll, binary in COLLECTIVES:
        cfg = BenchConfig(benchmark=coll, sizes=(8,), timing="graph")
        bench = backend.make_bench(cfg, 8)
        bench.warmup(5)
        got = {}
        for latch in ("1", "0"):
            os.environ["PYBENCH_LATCH"] = latch
            samples, _ = bench.measure(30, 50)
            got[latch] = sorted(samples)[len(samples) // 2] * 1e6
        os.environ.pop("PYBENCH_LATCH", None)
        del bench
        n = theirs.get(f"{binary}/graph", {}).get(8)
        lines.append(f"# graph 8 B, 50 ops per graph, {coll}: pybench latched {got['1']:.2f} us, unlatched "
                     f"{got['0']:.2f} us; nccl-tests {(n['time_us'] if n else float('nan')):.2f} us")
    return lines


def ratio(a: float, b: float) -> float | None:
    return a / b if b else None


def fmt_ratio(x: float | None) -> str:
    return f"{x:6.3f}" if x is not None else "   n/a"


def side_by_side(ours: dict, theirs: dict) -> tuple[list[str], dict]:
    """The comparison table and the targets: busbw (algbw at world 1) at 1 GiB, graph time at 8 B."""
    lines = [f"# {'collective':>10} {'timing':>7} {'size':>8} | {'pybench us':>11} {'nccl-t us':>10} {'t ratio':>7} | "
             f"{'pyb algbw':>9} {'nt algbw':>9} {'pyb busbw':>9} {'nt busbw':>9} {'bw ratio':>8}"]
    targets: dict = {}
    for coll, binary in COLLECTIVES:
        for timing, key in (("events", "batched"), ("graph", "graph")):
            nt = theirs.get(f"{binary}/{key}", {})
            for size in SIZES:
                p = ours.get(f"{coll}/{key}", {}).get(size)
                n = nt.get(size)
                if p is None:
                    continue
                # busbw is 0 at world 1 for allreduce (both tools): compare algbw there.
                bw_key = "busbw" if (n and n["busbw"] > 0) else "algbw"
                t_ratio = ratio(p["time_us"], n["time_us"]) if n else None
                b_ratio = ratio(p[bw_key], n[bw_key]) if n else None
                lines.append(
                    f"  {coll:>10} {timing:>7} {label(size):>8} | {p['time_us']:>11.2f} "
                    f"{(n['time_us'] if n else float('nan')):>10.2f} {fmt_ratio(t_ratio):>7} | {p['algbw']:>9.2f} "
                    f"{(n['algbw'] if n else float('nan')):>9.2f} {p['busbw']:>9.2f} "
                    f"{(n['busbw'] if n else float('nan')):>9.2f} {fmt_ratio(b_ratio):>8}")
                if size == 1 << 30 and b_ratio is not None:
                    targets[f"{coll} {timing} 1 GiB {bw_key} within 2%"] = abs(b_ratio - 1) <= TARGET_BUSBW
                if size == 8 and key == "graph" and t_ratio is not None:
                    targets[f"{coll} graph 8 B time within 5%"] = abs(t_ratio - 1) <= TARGET_GRAPH_LATENCY
    for coll, binary in COLLECTIVES:
        p = ours.get(f"{coll}/per-op", {}).get(8)
        n = theirs.get(f"{binary}/graph", {}).get(8)
        if p:
            lines.append(f"# per-op 8 B latency, {coll}: pybench {p['time_us']:.2f} us (p5 {p['p5_us']:.2f}, "
                         f"p95 {p['p95_us']:.2f}); nccl-tests graph average "
                         f"{(n['time_us'] if n else float('nan')):.2f} us")
    return lines, targets


def copies() -> list[dict]:
    from pybench.measure.gpu.copy_bench import run_copies, table_lines
    records = run_copies(("d2d", "h2d", "d2h"), [0], [256 << 20], n_samples=10, ops_per_sample=5,
                         engines=("ce", "sm"))
    records += run_copies(("h2d",), [0], [256 << 20], n_samples=10, ops_per_sample=5, bidirectional=True)
    for line in table_lines(records):
        print(line, flush=True)
    return [r.to_dict() for r in records]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--nccl-tests", type=Path, default=None, help="folder with sendrecv_perf and all_reduce_perf")
    ap.add_argument("--json", type=Path, default=None, help="write every figure here")
    ap.add_argument("--log", type=Path, default=None, help="nccl-tests' full output goes here (default stderr)")
    args = ap.parse_args(argv)
    os.environ["PYBENCH_GPUS"] = "1"
    from pybench.errors import BackendUnavailable
    from pybench.measure.backends.nccl import NcclBackend
    try:
        backend = NcclBackend()
    except BackendUnavailable as exc:
        print(f"gpu_compare: needs a GPU: {exc}", file=sys.stderr)
        return 3
    info = backend.start()
    meta = backend.run_metadata()
    print(f"# {meta['gpus'][0]['name']}, driver {meta['driver_version']}, CUDA runtime "
          f"{meta['cuda_runtime_version']}, {backend.library}, world {info['world_size']}", flush=True)
    ours = run_pybench(backend, info["world_size"])
    theirs: dict = {}
    failures: list[str] = []
    log = open(args.log, "a") if args.log else sys.stderr
    for _, binary in COLLECTIVES:
        exe = args.nccl_tests / binary if args.nccl_tests else None
        if exe is None or not exe.is_file():
            failures.append(f"nccl-tests {binary} not built")
            continue
        for key, graph in (("batched", False), ("graph", True)):
            try:
                theirs[f"{binary}/{key}"] = run_nccl_tests(exe, graph, log)
            except (RuntimeError, subprocess.TimeoutExpired) as exc:
                failures.append(str(exc))
    lines, targets = side_by_side(ours, theirs)
    print("# pybench vs nccl-tests, one GPU (world 1); ratio = pybench / nccl-tests", flush=True)
    for line in lines:
        print(line, flush=True)
    for name, met in targets.items():
        print(f"# target {name}: {'met' if met else 'NOT met'}", flush=True)
    for line in graph_latch_diagnostic(backend, theirs):
        print(line, flush=True)
    copy_records = copies()
    wrong = sum(r["wrong"] for v in ours.values() for r in v.values())
    wrong += sum(r["wrong"] for v in theirs.values() for r in v.values())
    wrong += sum(r["wrong_bytes"] for r in copy_records)
    if args.json:
        by_size = lambda table: {k: {str(s): r for s, r in v.items()} for k, v in table.items()}
        args.json.write_text(json.dumps({"pybench": by_size(ours), "nccl_tests": by_size(theirs), "targets": targets,
                                         "copies": copy_records, "failures": failures, "metadata": meta},
                                        indent=1, default=str))
    for f in failures:
        print(f"gpu_compare: {f}", file=sys.stderr)
    return 1 if wrong or failures else 0


if __name__ == "__main__":
    sys.exit(main())
