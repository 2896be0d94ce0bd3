"""Across nodes from a system description: the inter-node link of a node never measured across nodes.

Its NICs' rate at the efficiency real logs reach, the node's own protocol regimes, a network step's latency per
step of its schedule, and the algorithm NCCL crosses by on such a node (as the logs of each kind of node did: the
tree where switches reduce, RCCL's ring on AMD's nodes, either where GPUs share NICs or switches do not reduce),
with the readings the description cannot rule out (:func:`other_described_readings`).
"""

from __future__ import annotations

import dataclasses
import math

from pybench.model.calibration import Calibration
from pybench.model.crossing import bytes_pass_node_links, network_steps
from pybench.model.link_cost import LinkCost
from pybench.model.system import SystemDescription
from pybench.model.topology_schedules import crossing_algorithms, crossing_terms


def described_crossing(collective: str, schedule: str, intra: LinkCost, system: SystemDescription,
                       calibration: Calibration, reading: str = "", network_share: float | None = None,
                       nic_share: float = 1.0) -> LinkCost:
    """The inter-node link of a node from its description: the node's protocol regimes, each at most
    at what all its NICs carry (``nics x rate`` at the NIC efficiency real logs reach) and the small-size
    ones at what those protocols reach across nodes, each step of the schedule across nodes at least as
    slow as a network step in its protocol (:mod:`pybench.model.calibration`); an
    all-reduce priced in the bytes of the algorithm that crosses (:func:`described_algorithm`), or in another
    ``reading``'s (:data:`READINGS`), at its family's NIC efficiency (:func:`described_efficiency`). A ring
    waits on the network once or twice per node it passes (:func:`network_steps_per_node`), at the node's own pace
    elsewhere; ``network_share`` prices that share of its steps (or of an all-to-all's) at the network's pace
    instead (1: every step; see :func:`network_steps_undescribed`); with ``nic_share`` below 1, only that share of its
    NICs carries the crossing."""
    algorithm = READINGS[reading] if reading else described_algorithm(collective, schedule, system)
    efficiency = described_efficiency(collective, schedule, system, calibration, algorithm)
    cap = efficiency * system.nic_Bps_per_node * nic_share
    label = (f"system {system.name}: {system.nics_per_node} x {system.nic_Gbps:g} Gb/s {system.nic_kind} "
             f"per node at {efficiency:.2f} of their rate (as healthy clusters' logs reach it: a fabric running below "
             f"its rate runs below the interval), and no faster than the node's own links run it")
    # every protocol keeps its share of the bandwidth regime's rate (LL at half of Simple's on NVLink
    # is at half of it through the NICs too), the small-size ones capped below
    scale = cap / intra.busbw_Bps
    if bytes_pass_node_links(collective):  # (and again in the crossing's own units at each layout: across_nodes)
        scale = min(1.0, scale)
    # The latency per step, not per call: a ring over 16 ranks waits on the network 15 times, a tree
    # across 2 nodes twice, and the logs of different systems agree better per step than per call.
    # It was calibrated as a whole 2-node crossing's latency, which holds the node's own per-call part:
    # on two full nodes the latency is the larger of the node's and the crossing's, not their sum.
    # The small-size protocols move little per round trip across nodes, whatever the NICs' rate; the
    # bandwidth protocol waits longer per step, on a whole chunk.
    hops = crossing_terms(schedule, collective, 1.0, 2 * system.gpus_per_node, 2, algorithm)[0]
    small, bandwidth = intra.all_regimes()[:-1], intra.all_regimes()[-1]
    if not small:  # a nominal rate, or a one-regime node: its one regime stands for both protocols
        small = (bandwidth,)

    # A ring that passes chunks on waits on the network at each node boundary its chunk passes
    # (crossing.network_steps), at the node's own pace elsewhere (NCCL's tuning model charges a ring's latency so);
    # every step waiting on the network is a reading of its own (``network_share``): the reach of its interval.
    per_node = network_steps_per_node(collective, algorithm) if network_share is None and schedule == "ring" else 0
    share = 1.0 if network_share is None or algorithm != "ring" else network_share  # a tree's levels: network hops
    if collective == "alltoall" and hops > 0:  # its sends to every peer go at once: one network round trip
        share = min(share, 1.0 / hops)

    def across(r: LinkCost, step: float, busbw: float) -> LinkCost:
        if per_node:  # (the calibration's whole 2-node latency holds its network steps there)
            return dataclasses.replace(r, base_s=max(r.base_s - network_steps(collective, 2) * per_node * step, 0.0),
                                       node_step_s=per_node * step, busbw_Bps=busbw,
                                       label=label, algorithm=algorithm, nic_efficiency=efficiency)
        return dataclasses.replace(r, base_s=max(r.base_s - hops * step, 0.0),
                                   step_s=max(r.step_s, share * step + (1.0 - share) * r.step_s),
                                   busbw_Bps=busbw, label=label, algorithm=algorithm, nic_efficiency=efficiency)

    small_cap = calibration.small_protocol_busbw_Bps or math.inf  # 0: chosen on no log, nothing to cap with
    regimes = [across(r, calibration.crossing_step_latency_s, min(r.busbw_Bps * scale, small_cap)) for r in small]
    # a measured node's bandwidth regime carries its own rate in the middle sizes; a nominal rate does not
    step = calibration.nominal_step_latency_s if intra.is_described else calibration.bandwidth_step_latency_s
    regimes.append(across(bandwidth, step, bandwidth.busbw_Bps * scale))
    return dataclasses.replace(regimes[-1], regimes=tuple(regimes[:-1]))


def other_described_readings(collective: str, schedule: str, intra: LinkCost, system: SystemDescription,
                             calibration: Calibration) -> tuple[tuple[LinkCost, str, bool], ...]:
    """The readings of a described crossing that its description cannot rule out besides its own, each with
    the caveat that says why ('' where an earlier one says it) and whether it only widens the interval.

    The prediction lies between the readings that are not only reach (their span in the interval). An
    all-reduce ring's steps (NCCL's ring on GPUs that share NICs ran on 2 and 8 nodes) are reach only: many nodes
    make its two network steps per node many times the tree's levels, and NCCL's tuner then picks the tree, so
    they move the interval's far end, not the answer (:class:`~pybench.model.calibration.Spread`). The NICs at
    their full rate are reach too: the calibrated efficiency is a typical share of it, and a system may reach
    nearly all of it (a description cannot say how close), but none more."""
    full_rate = dataclasses.replace(calibration, nic_efficiency=dict.fromkeys(calibration.nic_efficiency, 1.0))
    out = [(described_crossing(collective, schedule, intra, system, full_rate), "", True)]
    if nics_shared(collective, schedule, system):
        why = ("ranks share the described NICs: the all-reduce may cross by a tree or a ring (NCCL picks per "
               "system, and so does an MPI library), between the tree's bytes and the ring's, in the interval, "
               "and up to the ring's steps; a measurement across nodes replaces this reading")
        other = "ring-bytes" if described_algorithm(collective, schedule, system) == "double-tree" else "tree"
        out.append((described_crossing(collective, schedule, intra, system, calibration, reading=other), why, False))
        out.append((described_crossing(collective, schedule, intra, system, calibration, reading="steps"), "", True))
    elif tree_or_ring_undescribed(collective, schedule, system):
        out.append((described_crossing(collective, schedule, intra, system, calibration, reading="ring-bytes"),
                    f"no switch of {system.name} reduces (NVLink SHARP): the all-reduce may cross by NCCL's tree or "
                    f"its ring (it picks per system), between the tree's bytes and the ring's, in the interval; a "
                    f"measurement across nodes replaces this reading", False))
    many = calibration.crossing_ranks_per_node
    # a node of more GPUs than any calibration log's (an NVL72 rack) drives that many GPUs' NICs, and at least one
    fewer = max(many / system.gpus_per_node, 1.0 / system.nics_per_node) if many > 0 else 1.0
    if fewer < 1.0:
        out.append((described_crossing(collective, schedule, intra, system, calibration, nic_share=fewer),
                    f"{system.name} holds {system.gpus_per_node} GPUs per node, more than any log the crossing was "
                    f"calibrated on ({many:g}): whether NCCL drives all of its NICs across nodes or about as many as "
                    f"such a node has is not known (GB200 racks on 20 racks and GB300 racks on 2 crossed at about "
                    f"8 GPUs' NICs' worth); between the two, in the interval; a measurement across racks replaces "
                    f"this reading", False))
    if network_steps_per_node(collective, described_algorithm(collective, schedule, system)) \
            and system.gpus_per_node > 1:
        out.append((described_crossing(collective, schedule, intra, system, calibration, network_share=1.0),
                    "a ring's every step may wait on the network (GCP A4's and Polaris's all-gathers ran so), not only "
                    "where it leaves a node (NCCL's tuning model, as InfiniBand DGX nodes ran): the interval reaches "
                    "it; a measurement across nodes replaces this reading", True))
    elif known := network_steps_undescribed(collective, schedule, system, calibration):
        out.append((described_crossing(collective, schedule, intra, system, calibration,
                                       network_share=known / system.gpus_per_node),
                    f"{system.name} runs up to {system.gpus_per_node} ranks per node, and the network step was "
                    f"calibrated on logs of at most {known:g}: whether every step inside a node waits on the network "
                    f"is not known; between every step and {known:g} per node, in the interval; a measurement "
                    f"across nodes replaces this reading", False))
    return tuple(out)


def network_steps_undescribed(collective: str, schedule: str, system: SystemDescription,
                              calibration: Calibration) -> float:
    """The ranks per node up to which the steps across nodes of a collective outside :data:`PIPELINED_RINGS` (an
    all-to-all) are known to wait on the network each, where the described node holds more; 0 where every step
    of its crossing is known to. The 2-node logs the network step was calibrated on hold at most a few ranks per
    node; a node of many more (an NVL72 rack as one node) may pay the network step at each of its steps or only at
    about as many per node as those logs did. A tree's levels across nodes are network hops whatever the node holds.
    """
    known = calibration.crossing_ranks_per_node
    ring = crossing_algorithms(schedule, collective)[-1] == "ring" and collective not in PIPELINED_RINGS
    return known if ring and known > 0 and system.gpus_per_node > known else 0.0


def network_steps_per_node(collective: str, algorithm: str) -> int:
    """How many of a ring's steps wait on the network per node boundary its chunk passes
    (:func:`~pybench.model.crossing.network_steps`), where its latency is its path's (a ring
    that passes chunks on, :data:`PIPELINED_RINGS`: once; an all-reduce's ring, a reduce-scatter then an
    all-gather: twice), as NCCL's tuning model charges it; 0 for a crossing whose steps are all network hops (a tree's
    levels, a send/recv) or go at once (an all-to-all)."""
    if algorithm != "ring":
        return 0
    return 2 if collective == "allreduce" else int(collective in PIPELINED_RINGS)


PIPELINED_RINGS = ("allgather", "reducescatter", "broadcast", "reduce")
"""Collectives whose ring passes a chunk on from rank to rank: its latency is the path's, whose steps between nodes
are the node boundaries its chunk passes (:func:`~pybench.model.crossing.network_steps`; an all-to-all's sends go
at once, a send/recv's step is one hop, an all-reduce crosses by a tree)."""


READINGS = {"tree": "double-tree", "ring-bytes": "tree", "steps": "ring"}
"""A described all-reduce crossing's readings: NCCL's double binary tree's bytes, the ring's bytes at the tree's
latency, and the ring's bytes and steps (two per node at the network's pace, :func:`network_steps_per_node`)."""


def described_algorithm(collective: str, schedule: str, system: SystemDescription) -> str:
    """The algorithm a described crossing is priced by (:func:`crossing_algorithms`' names): for an all-reduce,
    NCCL's double binary tree (the 2-node logs of NVIDIA nodes whose switches reduce carried more than the ring's
    bytes could through their NICs; where the inputs cannot say, :func:`tree_or_ring_undescribed`, the ring's
    bytes are another reading), but on AMD's Infinity Fabric nodes the ring's bytes at the tree's latency
    (``tree``: RCCL's logs carried less than the NICs' rate in the ring's bytes)."""
    algorithm = crossing_algorithms(schedule, collective)[-1]
    if algorithm == "double-tree" and system.intra_fabric in RING_FABRICS:
        return READINGS["ring-bytes"]
    return algorithm


RING_FABRICS = ("infinity-fabric-all-to-all",)
"""Fabrics of nodes whose library (AMD's RCCL) crosses nodes by its ring in the bandwidth protocol."""


def described_efficiency(collective: str, schedule: str, system: SystemDescription, calibration: Calibration,
                         algorithm: str) -> float:
    """The share of a described node's NICs' rate a crossing by ``algorithm`` reaches: its collective's family's
    (:data:`~pybench.model.calibration.FAMILIES`), but the other collectives' rings' for an all-reduce's ring
    where GPUs share NICs (:func:`nics_shared`: one NIC's several flows, as an all-gather's ring drives them;
    Polaris's all-reduce, and AWS p3dn's forced to its ring, carried about that)."""
    ring = algorithm in (READINGS["ring-bytes"], READINGS["steps"])
    if ring and nics_shared(collective, schedule, system):
        return calibration.nic_efficiency["ring"]
    return calibration.efficiency(collective)


def nics_shared(collective: str, schedule: str, system: SystemDescription) -> bool:
    """Whether a described all-reduce's ranks share NICs (fewer NICs than GPUs per node), where its logs ran NCCL's
    tree on some systems and its ring on others, and a ring's steps may each wait on the network."""
    return collective == "allreduce" and schedule == "ring" and system.nics_per_node < system.gpus_per_node


def tree_or_ring_undescribed(collective: str, schedule: str, system: SystemDescription) -> bool:
    """Whether a described all-reduce crossing may run NCCL's tree or its ring, neither favoured: where GPUs share
    NICs (Polaris's log ran the ring, AWS p3dn's the tree by default, nccl-tests#22), and on NVIDIA nodes whose
    switches do not reduce (OCI's A100 log ran the tree, ALCF Sophia's DGX A100 the ring). Where switches reduce
    (NVLink SHARP), every log ran the tree; on AMD's nodes, RCCL's ring (:func:`described_algorithm`)."""
    return (described_algorithm(collective, schedule, system) == "double-tree"
            and (nics_shared(collective, schedule, system) or not system.in_switch_reduction))
