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
  just cover its error beyond the local scatter; per system the 95th percentile of those, and over
  systems what covers one more (:func:`_worst_percentile`), in a bandwidth and a latency part
  (:func:`_widening`); per kind where two systems or
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

import numpy as np
from scipy.stats import t as student_t

from pybench.model.calibration import EXTRAPOLATED_KINDS, FAMILIES, PARTS, Z95, Calibration, family
from pybench.model.topology import BETWEEN_SIZES, DESCRIBED, OTHER_GPU_COUNT, OTHER_NODE_COUNT, PRESET
from pybench.model.validation_cases import LEAVE_ONE_SIZE_OUT, Point, SystemCase, fixed_points, system_cases

VALIDATED_KINDS = (BETWEEN_SIZES, LEAVE_ONE_SIZE_OUT, OTHER_GPU_COUNT, OTHER_NODE_COUNT, DESCRIBED, PRESET)
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

def _worst_percentile(values_by_system: dict[str, list[float]]) -> float:
    """What covers a system not among those seen: each system's 95th percentile is one draw of how far a
    system strays, and the next system is another draw (two logs of one system, Polaris' all-reduce and
    all-gather, are one draw, not two). With three or more systems, the one-sided 95%
    prediction bound for one more draw (Student's t, k - 1 degrees of freedom), never below the largest seen;
    with fewer, the largest (0 without values)."""
    seen = [float(np.percentile(v, _PERCENTILE, method="higher")) for v in values_by_system.values() if v]
    if len(seen) < 3:
        return max(seen, default=0.0)
    k, mean, sd = len(seen), float(np.mean(seen)), float(np.std(seen, ddof=1))
    return max(max(seen), mean + float(student_t.ppf(_PERCENTILE / 100.0, k - 1)) * sd * math.sqrt(1.0 + 1.0 / k))


def choose_calibration(points: Sequence[Point], cases: Sequence[SystemCase]) -> Calibration:
    """Constants chosen on ``points`` and ``cases`` alone (see the module text)."""
    # (kind, one layout) -> system -> (bandwidth share, widening that just covers the point)
    needed: dict[tuple[str, bool], dict[str, list[tuple[float, float]]]] = {}
    systems: dict[str, set[str]] = {}
    for p in points:
        if p.spread is None or p.kind not in EXTRAPOLATED_KINDS or p.spread.distance <= 0:
            continue
        beyond = math.sqrt(max((abs(p.error) - p.spread.side_span(p.error)) ** 2 - (Z95 * p.spread.local) ** 2, 0.0))
        systems.setdefault(p.kind, set()).add(p.group)
        by_system = needed.setdefault((p.kind, p.spread.one_layout), {})
        by_system.setdefault(p.group, []).append((p.spread.bandwidth_share, beyond / p.spread.distance))
    several, one = {}, {}
    for kind in EXTRAPOLATED_KINDS:
        s, o = _widening(needed.get((kind, False), {})), _widening(needed.get((kind, True), {}))
        if any(s.values()) or any(o.values()):
            several[kind] = s if any(s.values()) else o
            one[kind] = {part: max(o[part], s[part]) for part in PARTS}  # one layout knows less than several
    # A kind seen on one system alone has no other to be checked on: it takes the widest value of any
    # kind (nothing says it strays less), so what ships follows the rule that held-out scores check.
    widest = {part: max([0.0, *(w[part] for w in (*several.values(), *one.values()))]) for part in PARTS}
    for kind in EXTRAPOLATED_KINDS:  # (and one whose points chose no part: every kind ships a widening)
        if len(systems.get(kind, ())) < 2 or kind not in several:
            several[kind], one[kind] = dict(widest), dict(widest)
    chosen_on = tuple(sorted({p.dataset for p in points} | {c.dataset for c in cases}))
    base = Calibration(several, one, _efficiencies(cases), 0.0, 0.0, _crossing_latency_half_width(cases), 0.0,
                       *_crossing_protocols(cases), chosen_on)
    bandwidth, latency_half = _described_half_widths(cases, base)
    # a measured node's protocol shape knows at least as much as none: its latency part is never the wider
    described = dataclasses.replace(base, described_bandwidth_half_width=bandwidth,
                                    described_latency_half_width=latency_half,
                                    crossing_latency_half_width=min(base.crossing_latency_half_width, latency_half))
    return dataclasses.replace(described, preset_half_width=_preset_half_width(cases, described))


def _widening(by_system: dict[str, list[tuple[float, float]]]) -> dict[str, float]:
    """The bandwidth and latency parts of a widening, as the described half-widths are split: the bandwidth
    part from the points whose bytes take nearly all the time (:data:`BANDWIDTH_BOUND`), the latency part from
    those where latency takes at least half, net of the bandwidth part's share (never below the bandwidth
    part). Points between the two bounds choose neither: the blend of the two parts covers them, which the
    held-out scores check."""
    bandwidth = _worst_percentile({d: [v for share, v in pts if share >= BANDWIDTH_BOUND]
                                   for d, pts in by_system.items()})
    latency = _worst_percentile({d: [max(v - share * bandwidth, 0.0) / (1.0 - share) for share, v in pts
                                     if share < LATENCY_BOUND] for d, pts in by_system.items()})
    return {"bandwidth": bandwidth, "latency": max(latency, bandwidth)}


def _preset_half_width(cases: Sequence[SystemCase], calibration: Calibration) -> float:
    """How far the cases' preset predictions miss beyond their other terms (a description's included):
    per system the 95th percentile, over systems what covers one more. A preset's time does not
    depend on the calibration, so no inner hold-out is needed."""
    misses: dict[str, list[float]] = {}
    for case in cases:
        for p in case.preset_points(calibration):
            assert p.spread is not None
            others = dataclasses.replace(p.spread, preset=False).bounds(calibration)[p.error < 0]
            misses.setdefault(p.group, []).append(math.sqrt(max(p.error ** 2 - others ** 2, 0.0)))
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
    # (system, bandwidth share, error beyond the other terms, whether a measured node gave the shape)
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
                misses.append((p.group, p.spread.bandwidth_share, math.sqrt(max(p.error ** 2 - others ** 2, 0.0)),
                               p.spread.shape_measured))
    bandwidth = _worst_percentile(_by_system((d, m) for d, share, m, _ in misses if share >= BANDWIDTH_BOUND))
    # the latency part without a measured node: a measured node's shape says nothing of it
    latency = _worst_percentile(_by_system((d, max(m - share * bandwidth, 0.0) / (1.0 - share))
                                            for d, share, m, shaped in misses if share < LATENCY_BOUND and not shaped))
    return bandwidth, max(latency, bandwidth)


def _by_system(pairs) -> dict[str, list[float]]:
    out: dict[str, list[float]] = {}
    for system, value in pairs:
        out.setdefault(system, []).append(value)
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
