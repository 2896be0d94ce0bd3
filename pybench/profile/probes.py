"""Measure the :class:`pybench.planning.overlap.OverlapProfile` of a real training step.

Two probes, both taken from compute-only or communication-only phases, so the
prediction never reads the synchronised step it is compared with:

- :class:`GradReadiness`: hooks that time, in steps run without gradient
  synchronisation, when backward starts (the gradient of the model's output)
  and when each parameter's gradient is accumulated. Bucket k is ready when the
  gradients before and in it (in readiness order, which is how DDP rebuilt its
  buckets) are all done.
- :func:`time_bucket_copies`: DDP's copies of the gradients into its buckets
  (and their scaling by 1/world) and of the reduced buckets back, timed as the
  same passes over the same bytes on every rank at once.
- :class:`HostCpuMeter`: the cores the whole host is busy for (/proc/stat:
  user, system, irq and softirq of every process and the kernel, so gloo's
  threads, TCP and the tbf shaper all count) while buckets are all-reduced
  alone, minus the same host idle. :func:`pybench.planning.overlap.compute_slowdown`
  turns that into the compute throughput lost while a bucket is in flight.
"""

from __future__ import annotations

import os
import statistics
import time
from collections.abc import Sequence
from typing import Any

__all__ = ["GradReadiness", "HostCpuMeter", "bucket_ready_fractions", "cores_available", "machine_id",
           "time_bucket_copies"]


def bucket_ready_fractions(bwd_start: float, ready: Sequence[tuple[float, int]],
                           buckets: Sequence[int]) -> tuple[list[float], float] | None:
    """(fraction of backward at which each bucket is ready, backward seconds) from one step's hooks.

    ``ready``: (time, bytes) of each gradient; ``buckets``: bucket sizes in reduction order.
    None when the step recorded nothing usable.
    """
    if not ready or not buckets:
        return None
    events = sorted(ready)
    end = events[-1][0]
    span = end - bwd_start
    if span <= 0:
        return None
    got = float(sum(b for _, b in events))
    scale = got / float(sum(buckets))  # buckets may be in another unit (unused parameters, dtype)
    fractions, done, i, target = [], 0.0, 0, 0.0
    for size in buckets:
        target += size * scale
        while i < len(events) and done < target * (1 - 1e-9):
            done += events[i][1]
            i += 1
        t = events[i - 1][0] if i else bwd_start
        fractions.append(min(1.0, max(0.0, (t - bwd_start) / span)))
    return fractions, span


class GradReadiness:
    """Time backward's start and every gradient's accumulation while armed.

    ``model`` is the module before DDP wraps it (DDP calls it, so its forward
    hook still fires). Backward start is when the first gradient reaches any
    tensor of the model's output (a tensor, or tensors in tuples, lists and
    dicts); an output without such tensors, or a torch without gradient
    accumulation hooks (before 2.1), gives no start, and :meth:`take` returns None.
    """

    def __init__(self, model):
        self._armed = False
        self._start: float | None = None
        self._ready: list[tuple[float, int]] = []
        self._handles: list[Any] = []
        self.available = all(hasattr(p, "register_post_accumulate_grad_hook") for p in model.parameters())
        if not self.available:
            return
        for p in model.parameters():
            if p.requires_grad:
                nbytes = p.numel() * p.element_size()
                self._handles.append(p.register_post_accumulate_grad_hook(self._on_grad(nbytes)))
        self._handles.append(model.register_forward_hook(self._on_output))

    def _on_grad(self, nbytes: int):
        def hook(_param) -> None:
            if self._armed:
                self._ready.append((time.perf_counter(), nbytes))
        return hook

    def _on_output(self, _module, _inputs, output):
        if self._armed:
            for t in _tensors(output):
                if t.requires_grad:
                    t.register_hook(self._on_backward_start)

    def _on_backward_start(self, _grad):
        if self._start is None:
            self._start = time.perf_counter()

    def arm(self) -> None:
        self._armed, self._start, self._ready = True, None, []

    def take(self) -> tuple[float, list[tuple[float, int]]] | None:
        """(backward start, [(time, bytes)]) of the step since :meth:`arm`, or None."""
        self._armed = False
        if self._start is None or not self._ready:
            return None
        return self._start, list(self._ready)

    def close(self) -> None:
        for h in self._handles:
            h.remove()
        self._handles = []


def _tensors(obj, depth: int = 0):
    """The tensors in a module's output: a tensor, or nested in tuples, lists and dicts."""
    import torch
    if isinstance(obj, torch.Tensor):
        yield obj
    elif depth < 4 and isinstance(obj, (tuple, list)):
        for x in obj:
            yield from _tensors(x, depth + 1)
    elif depth < 4 and isinstance(obj, dict):
        for x in obj.values():
            yield from _tensors(x, depth + 1)


def _busy_seconds() -> float | None:
    """CPU seconds the host has been busy (all cores; user, nice, system, irq, softirq)."""
    try:
        with open("/proc/stat") as f:
            fields = f.readline().split()
    except OSError:
        return None
    if not fields or fields[0] != "cpu" or len(fields) < 8:
        return None
    user, nice, system, _idle, _iowait, irq, softirq = (int(x) for x in fields[1:8])
    return (user + nice + system + irq + softirq) / os.sysconf("SC_CLK_TCK")


class HostCpuMeter:
    """Cores the host is busy for during a phase, against the same host idle.

    Usage: ``m.baseline(barrier)`` once (every rank asleep for a moment), then
    ``with m: ...`` around the phase; ``m.cores`` is the extra cores the phase
    used (None where /proc/stat is unreadable).
    """

    def __init__(self, idle_s: float = 0.3):
        self.idle_s = idle_s
        self.idle_cores: float | None = None
        self.samples: list[float] = []

    def baseline(self, barrier=None) -> None:
        if barrier:
            barrier()
        b0, t0 = _busy_seconds(), time.perf_counter()
        time.sleep(self.idle_s)
        b1, t1 = _busy_seconds(), time.perf_counter()
        if barrier:
            barrier()
        self.idle_cores = None if b0 is None or b1 is None else (b1 - b0) / (t1 - t0)

    def __enter__(self):
        self._b0, self._t0 = _busy_seconds(), time.perf_counter()
        return self

    def __exit__(self, *exc):
        b1, t1 = _busy_seconds(), time.perf_counter()
        if self._b0 is not None and b1 is not None and t1 > self._t0:
            self.samples.append((b1 - self._b0) / (t1 - self._t0))
        return False

    @property
    def cores(self) -> float | None:
        if not self.samples:
            return None
        return max(0.0, statistics.median(self.samples) - (self.idle_cores or 0.0))


def cores_available() -> int:
    """The host's cores: the contention is host-wide (softirqs run anywhere), and an MPI
    launcher's binding narrows this rank's affinity to one core, not the host's capacity."""
    return os.cpu_count() or 1


def machine_id() -> str:
    """Which ranks share CPUs: the kernel's boot id (the same in every network namespace of a
    machine, where pybench's host names differ on purpose), else the host name."""
    try:
        with open("/proc/sys/kernel/random/boot_id") as f:
            return f.read().strip()
    except OSError:
        import socket
        return socket.gethostname()


COPY_SAMPLE_BYTES = 256 << 20


def time_bucket_copies(nbytes: int, world: int, device=None, as_view: bool = False, repeats: int = 3,
                       barrier=None) -> tuple[float, float]:
    """(copy in + scale, copy out) seconds for ``nbytes`` of float32 gradients, median of ``repeats``.

    With ``as_view`` (DDP's gradient_as_bucket_view) the gradients live in the
    buckets: only the scaling remains. Call on every rank at once (``barrier``
    aligns them): the passes share the memory bandwidth as they do in the step.
    Past ``COPY_SAMPLE_BYTES`` the passes are timed on that much and scaled (they
    stream memory, so time is linear in bytes), so a large model does not need
    two more copies of its gradients in memory.
    """
    import torch
    sample = min(nbytes, COPY_SAMPLE_BYTES)
    scale = nbytes / sample if sample > 0 else 1.0
    n = max(1, sample // 4)
    grads = torch.ones(n, dtype=torch.float32, device=device)
    bucket = torch.empty_like(grads)
    sync = torch.cuda.synchronize if grads.is_cuda else (lambda: None)
    ins, outs = [], []
    for r in range(repeats + 1):
        if barrier:
            barrier()
        sync()
        t0 = time.perf_counter()
        if not as_view:
            bucket.copy_(grads)
        bucket.div_(world)
        sync()
        t1 = time.perf_counter()
        if not as_view:
            grads.copy_(bucket)
        sync()
        t2 = time.perf_counter()
        if r:  # the first pass pays page faults
            ins.append(t1 - t0)
            outs.append(0.0 if as_view else t2 - t1)
    return statistics.median(ins) * scale, statistics.median(outs) * scale
