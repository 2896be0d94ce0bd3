"""Leave-one-dataset-out validation of the communication model, and the choice of its constants.

Every real log in the repository is a dataset. For each kind of prediction (:data:`VALIDATED_KINDS`:
between measured sizes, leave-one-size-out, beyond the measured sizes, another GPU count, another GPU
count per node, another node count, a system description, a preset), each
dataset is predicted with constants (:class:`~pybench.model.calibration.Calibration`) chosen on
the *other* datasets only, and scored: the share of held-out measurements inside the 95%
interval, its median half-width, and the median and largest errors. The shipped constants are
then chosen on every dataset. The two Polaris datasets are one system and are held out together.

How the constants are chosen (:func:`choose_calibration`), each from what the calibration
datasets say, none by hand:

* the widening per unit of log distance: for each extrapolated point, the widening that would
  just cover its error beyond its other terms (solved on the interval's own bound); per system the
  95th percentile of those (a point no value covers counts among its misses), and over systems what
  covers one more (:func:`_worst_percentile`), in a bandwidth and a latency part (:func:`_widening`;
  beyond a sweep's sizes one for both, its slow side its own above and below: :func:`_slower_side`); per kind
  where two systems or more hold the kind, else the widest of any kind of layout; fits at one layout and at
  several apart;
* the NIC efficiency per family (all-reduce, ring): the geometric mean over datasets of the share of
  the description's NICs at which the described crossing meets the log on the sizes whose bytes
  rule, in the bytes it is priced with (an all-reduce in the tree's); an all-reduce on GPUs that
  share NICs, which NCCL may cross by its ring, chooses neither;
* the latency of one step across nodes, per protocol: the median over datasets of the fitted small-size
  inter-node latency, and of the latency of the regime the fit runs at 16 MiB (NCCL's Simple protocol),
  divided by the steps of the schedule that crossed (a ring's p-1, a tree's levels); an all-reduce that
  may have crossed by either cannot say how many steps it paid and chooses neither; and the median bus
  bandwidth of the small-size regime across nodes;
* the half-width of a preset: each system's 95th percentile of its miss beyond the other terms,
  over systems what covers one more;
* the half-width of a described link: the same, by an inner leave-one-out over the calibration datasets;
* the latency half-width of a crossing priced on a measured node's regimes (its bandwidth part is
  the described one): how far each dataset's latency per step across nodes lies from the median
  of the others', the largest over datasets, and never above the latency half-width without a measured
  node (a measured shape knows at least as much as none).
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TypeVar

import numpy as np
from scipy.optimize import brentq
from scipy.stats import t as student_t

from pybench.model.calibration import (
    BEYOND_SIZES,
    EXTRAPOLATED_KINDS,
    FAMILIES,
    LAYOUT_KINDS,
    PARTS,
    Calibration,
    family,
)
from pybench.model.topology import (
    BETWEEN_SIZES,
    DESCRIBED,
    OTHER_GPU_COUNT,
    OTHER_GPUS_PER_NODE,
    OTHER_NODE_COUNT,
    PRESET,
)
from pybench.model.validation_cases import LEAVE_ONE_SIZE_OUT, Point, SystemCase, fixed_points, system_cases
from pybench.model.validation_osu import ClusterScore, osu_scores

VALIDATED_KINDS = (BETWEEN_SIZES, LEAVE_ONE_SIZE_OUT, BEYOND_SIZES, OTHER_GPU_COUNT, OTHER_GPUS_PER_NODE,
                   OTHER_NODE_COUNT, DESCRIBED, PRESET)
_PERCENTILE = 95.0


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
    osu_clusters: tuple[ClusterScore, ...] = ()
    """The test set no constant is chosen on, under :attr:`calibration` (:mod:`pybench.model.validation_osu`)."""

    def table(self) -> str:
        rows = ["| kind | held-out dataset | points | inside the 95% interval | median half-width | "
                "median error | max error |", "|---|---|---|---|---|---|---|"]
        for s in self.scores:
            rows.append(f"| {s.kind} | {s.dataset} | {s.n} | {100 * s.coverage:.1f}% | {s.median_half_width:.1f}% | "
                        f"{s.median_error:.1f}% | {s.max_error:.1f}% |")
        return "\n".join(rows)

    def score(self, kind: str, dataset: str = "all") -> Score:
        return next(s for s in self.scores if s.kind == kind and s.dataset == dataset)


# -- calibration --------------------------------------------------------------------------------------------

def _worst_percentile(values_by_system: dict[str, list[float]], percentile: float = _PERCENTILE) -> float:
    """What covers a system not among those seen: each system's 95th percentile is one draw of how far a
    system strays, and the next system is another draw (two logs of one system, Polaris' all-reduce and
    all-gather, are one draw, not two). With three or more systems, the one-sided 95%
    prediction bound for one more draw (Student's t, k - 1 degrees of freedom), never below the largest seen;
    with fewer, the largest (0 without values)."""
    seen = [_percentile(v, percentile) for v in values_by_system.values() if v]
    if len(seen) < 3:
        return max(seen, default=0.0)
    k, mean, sd = len(seen), float(np.mean(seen)), float(np.std(seen, ddof=1))
    return max(max(seen), mean + float(student_t.ppf(_PERCENTILE / 100.0, k - 1)) * sd * math.sqrt(1.0 + 1.0 / k))


def _percentile(values: list[float], percentile: float = _PERCENTILE) -> float:
    """A system's 95th percentile (or ``percentile``); values no constant reaches (inf: a point no value of the part
    covers) count among the 5% it may miss, and where they are more, the largest that one does reach."""
    p = float(np.percentile(values, percentile, method="higher"))
    return p if math.isfinite(p) else max([v for v in values if math.isfinite(v)], default=0.0)


def choose_calibration(points: Sequence[Point], cases: Sequence[SystemCase]) -> Calibration:
    """Constants chosen on ``points`` and ``cases`` alone (see the module text)."""
    # (kind, one layout) -> system -> its extrapolated points
    needed: dict[tuple[str, bool], dict[str, list[Point]]] = {}
    systems: dict[str, set[str]] = {}
    for p in points:
        if p.spread is None or p.kind not in EXTRAPOLATED_KINDS or p.spread.distance <= 0:
            continue
        systems.setdefault(p.kind, set()).add(p.group)
        needed.setdefault((p.kind, p.spread.one_layout), {}).setdefault(p.group, []).append(p)
    several, one = {}, {}
    beyond: dict[str, list[Point]] = {}
    for layouts in (True, False):
        for group, pts in needed.get((BEYOND_SIZES, layouts), {}).items():
            beyond.setdefault(group, []).extend(pts)
    above_sweep, below_sweep = (_slower_side({g: [p for p in pts if p.spread is not None and
                                                  p.spread.below_sweep == below] for g, pts in beyond.items()})
                                for below in (False, True))
    for kind in EXTRAPOLATED_KINDS:
        split = kind != BEYOND_SIZES  # a sweep carried on crosses regimes it never showed: one factor for both parts
        s, o = _widening(needed.get((kind, False), {}), split), _widening(needed.get((kind, True), {}), split)
        chosen = [w for w in (s, o) if w is not None]
        if chosen:  # (several layouts that needed none take one layout's: one system showed no stray, not none)
            several[kind] = s if s is not None and any(s.values()) else (o or s or {})
            one[kind] = {part: max(w[part] for w in chosen) for part in PARTS}  # one layout knows less than several
    # A kind seen on one system alone has no other to be checked on: it takes the widest value of any kind of
    # layout (nothing says it strays less; sizes beyond a sweep are another axis), so what ships follows the rule
    # that held-out scores check.
    widest = {part: max([0.0, *(w[k][part] for w in (several, one) for k in LAYOUT_KINDS if k in w)]) for part in PARTS}
    for kind in EXTRAPOLATED_KINDS:  # (and one whose points chose no part: every kind ships a widening)
        if len(systems.get(kind, ())) < 2 or kind not in several:
            several[kind], one[kind] = dict(widest), dict(widest)
    chosen_on = tuple(sorted({p.dataset for p in points} | {c.dataset for c in cases}))
    base = Calibration(several, one, _efficiencies(cases), 0.0, 0.0, _crossing_latency_half_width(cases), 0.0,
                       *_crossing_protocols(cases), above_sweep, below_sweep, _REACH, chosen_on=chosen_on)
    base = dataclasses.replace(base, more_nodes_speedup=_more_nodes_speedup(points, base),
                               slowest_network_step_s=_slowest_network_step(cases),
                               beyond_bytes_speedup=_beyond_bytes_speedup(points, base))
    bandwidth, latency_half = _described_half_widths(cases, base)
    # a measured node's protocol shape knows at least as much as none: its latency part is never the wider
    described = dataclasses.replace(base, described_bandwidth_half_width=bandwidth,
                                    described_latency_half_width=latency_half,
                                    crossing_latency_half_width=min(base.crossing_latency_half_width, latency_half))
    return dataclasses.replace(described, preset_half_width=_preset_half_width(cases, described))


def _more_nodes_speedup(points: Sequence[Point], widened: Calibration) -> float:
    """How far below the fitted time of fewer nodes (the same ranks per node) an operation on more nodes may run,
    and on fewer nodes above the time of more: for each point with such a layout inside its interval under the
    widenings of ``widened`` (their misses are theirs), the log factor by which the bound must reach to keep it;
    per system the largest (the bound takes no point the widenings cover: their misses and its would add), over
    systems what covers one more (:func:`_worst_percentile`); no bound (:data:`_REACH`) without such points."""
    by_system: dict[str, list[float]] = {}
    for p in points:
        if p.spread is None or not (math.isfinite(p.spread.above_fewer_nodes) or
                                    math.isfinite(p.spread.below_more_nodes)):
            continue
        below, above = p.spread.bounds(widened)
        if -above <= p.error <= below:  # (error = ln(predicted / measured))
            need = max(p.error - p.spread.above_fewer_nodes, -p.error - p.spread.below_more_nodes, 0.0)
            by_system.setdefault(p.group, []).append(need)
    return _worst_percentile(by_system, 100.0) if by_system else _REACH


def _beyond_bytes_speedup(points: Sequence[Point], widened: Calibration) -> float:
    """How far below its bytes' time at the rate of a sweep's last piece a size above the sweep may run: for each
    point with that time inside its interval under the widenings of ``widened`` (their misses are theirs), the log
    factor by which the bound must reach to keep it; per system the largest, over systems what covers one more
    (:func:`_worst_percentile`); no bound (:data:`_REACH`) without such points."""
    by_system: dict[str, list[float]] = {}
    for p in points:
        if p.spread is None or not math.isfinite(p.spread.above_bytes_time):
            continue
        below, above = p.spread.bounds(widened)
        if -above <= p.error <= below:  # (error = ln(predicted / measured))
            by_system.setdefault(p.group, []).append(max(p.error - p.spread.above_bytes_time, 0.0))
    return _worst_percentile(by_system, 100.0) if by_system else _REACH


_REACH = 40.0
"""The largest log half-width a part is solved for (a factor of e^40: none covers a point beyond it)."""


def _just_covering(point: Point, bounds: Callable[[float], tuple[float, float]], floor: float = 0.0) -> float | None:
    """The least value ``x >= floor`` of one part at which the interval ``bounds(x)`` holds ``point``'s
    measurement (None where no value does: a lower end that the other part bounds)."""
    side = 1 if point.error < 0 else 0  # a measurement above the time needs the upper end

    def gap(x: float) -> float:
        return bounds(x)[side] - abs(point.error)

    if gap(floor) >= 0:
        return floor
    return brentq(gap, floor, _REACH) if gap(_REACH) >= 0 else None


T = TypeVar("T")


def _solved(points_by_system: dict[str, list[T]], keep: Callable[[T], bool],
            solve: Callable[[T], float | None]) -> float:
    """:func:`_worst_percentile` of the values ``solve`` finds for each system's points that ``keep`` takes."""
    return _worst_percentile({g: [_or_missed(solve(p)) for p in pts if keep(p)] for g, pts in points_by_system.items()})


def _or_missed(value: float | None) -> float:
    """A solved value, or inf for a point that no value covers (:func:`_percentile` counts it a miss)."""
    return math.inf if value is None else value


def _widening(by_system: dict[str, list[Point]], split: bool = True) -> dict[str, float] | None:
    """The bandwidth and latency parts of a widening per unit of distance, as the described half-widths are
    split: the bandwidth part from the points whose bytes take nearly all the time (:data:`BANDWIDTH_BOUND`),
    each the widening of both parts that just covers it; the latency part from those where latency takes at
    least half, the latency widening that just covers each beside the bandwidth part (never below it). Points
    between the two bounds choose neither: the two parts cover them, which the held-out scores check. None where
    no point chooses either part. Not ``split``: every point chooses one widening of both parts alike."""
    if not any(not split or _share(p) >= BANDWIDTH_BOUND or _share(p) < LATENCY_BOUND
               for pts in by_system.values() for p in pts):
        return None
    none = dict.fromkeys(PARTS, 0.0)

    def both(p: Point) -> float | None:
        assert p.spread is not None
        spread = p.spread
        return _just_covering(p, lambda x: spread.bounds_with({"bandwidth": x, "latency": x}, none))

    if not split:  # the fast side: the points a curve carried on overestimates (its slow side: _slower_side)
        return dict.fromkeys(PARTS, _solved(by_system, lambda p: p.error > 0, both))
    bandwidth = _solved(by_system, lambda p: _share(p) >= BANDWIDTH_BOUND, both)

    def latency_part(p: Point) -> float | None:
        assert p.spread is not None
        spread = p.spread
        return _just_covering(p, lambda x: spread.bounds_with({"bandwidth": bandwidth, "latency": x}, none), bandwidth)

    return {"bandwidth": bandwidth, "latency": max(_solved(by_system, lambda p: _share(p) < LATENCY_BOUND,
                                                           latency_part), bandwidth)}


def _slower_side(by_system: dict[str, list[Point]]) -> float:
    """The slow side's widening of sizes beyond a sweep (both parts alike): from the points the curve carried on
    underestimates, each the upper end's widening that just covers it beside the fast side's."""
    none = dict.fromkeys(PARTS, 0.0)

    def above(p: Point) -> float | None:
        assert p.spread is not None
        spread = p.spread
        return _just_covering(p, lambda x: spread.bounds_with(none, none, x))

    return _solved(by_system, lambda p: p.error < 0, above)  # (above and below the sweeps apart: the caller)


def _share(p: Point) -> float:
    return p.spread.bandwidth_share if p.spread is not None else 1.0


def _preset_half_width(cases: Sequence[SystemCase], calibration: Calibration) -> float:
    """How far the cases' preset predictions miss beyond their other terms (a description's included): per
    point the preset half-width that just covers it, per system the 95th percentile, over systems what covers
    one more. A preset's time does not depend on the calibration, so no inner hold-out is needed."""
    misses: dict[str, list[Point]] = {}
    for case in cases:
        for p in case.preset_points(calibration):
            misses.setdefault(p.group, []).append(p)

    def preset(p: Point) -> float | None:
        assert p.spread is not None
        s = p.spread
        widening, others = calibration.widening(s.kind, s.one_layout), calibration.unmeasured(s.described,
                                                                                            s.shape_measured)
        return _just_covering(p, lambda x: s.bounds_with(widening, {k: max(v, x) for k, v in others.items()}))

    return _solved(misses, lambda p: True, preset)


def _efficiencies(cases: Sequence[SystemCase]) -> dict[str, float]:
    """Per family, the geometric mean of the cases' NIC efficiencies (of every case where the family has
    none; 1 without a case); a case whose node's links bound its log, or that may have crossed by a tree or a ring,
    chooses none."""
    def mean(values: list[float]) -> float:
        return float(np.exp(np.mean(np.log(values)))) if values else 1.0

    known = [c for c in cases if not c.shared_nics and not math.isnan(c.efficiency)]
    pooled = [c.efficiency for c in known]
    return {f: mean([c.efficiency for c in known if family(c.collective) == f] or pooled) for f in FAMILIES}


def _crossing_protocols(cases: Sequence[SystemCase]) -> tuple[float, float, float, float, float]:
    """The medians over ``cases`` of the small-size and the bandwidth protocols' latency per step across nodes
    (on a measured node, and on a nominal one), and of the small-size protocols' bus bandwidth (0 without a
    case), and the most ranks per node among them.
    A log that cannot say how many steps across nodes it paid says nothing of the latency per step
    (:attr:`SystemCase.steps_known`: an all-reduce whose ranks share NICs, a ring of another collective). A sweep
    that never reached the small-size protocols (:attr:`SystemCase.small_measured`) says nothing of them."""
    def median(values: list[float]) -> float:
        return float(np.median(values)) if values else 0.0

    known = [c for c in cases if c.steps_known] or list(cases)
    small = [c for c in known if c.small_measured] or known  # (a sweep from 1 MiB up never ran them)
    return (median([c.step_latency_s for c in small]), median([c.bandwidth_step_latency_s for c in known]),
            median([c.nominal_step_latency_s for c in known]),
            median([c.small_busbw_Bps for c in cases if c.small_measured] or [c.small_busbw_Bps for c in cases]),
            float(max((c.ranks_per_node for c in cases), default=0)))


def _slowest_network_step(cases: Sequence[SystemCase]) -> float:
    """The longest small-size latency per step across nodes among ``cases`` whose sweeps ran the small-size
    protocols and whose steps are known (:attr:`SystemCase.steps_known`); 0 without one."""
    return max((c.step_latency_s for c in cases if c.small_measured and c.steps_known), default=0.0)


def _crossing_latency_half_width(cases: Sequence[SystemCase]) -> float:
    """Log half-width of the latency part of a crossing on a measured node's regimes: how far a system's
    latency per step across nodes, in either protocol, lies from the median of the other systems' (the
    largest)."""
    latency = 0.0
    known = [c for c in cases if c.steps_known]
    for case in known:
        rest = [c for c in known if c.group != case.group]
        for step, of in ((lambda c: c.step_latency_s, lambda c: c.small_measured),
                         (lambda c: c.bandwidth_step_latency_s, lambda c: True)):
            others = [step(c) for c in rest if of(c)]
            if others and of(case):
                latency = max(latency, abs(math.log(step(case) / float(np.median(others)))))
    return latency


BANDWIDTH_BOUND, LATENCY_BOUND = 0.95, 0.5
"""Points whose bytes take at least the first share of the time choose the bandwidth half-width; those
whose latency takes at least half choose the latency half-width."""


def _described_half_widths(cases: Sequence[SystemCase], base: Calibration) -> tuple[float, float]:
    """(bandwidth, latency) half-widths by an inner leave-one-group-out over ``cases``: how far a
    description misses a system it was not chosen on, beyond the interval's other terms (solved as the
    widenings are: :func:`_widening`)."""
    groups = sorted({c.group for c in cases})
    if len(groups) < 2:
        return 0.0, 0.0
    misses: dict[str, list[tuple[Point, Calibration]]] = {}
    for group in groups:
        rest = [c for c in cases if c.group != group]
        step, bandwidth_step, nominal_step, small_busbw, _ = _crossing_protocols(rest)
        inner = dataclasses.replace(base, nic_efficiency=_efficiencies(rest), crossing_step_latency_s=step,
                                    bandwidth_step_latency_s=bandwidth_step, nominal_step_latency_s=nominal_step,
                                    small_protocol_busbw_Bps=small_busbw,
                                    crossing_latency_half_width=_crossing_latency_half_width(rest))
        for case in (c for c in cases if c.group == group):
            misses.setdefault(group, []).extend((p, inner) for p in case.points(inner))

    def covering(p: Point, inner: Calibration, parts: Callable[[float], dict[str, float]], floor: float = 0.0):
        assert p.spread is not None
        s = p.spread
        return _just_covering(p, lambda x: s.bounds_with(inner.widening(s.kind, s.one_layout), parts(x)), floor)

    def worst(keep: Callable[[Point], bool], solve: Callable[[Point, Calibration], float | None]) -> float:
        return _solved(misses, lambda pair: keep(pair[0]), lambda pair: solve(*pair))

    # the bandwidth part: both parts alike, the latency part a measured node's shape sets where it does
    bandwidth = worst(lambda p: _share(p) >= BANDWIDTH_BOUND, lambda p, inner: covering(
        p, inner, lambda x: {"bandwidth": x, "latency": inner.crossing_latency_half_width
                             if p.spread is not None and p.spread.shape_measured else x}))
    # the latency part without a measured node: a measured node's shape says nothing of it
    latency = worst(lambda p: _share(p) < LATENCY_BOUND and p.spread is not None and not p.spread.shape_measured,
                    lambda p, inner: covering(p, inner, lambda x: {"bandwidth": bandwidth, "latency": x}, bandwidth))
    return bandwidth, max(latency, bandwidth)


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


def validate(shared: Path, public: Path, progress: Callable[[str], None] = lambda _: None) -> Validation:
    """Leave-one-dataset-out scores for every kind, and the calibration chosen on all datasets (the logs in
    ``shared`` and ``public``: :mod:`pybench.model.validation_cases`)."""
    progress("fitting every dataset's cases")
    points = fixed_points(shared, public)
    cases = system_cases(shared, public)
    scored: list[tuple[Point, tuple[float, float]]] = []
    for group in sorted({p.group for p in points} | {c.group for c in cases}):
        progress(f"holding out {group}")
        calibration = choose_calibration([p for p in points if p.group != group],
                                         [c for c in cases if c.group != group])
        held = [p for p in points if p.group == group]
        held += [p for c in cases if c.group == group for p in (*c.points(calibration),
                                                                 *c.preset_points(calibration))]
        scored += [(p, p.answered_bounds(calibration)) for p in held]  # what predict returns, not only its spread
    scores = []
    for kind in VALIDATED_KINDS:
        mine = [(p, h) for p, h in scored if p.kind == kind]
        if not mine:
            continue
        scores.append(_score(kind, "all", [p for p, _ in mine], [h for _, h in mine]))
        for dataset in sorted({p.dataset for p, _ in mine}):
            these = [(p, h) for p, h in mine if p.dataset == dataset]
            scores.append(_score(kind, dataset, [p for p, _ in these], [h for _, h in these]))
    shipped = choose_calibration(points, cases)
    progress("scoring the OSU clusters no constant is chosen on")
    return Validation(tuple(scores), shipped, osu_scores(public, shipped))
