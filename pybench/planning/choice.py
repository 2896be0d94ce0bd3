"""The plan's choice among the layouts the search priced: the decision rules as code (issue 25).

- A layout *meets* a throughput target when its samples/s, capped by the data loader of each
  replica, reaches it; it *fits* the need for memory when it fits at all (checkpointing included).
- Among the layouts that meet the need without being comm-bound (by their own bands), the one
  with the smallest cost per sample wins: price per hour (devices or whole nodes, as the user
  bills them; devices when no price is given) over samples per hour. Costs within
  ``COST_TOLERANCE`` of the cheapest count as equal, and among equals fewer nodes win, then
  fewer devices, then the micro-batch nearest the user's.
- Multi-node only for a named need: without a throughput target the choice stays inside one
  node whenever something fits there; while one device is not well used (a slow loader, GEMMs
  far under peak) it stays inside one node even with a target.
- A target nothing meets: the fastest layout is "the nearest", and the plan says the search's
  bounds (``--max-world``) held it.
- A target met at the estimate but not with the communication at the slow end of its 95% interval
  (or with no calibrated interval at all) is not determined by the inputs: the plan says so, and names
  the cheapest allowed layout that meets it even there (:mod:`pybench.planning.slow_end`); the rules
  above still pick.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from pybench.planning.bands import Band
from pybench.planning.records import NeedVerdict
from pybench.planning.step import StepEstimate

__all__ = ["Need", "Choice", "choose", "good", "throughput", "cost_per_sample", "cheapest", "met_at_slow_comm",
           "COST_TOLERANCE"]

# Costs per sample this close count as equal: the models' own error is larger, and the rules then
# prefer fewer nodes (the same tolerance as the grid's breakeven).
COST_TOLERANCE = 0.01


def good(r: StepEstimate) -> bool:
    """Not comm-bound (by the exposed fraction with overlap) and fits in memory somehow."""
    return r.decisive_band != Band.COMM_BOUND and r.memory.fits_at_all


def _loader_capped(samples_per_s: float, r: StepEstimate, loader_samples_per_s: float | None) -> float:
    """``samples_per_s`` of ``r``, capped by the data loader of each data-parallel replica."""
    return samples_per_s if loader_samples_per_s is None else min(samples_per_s, loader_samples_per_s * r.layout.dp)


def throughput(r: StepEstimate, loader_samples_per_s: float | None) -> float:
    """Samples/s of a layout, capped by the data loader of each data-parallel replica."""
    return _loader_capped(r.samples_per_s, r, loader_samples_per_s)


def met_at_slow_comm(r: StepEstimate, need: Need) -> bool:
    """Whether ``r`` meets the target with its communication at the slow end of its 95% interval."""
    return need.target is not None and \
        _loader_capped(r.samples_per_s_slow_comm, r, need.loader_samples_per_s) >= need.target


def cost_per_sample(r: StepEstimate, loader_samples_per_s: float | None) -> float:
    """Price per hour over samples per hour; device-hours per sample when no price was given."""
    per_hour = r.cost_per_hour if r.cost_per_hour is not None else float(r.world)
    return per_hour / (3600.0 * throughput(r, loader_samples_per_s))


@dataclass(frozen=True)
class Need:
    """What the recommendation must meet: a throughput target, memory, or neither."""

    target: float | None
    memory: bool
    device_well_used: bool
    gpus_per_node: int
    batch: int
    loader_samples_per_s: float | None = None


@dataclass(frozen=True)
class Choice:
    """The recommended row, whether it meets the target, the verdict, and the rows the sentence quotes."""

    row: StepEstimate | None
    met: bool
    verdict: NeedVerdict
    node: StepEstimate | None = None
    best_allowed: StepEstimate | None = None
    one_device: StepEstimate | None = None


def cheapest(rows: Sequence[StepEstimate], need: Need) -> StepEstimate:
    """The cheapest per sample of ``rows``; among costs within :data:`COST_TOLERANCE`, fewer nodes, then fewer
    devices, then the micro-batch nearest the user's."""
    lowest = min(cost_per_sample(r, need.loader_samples_per_s) for r in rows)
    equal = [r for r in rows if cost_per_sample(r, need.loader_samples_per_s) <= lowest * (1 + COST_TOLERANCE)]
    return min(equal, key=lambda r: (r.layout.nodes, r.world, abs(r.batch - need.batch),
                                     -throughput(r, need.loader_samples_per_s)))


def _fastest(rows: Sequence[StepEstimate], need: Need) -> StepEstimate:
    return max(rows, key=lambda r: (throughput(r, need.loader_samples_per_s),
                                    -cost_per_sample(r, need.loader_samples_per_s)))


def choose(rows: Sequence[StepEstimate], need: Need) -> Choice:
    """The layout the rules pick from ``rows`` (every row fits in memory), with the verdict behind it."""
    fitting = [r for r in rows if r.memory.fits_at_all]
    in_node = [r for r in fitting if r.layout.nodes == 1]
    node_good = [r for r in in_node if good(r)]
    node = _fastest(node_good, need) if node_good else None
    one = [r for r in fitting if r.world == 1]
    one_device = cheapest(one, need) if one else None
    if not fitting:
        return Choice(None, need.target is None, NeedVerdict.TARGET_NOT_REACHABLE if need.target is not None
                      else NeedVerdict.MEMORY, node)  # nothing fits: memory, not communication, decides
    stay = not need.device_well_used or (need.target is None and bool(in_node))
    pool = in_node if stay and in_node else fitting
    if need.target is not None:
        meeting = [r for r in pool if throughput(r, need.loader_samples_per_s) >= need.target]
        allowed = [r for r in meeting if good(r)]
        if not need.device_well_used:
            pick = cheapest(meeting, need) if meeting else _fastest(pool, need)
            return Choice(pick, bool(meeting), NeedVerdict.DEVICE_NOT_WELL_USED, node, one_device=one_device)
        if allowed:
            return Choice(cheapest(allowed, need), True, NeedVerdict.TARGET_MET, node, one_device=one_device)
        if meeting:
            good_pool = [r for r in pool if good(r)]
            best = _fastest(good_pool, need) if good_pool else None
            return Choice(cheapest(meeting, need), True, NeedVerdict.TARGET_MET_ONLY_COMM_BOUND, node, best,
                          one_device)
        return Choice(_fastest(pool, need), False, NeedVerdict.TARGET_NOT_REACHABLE, node, one_device=one_device)
    allowed = [r for r in pool if good(r)]
    pick = cheapest(allowed or pool, need)
    if not need.device_well_used:
        return Choice(pick, True, NeedVerdict.DEVICE_NOT_WELL_USED, node, one_device=one_device)
    verdict = NeedVerdict.MEMORY if need.memory else NeedVerdict.NO_NAMED_NEED
    return Choice(pick, True, verdict, node, one_device=one_device)
