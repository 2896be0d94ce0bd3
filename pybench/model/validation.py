"""Leave-one-dataset-out validation of the communication model, and the choice of its constants.

Every real log in the repository is a dataset. For each kind of prediction (between measured
sizes, leave-one-size-out, another GPU count, another node count, a system description), each
dataset is predicted with constants (:class:`~pybench.model.calibration.Calibration`) chosen on
the *other* datasets only, and scored: the share of held-out measurements inside the 95%
interval, its median half-width, and the median and largest errors. The shipped constants are
then chosen on every dataset. The two Polaris datasets are one system and are held out together.

How the constants are chosen (:func:`choose_calibration`), each from what the calibration
datasets say, none by hand:

* the widening per unit of log distance: for each extrapolated point, the widening that would
  just cover its error beyond the local scatter; per dataset the 95th percentile of those, and over
  datasets what covers one more system (:func:`_worst_percentile`); per kind where two systems or
  more hold the kind, else the widest of any kind; fits at one layout and at several apart;
* the NIC efficiency per family (all-reduce, ring): the geometric mean over datasets of the share of
  the description's NICs at which the described crossing meets the log on the sizes whose bytes
  rule, in the bytes it is priced with (an all-reduce in the tree's); an all-reduce on GPUs that
  share NICs, which NCCL may cross by its ring, chooses neither;
* the latency of one step across nodes, per protocol: the median over datasets of the fitted small-size
  inter-node latency, and of the latency of the regime the fit runs at 16 MiB (NCCL's Simple protocol),
  divided by the steps of the schedule that crossed (a ring's p-1, a tree's levels); an all-reduce that
  may have crossed by either cannot say how many steps it paid and chooses neither; and the median bus
  bandwidth of the small-size regime across nodes;
* the half-width of a preset: each dataset's 95th percentile of its miss beyond the other terms,
  over datasets what covers one more system;
* the half-width of a described link: the same, by an inner leave-one-out over the calibration datasets;
* the latency half-width of a crossing priced on a measured node's regimes (its bandwidth part is
  the described one): how far each dataset's latency per step across nodes lies from the median
  of the others', the largest over datasets.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from scipy.optimize import brentq
from scipy.stats import t as student_t

from pybench.model.calibration import EXTRAPOLATED_KINDS, FAMILIES, Z95, Calibration, Spread, family
from pybench.model.cross_validation import CrossValidation, cross_validate, power_of_two_check
from pybench.model.crossing import as_double_tree, regime_crossing_s, tree_or_ring_undescribed
from pybench.model.link_cost import LinkCost
from pybench.model.link_presets import get_preset
from pybench.model.logs import load_measurements
from pybench.model.system import load_system
from pybench.model.topology import (
    BETWEEN_SIZES,
    DESCRIBED,
    OTHER_GPU_COUNT,
    OTHER_NODE_COUNT,
    PRESET,
    Observation,
    TopologyModel,
)
from pybench.model.topology_fit import fit_topology, observations_from
from pybench.model.topology_schedules import crossing_terms

LEAVE_ONE_SIZE_OUT = "leave one size out"
VALIDATED_KINDS = (BETWEEN_SIZES, LEAVE_ONE_SIZE_OUT, OTHER_GPU_COUNT, OTHER_NODE_COUNT, DESCRIBED, PRESET)
SCORED_FROM = 1 << 20
"""Extrapolated and described predictions are scored from 1 MiB up (below, one sweep's latency rules)."""
_PERCENTILE = 95.0


@dataclass(frozen=True)
class Point:
    """One held-out measurement and what predicted it."""

    dataset: str
    group: str
    kind: str
    case: str
    error: float
    """ln(predicted / measured)."""
    half: float = math.nan
    """Log half-width when the interval needs no calibration (the size kinds' own band)."""
    spread: Spread | None = None
    """The interval's inputs when it does."""

    def bounds(self, calibration: Calibration) -> tuple[float, float]:
        """(below, above): the log half-widths of its 95% interval under and over the prediction."""
        return self.spread.bounds(calibration) if self.spread is not None else (self.half, self.half)


@dataclass(frozen=True)
class SystemCase:
    """A 2-node log, its system description, and what its own fit says about the NICs."""

    dataset: str
    group: str
    system: str
    collective: str
    node_model: TopologyModel | None
    """A one-node fit of the same node type, when one exists; else the description's nominal rate."""
    observations: tuple[Observation, ...]
    efficiency: float
    """The share of the NICs' rate at which its description meets the log (:func:`_matching_efficiency`)."""
    step_latency_s: float
    """Fitted small-size inter-node latency per step of the schedule that crossed."""
    bandwidth_step_latency_s: float
    """The same of the regime its fit runs at :data:`PROTOCOL_PROBE_BYTES` (the bandwidth protocol)."""
    small_busbw_Bps: float
    """Bus bandwidth of its fit's smallest-size regime across nodes, in the bytes its crossing is priced with."""
    ranks_per_node: int
    """Ranks per node of its log."""
    preset: str = ""
    """The link preset of one of its NICs (a user's ``--link`` without a description)."""
    intra_preset: str = ""
    """The preset of its GPUs' links, where no node was measured."""
    tree_or_ring: bool = False
    """An all-reduce whose description cannot say whether NCCL crosses by its tree or its ring
    (:func:`~pybench.model.crossing.tree_or_ring_undescribed`): it chooses no family's efficiency, as
    which one it belongs to is unknown."""

    def _base(self) -> TopologyModel:
        return self.node_model or TopologyModel(self.collective, "ring", None, None, ((2, 1),), (1, 1 << 40))

    def points(self, calibration: Calibration) -> list[Point]:
        """Predicted from the system description."""
        return self._scored(self._base().with_system(load_system(self.system), calibration), DESCRIBED,
                            self.system, calibration)

    def preset_points(self, calibration: Calibration) -> list[Point]:
        """Predicted from the presets alone (one port per node; the ranks per node may drive one each)."""
        model = self._base()
        if model.intra is None:
            model = model.with_preset(get_preset(self.intra_preset))
        return self._scored(model.with_preset(get_preset(self.preset)), PRESET, self.preset, calibration)

    def _scored(self, model: TopologyModel, kind: str, source: str, calibration: Calibration) -> list[Point]:
        out = []
        for o in self.observations:
            if o.size_bytes < SCORED_FROM:
                continue
            p = model.predict(int(o.size_bytes), o.world, o.nodes, calibration=calibration)
            out.append(Point(self.dataset, self.group, kind, f"{source} -> {o.world} on {o.nodes}",
                             math.log(p.time_s / o.time_s), spread=p.spread))
        return out


@dataclass(frozen=True)
class Score:
    kind: str
    dataset: str
    n: int
    coverage: float
    median_half_width: float
    median_error: float
    max_error: float
    """Errors and half-widths in % of the predicted time."""


@dataclass(frozen=True)
class Validation:
    """The held-out scores, and the calibration chosen on every dataset."""

    scores: tuple[Score, ...]
    calibration: Calibration

    def table(self) -> str:
        rows = ["| kind | held-out dataset | points | inside the 95% interval | median half-width | "
                "median error | max error |", "|---|---|---|---|---|---|---|"]
        for s in self.scores:
            rows.append(f"| {s.kind} | {s.dataset} | {s.n} | {100 * s.coverage:.1f}% | {s.median_half_width:.1f}% | "
                        f"{s.median_error:.1f}% | {s.max_error:.1f}% |")
        return "\n".join(rows)

    def score(self, kind: str, dataset: str = "all") -> Score:
        return next(s for s in self.scores if s.kind == kind and s.dataset == dataset)


# -- datasets ---------------------------------------------------------------------------------------------

def _vtrain(data: Path) -> dict[int, list[Observation]]:
    out = {}
    for world in range(2, 9):
        (ms,) = load_measurements(data / "vtrain" / f"a100_nvswitch_allreduce_{world}gpu.csv")
        out[world] = observations_from([ms], lambda _: 1)
    return out


def _polaris(data: Path, collective: str) -> dict[int, list[Observation]]:
    return {n: observations_from(load_measurements(
        data / "nccl-tests" / f"polaris_a100_{n}node_4gpu_slingshot_{collective}.txt")) for n in (2, 8, 256, 540)}


def _with_two_nodes(path: Path) -> list[Observation]:
    """A 2-node log's points; the H100 log lists no hosts, its source names 2 nodes."""
    return observations_from(load_measurements(path), lambda _: 2)


def _every(step: int, obs: Sequence[Observation]) -> list[Observation]:
    return [o for k, o in enumerate(sorted(obs, key=lambda o: o.size_bytes)) if k % step == 0]


# -- kinds ------------------------------------------------------------------------------------------------

def _layout_points(dataset: str, group: str, layouts: dict[int, list[Observation]], fits: Sequence[tuple[int, ...]],
                   collective: str, thin: int = 1, system: str | None = None) -> list[Point]:
    """Fit at each set of layouts (on ``system``, when its description is known), predict every other
    layout from 1 MiB up."""
    out = []
    for fitted in fits:
        model = fit_topology(collective, [o for k in fitted for o in layouts[k]])
        if system is not None:
            model = model.with_system(load_system(system))
        for key, obs in layouts.items():
            if key in fitted:
                continue
            for o in _every(thin, obs):
                if o.size_bytes < SCORED_FROM:
                    continue
                p = model.predict(int(o.size_bytes), o.world, o.nodes)
                spread = p.spread
                assert spread is not None
                out.append(Point(dataset, group, spread.kind.split(",")[0],
                                 f"fit {','.join(map(str, fitted))} -> {key}", math.log(p.time_s / o.time_s),
                                 spread=spread))
    return out


def _cv_points(dataset: str, group: str, kind: str, cv: CrossValidation) -> list[Point]:
    assert cv.half_width_percent is not None  # both checks compute their bands
    half = np.log1p(cv.half_width_percent / 100.0)
    return [Point(dataset, group, kind, cv.method, float(math.log(p / t)), half=float(h))
            for p, t, h in zip(cv.predicted_s, cv.time_s, half)]


def fixed_points(data: Path) -> list[Point]:
    """Every point whose prediction does not depend on the calibration (its interval may)."""
    points: list[Point] = []
    vtrain = _vtrain(data)
    for world in range(2, 9):
        (ms,) = load_measurements(data / "vtrain" / f"a100_nvswitch_allreduce_{world}gpu.csv")
        points += _cv_points("vtrain-a100", "vtrain", BETWEEN_SIZES, power_of_two_check(ms))
    # one GPU count alone cannot show the node's switch: the fits take its description (an NVSwitch A100 node)
    points += _layout_points("vtrain-a100", "vtrain", vtrain, ((2, 4), (2,), (4,), (2, 3, 4), (4, 8), (8,)),
                             "allreduce", thin=8, system="dgx-a100")
    for collective in ("allreduce", "allgather"):
        points += _layout_points(f"polaris-{collective}", "polaris", _polaris(data, collective),
                                 ((2, 8), (2,), (8,), (2, 8, 256), (8, 256)), collective)
    for name, group, log in _SWEEPS:
        for ms in load_measurements(data / "nccl-tests" / log):
            points += _cv_points(name, group, LEAVE_ONE_SIZE_OUT, cross_validate(ms, exclude_anomalies=True))
    return points


# (dataset, hold-out group, log) of the nccl-tests sweeps validated by leave-one-size-out.
_SWEEPS = (("a100-oci-2x8", "oci", "a100_2node_16gpu_oci_roce_allreduce.txt"),
           ("h100-p5-2x8", "p5", "h100_p5_2node_16gpu_efa_allreduce_srunprefix.txt"),
           ("b200-a4-2x8", "a4", "b200_2node_16gpu_gke_a4_allgather.txt"),
           ("polaris-allreduce", "polaris", "polaris_a100_8node_4gpu_slingshot_allreduce.txt"),
           ("polaris-allgather", "polaris", "polaris_a100_8node_4gpu_slingshot_allgather.txt"))


def system_cases(data: Path) -> list[SystemCase]:
    """The 2-node logs with their system descriptions (and the one-node A100 table for the A100 node)."""
    vtrain8 = fit_topology("allreduce", _vtrain(data)[8])
    cases = []
    # (..., the preset of one of its NICs, of its GPUs' links)
    for dataset, group, system, collective, log, node, preset, intra in (
            ("a100-oci-2x8", "oci", "oci-bm-gpu4.8", "allreduce", "a100_2node_16gpu_oci_roce_allreduce.txt", vtrain8,
             "eth-100g", "nvlink3"),
            ("h100-p5-2x8", "p5", "aws-p5", "allreduce", "h100_p5_2node_16gpu_efa_allreduce_srunprefix.txt", None,
             "eth-100g", "nvlink4"),
            ("b200-a4-2x8", "a4", "gcp-a4", "allgather", "b200_2node_16gpu_gke_a4_allgather.txt", None,
             "eth-400g", "nvlink5"),
            ("polaris-allreduce", "polaris", "alcf-polaris", "allreduce",
             "polaris_a100_2node_4gpu_slingshot_allreduce.txt", None, "eth-200g", "nvlink3"),
            ("polaris-allgather", "polaris", "alcf-polaris", "allgather",
             "polaris_a100_2node_4gpu_slingshot_allgather.txt", None, "eth-200g", "nvlink3")):
        obs = _with_two_nodes(data / "nccl-tests" / log)
        fitted = fit_topology(collective, obs)
        nics = load_system(system).nic_Bps_per_node
        inter = fitted.inter
        assert inter is not None
        ((w0, n0),) = {(w, n) for w, n in fitted.fitted if n > 1}
        if collective == "allreduce":  # in the bytes a described all-reduce is priced with: the tree's
            inter = as_double_tree(inter, w0, n0)
        first, middle = inter.all_regimes()[0], _regime_at(inter, collective, w0, n0, PROTOCOL_PROBE_BYTES)
        hops = crossing_terms("ring", collective, 1, w0, n0, first.algorithm)[0]
        case = SystemCase(dataset, group, system, collective, node, tuple(obs), inter.busbw_Bps / nics,
                          (first.base_s + hops * first.step_s) / hops, (middle.base_s + hops * middle.step_s) / hops,
                          first.busbw_Bps, w0 // n0, preset, intra,
                          tree_or_ring_undescribed(collective, "ring", load_system(system)))
        cases.append(dataclasses.replace(case, efficiency=_matching_efficiency(case)))
    return cases


PROTOCOL_PROBE_BYTES = 16 << 20
"""A size every 2-node log runs in NCCL's bandwidth protocol (Simple) with its latency still ruling."""


def _regime_at(inter: LinkCost, collective: str, world: int, nodes: int, size: float) -> LinkCost:
    """The fitted inter-node regime that is the fastest at ``size`` on (world, nodes)."""
    return min(inter.all_regimes(), key=lambda r: regime_crossing_s(r, "ring", collective, size, world, nodes)[0])


def _matching_efficiency(case: SystemCase) -> float:
    """The NIC efficiency at which the case's own description meets its log: the median log error of its
    points whose bytes take most of the time is zero. The fitted bandwidth regime's rate is what the
    largest sizes reach; NCCL gets there only at the top of the sweep, and the scored sizes run below it.
    Where no efficiency meets the log (the node's own links are the slower), the fitted rate's."""
    def median_error(efficiency: float) -> float:
        calibration = Calibration(
            widening_several_layouts=dict.fromkeys(EXTRAPOLATED_KINDS, 0.0),
            widening_one_layout=dict.fromkeys(EXTRAPOLATED_KINDS, 0.0),
            nic_efficiency=dict.fromkeys(FAMILIES, efficiency), described_bandwidth_half_width=0.0,
            described_latency_half_width=0.0, crossing_latency_half_width=0.0, preset_half_width=0.0,
            crossing_step_latency_s=case.step_latency_s, bandwidth_step_latency_s=case.bandwidth_step_latency_s,
            small_protocol_busbw_Bps=case.small_busbw_Bps, crossing_ranks_per_node=case.ranks_per_node)
        points = [p for p in case.points(calibration) if p.spread is not None and p.spread.bandwidth_share >= 0.5]
        return float(np.median([p.error for p in points])) if points else 0.0

    low, high = case.efficiency / 4.0, case.efficiency * 4.0
    if median_error(low) <= 0.0 or median_error(high) >= 0.0:
        return case.efficiency
    return float(brentq(median_error, low, high, xtol=1e-4))


# -- calibration --------------------------------------------------------------------------------------------

def _worst_percentile(values_by_dataset: dict[str, list[float]]) -> float:
    """What covers a system not among the datasets: each dataset's 95th percentile is one draw of how far a
    system strays, and the next system is another draw. With three or more datasets, the one-sided 95%
    prediction bound for one more draw (Student's t, k - 1 degrees of freedom), never below the largest seen;
    with fewer, the largest (0 without values)."""
    seen = [float(np.percentile(v, _PERCENTILE, method="higher")) for v in values_by_dataset.values() if v]
    if len(seen) < 3:
        return max(seen, default=0.0)
    k, mean, sd = len(seen), float(np.mean(seen)), float(np.std(seen, ddof=1))
    return max(max(seen), mean + float(student_t.ppf(_PERCENTILE / 100.0, k - 1)) * sd * math.sqrt(1.0 + 1.0 / k))


def choose_calibration(points: Sequence[Point], cases: Sequence[SystemCase]) -> Calibration:
    """Constants chosen on ``points`` and ``cases`` alone (see the module text)."""
    needed: dict[tuple[str, bool], dict[str, list[float]]] = {}
    systems: dict[str, set[str]] = {}
    for p in points:
        if p.spread is None or p.kind not in EXTRAPOLATED_KINDS or p.spread.distance <= 0:
            continue
        beyond = math.sqrt(max((abs(p.error) - p.spread.side_span(p.error)) ** 2 - (Z95 * p.spread.local) ** 2, 0.0))
        systems.setdefault(p.kind, set()).add(p.group)
        by_dataset = needed.setdefault((p.kind, p.spread.one_layout), {})
        by_dataset.setdefault(p.dataset, []).append(beyond / p.spread.distance)
    several, one = {}, {}
    for kind in EXTRAPOLATED_KINDS:
        s, o = _worst_percentile(needed.get((kind, False), {})), _worst_percentile(needed.get((kind, True), {}))
        if s or o:
            several[kind], one[kind] = s or o, max(o, s)  # one layout knows less than several
    # A kind seen on one system alone has no other to be checked on: it takes the widest value of any
    # kind (nothing says it strays less), so what ships follows the rule that held-out scores check.
    widest = max([*several.values(), *one.values()], default=0.0)
    for kind in EXTRAPOLATED_KINDS:
        if len(systems.get(kind, ())) < 2:
            several[kind], one[kind] = widest, widest
    chosen_on = tuple(sorted({p.dataset for p in points} | {c.dataset for c in cases}))
    base = Calibration(several, one, _efficiencies(cases), 0.0, 0.0, _crossing_latency_half_width(cases), 0.0,
                       *_crossing_protocols(cases), chosen_on)
    bandwidth, latency_half = _described_half_widths(cases, base)
    described = dataclasses.replace(base, described_bandwidth_half_width=bandwidth,
                                    described_latency_half_width=latency_half)
    return dataclasses.replace(described, preset_half_width=_preset_half_width(cases, described))


def _preset_half_width(cases: Sequence[SystemCase], calibration: Calibration) -> float:
    """How far the cases' preset predictions miss beyond their other terms (a description's included):
    per dataset the 95th percentile, over datasets what covers one more system. A preset's time does not
    depend on the calibration, so no inner hold-out is needed."""
    misses: dict[str, list[float]] = {}
    for case in cases:
        for p in case.preset_points(calibration):
            assert p.spread is not None
            others = dataclasses.replace(p.spread, preset=False).bounds(calibration)[p.error < 0]
            misses.setdefault(p.dataset, []).append(math.sqrt(max(p.error ** 2 - others ** 2, 0.0)))
    return _worst_percentile(misses)


def _efficiencies(cases: Sequence[SystemCase]) -> dict[str, float]:
    """Per family, the geometric mean of the cases' NIC efficiencies (of every case where the family has
    none; 1 without a case)."""
    def mean(values: list[float]) -> float:
        return float(np.exp(np.mean(np.log(values)))) if values else 1.0

    known = [c for c in cases if not c.tree_or_ring]
    pooled = [c.efficiency for c in known]
    return {f: mean([c.efficiency for c in known if family(c.collective) == f] or pooled) for f in FAMILIES}


def _crossing_protocols(cases: Sequence[SystemCase]) -> tuple[float, float, float, float]:
    """The medians over ``cases`` of the small-size and the bandwidth protocols' latency per step across nodes,
    and of the small-size protocols' bus bandwidth (0 without a case), and the most ranks per node among them.
    An all-reduce that may have crossed by the tree or the ring (:attr:`SystemCase.tree_or_ring`) cannot say
    how many steps it paid: it says nothing of the latency per step."""
    def median(values: list[float]) -> float:
        return float(np.median(values)) if values else 0.0

    known = [c for c in cases if not c.tree_or_ring] or list(cases)
    return (median([c.step_latency_s for c in known]), median([c.bandwidth_step_latency_s for c in known]),
            median([c.small_busbw_Bps for c in cases]), float(max((c.ranks_per_node for c in cases), default=0)))


def _crossing_latency_half_width(cases: Sequence[SystemCase]) -> float:
    """Log half-width of the latency part of a crossing on a measured node's regimes: how far a system's
    latency per step across nodes, in either protocol, lies from the median of the other systems' (the
    largest)."""
    latency = 0.0
    known = [c for c in cases if not c.tree_or_ring]
    for case in known:
        rest = [c for c in known if c.group != case.group]
        for step in (lambda c: c.step_latency_s, lambda c: c.bandwidth_step_latency_s):
            if rest:
                latency = max(latency, abs(math.log(step(case) / float(np.median([step(c) for c in rest])))))
    return latency


BANDWIDTH_BOUND, LATENCY_BOUND = 0.95, 0.5
"""Points whose bytes take at least the first share of the time choose the bandwidth half-width; those
whose latency takes at least half choose the latency half-width."""


def _described_half_widths(cases: Sequence[SystemCase], base: Calibration) -> tuple[float, float]:
    """(bandwidth, latency) half-widths by an inner leave-one-group-out over ``cases``: how far a
    description misses a system it was not chosen on, beyond the interval's other terms."""
    groups = sorted({c.group for c in cases})
    if len(groups) < 2:
        return 0.0, 0.0
    # (dataset, bandwidth share, error beyond the other terms, whether a measured node gave the shape)
    misses: list[tuple[str, float, float, bool]] = []
    for group in groups:
        rest = [c for c in cases if c.group != group]
        step, bandwidth_step, small_busbw, _ = _crossing_protocols(rest)
        inner = dataclasses.replace(base, nic_efficiency=_efficiencies(rest), crossing_step_latency_s=step,
                                    bandwidth_step_latency_s=bandwidth_step, small_protocol_busbw_Bps=small_busbw)
        for case in (c for c in cases if c.group == group):
            for p in case.points(inner):
                assert p.spread is not None
                others = inner.half_width(p.spread.kind, p.spread.local, p.spread.distance, p.spread.one_layout, False,
                                          span=p.spread.side_span(p.error))
                misses.append((p.dataset, p.spread.bandwidth_share, math.sqrt(max(p.error ** 2 - others ** 2, 0.0)),
                               p.spread.shape_measured))
    bandwidth = _worst_percentile(_by_dataset((d, m) for d, share, m, _ in misses if share >= BANDWIDTH_BOUND))
    # the latency part without a measured node: a measured node's shape says nothing of it
    latency = _worst_percentile(_by_dataset((d, max(m - share * bandwidth, 0.0) / (1.0 - share))
                                            for d, share, m, shaped in misses if share < LATENCY_BOUND and not shaped))
    return bandwidth, max(latency, bandwidth)


def _by_dataset(pairs) -> dict[str, list[float]]:
    out: dict[str, list[float]] = {}
    for dataset, value in pairs:
        out.setdefault(dataset, []).append(value)
    return out


# -- scoring ------------------------------------------------------------------------------------------------

def _score(kind: str, dataset: str, points: Sequence[Point], bounds: Sequence[tuple[float, float]]) -> Score:
    """Inside: the measurement lies between the bounds (error = ln(predicted / measured)). The half-width of a
    point is the mean of its two sides."""
    error = np.array([p.error for p in points])
    below, above = np.array([b for b, _ in bounds]), np.array([a for _, a in bounds])
    inside = (error <= below) & (error >= -above)
    return Score(kind, dataset, len(points), float(np.mean(inside)),
                 100 * float(np.median(np.expm1((below + above) / 2.0))),
                 100 * float(np.median(np.abs(np.expm1(error)))), 100 * float(np.max(np.abs(np.expm1(error)))))


def validate(data: Path, progress: Callable[[str], None] = lambda _: None) -> Validation:
    """Leave-one-dataset-out scores for every kind, and the calibration chosen on all datasets."""
    progress("fitting every dataset's cases")
    points = fixed_points(data)
    cases = system_cases(data)
    scored: list[tuple[Point, tuple[float, float]]] = []
    for group in sorted({p.group for p in points} | {c.group for c in cases}):
        progress(f"holding out {group}")
        calibration = choose_calibration([p for p in points if p.group != group],
                                         [c for c in cases if c.group != group])
        held = [p for p in points if p.group == group]
        held += [p for c in cases if c.group == group for p in (*c.points(calibration),
                                                                 *c.preset_points(calibration))]
        scored += [(p, p.bounds(calibration)) for p in held]
    scores = []
    for kind in VALIDATED_KINDS:
        mine = [(p, h) for p, h in scored if p.kind == kind]
        if not mine:
            continue
        scores.append(_score(kind, "all", [p for p, _ in mine], [h for _, h in mine]))
        for dataset in sorted({p.dataset for p, _ in mine}):
            these = [(p, h) for p, h in mine if p.dataset == dataset]
            scores.append(_score(kind, dataset, [p for p, _ in these], [h for _, h in these]))
    return Validation(tuple(scores), choose_calibration(points, cases))
