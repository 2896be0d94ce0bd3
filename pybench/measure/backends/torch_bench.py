"""One collective at one size through torch.distributed: warmup, the exact check, the timed samples.

The check pattern is the native harnesses' (csrc/common/pattern.cpp): rank r's input element j
is ``1 + (3r + j) mod M`` with M = 13, or smaller for sums so that every sum stays an exact
integer in the dtype; the output is pre-filled with 0xff bytes (NaN / -1: never a pattern
value), every element is compared exactly and the count of wrong elements is summed over ranks.

Every collective is measured both ways, as nccl-tests measures them (``in_place`` chooses):

- out of place: separate input and output tensors. torch.distributed's all-reduce works on one
  tensor only: its out-of-place block times ``all_reduce`` on the output tensor, into which the check
  copies the input before each checked operation (a copy in every timed operation would time another
  operation than NCCL's out-of-place all-reduce, and than the one-tensor all-reduce a training loop runs).
- in place: all-reduce on one tensor; all-gather with the input the rank's own block of the output
  (``output.narrow(0, rank * b, b)``, as NCCL and nccl-tests define it); reduce-scatter with the
  output the rank's own block of the input (``input.narrow(0, rank * b, b)``); broadcast with the
  root sending from its output tensor (nccl-tests' sendbuff == recvbuff). The check reads the
  result where the in-place form leaves it (the output view) and writes the input where it takes it.
- all-to-all and send/recv in place send from the tensor they receive into, as nccl-tests' do: what
  lands there depends on the order of the transfers (gloo's ``all_to_all_single(buf, buf)`` and an
  isend/irecv pair on one tensor give other elements on 2 and 3 ranks), so, as nccl-tests, they are
  timed and not checked (:data:`UNCHECKED_IN_PLACE`: the check returns -1).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from pybench.errors import BackendUnavailable, UsageError

__all__ = ["UNCHECKED_IN_PLACE", "TorchCollectiveBench", "pattern_period"]

#: In-place forms whose result no order of transfers defines: timed, not checked (the module docstring).
UNCHECKED_IN_PLACE = frozenset({"alltoall", "sendrecv"})

# Largest integer each dtype holds exactly (as csrc/common/dtypes.cpp).
_EXACT_INT_LIMIT = {"float32": 2.0**24, "float64": 2.0**53, "float16": 2048.0, "bfloat16": 256.0,
                    "int32": 2147483647.0}


def pattern_period(dtype: str, op: str, world: int, reduces: bool) -> int:
    """M of the check pattern (as csrc/common/pattern.cpp)."""
    m = 13
    if reduces and op == "sum":
        m = int(min(m, _EXACT_INT_LIMIT[dtype] / max(world, 1)))
    return max(m, 1)


class TorchCollectiveBench:
    """warmup / check / measure for one collective at one size (the NativeBench protocol).

    ``backend`` is the started :class:`pybench.measure.backends.torch.TorchBackend` (its torch modules,
    device, rank facts, options, watchdog, barrier and control group). ``in_place``: the collective's
    one-buffer form; ``send`` and ``recv`` are then views of one tensor.
    """

    def __init__(self, backend: Any, collective: str, dtype: str, op: str, size_bytes: int, root: int = 0,
                 in_place: bool = False):
        from pybench.collectives import DTYPES, get_collective
        torch, dist = backend.torch, backend.dist
        self.b, self.torch, self.dist = backend, torch, dist
        self.coll = get_collective(collective)
        self.name, self.dtype_name, self.op_name, self.root = collective, dtype, op, root
        self.in_place = in_place
        self.rank, self.world = backend.info["rank"], backend.info["world_size"]
        self.tdtype = getattr(torch, dtype)
        elem = DTYPES[dtype]
        if size_bytes % elem or size_bytes <= 0:
            raise UsageError(f"{collective}: size {size_bytes} B is not a positive multiple of the {dtype} "
                             f"element size ({elem} B)")
        self.count = size_bytes // elem
        self.op = {"sum": dist.ReduceOp.SUM, "max": dist.ReduceOp.MAX, "min": dist.ReduceOp.MIN}[op]
        self.period = pattern_period(dtype, op, self.world, self.coll.reduces)
        self.send, self.recv = self._buffers(backend.device)
        recv_n = self.recv.numel()
        self.recv.copy_(self._pattern(self.rank, 0, recv_n) if collective in ("allreduce", "broadcast")
                        else self.recv.new_zeros(recv_n))
        self._fill_send()  # after the output: in place, the input lies in it
        self._run = self._runner()
        self.what = f"{collective} of {size_bytes} B ({dtype}{', in place' if in_place else ''})"

    def _buffers(self, dev) -> tuple[Any, Any]:
        """(send, recv): two tensors, or in place two views of one (NCCL's in-place layouts)."""
        torch, n, name = self.torch, self.count, self.name
        b = n // self.world
        if not self.in_place:
            send_n = b if name == "allgather" else n
            recv_n = b if name == "reducescatter" else n
            return (torch.empty(send_n, dtype=self.tdtype, device=dev),
                    torch.empty(recv_n, dtype=self.tdtype, device=dev))
        one = torch.empty(n, dtype=self.tdtype, device=dev)
        if name == "allgather":  # the input is this rank's block of the output
            return one.narrow(0, self.rank * b, b), one
        if name == "reducescatter":  # the output is this rank's block of the input
            return one, one.narrow(0, self.rank * b, b)
        return one, one  # all-reduce; broadcast: the root sends from its output; all-to-all, send/recv

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
        if self.in_place and self.name == "broadcast" and self.rank != self.root:
            return  # its one tensor is the output only: the check's 0xff must stay until the data lands
        self.send.copy_(self._pattern(self.rank, 0, self.send.numel()))

    def _expected(self) -> list[tuple[int, Any]]:
        """(out_offset, expected values) blocks of ``recv``, as csrc/mpi/collectives/*.cpp; in place,
        ``recv`` is where the one-buffer form leaves its result, so the blocks are the same."""
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
        name, w = self.name, self.world
        if name == "allreduce":  # (out of place, the check copies the input into ``recv`` first)
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
                                         "use a newer torch or the mpi backend")
            return lambda: fn(recv, send, op=self.op)
        if name == "broadcast":
            buf = send if self.rank == self.root else recv  # in place both are the one tensor
            return lambda: dist.broadcast(buf, src=self.root)
        if name == "alltoall":  # (in place, send and recv are one tensor: timed, not checked)
            return lambda: dist.all_to_all_single(recv, send)
        if name == "sendrecv":
            return self._ring()
        raise UsageError(f"the torch backend has no {name}")

    def _ring(self):
        """send/recv: each rank sends to the next and receives from the previous."""
        dist, send, recv = self.dist, self.send, self.recv
        nxt, prv = (self.rank + 1) % self.world, (self.rank - 1) % self.world
        if self.b.pg_backend == "nccl":
            def batched():
                for req in dist.batch_isend_irecv([dist.P2POp(dist.isend, send, nxt),
                                                   dist.P2POp(dist.irecv, recv, prv)]):
                    req.wait()
            return batched

        def pair():
            reqs = [dist.isend(send, nxt, tag=17), dist.irecv(recv, prv, tag=17)]
            for req in reqs:
                req.wait()
        return pair

    def _op(self) -> None:
        # On the CPU (gloo) the operation completes here, under the watchdog. On the GPU (nccl) it is
        # only enqueued: the waits (_sync, a timed batch's end event) are what the watchdog guards, so
        # a timed batch is not serialised by a synchronise after every operation.
        dog = self.b.watchdog
        dog.arm(self.what)
        try:
            self._run()
        except RuntimeError as exc:
            first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
            if "not supported" in first.lower() or "unsupported" in first.lower():
                raise BackendUnavailable(f"{self.name} ({self.dtype_name}, {self.op_name}) is not supported by "
                                         f"torch.distributed {self.b.pg_backend} in torch {self.torch.__version__}: "
                                         f"{first}; use the mpi backend") from None
            raise
        finally:
            dog.disarm()

    def _sync(self) -> None:
        if self.b.pg_backend == "nccl":
            self._guarded_wait(lambda: self.torch.cuda.synchronize(self.b.device))

    def _guarded_wait(self, wait: Callable[[], object]) -> None:
        """Wait for the device under the watchdog: progress means done, not queued."""
        dog = self.b.watchdog
        dog.arm(self.what)
        try:
            wait()
        finally:
            dog.disarm()

    # -- the NativeBench protocol ---------------------------------------------------------
    def warmup(self, n: int) -> None:
        for _ in range(n):
            self._op()
        self._sync()
        self.b.barrier()

    def check(self, iters: int) -> int:
        """Wrong elements over ``iters`` checked operations, summed over ranks; -1 for a form not checked
        (:data:`UNCHECKED_IN_PLACE`, alike on every rank: none waits for the sum)."""
        if self.in_place and self.name in UNCHECKED_IN_PLACE:
            return -1
        corrupt = self.b.options.inject_wrong_rank == self.rank
        expected = self._expected()
        root_keeps = self.name == "broadcast" and self.rank == self.root  # its data never leaves its buffer
        wrong = 0
        for _ in range(iters):
            self.recv.view(self.torch.uint8).fill_(0xFF)  # NaN / -1: never a pattern value
            self._fill_send()  # in place this writes the input into the one tensor, over the 0xff
            if self.name == "allreduce" and not self.in_place:
                self.recv.copy_(self.send)  # all_reduce reduces its one tensor: the input goes there
            self._op()
            self._sync()
            if root_keeps:
                continue  # as the native check
            if corrupt and self.recv.numel():
                self.recv.view(self.torch.uint8)[0] ^= 1
            for off, exp in expected:
                got = self.recv[off:off + exp.numel()]
                wrong += int((got != exp).sum().item())
        total = self.torch.tensor([wrong], dtype=self.torch.int64, device=self.b.ctrl_device())
        self.dist.all_reduce(total, op=self.dist.ReduceOp.SUM, group=self.b.ctrl_group)
        # leave the timing buffers as the run found them: a fresh input pattern
        self._fill_send()
        return int(total.item())

    def measure(self, n_samples: int, ops_per_sample: int) -> tuple[list[float], float]:
        """Per-op seconds of ``n_samples`` batches of ``ops_per_sample`` operations, and the wall time;
        max-reduced over ranks, so every rank returns the same figures."""
        if n_samples < 1 or ops_per_sample < 1:
            raise UsageError("n_samples and ops_per_sample must be positive")
        torch = self.torch
        per_op = [0.0] * n_samples
        wall0 = time.perf_counter()
        for s in range(n_samples):
            self.b.barrier()
            per_op[s] = self._timed_batch(ops_per_sample) / ops_per_sample
        wall = time.perf_counter() - wall0
        t = torch.tensor(per_op + [wall], dtype=torch.float64, device=self.b.ctrl_device())
        self.dist.all_reduce(t, op=self.dist.ReduceOp.MAX, group=self.b.ctrl_group)
        vals = t.tolist()
        return [float(v) for v in vals[:-1]], float(vals[-1])

    def _timed_batch(self, ops: int) -> float:
        """Seconds of ``ops`` operations back to back: CUDA events on the GPU, perf_counter on the CPU."""
        if self.b.pg_backend == "nccl":
            cuda = self.torch.cuda
            start, end = cuda.Event(enable_timing=True), cuda.Event(enable_timing=True)
            start.record()
            for _ in range(ops):
                self._op()
            end.record()
            self._guarded_wait(end.synchronize)
            return start.elapsed_time(end) / 1e3
        t0 = time.perf_counter()
        for _ in range(ops):
            self._op()
        return time.perf_counter() - t0
