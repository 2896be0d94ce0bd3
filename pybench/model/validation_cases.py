"""What the model is validated on: the real logs in the repository as held-out cases, each prediction with
the interval inputs that calibration scores (:mod:`pybench.model.validation`).

Two folders of real logs: ``shared`` (the project's shared data: the vTrain A100 node, Polaris, three
2-node clusters) and ``public`` (logs published by other projects, each with its source in
``SOURCES.md``, and a description in ``systems/`` of each cluster that no named system matches). A
dataset is one cluster's logs; a group is what is held out together (one system).
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
from scipy.optimize import brentq, least_squares

from pybench.model.anomalies import disturbed_sizes
from pybench.model.beyond_sweep import BANDWIDTH_PROTOCOL_BYTES
from pybench.model.build import fit_model
from pybench.model.calibration import BEYOND_SIZES, EXTRAPOLATED_KINDS, FAMILIES, PARTS, Calibration, Spread
from pybench.model.cross_validation import CrossValidation, cross_validate, power_of_two_check
from pybench.model.crossing import as_double_tree, regime_crossing_s
from pybench.model.described_crossing import described_algorithm, nics_shared, tree_or_ring_undescribed
from pybench.model.link_cost import LinkCost
from pybench.model.link_presets import get_preset
from pybench.model.logs import load_measurements
from pybench.model.system import load_system
from pybench.model.topology import BETWEEN_SIZES, DESCRIBED, PRESET, Observation, TopologyModel
from pybench.model.topology_fit import fit_topology, undisturbed_observations
from pybench.model.topology_schedules import crossing_terms
from pybench.sizes import format_size

LEAVE_ONE_SIZE_OUT = "leave one size out"
SCORED_FROM = 1 << 20
"""Extrapolated and described predictions are scored from 1 MiB up (below, one sweep's latency rules)."""


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
    ends: Callable[[Calibration], tuple[float, float, float]] | None = field(default=None, compare=False, repr=False)
    """The (time, low, high) the prediction itself returns under a calibration, where it takes one: what is scored
    (the spread chooses the constants; predict's bounds and clamps beyond it are the user's answer)."""

    def bounds(self, calibration: Calibration) -> tuple[float, float]:
        """(below, above): the log half-widths of its 95% interval under and over the prediction."""
        return self.spread.bounds(calibration) if self.spread is not None else (self.half, self.half)

    def answered_bounds(self, calibration: Calibration) -> tuple[float, float]:
        """(below, above) of the interval the prediction returns under ``calibration`` (:attr:`ends`), else of
        :meth:`bounds`."""
        if self.ends is None:
            return self.bounds(calibration)
        time, low, high = self.ends(calibration)
        return math.log(time / low), math.log(high / time)


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
    """The share of the NICs' rate at which its description meets the top of its log (:func:`_matching_efficiency`;
    NaN where its node's own links bound it there)."""
    step_latency_s: float
    """Fitted small-size inter-node latency per step of the schedule that crossed."""
    bandwidth_step_latency_s: float
    """The same of the regime its fit runs at :data:`PROTOCOL_PROBE_BYTES` (the bandwidth protocol)."""
    nominal_step_latency_s: float
    """The bandwidth protocol's latency per step at which its description, on a node at its nominal rate,
    meets its log best (:func:`_matching_nominal_step`)."""
    small_busbw_Bps: float
    """Bus bandwidth of its fit's smallest-size regime across nodes, in the bytes its crossing is priced with."""
    ranks_per_node: int
    """Ranks per node of its log."""
    preset: str = ""
    """The link preset of one of its NICs (a user's ``--link`` without a description)."""
    intra_preset: str = ""
    """The preset of its GPUs' links, where no node was measured ("" where no preset names them: no preset
    points)."""
    small_measured: bool = True
    """Whether its sweep reached the small-size protocols: its fit's first regime is not the one it runs at
    :data:`PROTOCOL_PROBE_BYTES` (a sweep from 1 MiB or 8 MiB up has one regime, the bandwidth protocol's, and says
    nothing of the small-size steps or their bus bandwidth)."""
    shared_nics: bool = False
    """An all-reduce whose ranks share NICs (:func:`~pybench.model.described_crossing.nics_shared`): NCCL may cross
    by its tree or its ring, whose steps may each wait on the network, so it chooses no family's efficiency and
    no step latency."""

    @property
    def steps_known(self) -> bool:
        """Whether its log says how long a step across nodes waits: not an all-reduce that may have crossed by the
        tree or the ring, nor a ring of another collective, which may have waited on the network at every one of
        its steps (GCP A4's and Polaris's all-gathers ran as if so) or only where it crosses a node (NCCL's tuning
        model; DGX nodes on InfiniBand ran so): its steps are the reach of a described ring, not its step."""
        return not self.shared_nics and self.collective == "allreduce"

    @property
    def nics_met_at(self) -> float:
        """The NIC efficiency its own description is met at: its own, or the NICs' full rate where its node's links
        bound its log (they did not hold it back)."""
        return 1.0 if math.isnan(self.efficiency) else self.efficiency

    def _base(self) -> TopologyModel:
        return self.node_model or TopologyModel(self.collective, "ring", None, None, ((2, 1),), (1, 1 << 40))

    def points(self, calibration: Calibration) -> list[Point]:
        """Predicted from the system description."""
        return self._scored(self._base().with_system(load_system(self.system), calibration), DESCRIBED,
                            self.system, calibration)

    def preset_points(self, calibration: Calibration) -> list[Point]:
        """Predicted from the presets alone (one port per node; the ranks per node may drive one each)."""
        model = self._base()
        if model.intra is None and not self.intra_preset:  # no preset names its GPUs' links
            return []
        if model.intra is None:
            model = model.with_preset(get_preset(self.intra_preset))
        return self._scored(model.with_preset(get_preset(self.preset)), PRESET, self.preset, calibration)

    def _scored(self, model: TopologyModel, kind: str, source: str, calibration: Calibration) -> list[Point]:
        out = []
        for o in _scored_observations(self.observations):
            p = model.predict(int(o.size_bytes), o.world, o.nodes, calibration=calibration)
            out.append(Point(self.dataset, self.group, kind, f"{source} -> {o.world} on {o.nodes}",
                             math.log(p.time_s / o.time_s), spread=p.spread,
                             ends=_answered(model, int(o.size_bytes), o.world, o.nodes)))
        return out


def _scored_observations(obs: Sequence[Observation]) -> list[Observation]:
    """The held-out measurements a prediction is scored against: from :data:`SCORED_FROM` up (the logs are read
    without their disturbed sizes, as every fit reads them: :func:`_observations`)."""
    return [o for o in obs if o.size_bytes >= SCORED_FROM]


# -- datasets ---------------------------------------------------------------------------------------------

def _vtrain(data: Path) -> dict[int, list[Observation]]:
    return {world: _observations(data / "vtrain" / f"a100_nvswitch_allreduce_{world}gpu.csv", 1)
            for world in range(2, 9)}


def _polaris(data: Path, collective: str) -> dict[int, list[Observation]]:
    return {n: _observations(data / "nccl-tests" / f"polaris_a100_{n}node_4gpu_slingshot_{collective}.txt")
            for n in (2, 8, 256, 540)}


def _observations(path: Path, nodes: int | None = None) -> list[Observation]:
    """A log's points on ``nodes`` nodes (some logs list no hosts; their sources name the nodes; by default the
    log's), but at the sizes whose replicates disagree: no prediction of a layout can meet two times that far
    apart, and no fit takes them in (:func:`~pybench.model.topology_fit.undisturbed_observations`)."""
    return [o for ms in load_measurements(path)
            for o in undisturbed_observations(ms, None if nodes is None else lambda _: nodes)]


def _log_path(name: str, shared: Path, public: Path) -> Path:
    """Where a log named in this module lies: the shared data's nccl-tests logs, else the public ones."""
    return shared / "nccl-tests" / name if (shared / "nccl-tests" / name).is_file() else public / name


def _h100_ib(public: Path) -> dict[int, list[Observation]]:
    return {n: _observations(public / f"h100ib_gjaion_{n}node{8 * n}_allreduce.log", n) for n in (2, 4, 8)}


def _xr01(public: Path, collective: str, gpus: int | None = None,
          nodes: int | None = None) -> dict[int, list[Observation]]:
    """The xr01 cluster's ``collective`` at ``gpus`` per node on 2 and 10 nodes (keyed by nodes), or on ``nodes``
    nodes at each GPU count it ran (keyed by GPUs per node)."""
    def log(n: int, g: int) -> list[Observation]:
        name = {1: f"xr01_h100_N1_G{g}_002.log", 2: f"xr01_h100_N2_G{g}_002_003.log"}.get(n, f"xr01_h100_N{n}_G{g}.log")
        return [o for ms in load_measurements(public / name) if ms.collective == collective
                for o in undisturbed_observations(ms, lambda _: n)]

    if gpus is not None:
        return {n: log(n, gpus) for n in (2, 10)}
    assert nodes is not None
    return {g: log(nodes, g) for g in ((4, 8) if nodes == 1 else (1, 2, 4, 8))}


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
            for o in _scored_observations(_every(thin, obs)):
                p = model.predict(int(o.size_bytes), o.world, o.nodes)
                if not p.determined:  # answered "not determined" (a fit one cost shape cannot join): not scored
                    continue
                spread = p.spread
                assert spread is not None
                out.append(Point(dataset, group, spread.kind.split(",")[0],
                                 f"fit {','.join(map(str, fitted))} -> {key}", math.log(p.time_s / o.time_s),
                                 spread=spread, ends=_answered(model, int(o.size_bytes), o.world, o.nodes)))
    return out


Answered = Callable[[Calibration], tuple[float, float, float]]
"""(time, low, high) a prediction returns under a calibration."""


def _answered(model: TopologyModel, size: int, world: int, nodes: int) -> Answered:
    def ends(calibration: Calibration) -> tuple[float, float, float]:
        p = model.predict(size, world, nodes, calibration=calibration)
        return p.time_s, p.low_s, p.high_s
    return ends


def _answered_sweep(model, size: float) -> Answered:
    def ends(calibration: Calibration) -> tuple[float, float, float]:
        p = model.predict(size, calibration=calibration)
        return p.time_s, p.time_low_s, p.time_high_s
    return ends


def _cv_points(dataset: str, group: str, kind: str, cv: CrossValidation) -> list[Point]:
    assert cv.half_width_percent is not None  # both checks compute their bands
    half = np.log1p(cv.half_width_percent / 100.0)
    return [Point(dataset, group, kind, cv.method, float(math.log(p / t)), half=float(h))
            for p, t, h in zip(cv.predicted_s, cv.time_s, half)]


def fixed_points(shared: Path, public: Path) -> list[Point]:
    """Every point whose prediction does not depend on the calibration (its interval may)."""
    points: list[Point] = []
    vtrain = _vtrain(shared)
    for world in range(2, 9):
        (ms,) = load_measurements(shared / "vtrain" / f"a100_nvswitch_allreduce_{world}gpu.csv")
        points += _cv_points("vtrain-a100", "vtrain", BETWEEN_SIZES, power_of_two_check(ms))
    # one GPU count alone cannot show the node's switch: the fits take its description (an NVSwitch A100 node)
    points += _layout_points("vtrain-a100", "vtrain", vtrain, ((2, 4), (2,), (4,), (2, 3, 4), (4, 8), (8,)),
                             "allreduce", thin=8, system="dgx-a100")
    for collective in ("allreduce", "allgather"):
        points += _layout_points(f"polaris-{collective}", "polaris", _polaris(shared, collective),
                                 ((2, 8), (2,), (8,), (2, 8, 256), (8, 256)), collective)
    points += _layout_points("h100-ib-nx8", "h100ib", _h100_ib(public), ((2,), (4,), (2, 4), (2, 8), (4, 8)),
                             "allreduce")
    # an H100 cluster at 1 GPU to 8 per node: 2 and 10 nodes (all-to-all, send/recv), and one node or ten at every
    # GPU count (five collectives); its one-node GPU counts on its node's description (NVSwitch)
    for collective in ("alltoall", "sendrecv"):
        for gpus in (1, 2, 4, 8):
            points += _layout_points("h100-xr01", "xr01", _xr01(public, collective, gpus=gpus), ((2,), (10,)),
                                     collective)
    for collective in ("allreduce", "allgather", "reducescatter", "alltoall", "sendrecv"):
        points += _layout_points("h100-xr01", "xr01", _xr01(public, collective, nodes=10), ((8,), (1, 8)), collective)
        points += _layout_points("h100-xr01", "xr01", _xr01(public, collective, nodes=1), ((4,), (8,)), collective,
                                 system=str(public / "systems" / "h100-xr01.json"))
    # ABCI's A100 node at 4 and 8 GPUs, each predicting the other, on its node's description (NVSwitch); its clusters'
    # node counts are a test set no constant is chosen on (tests/model/test_other_clusters.py)
    abci = {g: _observations(public / f"abci_anode_a100_n1_g{g}_nccl_allreduce.log", 1) for g in (4, 8)}
    points += _layout_points("abci-a100", "abci", abci, ((4,), (8,)), "allreduce",
                             system=str(public / "systems" / "abci-a100.json"))
    for name, group, log in _SWEEPS:
        for ms in load_measurements(_log_path(log, shared, public)):
            points += _cv_points(name, group, LEAVE_ONE_SIZE_OUT, cross_validate(ms, exclude_anomalies=True))
            points += _beyond_points(name, group, ms)
    (ms,) = load_measurements(shared / "vtrain" / "a100_nvswitch_allreduce_8gpu.csv")
    return points + _beyond_points("vtrain-a100", "vtrain", ms, thin=8)  # 1 MiB steps: as many points as a few


BEYOND_FACTOR = 8
"""Sizes beyond a sweep are validated by fitting it without its sizes above 1/8, 1/64, ... of its largest (three
octaves at a time, while 8 sizes stay) and predicting every larger size: from the bytes' regime and from the
latency's, a few octaves beyond and many."""


def _beyond_points(dataset: str, group: str, ms, thin: int = 1) -> list[Point]:
    """The sweep fitted up to each cut (:data:`BEYOND_FACTOR`), each larger size predicted, and from each cut up,
    each smaller size predicted (from :data:`SCORED_FROM`; not a size whose replicates disagree, which no fit
    takes in), every ``thin``-th of them."""
    size, time = ms.fit_points()
    disturbed = {s for s, _ in disturbed_sizes(size, time)}
    scored = np.array([x for x in np.unique(size) if x >= SCORED_FROM and int(x) not in disturbed])
    out: list[Point] = []
    for upward in (True, False):
        cut = float(np.max(ms.size_bytes)) / BEYOND_FACTOR if upward else float(np.min(ms.size_bytes)) * BEYOND_FACTOR
        while np.unique(ms.size_bytes[(ms.size_bytes <= cut) if upward else (ms.size_bytes >= cut)]).size >= 8:
            fitted = fit_model(ms.at((ms.size_bytes <= cut) if upward else (ms.size_bytes >= cut)))
            held = scored[(scored > cut) if upward else (scored < cut)][::thin]
            held = np.array([x for x in held if not fitted.undetermined_at(float(x))])  # answered "not determined"
            if held.size:
                predicted, spreads = fitted.times_and_spreads(held)
                what = f"fit {'up to' if upward else 'from'} {format_size(int(cut))}"
                out += [Point(dataset, group, BEYOND_SIZES, f"{what} -> {format_size(int(x))}",
                              math.log(float(t) / float(np.median(time[size == x]))), spread=sp,
                              ends=_answered_sweep(fitted, float(x)))
                        for x, t, sp in zip(held, predicted.reshape(-1), spreads)]
            cut = cut / BEYOND_FACTOR if upward else cut * BEYOND_FACTOR
    return out




# (dataset, hold-out group, log) of the sweeps validated by leave-one-size-out.
_SWEEPS = (("a100-oci-2x8", "oci", "a100_2node_16gpu_oci_roce_allreduce.txt"),
           ("h100-p5-2x8", "p5", "h100_p5_2node_16gpu_efa_allreduce_srunprefix.txt"),
           ("b200-a4-2x8", "a4", "b200_2node_16gpu_gke_a4_allgather.txt"),
           ("polaris-allreduce", "polaris", "polaris_a100_8node_4gpu_slingshot_allreduce.txt"),
           ("polaris-allgather", "polaris", "polaris_a100_8node_4gpu_slingshot_allgather.txt"),
           ("h100-ib-nx8", "h100ib", "h100ib_gjaion_2node16_allreduce.log"),
           ("mi300x-aac10-2x8", "mi300x", "mi300x_aac10_2node16_allreduce.log"),
           ("mi355x-aac14-2x8", "mi355x", "mi355x_aac14_2node16_pollara_allreduce.log"),
           ("h100-a3mega-2x8", "a3mega", "gcp_a3mega_2node16_allreduce.log"),
           ("b200-a4-gke-2x8", "a4", "gke_a4_b200_2node16_allreduce.log"),
           ("v100-p3dn-2x8", "p3dn", "v100_p3dn_efa_2node16_allreduce.log"),
           # nccl-tests#290: a cluster whose 2-node bus bandwidth its own thread finds far below its NICs (a fault
           # under investigation there): its sweep's shape is scored; as a system description, which states working
           # NICs, it is not (the closing note of session 29 gives what scoring it would do)
           ("h100-ib290-2x8", "h100ib290", "h100ib_issue290_2node16_allreduce.log"))


def system_cases(shared: Path, public: Path) -> list[SystemCase]:
    """The 2-node logs with their system descriptions, and a one-node log of the same node type where one
    exists (the vTrain A100 table for the OCI A100 node, another cluster's MI300X node for AAC10's).

    A log that forced NCCL's algorithm (AWS p3dn's 2-node all-reduce ran with ``NCCL_TREE_THRESHOLD=0``) is none of
    them: a description prices what NCCL picks, and on that node type NCCL picked the tree (nccl-tests#22)."""
    nodes = {"vtrain": fit_topology("allreduce", _vtrain(shared)[8]),
             "mi300x": fit_topology("allreduce", _observations(public / "mi300x_aac8_1node8_allreduce.log", 1)),
             "b200": fit_topology("allreduce", _observations(public / "gke_a4_b200_1node8_allreduce.log", 1))}
    cases = []
    # (..., a one-node fit of its node type, the preset of one of its NICs, of its GPUs' links: "" for none)
    for dataset, group, system, collective, log, node, preset, intra in (
            ("a100-oci-2x8", "oci", "oci-bm-gpu4.8", "allreduce", "a100_2node_16gpu_oci_roce_allreduce.txt",
             "vtrain", "eth-100g", "nvlink3"),
            ("h100-p5-2x8", "p5", "aws-p5", "allreduce", "h100_p5_2node_16gpu_efa_allreduce_srunprefix.txt", "",
             "eth-100g", "nvlink4"),
            ("b200-a4-2x8", "a4", "gcp-a4", "allgather", "b200_2node_16gpu_gke_a4_allgather.txt", "",
             "eth-400g", "nvlink5"),
            ("polaris-allreduce", "polaris", "alcf-polaris", "allreduce",
             "polaris_a100_2node_4gpu_slingshot_allreduce.txt", "", "eth-200g", "nvlink3"),
            ("polaris-allgather", "polaris", "alcf-polaris", "allgather",
             "polaris_a100_2node_4gpu_slingshot_allgather.txt", "", "eth-200g", "nvlink3"),
            ("h100-ib-nx8", "h100ib", "dgx-h100", "allreduce", "h100ib_gjaion_2node16_allreduce.log", "",
             "ib-ndr", "nvlink4"),
            ("mi300x-aac10-2x8", "mi300x", str(public / "systems" / "amd-mi300x-aac10.json"), "allreduce",
             "mi300x_aac10_2node16_allreduce.log", "mi300x", "eth-400g", ""),
            ("mi355x-aac14-2x8", "mi355x", str(public / "systems" / "amd-mi355x-pollara.json"), "allreduce",
             "mi355x_aac14_2node16_pollara_allreduce.log", "", "eth-400g", ""),
            ("h100-a3mega-2x8", "a3mega", "gcp-a3-mega", "allreduce", "gcp_a3mega_2node16_allreduce.log", "",
             "eth-200g", "nvlink4"),
            ("b200-a4-gke-2x8", "a4", "gcp-a4", "allreduce", "gke_a4_b200_2node16_allreduce.log", "b200",
             "eth-400g", "nvlink5"),
            ("a100-sophia-allreduce", "sophia", "dgx-a100", "allreduce", "sophia_dgxa100_2node16_allreduce.log",
             "vtrain", "ib-hdr", "nvlink3"),
            ("a100-sophia-allgather", "sophia", "dgx-a100", "allgather", "sophia_dgxa100_2node16_allgather.log", "",
             "ib-hdr", "nvlink3")):
        obs = _observations(_log_path(log, shared, public), 2)
        cases.append(_system_case(dataset, group, system, collective, obs, nodes.get(node), preset, intra))
    return cases


def _system_case(dataset: str, group: str, system: str, collective: str, obs: list[Observation],
                 node: TopologyModel | None, preset: str, intra: str) -> SystemCase:
    fitted = fit_topology(collective, obs)
    described = load_system(system)
    nics = described.nic_Bps_per_node
    inter = fitted.inter
    assert inter is not None
    ((w0, n0),) = {(w, n) for w, n in fitted.fitted if n > 1}
    if described_algorithm(collective, "ring", described) == "double-tree":  # the bytes it is priced in
        inter = as_double_tree(inter, w0, n0)
    first, middle = inter.all_regimes()[0], _regime_at(inter, collective, w0, n0, PROTOCOL_PROBE_BYTES)
    hops = crossing_terms("ring", collective, 1, w0, n0, first.algorithm)[0]
    middle_step = (middle.base_s + hops * middle.step_s) / hops  # (the nominal step starts from it: matched below)
    case = SystemCase(dataset, group, system, collective, node, tuple(obs), inter.busbw_Bps / nics,
                      (first.base_s + hops * first.step_s) / hops, middle_step, middle_step, first.busbw_Bps,
                      w0 // n0, preset, intra,
                      first is not middle, nics_shared(collective, "ring", described))
    case = dataclasses.replace(case, efficiency=_matching_efficiency(case))
    return dataclasses.replace(case, nominal_step_latency_s=_matching_nominal_step(case))


PROTOCOL_PROBE_BYTES = BANDWIDTH_PROTOCOL_BYTES


def _regime_at(inter: LinkCost, collective: str, world: int, nodes: int, size: float) -> LinkCost:
    """The fitted inter-node regime that is the fastest at ``size`` on (world, nodes)."""
    return min(inter.all_regimes(), key=lambda r: regime_crossing_s(r, "ring", collective, size, world, nodes)[0])


def _own_calibration(case: SystemCase, efficiency: float, nominal_step_s: float) -> Calibration:
    """A calibration of the case's own constants alone, with no interval terms."""
    none = {k: dict.fromkeys(PARTS, 0.0) for k in EXTRAPOLATED_KINDS}
    return Calibration(
        widening_several_layouts=none, widening_one_layout=none, nic_efficiency=dict.fromkeys(FAMILIES, efficiency),
        described_bandwidth_half_width=0.0, described_latency_half_width=0.0, crossing_latency_half_width=0.0,
        preset_half_width=0.0, crossing_step_latency_s=case.step_latency_s,
        bandwidth_step_latency_s=case.bandwidth_step_latency_s, nominal_step_latency_s=nominal_step_s,
        small_protocol_busbw_Bps=case.small_busbw_Bps, crossing_ranks_per_node=case.ranks_per_node,
        slower_widening_above_sweep=0.0, slower_widening_below_sweep=0.0)


def _matching_efficiency(case: SystemCase) -> float:
    """The NIC efficiency at which the case's own description meets its log at the top of its sweep: the
    median log error of its :data:`TOP_SIZES` largest scored sizes is zero. NaN where no efficiency meets
    them (the node's own links are the slower there: the log says only that the NICs carry more), and where its
    description cannot say whether the tree's bytes or the ring's crossed.
    The middle sizes run below the rate the largest reach, in a protocol's own latency, which
    :func:`_matching_nominal_step` meets; they say nothing of what the NICs carry."""
    if tree_or_ring_undescribed(case.collective, "ring", load_system(case.system)):
        return math.nan  # (which bytes it carried, the tree's or the ring's, is what its description cannot say)
    scored = _scored_observations(case.observations)  # (the points' order: :meth:`SystemCase._scored`)
    top = sorted({o.size_bytes for o in scored})[-TOP_SIZES:]

    def median_error(efficiency: float) -> float:
        points = [p for p, o in zip(case.points(_own_calibration(case, efficiency, case.nominal_step_latency_s)),
                                    scored) if o.size_bytes in top]
        return float(np.median([p.error for p in points]))

    low, high = case.efficiency / 4.0, case.efficiency * 4.0
    if median_error(high) >= 0.0:
        return math.nan
    if median_error(low) <= 0.0:
        return case.efficiency
    return float(brentq(median_error, low, high, xtol=1e-4))


TOP_SIZES = 3
"""The largest sizes of a 2-node sweep that choose its NIC efficiency."""


def _matching_nominal_step(case: SystemCase) -> float:
    """The bandwidth protocol's latency per step across nodes at which the case's description, its node at
    the nominal rate (measured or not) and its NICs at the matching efficiency, meets its log best: least
    squares in log time over its scored sizes, within a factor e^3 of its fit's regime's own."""
    start, nominal = math.log(case.bandwidth_step_latency_s), dataclasses.replace(case, node_model=None)

    def errors(x: np.ndarray) -> np.ndarray:
        return np.array([p.error for p in nominal.points(_own_calibration(case, case.nics_met_at, math.exp(x[0])))])

    solved = least_squares(errors, [start], bounds=([start - 3.0], [start + 3.0]))
    return float(math.exp(solved.x[0]))
