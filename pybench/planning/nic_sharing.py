"""Groups that cross a node's NICs at the same time share them.

A fitted inter-node model prices one group as if it had the node's NICs to itself: true for
data parallelism over whole nodes (one group, every rank of the node in it), false for the
data-parallel groups of tp x dp (one rank of each of tp x pp groups on every node) or for
pipeline stages that are whole nodes (every rank of the node sends across). There, ``sharing``
groups push their bytes through the same NICs at once, and each gets 1/sharing of the
bandwidth: the bandwidth part of a call grows ``sharing`` times, its latency does not. The
bytes all of them send out of one node, over the NICs' bus bandwidth, are then the floor any
layout pays (issue 13: a tp8 x dp2 gradient all-reduce priced as if alone came out several times
too optimistic against the same log's 16-rank all-reduce). A send/recv is one rank's flow through its GPU's
NICs: the stage boundaries' flows share them only where a described node has fewer NICs than flows.
"""

from __future__ import annotations

from pybench.collectives import busbw_factor
from pybench.model.crossing import nics_reached
from pybench.planning.model_set import CommTime, ModelSet
from pybench.planning.strategies import CommOp, Layout

INTER = "inter-node"
# Where the bus bandwidth of the NICs is read off the op's own model: large enough that the
# latency is a negligible part of the time.
_PROBE_BYTES = float(1 << 30)


def sharing_groups(layout: Layout, op: CommOp) -> int:
    """How many groups of ``op`` cross one node's NICs at the same time (1: the group is alone)."""
    if op.link_class != INTER:
        return 1
    g = layout.gpus_per_node
    if op.purpose == "gradients" and layout.strategy in ("tp+dp", "tp+pp+dp"):
        stride = layout.tp * layout.pp  # one rank of every model replica's group sits on each node
    elif op.purpose == "activations (pipeline)":
        stride = layout.tp              # every rank of a stage sends to the next stage at once
    else:
        stride = 1                      # dp over whole nodes: one group holds the node's ranks
    return max(1, min(g, stride))


def _bus_factor(collective: str, n: int) -> float:
    return busbw_factor(collective, n if n > 1 else None)  # one rank: its bytes as they are


def shared_time(models: ModelSet, op: CommOp, size_bytes: float, call: CommTime, sharing: int,
                world: int, nodes: int | None = None) -> CommTime:
    """``call`` (one call of ``op`` as if alone) with the NICs shared by ``sharing`` groups.

    The NICs' bus bandwidth is read off the op's inter-node model at the layout's ``world`` on its
    ``nodes`` (every rank of every node in one ring: what a whole-node sweep measures); the call then
    takes at least its latency plus the bytes all ``sharing`` groups send out of the node
    over that bandwidth.
    """
    if op.collective == "sendrecv":  # one flow per group, each through its own GPU's NICs: shared where they are
        system = models.described_system(op.collective, op.link_class)
        # the flows' GPUs (one per group, side by side) reach their own NICs (no description: perhaps one for all)
        sharing = -(-sharing // int(nics_reached(system, sharing))) if system is not None else sharing
    if sharing <= 1 or call.time_s <= 0:
        return call
    probe = models.time(op.collective, _PROBE_BYTES, max(world, op.group_size), op.link_class,
                        max(nodes or 0, op.nodes) or None)
    busbw = _PROBE_BYTES * _bus_factor(op.collective, max(world, op.group_size)) / probe.time_s
    latency_s = models.latency_s(op.collective, op.group_size, op.link_class, op.nodes)
    bytes_s = _bus_factor(op.collective, op.group_size) * size_bytes / busbw
    if op.collective == "sendrecv":  # (one flow alone may be slower than the sweep's rate: a described NIC's)
        bytes_s = max(bytes_s, call.time_s - latency_s)
    floor_s = latency_s + sharing * bytes_s
    if floor_s <= call.time_s:
        return call
    scaled = call.scaled(floor_s / call.time_s)
    shared = f"{sharing} flows per NIC" if op.collective == "sendrecv" else f"NICs shared by {sharing} groups"
    return CommTime(scaled.time_s, scaled.time_low_s, scaled.time_high_s, f"{call.source}; {shared}",
                    call.calibrated)
