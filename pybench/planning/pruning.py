"""Which combinations the plan's search can leave unpriced: their best case, and the priced rows that beat it.

A combination's step takes at least its compute, bubble and wait for the slowest rank plus the
communication that never overlaps (tensor- and pipeline-parallel activations, ZeRO's parameter
all-gathers, each call as the models price it alone: sharing a node's NICs only slows a call). That bounds
its samples/s from above and its cost per sample from below (``Pace``). ``Frontier`` holds the priced
rows not comm-bound and says when the rules (:mod:`pybench.planning.choice`) can never choose a
combination; :mod:`pybench.planning.search` states the rule in full.
"""

from __future__ import annotations

import bisect
import heapq
import itertools
from dataclasses import dataclass
from typing import Any

from pybench.errors import UsageError
from pybench.planning.choice import COST_TOLERANCE, cost_per_sample, good, throughput
from pybench.planning.config import CcrConfig
from pybench.planning.model_set import ModelSet
from pybench.planning.step import StepEstimate
from pybench.planning.stragglers import straggler_factor
from pybench.planning.strategies import CommOp, Layout, MemoryFit, Workload, comm_ops, stage_share
from pybench.planning.transformer import training_flops

__all__ = ["Candidate", "Frontier", "Pace"]


@dataclass(eq=False)
class Candidate:
    """A combination that fits, with the bounds of its best case (no communication at all)."""

    strategy: str
    tp: int | None
    pp: int | None
    layout: Layout
    batch: int
    micro_batches: int
    must: bool
    samples_per_s_bound: float
    cost_bound: float
    pace: Pace | None = None
    fit: MemoryFit = MemoryFit.FITS
    refined: bool = False
    priced: bool = False

    def refine(self) -> None:
        """Count the communication that never overlaps in the bounds too (model calls: only where needed)."""
        if self.pace is not None and not self.refined:
            self.samples_per_s_bound, self.cost_bound = self.pace.bound(
                self.batch, self.micro_batches, self.fit, exposed=True)
        self.refined = True


class Frontier:
    """Priced rows not comm-bound, by cost, to tell when a combination can never be chosen (``beaten``)."""

    def __init__(self, loader: float | None, target: float | None, lowest: float = 0.0) -> None:
        # ``lowest``: no combination costs less per sample (the least of their bounds)
        self.loader, self.target, self.lowest = loader, target, lowest
        self.pending: list[tuple[float, int, int, float]] = []  # (cost x (1 + tolerance), id, nodes, samples/s)
        self.best: dict[int, float] = {}
        self.keys: list[int] = []
        self.prefix: list[float] = []
        self.dirty = False
        # The cheapest priced row meeting the target, not comm-bound: (cost, nodes, world).
        self.meeting: tuple[float, int, int] | None = None

    def add(self, row: StepEstimate) -> None:
        if not good(row):
            return
        cost, sps = cost_per_sample(row, self.loader), throughput(row, self.loader)
        heapq.heappush(self.pending, (cost * (1 + COST_TOLERANCE), id(row), row.layout.nodes, sps))
        if self.target is not None and sps >= self.target:
            mine = (cost, row.layout.nodes, row.world)
            self.meeting = mine if self.meeting is None else min(self.meeting, mine)

    def beaten(self, c: Candidate) -> bool:
        """True when the rules can never choose ``c`` (the module docstring; ``choice`` for the rules)."""
        if self.meeting is not None:
            # The target is met by a row its bands allow: only rows meeting it are weighed, the cheapest
            # wins and among costs within the tolerance fewer nodes, then fewer devices.
            if self.target is not None and c.samples_per_s_bound < self.target:
                return True  # only layouts meeting the target are weighed now
            cost, nodes, world = self.meeting
            if c.cost_bound > cost * (1 + COST_TOLERANCE) or (c.cost_bound >= cost and
                                                               (nodes, world) < (c.layout.nodes, c.layout.world)):
                return True
            # That row is within the tolerance of the cheapest there can be, so it is among the equals
            # whatever else is priced, and it wins against any layout on more nodes or devices.
            if cost <= self.lowest * (1 + COST_TOLERANCE) and (nodes, world) < (c.layout.nodes, c.layout.world):
                return True
        # A row on no more nodes that is faster than c can be and cheaper by more than the tolerance.
        while self.pending and self.pending[0][0] < c.cost_bound:
            _, _, nodes, sps = heapq.heappop(self.pending)
            if sps > self.best.get(nodes, 0.0):
                self.best[nodes] = sps
                self.dirty = True
        if self.dirty:
            self.keys = sorted(self.best)
            self.prefix = list(itertools.accumulate((self.best[k] for k in self.keys), max))
            self.dirty = False
        at = bisect.bisect_right(self.keys, c.layout.nodes)
        return at > 0 and self.prefix[at - 1] > c.samples_per_s_bound


class Pace:
    """A layout's best case at (b, m): compute, bubble, the wait for the slowest rank and the communication
    that never overlaps (tensor- and pipeline-parallel activations, ZeRO's parameter all-gathers), each call
    as the models price it alone (sharing a node's NICs only slows a call); the gradient exchange, which may
    hide under backward, counts nothing."""

    def __init__(self, cfg: CcrConfig, models: ModelSet, layout: Layout, loader: float | None,
                 calls: dict[tuple[Any, ...], float]) -> None:
        # seconds of compute per sequence on each device (6 x P x seq FLOPs, the largest stage's tp share)
        self.per_sequence = (training_flops(cfg.params, cfg.seq, False) * stage_share(layout, cfg.shape.layers)
                             / layout.tp / cfg.flops_per_s)
        slow = cfg.slow_node if layout.nodes > 1 else 1.0
        self.wait = straggler_factor(cfg.straggler_cv, layout.world) / slow - 1.0
        self.recompute, self.layout, self.loader = cfg.recompute, layout, loader
        self.cfg, self.models, self.calls = cfg, models, calls
        price = cfg.cost_per_hour(layout.world, layout.gpus_per_node)
        self.per_hour = price if price is not None else float(layout.world)
        self.exposes = layout.tp > 1 or layout.pp > 1 or layout.strategy in ("zero1", "zero2", "zero3")
        self.floors: dict[int, tuple[float, float]] = {}

    def _call(self, op: CommOp) -> float:
        key = (op.collective, op.size_bytes, op.group_size, op.link_class, op.nodes)
        if key not in self.calls:
            try:
                self.calls[key] = self.models.time(*key).time_s
            except UsageError:
                self.calls[key] = 0.0  # priced (or refused) when the row is; the bound stays a bound
        return self.calls[key]

    def _floor(self, b: int, m: int) -> float:
        """Seconds of never-overlapped communication per step: affine in m (per-micro-batch calls)."""
        if not self.exposes:
            return 0.0
        if b not in self.floors:
            cfg = self.cfg
            at = [sum(op.calls * self._call(op) for op in comm_ops(self.layout, Workload(
                      cfg.params, cfg.shape, cfg.seq, b, k, cfg.grad_bytes_per_value, cfg.param_bytes_per_value))
                      if not op.overlaps_backward) for k in (1, 2)]
            self.floors[b] = (at[0], at[1] - at[0])
        once, per_micro = self.floors[b]
        return once + per_micro * (m - 1)

    def bound(self, b: int, m: int, fit: MemoryFit, exposed: bool = False) -> tuple[float, float]:
        """Samples/s from above and cost per sample from below (as the choice measures them); ``exposed``:
        with the communication that never overlaps, else compute, bubble and wait alone."""
        recompute = self.recompute or fit is MemoryFit.WITH_CHECKPOINTING
        compute_s = self.per_sequence * b * m * (8 / 6 if recompute else 1.0)
        step_s = compute_s * (1 + (self.layout.pp - 1) / m + self.wait) + (self._floor(b, m) if exposed else 0.0)
        sps = b * m * self.layout.dp / step_s
        if self.loader is not None:
            sps = min(sps, self.loader * self.layout.dp)
        return sps, self.per_hour / (3600.0 * sps)
