"""The constants behind the model's intervals and described links, chosen by cross-validation.

Every constant here is produced by ``python benchmarks/model_validation.py --write``, which
chooses each one on the real logs in the repository and reports, for every kind of prediction,
how the intervals fare on a dataset that was left out while the constants were chosen
(docs/model-validation.md). The values ship in ``calibration.json`` beside this module, with the
datasets they were chosen on; nothing here is tuned by hand.

A time is the sum of a part the bytes take (share ``s`` of it, as priced) and a latency part, and each
part may be off by its own factor: a 95% interval ``[t * lo / exp(span + below), t * hi * exp(span + above)]``
with

    hi = s * exp(h_bandwidth) + (1 - s) * exp(h_latency),   lo = s * exp(-h_bandwidth) + (1 - s) * exp(-h_latency)
    h_part = hypot(z * local, widening_part * distance, described_part)

A latency that may be several times the priced one thus lifts the upper end by
that much of its share, and lowers the lower end by no more than its share (a time is never below its bytes'
part). The terms:

* ``local``: the fit's own relative scatter near the size (its residuals there);
* ``distance``: how far the layout asked for lies from every fitted one, in log nodes plus log ranks per
  node plus log size beyond the measured range; ``widening`` is per unit of it, chosen per kind of
  prediction (another GPU count inside a node, another per node across nodes, another node count: a
  node's fabric, the NICs a node's ranks drive and a cluster's network stray from one cost shape
  differently), one value for fits at several layouts of the link class and a larger one for a fit at a
  single layout (which cannot separate per-call from per-step latency; the two are chosen apart, and
  equal where the data do not tell them apart). Each has a bandwidth part and a latency part, as the
  described term below: a cluster's latencies stray between runs and node counts far more than its
  bandwidth does, and one figure for both would make every large size's interval as wide as the noisiest
  small size needs. A kind of layout fewer than two calibration systems hold takes the widest value of
  any kind of layout (:data:`LAYOUT_KINDS`). Sizes beyond a measured layout's sweep are a kind of their
  own (:data:`BEYOND_SIZES`, with the share of the bytes at the nearest end of the sweep), validated by
  fitting the real sweeps without their largest or their smallest sizes, each side of the interval its own
  widening (:attr:`Calibration.slower_widening_above_sweep`: the curve is one protocol's, which NCCL's choice there
  can only beat; below a sweep smaller sizes may run on fewer channels, so above and below apart);
* ``described``: when a link class comes from a system description or a preset rather than a
  measurement, how far real multi-node logs fall from what their description says (a preset: at
  least how far they fall from one port of its rate), in a bandwidth part (the NICs' efficiency)
  and a latency part. Where the crossing is priced on a measured node's protocol regimes, their shape
  is measured: the latency part is only how far a crossing's latency per step varies between
  systems. Without a measured node (or with a preset) the shape is unknown too, and the latency
  part is how far real logs fall from their description where latency rules;
* ``span``: what the inputs cannot determine at all. A link fitted at one layout cannot tell a
  per-call latency from a per-step one (both are constant there); at another layout the two
  readings part. Across nodes the per-step reading is taken, the slower one (NCCL's cost model charges
  the network only where a ring leaves a node, but a latency fitted at one layout cannot say how much
  of it is the network's); inside a node the prediction is their geometric mean with half their log
  ratio as the span.

Some readings a system description leaves open only widen the interval (where GPUs share NICs,
NCCL's all-reduce ring paying two network steps per node where its tree pays its levels; a ring whose every step
waits on the network): the interval reaches from the time
down to the fastest and up to the slowest of them (``below``, ``above``), so a reading that many
nodes make implausible moves the interval's far end, not the answer.
"""

from __future__ import annotations

import json
import math
from dataclasses import asdict, dataclass, field
from functools import lru_cache
from pathlib import Path

from pybench.errors import FileFormatError

CALIBRATION_FILE = Path(__file__).with_name("calibration.json")
Z95 = 1.959963984540054
FAMILIES = ("allreduce", "ring")
"""NIC efficiency is kept per family: an all-reduce crosses by NCCL's tree or its ring, as NCCL picks on
each system, and is priced in the tree's bytes; the other collectives cross as one ring."""


def family(collective: str) -> str:
    """The NIC-efficiency family of a collective (:data:`FAMILIES`)."""
    return "allreduce" if collective == "allreduce" else "ring"


OTHER_GPU_COUNT, OTHER_NODE_COUNT = "another GPU count", "another node count"
OTHER_GPUS_PER_NODE = "another GPU count per node"
"""Across nodes, at a measured node count: the ranks of a node drive other NICs and links than measured."""
PARTS = ("bandwidth", "latency")
"""The parts of a widening: the bytes' share of the time and the rest, each off by its own factor (module text)."""
BEYOND_SIZES, FITTED_SWEEP = "beyond the measured sizes", "fitted sweep"
"""A measured layout at a size beyond its sweep: the curve carried on past where it was measured (the topology
model's kind for it starts with ``fitted sweep``)."""
LAYOUT_KINDS = (OTHER_GPU_COUNT, OTHER_GPUS_PER_NODE, OTHER_NODE_COUNT)
"""The kinds that carry a fitted shape to a layout not measured."""
EXTRAPOLATED_KINDS = (*LAYOUT_KINDS, BEYOND_SIZES)
"""The kinds of prediction (:data:`pybench.model.topology.KINDS`) whose widening per unit of distance is
chosen apart."""
SHAPE_KINDS = (OTHER_GPU_COUNT, OTHER_NODE_COUNT)
"""The kinds whose widening says how far one fitted cost shape strays when carried on; another GPU count per node
also changes which NICs carry the bytes, which says nothing of how a curve goes on beyond its sizes."""


@dataclass(frozen=True)
class Calibration:
    """Constants of the interval scheme and of links priced from a system description."""

    widening_several_layouts: dict[str, dict[str, float]]
    """Per kind of prediction (:data:`EXTRAPOLATED_KINDS`) and part (:data:`PARTS`): log half-width per unit
    of log distance from the fitted layouts, fits at 2+ layouts."""
    widening_one_layout: dict[str, dict[str, float]]
    """The same for a link class fitted at one layout."""
    nic_efficiency: dict[str, float]
    """Per family (:data:`FAMILIES`): what a node's NICs carry / (NICs per node x NIC rate), as real logs
    reach it, in the bytes a described crossing prices (an all-reduce: the tree's, S per node on two
    nodes; a ring: 2(p-1)/p S)."""
    described_bandwidth_half_width: float
    """Log half-width of a described (or preset) link's bandwidth: how far real logs fall from what their
    NICs' rate at the calibrated efficiency says, whether or not the node was measured (the largest sizes
    cross at the NICs' pace either way)."""
    described_latency_half_width: float
    """Log half-width of a described link's latency part without a measured node: how far real logs
    fall from the description where latency and the unmeasured protocol shape rule."""
    crossing_latency_half_width: float
    """Log half-width of the latency part of a crossing priced on a measured node's regimes: how far the
    latency of a crossing varies between systems."""
    preset_half_width: float
    """Log half-width of a link from a preset (``--link``): how far real logs fall from what one port of
    the preset's rate says, beyond the span between one port per node and one per rank. A preset knows
    neither the node's NICs nor its protocols' latencies, so it misses more than a description does."""
    crossing_step_latency_s: float
    """Least latency of one step of the schedule across nodes (a level of NCCL's tree, a step of its ring)
    in the small-size protocols, for an inter-node link from a description: a ring over more ranks pays it
    more often."""
    bandwidth_step_latency_s: float
    """The same in the bandwidth protocol (NCCL's Simple), which every log runs in the middle sizes: each
    of its steps across nodes waits on a network transfer of a whole chunk. Read from the regime each 2-node
    fit runs there, with that regime's own rate: it prices a crossing on a measured node's regimes, which
    carry their own rates."""
    nominal_step_latency_s: float
    """The same where the node was not measured, its links at the description's nominal rate in one regime:
    the latency per step at which each log's description meets it best. The middle sizes run below the rate
    the largest reach (NCCL fills its pipeline and channels only there), which a nominal rate does not know:
    priced with the regime's latency, most logs' middle sizes came out too fast."""
    small_protocol_busbw_Bps: float
    """Bus bandwidth the small-size protocols (LL, LL128) reach across nodes: their buffers are small, so
    they move little per network round trip whatever the NICs' rate."""
    crossing_ranks_per_node: float
    """The most ranks per node of any log the steps across nodes were calibrated on: up to there every step
    of an all-to-all is known to wait on the network, beyond, not
    (:func:`pybench.model.described_crossing.network_steps_undescribed`); and a node of more GPUs may drive only
    that many GPUs' NICs."""
    slower_widening_above_sweep: float
    """Log half-width per unit of log size distance on the slow side of a sweep carried on above its sizes (the
    fast side is :data:`BEYOND_SIZES`' widening). NCCL runs each size in the fastest of its protocols and
    algorithms, so a curve carried on is one protocol's, which the one NCCL picks there can only beat: the truth
    strays far to the fast side and little to the slow one."""
    slower_widening_below_sweep: float
    """The same below a sweep's sizes, where smaller sizes may also run on fewer channels than the carried curve
    did, and so more slowly than it."""
    more_nodes_speedup: float = math.inf
    """Log factor by which an operation on more nodes of the same ranks per node may run faster than the fitted
    time of a layout with fewer (and one on fewer nodes slower than the fitted time of more): more nodes add steps
    and bytes, but a run may pick another algorithm or protocol there, or a run strays from its fit (inf: no
    such bound)."""
    slowest_network_step_s: float = 0.0
    """The longest latency per step across nodes in the small-size protocols of any log the steps were calibrated
    on: a fit whose small sizes wait longer per step is beyond every system the intervals were chosen on (0: no
    such log)."""
    beyond_bytes_speedup: float = math.inf
    """Log factor by which a size above a sweep may run faster than its bytes alone take at the rate of the sweep's
    last piece: beyond a sweep NCCL may switch to a faster protocol or more channels, but no log's rate grew
    without bound (inf: no such bound)."""
    chosen_on: tuple[str, ...] = field(default=())
    """The datasets these values were chosen on."""

    def to_dict(self) -> dict:
        out = asdict(self)
        out["chosen_on"] = list(self.chosen_on)
        return out

    @classmethod
    def from_dict(cls, d: object, source: str = "calibration") -> Calibration:
        if not isinstance(d, dict):
            raise FileFormatError(f"{source}: not a JSON object")
        try:
            numbers = {k: float(d[k]) for k in ("described_bandwidth_half_width", "described_latency_half_width",
                                                 "crossing_latency_half_width", "preset_half_width",
                                                 "crossing_step_latency_s", "bandwidth_step_latency_s",
                                                 "nominal_step_latency_s",
                                                 "small_protocol_busbw_Bps", "crossing_ranks_per_node",
                                                 "slower_widening_above_sweep", "slower_widening_below_sweep",
                                                 "more_nodes_speedup", "slowest_network_step_s",
                                                 "beyond_bytes_speedup")}
            efficiency = {str(k): float(v) for k, v in d["nic_efficiency"].items()}
            widening = {k: {str(kind): {str(part): float(x) for part, x in v.items()} for kind, v in d[k].items()}
                        for k in ("widening_several_layouts", "widening_one_layout")}
            chosen = tuple(str(x) for x in d.get("chosen_on", ()))
        except (KeyError, TypeError, ValueError, AttributeError) as exc:
            raise FileFormatError(f"{source}: malformed calibration ({exc!r}); each widening maps a kind to "
                                  f"{{'bandwidth': x, 'latency': y}}: regenerate it with "
                                  f"`python benchmarks/model_validation.py --write`") from None
        values = [*numbers.values(), *efficiency.values(),
                  *(x for w in widening.values() for v in w.values() for x in v.values())]
        if not all(math.isfinite(v) and v >= 0 for v in values) or set(efficiency) != set(FAMILIES) \
                or min(efficiency.values()) <= 0 or numbers["small_protocol_busbw_Bps"] <= 0 \
                or any(set(w) != set(EXTRAPOLATED_KINDS) or any(set(v) != set(PARTS) for v in w.values())
                       for w in widening.values()):
            raise FileFormatError(f"{source}: calibration values must be finite, >= 0, with a positive small-size "
                                  f"protocol bandwidth, a positive NIC efficiency for each of {', '.join(FAMILIES)} "
                                  f"and a widening ({' and '.join(PARTS)}) for each of {', '.join(EXTRAPOLATED_KINDS)}")
        return cls(widening["widening_several_layouts"], widening["widening_one_layout"], efficiency,
                   chosen_on=chosen, **numbers)

    def efficiency(self, collective: str) -> float:
        """The NIC efficiency of ``collective``'s family."""
        return self.nic_efficiency[family(collective)]

    def widening(self, kind: str, one_layout: bool) -> dict[str, float]:
        """Log half-width per unit of distance for a prediction of ``kind``, per part: its own; a measured
        layout's beyond its sizes, that of :data:`BEYOND_SIZES`; else (a description's) each part the widest of
        the kinds that carry one fitted shape to another count (:data:`SHAPE_KINDS`)."""
        table = self.widening_one_layout if one_layout else self.widening_several_layouts
        base = kind.split(",")[0]
        if base == FITTED_SWEEP:  # a measured layout's sweep carried on beyond its sizes
            base = BEYOND_SIZES
        return dict(table[base]) if base in table else {p: max(table[k][p] for k in SHAPE_KINDS) for p in PARTS}

    def slower_widening(self, kind: str, below_sweep: bool) -> float | None:
        """The slow side's widening of a sweep carried on above or below its sizes (both parts alike), None for
        another kind (its two sides alike)."""
        if kind.split(",")[0] not in (BEYOND_SIZES, FITTED_SWEEP):
            return None
        return self.slower_widening_below_sweep if below_sweep else self.slower_widening_above_sweep

    def unmeasured(self, described: bool, shape_measured: bool = False, preset: bool = False) -> dict[str, float]:
        """Per part, the log half-width of what a description or preset says in place of a measurement."""
        parts = {"bandwidth": self.described_bandwidth_half_width,
                 "latency": self.crossing_latency_half_width if shape_measured else self.described_latency_half_width}
        parts = parts if described else dict.fromkeys(PARTS, 0.0)
        return {part: max(x, self.preset_half_width) for part, x in parts.items()} if preset else parts


def part_half_widths(local: float, distance: float, widening: dict[str, float],
                     unmeasured: dict[str, float]) -> dict[str, float]:
    """Per part, the log half-width of its own factor: its local scatter, its widening over the distance and what
    is described rather than measured, independent and added in quadrature."""
    return {part: math.hypot(Z95 * local, widening[part] * distance, unmeasured[part]) for part in PARTS}


def mixed_bounds(bandwidth_share: float, halves: dict[str, float]) -> tuple[float, float]:
    """(below, above): log distances from the time to the ends of its 95% interval when the bytes' share of it and
    the rest (latency) may each be off by their own factor (``halves``: log half-widths per part). The ends are
    sums of the parts' ends, so a latency that may be several times the priced one lifts the upper end by that
    much of the latency's share, and lowers the lower end by no more than that share."""
    share = min(max(bandwidth_share, 0.0), 1.0)
    bandwidth, latency = halves["bandwidth"], halves["latency"]
    above = math.log(share * math.exp(bandwidth) + (1.0 - share) * math.exp(latency))
    below = -math.log(share * math.exp(-bandwidth) + (1.0 - share) * math.exp(-latency))
    return below, above


@dataclass(frozen=True)
class Spread:
    """What one prediction's interval is made of: its kind and the inputs of :meth:`bounds`."""

    kind: str
    local: float
    distance: float
    one_layout: bool
    described: bool
    bandwidth_share: float = 1.0
    """Share of the predicted time the bytes take (the rest is latency)."""
    span: float = 0.0
    """Half the log ratio of the readings the inputs cannot tell apart (see the module text)."""
    shape_measured: bool = False
    """A described crossing priced on a measured node's protocol regimes (see the module text)."""
    preset: bool = False
    """The link the time rests on is a preset (``--link``)."""
    below_sweep: bool = False
    """The size lies below the measured sizes (else above, or among them)."""
    below: float = 0.0
    above: float = 0.0
    """Log distance beyond ``span`` from the time down to the fastest, and up to the slowest, of the readings
    that only widen the interval (see the module text)."""
    above_fewer_nodes: float = math.inf
    """ln(time / the fitted time of the same ranks per node on fewer nodes), where such a layout was fitted: the
    lower end lies at most :attr:`Calibration.more_nodes_speedup` below that time (inf: no such layout)."""
    below_more_nodes: float = math.inf
    """ln(the fitted time of the same ranks per node on more nodes / time), where such a layout was fitted: the upper
    end lies at most :attr:`Calibration.more_nodes_speedup` above that time (inf: no such layout)."""
    above_fewest_steps: float = math.inf
    """ln(time / that more-node time scaled by the ring's steps, (p - 1) / (p_fitted - 1)): no schedule's time falls
    faster with fewer ranks, so the lower end lies no further below it than a fitted time strays from a run's
    (:attr:`Calibration.more_nodes_speedup`; inf: no such layout)."""
    below_most_steps: float = math.inf
    """ln(the slowest a fewer-node fitted time allows / time): the latency of a ring's steps over every rank, the
    bytes at most doubled; the upper end lies no further above it than a fitted time strays from a run's
    (:attr:`Calibration.more_nodes_speedup`; inf: no such layout)."""
    above_bytes_time: float = math.inf
    """ln(time / what the bytes alone take at the rate of the sweep's last piece), above a sweep whose last piece
    has a rate: the lower end lies at most :attr:`Calibration.beyond_bytes_speedup` below that (inf: no such
    bound)."""

    def bounds(self, calibration: Calibration) -> tuple[float, float]:
        """(below, above): the log distances from the time to the ends of its 95% interval (the steps' bound, with
        the fitted times' own stray, applied here and not where the constants are solved)."""
        below, above = self.bounds_with(calibration.widening(self.kind, self.one_layout),
                                        calibration.unmeasured(self.described, self.shape_measured, self.preset),
                                        calibration.slower_widening(self.kind, self.below_sweep),
                                        calibration.more_nodes_speedup)
        speedup = calibration.more_nodes_speedup
        below = min(below, self.above_fewest_steps + speedup, self.above_bytes_time + calibration.beyond_bytes_speedup)
        return max(below, 0.0), max(min(above, self.below_most_steps + speedup), 0.0)

    def bounds_with(self, widening: dict[str, float], unmeasured: dict[str, float],
                    slower: float | None = None, speedup: float = math.inf) -> tuple[float, float]:
        """The same with the parts given (what validation solves for); ``slower``: the upper end's widening of
        both parts where it is not ``widening`` (:attr:`Calibration.slower_widening_above_sweep`); ``speedup``:
        how far below a fewer-node layout's time the lower end may reach (:attr:`above_fewer_nodes`)."""
        below, above = mixed_bounds(self.bandwidth_share, part_half_widths(self.local, self.distance, widening,
                                                                            unmeasured))
        if slower is not None:
            above = mixed_bounds(self.bandwidth_share, part_half_widths(
                self.local, self.distance, dict.fromkeys(PARTS, slower), unmeasured))[1]
        return (min(self.span + below + self.below, self.above_fewer_nodes + speedup),
                min(self.span + above + self.above, self.below_more_nodes + speedup))


@lru_cache(maxsize=1)
def load_calibration() -> Calibration:
    """The shipped calibration (``calibration.json``)."""
    return Calibration.from_dict(json.loads(CALIBRATION_FILE.read_text(encoding="utf-8")), str(CALIBRATION_FILE))
