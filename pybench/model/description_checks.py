"""Where fitted links contradict the system description they are used with.

A description prices what was never measured; what was measured is kept as fitted. When the two
disagree beyond what any schedule explains, the answer still rests on the measurement, and the
fit's notes say which input looks wrong (the description, or the node the data came from). The
rates compared are what the fit reaches at the largest size it was fitted on, at its own layouts:
a regime's bandwidth alone may be a slope no size ever ran at.
"""

from __future__ import annotations

from typing import Protocol

from pybench.collectives import busbw_factor
from pybench.model.crossing import ModelLinks, nics_reached, ranks_at_the_nics
from pybench.model.system import GPU_BACKENDS, SystemDescription
from pybench.model.topology_schedules import crossing_algorithms, crossing_terms


class FittedTopology(ModelLinks, Protocol):
    """What the checks read of a :class:`pybench.model.topology.TopologyModel`."""

    @property
    def size_range(self) -> tuple[float, float]: ...
    def _time(self, size: float, world: int, nodes: int, sharing: int = 1,
              rails: float | None = None) -> tuple[float, str, str]: ...

# NCCL's double binary tree sends S through a node's NICs on two nodes while the all-reduce's bus
# bandwidth counts 2(p-1)/p S: up to twice the NICs' rate. A ring's bus bandwidth is what the NICs carry.
_BUSBW_PER_NIC_RATE = {"allreduce": 2.0}
# Real single-node logs reach well over half of the fabric's per-GPU rate (generated docs hold the
# figures); under half of it, the node measured is not the one described, or its GPUs do not reach its rate.
_SLOWEST_SHARE = 0.5
_TOLERANCE = 1.05


def _reached_Bps(model: FittedTopology, multi_node: bool) -> float:
    """The highest bus bandwidth the fit reaches at its largest fitted size, over its fitted layouts of
    one kind (one node, or several); 0 without any."""
    size = float(model.size_range[1])
    rates = [size / model._time(size, w, n)[0] * busbw_factor(model.collective, w)
             for w, n in model.fitted if (n > 1) == multi_node and w > 1]
    return max(rates, default=0.0)


def both_links_measured(model: ModelLinks) -> bool:
    """Whether both link classes were fitted to measurements: a description then only bounds the layouts."""
    return all(link is not None and not link.is_preset and not link.is_described
               for link in (model.intra, model.inter))


def fabric_mismatches(model: FittedTopology, system: SystemDescription) -> list[str]:
    """One note per fitted link the description cannot have carried, or whose node is not the one described."""
    notes: list[str] = []
    if model.backend not in GPU_BACKENDS:
        notes.append(f"the {model.collective} model was measured over {model.backend.upper()}, not NCCL: of "
                     f"{system.name} only its {system.nics_per_node} x {system.nic_Gbps:g} Gb/s NICs per node price "
                     f"what was not measured, at the share of their rate NCCL reaches on them (no MPI library's is "
                     f"calibrated); its GPUs' fabric is not used")
    intra = model.intra
    if intra is not None and not intra.is_described and not intra.is_preset and model.backend in GPU_BACKENDS:
        reached, rate = _reached_Bps(model, False), system.intra_Bps_per_gpu
        if reached > _TOLERANCE * rate:
            notes.append(f"the fitted node reaches {reached / 1e9:.0f} GB/s bus bandwidth, above the "
                         f"{system.intra_GBps_per_gpu:g} GB/s per GPU that {system.name}'s {system.intra_fabric} "
                         f"carries: in-network reduction (NVLS), or a fit that does not describe this fabric")
        elif 0 < reached < _SLOWEST_SHARE * rate:
            notes.append(f"the measured node reaches {reached / 1e9:.0f} GB/s bus bandwidth, under half the "
                         f"{system.intra_GBps_per_gpu:g} GB/s per GPU of {system.name}'s {system.intra_fabric}: the "
                         f"node measured is not {system.name}'s, or its GPUs do not reach that rate (no "
                         f"peer-to-peer between them, a shared switch), and its figures are kept inside a node")
    underused = _nic_share_reached(model, system)
    if underused < _SLOWEST_NIC_SHARE:
        notes.append(f"the fitted crossing moves {100 * underused:.0f}% of what the NICs its ranks reach carry on "
                     f"{system.name} ({system.nics_per_node} x {system.nic_Gbps:g} Gb/s per node), even in the most "
                     f"bytes its algorithms send: a fabric running far below its rating (links, NCCL_IB_HCA, "
                     f"GPUDirect RDMA off) or a description not of this cluster; what the description prices (a node "
                     f"never measured across nodes, other ranks per node) assumes that rating")
    if nics_contradicted(model, system):
        notes.append(f"the fitted crossing moves {_reached_node_Bps(model) / 1e9:.0f} GB/s through each node's NICs "
                     f"(in the fewest bytes its algorithms send), more than {system.name}'s {system.nics_per_node} x "
                     f"{system.nic_Gbps:g} Gb/s NICs per node carry ({system.nic_Bps_per_node / 1e9:.0f} GB/s at "
                     f"their full rate): in-network reduction (SHARP), a multi-node NVLink domain, or a description "
                     f"that does not match the measured cluster; its NICs bound no prediction here")
    return notes


# Healthy 2-node logs move well over half of their NICs' rate at their largest size, most of them near all of it
# (the efficiencies in docs/model-validation.md); a crossing under a quarter of it ran on a fabric below its rating.
_SLOWEST_NIC_SHARE = 0.25
_BYTES_RULE_FROM = 256 << 20
"""A sweep that ends below this size may end while latency still rules: its rate says nothing of the NICs."""


def _nic_share_reached(model: FittedTopology, system: SystemDescription) -> float:
    """The largest share of the described NICs its ranks reach (:func:`~pybench.model.crossing.nics_reached`) that
    the fitted crossing moves at its largest size, in the most bytes its algorithms send (the kindest reading), over
    its multi-node layouts; 1 where no such layout, no measured GPU crossing, or a sweep too short to tell."""
    inter = model.inter
    if (model.backend not in GPU_BACKENDS or inter is None or inter.is_described or inter.is_preset
            or model.size_range[1] < _BYTES_RULE_FROM):
        return 1.0
    size = float(model.size_range[1])
    shares = [max(crossing_terms(model.schedule, model.collective, size, w, n, a)[1]
                  for a in crossing_algorithms(model.schedule, model.collective)) * size / model._time(size, w, n)[0]
              / (nics_reached(system, ranks_at_the_nics(model.collective, w, n)) * system.nic_Gbps * 1e9 / 8.0)
              for w, n in model.fitted if n > 1 and w > 1]
    return max(shares, default=1.0)


def _reached_node_Bps(model: FittedTopology) -> float:
    """The most bytes per second the fit puts through a node's NICs at its largest size, over its multi-node
    layouts, counting the fewest bytes its schedule's algorithms send across (an all-reduce's tree: S out of
    each of two nodes; an all-to-all: every rank's share for the other nodes); 0 without such a layout."""
    size = float(model.size_range[1])
    rates = [min(crossing_terms(model.schedule, model.collective, size, w, n, a)[1]
                 for a in crossing_algorithms(model.schedule, model.collective)) * size / model._time(size, w, n)[0]
             for w, n in model.fitted if n > 1 and w > 1]
    return max(rates, default=0.0)


def nics_contradicted(model: FittedTopology, system: SystemDescription | None) -> bool:
    """Whether the fitted crossing outruns what the described NICs carry. Then they are not the measured
    cluster's, or something the description does not say carried the bytes (SHARP, an NVLink domain across
    hosts): the measurement stands, and the NICs bound nothing (no floor, no tree decided by their rate)."""
    inter = model.inter
    if system is None or inter is None or inter.is_described or inter.is_preset:
        return False
    return _reached_node_Bps(model) > _TOLERANCE * system.nic_Bps_per_node


def implausible_regimes(model: FittedTopology, system: SystemDescription) -> list[str]:
    """One note per fitted regime whose bandwidth is above what the described fabric or NICs carry though the
    fit never reaches it (a slope under a large latency): its figures are the sweep's shape, not the link's."""
    notes = []
    links = [("intra-node", model.intra, system.intra_Bps_per_gpu, f"the {system.intra_GBps_per_gpu:g} GB/s per GPU "
              f"that {system.name}'s {system.intra_fabric} carries")] if model.backend in GPU_BACKENDS else []
    links.append(("inter-node", model.inter, _BUSBW_PER_NIC_RATE.get(model.collective, 1.0) * system.nic_Bps_per_node,
                  f"what {system.name}'s {system.nics_per_node} x {system.nic_Gbps:g} Gb/s NICs per node carry"))
    for which, link, bound, what in links:
        if link is None or link.is_described or link.is_preset:
            continue
        inter = which == "inter-node"  # a crossing's regimes count bytes through a node (an all-to-all's) or bus
        regimes, reached = link.all_regimes(), max(_reached_Bps(model, inter), _reached_node_Bps(model) if inter else 0)
        notes += [f"the {which} regime {k} of {len(regimes)} has a bus bandwidth of {r.busbw_Bps / 1e9:.0f} GB/s "
                  f"(latency {(r.base_s + r.step_s) * 1e6:.0f} us), above {what}, though no fitted size runs that "
                  f"fast: the regime's figures are the sweep's shape, not the link's rates"
                  for k, r in enumerate(regimes, 1)
                  if r.busbw_Bps > _TOLERANCE * bound >= _TOLERANCE * reached]
    return notes
