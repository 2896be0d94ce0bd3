"""Decomposing a torch.profiler trace of one step into compute, exposed communication and idle.

Per rank: compute intervals (the ops of the training thread) and communication intervals
(the ``gloo:`` / ``nccl:`` ops on the process group's threads), each merged so that overlap
is counted once. Communication not under compute is exposed; step time under neither is
idle; compute + exposed + idle = step by construction.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

__all__ = ["COMM_PREFIXES", "StepTrace", "clip", "decompose", "intersection", "median_step", "merge", "total",
           "trace_steps"]

Interval = tuple[float, float]

COMM_PREFIXES = ("gloo:", "nccl:")
# Ops of the training thread that are not compute: wrappers, and the enqueue of collectives.
_NOT_COMPUTE = ("pybench.", "ProfilerStep", "c10d::", "gloo:", "nccl:", "record_param_comms")


def merge(intervals: Iterable[Interval]) -> list[Interval]:
    """Union of (start, end) intervals as a sorted list of disjoint intervals."""
    out: list[list[float]] = []
    for s, e in sorted((float(s), float(e)) for s, e in intervals if e > s):
        if out and s <= out[-1][1]:
            out[-1][1] = max(out[-1][1], e)
        else:
            out.append([s, e])
    return [(s, e) for s, e in out]


def total(intervals: Iterable[Interval]) -> float:
    """Length of the union of ``intervals``."""
    return sum(e - s for s, e in merge(intervals))


def clip(intervals: Iterable[Interval], lo: float, hi: float) -> list[Interval]:
    """The parts of ``intervals`` inside [lo, hi]."""
    return [(max(s, lo), min(e, hi)) for s, e in intervals if min(e, hi) > max(s, lo)]


def intersection(a: Iterable[Interval], b: Iterable[Interval]) -> float:
    """Length of (union a) intersected with (union b)."""
    ma, mb = merge(a), merge(b)
    i = j = 0
    acc = 0.0
    while i < len(ma) and j < len(mb):
        lo, hi = max(ma[i][0], mb[j][0]), min(ma[i][1], mb[j][1])
        if hi > lo:
            acc += hi - lo
        if ma[i][1] < mb[j][1]:
            i += 1
        else:
            j += 1
    return acc


@dataclass(frozen=True)
class StepTrace:
    """One step of one rank from the profiler, in seconds."""

    step_s: float
    compute_s: float
    comm_s: float
    exposed_s: float
    overlap_s: float
    idle_s: float

    def as_list(self) -> list[float]:
        return [self.step_s, self.compute_s, self.comm_s, self.exposed_s, self.overlap_s, self.idle_s]


def decompose(window: Interval, compute: Sequence[Interval], comm: Sequence[Interval]) -> StepTrace:
    """Split a step window into compute, exposed communication and idle (overlap counted once)."""
    lo, hi = window
    c = merge(clip(compute, lo, hi))
    m = merge(clip(comm, lo, hi))
    compute_s, comm_s = total(c), total(m)
    overlap = intersection(c, m)
    exposed = comm_s - overlap
    step = hi - lo
    return StepTrace(step, compute_s, comm_s, exposed, overlap, max(0.0, step - compute_s - exposed))


def trace_steps(events: Sequence[Any], step_prefix: str = "pybench.step") -> list[StepTrace]:
    """Decompose every ``step_prefix*`` window of a torch.profiler event list (this rank)."""
    steps = [e for e in events if e.name.startswith(step_prefix)]
    if not steps:
        return []
    main = steps[0].thread
    compute, comm = [], []
    for e in events:
        iv = (e.time_range.start / 1e6, e.time_range.end / 1e6)
        if e.name.startswith(COMM_PREFIXES):
            comm.append(iv)
        elif e.thread == main and not e.name.startswith(_NOT_COMPUTE):
            compute.append(iv)
    return [decompose((s.time_range.start / 1e6, s.time_range.end / 1e6), compute, comm)
            for s in sorted(steps, key=lambda e: e.time_range.start)]


def median_step(traces: Sequence[StepTrace]) -> StepTrace | None:
    """The step of median length (whole, so that its parts still add up); None without steps."""
    if not traces:
        return None
    return sorted(traces, key=lambda t: t.step_s)[(len(traces) - 1) // 2]
