"""The torch backend: collectives through torch.distributed, timed from Python.

It measures what a training loop sees, framework overhead included (DESIGN.md:
the one deliberate exception to "no Python inside a timed region"). Process
group: gloo on CPU, nccl when CUDA is available (``PYBENCH_TORCH_BACKEND=gloo``
forces gloo). Same harness semantics as the native backends:

- warmup(n): n untimed operations, then a barrier.
- check(iters): rank r's input element j is ``1 + (3r + j) mod M`` (M = 13, or
  smaller for sums so that every sum stays an exact integer in the dtype); the
  output is pre-filled with 0xff bytes, every element is compared exactly with
  its expected value and the count of wrong elements is summed over ranks.
- measure(n, k): per sample a barrier, then k operations back to back timed with
  ``time.perf_counter`` (CUDA events on GPU); per-op time = batch time / k. The
  samples and the wall time are max-reduced over ranks with a torch all_reduce
  (MAX), so every rank holds identical samples (the stop rule relies on it).

All-reduce and broadcast run in place (what a training loop does); all-gather
uses ``all_gather_into_tensor``, reduce-scatter ``reduce_scatter_tensor``,
all-to-all ``all_to_all_single`` (gloo in torch 2.13 has all of them on CPU,
for every pybench dtype and op), send/recv an isend/irecv ring.

How ranks start (no home-made rendezvous):
- under torchrun (RANK, WORLD_SIZE, MASTER_ADDR, MASTER_PORT set): ``env://``;
- under pybench's own stand-alone launch or a user's mpirun: MPI (pybench's
  core) carries the rendezvous: rank 0 opens a TCPStore on a free port, the port
  travels in an MPI all-reduce, every rank joins the store at rank 0's host.
  ``PYBENCH_MASTER_ADDR`` overrides rank 0's address.
``PYBENCH_GLOO_IFNAME`` (or ``GLOO_SOCKET_IFNAME``) picks gloo's network
interface; with every rank on one host and none given, gloo uses ``lo``.
``PYBENCH_HOSTNAME`` overrides the host name a rank reports (network namespaces
share the machine's host name but are separate "hosts"; pybench.measure.netns sets it).
"""

from __future__ import annotations

import atexit
import gc
import os
import socket
import sys
import threading
import time
from typing import Any

from pybench.errors import BackendUnavailable, UsageError

INSTALL_HINT = "`pip install torch` (the CPU build brings gloo; a CUDA build brings nccl)"
_DTYPES = ("float32", "float64", "float16", "bfloat16", "int32")
# Largest integer each dtype holds exactly (as csrc/common/dtypes.cpp).
_EXACT_INT_LIMIT = {"float32": 2.0**24, "float64": 2.0**53, "float16": 2048.0, "bfloat16": 256.0,
                    "int32": 2147483647.0}
_TORCHRUN_VARS = ("RANK", "WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT")


def import_torch():
    """(torch, torch.distributed), or a one-line BackendUnavailable saying how to get them."""
    try:
        import torch
        import torch.distributed as dist
    except ImportError as exc:
        raise BackendUnavailable(f"the torch backend needs PyTorch, which cannot be imported ({exc}); "
                                 f"install it with {INSTALL_HINT}") from None
    if not dist.is_available():
        raise BackendUnavailable(f"this PyTorch ({torch.__version__}) was built without torch.distributed; "
                                 f"install a standard build with {INSTALL_HINT}")
    return torch, dist


def process_group_backend(torch=None) -> str:
    """gloo or nccl: what this process would use (PYBENCH_TORCH_BACKEND overrides)."""
    forced = os.environ.get("PYBENCH_TORCH_BACKEND", "").strip().lower()
    if forced:
        if forced not in ("gloo", "nccl"):
            raise UsageError(f"PYBENCH_TORCH_BACKEND={forced!r}: use gloo or nccl")
        return forced
    if torch is None:
        torch, _ = import_torch()
    return "nccl" if torch.cuda.is_available() else "gloo"


def check_config(cfg) -> None:
    """Raise a one-line error for a benchmark this backend cannot run (call before ranks start)."""
    if cfg.is_p2p:
        raise UsageError("the torch backend runs collectives only; for point-to-point use `p2p --backend mpi`, "
                         "or `sendrecv --backend torch` (an isend/irecv ring)")
    if cfg.dtype not in _DTYPES:
        raise UsageError(f"the torch backend does not know dtype {cfg.dtype!r}; known: {', '.join(_DTYPES)}")


def hostname() -> str:
    return os.environ.get("PYBENCH_HOSTNAME") or socket.gethostname()


def started_by_torchrun(environ=None) -> bool:
    env = os.environ if environ is None else environ
    return all(v in env for v in _TORCHRUN_VARS)


class TorchBackend:
    name = "torch"

    def __init__(self) -> None:
        self.torch, self.dist = import_torch()
        self.pg_backend = process_group_backend(self.torch)
        self.device = None
        self.info: dict[str, Any] = {}
        self._mpi = None  # pybench's core when MPI carried the rendezvous
        self._ctrl = None  # a gloo group for control traffic (agreement, sample reduction)
        self._finished = False
        self.watchdog = _Watchdog(self)

    # -- start -------------------------------------------------------------------------
    def start(self) -> dict[str, Any]:
        dist = self.dist
        ifname = os.environ.get("PYBENCH_GLOO_IFNAME") or os.environ.get("GLOO_SOCKET_IFNAME")
        if started_by_torchrun():
            rank, world = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
            local_rank = int(os.environ.get("LOCAL_RANK", "0"))
            if not ifname and os.environ.get("LOCAL_WORLD_SIZE") == os.environ["WORLD_SIZE"] \
                    and os.environ["MASTER_ADDR"] in ("localhost", "127.0.0.1"):
                ifname = "lo"  # one host: loopback is the link being measured
            if ifname:
                os.environ["GLOO_SOCKET_IFNAME"] = ifname
            self._set_device(local_rank)
            dist.init_process_group(self.pg_backend, init_method="env://", rank=rank, world_size=world,
                                    **self._device_kw())
        else:
            store, rank, world, local_rank, hosts = self._mpi_rendezvous()
            if not ifname and len(set(hosts)) == 1 and not os.environ.get("PYBENCH_MASTER_ADDR"):
                ifname = "lo"
            if ifname:
                os.environ["GLOO_SOCKET_IFNAME"] = ifname
            self._set_device(local_rank)
            dist.init_process_group(self.pg_backend, store=store, rank=rank, world_size=world,
                                    **self._device_kw())
        atexit.register(self.finish)
        self._ctrl = dist.new_group(backend="gloo") if self.pg_backend != "gloo" else None
        hosts: list = [None] * world
        dist.all_gather_object(hosts, hostname(), group=self._ctrl)
        me = hosts[rank]
        self.info = {"rank": rank, "world_size": world, "local_rank": local_rank,
                     "local_size": sum(1 for h in hosts if h == me), "host": me, "hosts": list(hosts)}
        return dict(self.info)

    def _mpi_rendezvous(self):
        from pybench import _native
        c = _native.core()
        c.mpi_init()
        self._mpi = c
        info = dict(c.rank_info())
        rank, world = int(info["rank"]), int(info["world_size"])
        hosts = list(info["hosts"])
        master = os.environ.get("PYBENCH_MASTER_ADDR")
        if not master:
            master = "127.0.0.1" if len(set(hosts)) == 1 else hosts[0]
        store = None
        port = 0
        if rank == 0:
            # port 0: the OS picks a free port for the store, no race between probing and binding.
            store = self.dist.TCPStore(master, 0, world, is_master=True,
                                       wait_for_workers=False)
            port = int(store.port)
        port = int(c.allreduce_max_ints([port])[0])
        if rank != 0:
            store = self.dist.TCPStore(master, port, world, is_master=False)
        local_rank = int(os.environ.get("OMPI_COMM_WORLD_LOCAL_RANK", info.get("local_rank", 0)))
        return store, rank, world, local_rank, hosts

    def _set_device(self, local_rank: int) -> None:
        if self.pg_backend == "nccl":
            n = self.torch.cuda.device_count()
            self.device = self.torch.device("cuda", local_rank % max(n, 1))
            self.torch.cuda.set_device(self.device)
        else:
            self.device = self.torch.device("cpu")

    def _device_kw(self) -> dict:
        return {"device_id": self.device} if self.pg_backend == "nccl" else {}

    def watch(self, timeout_s: float, on_timeout) -> None:
        """Abort this rank when one operation makes no progress for ``timeout_s`` (<= 0: off);
        ``on_timeout(message)`` runs first (rank 0 saves what was measured)."""
        self.watchdog.configure(timeout_s, on_timeout)

    # -- agreement -------------------------------------------------------------------
    def agree_max(self, values: list[int]) -> list[int]:
        if not values:
            return []
        t = self.torch.tensor([int(v) for v in values], dtype=self.torch.int64, device=self._ctrl_device())
        self.dist.all_reduce(t, op=self.dist.ReduceOp.MAX, group=self._ctrl)
        return [int(v) for v in t.tolist()]

    def _ctrl_device(self):
        return self.torch.device("cpu") if self._ctrl is not None or self.device is None else self.device

    def barrier(self) -> None:
        with self.watchdog.armed("barrier"):
            if self.pg_backend == "nccl":
                self.dist.barrier(device_ids=[self.device.index])
            else:
                self.dist.barrier()

    # -- benches ---------------------------------------------------------------------
    def make_bench(self, cfg, size_bytes: int):
        check_config(cfg)
        return TorchCollectiveBench(self, cfg.benchmark, cfg.dtype, cfg.op, size_bytes, cfg.root)

    def describe_buffers(self, cfg) -> str:
        where = "CUDA device memory" if self.pg_backend == "nccl" else "host memory"
        clock = "CUDA events" if self.pg_backend == "nccl" else "time.perf_counter"
        return (f"torch.empty tensors in {where} (torch's allocator), every element written before timing; "
                f"all-reduce and broadcast in place; {self.library_version()}; clock {clock}")

    def library_version(self) -> str:
        v = f"torch {self.torch.__version__}, process group {self.pg_backend}"
        if self.pg_backend == "nccl":
            try:
                v += " " + ".".join(str(x) for x in self.torch.cuda.nccl.version())
            except Exception:
                pass
        return v

    def run_metadata(self) -> dict[str, Any]:
        """What every torch result records (the runner puts it under environment.backend)."""
        return {"torch": self.torch.__version__, "process_group": self.pg_backend,
                "rendezvous": "mpi (TCPStore port over MPI)" if self._mpi is not None else "env:// (torchrun)",
                "gloo_socket_ifname": os.environ.get("GLOO_SOCKET_IFNAME"),
                "device": str(self.device), "torch_threads": self.torch.get_num_threads()}

    # -- stop ------------------------------------------------------------------------
    def abort(self, code: int) -> None:
        sys.stdout.flush()
        sys.stderr.flush()
        if self._mpi is not None:
            self._mpi.mpi_abort(code)  # kills every rank of the MPI job
        # torchrun (or a lone process): the other ranks may sit inside a collective, so a
        # group teardown could hang; exit now and let the launcher stop the rest.
        os._exit(code)

    def finish(self) -> None:
        if self._finished:
            return
        self._finished = True
        try:
            if self.dist.is_initialized():
                self.dist.destroy_process_group()
        except Exception:
            pass
        # Collect now, while Python still runs: after torch.profiler, cycles keep the gloo process
        # group alive until interpreter shutdown, where its worker thread, needing the GIL, is made
        # to exit through C++ frames and the rank aborts ("terminate called without an active
        # exception"; 6 of 24 torchrun runs of a profiled all-reduce here, 0 of 24 with this).
        gc.collect()
        if self._mpi is not None:
            self._mpi.mpi_finalize()


class _Watchdog:
    """A daemon thread that ends this rank when one armed operation overruns its deadline.

    torch releases the GIL inside collectives, so the thread runs while the main
    thread waits in gloo/nccl. Arming is two attribute writes per operation.
    """

    def __init__(self, backend: TorchBackend):
        self.b = backend
        self.timeout_s = 0.0
        self.on_timeout = None
        self.deadline = 0.0  # 0: not armed
        self.what = ""
        self._thread: threading.Thread | None = None

    @property
    def enabled(self) -> bool:
        return self.timeout_s > 0

    def configure(self, timeout_s: float, on_timeout) -> None:
        self.timeout_s, self.on_timeout = float(timeout_s or 0), on_timeout
        if self.enabled and self._thread is None:
            self._thread = threading.Thread(target=self._loop, name="pybench-torch-watchdog", daemon=True)
            self._thread.start()

    def arm(self, what: str) -> None:
        if self.timeout_s > 0:
            self.what = what
            self.deadline = time.monotonic() + self.timeout_s

    def disarm(self) -> None:
        self.deadline = 0.0

    def armed(self, what: str):
        dog = self

        class _Guard:
            def __enter__(self):
                dog.arm(what)

            def __exit__(self, *exc):
                dog.disarm()
                return False
        return _Guard()

    def _loop(self) -> None:
        while True:
            time.sleep(min(0.5, max(self.timeout_s / 10, 0.05)))
            d = self.deadline
            if d and time.monotonic() > d and self.deadline == d:
                info = self.b.info
                msg = (f"rank {info.get('rank', '?')} ({info.get('host', '?')}): {self.what} made no progress for "
                       f"{self.timeout_s:g} s; a rank stopped answering or the link is down")
                print(f"pybench: error: {msg}", file=sys.stderr, flush=True)
                if self.on_timeout is not None:
                    try:
                        self.on_timeout(msg)
                    except Exception:
                        pass
                self.b.abort(1)


def pattern_period(dtype: str, op: str, world: int, reduces: bool) -> int:
    """M of the check pattern (as csrc/common/pattern.cpp)."""
    m = 13
    if reduces and op == "sum":
        m = int(min(m, _EXACT_INT_LIMIT[dtype] / max(world, 1)))
    return max(m, 1)


class TorchCollectiveBench:
    """warmup / check / measure for one collective at one size (the NativeBench protocol)."""

    def __init__(self, backend: TorchBackend, collective: str, dtype: str, op: str, size_bytes: int, root: int = 0):
        from pybench.collectives import DTYPES, get_collective
        torch, dist = backend.torch, backend.dist
        self.b, self.torch, self.dist = backend, torch, dist
        self.coll = get_collective(collective)
        self.name, self.dtype_name, self.op_name, self.root = collective, dtype, op, root
        self.rank, self.world = backend.info["rank"], backend.info["world_size"]
        self.tdtype = getattr(torch, dtype)
        elem = DTYPES[dtype]
        if size_bytes % elem or size_bytes <= 0:
            raise UsageError(f"{collective}: size {size_bytes} B is not a positive multiple of the {dtype} "
                             f"element size ({elem} B)")
        self.count = size_bytes // elem
        self.op = {"sum": dist.ReduceOp.SUM, "max": dist.ReduceOp.MAX, "min": dist.ReduceOp.MIN}[op]
        self.period = pattern_period(dtype, op, self.world, self.coll.reduces)
        dev = backend.device
        send_n = self.count // self.world if collective == "allgather" else self.count
        recv_n = self.count // self.world if collective == "reducescatter" else self.count
        self.send = torch.empty(send_n, dtype=self.tdtype, device=dev)
        self.recv = torch.empty(recv_n, dtype=self.tdtype, device=dev)
        self._fill_send()
        self.recv.copy_(self._pattern(self.rank, 0, recv_n) if collective in ("allreduce", "broadcast")
                        else self.recv.new_zeros(recv_n))
        self._run = self._runner()
        self.what = f"{collective} of {size_bytes} B ({dtype})"

    # -- data ------------------------------------------------------------------------
    def _values(self, rank: int, first: int, n: int):
        j = self.torch.arange(first, first + n, dtype=self.torch.int64)
        return 1 + (3 * rank + j) % self.period  # int64 on the CPU

    def _pattern(self, rank: int, first: int, n: int):
        return self._values(rank, first, n).to(self.tdtype).to(self.b.device)

    def _reduced(self, first: int, n: int):
        acc = self._values(0, first, n)
        for r in range(1, self.world):
            v = self._values(r, first, n)
            acc = acc + v if self.op_name == "sum" else (self.torch.maximum(acc, v) if self.op_name == "max"
                                                         else self.torch.minimum(acc, v))
        return acc.to(self.tdtype).to(self.b.device)

    def _fill_send(self) -> None:
        self.send.copy_(self._pattern(self.rank, 0, self.send.numel()))

    def _expected(self):
        """(out_offset, expected values) blocks, as csrc/collectives/*.cpp."""
        n, w, r = self.count, self.world, self.rank
        b = n // w
        if self.name == "allreduce":
            return [(0, self._reduced(0, n))]
        if self.name == "allgather":
            return [(s * b, self._pattern(s, 0, b)) for s in range(w)]
        if self.name == "reducescatter":
            return [(0, self._reduced(r * b, b))]
        if self.name == "broadcast":
            return [(0, self._pattern(self.root, 0, n))]
        if self.name == "alltoall":
            return [(s * b, self._pattern(s, r * b, b)) for s in range(w)]
        if self.name == "sendrecv":
            return [(0, self._pattern((r - 1) % w, 0, n))]
        raise UsageError(f"the torch backend has no {self.name}")

    # -- operations --------------------------------------------------------------------
    def _runner(self):
        dist, send, recv = self.dist, self.send, self.recv
        name, w, r = self.name, self.world, self.rank
        if name == "allreduce":
            return lambda: dist.all_reduce(recv, op=self.op)
        if name == "allgather":
            # torch >= 2.13 names it all_gather_single (all_gather_into_tensor before).
            fn = getattr(dist, "all_gather_single", None) or getattr(dist, "all_gather_into_tensor", None)
            if fn is not None:
                return lambda: fn(recv, send)
            parts = list(recv.chunk(w))
            return lambda: dist.all_gather(parts, send)
        if name == "reducescatter":
            fn = getattr(dist, "reduce_scatter_single", None) or getattr(dist, "reduce_scatter_tensor", None)
            if fn is None:
                raise BackendUnavailable(f"torch {self.torch.__version__} lacks reduce_scatter_tensor; "
                                         "use a newer torch or --backend mpi")
            return lambda: fn(recv, send, op=self.op)
        if name == "broadcast":
            buf = send if r == self.root else recv
            return lambda: dist.broadcast(buf, src=self.root)
        if name == "alltoall":
            return lambda: dist.all_to_all_single(recv, send)
        if name == "sendrecv":
            nxt, prv = (r + 1) % w, (r - 1) % w
            if self.b.pg_backend == "nccl":
                def ring():
                    for req in dist.batch_isend_irecv([dist.P2POp(dist.isend, send, nxt),
                                                       dist.P2POp(dist.irecv, recv, prv)]):
                        req.wait()
                return ring

            def ring():
                reqs = [dist.isend(send, nxt, tag=17), dist.irecv(recv, prv, tag=17)]
                for req in reqs:
                    req.wait()
            return ring
        raise UsageError(f"the torch backend has no {name}")

    def _op(self) -> None:
        dog = self.b.watchdog
        dog.arm(self.what)
        try:
            self._run()
            if self.b.pg_backend == "nccl" and dog.enabled:
                self.torch.cuda.synchronize(self.b.device)  # progress means done, not queued
        except RuntimeError as exc:
            first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
            if "not supported" in first.lower() or "unsupported" in first.lower():
                raise BackendUnavailable(f"{self.name} ({self.dtype_name}, {self.op_name}) is not supported by "
                                         f"torch.distributed {self.b.pg_backend} in torch {self.torch.__version__}: "
                                         f"{first}; use --backend mpi") from None
            raise
        finally:
            dog.disarm()

    def _sync(self) -> None:
        if self.b.pg_backend == "nccl":
            self.torch.cuda.synchronize(self.b.device)

    # -- the NativeBench protocol ---------------------------------------------------------
    def warmup(self, n: int) -> None:
        for _ in range(n):
            self._op()
        self._sync()
        self.b.barrier()

    def check(self, iters: int) -> int:
        inject = os.environ.get("PYBENCH_INJECT_WRONG")
        corrupt = inject is not None and inject.strip().lstrip("-").isdigit() and int(inject) == self.rank
        expected = self._expected()
        wrong = 0
        for _ in range(iters):
            self.recv.view(self.torch.uint8).fill_(0xFF)  # NaN / -1: never a pattern value
            self._fill_send()
            if self.name == "allreduce":
                self.recv.copy_(self.send)  # in place: the input goes where the result lands
            self._op()
            self._sync()
            if corrupt and self.recv.numel() and not (self.name == "broadcast" and self.rank == self.root):
                self.recv.view(self.torch.uint8)[0] ^= 1
            if self.name == "broadcast" and self.rank == self.root:
                continue  # the root's data never leaves its buffer (as the native check)
            for off, exp in expected:
                got = self.recv[off:off + exp.numel()]
                wrong += int((got != exp).sum().item())
        total = self.torch.tensor([wrong], dtype=self.torch.int64, device=self.b._ctrl_device())
        self.dist.all_reduce(total, op=self.dist.ReduceOp.SUM, group=self.b._ctrl)
        # leave the timing buffers as the run found them: a fresh input pattern
        self._fill_send()
        return int(total.item())

    def measure(self, n_samples: int, ops_per_sample: int) -> tuple[list[float], float]:
        if n_samples < 1 or ops_per_sample < 1:
            raise UsageError("samples and operations per sample must be positive")
        torch = self.torch
        gpu = self.b.pg_backend == "nccl"
        per_op = [0.0] * n_samples
        wall0 = time.perf_counter()
        for s in range(n_samples):
            self.b.barrier()
            if gpu:
                start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
                start.record()
                for _ in range(ops_per_sample):
                    self._op()
                end.record()
                end.synchronize()
                per_op[s] = start.elapsed_time(end) / 1e3 / ops_per_sample
            else:
                t0 = time.perf_counter()
                for _ in range(ops_per_sample):
                    self._op()
                per_op[s] = (time.perf_counter() - t0) / ops_per_sample
        wall = time.perf_counter() - wall0
        t = torch.tensor(per_op + [wall], dtype=torch.float64, device=self.b._ctrl_device())
        self.dist.all_reduce(t, op=self.dist.ReduceOp.MAX, group=self.b._ctrl)
        vals = t.tolist()
        return [float(v) for v in vals[:-1]], float(vals[-1])
