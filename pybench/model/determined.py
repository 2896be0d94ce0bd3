"""What these inputs cannot determine: the layouts for which a topology model says so instead of a time.

A GPU count never measured on a node whose GPUs are not switched (a mesh, PCIe), shown by its
description or by measured counts that one cost shape cannot join; one GPU count of a GPU node
without a description (one count cannot show a switch); CPU ranks across nodes at a count per node
never fitted there; a world beyond the hosts of an NVLink domain that its fit never crossed; other node
counts of a fit whose small sizes wait longer per network step than any calibrated system's. Each answer
names the missing input and the measurement to make.
"""

from __future__ import annotations

import math
from typing import Protocol

from pybench.collectives import measure_command
from pybench.model.beyond_sweep import BANDWIDTH_PROTOCOL_BYTES
from pybench.model.calibration import EXTRAPOLATED_KINDS, Calibration, load_calibration
from pybench.model.crossing import ModelLinks, ranks_per_node, regime_crossing_s
from pybench.model.link_presets import PRESETS
from pybench.model.nvlink_domains import nvlink_domain_ranks
from pybench.model.system import GPU_BACKENDS, LARGEST_NVLINK_DOMAIN_GPUS, most_gpus_per_node
from pybench.model.topology_schedules import algorithm_steps, crossing_terms
from pybench.sizes import format_size


class FittedModel(ModelLinks, Protocol):
    """What deciding reads of a :class:`pybench.model.topology.TopologyModel`."""

    @property
    def size_range(self) -> tuple[int, int]: ...

    @property
    def backend(self) -> str: ...
    @property
    def layout_misses(self) -> tuple[tuple[int, int, float], ...]: ...
    def inside_nvlink_domain(self, world: int) -> bool: ...

# A fitted layout the one cost shape misses by more than this (median): the layouts do not follow
# one algorithm on one fabric, so the GPU counts in between and beyond are not determined by them.
OWN_MISS = 0.15
# The fastest PCIe link of one GPU: a switched NVLink node (NVSwitch) runs far above it.
PCIE_BPS = max(p.bandwidth_Bps for p in PRESETS.values() if p.name.startswith("pcie"))
# A pipeline fill that costs more than the bytes it precedes is no fill: the fit is bending the
# bandwidth to GPU counts that got different links.
FILL_SHARE = 0.5


def undetermined(model: FittedModel, world: int, nodes: int, size: float = 0.0,
                 calibration: Calibration | None = None) -> str:
    """Why no model can answer for this layout (``nodes`` in the model's nodes), or at ``size`` there, from these
    inputs (``calibration``: the shipped one unless given), or ''."""
    return (_layout_undetermined(model, world, nodes) or _size_undetermined(model, world, nodes, size)
            or _steps_undetermined(model, world, nodes, calibration or load_calibration()))


def _steps_undetermined(model: FittedModel, world: int, nodes: int, calibration: Calibration) -> str:
    """A layout across nodes that was not fitted, when the fitted sweeps' small sizes wait longer per step across
    nodes than the systems the calibration was chosen on allow (:func:`slow_network_steps`)."""
    if nodes < 2 or (world, nodes) in model.fitted or model.inside_nvlink_domain(world):
        return ""
    slow = slow_network_steps(model, calibration)
    return (f"not determined by these inputs: {slow}, and nothing carries it to {world} ranks on {nodes} nodes, at "
            f"any size (that latency is in every size's time); measure it with "
            f"{measure_command(model.collective, world)} on {nodes} nodes") if slow else ""


def slowest_allowed_step_s(calibration: Calibration) -> float:
    """The longest small-size latency per step across nodes that the intervals stand for: the slowest of the
    calibration's systems (:attr:`~pybench.model.calibration.Calibration.slowest_network_step_s`), and as far
    beyond it as their steps stray from each other (the crossing latency half-width: the next system may lie as
    far from the slowest as they lie from one another); 0 without such a system."""
    return calibration.slowest_network_step_s * math.exp(calibration.crossing_latency_half_width)


def slow_network_steps(model: FittedModel, calibration: Calibration) -> str:
    """Why a fitted inter-node link's small sizes are no network's hops, or '': they wait longer per step across
    nodes (:func:`fitted_network_step_s`) than :func:`slowest_allowed_step_s`, so that time is something else (a
    congested fabric, a fallback transport, software), which the cost shape that carries hops to other layouts
    does not carry and no interval was calibrated for."""
    link, bound = model.inter, slowest_allowed_step_s(calibration)
    if link is None or link.is_preset or link.is_described or not bound > 0:
        return ""
    step = fitted_network_step_s(model)
    if step <= bound:
        return ""
    return (f"the fitted sweeps' small sizes wait {step * 1e6:.0f} us per step across nodes, longer than the "
            f"systems the intervals were calibrated on allow ({bound * 1e6:.0f} us: their slowest step, "
            f"{calibration.slowest_network_step_s * 1e6:.0f} us, and as far again as their steps stray from each "
            f"other): that time is not the network's hops (a congested fabric, a fallback transport, software)")


def fitted_network_step_s(model: FittedModel) -> float:
    """The latency per step across nodes of the inter-node link's smallest-size regime at the fitted multi-node
    layouts (its per-call latency spread over the schedule's steps there; the least of the layouts), where the
    layout's sweep resolved the small sizes' latency, as the calibration's were read: on GPUs, that regime is a
    small-size protocol (not the one at :data:`BANDWIDTH_PROTOCOL_BYTES`; a sweep from large sizes up runs the
    bandwidth protocol alone), elsewhere latency takes at least half of the time at the sweep's smallest size.
    0 without such a layout."""
    assert model.inter is not None
    regimes = model.inter.all_regimes()
    first, steps = regimes[0], []
    smallest = {(w, n): lo for w, n, lo, _ in getattr(model, "layout_sizes", ())}
    for w, n in model.fitted:
        hops = crossing_terms(model.schedule, model.collective, 1.0, w, n, first.algorithm)[0] if n > 1 else 0
        if hops <= 0:
            continue
        latency = first.base_s + hops * first.step_s
        if model.backend in GPU_BACKENDS:
            at_probe = min(regimes, key=lambda r: regime_crossing_s(r, model.schedule, model.collective,
                                                                    BANDWIDTH_PROTOCOL_BYTES, w, n)[0])
            resolved = at_probe is not first
        else:
            low = smallest.get((w, n), model.size_range[0])
            total = regime_crossing_s(first, model.schedule, model.collective, low, w, n)[0]
            resolved = total > 0 and latency / total >= 0.5
        if resolved:
            steps.append(latency / hops)
    return min(steps, default=0.0)


def _size_undetermined(model: FittedModel, world: int, nodes: int, size: float) -> str:
    """A GPU crossing of nodes at a size from NCCL's bandwidth protocol up, when every fitted sweep ended below it:
    the rate that protocol reaches across the network was never measured (as a sweep's own curve says,
    :meth:`pybench.model.piecewise_model.AlphaBetaModel.undetermined_at`)."""
    top = model.size_range[1]
    if nodes < 2 or model.backend not in GPU_BACKENDS or model.inter is None or model.inter.is_preset \
            or model.inter.is_described or not top < BANDWIDTH_PROTOCOL_BYTES <= size:
        return ""
    return (f"not determined by these inputs: every sweep across nodes ended by {format_size(top)}, below "
            f"{format_size(BANDWIDTH_PROTOCOL_BYTES)} where NCCL runs its bandwidth protocol (Simple) on every log "
            f"here, so the rate that rules at {format_size(int(size))} is not measured; measure it with "
            f"{measure_command(model.collective, world, f' --sizes {format_size(top)}:{format_size(int(size))}')} on "
            f"{nodes} nodes")


def _layout_undetermined(model: FittedModel, world: int, nodes: int) -> str:
    system = model.system
    measured = {w for w, n in model.fitted if n == 1}
    disagree = _gpu_counts_disagree(model)
    gpus = model.backend in GPU_BACKENDS
    if nodes == 1 and world not in measured and disagree:
        why = ("so the GPU counts get different links (an NVLink mesh or PCIe, not a switch)" if gpus else
               "so the rank counts do not share one cost shape (caches, memory channels or sockets)")
        return (f"not determined by these inputs: {disagree}, {why} and only a measurement at {world} "
                f"{'GPUs' if gpus else 'ranks'} says what they get; measure it with "
                f"{measure_command(model.collective, world)}")
    # a description's fabric is its GPUs': CPU ranks share the node's memory whatever it says
    if nodes == 1 and gpus and system is not None and not system.switched and world not in measured:
        subset = ("a subset of the GPUs has a subset of the links (and how many rings NCCL finds over the links is "
                  "no rate a description gives)" if world < system.gpus_per_node else
                  "how many rings NCCL finds over the links is no rate a description gives")
        return (f"not determined by these inputs: on {system.name}'s {system.intra_fabric} fabric {subset}, so only "
                f"a measurement at {world} GPUs says what they get (measured: "
                f"{', '.join(map(str, sorted(measured))) or 'none in one node'}); measure it with "
                f"{measure_command(model.collective, world)}")
    per_node = world // nodes if nodes else world
    per_node_measured = measured | {w // n for w, n in model.fitted if n > 1}
    if nodes > 1 and gpus and per_node > 1 and per_node not in per_node_measured and _intra_fitted(model) \
            and ((system is not None and not system.switched) or disagree):
        # the leg inside each node is the one-node case above: its GPUs get other links than any measured
        fabric = f"{system.name}'s {system.intra_fabric} fabric" if system is not None and not system.switched \
            else f"this node ({disagree})"
        return (f"not determined by these inputs: {per_node} GPUs per node were never measured, and on {fabric} "
                f"that many GPUs get other links than the measured "
                f"{', '.join(map(str, sorted(per_node_measured)))} per node, inside each node before the network; "
                f"measure it with {measure_command(model.collective, world)} on {nodes} nodes, or "
                f"{measure_command(model.collective, per_node)} on one node")
    most = max(most_gpus_per_node(), *per_node_measured, *(w for w, n in model.fitted if n == 1), 1)
    if nodes > 1 and gpus and system is None and per_node > most and not model.inside_nvlink_domain(world):
        # (2048 ranks per node priced 1 GiB 5x faster than the 16 ranks on the same 2 nodes measured)
        return (f"not determined by these inputs: {per_node} GPUs per node, more than any named system's node holds "
                f"or any layout was fitted at ({most}); give the node's description (--system NAME|FILE), or "
                f"measure it with {measure_command(model.collective, world)} on {nodes} nodes")
    across_missed = _node_counts_disagree(model)
    # (at one fitted node count, its other ranks per node are another GPU count per node: not this rule's)
    fitted_nodes = {n for w, n in model.fitted if n > 1}
    # (not even between two fitted node counts: the shape's own times there are what it missed, so they bound
    # nothing)
    if nodes > 1 and across_missed and (world, nodes) not in model.fitted \
            and nodes not in {n for w, n in model.fitted if n > 1 and w // n == per_node} \
            and (len(fitted_nodes) > 1 or nodes not in fitted_nodes):
        return (f"not determined by these inputs: one cost shape misses the measured {across_missed} (median), so "
                f"these sweeps do not follow one algorithm on one network (an algorithm switch between node counts, "
                f"or at fixed sizes to a slower one) and only a measurement at {nodes} nodes says what they take; "
                f"measure it with {measure_command(model.collective, world)} on {nodes} nodes")
    domain = nvlink_domain_ranks(model)
    if nodes > 1 and domain > LARGEST_NVLINK_DOMAIN_GPUS and (world, nodes) not in model.fitted:
        return (f"not determined by these inputs: the fit's bus bandwidth outruns any NIC, so its hosts share NVLink "
                f"domains, and its {domain} ranks are more than one domain holds ({LARGEST_NVLINK_DOMAIN_GPUS} GPUs at "
                f"most): its figures mix NVLink and the network in shares no input says; refit with --system "
                f"NAME|FILE (its NVLink domain size), or measure it with {measure_command(model.collective, world)}")
    if nodes > 1 and domain and world > domain and not model.inside_nvlink_domain(world):
        assert model.inter is not None
        return (f"not determined by these inputs: the inter-node figures were fitted inside an NVLink domain "
                f"({model.inter.busbw_Bps / 1e9:.0f} GB/s bus bandwidth, more than {ranks_per_node(model)} ranks "
                f"per node push through any NIC; {domain} ranks), and {world} ranks cross the network beyond "
                f"it, which no input measures (those figures are only a lower bound on the time); measure it "
                f"with {measure_command(model.collective, world)}, or, where they spanned several domains, fit "
                f"them with --system NAME|FILE (its NVLink domain size) so that the network joins domains")
    across = {w // n for w, n in model.fitted if n > 1}
    if nodes > 1 and not gpus and len(across) == 1 and per_node not in across:
        return (f"not determined by these inputs: MPI ranks fitted across nodes at {across.pop()} ranks per node "
                f"only; at {per_node} the bottleneck moves between the node's memory, its reductions and its NICs "
                f"(which every rank shares), and one count cannot show where; measure it with "
                f"{measure_command(model.collective, world)} on {nodes} nodes")
    counts = sorted({n for w, n in model.fitted if n > 1})
    if nodes > 1 and not gpus and len(counts) == 1 and nodes not in counts and model.inter is not None \
            and not (model.inter.is_described or model.inter.is_preset):
        return (f"not determined by these inputs: MPI ranks fitted across nodes at {counts[0]} nodes only; an MPI "
                f"library chooses its algorithm by the number of ranks (Open MPI's tuned rules, MPICH's thresholds) "
                f"and a network's latency may grow with the nodes faster than any tree, so one node count cannot "
                f"say what another takes (OSU on cloud CPU clusters ran 4x slower on 256 nodes than on 128 at every "
                f"size); fit two or more node counts, or measure it with {measure_command(model.collective, world)} "
                f"on {nodes} nodes")
    outside = not min(measured, default=0) < world < max(measured, default=0)
    if nodes == 1 and gpus and system is None and len(measured) > 1 and world not in measured and outside \
            and _intra_fitted(model) and model.intra is not None and model.intra.busbw_Bps <= PCIE_BPS:
        # Counts that join in one shape at a rate no NVSwitch runs at: PCIe or part of a mesh, where more or
        # fewer GPUs may cross another CPU socket or PCIe switch, or other links, than the measured ones.
        return (f"not determined by these inputs: the GPUs measured at {', '.join(map(str, sorted(measured)))} "
                f"reach {model.intra.busbw_Bps / 1e9:.0f} GB/s bus bandwidth, no more than PCIe carries "
                f"({PCIE_BPS / 1e9:.0f} GB/s), so they are on PCIe or part of an NVLink mesh, where {world} GPUs "
                f"may cross links the measured ones did not (another CPU socket or switch); give the node's "
                f"description (--system NAME|FILE) or measure it with {measure_command(model.collective, world)}")
    if nodes == 1 and system is None and len(measured) == 1 and world not in measured and _intra_fitted(model) \
            and model.backend in GPU_BACKENDS:
        # One count cannot show a switch: 4 GPUs of a DGX-1's cube mesh get half the links 8 do.
        return (f"not determined by these inputs: one GPU count ({measured.pop()}) measured in one node and "
                f"its fabric not described: on a switch (NVSwitch) every count keeps the same links, on an "
                f"NVLink mesh or PCIe each count gets others; give the node's description (--system NAME|FILE: "
                f"its named system, such as dgx-a100 for an NVSwitch node or dgx-1-v100 for an NVLink mesh, or "
                f"a file of yours) or measure it with "
                f"{measure_command(model.collective, world)}")
    return ""


def _intra_fitted(model: FittedModel) -> bool:
    return model.intra is not None and not (model.intra.is_preset or model.intra.is_described)


def _gpu_counts_disagree(model: FittedModel) -> str:
    """What in the single-node fit says its GPU counts do not share one fabric, or ''.

    On a switch every GPU keeps its links whatever the count, so one cost shape joins the counts
    with a small pipeline fill. Where it misses a count, or needs a "fill" costing more than the
    bytes themselves at some count, the counts got different links."""
    link = model.intra
    worlds = sorted(w for w, n in model.fitted if n == 1)
    if link is None or link.is_preset or link.is_described or len(worlds) < 2:
        return ""  # one GPU count cannot show that counts differ
    missed = [(w, m) for w, n, m in model.layout_misses if n == 1 and m > OWN_MISS]
    if missed:
        return (f"one cost shape misses the measured "
                f"{', '.join(f'{w}-rank sweep by {100 * m:.0f}%' for w, m in missed)} (median)")
    fill = {w: link.extra_steps / (algorithm_steps(model.collective, model.algorithm, w)[1] + link.extra_steps)
            for w in worlds}
    heavy = {w: f for w, f in fill.items() if f > FILL_SHARE}
    if heavy:
        return (f"joining the measured {', '.join(map(str, worlds))}-rank sweeps takes a pipeline fill of "
                f"{', '.join(f'{100 * f:.0f}% of the bandwidth time at {w} ranks' for w, f in heavy.items())}, "
                f"more than the bytes themselves")
    return ""


def _node_counts_disagree(model: FittedModel) -> str:
    """The fitted multi-node layouts the one cost shape misses by more than :data:`OWN_MISS` (median), or ''.
    Across several node counts the counts do not follow one algorithm on one network; at one, its sizes do not
    follow the shape carried to other counts (a library that switches algorithm at fixed sizes, to a slower one)."""
    missed = [(w, n, m) for w, n, m in model.layout_misses if n > 1 and m > OWN_MISS]
    return ", ".join(f"{w}-rank {n}-node sweep by {100 * m:.0f}%" for w, n, m in missed)


def own_miss_span(model: FittedModel, kind: str, across: bool) -> float:
    """Log span an extrapolated prediction (another GPU or node count) takes from its link class's fitted layouts:
    where the one cost shape misses them by m (median), no other layout is known better than that, so log(1 + m)
    of the largest such miss joins what the inputs cannot determine (0 elsewhere)."""
    if kind.split(",")[0] not in EXTRAPOLATED_KINDS:
        return 0.0
    return math.log1p(max((m for _, n, m in model.layout_misses if (n > 1) == across), default=0.0))
