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
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import numpy as np

from pybench.errors import FileFormatError, UsageError
from pybench.model.link_presets import PRESETS, LinkPreset
from pybench.model.logs.measurements import one_reduction
from pybench.model.regimes import MAX_REGIMES, Regime, envelope, fit_regimes
from pybench.model.topology_schedules import (
    ALGORITHMS,
    SCHEDULES,
    algorithm_steps,
    check_schedule,
    crossing_algorithms,
    crossing_terms,
    intra_node_ranks,
)

__all__ = ["ALGORITHMS", "SCHEDULES", "LinkCost", "Observation", "TopologyModel", "TopologyPrediction",
           "algorithm_steps", "fit_topology", "fit_topology_models", "nic_floor_s", "nodes_of",
           "nvlink_domain_ranks", "observations_from"]

Z95 = 1.959963984540054
# Relative widening of the interval per unit of |ln(world / nearest fitted world)|. On the
# vTrain A100 tables, fitted at 2 and 4 GPUs and predicting 8: 0.02 gave 94% coverage, 0 gave
# 87%. A fit at one world size cannot separate per-call from per-step latency nor the
# pipeline term from the bandwidth, and misses other worlds by up to 17% median (fit at 2,
# predict 8): its intervals widen five times as fast.
EXTRAPOLATION_WIDENING = 0.03
ONE_WORLD_WIDENING = 0.15
@dataclass(frozen=True)
class LinkCost:
    """Fitted (or preset) parameters of one link class.

    Its own figures are the bandwidth regime (what large messages get); ``regimes`` holds the
    regimes that are faster at smaller sizes (NCCL's LL and LL128 protocols, another algorithm;
    see :mod:`pybench.model.regimes`). An operation costs its fastest regime.
    """

    base_s: float
    step_s: float
    busbw_Bps: float
    extra_steps: float
    label: str
    """Where the figures come from: 'fitted at 2, 4 ranks' or 'preset nvlink4'."""
    regimes: tuple[LinkCost, ...] = ()
    algorithm: str = "ring"
    """Across nodes, the algorithm this regime runs between them (``ring`` or ``tree``)."""

    @property
    def is_preset(self) -> bool:
        """Published figures (``--link``), not fitted ones."""
        return self.label.startswith("preset")

    def own_time_s(self, collective: str, algorithm: str, size_bytes: float, world: int) -> float:
        """This regime's time alone, without the faster small-size regimes."""
        hops, steps = algorithm_steps(collective, algorithm, world)
        return self.base_s + hops * self.step_s + (steps + self.extra_steps) / world * size_bytes / self.busbw_Bps

    def all_regimes(self) -> tuple[LinkCost, ...]:
        """The small-size regimes, then the bandwidth regime (this one, without its ``regimes``)."""
        return (*self.regimes, dataclasses.replace(self, regimes=())) if self.regimes else (self,)

    def fastest(self, collective: str, algorithm: str, size_bytes: float, world: int) -> tuple[float, int]:
        """(time, index in :meth:`all_regimes`) of the fastest regime for one operation."""
        times = [r.own_time_s(collective, algorithm, size_bytes, world) for r in self.all_regimes()]
        k = int(np.argmin(times))
        return times[k], k

    def time_s(self, collective: str, algorithm: str, size_bytes: float, world: int) -> float:
        return self.fastest(collective, algorithm, size_bytes, world)[0]

    def to_dict(self) -> dict:
        return {"base_s": self.base_s, "step_s": self.step_s, "busbw_Bps": self.busbw_Bps,
                "extra_steps": self.extra_steps, "label": self.label, "algorithm": self.algorithm,
                "regimes": [r.to_dict() for r in self.regimes]}

    @classmethod
    def from_dict(cls, d: object, nested: bool = False) -> LinkCost:
        if not isinstance(d, dict):
            raise FileFormatError(f"a link cost is {type(d).__name__}, not an object")
        base, step, busbw, extra = (_number(d, k) for k in ("base_s", "step_s", "busbw_Bps", "extra_steps"))
        if min(base, step, extra) < 0 or busbw <= 0:
            raise FileFormatError("a link cost needs base_s, step_s, extra_steps >= 0 and busbw_Bps > 0")
        raw = d.get("regimes") or []
        if not isinstance(raw, list) or (raw and nested) or len(raw) >= MAX_REGIMES:
            raise FileFormatError(f"a link cost's regimes must be a list of at most {MAX_REGIMES - 1} link costs "
                                  f"without regimes of their own")
        regimes = tuple(cls.from_dict(r, nested=True) for r in raw)
        if any(r.busbw_Bps > busbw for r in regimes):
            raise FileFormatError("a small-size regime has more bandwidth than its link's bandwidth regime")
        algorithm = d.get("algorithm", "ring")
        if algorithm not in ("ring", "tree"):
            raise FileFormatError(f"a link cost's algorithm is {algorithm!r}, not ring or tree")
        return cls(base, step, busbw, extra, str(d.get("label", "")), regimes, algorithm)

    @classmethod
    def from_preset(cls, preset: LinkPreset) -> LinkCost:
        return cls(0.0, preset.step_latency_s, preset.bandwidth_Bps, 0.0, f"preset {preset.name}")


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


def _design(collective: str, algorithm: str, obs: Sequence[Observation]) -> np.ndarray:
    rows = []
    for o in obs:
        hops, steps = algorithm_steps(collective, algorithm, o.world)
        rows.append((1.0, hops, o.size_bytes * steps / o.world, o.size_bytes / o.world))
    return np.array(rows, dtype=float)


def _link_from_regime(regime: Regime, label: str, algorithms: Sequence[str]) -> LinkCost:
    theta = regime.theta
    inv_b = theta[2]
    return LinkCost(float(theta[0]), float(theta[1]), float(1.0 / inv_b), float(theta[3] / inv_b), label,
                    algorithm=algorithms[regime.design])


def _link_from_regimes(regimes: Sequence[Regime], label: str, algorithms: Sequence[str]) -> LinkCost:
    """A link from fitted regimes, the bandwidth regime last (:func:`pybench.model.regimes.fit_regimes`)."""
    small = tuple(_link_from_regime(r, label, algorithms) for r in regimes[:-1])
    return dataclasses.replace(_link_from_regime(regimes[-1], label, algorithms), regimes=small)


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
            return time_s, "ring", _regime_label(self.intra, k)
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


def _number(d: dict, key: str) -> float:
    value = d.get(key)
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        raise FileFormatError(f"a link cost's {key} is {value!r}, not a finite number")
    return float(value)


_HOSTS_NOTE = re.compile(r"(\d+) ranks on (\d+) host\(s\)")


def nodes_of(ms: object) -> int | None:
    """Node count of an imported sweep: its ``nodes``, the hosts its log listed for every rank, or 1 intra-node."""
    nodes = getattr(ms, "nodes", None)
    if nodes:
        return int(nodes)
    world = getattr(ms, "world_size", None)
    for note in getattr(ms, "notes", ()):
        m = _HOSTS_NOTE.search(note)
        if m and world and int(m.group(1)) >= world:
            return int(m.group(2))
    return 1 if getattr(ms, "link_class", None) == "intra-node" else None


def _check_layout(world: int, nodes: int) -> None:
    if world < 1 or nodes < 1:
        raise UsageError(f"world ({world}) and nodes ({nodes}) must be positive")
    if world % nodes:
        raise UsageError(f"world {world} is not divisible by {nodes} nodes; give ranks per node x nodes")


def _regime_label(link: LinkCost, k: int) -> str:
    return f"{k + 1} of {len(link.regimes) + 1}" if link.regimes else ""


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
    return times[k] + inside, label, _regime_label(model.inter, k)


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


def fit_topology(collective: str, observations: Sequence[Observation], *,
                 algorithm: str | None = None, intra_preset: LinkPreset | None = None,
                 inter_preset: LinkPreset | None = None, schedule: str = "ring") -> TopologyModel:
    """Fit a :class:`TopologyModel` to sweeps at one or more (world, nodes).

    Single-node observations give the intra-node link; multi-node ones the inter-node link
    (after the intra-node one is known). ``algorithm`` fixes the algorithm; by default the one
    whose fit has the least relative error is taken (ring when the data cannot tell). ``schedule``
    says how the multi-node sweeps crossed nodes (``ring``, ``hierarchical``, or ``openmpi`` for
    what Open MPI 5 runs by ranks, nodes and size): one layout cannot tell them apart, so it is
    the caller's knowledge of the library.
    """
    check_schedule(schedule)
    obs = [o for o in observations if o.time_s > 0 and o.size_bytes > 0 and o.world >= 2]
    if not obs:
        raise UsageError(f"no {collective} measurements with 2 or more ranks to fit a topology model to")
    single = [o for o in obs if o.nodes == 1]
    multi = [o for o in obs if o.nodes > 1]
    algorithms = [algorithm] if algorithm else (list(ALGORITHMS) if collective == "allreduce" else ["ring"])
    best: tuple[float, str, LinkCost | None] | None = None
    notes: list[str] = []
    for algo in algorithms:
        if not single:
            best = (0.0, algo, LinkCost.from_preset(intra_preset) if intra_preset else None)
            break
        worlds = sorted({o.world for o in single})
        solved = _fit_link([_design(collective, algo, single)], single, f"fitted at {', '.join(map(str, worlds))} ranks")
        if solved is None:
            continue
        link, cost = solved
        if best is None or cost < best[0] * (1 - 1e-6):  # ties keep the earlier (ring first)
            best = (cost, algo, link)
    if best is None:
        raise UsageError(f"the {collective} measurements cannot be fitted with non-negative parameters")
    _, algo, intra = best
    if single and len({o.world for o in single}) == 1:
        notes.append("one world size: base and per-step latency cannot be told apart; other world sizes are "
                     "extrapolated with the latency held per call")
    inter, absorbs = _fit_inter(collective, algo, multi, intra, inter_preset, notes, schedule)
    fitted_obs = single + multi
    model = TopologyModel(collective, algo, intra, inter, tuple(sorted({(o.world, o.nodes) for o in fitted_obs})),
                          (int(min(o.size_bytes for o in obs)), int(max(o.size_bytes for o in obs))),
                          tuple(float(o.size_bytes) for o in fitted_obs), (), tuple(notes), schedule=schedule,
                          inter_absorbs_intra=absorbs)
    domain = nvlink_domain_ranks(model)
    if domain:
        assert model.inter is not None
        notes.append(f"the inter-node bus bandwidth ({model.inter.busbw_Bps / 1e9:.0f} GB/s) is more than "
                     f"{_ranks_per_node(model)} ranks per node can move through 800 Gbit/s NICs: these hosts share "
                     f"an NVLink domain (multi-node NVLink, e.g. GB200 NVL72); the figures hold inside it "
                     f"({domain} ranks fitted), not across the network beyond it, which this data does not measure")
    residuals = [model._time(o.size_bytes, o.world, o.nodes)[0] / o.time_s - 1.0 for o in fitted_obs]
    return dataclasses.replace(model, residuals=tuple(residuals), notes=tuple(notes))


def _fit_link(designs: Sequence[np.ndarray], obs: Sequence[Observation], label: str,
              algorithms: Sequence[str] = ("ring",)) -> tuple[LinkCost, float] | None:
    """One link class's regimes fitted to ``obs``, one design per candidate algorithm: (link, relative
    RSS) or None."""
    y = np.array([o.time_s for o in obs])
    regimes = fit_regimes(designs, y, np.array([o.size_bytes for o in obs]))
    if regimes is None:
        return None
    time, _ = envelope(designs, regimes)
    return _link_from_regimes(regimes, label, algorithms), float(np.sum((time / y - 1.0) ** 2))


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
    return max(w for w, _ in layouts) if model.inter.busbw_Bps > _ranks_per_node(model) * FASTEST_NIC_BPS else 0


def _ranks_per_node(model: TopologyModel) -> int:
    """The most ranks per node among the model's multi-node layouts (0 without one)."""
    return max((w // n for w, n in model.fitted if n > 1), default=0)


def _fit_inter(collective: str, algorithm: str, multi: Sequence[Observation], intra: LinkCost | None,
               preset: LinkPreset | None, notes: list[str], schedule: str = "ring") -> tuple[LinkCost | None, bool]:
    """The inter-node link, and whether it absorbed the leader schedules' intra-node phase.

    With an intra-node link, that phase (:func:`pybench.model.topology_schedules.intra_node_ranks`)
    is priced with it and taken off the multi-node times first, so the inter-node link is the
    NICs' alone and the phase scales with the ranks per node of the layout asked for.
    """
    if not multi:
        return (LinkCost.from_preset(preset) if preset else None), False
    inside = np.array([intra.time_s(collective, algorithm, o.size_bytes, g)
                       if intra is not None and (g := intra_node_ranks(schedule, collective, o.world, o.nodes)) else 0.0
                       for o in multi])
    times = np.array([o.time_s for o in multi])
    absorbs = any(intra_node_ranks(schedule, collective, o.world, o.nodes) for o in multi) and intra is None
    if absorbs:
        notes.append(f"no single-node sweep: the {schedule} schedule's phase inside each node is part of the "
                     f"inter-node figures, so other ranks-per-node counts are priced as the fitted one")
    if np.any(inside >= 0.95 * times):
        notes.append("the intra-node link accounts for the whole of some multi-node times: the intra-node phase is "
                     "left inside the inter-node figures, not priced apart")
        inside[:] = 0.0
        absorbs = True
    between = [dataclasses.replace(o, time_s=float(t)) for o, t in zip(multi, times - inside)]
    algorithms = crossing_algorithms(schedule, collective)
    designs = []
    for algorithm in algorithms:
        rows = []
        for o in between:
            hops, data, fill, _ = crossing_terms(schedule, collective, o.size_bytes, o.world, o.nodes, algorithm)
            rows.append((1.0, hops, o.size_bytes * data, o.size_bytes * fill))
        designs.append(np.array(rows, dtype=float))
    solved = _fit_link(designs, between,
                       "fitted at " + ", ".join(sorted({f"{o.world} ranks on {o.nodes} nodes" for o in multi})),
                       algorithms)
    if solved is None:
        raise UsageError(f"the multi-node {collective} measurements cannot be fitted with non-negative parameters")
    link = solved[0]
    if intra is not None and link.busbw_Bps > intra.busbw_Bps:
        notes.append("the multi-node sweep is faster per rank than the intra-node link: the inter-node figures "
                     "may include in-network reduction (NVLS/SHARP)")
    return link, bool(absorbs)


def observations_from(sets: Sequence, nodes_fn: Callable[[object], int | None] | None = None) -> list[Observation]:
    """Observations from imported measurement sets (``pybench.model.logs``): sizes, medians, world, nodes.

    ``nodes_fn(set)`` gives a set's node count; by default :func:`nodes_of`. A set whose node
    count is unknown is refused in one line (say how many nodes it ran on).
    """
    out = []
    for ms in sets:
        if not ms.world_size:
            raise UsageError(f"{ms.path or ms.collective}: no recorded world size; the topology model needs it")
        nodes = nodes_fn(ms) if nodes_fn else nodes_of(ms)
        if nodes is None:
            raise UsageError(f"{ms.path or ms.collective}: the node count is unknown (the log lists the hosts of "
                             f"only some ranks); the topology model needs it")
        out += [Observation(float(s), int(ms.world_size), int(nodes), float(t))
                for s, t in zip(ms.size_bytes, ms.time_s) if t > 0]
    return out


def _topology_dtype(sets: Sequence, ms) -> str:
    """The element type a (collective, backend) topology model is fitted on: float32 when any sweep
    of it has that type, else the first sweep's (types are not pooled: bytes per element differ)."""
    types = [s.dtype for s in sets if (s.collective, s.backend) == (ms.collective, ms.backend)]
    return "float32" if "float32" in types else ms.dtype


def _ran_on_open_mpi(ms) -> bool:
    """Whether a sweep says it was measured over Open MPI (pybench results record the MPI library)."""
    return ms.backend == "mpi" and any(n.startswith("MPI library: Open MPI") for n in ms.notes)


def fit_topology_models(sets: Sequence) -> tuple[list[TopologyModel], list[str]]:
    """One topology model per (collective, backend) over every usable sweep; and why sweeps were left out.

    An all-reduce measured over Open MPI (the MPI library a pybench result records) is fitted with
    the ``openmpi`` schedule, which prices what Open MPI runs across nodes; everything else with
    ``ring``.

    A sweep is used when it has 2 or more ranks, 3 or more distinct sizes, a collective the
    model knows and a known node count (:func:`nodes_of`).
    """
    groups: dict[tuple[str, str], list[Observation]] = {}
    open_mpi: set[tuple[str, str]] = set()
    dtype_of: dict[tuple[str, str], str] = {}  # one element type per model: float32 where measured
    skipped: list[str] = []
    for ms in one_reduction(sets):
        where = f"{ms.path or 'input'}: {ms.collective}"
        try:
            algorithm_steps(ms.collective, "ring", 2)
        except UsageError:
            skipped.append(f"{where}: no topology model for this collective")
            continue
        if not ms.world_size or ms.world_size < 2 or len(set(ms.size_bytes.tolist())) < 3:
            skipped.append(f"{where}: needs 2 or more ranks and 3 or more sizes for the topology model")
            continue
        if nodes_of(ms) is None:
            some = any(_HOSTS_NOTE.search(n) for n in ms.notes)
            why = "hosts of only some ranks listed" if some else "no hosts listed"
            skipped.append(f"{where}: node count unknown ({why}); not in the topology model: "
                           f"give fit --nodes N (the nodes it ran on)")
            continue
        chosen = dtype_of.setdefault((ms.collective, ms.backend), _topology_dtype(sets, ms))
        if ms.dtype != chosen:
            skipped.append(f"{where}: {ms.dtype}; the topology model of {ms.collective} uses the {chosen} sweeps")
            continue
        groups.setdefault((ms.collective, ms.backend), []).extend(observations_from([ms]))
        if _ran_on_open_mpi(ms):
            open_mpi.add((ms.collective, ms.backend))
    models = []
    for (collective, backend), obs in sorted(groups.items()):
        # Open MPI's all-reduce across nodes is HAN or coll/tuned's pick, not one ring over every rank.
        schedule = "openmpi" if collective == "allreduce" and (collective, backend) in open_mpi else "ring"
        try:
            models.append(dataclasses.replace(fit_topology(collective, obs, schedule=schedule), backend=backend))
        except UsageError as exc:
            skipped.append(f"{collective}: {exc}")
    return models, skipped
