"""A persistent N-rank "bench server" for the pytest-benchmark suites.

pytest-benchmark runs in one process, but a collective needs real ranks. So the
pytest process is *not* an MPI rank: a session fixture (benchmarks/conftest.py)
starts this script once through pybench's MPI launcher (``mpiexec -n 2 python
_bench_server.py PORT TOKEN``), and every benchmark becomes one request:

* rank 0 connects back to the pytest process on 127.0.0.1:PORT, proves it is
  the job that was started (TOKEN), then reads one JSON request per line;
* rank 0 hands each request to the other ranks through the native core's
  ``allreduce_max_ints`` (rank 0 contributes the encoded request, the others
  zeros, so the max *is* rank 0's request: a broadcast without mpi4py, which
  keeps this working on a system MPI that mpi4py was not built against);
* every rank builds the native CollectiveBench, and pybench's own
  ``measure_size`` warms up, checks the result exactly (#wrong) and times until
  the stop rule is satisfied: the same code path as ``python -m pybench``;
* rank 0 answers with the SizeRecord (raw per-operation samples of the slowest
  rank, #wrong, busbw, ...) as one JSON line.

Requests are validated on every rank with the same deterministic code before any
buffer is allocated, so a bad request is answered with an error, never a hang.
"""

from __future__ import annotations

import json
import socket
import sys
import traceback

from pybench.io.files import null_non_finite

# Op codes of the encoded request (first integer).
OP_QUIT, OP_MEASURE = 1, 2

# The request travels as non-negative integers: strings as indices into these
# tables (sorted, so every rank agrees), fractions in parts per million.
_PPM = 1_000_000


def _tables():
    from pybench.collectives import COLLECTIVES, DTYPES, OPS
    return sorted(COLLECTIVES), sorted(DTYPES), sorted(OPS), ["batched", "per-op"]


def encode(req: dict) -> list[int]:
    """Request dict -> fixed-length list of non-negative ints (rank 0's side)."""
    colls, dtypes, ops, timings = _tables()
    if req.get("cmd") == "quit":
        return [OP_QUIT] + [0] * 12
    return [OP_MEASURE, colls.index(req["collective"]), dtypes.index(req["dtype"]), ops.index(req["op"]),
            int(req["size_bytes"]), int(req["root"]), timings.index(req["timing"]), int(req["warmup"]),
            int(req["check_iters"]), int(round(req["precision"] * _PPM)), int(round(req["budget_s"] * _PPM)),
            int(req["min_iters"]), int(bool(req["huge_pages"]))]


def decode(v: list[int]) -> dict:
    colls, dtypes, ops, timings = _tables()
    if v[0] == OP_QUIT:
        return {"cmd": "quit"}
    return {"cmd": "measure", "collective": colls[v[1]], "dtype": dtypes[v[2]], "op": ops[v[3]],
            "size_bytes": v[4], "root": v[5], "timing": timings[v[6]], "warmup": v[7], "check_iters": v[8],
            "precision": v[9] / _PPM, "budget_s": v[10] / _PPM, "min_iters": v[11], "huge_pages": bool(v[12])}


def config_for(req: dict):
    """The BenchConfig of one request (also used by the pytest side to validate before sending)."""
    from pybench.measure.benchmark import BenchConfig
    from pybench.measure.stopping import StopRule
    return BenchConfig(benchmark=req["collective"], sizes=(int(req["size_bytes"]),), dtype=req["dtype"], op=req["op"],
                       root=int(req["root"]), timing=req["timing"],
                       stop=StopRule(precision=req["precision"], min_iters=int(req["min_iters"]),
                                     budget_s=req["budget_s"]),
                       warmup=int(req["warmup"]), check_iters=int(req["check_iters"]),
                       huge_pages=bool(req["huge_pages"]))


def _measure(core, req: dict, world: int) -> dict:
    from pybench.measure.benchmark import make_native_bench, measure_size
    cfg = config_for(req)
    cfg.validate(world)
    bench = make_native_bench(cfg, cfg.sizes[0])
    try:
        record = measure_size(cfg, bench, cfg.sizes[0], world)
    finally:
        del bench
    return {"ok": True, "record": record.to_dict(), "world_size": world,
            "buffer_allocation": core.host_allocation(cfg.huge_pages)}


def _send(conn: socket.socket | None, answer: dict) -> None:
    """Rank 0 answers pytest with one strict-JSON line (non-finite numbers as null); others have no socket."""
    if conn is not None:
        conn.sendall((json.dumps(null_non_finite(answer), allow_nan=False) + "\n").encode())


def serve(port: int, token: str) -> int:
    from pybench._native import core as get_core
    from pybench.errors import PyBenchError
    core = get_core()
    core.mpi_init()
    info = core.rank_info()
    rank, world = info["rank"], info["world_size"]
    conn = reader = None
    if rank == 0:
        conn = socket.create_connection(("127.0.0.1", port), timeout=60)
        conn.settimeout(None)  # idle between benchmarks for as long as pytest needs
        reader = conn.makefile("r", encoding="utf-8")
        conn.sendall((json.dumps({"hello": token, "world_size": world, "hosts": info["hosts"]}) + "\n").encode())
    n_fields = len(encode({"cmd": "quit"}))
    try:
        while True:
            req_ints = [0] * n_fields
            bad = ""
            if reader is not None:  # rank 0
                line = reader.readline()
                try:
                    req_ints = encode(json.loads(line) if line else {"cmd": "quit"})
                except (ValueError, KeyError, TypeError) as exc:
                    bad = f"malformed request {line.strip()[:200]!r}: {exc}"
                    req_ints = [0] * n_fields
            req_ints = list(core.allreduce_max_ints(req_ints))
            if bad:  # every rank sees an all-zero request and just waits for the next one
                _send(conn, {"ok": False, "error": bad})
                continue
            if req_ints[0] == 0:
                continue
            req = decode(req_ints)
            if req["cmd"] == "quit":
                return 0
            try:
                answer = _measure(core, req, world)
            except PyBenchError as exc:
                # validate() is deterministic, so every rank raised the same error before allocating.
                answer = {"ok": False, "error": str(exc)}
            _send(conn, answer)
    finally:
        if conn is not None:
            conn.close()
        core.mpi_finalize()


def main(argv: list[str]) -> int:
    if len(argv) != 2:
        print("usage: _bench_server.py PORT TOKEN (started by benchmarks/conftest.py)", file=sys.stderr)
        return 2
    try:
        return serve(int(argv[0]), argv[1])
    except Exception:
        traceback.print_exc()
        sys.stderr.flush()
        from pybench._native import core
        core().mpi_abort(1)  # never leave the other ranks waiting inside a collective
        return 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
