"""The step runner: one batch size of a DDP model measured on every rank.

Synchronised and no_sync steps run interleaved (sync, no_sync, sync, ...) under
torch.profiler, so that a shared machine's drift hits both alike; the trace reads the
synchronised ones. Then DDP's buckets are all-reduced alone (comm, and the host cores it
burns), DDP's bucket copies are timed, and every figure becomes the slowest rank's.
"""

from __future__ import annotations

import contextlib
import math
import statistics
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from pybench.planning.overlap import OverlapProfile
from pybench.profile.overlap_profile import measured_overlap_profile
from pybench.profile.probes import GradReadiness, HostCpuMeter, time_bucket_copies
from pybench.profile.result import ProfileRow
from pybench.profile.trace import StepTrace, median_step, trace_steps

__all__ = ["BatchMeasurement", "StepRunner", "bucket_sizes", "time_buckets"]


def _median(xs: list[float]) -> float:
    return float(statistics.median(xs)) if xs else float("nan")


def bucket_sizes(ddp: Any, grad_bytes: int) -> list[int]:
    """DDP's bucket sizes in bytes, in reduction order, as its reducer rebuilt them (else from the cap)."""
    try:
        d = ddp._get_ddp_logging_data()
        text = d.get("rebuilt_bucket_sizes") or d.get("bucket_sizes") or ""
        sizes = [int(x) for x in str(text).replace(",", " ").split()]
        if sizes and sum(sizes) > 0:
            return sizes
    except Exception:  # a private API: fall back to the cap
        pass
    cap = int(getattr(ddp, "bucket_bytes_cap", 25 * 2**20))
    n = max(1, math.ceil(grad_bytes / cap))
    return [cap] * (n - 1) + [grad_bytes - cap * (n - 1)]


def time_buckets(bucket_bytes: list[int], repeats: int, meter: HostCpuMeter | None = None) -> float:
    """Median seconds of DDP's buckets all-reduced alone, issued asynchronously in order as DDP does.

    ``meter`` measures the host's busy cores over each timed repeat. The slowest rank's times.
    """
    import torch
    import torch.distributed as dist
    bufs = [torch.zeros(max(1, b // 4), dtype=torch.float32) for b in bucket_bytes]
    times = []
    for r in range(repeats + 1):
        dist.barrier()
        with (meter if meter is not None and r else contextlib.nullcontext()):
            t0 = time.perf_counter()
            works = [dist.all_reduce(b, async_op=True) for b in bufs]
            for w in works:
                w.wait()
            elapsed = time.perf_counter() - t0
        if r:
            times.append(elapsed)
    x = torch.tensor(times, dtype=torch.float64)
    dist.all_reduce(x, op=dist.ReduceOp.MAX)
    return _median(x.tolist())


@dataclass
class BatchMeasurement:
    """What one batch size measured: its row (prediction not yet filled) and the overlap profile."""

    row: ProfileRow
    overlap: OverlapProfile
    comm_cores: float | None


@dataclass
class _Steps:
    sync_s: list[float]
    nosync_s: list[float]
    hooks: list[tuple[Any, float]]
    traces: list[StepTrace]


@dataclass
class StepRunner:
    """Measures a DDP model at one batch size after another (call :meth:`measure` on every rank).

    ``trace_sink(prof, batch)``, when given, receives each batch's finished torch.profiler
    session (to export its trace).
    """

    ddp: Any
    model: Any
    step_fn: Callable[[Any, Any], Any]
    readiness: GradReadiness
    grad_bytes: int
    steps: int
    warmup: int
    on_cpu: bool
    threads_on_host: int
    trace_sink: Callable[[Any, int], None] | None = None

    def measure(self, batch_size: int, batch: Any) -> BatchMeasurement:
        """Warm up, run the interleaved profiled steps, then comm alone and the probes; max over ranks."""
        import torch.distributed as dist
        for _ in range(max(self.warmup, 2)):  # DDP rebuilds its buckets after the first step
            self.step_fn(self.ddp, batch)
        steps = self._interleaved(batch, batch_size)
        buckets = bucket_sizes(self.ddp, self.grad_bytes)  # as rebuilt by now, in the order backward readies them
        self.step_fn(self.ddp, batch)  # one synchronised step: no_sync left gradients to be synchronised
        meter = HostCpuMeter()
        meter.baseline(dist.barrier)
        comm_alone = time_buckets(buckets, self.steps, meter)
        device = next(self.model.parameters()).device
        copies = time_bucket_copies(self.grad_bytes, dist.get_world_size(), device,
                                    bool(getattr(self.ddp, "gradient_as_bucket_view", False)), barrier=dist.barrier)
        ovl, comm_cores = measured_overlap_profile(steps.hooks, buckets, meter.cores, self.on_cpu,
                                                   self.threads_on_host, copies)
        step_s, compute_s, exposed_s = self._slowest_steps(steps)
        t = _slowest_trace(steps.traces)
        row = ProfileRow(batch=batch_size, steps=self.steps, buckets=len(buckets), bucket_bytes=buckets,
                         grad_bytes=self.grad_bytes, compute_s=compute_s, step_s=step_s, exposed_s=exposed_s,
                         comm_s=comm_alone, trace_step_s=t.step_s, trace_compute_s=t.compute_s,
                         trace_comm_s=t.comm_s, trace_exposed_s=t.exposed_s, trace_overlap_s=t.overlap_s,
                         trace_idle_s=t.idle_s, ccr=comm_alone / (comm_alone + compute_s),
                         exposed_fraction=exposed_s / step_s)
        return BatchMeasurement(row, ovl, comm_cores)

    def _interleaved(self, batch: Any, batch_size: int) -> _Steps:
        import torch.distributed as dist
        from torch.profiler import ProfilerActivity, profile, record_function
        out = _Steps([], [], [], [])
        with profile(activities=[ProfilerActivity.CPU]) as prof:
            for i in range(self.steps):
                dist.barrier()
                t0 = time.perf_counter()
                with record_function(f"pybench.step{i}"):
                    self.step_fn(self.ddp, batch)
                out.sync_s.append(time.perf_counter() - t0)
                dist.barrier()
                self.readiness.arm()
                t0 = time.perf_counter()
                with record_function(f"pybench.nosync{i}"), self.ddp.no_sync():
                    self.step_fn(self.ddp, batch)
                out.nosync_s.append(time.perf_counter() - t0)
                out.hooks.append((self.readiness.take(), out.nosync_s[-1]))
        out.traces = trace_steps(prof.events())
        if self.trace_sink is not None:
            self.trace_sink(prof, batch_size)
        return out

    def _slowest_steps(self, steps: _Steps) -> tuple[float, float, float]:
        """(step, compute, exposed): each step's time is the slowest rank's (the synchronous cost),
        identical on every rank; exposed = median of the paired differences (sync i - no_sync i)."""
        import torch
        import torch.distributed as dist
        x = torch.tensor(steps.sync_s + steps.nosync_s, dtype=torch.float64)
        dist.all_reduce(x, op=dist.ReduceOp.MAX)
        xs = x.tolist()
        sync_max, nosync_max = xs[:self.steps], xs[self.steps:]
        exposed = max(0.0, _median([a - b for a, b in zip(sync_max, nosync_max)]))
        return _median(sync_max), _median(nosync_max), exposed


def _slowest_trace(traces: list[StepTrace]) -> StepTrace:
    """Each rank's median traced step (whole, so its parts still add up), then the slowest rank's."""
    import torch
    import torch.distributed as dist
    mid = median_step(traces)
    mine = mid.as_list() if mid is not None else [0.0] * 6
    gathered = [torch.zeros(6, dtype=torch.float64) for _ in range(dist.get_world_size())]
    dist.all_gather(gathered, torch.tensor(mine, dtype=torch.float64))
    return StepTrace(*max((g.tolist() for g in gathered), key=lambda v: v[0]))
