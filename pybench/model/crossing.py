"""Across nodes: what an operation pays to cross the network, given a topology model's links.

The schedule's bytes go through the busiest NIC at the slower link's rate, in the fastest of the
inter-node link's regimes, plus a leader schedule's phase inside each node; a node's NICs bound
every layout from below (:func:`nic_floor_s`); a fitted "inter-node" link faster than any NIC is
an NVLink domain that spans hosts (:func:`pybench.model.nvlink_domains.nvlink_domain_ranks`).
"""

from __future__ import annotations

import dataclasses
import math
from typing import Protocol

import numpy as np

from pybench.errors import UsageError
from pybench.model.calibration import Z95, load_calibration
from pybench.model.link_cost import LinkCost, regime_label
from pybench.model.link_presets import PRESETS
from pybench.model.system import GPU_BACKENDS, SystemDescription, most_gpus_per_node, most_ports_per_gpu
from pybench.model.topology_schedules import crossing_bytes, crossing_terms, intra_node_ranks


class ModelLinks(Protocol):
    """What crossing the network reads of a :class:`pybench.model.topology.TopologyModel`."""

    @property
    def collective(self) -> str: ...
    @property
    def algorithm(self) -> str: ...
    @property
    def schedule(self) -> str: ...
    @property
    def intra(self) -> LinkCost | None: ...
    @property
    def inter(self) -> LinkCost | None: ...
    @property
    def fitted(self) -> tuple[tuple[int, int], ...]: ...
    @property
    def system(self) -> SystemDescription | None: ...
    @property
    def inter_absorbs_intra(self) -> bool: ...
    @property
    def backend(self) -> str: ...
    @property
    def rails_ranks(self) -> int: ...


def across_nodes(model: ModelLinks, size: float, world: int, sharing: int = 1,
                 nodes: int = 2, rails: float | None = None) -> tuple[float, str, str]:
    """Across nodes: the schedule's bytes through the busiest NIC (shared by ``sharing`` groups) at
    the slower link's rate, in the fastest of the inter-node link's regimes, plus a leader
    schedule's phase inside each node where the intra-node link prices it (:func:`_intra_phase_s`).
    ``rails``: a factor on the fitted bandwidth, the other reading of :func:`unknown_nic_share`."""
    assert model.inter is not None
    # A preset NIC is a port rate: the ring's legs inside each node can be the slower link. A fitted
    # inter-node link was measured end to end, those legs included, and fitted without this cap:
    # capping it again would move the prediction off the very sweeps it was fitted to.
    unmeasured = model.inter.is_preset or model.inter.is_described
    intra_bw = model.intra.busbw_Bps if model.intra and unmeasured else math.inf
    rails = own_rails(model, world, nodes, sharing) if rails is None else rails
    share = _described_reach(model, ranks_at_the_nics(model.collective, world, nodes, sharing))
    # the reached NICs carry their share of what all of the node's do, whatever the node's own links carry (a fitted
    # crossing's rate is the measured cluster's: only the floor of :func:`nic_floor_s` bounds it)
    efficiency = model.inter.nic_efficiency or load_calibration().efficiency(model.collective)
    reach = (share * model.system.nic_Bps_per_node * efficiency
             if model.system is not None and share < 1.0 and unmeasured else math.inf)
    times, labels = [], []
    for r in model.inter.all_regimes():
        own = node_links_cap_Bps(model.collective, model.schedule, r.algorithm, world, nodes, intra_bw)
        time_s, label = regime_crossing_s(r, model.schedule, model.collective, size, world, nodes,
                                          min(r.busbw_Bps * rails / sharing, reach / sharing, own))
        times.append(time_s)
        labels.append(label)
    k = int(np.argmin(times))
    label = labels[k]
    inside = _intra_phase_s(model, size, world, nodes)
    if inside:
        label += f" + intra-node phase on {world // nodes} ranks"
    return times[k] + inside, label, regime_label(model.inter, k)


def bytes_pass_node_links(collective: str) -> bool:
    """Whether the bytes a crossing sends through a node's NICs pass the node's own links too, so that the slower of
    the two rules: a ring's do, leg after leg; an all-to-all's for other nodes leave by the NICs alone (its own
    ranks' share goes over NVLink apart)."""
    return collective != "alltoall"


def node_links_cap_Bps(collective: str, schedule: str, algorithm: str, world: int, nodes: int,
                       node_busbw_Bps: float) -> float:
    """The fastest a crossing's bytes may go, in its own units (its bytes through a NIC per second), where they
    pass the node's own links (inf where they do not): no faster than those links run the collective's ring over
    every rank, whose bus bandwidth ``node_busbw_Bps`` is. A tree that crosses fewer bytes than the ring (S per
    node on two nodes, not 2(p-1)/p S) still moves every byte through each GPU's links: its bus bandwidth, not its
    rate through the NICs, is what the node's links bound."""
    if not bytes_pass_node_links(collective) or not math.isfinite(node_busbw_Bps) or world <= nodes:
        return math.inf  # (one rank per node sends from its GPU straight to the NICs)
    ring = crossing_terms(schedule, collective, 1.0, world, nodes, "ring")[1]
    mine = crossing_terms(schedule, collective, 1.0, world, nodes, algorithm)[1]
    return node_busbw_Bps * mine / ring if ring > 0 else node_busbw_Bps


def regime_crossing_s(r: LinkCost, schedule: str, collective: str, size: float, world: int, nodes: int,
                      busbw_Bps: float | None = None) -> tuple[float, str]:
    """(time, what is priced) of one inter-node regime across ``nodes`` nodes, at ``busbw_Bps`` if given
    (the NICs shared, or the node's links slower) else at its own."""
    hops, data, fill, label = crossing_terms(schedule, collective, size, world, nodes, r.algorithm)
    busbw = r.busbw_Bps if busbw_Bps is None else busbw_Bps
    latency = r.base_s + hops * r.step_s + network_steps(collective, nodes) * r.node_step_s
    return latency + (data + fill * r.extra_steps) * size / busbw, label


def network_steps(collective: str, nodes: int) -> int:
    """The node boundaries a ring's chunk passes on its path (NCCL's tuning model): an all-gather's or a
    reduce-scatter's ``nodes - 1``; a broadcast's or a reduce's, and each of an all-reduce's two passes, ``nodes``."""
    return nodes - 1 if collective in ("allgather", "reducescatter") else nodes


def ranks_at_the_nics(collective: str, world: int, nodes: int, sharing: int = 1) -> int:
    """Ranks of a node whose bytes cross its NICs, of every one of ``sharing`` groups: each rank's, but a
    send/recv's. Its ring of ranks leaves each node once, one rank's flow of each group, whatever the ranks per node
    (the others send to ranks of their own node): its fitted rate is that rank's, with one GPU's NICs (a public H100
    cluster's 2-node send/recv ran alike at 1, 2, 4 and 8 GPUs per node)."""
    return sharing if collective == "sendrecv" else world // nodes * sharing


def _described_reach(model: ModelLinks, per_node: int) -> float:
    """The share of a described node's NICs that ``per_node`` ranks reach: those of their own GPUs (each GPU's
    nearest, ``nics / gpus`` of them, at least one), where fewer ranks than GPUs run on the node; 1 elsewhere. A
    lone rank cannot send through the NICs of GPUs that run nothing. Whether the crossing was described or fitted:
    a fit at more ranks per node says nothing of what fewer may reach, its description does."""
    system = model.system
    if (model.inter is None or model.inter.is_preset or system is None or per_node >= system.gpus_per_node
            or model.backend not in GPU_BACKENDS):  # CPU ranks are no GPU's: every NIC of the node is theirs
        return 1.0
    return nics_reached(system, per_node) / system.nics_per_node


def nics_reached(system: SystemDescription | None, ranks: int) -> float:
    """The NICs ``ranks`` ranks of a node drive on rails: their own GPUs' (``nics / gpus`` each, at least one; all
    of them from as many ranks as GPUs) on a described node; one each without a description."""
    if system is None:
        return float(ranks)
    return float(min(math.ceil(ranks * system.nics_per_node / system.gpus_per_node), system.nics_per_node))


def own_rails(model: ModelLinks, world: int, nodes: int, sharing: int = 1) -> float:
    """The factor on the fitted inter-node rate of a model fitted on rails (:attr:`TopologyModel.rails_ranks`) at
    ``world`` ranks on ``nodes`` nodes: the NICs their ranks reach over those the fitted most reached, up to 1 (more
    ranks than fitted are the other reading of :func:`unknown_nic_share`); 1 without rails, or for a link no sweep
    measured (a preset or a description prices its own NICs)."""
    if not model.rails_ranks or model.inter is None or model.inter.is_preset or model.inter.is_described:
        return 1.0
    asked = min(ranks_at_the_nics(model.collective, world, nodes, sharing), model.rails_ranks)
    return nics_reached(model.system, asked) / nics_reached(model.system, model.rails_ranks)


def _fitted_nic_ranks(model: ModelLinks) -> set[int]:
    """The ranks at a node's NICs (:func:`ranks_at_the_nics`) of each fitted multi-node layout."""
    return {ranks_at_the_nics(model.collective, w, n) for w, n in model.fitted if n > 1}


def unknown_nic_share(model: ModelLinks, world: int, nodes: int, sharing: int = 1) -> float | None:
    """The bandwidth factor of the other reading, where the inputs cannot say how many NICs the ranks
    of a node drive: None when they can.

    A fit of NCCL's ring schedule at r ranks per node, asked for q (of all ``sharing`` groups
    together): if what held the fitted rate is shared by the node (its NICs, or its own links), the
    fitted bandwidth stands; if each rank drives its own NIC (rails), it scales by q/r. A system
    description counts the NICs, so the rails reading scales by the NICs each count reaches (:func:`nics_reached`:
    a pair of GPUs sharing one NIC reach one); it cannot say
    whether the NICs were what held the fitted rate (on a public H100 cluster, four times the ranks of a node
    of 8 NICs did not move four times the bytes). Fits at several ranks-per-node counts tell, up to the most. A preset
    is one port per node: with q ranks per node the node may drive one port per rank or more, up to what
    named systems hold of that rate (:func:`~pybench.model.system.most_ports_per_gpu`).
    """
    # Open MPI's and the leader schedules price the bytes through the node's one NIC themselves
    if model.schedule != "ring" or model.inter is None or model.inter.is_described:
        return None
    per_node = ranks_at_the_nics(model.collective, world, nodes, sharing)  # of every group sharing the NICs
    if model.inter.is_preset:  # one port per node; the node may have one per rank (rails), or more
        return per_node * most_ports_per_gpu(model.inter.busbw_Bps) if per_node > 1 and model.system is None else None
    fitted = _fitted_nic_ranks(model)
    if model.rails_ranks and per_node < min(fitted):  # on rails below the fewest fitted: or their rate, flat
        least = min(fitted)
        return nics_reached(model.system, least) / nics_reached(model.system, model.rails_ranks)
    if model.rails_ranks and per_node > model.rails_ranks:  # fitted on rails: more ranks than any fitted may or
        fitted = {model.rails_ranks}                        # may not find NICs of their own
    if len(fitted) != 1 or per_node in fitted:
        return None
    if model.system is None:
        return per_node / fitted.pop()
    if model.backend not in GPU_BACKENDS:
        return None  # CPU ranks are no GPU's: they share every NIC, at whatever rate the fit found
    factor = nics_reached(model.system, per_node) / nics_reached(model.system, fitted.pop())
    return None if factor == 1.0 else factor


def nic_share_caveat(model: ModelLinks, per_node: int, nic_share: float) -> str:
    """What a prediction between the readings of :func:`unknown_nic_share` says of them."""
    if model.inter is not None and model.inter.is_preset:
        return (f"NICs per node unknown: the preset is one port, the {per_node} ranks of a node may drive "
                f"{round(nic_share)} (rails; named systems hold up to {nic_share / per_node:g} per GPU at this rate); "
                f"between the two, in the interval; give --system NAME|FILE to count them")
    if model.rails_ranks:  # fitted at several counts, on rails: beyond them, the rails or the nearest count's rate
        counts = sorted(_fitted_nic_ranks(model))
        at = f"{per_node} ranks per node" if per_node != 1 else "1 rank per node"
        nearest, way = (counts[0], "fewer") if per_node < counts[0] else (counts[-1], "more")
        return (f"{at}, {way} than fitted on rails ({', '.join(map(str, counts))}): between the rails' share of the "
                f"NICs and the {nearest} ranks' rate, in the interval")
    if model.system is None:
        at = f"{per_node} ranks per node" if per_node != 1 else "1 rank per node"
        return (f"NICs per rank unknown at {at} (fitted at {round(per_node / nic_share)}): "
                f"between the node's NICs shared and one NIC per rank, in the interval; give --system NAME|FILE "
                f"to say")
    ranks = f"{per_node} ranks per node drive" if per_node > 1 else "1 rank per node drives"
    return (f"{ranks} {nic_share:g}x the NICs of the fitted layout's on {model.system.name}, "
            f"but whether those NICs held its rate (or the node's own links did) no input says: between the two, "
            f"in the interval; fit that ranks-per-node count to know")


def _intra_phase_s(model: ModelLinks, size: float, world: int, nodes: int) -> float:
    """Time of the schedule's phase inside each node (leader schedules), 0 without one or without an
    intra-node link to price it with (then the inter-node fit has absorbed it)."""
    ranks = intra_node_ranks(model.schedule, model.collective, world, nodes)
    if not ranks or model.intra is None or model.inter_absorbs_intra:
        return 0.0
    return model.intra.time_s(model.collective, model.algorithm, size, ranks)


def nic_floor_s(model: ModelLinks, size: float, world: int, nodes: int, sharing: int = 1) -> float:
    """The least time a described node's NICs allow the crossing of ``world`` ranks on ``nodes`` nodes: its
    bytes through the NICs its ranks reach (:func:`_described_reach`) at their full rate, every group sharing
    them, no latency, in the fewest bytes NCCL's algorithms could send (without a description, what the fastest
    NICs would allow: :func:`_fastest_nics_floor_s`). No interval may promise less: what real logs reach is a share
    of this (the calibrated NIC efficiency)."""
    system, link = model.system, model.inter
    if link is None or nodes < 2:
        return 0.0
    if system is None:
        return _fastest_nics_floor_s(model, size, world, nodes, sharing)
    rate = system.nic_Bps_per_node * _described_reach(model, ranks_at_the_nics(model.collective, world, nodes,
                                                                                sharing)) / sharing
    # NCCL's double tree (S per node on two nodes) crosses fewer bytes than the ring, where it may run at all
    tree = model.collective == "allreduce" and model.schedule == "ring"
    algorithms = ("ring", "double-tree") if tree else ("ring",)
    bare = dataclasses.replace(link, base_s=0.0, step_s=0.0, node_step_s=0.0, extra_steps=0.0, regimes=())
    return min(regime_crossing_s(dataclasses.replace(bare, algorithm=a), model.schedule, model.collective, size,
                                 world, nodes, rate)[0] for a in algorithms)


# The fastest NIC any preset knows, per port: a GPU behind one such port cannot move more.
FASTEST_NIC_BPS = max(p.bandwidth_Bps for p in PRESETS.values() if p.link_class == "inter-node")


def _fastest_nics_floor_s(model: ModelLinks, size: float, world: int, nodes: int, sharing: int = 1) -> float:
    """Without a description, the least time any NIC allows a crossing of GPUs: each rank at a node's NICs behind
    its own port of the fastest NIC any preset knows, sending the fewest bytes any algorithm sends (an all-reduce
    reduced in the switch: S out of each node), no latency; 0 for CPU ranks (a node's ranks share its NICs), for a
    send/recv (one flow may use several NICs), and on fewer nodes than the fewest a fitted crossing ran on: hosts
    no description places may share an NVLink domain (GB300 racks: 2 hosts of a 32-host fit ran 3.6x faster)."""
    fitted = [n for _, n in model.fitted if n > 1]
    if model.backend not in GPU_BACKENDS or model.collective == "sendrecv" or not fitted or nodes < min(fitted):
        return 0.0
    data = 1.0 if model.collective == "allreduce" else crossing_terms(model.schedule, model.collective, size, world,
                                                                         nodes, "ring")[1]
    return data * size / (FASTEST_NIC_BPS * ranks_at_the_nics(model.collective, world, nodes, sharing) / sharing)


def tree_or_ring_caveat(backend: str, described: bool) -> str:
    """What a prediction at another node count of an all-reduce fitted at one node count leaves open."""
    tree, ring = ("NCCL's tree", "its ring") if backend != "mpi" else ("a tree, as MPI libraries run", "a ring")
    return (f"fitted at one node count, the all-reduce may have crossed by {tree} (its bytes per node grow with "
            f"the nodes) or {ring} (they do not): between the two, in the interval; a second node count tells "
            f"them apart" + ("" if described else
                             ", and so may --system NAME|FILE (NICs too slow for the ring's bytes)")
            + (", or a sweep run with NCCL_ALGO=Ring or Tree" if backend != "mpi" else ""))


def ranks_per_node(model: ModelLinks) -> int:
    """The most ranks per node among the model's multi-node layouts (0 without one)."""
    return max((w // n for w, n in model.fitted if n > 1), default=0)


def unknown_tree_bytes(model: ModelLinks, world: int, nodes: int) -> LinkCost | None:
    """The inter-node link read with the double binary tree's bytes, where the inputs cannot say whether
    the fitted all-reduce ran NCCL's tree or its ring across nodes: None when they can.

    At the one layout of the fit the two readings are the same time, so nothing measured tells them
    apart; at another node count they part by up to 2x (the tree's bytes per node grow from S on two
    nodes towards 2S, the ring's stay put; see :func:`~pybench.model.topology_schedules.crossing_bytes`).
    Fits at several layouts choose per regime; a system description chooses only where the ring's
    bytes could not have gone through its NICs (:func:`tree_bytes_on_nics`).
    """
    fitted = tree_or_ring_fitted(model)
    if fitted is None or nodes == fitted[1]:
        return None
    assert model.inter is not None
    return as_double_tree(model.inter, *fitted)


def tree_or_ring_fitted(model: ModelLinks) -> tuple[int, int] | None:
    """The one (world, nodes) an all-reduce's crossing was fitted at, where its regimes cannot tell NCCL's
    tree from its ring (all ``tree``: the ring's bytes, a tie); None otherwise."""
    inter = model.inter
    layouts = {(w, n) for w, n in model.fitted if n > 1}
    if (inter is None or inter.is_preset or inter.is_described or len(layouts) != 1 or model.schedule != "ring"
            or model.collective != "allreduce" or not all(r.algorithm == "tree" for r in inter.all_regimes())):
        return None
    return next(iter(layouts))


def chain_latency(model: ModelLinks, world: int, nodes: int) -> LinkCost | None:
    """The inter-node link with its latency scaled as the chain inside each node grows, where an all-reduce's
    tree crossing was fitted at one count of ranks per node and is asked at another; None elsewhere.

    NCCL's tree pays a step per rank of the chain inside each node and one per level between nodes, so
    its latency at r ranks per node over 2^L nodes grows as (r - 1 + L); a fit at one count cannot say how
    much of its latency is that chain. A reach-only reading: it widens the interval, the answer stays."""
    inter = model.inter
    fitted = {(w // n, n) for w, n in model.fitted if n > 1}
    per_node = world // nodes
    if (inter is None or inter.is_preset or inter.is_described or len(fitted) != 1 or model.schedule != "ring"
            or model.collective != "allreduce" or any(r.algorithm == "ring" for r in inter.all_regimes())):
        return None
    (r, n0), = fitted
    if per_node == r:
        return None
    levels = math.ceil(math.log2(n0))
    factor = (per_node - 1 + levels) / (r - 1 + levels)
    regimes = [dataclasses.replace(x, base_s=x.base_s * factor, step_s=x.step_s * factor) for x in inter.all_regimes()]
    return dataclasses.replace(regimes[-1], regimes=tuple(regimes[:-1]))


def as_double_tree(inter: LinkCost, world: int, nodes: int) -> LinkCost:
    """``inter``'s ``tree`` regimes (ring bytes) as ``double-tree`` ones, the same time at (world, nodes)."""
    ratio = crossing_bytes("allreduce", "double-tree", world, nodes) / crossing_bytes("allreduce", "tree", world, nodes)
    regimes = [dataclasses.replace(r, busbw_Bps=r.busbw_Bps * ratio, extra_steps=r.extra_steps * ratio,
                                   algorithm="double-tree") if r.algorithm == "tree" else r
               for r in inter.all_regimes()]
    return dataclasses.replace(regimes[-1], regimes=tuple(regimes[:-1]))


def tree_bytes_on_nics(model: ModelLinks, nic_Bps_per_node: float, noise: float = 0.0) -> LinkCost | None:
    """With the node's NICs described: an ambiguous all-reduce crossing (see :func:`unknown_tree_bytes`)
    read with the tree's bytes where the ring's would need more than the NICs carry (no ring can), else
    None (either reading fits the NICs, and the prediction stays between them; or it is not ambiguous).

    ``noise``: the fit's relative scatter at its largest sizes. A ring that fills its NICs is fitted at
    their rate give or take that scatter, so only a rate beyond it (at 95%) rules the ring out."""
    fitted = tree_or_ring_fitted(model)
    if fitted is None or model.inter is None or model.inter.busbw_Bps <= nic_Bps_per_node * math.exp(Z95 * noise):
        return None
    return as_double_tree(model.inter, *fitted)


def one_node_model_nodes(topology, world_size: int | None, collective: str, world: int) -> int:
    """Nodes for ``world`` ranks of a model measured in one node: one up to the most GPUs its node's description
    holds, or else a one-node sweep or any named system's node does; beyond, the description's nodes, or the
    caller must say (64 ranks are not one 8-GPU node)."""
    system = getattr(topology, "system", None)
    if getattr(topology, "backend", "nccl") not in GPU_BACKENDS:
        return 1  # CPU ranks: a node's cores, which no one-node sweep bounds
    most = system.gpus_per_node if system is not None else max(
        [w for w, n in getattr(topology, "fitted", ()) if n == 1] + [world_size or 0, most_gpus_per_node()])
    if world <= most:
        return 1
    if system is not None and world % most == 0:
        return world // most
    holds = f"a node of {system.name} holds" if system is not None else "its one-node sweeps or any named node hold"
    raise UsageError(f"{world} ranks of the {collective} model: more than the {most} GPUs {holds}; give nodes= "
                     f"(--nodes N: how many nodes the ranks run on; 1 for one node)")
