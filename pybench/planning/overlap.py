"""How much of a bucketed gradient exchange hides under backward.

DDP (and FSDP, Horovod) all-reduce gradients in buckets: a bucket goes out when
backward has produced all its gradients and the previous bucket is done (one
stream / one process-group queue). The step pays what is still running after
backward ends.

Three things decide that, and :class:`OverlapProfile` carries them:

- **when each bucket is ready**, as a fraction of backward. Without a
  measurement, gradients are assumed produced uniformly (a bucket is ready when
  the bytes before and in it are done). Real backward is not uniform: the first
  layer computes no input gradient, attention and embeddings differ, and DDP's
  buckets are coarse, so one late bucket can decide the exposed time.
  ``pybench.profile.step`` measures it with gradient hooks.
- **how much of compute is backward** (2/3 for a plain 6PT step).
- **how much compute slows while communication runs** (``compute_slowdown``,
  the fraction of compute throughput lost). On GPUs with NCCL it is small; on
  CPU transports (gloo, TCP, a software shaper) communication burns the same
  cores backward needs, so overlapped compute stretches instead of hiding the
  transfer. ``pybench.profile.step`` measures the cores a transfer burns.
- **the framework's own copies**: DDP copies each gradient into its bucket and
  scales it during backward (``copy_in_s``), and copies the reduced bucket back
  into the gradients after the last bucket (``copy_out_s``), on the training
  thread; a step without synchronisation does neither.

The exposed time is then a small event simulation, exact for that model:
backward is ``backward_s + copy_in_s`` of work, advancing at rate 1 alone and
``1 - compute_slowdown`` while a bucket is in flight; exposed = max(end of the
last bucket, end of the slowed backward) + copy_out_s - backward_s, which is what
(synchronised step - step without synchronisation) measures.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from pybench.errors import UsageError

__all__ = ["OverlapProfile", "bucket_sizes", "bucketed_serial_s", "overlap_exposed_s", "uniform_ready_fractions",
           "compute_slowdown"]


@dataclass(frozen=True)
class OverlapProfile:
    """Measured (or assumed) behaviour of a backward pass that hides a bucketed exchange.

    Attributes
    ----------
    ready_fractions : tuple of float, optional
        For each bucket, in reduction order, the fraction of backward elapsed when
        its last gradient is ready (0..1, non-decreasing). None: uniform by bytes.
    backward_share : float, optional
        Backward's share of the compute time. None: 2/3 (3/4 with recomputation).
    compute_slowdown : float
        Fraction of compute throughput lost while a bucket is in flight (0..1).
    copy_in_s, copy_out_s : float
        Seconds the framework spends copying gradients into its buckets during
        backward, and the reduced buckets back after the last one.
    source : str
        Where the figures come from (printed with predictions).
    """

    ready_fractions: tuple[float, ...] | None = None
    backward_share: float | None = None
    compute_slowdown: float = 0.0
    copy_in_s: float = 0.0
    copy_out_s: float = 0.0
    source: str = "assumed: gradients ready uniformly, no contention, no copies"

    def __post_init__(self):
        if self.ready_fractions is not None:
            fr = tuple(float(f) for f in self.ready_fractions)
            if not fr or any(not (0.0 <= f <= 1.0) or math.isnan(f) for f in fr):
                raise UsageError(f"ready fractions must lie in 0..1, got {list(self.ready_fractions)}")
            object.__setattr__(self, "ready_fractions", fr)
        if self.backward_share is not None and not (0.0 < self.backward_share <= 1.0):
            raise UsageError(f"backward share must lie in (0, 1], got {self.backward_share}")
        if not (0.0 <= self.compute_slowdown <= 1.0):
            raise UsageError(f"compute slowdown must lie in 0..1, got {self.compute_slowdown}")
        if not (self.copy_in_s >= 0.0 and self.copy_out_s >= 0.0):
            raise UsageError(f"copy times must be 0 or more, got {self.copy_in_s} and {self.copy_out_s}")

    def to_dict(self) -> dict:
        return {"ready_fractions": list(self.ready_fractions) if self.ready_fractions else None,
                "backward_share": self.backward_share, "compute_slowdown": self.compute_slowdown,
                "copy_in_s": self.copy_in_s, "copy_out_s": self.copy_out_s, "source": self.source}


def bucket_sizes(grad_bytes: float, bucket_bytes: float, explicit: Sequence[float] | None = None) -> list[float]:
    """Bucket sizes in the order they are reduced.

    ``explicit``: the sizes a framework really used (DDP's reducer reports them);
    scaled to ``grad_bytes`` if they sum to something else (another dtype). Else
    equal buckets of ``bucket_bytes`` with the remainder last.
    """
    if explicit:
        total = float(sum(explicit))
        if total <= 0 or any(b <= 0 for b in explicit):
            raise UsageError(f"bucket sizes must be positive, got {list(explicit)}")
        return [b * grad_bytes / total for b in explicit]
    if bucket_bytes <= 0:
        raise UsageError(f"bucket_bytes must be positive, got {bucket_bytes:g}")
    n = max(1, math.ceil(grad_bytes / bucket_bytes))
    full = min(bucket_bytes, grad_bytes)
    return [full] * (n - 1) + [grad_bytes - full * (n - 1)]


def uniform_ready_fractions(sizes: Sequence[float]) -> list[float]:
    """Gradients produced uniformly through backward: bucket k is ready at its cumulative byte share."""
    total = float(sum(sizes))
    done, out = 0.0, []
    for s in sizes:
        done += s
        out.append(done / total if total > 0 else 1.0)
    return out


def compute_slowdown(comm_cores: float, compute_threads: int, cores: int) -> float:
    """Fraction of compute throughput lost while communication burns ``comm_cores`` cores.

    ``compute_threads`` threads of compute share ``cores`` cores with it; the
    kernel serves the (mostly sleeping, latency-bound) communication threads and
    softirqs first, so compute gets what is left: (cores - comm) / threads each,
    at most one core per thread. Idle cores absorb communication for free.
    """
    if compute_threads < 1 or cores < 1:
        raise UsageError(f"need at least one compute thread and one core, got {compute_threads} and {cores}")
    per_thread = min(1.0, max(0.0, cores - max(0.0, comm_cores)) / compute_threads)
    return 1.0 - per_thread


class _SlowedClock:
    """Wall time at which compute reaches a given amount of work, slowed to ``rate_busy`` inside busy intervals.

    Queries come with non-decreasing work and intervals are appended in time order, each starting no
    earlier than the last answer, so a cursor over the intervals makes all queries together linear in
    the number of buckets (a scan from the start each time made 5,600 buckets take seconds).
    """

    def __init__(self, rate_busy: float) -> None:
        self.rate_busy = rate_busy
        self.busy: list[tuple[float, float]] = []
        self._t = self._p = 0.0  # wall time and work done at the start of interval self._i
        self._i = 0

    def wall_at(self, progress: float) -> float:
        t, p = self._t, self._p
        for i in range(self._i, len(self.busy)):
            start, end = self.busy[i]
            if start > t:  # free stretch before this interval
                if p + (start - t) >= progress:
                    return t + (progress - p)
                p += start - t
                t = start
            if end > t:
                gain = (end - t) * self.rate_busy
                if self.rate_busy > 0 and p + gain >= progress:
                    return t + (progress - p) / self.rate_busy
                p += gain
                t = end
            self._t, self._p, self._i = t, p, i + 1  # this interval is behind every later query
        return t + (progress - p)


def overlap_exposed_s(grad_bytes: float, bucket_bytes: float, backward_s: float, bucket_time: Callable[[float], float],
                      explicit_buckets: Sequence[float] | None = None, ready_fractions: Sequence[float] | None = None,
                      slowdown: float = 0.0, copy_in_s: float = 0.0, copy_out_s: float = 0.0) -> float:
    """Exposed seconds of a gradient exchange run in buckets under backward.

    Parameters
    ----------
    grad_bytes : float
        Size of the whole exchange (one call's size argument).
    bucket_bytes : float
        Bucket size; the last bucket holds the remainder.
    backward_s : float
        Duration of the backward pass the buckets can hide under (without contention).
    bucket_time : callable
        size_bytes -> seconds for one bucket's collective.
    explicit_buckets : sequence of float, optional
        The real bucket sizes in reduction order (see :func:`bucket_sizes`).
    ready_fractions : sequence of float, optional
        Fraction of backward done when each bucket is ready; default uniform by bytes.
    slowdown : float
        Fraction of compute throughput lost while a bucket is in flight.
    copy_in_s, copy_out_s : float
        The framework's copies into the buckets (spread over backward) and out of them (after the last).
    """
    if ready_fractions is None and explicit_buckets is None and slowdown <= 0:
        return _equal_buckets_exposed_s(grad_bytes, bucket_bytes, backward_s + copy_in_s, bucket_time,
                                        copy_out_s, backward_s)
    sizes = bucket_sizes(grad_bytes, bucket_bytes, explicit_buckets)
    if ready_fractions is None:
        fractions = uniform_ready_fractions(sizes)
    else:
        if len(ready_fractions) != len(sizes):
            raise UsageError(f"{len(ready_fractions)} ready fractions for {len(sizes)} buckets")
        fractions = list(ready_fractions)
    rate_busy = 1.0 - slowdown
    work_s = backward_s + copy_in_s  # each gradient is copied into its bucket as it is produced
    times: dict[float, float] = {}  # equal buckets: ask the model once per distinct size
    # Without contention compute never slows, so wall time is work done (the plan's search asks this
    # for hundreds of layouts; the clock's interval walk is only needed when buckets slow compute).
    clock = _SlowedClock(rate_busy) if slowdown > 0 else None
    end_s = 0.0
    reached = 0.0
    for size, frac in zip(sizes, fractions):
        reached = max(reached, frac)  # a bucket cannot go before the one ahead of it
        ready_s = clock.wall_at(work_s * reached) if clock is not None else work_s * reached
        if size not in times:
            times[size] = bucket_time(size)
        start = max(end_s, ready_s)
        end_s = start + times[size]
        if clock is not None:
            clock.busy.append((start, end_s))
    backward_end = clock.wall_at(work_s) if clock is not None else work_s
    return max(0.0, max(end_s, backward_end) + copy_out_s - backward_s)


def _equal_buckets_exposed_s(grad_bytes: float, bucket_bytes: float, work_s: float,
                             bucket_time: Callable[[float], float], copy_out_s: float, backward_s: float) -> float:
    """:func:`overlap_exposed_s` for equal buckets ready uniformly, nothing slowing compute, in closed form.

    Full bucket k (of n - 1) is ready at k d (d = its share of the work) and the buckets go one after
    another, so the last full one ends at max over k of (k d + (n - k) t): at k = 1 or k = n - 1, the
    expression being linear in k. The remainder goes when backward ends or the stream frees, whichever
    is later. (The plan's search asks this for hundreds of layouts of thousands of buckets.)
    """
    sizes = bucket_sizes(grad_bytes, bucket_bytes)
    n, full, last = len(sizes), sizes[0], sizes[-1]
    end_s = 0.0
    if n > 1:
        t, d = bucket_time(full), work_s * full / grad_bytes
        end_s = max(d + (n - 1) * t, (n - 1) * d + t)
    end_s = max(end_s, work_s) + bucket_time(last)
    return max(0.0, max(end_s, work_s) + copy_out_s - backward_s)


def bucketed_serial_s(grad_bytes: float, bucket_bytes: float, bucket_time: Callable[[float], float],
                      explicit_buckets: Sequence[float] | None = None) -> float:
    """Seconds of a gradient exchange sent as buckets one after another, with no overlap.

    Each bucket pays the collective's latency again, so this exceeds one call of
    ``grad_bytes``; CCR and the exposed fraction must both use it, or the exposed
    share could come out larger than the serial one.
    """
    times: dict[float, float] = {}  # equal buckets: ask the model once per distinct size
    total = 0.0
    for size in bucket_sizes(grad_bytes, bucket_bytes, explicit_buckets):
        if size not in times:
            times[size] = bucket_time(size)
        total += times[size]
    return total
