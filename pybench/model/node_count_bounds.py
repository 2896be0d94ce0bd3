"""The fitted node counts on either side of an asked one bound its time: more nodes of the same ranks per node add
steps and bytes, fewer take fewer (where no fewer-node layout of those ranks per node was fitted, one node of them as
the node's own links price it: a crossing whose NICs outpace those links cannot beat the node's own collective).
Real runs stray from that (another algorithm or protocol at another node count, a run off its fit), by as much as
:attr:`~pybench.model.calibration.Calibration.more_nodes_speedup` says, chosen on the calibration logs: the point is
moved to the nearer fitted time, and the interval reaches no further past it. Far beyond the fitted node counts,
NCCL's and RCCL's time is bounded above too: no algorithm they pick pays more steps than a ring over every rank, nor
more than twice the bytes per node; fewer ranks per node than fitted carry those bytes at no less than their share of
the NICs the fitted ranks drove. And no operation across nodes takes less than one crossing step.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable
from typing import Protocol

from pybench.model.calibration import Spread
from pybench.model.crossing import ModelLinks
from pybench.model.link_cost import LinkCost
from pybench.model.system import GPU_BACKENDS


class TimedModel(ModelLinks, Protocol):
    """What the bounds read of a :class:`pybench.model.topology.TopologyModel`."""

    def _time(self, size: float, world: int, nodes: int, sharing: int = 1,
              rails: float | None = None) -> tuple[float, str, str]: ...

    def _with_links(self, change: Callable[[LinkCost], LinkCost], which: str = "both") -> TimedModel: ...


# No collective NCCL runs across nodes sends more than twice the bytes through a node's NICs on more nodes than on
# fewer: a ring's 2(p-1)/p S grows by less, a double tree's from S on two nodes towards 2S, an all-to-all's from
# half of each rank's buffer towards all of it.
MOST_BYTES_GROWTH = 2.0


def fewer_nodes_fitted(model: ModelLinks, world: int, nodes: int) -> int:
    """The most nodes of a fitted layout with fewer nodes than ``nodes`` and the same ranks per node (1: the
    intra-node fit), 0 without one or at a fitted layout: an operation over more such nodes takes no less."""
    if (world, nodes) in model.fitted:
        return 0
    return max((n for w, n in model.fitted if n < nodes and w == world // nodes * n), default=0)


def more_nodes_fitted(model: ModelLinks, world: int, nodes: int) -> int:
    """The fewest nodes of a fitted multi-node layout with more nodes than ``nodes`` and the same ranks per node, 0
    without one or at a fitted layout: an operation over fewer such nodes takes no more."""
    if (world, nodes) in model.fitted:
        return 0
    return min((n for w, n in model.fitted if n > nodes and w == world // nodes * n), default=0)


def denser_fitted(model: ModelLinks, world: int, nodes: int) -> tuple[int, int] | None:
    """(world, nodes) of the fitted multi-node layout of more ranks per node than asked nearest ``nodes`` (the fewer
    ranks per node of two as near), None without one or at a fitted layout: fewer ranks per node reach at least
    their share of the NICs that node's ranks drove (a rank's own NICs, or a share of those its node's ranks share),
    so its bytes bound theirs."""
    per_node = world // nodes
    denser = [(w, n) for w, n in model.fitted if n > 1 and w // n > per_node]
    if (world, nodes) in model.fitted or not denser:
        return None
    return min(denser, key=lambda f: (abs(math.log(f[1] / nodes)), f[0] // f[1]))


def bounded_by_fitted_node_counts(model: TimedModel, size: float, world: int, nodes: int, sharing: int,
                                  time_s: float, spread: Spread) -> tuple[float, Spread, list[str]]:
    """(time, spread, notes) of a crossing at (``world``, ``nodes``) moved within the fitted node counts of the same
    ranks per node, and its spread told how far its ends may reach past them (:class:`Spread`)."""
    per_node, notes = world // nodes, []
    fewer, more = fewer_nodes_fitted(model, world, nodes), more_nodes_fitted(model, world, nodes)
    fewer_s = model._time(size, per_node * fewer, fewer, sharing)[0] if fewer else 0.0
    more_s = model._time(size, per_node * more, more, sharing)[0] if more else 0.0
    if fewer_s > time_s:
        notes.append(f"raised by {100 * (fewer_s / time_s - 1):.0f}% to the time of {per_node * fewer} ranks on "
                     f"{fewer} node(s) as fitted: more nodes add steps and bytes")
        time_s = fewer_s
    elif not fewer and per_node > 1 and model.intra is not None and (world, nodes) not in model.fitted:
        # no such layout fitted: the node's own model (a fitted layout answers by its own sweep)
        one_node_s = model._time(size, per_node, 1)[0]  # (each node still does its own ranks' share inside it)
        if one_node_s > time_s:
            notes.append(f"raised by {100 * (one_node_s / time_s - 1):.0f}% to the time of {per_node} ranks on one "
                         f"node as its own links price it: more nodes add steps and bytes")
            time_s = one_node_s
    if 0 < more_s < time_s:
        notes.append(f"lowered by {100 * (1 - more_s / time_s):.0f}% to the time of {per_node * more} ranks on "
                     f"{more} node(s) as fitted: fewer nodes take fewer steps and bytes")
        time_s = more_s
    if fewer_s > 0:
        spread = dataclasses.replace(spread, above_fewer_nodes=math.log(time_s / fewer_s))
    # (from one node, the network's whole cost is new: no such bound; MPI libraries run algorithms of more steps
    # or bytes than a ring: an Open MPI all-gather on 64 cloud nodes took several times what it allowed)
    if model.schedule == "ring" and model.backend in GPU_BACKENDS:
        slowest_s = 0.0
        if fewer > 1:
            slowest_s = _slowest_ring_s(model, size, world, per_node * fewer, fewer, sharing, fewer_s)
        elif (denser := denser_fitted(model, world, nodes)) is not None:
            fitted_s = model._time(size, *denser, sharing)[0]
            slowest_s = _slowest_ring_s(model, size, world, *denser, sharing, fitted_s,
                                        denser[0] // denser[1] / per_node, nodes)
        if slowest_s > 0:
            spread = dataclasses.replace(spread, below_most_steps=math.log(slowest_s / time_s))
    if more_s > 0:  # (a ring over fewer ranks pays fewer steps: no schedule's time falls faster than that)
        fewest_s = more_s * (world - 1) / (per_node * more - 1)
        spread = dataclasses.replace(spread, below_more_nodes=math.log(more_s / time_s),
                                     above_fewest_steps=math.log(time_s / fewest_s))
    elif (one_step_s := _one_step_s(model, size, sharing)) > 0:  # (no crossing takes fewer than one step)
        spread = dataclasses.replace(spread, above_fewest_steps=math.log(time_s / one_step_s))
    return time_s, spread, notes


def _bytes_s(model: TimedModel, size: float, world: int, nodes: int, sharing: int) -> float:
    """What the bytes alone take at (``world``, ``nodes``): the model's time with every latency set to 0."""
    bare = model._with_links(lambda r: dataclasses.replace(r, base_s=0.0, step_s=0.0, node_step_s=0.0))
    return bare._time(size, world, nodes, sharing)[0]


def _one_step_s(model: TimedModel, size: float, sharing: int) -> float:
    """The least latency of one step of any fitted multi-node layout's time at ``size``, its latency spread over
    every step of a ring over its ranks (0 without such a layout): whatever the layout, an operation across nodes
    waits on one crossing at least."""
    steps = [(model._time(size, w, n, sharing)[0] - _bytes_s(model, size, w, n, sharing)) / (w - 1)
             for w, n in model.fitted if n > 1]
    return max(min(steps, default=0.0), 0.0)


def _slowest_ring_s(model: TimedModel, size: float, world: int, fitted_world: int, fitted_nodes: int, sharing: int,
                    fitted_s: float, slower_nics: float = 1.0, nodes: int = 0) -> float:
    """The most an operation over ``world`` ranks may take against the fitted time of ``fitted_world`` ranks (fewer
    nodes of the same ranks per node, or more ranks per node): its latency paid at each step of a ring over every
    rank, (p - 1) / (p_fitted - 1) times as many (no algorithm NCCL picks pays more steps; with fewer ranks per node
    than fitted on ``nodes``, no less than its whole, and as many times it as a tree's levels between nodes grow),
    its bytes at most :data:`MOST_BYTES_GROWTH` times as many through each node's NICs, carried ``slower_nics``
    times slower (the fitted ranks per node over the asked: fewer ranks reach at least their share of the NICs)."""
    bytes_s = min(_bytes_s(model, size, fitted_world, fitted_nodes, sharing), fitted_s)
    steps = (world - 1) / (fitted_world - 1)
    if slower_nics > 1:  # fewer ranks per node than fitted: whether its latency was a ring's or a tree's is unknown
        # (a ring's steps each wait on a crossing: the asked ring pays (p - 1) / (p_fitted - 1) of it; a tree's
        # levels between nodes grow as log2 of the nodes, and its chain inside each node only shortens)
        steps = max(steps, 1.0, math.log2(max(nodes, 2)) / math.log2(max(fitted_nodes, 2)))
    return (fitted_s - bytes_s) * steps + bytes_s * MOST_BYTES_GROWTH * slower_nics
