"""pybench beside nccl-tests on this machine's GPUs, in each timing mode: the GPU check's figures.

One call measures one world, launched one way:

- ``--gpus 1`` (default): a one-rank NCCL communicator, as ``all_reduce_perf -g 1``;
  every collective; optionally the copy bandwidths (``--copies``, with the NUMA
  placement of their host buffers) and the torch nccl path against the native one
  (``--torch``);
- ``--gpus N``: one process driving N GPUs (``PYBENCH_GPUS=N``; nccl-tests ``-g N``);
- ``--gpus N --launch mpi``: one process per GPU under the MPI launcher (pybench's CLI
  as the ranks; nccl-tests built with MPI=1, ``-g 1`` per rank).

pybench runs every size in four timing modes: ``batched`` (CUDA events), ``graph``
(CUDA graph replay, events), ``host`` (nccl-tests' own definition: the host clock
around n operations and one stream synchronisation, averaged over ranks) and
``host-graph`` (the same clock around a CUDA graph replay, as nccl-tests' -G).
nccl-tests times with the host clock, plain and with ``-G`` graphs. Each pybench mode
is set beside the nccl-tests run measured the nearest way (MODES), with the ratio
pybench / nccl-tests of time and bus bandwidth; the 8 B latency target applies only
where both are measured the same way (host, host-graph). At world 1 busbw is 0 for all-reduce
(a device copy) in both tools: algbw is compared there.

    python scripts/gpu_compare.py --nccl-tests DIR [--gpus N] [--launch single|mpi] --json OUT.json
    python scripts/gpu_compare.py --summarize OUT1.json OUT2.json ...

Exit codes: 0 figures printed (targets are reported, not enforced); 1 a wrong value
(pybench's check or nccl-tests' #wrong) or a tool failed; 3 no GPU here.
"""

from __future__ import annotations

import argparse
import json
import os
import shlex
import subprocess
import sys
import tempfile
from pathlib import Path

# 8 B .. 1 GiB by a factor of 512: exactly nccl-tests' -b 8 -e 1G -f 512, so both tools run the same sizes.
SIZES = (8, 4 << 10, 2 << 20, 1 << 30)
NT_SIZE_ARGS = ["-b", "8", "-e", "1G", "-f", "512"]
# pybench collective -> nccl-tests binary; the first two also run at world N (the targets' pair).
COLLECTIVES = (("allreduce", "all_reduce_perf"), ("sendrecv", "sendrecv_perf"), ("allgather", "all_gather_perf"),
               ("reducescatter", "reduce_scatter_perf"), ("broadcast", "broadcast_perf"),
               ("alltoall", "alltoall_perf"))
WORLD_N_COLLECTIVES = 2
# (label, pybench timing, nccl-tests run it is set beside, latency target at 8 B applies)
MODES = (("events", "batched", "plain", False), ("host", "host", "plain", True), ("graph", "graph", "graph", False),
         ("host-graph", "host-graph", "graph", True))
GRAPH_LAUNCHES = 10
TARGET_BUSBW = 0.02  # within 2% of nccl-tests at 1 GiB
TARGET_LATENCY = 0.05  # within 5% at 8 B, measured the same way


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


def nccl_tests_command(binary: Path, gpus: int, launch: str, graph: bool, launcher: list[str]) -> list[str]:
    """nccl-tests at this world: -g N in one process, or -g 1 in each of N ranks under the launcher."""
    per_process = 1 if launch == "mpi" else gpus
    cmd = [str(binary), *NT_SIZE_ARGS, "-g", str(per_process), "-w", "10", "-n", "50", "-c", "1"]
    if graph:
        cmd += ["-G", str(GRAPH_LAUNCHES)]
    return [*launcher, *cmd] if launch == "mpi" else cmd


def run_nccl_tests(cmd: list[str], log, env: dict[str, str] | None = None) -> dict[int, dict]:
    print(f"$ {shlex.join(cmd)}", file=log, flush=True)
    env = dict(env or os.environ)
    env["NCCL_DEBUG"] = env.get("NCCL_DEBUG", "WARN")
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=120, env=env)
    print(proc.stdout + proc.stderr, file=log, flush=True)
    if proc.returncode != 0:
        raise RuntimeError(f"{Path(cmd[0]).name if 'perf' in cmd[0] else shlex.join(cmd[:4])} exited "
                           f"{proc.returncode}: {proc.stderr.strip()[-300:]}")
    return parse_nccl_tests(proc.stdout)


def _row(time_s: float, algbw: float, busbw: float, wrong: int, p5_s: float, p95_s: float, iterations: int) -> dict:
    return {"time_us": time_s * 1e6, "algbw": algbw, "busbw": busbw, "wrong": wrong, "p5_us": p5_s * 1e6,
            "p95_us": p95_s * 1e6, "iterations": iterations}


def run_pybench_in_process(backend, world: int, collectives) -> dict[str, dict]:
    """pybench's figures in this process: {f"{coll}/{timing}": {size: row}}."""
    from pybench.measure.benchmark import BenchConfig, measure_size
    from pybench.measure.stopping import StopRule
    out: dict[str, dict] = {}
    plans = [(c, t, SIZES) for c, _ in collectives for _, t, _, _ in MODES]
    plans += [(c, "per-op", (8,)) for c, _ in collectives[:WORLD_N_COLLECTIVES]]
    for coll, timing, sizes in plans:
        cfg = BenchConfig(benchmark=coll, sizes=tuple(sizes), timing=timing,
                          stop=StopRule(precision=0.01, budget_s=0.3))
        rows = {}
        for size in sizes:
            bench = backend.make_bench(cfg, size)
            try:
                r = measure_size(cfg, bench, size, world)
            finally:
                del bench
            rows[size] = _row(r.time_s, r.algbw_gbps, r.busbw_gbps, r.wrong, r.time_p5_s, r.time_p95_s, r.iterations)
            print(f"  pybench {coll:>13} {timing:>10} {label(size):>8}: {r.time_s * 1e6:10.2f} us  "
                  f"algbw {r.algbw_gbps:8.2f}  busbw {r.busbw_gbps:8.2f}  #wrong {r.wrong}", flush=True)
        out[f"{coll}/{timing}"] = rows
    return out


def rows_from_result(doc: dict) -> dict[int, dict]:
    """A pybench result file's records as rows by size."""
    return {r["size_bytes"]: _row(r["time_s"], r["algbw_gbps"], r["busbw_gbps"], r["wrong"], r["time_p5_s"],
                                  r["time_p95_s"], r["iterations"]) for r in doc["records"]}


def pybench_cli_command(coll: str, timing: str, launcher: list[str], backend: str, json_path: Path) -> list[str]:
    """pybench's CLI as the ranks of a launched job (--launch mpi) or stand-alone (--torch)."""
    sizes = ",".join(str(s) for s in SIZES)
    return [*launcher, sys.executable, "-m", "pybench", coll, "--backend", backend, "--sizes", sizes,
            "--timing", timing, "--precision", "0.01", "--time-budget", "0.3", "--json", str(json_path), "--force"]


def run_pybench_cli(cmd: list[str], json_path: Path, log, env: dict[str, str] | None = None) -> dict[int, dict]:
    print(f"$ {shlex.join(cmd)}", file=log, flush=True)
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=180, env=env)
    print(proc.stdout + proc.stderr, file=log, flush=True)
    if proc.returncode != 0:
        raise RuntimeError(f"pybench {shlex.join(cmd[-14:-11])} exited {proc.returncode}: "
                           f"{proc.stderr.strip()[-300:]}")
    return rows_from_result(json.loads(json_path.read_text()))


def ratio(a: float, b: float) -> float | None:
    return a / b if b else None


def fmt_ratio(x: float | None) -> str:
    return f"{x:6.3f}" if x is not None else "   n/a"


def side_by_side(ours: dict, theirs: dict, collectives=COLLECTIVES) -> tuple[list[str], dict, dict]:
    """The table, the targets met or not, and the ratios pybench / nccl-tests per (collective, mode).

    busbw (algbw where nccl-tests' busbw is 0, world 1) at 1 GiB; time at 8 B.
    """
    lines = [f"# {'collective':>13} {'timing':>10} {'size':>8} | {'pybench us':>11} {'nccl-t us':>10} "
             f"{'t ratio':>7} | {'pyb algbw':>9} {'nt algbw':>9} {'pyb busbw':>9} {'nt busbw':>9} {'bw ratio':>8}"]
    targets: dict = {}
    ratios: dict = {}
    for coll, binary in collectives:
        for mode, timing, run, latency_target in MODES:
            nt = theirs.get(f"{binary}/{run}", {})
            for size in SIZES:
                p = ours.get(f"{coll}/{timing}", {}).get(size)
                n = nt.get(size)
                if p is None:
                    continue
                bw_key = "busbw" if (n and n["busbw"] > 0) else "algbw"
                t_ratio = ratio(p["time_us"], n["time_us"]) if n else None
                b_ratio = ratio(p[bw_key], n[bw_key]) if n else None
                lines.append(
                    f"  {coll:>13} {mode:>10} {label(size):>8} | {p['time_us']:>11.2f} "
                    f"{(n['time_us'] if n else float('nan')):>10.2f} {fmt_ratio(t_ratio):>7} | {p['algbw']:>9.2f} "
                    f"{(n['algbw'] if n else float('nan')):>9.2f} {p['busbw']:>9.2f} "
                    f"{(n['busbw'] if n else float('nan')):>9.2f} {fmt_ratio(b_ratio):>8}")
                if size == SIZES[-1] and b_ratio is not None:
                    ratios[f"{coll} {mode} {label(size)} {bw_key}"] = b_ratio
                    targets[f"{coll} {mode} {label(size)} {bw_key} within 2%"] = abs(b_ratio - 1) <= TARGET_BUSBW
                if size == SIZES[0] and t_ratio is not None:
                    ratios[f"{coll} {mode} {label(size)} time"] = t_ratio
                    if latency_target:
                        targets[f"{coll} {mode} {label(size)} time within 5%"] = abs(t_ratio - 1) <= TARGET_LATENCY
    for coll, binary in collectives:
        p = ours.get(f"{coll}/per-op", {}).get(8)
        n = theirs.get(f"{binary}/graph", {}).get(8)
        if p:
            lines.append(f"# per-op 8 B latency, {coll}: pybench {p['time_us']:.2f} us (p5 {p['p5_us']:.2f}, "
                         f"p95 {p['p95_us']:.2f}); nccl-tests graph average "
                         f"{(n['time_us'] if n else float('nan')):.2f} us")
    return lines, targets, ratios


def torch_overhead(native: dict[int, dict], torch_rows: dict[int, dict]) -> dict[str, float]:
    """Time of the torch nccl path over the native one (batched, same sizes): 1.0 is no overhead."""
    return {label(s): torch_rows[s]["time_us"] / native[s]["time_us"]
            for s in SIZES if s in native and s in torch_rows and native[s]["time_us"] > 0}


def copies() -> list[dict]:
    from pybench.measure.gpu.copy_bench import run_copies, table_lines
    records = run_copies(("d2d", "h2d", "d2h"), [0], [256 << 20], n_samples=10, ops_per_sample=5,
                         engines=("ce", "sm"))
    records += run_copies(("h2d",), [0], [256 << 20], n_samples=10, ops_per_sample=5, bidirectional=True)
    for line in table_lines(records):
        print(line, flush=True)
    return [r.to_dict() for r in records]


def summarize(docs: list[dict]) -> list[str]:
    """The GPU check's closing figures from the JSON of every world measured."""
    lines = []
    for d in docs:
        where = f"world {d['world']} ({'one process per GPU' if d['launch'] == 'mpi' else 'one process'})"
        by_mode: dict[str, list[str]] = {}
        for key, r in d.get("ratios", {}).items():
            coll, mode, *what = key.split()
            if coll in ("allreduce", "sendrecv"):
                by_mode.setdefault(mode, []).append(f"{coll} {' '.join(what)} {r:.3f}")
        for mode, items in by_mode.items():
            lines.append(f"{where}, {mode}: pybench / nccl-tests " + "; ".join(items))
        missed = [k for k, met in d.get("targets", {}).items() if not met]
        lines.append(f"{where}: {len(d.get('targets', {})) - len(missed)} of {len(d.get('targets', {}))} targets met"
                     + (f" (not met: {'; '.join(missed)})" if missed else ""))
        if d.get("torch_overhead"):
            lines.append(f"{where}: torch nccl path time / native (batched): "
                         + ", ".join(f"{s} {r:.2f}x" for s, r in d["torch_overhead"].items()))
        for c in d.get("copies", []):
            if c.get("host_placement"):
                lines.append(f"{where}: NUMA placement of the {c['kind']} host buffer: {c['host_placement']}")
                break
        for f in d.get("failures", []):
            lines.append(f"{where}: FAILED {f}")
    return lines


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--nccl-tests", type=Path, default=None, help="folder with nccl-tests' *_perf binaries")
    ap.add_argument("--gpus", type=int, default=1, help="world size: GPUs to use (default 1)")
    ap.add_argument("--launch", choices=("single", "mpi"), default="single",
                    help="single: one process drives every GPU; mpi: one process per GPU under the MPI launcher")
    ap.add_argument("--copies", action="store_true", help="also the copy bandwidths of GPU 0")
    ap.add_argument("--torch", action="store_true", help="also the torch nccl path against the native one")
    ap.add_argument("--json", type=Path, default=None, help="write every figure here")
    ap.add_argument("--log", type=Path, default=None, help="the other tools' full output goes here (default stderr)")
    ap.add_argument("--summarize", type=Path, nargs="+", default=None, help="print the summary of these JSON files")
    args = ap.parse_args(argv)
    if args.summarize:
        for line in summarize([json.loads(p.read_text()) for p in args.summarize if p.is_file()]):
            print(line)
        return 0
    log = open(args.log, "a") if args.log else sys.stderr
    collectives = COLLECTIVES if args.gpus == 1 else COLLECTIVES[:WORLD_N_COLLECTIVES]
    from pybench.measure.launch import find_launcher
    mpi = find_launcher() if args.launch == "mpi" else None
    launcher = mpi.command(args.gpus, []) if mpi else []
    launch_env = mpi.environment() if mpi else None  # e.g. Open MPI's run-as-root permission
    if args.launch == "single":
        os.environ["PYBENCH_GPUS"] = str(args.gpus)  # one process drives this many GPUs
    failures: list[str] = []
    meta: dict = {}
    ours: dict = {}
    backend = None
    if args.launch == "single":
        from pybench.errors import BackendUnavailable
        from pybench.measure.backends.nccl import NcclBackend
        try:
            backend = NcclBackend()
        except BackendUnavailable as exc:
            print(f"gpu_compare: needs a GPU: {exc}", file=sys.stderr)
            return 3
        info = backend.start()
        meta = backend.run_metadata()
        print(f"# {meta['gpus'][0]['name']} x {info['world_size']}, driver {meta['driver_version']}, CUDA runtime "
              f"{meta['cuda_runtime_version']}, {backend.library}, one process", flush=True)
        ours = run_pybench_in_process(backend, info["world_size"], collectives)
    else:
        with tempfile.TemporaryDirectory() as tmp:
            for coll, _ in collectives:
                for _, timing, _, _ in MODES:
                    path = Path(tmp) / f"{coll}-{timing}.json"
                    try:
                        ours[f"{coll}/{timing}"] = run_pybench_cli(
                            pybench_cli_command(coll, timing, launcher, "nccl", path), path, log, launch_env)
                    except (RuntimeError, subprocess.TimeoutExpired, OSError) as exc:
                        failures.append(str(exc))
    theirs: dict = {}
    for _, binary in collectives:
        exe = args.nccl_tests / binary if args.nccl_tests else None
        if exe is None or not exe.is_file():
            failures.append(f"nccl-tests {binary} not built in {args.nccl_tests}")
            continue
        for run in ("plain", "graph"):
            try:
                theirs[f"{binary}/{run}"] = run_nccl_tests(
                    nccl_tests_command(exe, args.gpus, args.launch, run == "graph", launcher), log, launch_env)
            except (RuntimeError, subprocess.TimeoutExpired) as exc:
                failures.append(str(exc))
    lines, targets, ratios = side_by_side(ours, theirs, collectives)
    print(f"# pybench vs nccl-tests, world {args.gpus} ({args.launch}); ratio = pybench / nccl-tests", flush=True)
    for line in lines:
        print(line, flush=True)
    for name, met in targets.items():
        print(f"# target {name}: {'met' if met else 'NOT met'}", flush=True)
    overhead: dict = {}
    if args.torch:
        with tempfile.TemporaryDirectory() as tmp:
            path = Path(tmp) / "torch.json"
            try:
                torch_rows = run_pybench_cli(pybench_cli_command("allreduce", "batched", [], "torch", path)
                                             + ["--np", str(args.gpus)], path, log)
                overhead = torch_overhead(ours.get("allreduce/batched", {}), torch_rows)
                print("# torch nccl path / native, allreduce batched: "
                      + ", ".join(f"{s} {r:.2f}x" for s, r in overhead.items()), flush=True)
            except (RuntimeError, subprocess.TimeoutExpired, OSError) as exc:
                failures.append(f"torch nccl path: {exc}")
    copy_records = copies() if args.copies and backend is not None else []
    wrong = sum(r["wrong"] for v in ours.values() for r in v.values())
    wrong += sum(r["wrong"] for v in theirs.values() for r in v.values())
    wrong += sum(r["wrong_bytes"] for r in copy_records)
    if args.json:
        by_size = lambda table: {k: {str(s): r for s, r in v.items()} for k, v in table.items()}
        args.json.write_text(json.dumps({"world": args.gpus, "launch": args.launch, "pybench": by_size(ours),
                                         "nccl_tests": by_size(theirs), "targets": targets, "ratios": ratios,
                                         "torch_overhead": overhead, "copies": copy_records, "failures": failures,
                                         "metadata": meta}, indent=1, default=str))
    for f in failures:
        print(f"gpu_compare: {f}", file=sys.stderr)
    return 1 if wrong or failures else 0


if __name__ == "__main__":
    sys.exit(main())
