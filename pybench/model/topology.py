"""A topology-aware cost model for collectives, shaped like NCCL's own tuning model.

NCCL prices an operation as a per-call latency, plus a per-step latency times the steps the
algorithm takes, plus the bytes over a per-rank bus bandwidth. pybench fits that shape, not
one line per world size, so one fitted model answers for any (world, nodes):

    T(S, p) = base + hops(p) * step + (data_steps(p) + c) / p * S / B

``hops`` and ``data_steps`` come from the algorithm (ring all-reduce: 2(p-1) each; tree:
2 log2 p hops; NVLS: a flat 2 hops); ``c`` is the ring's pipeline fill and drain in units of
one step's data, which is why bus bandwidth rises slowly with p on one NVSwitch node
(A100: 197 GB/s at 2 GPUs, 229 GB/s at 8). The model is linear in (base, step, 1/B, c/B),
so it is fitted by weighted least squares on relative error, with no parameter below zero
and none that the data cannot tell apart (one world size cannot separate base from step).

Protocol regimes: NCCL runs the fastest algorithm x protocol (LL, LL128, Simple), so a link's
cost is the fastest of up to 4 such frames, each fitted with its own parameters
(:mod:`pybench.model.regimes`); the switch between two moves with p where their costs cross.

Two link classes: intra-node parameters from single-node sweeps, inter-node ones from sweeps
that cross nodes (or a preset, labelled as such). Across nodes the operation pays the
inter-node step latency and runs at the inter-node bus bandwidth: fitted, it was measured end
to end with the legs inside each node; a preset NIC runs at most at the intra-node link's rate. The inter-node bus
bandwidth is what the node's NICs sustain for the schedule NCCL chose in the fitted log
(ring, tree or NVLS/SHARP are not told apart from one multi-node sweep; a fit faster than the
intra-node link says so in the notes). Every group that crosses a node's NICs at the same
time shares them: :func:`nic_floor_s` is the bound that puts on any layout. Which ranks cross
the NICs, and with how many bytes, is the model's schedule (:mod:`pybench.model.topology_schedules`):
one ring, one ring of node leaders, or what Open MPI 5 runs (:mod:`pybench.model.mpi_openmpi`).

Uncertainty: a prediction interval for one new measurement, from the relative residuals of
the fit near that size, widened with the distance (in log world size) from the nearest
fitted world; every prediction says whether it is measured, interpolated or extrapolated.
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass, field

import numpy as np

from pybench.errors import FileFormatError, UsageError
from pybench.model.link_cost import LinkCost, regime_label
from pybench.model.link_presets import PRESETS, LinkPreset
from pybench.model.topology_schedules import ALGORITHMS, check_schedule, crossing_terms, intra_node_ranks

Z95 = 1.959963984540054
# Relative widening of the interval per unit of |ln(world / nearest fitted world)|. On the
# vTrain A100 tables, fitted at 2 and 4 GPUs and predicting 8: 0.02 gave 94% coverage, 0 gave
# 87%. A fit at one world size cannot separate per-call from per-step latency nor the
# pipeline term from the bandwidth, and misses other worlds by up to 17% median (fit at 2,
# predict 8): its intervals widen five times as fast.
EXTRAPOLATION_WIDENING = 0.03
ONE_WORLD_WIDENING = 0.15
@dataclass(frozen=True)
class TopologyPrediction:
    """One predicted operation: time with a 95% prediction interval, and how far it reaches."""

    size_bytes: int
    world: int
    nodes: int
    time_s: float
    low_s: float
    high_s: float
    algorithm: str
    schedule: str
    """What was priced across nodes: ``ring`` (one node: the fitted algorithm's step count), the
    model's schedule, or for ``openmpi`` the algorithm Open MPI runs (``openmpi tuned:rabenseifner``)."""
    provenance: str
    """``measured``, ``interpolated`` or ``extrapolated``."""
    links: str
    regime: str = ""
    """Which of the link's regimes priced it, smallest-size regime first (``2 of 4``); empty with one."""

    @property
    def busbw_Bps(self) -> float:
        return self.size_bytes / self.time_s * _bus_factor(self.world)


def _bus_factor(world: int) -> float:
    return 2.0 * (world - 1) / world if world > 1 else 0.0


@dataclass(frozen=True)
class Observation:
    """One measured point used by the fit."""

    size_bytes: float
    world: int
    nodes: int
    time_s: float


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

    def _local_sigma(self, size: float) -> float:
        if not self.residuals:
            return 0.05
        sizes, res = np.array(self.residual_sizes), np.array(self.residuals)
        distance = np.abs(np.log2(sizes / size))
        near = res[distance <= 1.0]
        if near.size < 3:  # a size far from every measured one: its nearest residuals
            near = res[np.argsort(distance)[:5]]
        return float(np.sqrt(np.mean(near ** 2)))

    def _provenance(self, size: int, world: int, nodes: int) -> tuple[str, float]:
        layouts = [(w, n) for w, n in self.fitted if (n > 1) == (nodes > 1)] or list(self.fitted)
        worlds = [w for w, _ in layouts]
        node_counts = [n for _, n in layouts]
        # Distance from what was measured, in log world size and in log node count (4 nodes from a
        # 2-node fit is as far out as 4 ranks from 2).
        distance = min(abs(math.log(world / w)) for w in worlds) + min(abs(math.log(nodes / n)) for n in node_counts)
        lo, hi = self.size_range
        inside_layouts = min(worlds) <= world <= max(worlds) and min(node_counts) <= nodes <= max(node_counts)
        if (world, nodes) in self.fitted and lo <= size <= hi:
            kind = "measured" if size in self.residual_sizes else "interpolated"
        elif inside_layouts and lo <= size <= hi:
            kind = "interpolated"
        else:
            kind = "extrapolated"
        size_distance = max(0.0, math.log(lo / size) if size < lo else math.log(size / hi) if size > hi else 0.0)
        return kind, distance + size_distance

    def predict(self, size_bytes: int, world: int, nodes: int = 1, sharing: int = 1) -> TopologyPrediction:
        """Predicted time of one operation of ``size_bytes`` on ``world`` ranks over ``nodes`` nodes.

        ``sharing`` groups run the same operation at once through the same node NICs (the
        data-parallel groups of a tp x dp layout, say): across nodes each gets 1/sharing of
        the inter-node bandwidth.
        """
        _check_layout(world, nodes)
        if sharing < 1:
            raise UsageError(f"sharing must be at least 1 group, got {sharing}")
        time_s, schedule, regime = self._time(size_bytes, world, nodes, sharing)
        kind, distance = self._provenance(size_bytes, world, nodes)
        worlds = {w for w, _ in self.fitted}
        widening = EXTRAPOLATION_WIDENING if len(worlds) > 1 else ONE_WORLD_WIDENING
        half = Z95 * math.hypot(self._local_sigma(size_bytes), widening * distance)
        return TopologyPrediction(int(size_bytes), world, nodes, time_s, time_s / (1.0 + half), time_s * (1.0 + half),
                                  self.algorithm, schedule, kind, self._links_label(nodes), regime)

    def _links_label(self, nodes: int) -> str:
        labels = [f"intra-node {self.intra.label}" if self.intra else "intra-node unknown"]
        if nodes > 1:
            labels.append(f"inter-node {self.inter.label}" if self.inter else "inter-node unknown")
        return "; ".join(labels)

    def _time(self, size: float, world: int, nodes: int, sharing: int = 1) -> tuple[float, str, str]:
        """(time, what was priced across nodes, which regime priced it)."""
        if nodes == 1:
            if self.intra is None:
                raise UsageError(f"the {self.collective} model holds no intra-node parameters; fit a single-node "
                                 f"log too, or give an intra-node preset (--link nvlink4, ...)")
            time_s, k = self.intra.fastest(self.collective, self.algorithm, size, world)
            return time_s, "ring", regime_label(self.intra, k)
        if self.inter is None:
            raise UsageError(f"the {self.collective} model holds no inter-node parameters; fit a multi-node log, "
                             f"or give an inter-node preset (--link ib-ndr, eth-100g, ...)")
        return _across_nodes(self, size, world, sharing, nodes)

    def to_dict(self) -> dict:
        return {"collective": self.collective, "algorithm": self.algorithm,
                "intra": self.intra.to_dict() if self.intra else None,
                "inter": self.inter.to_dict() if self.inter else None,
                "fitted": [list(f) for f in self.fitted], "size_range": list(self.size_range),
                "residual_sizes": list(self.residual_sizes), "residuals": list(self.residuals),
                "notes": list(self.notes), "backend": self.backend, "schedule": self.schedule,
                "inter_absorbs_intra": self.inter_absorbs_intra}


    @classmethod
    def from_dict(cls, d: object) -> TopologyModel:
        """A model from its JSON form (a model file's ``topology`` entry); FileFormatError if malformed."""
        if not isinstance(d, dict):
            raise FileFormatError(f"a topology model is {type(d).__name__}, not an object")
        try:
            fitted = tuple((int(w), int(n)) for w, n in d["fitted"])
            lo, hi = (int(x) for x in d["size_range"])
            sizes = tuple(float(x) for x in d.get("residual_sizes", ()))
            residuals = tuple(float(x) for x in d.get("residuals", ()))
            collective, algorithm = str(d["collective"]), str(d["algorithm"])
        except (KeyError, TypeError, ValueError) as exc:
            raise FileFormatError(f"a topology model is malformed ({exc!r})") from None
        if algorithm not in ALGORITHMS or len(sizes) != len(residuals) or not fitted:
            raise FileFormatError(f"a topology model is malformed (algorithm {algorithm!r}, "
                                  f"{len(sizes)} sizes vs {len(residuals)} residuals)")
        intra = LinkCost.from_dict(d["intra"]) if d.get("intra") is not None else None
        inter = LinkCost.from_dict(d["inter"]) if d.get("inter") is not None else None
        # Files from before the intra-node phase was priced fitted their inter-node link over it.
        absorbs = d.get("inter_absorbs_intra", inter is not None)
        if not isinstance(absorbs, bool):
            raise FileFormatError(f"a topology model's inter_absorbs_intra is {absorbs!r}, not true or false")
        return cls(collective, algorithm, intra, inter, fitted, (lo, hi), sizes, residuals,
                   tuple(str(n) for n in d.get("notes", ())), str(d.get("backend", "")),
                   check_schedule(d.get("schedule", "ring")), absorbs)

    def with_preset(self, preset: LinkPreset) -> TopologyModel:
        """This model with ``preset`` filling the link class it does not hold (a held one is kept)."""
        link = LinkCost.from_preset(preset)
        if preset.link_class == "intra-node":
            return dataclasses.replace(self, intra=self.intra or link)
        return dataclasses.replace(self, inter=self.inter or link)


def _check_layout(world: int, nodes: int) -> None:
    if world < 1 or nodes < 1:
        raise UsageError(f"world ({world}) and nodes ({nodes}) must be positive")
    if world % nodes:
        raise UsageError(f"world {world} is not divisible by {nodes} nodes; give ranks per node x nodes")


def _across_nodes(model: TopologyModel, size: float, world: int, sharing: int = 1,
                  nodes: int = 2) -> tuple[float, str, str]:
    """Across nodes: the schedule's bytes through the busiest NIC (shared by ``sharing`` groups) at
    the slower link's rate, in the fastest of the inter-node link's regimes, plus a leader
    schedule's phase inside each node where the intra-node link prices it (:func:`_intra_phase_s`)."""
    assert model.inter is not None
    # A preset NIC is a port rate: the ring's legs inside each node can be the slower link. A fitted
    # inter-node link was measured end to end, those legs included, and fitted without this cap:
    # capping it again would move the prediction off the very sweeps it was fitted to.
    intra_bw = model.intra.busbw_Bps if model.intra and model.inter.is_preset else math.inf
    times, labels = [], []
    for r in model.inter.all_regimes():
        hops, data, fill, label = crossing_terms(model.schedule, model.collective, size, world, nodes, r.algorithm)
        times.append(r.base_s + hops * r.step_s
                     + (data + fill * r.extra_steps) * size / min(r.busbw_Bps / sharing, intra_bw))
        labels.append(label)
    k = int(np.argmin(times))
    label = labels[k]
    inside = _intra_phase_s(model, size, world, nodes)
    if inside:
        label += f" + intra-node phase on {world // nodes} ranks"
    return times[k] + inside, label, regime_label(model.inter, k)


def _intra_phase_s(model: TopologyModel, size: float, world: int, nodes: int) -> float:
    """Time of the schedule's phase inside each node (leader schedules), 0 without one or without an
    intra-node link to price it with (then the inter-node fit has absorbed it)."""
    ranks = intra_node_ranks(model.schedule, model.collective, world, nodes)
    if not ranks or model.intra is None or model.inter_absorbs_intra:
        return 0.0
    return model.intra.time_s(model.collective, model.algorithm, size, ranks)


def nic_floor_s(bytes_per_node: float, nic: LinkCost, nics_per_node: int = 1) -> float:
    """The least time any layout needs to push ``bytes_per_node`` through a node's NICs.

    Every concurrent group that crosses the node boundary (tp x dp, several dp groups, pipeline
    stages) shares the same NICs, so the bytes all of them send out of one node, over the NIC
    bandwidth, bound the step's communication time from below.
    """
    if nics_per_node < 1:
        raise UsageError(f"nics_per_node must be at least 1, got {nics_per_node}")
    return bytes_per_node / (nic.busbw_Bps * nics_per_node)


# The fastest NIC any preset knows, per port: a GPU behind one such port cannot move more.
FASTEST_NIC_BPS = max(p.bandwidth_Bps for p in PRESETS.values() if p.link_class == "inter-node")


def nvlink_domain_ranks(model: TopologyModel) -> int:
    """Ranks of the NVLink domain the "nodes" of a multi-node fit share, or 0 when they do not.

    Hosts of one multi-node NVLink domain (GB200 NVL72: 18 trays of 4 GPUs) list as separate
    hosts, yet talk over NVLink. A fitted inter-node bus bandwidth beyond what every rank of a
    node could push through its own port of the fastest NIC (800 Gbit/s) is not a network:
    such a fit holds inside the domain (at least its largest fitted world), not beyond it.
    """
    layouts = [(w, n) for w, n in model.fitted if n > 1]
    if model.inter is None or not layouts or model.inter.is_preset:
        return 0
    return max(w for w, _ in layouts) if model.inter.busbw_Bps > ranks_per_node(model) * FASTEST_NIC_BPS else 0


def ranks_per_node(model: TopologyModel) -> int:
    """The most ranks per node among the model's multi-node layouts (0 without one)."""
    return max((w // n for w, n in model.fitted if n > 1), default=0)

