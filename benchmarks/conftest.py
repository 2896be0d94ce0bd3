"""pytest-benchmark suites on real MPI ranks: `pytest benchmarks/ --benchmark-only`.

How a collective's time gets into pytest-benchmark
--------------------------------------------------
pytest-benchmark runs in one process and times a Python callable; a collective
needs several ranks, and timing a Python call would add the interpreter and the
request's round trip to every number. So:

1. The pytest process is *not* an MPI rank. A session fixture starts one
   persistent 2-rank job through pybench's own launcher logic
   (``find_launcher().command(2, [python, _bench_server.py, PORT, TOKEN])``) and
   talks to its rank 0 over a loopback socket; ranks are started once, not per
   benchmark (MPI start-up costs about a second).
2. One benchmark = one request. The ranks run pybench's normal per-size path
   (``measure_size``: warm-up, exact check, adaptive timing in C++) and return
   the raw samples: seconds per operation, slowest rank, measured by the native
   steady clock around batches of back-to-back operations.
3. Those samples are *replayed* into pytest-benchmark: the fixture's timer is
   replaced for this benchmark by :class:`NativeSampleClock`, a clock that only
   moves when the replayed target says so, by exactly one native sample. With
   ``benchmark.pedantic(target, rounds=len(samples), iterations=1)`` each round's
   ``end - start`` is one native sample, so the saved JSON's min/median/IQR/...
   are the collective's statistics, not the RPC's or Python's, and
   ``--benchmark-compare`` / ``--benchmark-compare-fail`` gate on them.
   (The public ``--benchmark-timer`` option would do the same session-wide, but
   it must be typed by the user and would also apply to any other benchmark;
   the per-fixture timer keeps the substitution local. ``_timer`` is a private
   attribute of pytest-benchmark 4/5, so its absence fails loudly below instead
   of silently timing Python.) The saved ``options.timer`` names this clock, so
   a reader of the JSON sees where the numbers came from.

Each benchmark also asserts the result is right (#wrong == 0 from the native
exact check), and puts size, algbw/busbw (GB/s = 1e9 B/s), ops per sample and
the buffer allocation in ``benchmark.extra_info``.

With ``--benchmark-disable`` (the suite run as plain tests) each size is still
measured and checked, with a short time budget.
"""

from __future__ import annotations

import json
import math
import os
import secrets
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parent
SERVER = HERE / "_bench_server.py"
sys.path.insert(0, str(HERE))  # for `import _bench_server` (request validation shared with the ranks)

WORLD = 2
START_TIMEOUT_S = 120.0
REQUEST_TIMEOUT_S = 300.0

# How each size is measured: adaptive to +-1% (95% CI of the median) within a
# time budget, so a size gets enough samples for a stable median on a noisy
# machine without the suite taking minutes.
DEFAULT_PRECISION = 0.01
DEFAULT_BUDGET_S = 0.5
DISABLED_BUDGET_S = 0.02  # --benchmark-disable: just check and take a few samples


class BenchServerError(RuntimeError):
    pass


class BenchServer:
    """The pytest side of the persistent rank job (see _bench_server.py)."""

    def __init__(self, nprocs: int = WORLD):
        from pybench.measure.launch import find_launcher
        from pybench.measure.mpi_stderr import START_ATTEMPTS, failed_to_start
        self.nprocs = nprocs
        self._log = tempfile.NamedTemporaryFile(prefix="pybench-bench-server-", suffix=".log", delete=False)
        listener = socket.create_server(("127.0.0.1", 0))
        listener.settimeout(1.0)
        token = secrets.token_hex(16)
        launcher = find_launcher()
        env = launcher.environment()
        cmd = launcher.command(nprocs, [sys.executable, str(SERVER), str(listener.getsockname()[1]), token])
        self.conn = None
        self._broken = ""  # set when an answer was lost: the request/answer stream is out of step
        try:
            for attempt in range(1, START_ATTEMPTS + 1):
                # cwd outside the source tree, as tests/conftest.py does, so the ranks import the installed pybench.
                self.proc = subprocess.Popen(cmd, env=env, cwd=tempfile.gettempdir(), stdin=subprocess.DEVNULL,
                                             stdout=self._log, stderr=subprocess.STDOUT)
                try:
                    self.conn, self._reader, hello = self._accept(listener, token)
                    break
                except BenchServerError:
                    # Open MPI's launcher can fail before any rank runs (pybench.measure.launch); try again.
                    if attempt == START_ATTEMPTS or not failed_to_start(self.log_tail()):
                        raise
        except BaseException:
            self.close()
            raise
        finally:
            listener.close()
        self.conn.settimeout(REQUEST_TIMEOUT_S)
        self.world_size = int(hello["world_size"])
        self.hosts = hello["hosts"]

    def _accept(self, listener: socket.socket, token: str):
        deadline = time.monotonic() + START_TIMEOUT_S
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise BenchServerError(f"the {self.nprocs}-rank bench server exited with {self.proc.returncode} "
                                       f"before connecting:\n{self.log_tail()}")
            try:
                conn, _ = listener.accept()
            except TimeoutError:
                continue
            conn.settimeout(30)
            reader = conn.makefile("r", encoding="utf-8")
            # Only the job we started knows the token; anything else on loopback is dropped.
            try:
                hello = json.loads(reader.readline())
            except (ValueError, OSError):
                hello = {}
            if isinstance(hello, dict) and hello.get("hello") == token:
                return conn, reader, hello
            conn.close()
        raise BenchServerError(f"the bench server did not connect within {START_TIMEOUT_S:.0f} s:\n{self.log_tail()}")

    def log_tail(self, n: int = 40) -> str:
        try:
            return "\n".join(Path(self._log.name).read_text(errors="replace").splitlines()[-n:])
        except OSError:
            return "(no log)"

    def measure(self, collective: str, size_bytes: int, *, dtype: str = "float32", op: str = "sum", root: int = 0,
                timing: str = "batched", precision: float = DEFAULT_PRECISION, budget_s: float = DEFAULT_BUDGET_S,
                warmup: int = 5, check_iters: int = 2, min_iters: int = 5, huge_pages: bool = True) -> dict:
        """Measure one size on the ranks; returns the SizeRecord as a dict (raw ``samples_s`` included)."""
        import _bench_server
        req = {"cmd": "measure", "collective": collective, "dtype": dtype, "op": op, "size_bytes": int(size_bytes),
               "root": root, "timing": timing, "warmup": warmup, "check_iters": check_iters,
               "precision": precision, "budget_s": budget_s, "min_iters": min_iters, "huge_pages": huge_pages}
        # Validate here first: a bad request fails this test with pybench's message, and the ranks never see it.
        _bench_server.config_for(req).validate(self.world_size)
        if self._broken:
            raise BenchServerError(f"the bench server is unusable after an earlier failure ({self._broken})")
        if self.proc.poll() is not None:
            raise BenchServerError(f"the bench server has exited ({self.proc.returncode}):\n{self.log_tail()}")
        try:
            self.conn.sendall((json.dumps(req) + "\n").encode())
            line = self._reader.readline()
        except OSError as exc:  # socket.timeout included: no answer within REQUEST_TIMEOUT_S
            self._broken = f"no answer to {collective} {size_bytes} B: {exc}"
            raise BenchServerError(f"lost the bench server ({exc}):\n{self.log_tail()}") from None
        if not line:
            self._broken = f"died during {collective} {size_bytes} B"
            try:
                self.proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                pass
            raise BenchServerError(f"the bench server died during {collective} {size_bytes} B "
                                   f"(exit {self.proc.returncode}):\n{self.log_tail()}")
        answer = json.loads(line)
        if not answer.get("ok"):
            raise BenchServerError(f"bench server refused the request: {answer.get('error')}")
        answer["record"]["buffer_allocation"] = answer.get("buffer_allocation")
        return answer["record"]

    def close(self) -> None:
        """Ask the ranks to finish; stop the job if they do not (mpiexec forwards SIGTERM to its ranks)."""
        try:
            if self.conn is not None and not self._broken:
                self.conn.sendall(b'{"cmd": "quit"}\n')
        except OSError:
            pass
        if self.conn is not None:
            self.conn.close()
        for stop, wait_s in ((None, 0 if self._broken else 30), (self.proc.terminate, 10), (self.proc.kill, 10)):
            if stop is not None:
                stop()
            try:
                self.proc.wait(timeout=wait_s)
                break
            except subprocess.TimeoutExpired:
                continue
        self._log.close()
        try:
            os.unlink(self._log.name)
        except OSError:
            pass


class NativeSampleClock:
    """A pytest-benchmark timer that replays natively measured per-operation times.

    Reading the clock returns the sum of the samples replayed so far; ``tick``
    (the benchmarked target) advances it by the next sample. pytest-benchmark
    reads the clock before and after each round, so each round's duration is
    one native sample (exact up to float rounding of the running sum, ~1e-16
    relative to the total, far below the clock's own resolution).
    """

    __name__ = "pybench_native_samples"  # what pytest-benchmark records as options.timer

    def __init__(self, samples_s: list[float]):
        if not samples_s or not all(math.isfinite(s) and s > 0 for s in samples_s):
            raise ValueError("native samples must be positive finite seconds")
        self._samples = list(samples_s)
        self._next = 0
        self._now = 0.0

    def __call__(self) -> float:
        return self._now

    def tick(self) -> None:
        self._now += self._samples[self._next]
        self._next += 1

    @property
    def rounds(self) -> int:
        return len(self._samples)

    @property
    def replayed(self) -> int:
        return self._next


def record_native_samples(benchmark, samples_s: list[float]) -> None:
    """Feed native samples to pytest-benchmark as its rounds (see module docstring)."""
    clock = NativeSampleClock(samples_s)
    if not hasattr(benchmark, "_timer"):
        raise RuntimeError("this pytest-benchmark has no per-fixture timer (BenchmarkFixture._timer); the suite "
                           "needs pytest-benchmark 4.x or 5.x to report native times")
    benchmark._timer = clock
    benchmark.pedantic(clock.tick, rounds=clock.rounds, iterations=1, warmup_rounds=0)
    if not benchmark.disabled:
        assert clock.replayed == clock.rounds, "pytest-benchmark did not replay every native sample"


def _load_line() -> str:
    try:
        load1 = os.getloadavg()[0]
    except OSError:
        return "load average unknown"
    cpus = os.cpu_count() or 1
    line = f"load average {load1:.2f} on {cpus} CPU(s)"
    if load1 > 0.5 * cpus:
        line += " - a busy machine: these timings are not comparable with a quiet baseline"
    return line


def pytest_report_header(config):
    return f"pybench benchmarks: {WORLD} MPI ranks (CPU, host buffers), native timings; {_load_line()}"


@pytest.fixture(scope="session")
def bench_server():
    try:
        import pybench._core  # noqa: F401
    except ImportError as exc:
        pytest.fail(f"pybench._core cannot be imported ({exc}); install with `pip install -e .[test]`")
    server = BenchServer(WORLD)
    try:
        yield server
    finally:
        server.close()


@pytest.fixture
def measure_collective(bench_server, benchmark):
    """``measure_collective(collective, size_bytes, **options) -> record``: measure on the ranks,
    assert the result was exactly right, and report the native samples to pytest-benchmark."""
    from pybench.measure.benchmark import BenchConfig

    def run(collective: str, size_bytes: int, **options) -> dict:
        if benchmark.disabled:
            options.setdefault("budget_s", DISABLED_BUDGET_S)
        record = bench_server.measure(collective, size_bytes, **options)
        assert record["check_iters"] > 0, "the benchmark must check its result"
        assert record["wrong"] == 0, (f"{collective} {size_bytes} B {record['dtype']}: {record['wrong']} wrong "
                                      f"value(s) in {record['check_iters']} checked iteration(s)")
        cfg = BenchConfig(benchmark=collective, sizes=(size_bytes,), dtype=record["dtype"])
        algbw, busbw = cfg.bandwidths(size_bytes, record["time_s"], bench_server.world_size)
        benchmark.extra_info.update({
            "collective": collective, "backend": "mpi", "world_size": bench_server.world_size,
            "size_bytes": size_bytes, "dtype": record["dtype"], "redop": record["redop"],
            "time_median_us": record["time_s"] * 1e6, "algbw_gbps": algbw, "busbw_gbps": busbw,
            "wrong": record["wrong"], "ops_per_sample": record["ops_per_sample"],
            "iterations": record["iterations"], "precision_met": record["precision_met"],
            "stop_reason": record["stop_reason"], "buffer_allocation": record.get("buffer_allocation"),
            "timer": "native steady_clock, seconds per op of the slowest rank (pybench measure_size)",
            "loadavg_1m": os.getloadavg()[0] if hasattr(os, "getloadavg") else None,
        })
        record_native_samples(benchmark, record["samples_s"])
        return record

    return run



@pytest.fixture(scope="session")
def nccl_backend():
    """pybench's NCCL backend in this process (one process drives every local GPU), or a skip saying why."""
    from pybench.cli.gpu import nccl_unavailable_reason
    reason = nccl_unavailable_reason()
    if reason is not None:
        pytest.skip(f"no NCCL benchmarks here: {reason}")
    from pybench.measure.backends.nccl import NcclBackend
    backend = NcclBackend()
    info = backend.start()
    yield backend, info
    backend.finish()


@pytest.fixture
def measure_nccl(nccl_backend, benchmark):
    """``measure_nccl(collective, size_bytes, **options) -> SizeRecord`` on every local GPU through NCCL,
    checked exactly, with the CUDA-event samples replayed into pytest-benchmark."""
    from pybench.measure.benchmark import BenchConfig, measure_size
    from pybench.measure.stopping import StopRule
    backend, info = nccl_backend

    def run(collective: str, size_bytes: int, dtype: str = "float32", op: str = "sum", timing: str = "batched"):
        budget = DISABLED_BUDGET_S if benchmark.disabled else 0.5
        cfg = BenchConfig(benchmark=collective, sizes=(size_bytes,), dtype=dtype, op=op, timing=timing,
                          stop=StopRule(precision=0.01, budget_s=budget))
        cfg.validate(info["world_size"], single_rank_ok=True)
        bench = backend.make_bench(cfg, size_bytes)
        try:
            record = measure_size(cfg, bench, size_bytes, info["world_size"])
        finally:
            del bench
        assert record.check_iters > 0 and record.wrong == 0, f"{collective} {size_bytes} B: {record.wrong} wrong"
        benchmark.extra_info.update({
            "collective": collective, "backend": "nccl", "world_size": info["world_size"], "size_bytes": size_bytes,
            "dtype": dtype, "timing": timing, "time_median_us": record.time_s * 1e6, "algbw_gbps": record.algbw_gbps,
            "busbw_gbps": record.busbw_gbps, "wrong": record.wrong, "iterations": record.iterations,
            "buffer_allocation": backend.describe_buffers(cfg),
            "timer": "CUDA events, seconds per op of the slowest device (pybench measure_size)",
        })
        record_native_samples(benchmark, record.samples_s)
        return record

    return run
