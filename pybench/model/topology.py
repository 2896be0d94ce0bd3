"""A topology-aware cost model for collectives, shaped like NCCL's own tuning model.

NCCL prices an operation as a per-call latency, plus a per-step latency times the steps the algorithm takes, plus
the bytes over a per-rank bus bandwidth. pybench fits that shape, so one model answers for any (world, nodes):

    T(S, p) = base + hops(p) * step + (data_steps(p) + c) / p * S / B

``hops`` and ``data_steps`` come from the algorithm (ring all-reduce: 2(p-1) each; tree: 2 log2 p hops; NVLS:
a flat 2 hops); ``c`` is the ring's pipeline fill and drain in units of one step's data, which is why bus
bandwidth rises slowly with p on one NVSwitch node. The model is linear in (base, step, 1/B, c/B), so it is
fitted by weighted least squares on relative error, with no parameter below zero and none that the data
cannot tell apart (one world size cannot separate base from step).

Protocol regimes: a link's cost is the fastest of up to 4 algorithm x protocol frames (:mod:`pybench.model.regimes`).

Two link classes: intra-node parameters from single-node sweeps, inter-node ones from sweeps that cross nodes (or
a preset or a system description, labelled as such). Across nodes the operation pays the inter-node step latency
and runs at the inter-node bus bandwidth (fitted: measured end to end with the legs inside each node; a preset NIC
runs at most at the intra-node link's rate), every group crossing a node's NICs at once sharing them. Which ranks
cross them, with how many bytes, is the schedule (:mod:`pybench.model.topology_schedules`).

Uncertainty: every prediction says what it rests on (:data:`KINDS`) and carries a 95% interval calibrated for that
kind by leave-one-dataset-out validation (:mod:`pybench.model.calibration`), or says that its inputs cannot
determine it (a GPU count never measured on a fabric where a subset of GPUs has a subset of the links)."""

from __future__ import annotations

import dataclasses
import functools
import math
from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np

from pybench.errors import FileFormatError, UsageError
from pybench.io.model_names import TOPOLOGY_CROSSING_VERSION
from pybench.model.calibration import EXTRAPOLATED_KINDS, FITTED_SWEEP, Calibration, Spread, load_calibration
from pybench.model.crossing import (
    across_nodes,
    chain_latency,
    nic_floor_s,
    nic_share_caveat,
    ranks_at_the_nics,
    tree_bytes_on_nics,
    tree_or_ring_caveat,
    unknown_nic_share,
    unknown_tree_bytes,
)
from pybench.model.described_crossing import described_crossing, other_described_readings
from pybench.model.description_checks import fabric_mismatches, implausible_regimes, nics_contradicted
from pybench.model.determined import own_miss_span, undetermined
from pybench.model.link_cost import LinkCost, regime_label, unless_described
from pybench.model.link_presets import LinkPreset
from pybench.model.node_count_bounds import bounded_by_fitted_node_counts
from pybench.model.nvlink_domains import as_asked, nvlink_domain_ranks, whole_domains
from pybench.model.switch_reduction import switch_reduction_reach
from pybench.model.system import GPU_BACKENDS, SystemDescription, system_from_dict
from pybench.model.topology_prediction import TopologyPrediction
from pybench.model.topology_schedules import algorithm_steps, check_crossing_version, crossing_terms

# What a prediction rests on (TopologyPrediction.provenance), from the closest to a measurement.
OTHER_GPU_COUNT, OTHER_GPUS_PER_NODE, OTHER_NODE_COUNT, _ = EXTRAPOLATED_KINDS  # each its own widening
MEASURED, BETWEEN_SIZES = "measured", "between measured sizes"
DESCRIBED, PRESET = "system description", "preset"
OTHER_RANK_COUNT = "another rank count"  # what CPU ranks call another GPU count (calibrated as one; per node too)
KINDS = (MEASURED, BETWEEN_SIZES, OTHER_GPU_COUNT, OTHER_RANK_COUNT, OTHER_GPUS_PER_NODE, OTHER_NODE_COUNT,
         DESCRIBED, PRESET)  # another GPU count inside a node, or per node at a measured node count
CALIBRATED_NODES = 2  # nodes of every log a described or preset crossing is calibrated on
DESCRIBED_STEP_S = 2.0e-6  # per-step latency of a described intra-node link: NVLink's hop, as the presets take it


@dataclass(frozen=True)
class Observation:
    """One measured point used by the fit."""

    size_bytes: float
    world: int
    nodes: int
    time_s: float
    off_trend: bool = False  # slower than its sweep's trend (pybench.model.anomalies): scored, never fitted


@dataclass(frozen=True)
class TopologyModel:
    """Cost of one collective on one system, for any world size and node count."""

    collective: str
    algorithm: str
    intra: LinkCost | None
    inter: LinkCost | None
    fitted: tuple[tuple[int, int], ...]
    """(world, nodes) of every sweep the model was fitted on."""
    size_range: tuple[int, int]
    residual_sizes: tuple[float, ...] = field(repr=False, default=())
    residuals: tuple[float, ...] = field(repr=False, default=())
    notes: tuple[str, ...] = ()
    backend: str = ""
    schedule: str = "ring"
    """Across nodes: ``ring`` (one ring over every rank), ``hierarchical`` (inside each node first,
    then one ring over one leader per node) or ``openmpi`` (what Open MPI 5 runs: HAN or coll/tuned's
    choice by ranks and size); see :mod:`pybench.model.topology_schedules`."""
    inter_absorbs_intra: bool = False
    """True when the inter-node link was fitted to multi-node times that include the leader schedules'
    intra-node phase (no intra-node link to price it apart at fit time): that phase is then not added again."""
    system: SystemDescription | None = None
    """The hardware, when described: it fills the link classes not measured and bounds the layouts."""
    layout_misses: tuple[tuple[int, int, float], ...] = ()
    """(world, nodes, median relative miss) of each fitted layout: how far the one cost shape is from it."""
    layout_sizes: tuple[tuple[int, int, int, int], ...] = ()
    """(world, nodes, smallest, largest size) each fitted layout measured; empty in files from before it (then
    every layout is taken to span :attr:`size_range`)."""
    hosts_per_node: int = 1
    """Hosts one of the model's nodes spans: the trays of an NVLink domain when it was fitted on a system
    whose domain spans hosts (GB200 NVL72), so that the network joins domains, not trays. Layouts are
    asked in hosts and counted in domains (:meth:`network_nodes`); ``fitted`` holds domains."""
    rails_ranks: int = 0
    """Where sweeps at several ranks-per-node counts crossed at a rate that grows with them (each rank its own NICs:
    rails), the most of them, at which the inter-node rate was fitted; fewer ranks per node get their share
    (:func:`~pybench.model.crossing.own_rails`). 0: one rate through a node's NICs, whatever its ranks."""

    @functools.cached_property
    def _residual_arrays(self) -> tuple[np.ndarray, np.ndarray]:
        """(log2 size, residual) of the fit, as arrays once per model: every prediction reads them."""
        return np.log2(np.array(self.residual_sizes, dtype=float)), np.array(self.residuals, dtype=float)

    def _local_sigma(self, size: float) -> float:
        if not self.residuals:
            return 0.05
        log_sizes, res = self._residual_arrays
        distance = np.abs(log_sizes - math.log2(size))
        near = res[distance <= 1.0]
        if near.size < 3:  # a size far from every measured one: its nearest residuals
            near = res[np.argsort(distance)[:5]]
        return float(np.sqrt(np.mean(near ** 2)))

    def _provenance(self, size: float, world: int, nodes: int) -> tuple[str, float, bool]:
        """(kind, distance from what was fitted, whether that link class was fitted at one layout)."""
        layouts = [(w, n) for w, n in self.fitted if (n > 1) == (nodes > 1)]
        lo, hi = self.size_range
        size_distance = max(0.0, math.log(lo / size) if size < lo else math.log(size / hi) if size > hi else 0.0)
        beyond = ", beyond the measured sizes" if size_distance else ""
        if not layouts:  # never measured: a described or preset link prices it, calibrated on 2-node logs
            out = abs(math.log(nodes / CALIBRATED_NODES)) if nodes > 1 else 0.0  # so more nodes are further out
            link = self.intra if nodes == 1 else self.inter
            assert link is not None
            return (DESCRIBED if link.is_described else PRESET) + beyond, size_distance + out, True
        # The layouts that measured this size are what it rests on: a fitted layout whose own sweep never reached
        # it is another layout there (a 256-node sweep cut at 64 KiB, 1 GiB measured at 2 and 8 nodes).
        layouts = [x for x in layouts if self._measured_at(*x, size)] or layouts
        # Distance from what was measured, in log node count plus log ranks per node: 4 nodes from a
        # 2-node fit are as far out as 4 GPUs of a node from 2, and twice the world is one step, not two.
        distance = min(abs(math.log(nodes / n)) + abs(math.log(world * n / (w * nodes))) for w, n in layouts)
        if (world, nodes) in layouts:  # beyond its sizes the fitted sweep's layout is all that was measured
            kind = FITTED_SWEEP if beyond else MEASURED if size in self.residual_sizes else BETWEEN_SIZES
        elif nodes > 1 and nodes not in {n for _, n in layouts}:
            kind = OTHER_NODE_COUNT
        else:
            kind = OTHER_GPUS_PER_NODE if nodes > 1 else OTHER_GPU_COUNT
        return kind + beyond, distance + size_distance, len(layouts) == 1

    def _measured_span(self, world: int, nodes: int) -> tuple[int, int]:
        """The sizes a fitted layout's own sweep spans (:attr:`size_range` for any other layout, and for every layout
        in older files)."""
        return next(((a, b) for w, n, a, b in self.layout_sizes if (w, n) == (world, nodes)), self.size_range)

    def _measured_at(self, world: int, nodes: int, size: float) -> bool:
        lo, hi = self._measured_span(world, nodes)
        return lo <= size <= hi

    def why_undetermined(self, world: int, nodes: int) -> str:
        """Why these inputs cannot determine a layout's time ('' when they can); ``nodes`` in hosts."""
        return undetermined(self, world, self.network_nodes(world, nodes))

    def network_nodes(self, world: int, hosts: int) -> int:
        """The model's nodes that ``hosts`` hosts make: NVLink domains where a node is one (partly filled
        ones count), else the hosts themselves. UsageError when the hosts cannot hold the ranks."""
        if self.hosts_per_node == 1:
            return hosts
        _check_layout(world, hosts)
        per_host = self.system.gpus_per_node // self.hosts_per_node if self.system else 0
        if per_host and world // hosts > per_host:
            raise UsageError(f"{world // hosts} ranks per host exceed the {per_host} GPUs per host of "
                             f"{self.system.name if self.system else 'the system'}; give more --nodes")
        return -(-hosts // self.hosts_per_node)

    def predict(self, size_bytes: int, world: int, nodes: int = 1, sharing: int = 1,
                calibration: Calibration | None = None, nics_as_fitted: bool = False,
                nodes_are_hosts: bool = True) -> TopologyPrediction:
        """Predicted time of one operation of ``size_bytes`` on ``world`` ranks over ``nodes`` nodes.

        ``sharing`` groups run it at once through the same node NICs (a tp x dp layout's data-parallel groups, say):
        across nodes each gets 1/sharing of the inter-node bandwidth. The 95% interval is calibrated for what it
        rests on (:mod:`~pybench.model.calibration`; ``calibration`` replaces the shipped one).
        ``nics_as_fitted``: without a description, the node's NICs carry what the fitted layout's did whatever the
        ranks per node (a caller that shares them itself, as the planner does); by default, and always with one, a
        ranks-per-node count the inputs cannot price is a span (:func:`~pybench.model.crossing.unknown_nic_share`).
        ``nodes`` counts hosts, as a log lists them; ``nodes_are_hosts=False``: the model's own nodes (NVLink
        domains where a node is one, :attr:`hosts_per_node`), as the planner's crossings mean them.
        """
        asked = nodes
        _check_layout(world, nodes)
        if nodes_are_hosts and (whole := whole_domains(self, world, nodes)) != (world, nodes):  # partly filled
            return as_asked(self.predict(size_bytes, *whole, sharing, calibration, nics_as_fitted), world, nodes)
        if world < 2:  # nothing crosses a link: the cost shape has no steps to price
            raise UsageError(f"world {world}: a collective over one rank moves nothing between ranks, so the "
                             f"topology model has nothing to price; give 2 or more ranks")
        if self.system is not None and self.hosts_per_node == 1 and self.backend in GPU_BACKENDS:
            self.system.check_layout(world, nodes)  # one GPU per rank; CPU ranks are processes, not GPUs
        nodes = self.network_nodes(world, nodes) if nodes_are_hosts else nodes
        if sharing < 1:
            raise UsageError(f"sharing must be at least 1 group, got {sharing}")
        across = nodes > 1 and not self.inside_nvlink_domain(world)
        nic_share = (unknown_nic_share(self, world, nodes, sharing) if across and (not nics_as_fitted or self.system)
                     else None)
        calibration = calibration or load_calibration()
        readings = self._described_readings(world, nodes, calibration)
        time_s, schedule, regime, spread = self._estimate(size_bytes, world, nodes, sharing, nic_share, readings)
        caveats = [tree_or_ring_caveat(self.backend, self.system is not None)] if across and unknown_tree_bytes(
            self, world, nodes) else []
        if nic_share is not None:
            caveats.append(nic_share_caveat(self, ranks_at_the_nics(self.collective, world, nodes, sharing),
                                            nic_share))
        caveats += [why for _, why, _ in readings if why]
        links = "; ".join([self._links_label(nodes), *caveats])
        why = undetermined(self, world, nodes, size_bytes, calibration)  # (:mod:`pybench.model.determined`)
        kind = spread.kind if self.backend in GPU_BACKENDS else spread.kind.replace(OTHER_GPU_COUNT, OTHER_RANK_COUNT)
        if why:  # no interval to say what the caveats leave open: the reason stands alone
            return TopologyPrediction(int(size_bytes), world, asked, math.nan, math.nan, math.nan, self.algorithm,
                                      schedule, kind, self._links_label(nodes), regime, why, spread)
        theirs = across and not 0 < world <= nvlink_domain_ranks(self)  # not one NVLink domain's hosts measured
        time_s, spread, notes = bounded_by_fitted_node_counts(  # the fitted node counts on either side bound it
            self, size_bytes, world, nodes, sharing, time_s, spread) if across else (time_s, spread, [])
        below, above = spread.bounds(calibration)
        # what the NICs carry (a caller sharing them itself, the planner, bounds no undescribed NICs with them)
        floor = nic_floor_s(self, size_bytes, world, nodes, sharing) if theirs and (
            self.system or not nics_as_fitted) else 0.0
        reach_s = 0.0
        if floor > time_s and nics_contradicted(self, self.system):  # inputs that disagree: span both, favour neither
            notes.append(f"the fit outran the described NICs, which would take {floor / time_s:.2g}x its time: "
                         f"the measurement or the description is not of this cluster; the interval reaches both")
            reach_s, floor = floor, 0.0
        elif floor > time_s:  # a fit carried past what the described NICs can move: the description bounds it
            notes.append(f"raised to what the {'described' if self.system else 'fastest'} NICs carry "
                         f"({100 * (floor / time_s - 1):.0f}% above the fit)")
            time_s = floor
        low, high = max(time_s * math.exp(-below), floor), max(time_s * math.exp(above), time_s, reach_s)
        if size_bytes > (top := self.size_range[1]):  # above the sizes: no faster than the largest, per byte no slower
            edge = self.predict(top, world, asked, sharing, calibration, nics_as_fitted, nodes_are_hosts)
            low, high = max(low, min(edge.low_s, time_s)), min(high, max(edge.high_s * size_bytes / top, time_s))
        elif size_bytes > (own := self._measured_span(world, nodes)[1]):  # a fitted layout past its own sizes
            edge = self.predict(own, world, asked, sharing, calibration, nics_as_fitted, nodes_are_hosts)
            low = max(low, min(edge.low_s, time_s))  # (more bytes are never faster on one layout)
        elif size_bytes < (octave := self.size_range[0] // 2):  # far below: no slower than an octave below them
            edge = self.predict(octave, world, asked, sharing, calibration, nics_as_fitted, nodes_are_hosts)
            high = min(high, max(edge.high_s, time_s))  # (as the measured curve's: AlphaBetaModel.predict)
        return TopologyPrediction(int(size_bytes), world, asked, time_s, low, high, self.algorithm, schedule, kind,
                                  links, regime, spread=spread, caveats=(*caveats, *notes), size_notes=tuple(notes))

    def _described_readings(self, world: int, nodes: int,
                            calibration: Calibration) -> tuple[tuple[LinkCost, str, bool], ...]:
        """A described crossing's readings its description cannot rule out, with why (none elsewhere)."""
        if (nodes < 2 or self.inside_nvlink_domain(world) or self.system is None or self.intra is None
                or self.inter is None or not self.inter.is_described):
            return ()
        return other_described_readings(self.collective, self.schedule, self.intra, self.system, calibration)
    def _estimate(self, size: float, world: int, nodes: int, sharing: int, nic_share: float | None,
                  others: tuple[tuple[LinkCost, str, bool], ...]) -> tuple[float, str, str, Spread]:
        """(time, what was priced across nodes, regime, interval inputs), each computed once.

        Where the inputs cannot tell a per-call latency from a per-step one (a link fitted at one
        layout): a ring across nodes takes it per step, as NCCL's own cost model accrues it (every one of
        its steps waits on the slowest hop), and the one-layout widening covers the rest. A tree across
        nodes pays per step only its levels between nodes, the chain inside each node and the launch per
        call; inside a node, switched fabrics make steps nearly free. There neither reading is favoured:
        the time is their geometric mean and half their log ratio is added to the span.
        """
        time_s, schedule, regime = self._time(size, world, nodes, sharing)
        fitted_s = time_s
        kind, distance, one_layout = self._provenance(size, world, nodes)
        across = nodes > 1 and not self.inside_nvlink_domain(world)
        priced = self.inter if across else self.intra  # the link whose figures the time rests on
        described = priced is not None and (priced.is_preset or priced.is_described)
        # A crossing from a description keeps the protocol regimes of the node it was measured on.
        # (a CPU node's shared memory says nothing of how a network crossing's protocols behave)
        shape_measured = (described and across and priced is not None and priced.is_described
                          and self.backend in GPU_BACKENDS
                          and self.intra is not None and not (self.intra.is_described or self.intra.is_preset))
        bytes_only = self._with_links(lambda r: dataclasses.replace(r, base_s=0.0, step_s=0.0, node_step_s=0.0))
        share = min(bytes_only._time(size, world, nodes, sharing)[0] / time_s, 1.0)
        readings = self._latency_readings(size, world, nodes, sharing)
        span = own_miss_span(self, kind, across)  # the cost shape's misfit at the layouts it was fitted on
        ring = across and any(r.algorithm == "ring" for r in priced.all_regimes())  # type: ignore[union-attr]
        if readings and ring and self.collective != "allreduce":  # a forced all-reduce ring (NCCL_ALGO): as a tree
            time_s = readings[1]
        elif readings:
            time_s, span = _between(readings[0], readings[1], span)
        tree = unknown_tree_bytes(self, world, nodes) if across else None
        # the tree's bytes or the ring's (fitted at one node count), or what a description cannot rule out
        # (its other readings): neither favoured; a reading that is reach only widens the interval alone
        base = time_s  # what the fit's own readings moved it to; a switch that reduces may run the other algorithm
        reach = list(switch_reduction_reach(self, size, world, across, time_s, share))
        chain = chain_latency(self, world, nodes) if across else None
        for link, reach_only in [(tree, False), (chain, True), *((link, only) for link, _, only in others)]:
            if link is None:
                continue
            other = base * dataclasses.replace(self, inter=link)._time(size, world, nodes, sharing)[0] / fitted_s
            if reach_only:
                reach.append(other)
            else:
                time_s, span = _between(time_s, other, span)
        if nic_share is not None:  # NICs shared, or one per rank: neither reading is favoured
            railed = self._latency_readings(size, world, nodes, sharing, nic_share)
            time_s, span = _between(time_s, railed[1] if railed else
                                    self._time(size, world, nodes, sharing, nic_share)[0], span)
        below = max([0.0, *(math.log(time_s / r) - span for r in reach)])
        above = max([0.0, *(math.log(r / time_s) - span for r in reach)])
        return time_s, schedule, regime, Spread(kind, self._local_sigma(size), distance, one_layout, described,
                                                share, span, shape_measured, priced is not None and priced.is_preset,
                                                size < self.size_range[0], below, above)

    def _latency_readings(self, size: float, world: int, nodes: int, sharing: int,
                          rails: float | None = None) -> tuple[float, float] | None:
        """(all latency per call, all latency per step) times, for a link class fitted at one layout of
        NCCL's schedule; None where the fit could tell them apart (or the link was not fitted)."""
        across = nodes > 1 and not self.inside_nvlink_domain(world)
        layouts = [(w, n) for w, n in self.fitted if (n > 1) == across]
        link = self.inter if across else self.intra
        if len(layouts) != 1 or link is None or link.is_preset or link.is_described or self.schedule != "ring":
            return None
        (w0, n0), = layouts

        def hops(r: LinkCost) -> float:
            if across:
                return crossing_terms(self.schedule, self.collective, size, w0, n0, r.algorithm)[0]
            return algorithm_steps(self.collective, self.algorithm, w0)[0]

        def per_call(r: LinkCost) -> LinkCost:
            return dataclasses.replace(r, base_s=r.base_s + hops(r) * r.step_s, step_s=0.0)

        def per_step(r: LinkCost) -> LinkCost:
            h = hops(r)
            return dataclasses.replace(r, base_s=0.0, step_s=r.step_s + r.base_s / h) if h > 0 else r

        which = "inter" if across else "intra"
        return (self._with_links(per_call, which)._time(size, world, nodes, sharing, rails)[0],
                self._with_links(per_step, which)._time(size, world, nodes, sharing, rails)[0])

    def _with_links(self, change: Callable[[LinkCost], LinkCost], which: str = "both") -> TopologyModel:
        """This model with ``change`` applied to every regime of its links (``intra``, ``inter`` or both)."""
        def apply(link: LinkCost | None) -> LinkCost | None:
            if link is None:
                return None
            regimes = [change(r) for r in link.all_regimes()]
            return dataclasses.replace(regimes[-1], regimes=tuple(regimes[:-1]))

        return dataclasses.replace(self, intra=apply(self.intra) if which != "inter" else self.intra,
                                   inter=apply(self.inter) if which != "intra" else self.inter)

    def inside_nvlink_domain(self, world: int) -> bool:
        """Whether ``world`` ranks on several nodes of a described multi-node NVLink domain (NVL72) all
        talk over NVLink, which the intra-node link prices (never where a node is a domain)."""
        system = self.system
        if system is None or self.hosts_per_node > 1 or system.hosts_per_domain() == 1 \
                or world > system.domain_gpus():
            return False
        # hosts of the domain measured together price it, not the description's nominal rate
        return not (self.intra is not None and self.intra.is_described and nvlink_domain_ranks(self))

    def _links_label(self, nodes: int) -> str:
        labels = [f"intra-node {self.intra.label}" if self.intra else "intra-node unknown"]
        if nodes > 1:
            labels.append(f"inter-node {self.inter.label}" if self.inter else "inter-node unknown")
        return "; ".join(labels)

    def _time(self, size: float, world: int, nodes: int, sharing: int = 1,
              rails: float | None = None) -> tuple[float, str, str]:
        """(time, what was priced across nodes, regime); ``rails`` as in :func:`.crossing.across_nodes`."""
        if nodes == 1 or self.inside_nvlink_domain(world):
            if self.intra is None:
                raise UsageError(f"the {self.collective} model holds no intra-node parameters; fit a single-node log "
                                 f"too" + (" (CPU ranks share a node's memory: no preset prices it)" if self.backend
                                           == "mpi" else ", or give the node's description (--system NAME|FILE; "
                                           "system= in Python) or an intra-node preset (--link nvlink4, ...)"))
            time_s, k = self.intra.fastest(self.collective, self.algorithm, size, world)
            return time_s, "ring", regime_label(self.intra, k)
        if self.inter is None:
            raise UsageError(f"the {self.collective} model holds no inter-node parameters; fit a multi-node log, "
                             f"or give the system (--system NAME|FILE; system= in Python) or an inter-node preset "
                             f"(--link ib-ndr, eth-100g, ...)")
        return across_nodes(self, size, world, sharing, nodes, rails)

    def to_dict(self) -> dict:
        """Its JSON form (a model file's ``topology`` entry)."""
        return {"collective": self.collective, "algorithm": self.algorithm,
                "intra": self.intra.to_dict() if self.intra else None,
                "inter": self.inter.to_dict() if self.inter else None,
                "fitted": [list(f) for f in self.fitted], "size_range": list(self.size_range),
                "residual_sizes": list(self.residual_sizes), "residuals": list(self.residuals),
                "notes": list(self.notes), "backend": self.backend, "schedule": self.schedule,
                "inter_absorbs_intra": self.inter_absorbs_intra,
                "system": self.system.model_dump() if self.system else None,
                "layout_misses": [list(x) for x in self.layout_misses], "hosts_per_node": self.hosts_per_node,
                "layout_sizes": [list(x) for x in self.layout_sizes], "rails_ranks": self.rails_ranks,
                "crossing_version": TOPOLOGY_CROSSING_VERSION}

    @classmethod
    def from_dict(cls, d: object) -> TopologyModel:
        """A model from its JSON form (a model file's ``topology`` entry); FileFormatError if malformed.

        Every rule of that form (names, lengths, types, bounds) is the file format's schema, checked here too so
        that a dict given in Python is held to the rules a file is (its link costs too); the system description
        checks its own.
        """
        from pybench.io.document_schemas import TopologySchema
        from pybench.io.schemas import validate_body
        if not isinstance(d, dict):
            raise FileFormatError(f"a topology model is {type(d).__name__}, not an object")
        validate_body(d, TopologySchema, "a topology model")
        intra = LinkCost.from_dict(d["intra"]) if d.get("intra") is not None else None
        inter = LinkCost.from_dict(d["inter"]) if d.get("inter") is not None else None
        absorbs = d.get("inter_absorbs_intra", inter is not None)  # older files fitted the phase into it
        check_crossing_version(d["collective"], d.get("schedule", "ring"), d.get("crossing_version", 1), inter,
                               tuple(int(w) for w, _ in d["fitted"]))
        system = system_from_dict(d["system"], "a topology model's system") if d.get("system") is not None else None
        if inter is not None and inter.is_described and intra is not None and system is not None:
            # not a measurement: priced again from the description with the shipped calibration, as
            # `predict --system` prices it, whichever calibration the file was written with
            inter = described_crossing(d["collective"], d.get("schedule", "ring"), intra, system, load_calibration())
        lo, hi = d["size_range"]
        return cls(
            d["collective"], d["algorithm"], intra, inter, tuple((w, n) for w, n in d["fitted"]), (lo, hi),
            tuple(float(x) for x in d.get("residual_sizes") or ()), tuple(float(x) for x in d.get("residuals") or ()),
            tuple(d.get("notes") or ()), d.get("backend") or "", d.get("schedule", "ring"), absorbs, system,
            tuple((int(w), int(n), float(m)) for w, n, m in d.get("layout_misses") or ()),
            tuple((int(w), int(n), int(a), int(b)) for w, n, a, b in d.get("layout_sizes") or ()),
            int(d.get("hosts_per_node", 1)), int(d.get("rails_ranks", 0)))

    def with_system(self, system: SystemDescription, calibration: Calibration | None = None) -> TopologyModel:
        """This model on ``system``: the link classes never measured priced from its description.

        Inter-node: :func:`~pybench.model.described_crossing.described_crossing`. Intra-node, where no node was
        measured: the fabric's nominal per-GPU rate. Measured link classes are kept as fitted; an
        all-reduce fitted at one node count takes the tree's bytes where the ring's would need more than
        the NICs carry (:func:`~pybench.model.crossing.tree_bytes_on_nics`); else it stays between the two.
        """
        calibration = calibration or load_calibration()
        system = self.system_per_node(system)
        # A link priced from an earlier description (a model fitted with --system) is no measurement:
        # this description prices it again.
        intra = unless_described(self.intra)
        if intra is None and self.backend in GPU_BACKENDS:  # CPU ranks share memory, not the GPUs' fabric
            intra = LinkCost(0.0, DESCRIBED_STEP_S, system.intra_Bps_per_gpu, 0.0,
                             f"system {system.name}: {system.intra_fabric} at {system.intra_GBps_per_gpu:g} GB/s "
                             f"per GPU (nominal)")
        inter = unless_described(self.inter)
        notes = [f"system {system.summary()}", *fabric_mismatches(self, system), *implausible_regimes(self, system)]
        decided = None if nics_contradicted(self, system) else tree_bytes_on_nics(
            self, system.nic_Bps_per_node, self._local_sigma(self.size_range[1]))
        if decided is not None and self.inter is not None:
            inter = decided
            notes.append(f"on {system.name}'s NICs the fitted all-reduce crossed by a tree (the ring's bytes "
                         f"would need {self.inter.busbw_Bps / system.nic_Bps_per_node:.2f} of their rate): other node "
                         f"counts are priced with the tree's bytes")
        if inter is None and intra is not None:
            inter = described_crossing(self.collective, self.schedule, intra, system, calibration)
        return dataclasses.replace(self, intra=intra, inter=inter, system=system, notes=(*self.notes, *notes))

    def system_per_node(self, system: SystemDescription) -> SystemDescription:
        """``system`` as this model counts its nodes: one NVLink domain per node where a node is one."""
        if self.hosts_per_node > 1 and system != self.system:  # (the one it was fitted with is so already)
            if system.hosts_per_domain() != self.hosts_per_node:
                raise UsageError(f"this model counts NVLink domains of {self.hosts_per_node} hosts as its nodes; "
                                 f"{system.name}'s span {system.hosts_per_domain()}: refit with --system {system.name}")
            return system.per_nvlink_domain()
        return system

    def with_preset(self, preset: LinkPreset) -> TopologyModel:
        """This model with ``preset`` filling the link class it does not hold (a held one is kept)."""
        link = LinkCost.from_preset(preset)
        if preset.link_class == "intra-node":
            return dataclasses.replace(self, intra=self.intra or link)
        return dataclasses.replace(self, inter=self.inter or link)


def _between(one: float, other: float, span: float) -> tuple[float, float]:
    """Two readings the inputs cannot tell apart: their geometric mean, and ``span`` plus half their log ratio."""
    return math.sqrt(one * other), span + abs(math.log(other / one)) / 2.0


def _check_layout(world: int, nodes: int) -> None:
    if world < 1 or nodes < 1:
        raise UsageError(f"world ({world}) and nodes ({nodes}) must be positive")
    if world % nodes:
        raise UsageError(f"world {world} is not divisible by {nodes} nodes; give ranks per node x nodes")
