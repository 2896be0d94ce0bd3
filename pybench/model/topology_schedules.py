"""How a collective crosses nodes: the step counts of one operation, for the topology model.

One link's cost has the frame ``T = base + hops * step + (data + fill * c) * S / B`` (see
:mod:`pybench.model.topology`). A schedule says which ranks talk across the nodes' NICs and
what ``hops``, ``data`` and ``fill`` are there:

* ``ring``: one ring over every rank (NCCL's ring across nodes);
* ``hierarchical``: one ring over one leader per node, the data already combined inside each
  node (the textbook two-level schedule);
* ``openmpi``: what Open MPI 5 really runs for an all-reduce, by ranks, nodes and message
  size (:mod:`pybench.model.mpi_openmpi`): HAN between node leaders when nodes hold several
  ranks, else coll/tuned's own choice (Rabenseifner, recursive doubling, ring, ...), each
  priced by the bytes through the busiest NIC.

The leader schedules (``hierarchical``, and ``openmpi`` when it runs HAN) first combine the data
inside each node and spread the result again afterwards: :func:`intra_node_ranks` says over how
many ranks, and the model prices that phase with its intra-node link (one operation of the same
collective on the node's ranks: a reduce and a broadcast move what a ring all-reduce moves, to
within g/(g-1)). NCCL's ring runs through every rank in one pipeline: no separate phase.
"""

from __future__ import annotations

import math
from typing import Protocol

from pybench.errors import FileFormatError, UsageError
from pybench.io.model_names import TOPOLOGY_ALGORITHMS, TOPOLOGY_SCHEDULES
from pybench.model.mpi_openmpi import openmpi_allreduce_plan

# the file format's names (pybench.io.model_names), priced here
ALGORITHMS = TOPOLOGY_ALGORITHMS
SCHEDULES = TOPOLOGY_SCHEDULES
# Collectives whose ring moves (p-1) steps of S/p each way (all-reduce moves two such passes).
_ONE_PASS = ("allgather", "reducescatter", "alltoall")


def algorithm_steps(collective: str, algorithm: str, world: int) -> tuple[float, float]:
    """(latency hops, data steps) of one operation: T = base + hops*step + (steps + c)/p * S/B."""
    p = world
    if p < 1:
        raise UsageError(f"world must be at least 1, got {world}")
    if collective == "allreduce":
        hops = {"ring": 2.0 * (p - 1), "tree": 2.0 * math.ceil(math.log2(max(p, 1))), "nvls": 2.0}.get(algorithm)
        if hops is None:
            raise UsageError(f"unknown algorithm {algorithm!r} for allreduce; use one of {', '.join(ALGORITHMS)}")
        return hops, 2.0 * (p - 1)
    if algorithm != "ring":
        raise UsageError(f"{collective} is modelled with the ring algorithm only, not {algorithm!r}")
    if collective in _ONE_PASS:
        return float(p - 1), float(p - 1)
    if collective == "sendrecv":  # every rank sends to the next and receives from the one before at once
        return 1.0, float(p)
    if collective in ("broadcast", "reduce"):
        return float(max(p - 1, 1)), float(p)  # a pipelined chain: S/B once, plus its fill
    raise UsageError(f"no topology model for collective {collective!r}; modelled: allreduce, allgather, "
                     f"reducescatter, alltoall, broadcast, reduce, sendrecv")


class StaleCrossing(FileFormatError):
    """A topology model whose figures assume formulas pybench no longer prices: its collective is refit, the rest of
    its file stands."""


class _Link(Protocol):  # what the check reads of a LinkCost (which imports this module)
    @property
    def is_described(self) -> bool: ...
    @property
    def is_preset(self) -> bool: ...


def check_crossing_version(collective: str, schedule: str, version: int, inter: _Link | None,
                           fitted_worlds: tuple[int, ...] = ()) -> None:
    """FileFormatError for fitted figures that assume other steps or bytes than these formulas
    (:data:`pybench.io.model_names.TOPOLOGY_CROSSING_VERSION`): version 1 priced an all-to-all's ring schedule
    as a ring; versions 1 and 2 a sendrecv as a chain of p - 1 steps (the same as one step at 2 ranks only)."""
    if (collective == "alltoall" and schedule == "ring" and version < 2 and inter is not None
            and not (inter.is_described or inter.is_preset)):
        raise FileFormatError("its all-to-all was fitted across nodes with a ring's bytes, not each rank's own: "
                              "refit the logs with `pybench fit`")
    if collective == "sendrecv" and version < 3 and any(w > 2 for w in fitted_worlds):
        raise StaleCrossing("its sendrecv was fitted as a chain of p - 1 steps, not one step of every rank at "
                            "once: refit the logs with `pybench fit`")


def check_schedule(name: object) -> str:
    """``name`` if it is a known schedule, else FileFormatError (a model file names it)."""
    if name not in SCHEDULES:
        raise FileFormatError(f"a topology model's schedule is {name!r}, not one of {', '.join(SCHEDULES)}")
    return str(name)


def intra_node_ranks(schedule: str, collective: str, world: int, nodes: int) -> int:
    """Ranks per node of the intra-node phase a schedule runs before and after the leaders talk; 0 if none."""
    per_node = world // nodes if nodes else 0
    if per_node < 2 or nodes < 2:
        return 0
    if schedule == "hierarchical" or (schedule == "openmpi" and collective == "allreduce"):
        return per_node  # openmpi: several ranks per node is HAN (mpi_openmpi.openmpi_allreduce_plan)
    return 0


def crossing_algorithms(schedule: str, collective: str) -> tuple[str, ...]:
    """The candidate algorithms between nodes, one design each in the fit (ties go to the first).

    NCCL's all-reduce crosses nodes by a tree for the sizes where latency counts, and picks the ring
    only where it is cheaper. A ring's per-step latency fitted at a few nodes, multiplied by the
    thousands of steps of a ring over hundreds of nodes, is a cost NCCL never pays (it switches to the
    tree), so the all-reduce is priced across nodes with the tree's latency, 2 ceil(log2 nodes) steps,
    and either the ring's bytes (``tree``) or the double binary tree's own (``double-tree``, see
    :func:`crossing_bytes`). Collectives without a tree (all-gather, reduce-scatter, ...) cross as one ring.
    """
    return ("tree", "double-tree") if schedule == "ring" and collective == "allreduce" else ("ring",)


def crossing_bytes(collective: str, algorithm: str, world: int, nodes: int) -> float:
    """Bytes through a node's NICs each way, in units of S, for NCCL's schedule across ``nodes`` nodes.

    A ring over every rank sends 2(p-1)/p S out of each node for an all-reduce, (p-1)/p S for one
    pass. NCCL's double binary tree sends each half of the data up one tree and down the other: a
    node is inside one tree and a leaf of the other, 2S out of each node on many nodes but only S on
    two (each node is the other's root in one tree), 2(N-1)/N S in between. That is why a 2-node
    all-reduce's bus bandwidth can exceed what the NICs carry, and falls by up to half on more nodes.
    """
    if algorithm == "double-tree":
        if collective != "allreduce":
            raise UsageError(f"{collective} has no tree across nodes, only the ring")
        return 2.0 * (nodes - 1) / nodes if nodes > 1 else 0.0
    if collective == "alltoall":
        return alltoall_node_bytes(world, nodes)
    return algorithm_steps(collective, "ring", world)[1] / world


def alltoall_node_bytes(world: int, nodes: int) -> float:
    """Bytes out of each node for an all-to-all, in units of S (a rank's send buffer): every rank sends the
    share of its buffer meant for the ranks of other nodes, (p - g)/p S with g ranks per node, and the node's
    g ranks send it through the node's NICs at once, g (N - 1)/N S: no ring passes it on. The share leaving a
    node grows from half on two nodes towards all of it, which is why all-to-all's bus bandwidth falls as
    nodes are added while a ring's stays."""
    return (world / nodes) * (nodes - 1) / nodes if nodes > 1 else 0.0


def crossing_terms(schedule: str, collective: str, size_bytes: float, world: int,
                   nodes: int, algorithm: str = "ring") -> tuple[float, float, float, str]:
    """(hops, data, fill, label) of the part between nodes: T = base + hops*step + (data + fill*c) * S/B.

    ``data`` is the bytes through the busiest NIC direction in units of S; ``label`` names
    what is priced (``openmpi han:redscat_gather+linear``, ``hierarchical``, ``tree``, ...).
    A ring pays a step latency at every one of its 2(p-1) steps; NCCL's tree across nodes pays
    one per level of the tree between nodes, 2 ceil(log2 nodes), the steps inside each node staying
    in the per-call latency (a fixed count for a fixed number of ranks per node).
    """
    if schedule == "openmpi":
        if collective != "allreduce":
            raise UsageError(f"the openmpi schedule prices allreduce only, not {collective}")
        plan = openmpi_allreduce_plan(size_bytes, world, nodes)
        return plan.hops, plan.nic_bytes, 1.0 / plan.ranks, f"openmpi {plan.name}"
    ranks = nodes if schedule == "hierarchical" else world
    hops, steps = algorithm_steps(collective, "ring", ranks)
    if algorithm in ("tree", "double-tree") and schedule == "ring" and collective == "allreduce":
        tree_hops = 2.0 * math.ceil(math.log2(max(nodes, 1)))
        return tree_hops, crossing_bytes(collective, algorithm, ranks, nodes), 1.0 / ranks, algorithm
    if algorithm != "ring":
        raise UsageError(f"{collective} crosses nodes with the ring only under the {schedule} schedule, "
                         f"not {algorithm!r}")
    if collective == "alltoall" and schedule == "ring":  # every rank to every other at once, not a ring
        return hops, alltoall_node_bytes(world, nodes), 1.0 / ranks, "pairwise"
    return hops, steps / ranks, 1.0 / ranks, schedule
