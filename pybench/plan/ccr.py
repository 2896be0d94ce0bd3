"""The step model: communication-to-computation ratio (CCR), overlap, scaling
efficiency, cost and memory for a training step under a parallelism strategy.

For one combination of strategy, world size and micro-batch size:

- ``compute_s`` = FLOPs per device / measured FLOP/s, FLOPs = 6 x P x tokens
  (8 with full activation recomputation) divided over the tp x pp devices of a
  replica; multiplied by the straggler factor when ``straggler_cv`` is given.
- ``bubble_s`` = compute_s x (p - 1) / m for a pipeline of p stages and m
  micro-batches, so the bubble is (p - 1) / (m + p - 1) of the pipelined time.
- ``comm_s`` = sum over the step's collectives (``pybench.plan.strategies.comm_ops``)
  of calls x predicted time from fitted alpha-beta models, full-size messages.
- ``ccr`` = comm_s / (comm_s + compute_s): no overlap; the bubble is idle time,
  neither communication nor compute, and is reported separately.
- With overlap, the gradient exchange runs in buckets of ``bucket_bytes`` under
  the backward pass of the last micro-batch (2/3 of its compute; 3/4 with
  recomputation). Buckets become ready uniformly through backward and go out
  one after another on one stream (as DDP does), so the last bucket, ready when
  backward ends, can never overlap. Everything else is exposed. A measured
  :class:`pybench.plan.overlap.OverlapProfile` replaces the uniform readiness and
  the 2/3, and slows compute while buckets are in flight (CPU transports).
  ``exposed_fraction`` = exposed_s / (exposed_s + compute_s).
- ``step_s`` = compute_s + bubble_s + exposed_s (exposed_s = comm_s without overlap).
- Scaling efficiency at N = throughput(N) / (N x throughput(1)); throughput(1)
  is one device with the same micro-batch and no communication (whether or not
  the model would fit on it). Against one node: throughput(N) / (N/g x throughput(g)).
- Bands (of ccr, and of exposed_fraction with overlap): below 0.15 ``fits``,
  0.15-0.30 ``caution``, above 0.30 ``comm-bound``.
- Cost: samples per dollar = samples/s x 3600 / (nodes x price per node-hour).
  Breakeven compares scale-out rows with one reference machine (one node of
  the cluster, or a bigger node with its own GPU count and price): the
  smallest world that is faster, and the largest that is as cheap per sample.
- Stragglers: per-rank compute ~ Normal(mu, (cv mu)^2); the synchronous step
  waits for the slowest of N ranks, mu (1 + cv E[max of N standard normals]).

:func:`plan` turns these figures into the field's advice (scale up, then out;
ZeRO when it fits only just; TP inside the node, PP across, DP on top when it
does not fit).

Models: any object with ``collective``, ``link_class``, ``world_size`` and
``predict(size_bytes, world=None)`` returning ``time_s`` (and optionally
``time_low_s``/``time_high_s``) satisfies :class:`CollectiveModel`; files are
read through ``pybench.model.alpha_beta.load_models`` (or ``load_model``).
"""

from __future__ import annotations

import functools
import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol, runtime_checkable

from pybench.errors import BackendUnavailable, FileFormatError, UsageError
from pybench.plan.compute import ComputeProfile, load_compute
from pybench.plan.overlap import OverlapProfile, bucket_sizes, bucketed_serial_s, overlap_exposed_s
from pybench.plan.strategies import (
    INTER,
    INTRA,
    CommOp,
    Layout,
    MemoryEstimate,
    Workload,
    bubble_fraction,
    canonical_strategy,
    comm_ops,
    make_layout,
    memory_per_device,
)
from pybench.plan.transformer import (
    TransformerShape,
    format_param_count,
    parse_param_count,
    shape_for_params,
    training_flops,
)

__all__ = [
    "CollectiveModel", "Prediction", "ModelSet", "CommTime", "OpTime", "StepEstimate", "Breakeven",
    "CcrConfig", "CcrResult", "ccr", "band", "expected_max_normal", "straggler_factor",
    "overlap_exposed_s", "bucket_sizes", "OverlapProfile", "load_model_set", "BAND_FITS", "BAND_CAUTION",
    "Plan", "plan",
]

BAND_FITS = 0.15
BAND_CAUTION = 0.30


def band(fraction: float) -> str:
    """Band of a CCR or exposed fraction: ``fits`` (< 0.15), ``caution`` (0.15-0.30), ``comm-bound`` (> 0.30)."""
    if fraction < BAND_FITS:
        return "fits"
    if fraction <= BAND_CAUTION:
        return "caution"
    return "comm-bound"


# ---------------------------------------------------------------------------
# stragglers

def _normal_cdf(x):
    from math import erf, sqrt

    import numpy as np
    return np.array([0.5 * (1.0 + erf(v / sqrt(2.0))) for v in x])


@functools.lru_cache(maxsize=256)
def expected_max_normal(n: int) -> float:
    """E[max of n independent standard normals], by numerical integration.

    E = integral of x n phi(x) Phi(x)^(n-1) dx over the real line, evaluated
    with the trapezoid rule on [-12, 12] with step 1e-3; the integrand is smooth
    and negligible beyond that range for n up to 10^7, so the error is below 1e-9.
    n = 1 gives 0, n = 2 gives 1/sqrt(pi).
    """
    import numpy as np
    if n < 1:
        raise UsageError(f"number of ranks must be at least 1, got {n}")
    if n == 1:
        return 0.0
    x = np.linspace(-12.0, 12.0, 24001)
    phi = np.exp(-0.5 * x * x) / math.sqrt(2 * math.pi)
    cdf = _normal_cdf(x)
    integrand = x * n * phi * cdf ** (n - 1)
    dx = x[1] - x[0]
    return float(dx * (integrand.sum() - 0.5 * (integrand[0] + integrand[-1])))


def straggler_factor(cv: float, n: int) -> float:
    """Slowest-of-n compute time over the mean: 1 + cv x E[max of n standard normals].

    Per-rank compute times are modelled as independent normals with mean mu and
    standard deviation cv x mu; a synchronous step waits for the slowest.
    """
    if cv < 0:
        raise UsageError(f"--straggler-cv must be 0 or more, got {cv}")
    return 1.0 + cv * expected_max_normal(n) if cv else 1.0


# ---------------------------------------------------------------------------
# communication models

class Prediction(Protocol):
    time_s: float


@runtime_checkable
class CollectiveModel(Protocol):
    """What the step model needs from a fitted alpha-beta model (pybench.model)."""

    collective: str
    link_class: str | None
    world_size: int

    def predict(self, size_bytes: float, world: int | None = None) -> Any: ...


def _norm_collective(name: str) -> str:
    return str(name).lower().replace("_", "").replace("-", "").replace(" ", "")


@dataclass(frozen=True)
class CommTime:
    """Predicted time of one call, with the model's interval and where it came from."""

    time_s: float
    time_low_s: float
    time_high_s: float
    source: str

    def scaled(self, factor: float) -> CommTime:
        return CommTime(self.time_s * factor, self.time_low_s * factor, self.time_high_s * factor, self.source)


# Missing collective -> ways to derive it: ([(collective, factor, world override)], why).
# Ring identities: all-reduce = reduce-scatter + all-gather of the same size, each
# moving (n-1)/n of it; all-to-all moves as much as all-gather; a pair's send/recv
# is about a two-rank all-reduce (alpha counted twice: a slight overestimate).
_DERIVATIONS: dict[str, list[tuple[list[tuple[str, float, int | None]], str]]] = {
    "allgather": [([("reducescatter", 1.0, None)], "allgather = reducescatter (ring identity)"),
                  ([("allreduce", 0.5, None)], "allgather = 0.5 x allreduce (ring identity)")],
    "reducescatter": [([("allgather", 1.0, None)], "reducescatter = allgather (ring identity)"),
                      ([("allreduce", 0.5, None)], "reducescatter = 0.5 x allreduce (ring identity)")],
    "allreduce": [([("reducescatter", 1.0, None), ("allgather", 1.0, None)],
                   "allreduce = reducescatter + allgather"),
                  ([("reducescatter", 2.0, None)], "allreduce = 2 x reducescatter"),
                  ([("allgather", 2.0, None)], "allreduce = 2 x allgather")],
    "sendrecv": [([("allreduce", 1.0, 2)], "sendrecv = allreduce at 2 ranks (alpha overestimated)"),
                 ([("broadcast", 1.0, 2)], "sendrecv = broadcast at 2 ranks")],
    "alltoall": [([("allgather", 1.0, None)], "alltoall = allgather (same bytes per rank)")],
    "broadcast": [([("allreduce", 0.5, None)], "broadcast = 0.5 x allreduce")],
}


class ModelSet:
    """Chooses a fitted model for (collective, link class, world) and predicts with it.

    Choice: same collective and link class (a model whose ``link_class`` is None
    matches any), preferring one fitted at the requested world size, else the
    nearest world size (log ratio), extrapolated by the model's own formula.
    A missing collective is derived (``_DERIVATIONS``) and the derivation is
    recorded in ``notes``; when nothing fits, UsageError names what is missing.
    """

    def __init__(self, models: Iterable[CollectiveModel], backend: str | None = None):
        self.models = list(models)
        if not self.models:
            raise UsageError("no communication models given; fit some with pybench and pass --model FILE")
        self.notes: list[str] = []
        backends = sorted({str(getattr(m, "backend", "")) for m in self.models} - {""})
        if backend is not None:
            self.models = [m for m in self.models if getattr(m, "backend", None) == backend]
            if not self.models:
                raise UsageError(f"no models for backend {backend!r}; the file has "
                                 f"{', '.join(backends) or 'none named'}")
        elif len(backends) > 1:
            # A step runs on one backend; mixing fits from nccl and mpi would be meaningless.
            chosen = "nccl" if "nccl" in backends else backends[0]
            self.models = [m for m in self.models if getattr(m, "backend", chosen) == chosen]
            self.notes.append(f"models for backends {', '.join(backends)}: using {chosen} (choose with --backend)")

    def _pick(self, collective: str, link_class: str, world: int) -> CollectiveModel | None:
        cands = [m for m in self.models if _norm_collective(m.collective) == collective
                 and (m.link_class is None or m.link_class == link_class)]
        if not cands:
            return None

        def distance(m) -> float:
            # Fitted at the world size needed beats near (log ratio) beats unknown world size.
            if m.world_size is None:
                return math.inf
            return abs(math.log(max(int(m.world_size), 1) / world))

        return min(cands, key=lambda m: (m.link_class is None, distance(m)))

    def _direct(self, collective: str, size_bytes: float, world: int, link_class: str) -> CommTime | None:
        model = self._pick(collective, link_class, world)
        if model is None:
            return None
        if model.link_class is None:
            # e.g. an nccl-tests log without "#  Rank" lines: nobody said which links it crossed
            note = (f"{collective} model of unknown link class used for {link_class} links "
                    f"(fit one per link class for a better answer)")
            if note not in self.notes:
                self.notes.append(note)
        if model.world_size is None:
            pred = model.predict(size_bytes)  # cannot be extrapolated: used as fitted, and said so
            where = f"{collective} {model.link_class or 'any-link'} model of unknown world size, used at {world}"
        else:
            pred = model.predict(size_bytes, world=world)
            where = f"{collective} {model.link_class or 'any-link'} model fitted at {model.world_size} ranks"
            if int(model.world_size) != world:
                where += f", extrapolated to {world}"
        t = float(pred.time_s)
        lo = float(getattr(pred, "time_low_s", t))
        hi = float(getattr(pred, "time_high_s", t))
        return CommTime(t, lo, hi, where)

    def time(self, collective: str, size_bytes: float, world: int, link_class: str) -> CommTime:
        """Predicted time of one call.

        Raises
        ------
        UsageError
            When no model, direct or derived, covers the collective on this link class.
        """
        c = _norm_collective(collective)
        direct = self._direct(c, size_bytes, world, link_class)
        if direct is not None:
            return direct
        for parts, why in _DERIVATIONS.get(c, []):
            pieces = [self._direct(pc, size_bytes, w or world, link_class) for pc, _, w in parts]
            if all(p is not None for p in pieces):
                total = CommTime(0.0, 0.0, 0.0, "")
                for p, (_, factor, _) in zip(pieces, parts):
                    s = p.scaled(factor)
                    total = CommTime(total.time_s + s.time_s, total.time_low_s + s.time_low_s,
                                     total.time_high_s + s.time_high_s, "")
                note = f"derived {why} over {link_class} links (no {c} model)"
                if note not in self.notes:
                    self.notes.append(note)
                return CommTime(total.time_s, total.time_low_s, total.time_high_s, f"derived: {why}")
        have = sorted({f"{_norm_collective(m.collective)}/{m.link_class or 'any'}" for m in self.models})
        raise UsageError(f"no {c} model for {link_class} links (and none to derive it from); the model file has "
                         f"{', '.join(have)}; measure {c} over {link_class} links and fit it")


def load_model_set(path: str, backend: str | None = None) -> ModelSet:
    """Load fitted models through ``pybench.model.alpha_beta.load_models`` (or ``load_model``).

    Raises
    ------
    BackendUnavailable
        When ``pybench.model`` is not part of this install.
    """
    try:
        import importlib
        model_mod = importlib.import_module("pybench.model.alpha_beta")
    except ImportError as exc:
        raise BackendUnavailable(f"pybench.model cannot be imported ({exc}); it reads --model files") from None
    if hasattr(model_mod, "load_models"):
        loaded = model_mod.load_models(path)
    elif hasattr(model_mod, "load_model"):
        loaded = model_mod.load_model(path)
    else:
        raise BackendUnavailable("pybench.model has neither load_models nor load_model")
    if hasattr(loaded, "models"):
        loaded = loaded.models
    if isinstance(loaded, dict):
        loaded = list(loaded.values())
    models = list(loaded) if isinstance(loaded, (list, tuple)) else [loaded]
    for m in models:
        if not isinstance(m, CollectiveModel):
            raise FileFormatError(f"{path}: {type(m).__name__} lacks collective/link_class/world_size/predict")
    return ModelSet(models, backend)


# ---------------------------------------------------------------------------
# results

@dataclass(frozen=True)
class OpTime:
    """One kind of communication in the step with its predicted time per step."""

    op: CommOp
    call: CommTime

    @property
    def time_s(self) -> float:
        return self.op.calls * self.call.time_s

    def to_dict(self) -> dict:
        return {**self.op.to_dict(), "time_per_call_s": self.call.time_s, "time_s": self.time_s,
                "time_low_s": self.op.calls * self.call.time_low_s,
                "time_high_s": self.op.calls * self.call.time_high_s, "model": self.call.source}


@dataclass(frozen=True)
class StepEstimate:
    """Everything the step model says about one (strategy, world, batch)."""

    strategy: str
    world: int
    batch: int
    layout: Layout
    micro_batches: int
    global_batch: int
    ops: tuple[OpTime, ...]
    compute_s: float
    bubble_s: float
    comm_s: float
    comm_low_s: float
    comm_high_s: float
    exposed_s: float
    overlap: bool
    straggler_factor: float
    samples_per_s_one_device: float
    memory: MemoryEstimate
    efficiency_vs_node: float | None = None
    cost_per_hour: float | None = None

    @property
    def bytes_per_rank(self) -> int:
        """Collective size arguments summed over the step."""
        return sum(o.op.bytes_per_step for o in self.ops)

    @property
    def wire_bytes_per_rank(self) -> float:
        return sum(o.op.wire_bytes_per_step for o in self.ops)

    def bytes_on(self, link_class: str) -> int:
        return sum(o.op.bytes_per_step for o in self.ops if o.op.link_class == link_class)

    @property
    def links(self) -> str:
        classes = [c for c in (INTRA, INTER) if self.bytes_on(c)]
        return "+".join(classes) if classes else "-"

    @property
    def ccr(self) -> float:
        total = self.comm_s + self.compute_s
        return self.comm_s / total if total else 0.0

    @property
    def exposed_fraction(self) -> float:
        total = self.exposed_s + self.compute_s
        return self.exposed_s / total if total else 0.0

    @property
    def band(self) -> str:
        return band(self.ccr)

    @property
    def band_exposed(self) -> str:
        return band(self.exposed_fraction)

    @property
    def bubble_fraction(self) -> float:
        return bubble_fraction(self.layout.pp, self.micro_batches)

    @property
    def step_s(self) -> float:
        return self.compute_s + self.bubble_s + self.exposed_s

    @property
    def samples_per_s(self) -> float:
        return self.global_batch / self.step_s

    @property
    def efficiency_vs_device(self) -> float:
        return self.samples_per_s / (self.world * self.samples_per_s_one_device)

    @property
    def samples_per_dollar(self) -> float | None:
        """Samples per second over dollars per second."""
        if self.cost_per_hour is None:
            return None
        return self.samples_per_s * 3600.0 / self.cost_per_hour

    def to_dict(self) -> dict:
        return {"strategy": self.strategy, "world": self.world, "batch": self.batch,
                "layout": self.layout.to_dict(), "micro_batches": self.micro_batches,
                "global_batch": self.global_batch, "bytes_per_rank": self.bytes_per_rank,
                "wire_bytes_per_rank": self.wire_bytes_per_rank, "bytes_intra_node": self.bytes_on(INTRA),
                "bytes_inter_node": self.bytes_on(INTER), "links": self.links,
                "ops": [o.to_dict() for o in self.ops], "compute_s": self.compute_s,
                "bubble_s": self.bubble_s, "bubble_fraction": self.bubble_fraction, "comm_s": self.comm_s,
                "comm_low_s": self.comm_low_s, "comm_high_s": self.comm_high_s, "ccr": self.ccr,
                "band": self.band, "overlap": self.overlap, "exposed_s": self.exposed_s,
                "exposed_fraction": self.exposed_fraction, "band_exposed": self.band_exposed,
                "straggler_factor": self.straggler_factor, "step_s": self.step_s,
                "samples_per_s": self.samples_per_s, "efficiency_vs_device": self.efficiency_vs_device,
                "efficiency_vs_node": self.efficiency_vs_node, "cost_per_hour": self.cost_per_hour,
                "samples_per_dollar": self.samples_per_dollar, "memory": self.memory.to_dict()}

    def __repr__(self) -> str:
        return (f"StepEstimate({self.strategy} world={self.world} batch={self.batch} [{self.layout}]: "
                f"compute {self.compute_s * 1e3:.1f} ms, comm {self.comm_s * 1e3:.1f} ms, "
                f"CCR {self.ccr:.3f} ({self.band}), step {self.step_s * 1e3:.1f} ms, "
                f"{self.samples_per_s:.2f} samples/s, memory {self.memory.fits})")


@dataclass(frozen=True)
class Breakeven:
    """Scale-out (several nodes) against one reference node, per strategy and batch.

    ``faster_from_world``: smallest world size whose samples/s beats the
    reference; ``cheaper_up_to_world``: largest world size whose samples per
    dollar is at least the reference's (None when none is). The reference is one
    node of this cluster unless a big node (its GPUs and price) is given.
    """

    strategy: str
    batch: int
    reference: str
    reference_samples_per_s: float
    reference_samples_per_dollar: float
    faster_from_world: int | None
    cheaper_up_to_world: int | None

    def to_dict(self) -> dict:
        return dict(self.__dict__)


@dataclass(frozen=True)
class CcrConfig:
    """Inputs of :func:`ccr` (also recorded in its result)."""

    params: int
    shape: TransformerShape
    seq: int
    batches: tuple[int, ...]
    worlds: tuple[int, ...]
    strategies: tuple[str, ...]
    gpus_per_node: int
    flops_per_s: float
    flops_source: str
    micro_batches: int | None = None
    tp_degree: int | None = None
    pp_degree: int | None = None
    overlap: bool = False
    bucket_bytes: int = 25 * 2**20
    explicit_buckets: tuple[float, ...] | None = None  # real bucket sizes, reduction order (DDP reports them)
    recompute: bool = False
    comm_bytes_per_value: int = 2
    device_memory_bytes: float = 80e9
    flash_attention: bool = True
    price_per_node_hour: float | None = None
    big_node_gpus: int | None = None
    big_node_price_per_hour: float | None = None
    straggler_cv: float = 0.0
    overlap_profile: OverlapProfile | None = None  # measured bucket readiness and contention (profile_step)

    def to_dict(self) -> dict:
        d = dict(self.__dict__)
        d["shape"] = self.shape.to_dict()
        d["overlap_profile"] = self.overlap_profile.to_dict() if self.overlap_profile else None
        d["batches"], d["worlds"], d["strategies"] = list(self.batches), list(self.worlds), list(self.strategies)
        return d


@dataclass(frozen=True)
class CcrResult:
    """Rows of the CCR table plus breakevens and notes (derived models, assumptions)."""

    config: CcrConfig
    rows: tuple[StepEstimate, ...]
    breakevens: tuple[Breakeven, ...] = ()
    notes: tuple[str, ...] = ()
    warnings: tuple[str, ...] = field(default=())

    def to_dict(self) -> dict:
        return {"schema": "pybench.ccr", "schema_version": 1, "config": self.config.to_dict(),
                "rows": [r.to_dict() for r in self.rows], "breakevens": [b.to_dict() for b in self.breakevens],
                "notes": list(self.notes), "warnings": list(self.warnings)}

    def table(self) -> str:
        """The CCR table for stdout."""
        c = self.config
        head = (f"# ccr: {format_param_count(c.params)} params ({c.shape}), seq {c.seq}, "
                f"{c.gpus_per_node} GPUs/node, compute {c.flops_per_s / 1e12:.2f} TFLOP/s ({c.flops_source}), "
                f"overlap {'on, ' + format(c.bucket_bytes / 2**20, 'g') + ' MiB buckets' if c.overlap else 'off'}")
        cols = (f"{'strategy':<8}{'world':>6}{'batch':>6}{'layout':>14}{'comm/rank':>11}{'links':>12}"
                f"{'compute':>11}{'comm':>11}{'CCR':>7}{'band':>11}")
        if c.overlap:
            cols += f"{'exposed':>8}{'band':>11}"
        cols += f"{'step':>11}{'samples/s':>11}{'eff_1dev':>9}{'eff_node':>9}{'mem_GB':>8}  {'memory':<24}"
        if c.price_per_node_hour is not None:
            cols += f"{'samples/$':>11}"
        lines = [head, cols]
        for r in self.rows:
            line = (f"{r.strategy:<8}{r.world:>6}{r.batch:>6}{str(r.layout):>14}{_fmt_bytes(r.bytes_per_rank):>11}"
                    f"{_short_links(r.links):>12}{_fmt_s(r.compute_s):>11}{_fmt_s(r.comm_s):>11}"
                    f"{r.ccr:>7.3f}{r.band:>11}")
            if c.overlap:
                line += f"{r.exposed_fraction:>8.3f}{r.band_exposed:>11}"
            eff_node = "-" if r.efficiency_vs_node is None else f"{r.efficiency_vs_node:.3f}"
            line += (f"{_fmt_s(r.step_s):>11}{r.samples_per_s:>11.4g}{r.efficiency_vs_device:>9.3f}"
                     f"{eff_node:>9}{r.memory.total_bytes / 1e9:>8.1f}  {r.memory.fits:<24}")
            if c.price_per_node_hour is not None:
                line += f"{r.samples_per_dollar:>11.4g}"
            lines.append(line)
        for b in self.breakevens:
            faster = "never in this grid" if b.faster_from_world is None else f"from world {b.faster_from_world}"
            cheaper = ("at no multi-node size" if b.cheaper_up_to_world is None
                       else f"up to world {b.cheaper_up_to_world}")
            lines.append(f"breakeven {b.strategy} batch {b.batch} vs {b.reference} "
                         f"({b.reference_samples_per_s:.2f} samples/s, "
                         f"{b.reference_samples_per_dollar:.0f} samples/$): "
                         f"faster {faster}; as cheap per sample {cheaper}")
        lines += [f"note: {n}" for n in self.notes]
        return "\n".join(lines)

    def __repr__(self) -> str:
        return f"CcrResult({len(self.rows)} rows, {len(self.breakevens)} breakevens, {len(self.notes)} notes)"


def _fmt_bytes(n: float) -> str:
    for suffix, scale in (("TiB", 2**40), ("GiB", 2**30), ("MiB", 2**20), ("KiB", 2**10)):
        if n >= scale:
            return f"{n / scale:.1f}{suffix}"
    return f"{n:.0f}B"


def _fmt_s(t: float) -> str:
    """Seconds with a readable unit: 0.1634 -> '163.4 ms'."""
    for unit, scale in (("s", 1.0), ("ms", 1e-3), ("us", 1e-6)):
        if abs(t) >= scale:
            return f"{t / scale:.4g} {unit}"
    return f"{t / 1e-9:.4g} ns" if t else "0"


def _short_links(links: str) -> str:
    return links.replace("intra-node", "intra").replace("inter-node", "inter")


# ---------------------------------------------------------------------------
# the model

def _estimate(cfg: CcrConfig, models: ModelSet, strategy: str, world: int, batch: int,
              gpus_per_node: int, tp_degree: int | None) -> StepEstimate:
    layout = make_layout(strategy, world, gpus_per_node, tp_degree, cfg.shape.layers, cfg.pp_degree)
    if cfg.micro_batches is not None:
        m = cfg.micro_batches
    else:
        # Megatron's rule of thumb m >= 4p keeps the bubble under ~20%; no accumulation otherwise.
        m = 4 * layout.pp if layout.pp > 1 else 1
    work = Workload(cfg.params, cfg.shape, cfg.seq, batch, m, cfg.comm_bytes_per_value)
    ops = comm_ops(layout, work)
    timed = tuple(OpTime(op, models.time(op.collective, op.size_bytes, op.group_size, op.link_class))
                  for op in ops)
    comm_s = sum(o.time_s for o in timed)
    comm_low = sum(o.op.calls * o.call.time_low_s for o in timed)
    comm_high = sum(o.op.calls * o.call.time_high_s for o in timed)

    tokens = batch * cfg.seq * m
    flops = training_flops(cfg.params, tokens, cfg.recompute) / (layout.tp * layout.pp)
    sf = straggler_factor(cfg.straggler_cv, world)
    compute_s = flops / cfg.flops_per_s * sf
    bubble_s = compute_s * (layout.pp - 1) / m
    one_device_s = training_flops(cfg.params, tokens, cfg.recompute) / cfg.flops_per_s

    if cfg.overlap:
        prof = cfg.overlap_profile or OverlapProfile()
        # Backward of the last micro-batch: 4 of 6 FLOP units (6 of 8 with recomputation), unless measured.
        share = prof.backward_share if prof.backward_share is not None else (0.75 if cfg.recompute else 2 / 3)
        backward_s = compute_s / m * share
        exposed = 0.0
        for o in timed:
            if o.op.overlaps_backward:
                def one_bucket(size, o=o):
                    return models.time(o.op.collective, size, o.op.group_size, o.op.link_class).time_s
                serial = bucketed_serial_s(o.op.size_bytes, cfg.bucket_bytes, one_bucket, cfg.explicit_buckets)
                # The exchange really runs in buckets: the serial time (and so CCR) is theirs too.
                scale = serial / o.call.time_s if o.call.time_s > 0 else 1.0
                comm_s += o.op.calls * (serial - o.call.time_s)
                comm_low += o.op.calls * o.call.time_low_s * (scale - 1)
                comm_high += o.op.calls * o.call.time_high_s * (scale - 1)
                per_call = overlap_exposed_s(o.op.size_bytes, cfg.bucket_bytes, backward_s, one_bucket,
                                             cfg.explicit_buckets, prof.ready_fractions, prof.compute_slowdown,
                                             prof.copy_in_s, prof.copy_out_s)
                # Only the last micro-batch's exchange can hide; earlier calls (zero3) stay exposed.
                exposed += per_call + (o.op.calls - 1) * serial
            else:
                exposed += o.time_s
    else:
        exposed = comm_s
    memory = memory_per_device(layout, work, cfg.device_memory_bytes, cfg.flash_attention)
    nodes = math.ceil(world / gpus_per_node)
    cost = None if cfg.price_per_node_hour is None else nodes * cfg.price_per_node_hour
    return StepEstimate(strategy=layout.strategy, world=world, batch=batch, layout=layout, micro_batches=m,
                        global_batch=batch * m * layout.dp, ops=timed, compute_s=compute_s, bubble_s=bubble_s,
                        comm_s=comm_s, comm_low_s=comm_low, comm_high_s=comm_high, exposed_s=exposed,
                        overlap=cfg.overlap, straggler_factor=sf, samples_per_s_one_device=batch * m / one_device_s,
                        memory=memory, cost_per_hour=cost)


def _parse_list(value, label: str, conv=int) -> tuple:
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        items = [value]
    elif isinstance(value, str):
        items = [v for v in value.split(",")]
    else:
        items = list(value)
    out = []
    for item in items:
        try:
            v = conv(item.strip()) if isinstance(item, str) else conv(item)
        except (TypeError, ValueError):
            raise UsageError(f"{label}: {item!r} is not a whole number; use a comma list such as 1,2,4") from None
        if isinstance(v, (int, float)) and v < 1:
            raise UsageError(f"{label} must be at least 1, got {item!r}")
        out.append(v)
    if not out:
        raise UsageError(f"{label} is empty; give a comma list such as 1,2,4")
    return tuple(out)


def ccr(params: int | str, seq: int, batch: int | str | Sequence[int], world: int | str | Sequence[int],
        strategy: str | Sequence[str] = "ddp", *, models: ModelSet | Iterable[CollectiveModel] | str,
        compute: ComputeProfile | str | None = None, flops_per_s: float | None = None,
        gpus_per_node: int = 8, shape: TransformerShape | None = None, micro_batches: int | None = None,
        tp_degree: int | None = None, pp_degree: int | None = None, overlap: bool = False, bucket_mb: float = 25,
        recompute: bool = False, comm_bytes_per_value: int = 2, device_memory_gb: float = 80,
        flash_attention: bool = True, price_per_node_hour: float | None = None,
        big_node_gpus: int | None = None, big_node_price_per_hour: float | None = None,
        straggler_cv: float = 0.0, backend: str | None = None,
        bucket_sizes_bytes: Sequence[float] | None = None,
        overlap_profile: OverlapProfile | None = None) -> CcrResult:
    """CCR, step time, scaling efficiency, cost and memory for every combination.

    Parameters
    ----------
    params : int or str
        Parameter count (``7B``); sets the shape unless ``shape`` is given.
    seq : int
        Sequence length.
    batch, world : int, str or sequence of int
        Micro-batch sizes per data-parallel replica and world sizes (``1,2,4``).
    strategy : str or sequence of str
        ddp, zero1, zero2, zero3 (fsdp), tp, pp, tp+dp.
    models : ModelSet, iterable of CollectiveModel, or str
        Fitted alpha-beta models or a model file path.
    compute : ComputeProfile or str, optional
        Measured GEMM timings (or a path to them); supplies the FLOP/s.
    flops_per_s : float, optional
        A FLOP/s figure to use instead of a profile (you measured it elsewhere).
    gpus_per_node : int
    micro_batches : int, optional
        Micro-batches per step; default 1, and 4 x stages for pp.
    tp_degree : int, optional
        TP degree of tp+dp and tp+pp+dp (default: GPUs per node).
    pp_degree : int, optional
        Pipeline stages of tp+pp+dp (default 2).
    overlap : bool
        Overlap the gradient exchange with backward in buckets of ``bucket_mb`` MiB.
    bucket_sizes_bytes : sequence of float, optional
        The buckets a framework really used, in reduction order (DDP's reducer
        reports them after its first iterations); they replace equal ``bucket_mb``
        buckets, which misplace the readiness of coarse buckets.
    overlap_profile : OverlapProfile, optional
        When each bucket is ready, backward's share of compute and how much
        compute slows while communication runs, as measured by
        ``pybench.profile.step`` (default: uniform readiness, 2/3, no slowdown).
    recompute : bool
        Full activation recomputation (8 x P x tokens FLOPs).
    comm_bytes_per_value : int
        Bytes per communicated value (2 for bf16).
    device_memory_gb : float
        Device memory in GB (1e9 bytes; conservative against GiB-sized cards).
    price_per_node_hour : float, optional
        Price of one node per hour; enables samples per dollar and breakeven.
    big_node_gpus, big_node_price_per_hour : optional
        A single bigger machine (all links intra-node) to compare scale-out against.
    straggler_cv : float
        Coefficient of variation of per-rank compute time.
    backend : str, optional
        Use only models of this backend (default: nccl when the file mixes backends).

    Returns
    -------
    CcrResult

    Raises
    ------
    UsageError
        For bad input (unknown strategy, zero batch, invalid layouts, missing models).
    """
    P = parse_param_count(params)
    shape = shape or shape_for_params(P)
    if int(seq) < 1:
        raise UsageError(f"--seq must be at least 1, got {seq}")
    batches = _parse_list(batch, "--batch")
    worlds = _parse_list(world, "--world")
    strategies = tuple(dict.fromkeys(canonical_strategy(s) for s in
                                     (strategy.split(",") if isinstance(strategy, str) else strategy)))
    if gpus_per_node < 1:
        raise UsageError(f"--gpus-per-node must be at least 1, got {gpus_per_node}")
    if micro_batches is not None and micro_batches < 1:
        raise UsageError(f"--micro-batches must be at least 1, got {micro_batches}")
    if device_memory_gb <= 0:
        raise UsageError(f"--device-memory-gb must be positive, got {device_memory_gb}")
    if price_per_node_hour is not None and price_per_node_hour <= 0:
        raise UsageError(f"--price-per-node-hour must be positive, got {price_per_node_hour}")
    if (big_node_gpus is None) != (big_node_price_per_hour is None):
        raise UsageError("give both --big-node-gpus and --big-node-price-per-hour, or neither")
    if big_node_gpus is not None and price_per_node_hour is None:
        raise UsageError("--big-node-gpus needs --price-per-node-hour to compare costs")
    if bucket_mb <= 0:
        raise UsageError(f"--bucket-mb must be positive, got {bucket_mb}")

    warnings: list[str] = []
    if isinstance(compute, str):
        compute = load_compute(compute)
    if flops_per_s is not None:
        if flops_per_s <= 0:
            raise UsageError(f"flops_per_s must be positive, got {flops_per_s}")
        source = "given"
    elif compute is not None:
        flops_per_s = compute.flops_per_s
        source = f"measured: {compute.engine} {compute.dtype} on {compute.device}"
        if compute.shape.hidden != shape.hidden:
            warnings.append(f"compute profile was measured at hidden {compute.shape.hidden}, this model has hidden "
                            f"{shape.hidden}; FLOP/s may differ at these shapes "
                            f"(rerun compute --params {format_param_count(P)})")
        warnings += [f"compute profile: {w}" for w in compute.warnings]
    else:
        raise UsageError("no compute figure: pass --compute COMPUTE.json (from `python -m pybench compute`)")
    if isinstance(models, str):
        models = load_model_set(models, backend)
    elif not isinstance(models, ModelSet):
        models = ModelSet(models, backend)

    cfg = CcrConfig(params=P, shape=shape, seq=int(seq), batches=batches, worlds=worlds, strategies=strategies,
                    gpus_per_node=gpus_per_node, flops_per_s=float(flops_per_s), flops_source=source,
                    micro_batches=micro_batches, tp_degree=tp_degree, pp_degree=pp_degree, overlap=overlap,
                    bucket_bytes=int(bucket_mb * 2**20), recompute=recompute,
                    comm_bytes_per_value=comm_bytes_per_value, device_memory_bytes=device_memory_gb * 1e9,
                    flash_attention=flash_attention, price_per_node_hour=price_per_node_hour,
                    big_node_gpus=big_node_gpus, big_node_price_per_hour=big_node_price_per_hour,
                    straggler_cv=straggler_cv,
                    explicit_buckets=tuple(bucket_sizes_bytes) if bucket_sizes_bytes else None,
                    overlap_profile=overlap_profile)

    rows: list[StepEstimate] = []
    skipped: list[str] = []
    for s in strategies:
        for b in batches:
            for w in worlds:
                try:
                    make_layout(s, w, gpus_per_node, tp_degree, shape.layers, pp_degree)
                except UsageError as exc:
                    # In a grid some combinations are impossible (tp across nodes); skip and say so,
                    # but a strategy with no possible combination at all is an error.
                    if len(worlds) == 1 or not any(_layout_ok(s, w2, gpus_per_node, tp_degree, shape.layers,
                                                              pp_degree)
                                                   for w2 in worlds):
                        raise
                    if str(exc) not in skipped:
                        skipped.append(str(exc))
                    continue
                est = _estimate(cfg, models, s, w, b, gpus_per_node, tp_degree)
                if w > gpus_per_node and w % gpus_per_node == 0:
                    try:
                        node = _estimate(cfg, models, s, gpus_per_node, b, gpus_per_node, tp_degree)
                        eff = est.samples_per_s / (w / gpus_per_node * node.samples_per_s)
                        est = _replace(est, efficiency_vs_node=eff)
                    except UsageError:
                        pass
                elif w == gpus_per_node:
                    est = _replace(est, efficiency_vs_node=1.0)
                rows.append(est)

    breakevens: list[Breakeven] = []
    if price_per_node_hour is not None:
        ref_g = big_node_gpus or gpus_per_node
        ref_price = big_node_price_per_hour if big_node_gpus else price_per_node_hour
        ref_name = (f"one {ref_g}-GPU big node at {ref_price:g}/h" if big_node_gpus
                    else f"one {gpus_per_node}-GPU node")
        for s in strategies:
            for b in batches:
                try:
                    ref = _estimate(cfg, models, s, ref_g, b, ref_g, tp_degree)
                except UsageError as exc:
                    warnings.append(f"breakeven {s} batch {b}: no reference node configuration ({exc})")
                    continue
                ref_sps = ref.samples_per_s
                ref_spd = ref_sps * 3600.0 / ref_price
                multi = sorted((r for r in rows if r.strategy == s and r.batch == b and r.world > gpus_per_node),
                               key=lambda r: r.world)
                faster = next((r.world for r in multi if r.samples_per_s > ref_sps), None)
                cheaper = [r.world for r in multi if r.samples_per_dollar >= ref_spd]
                breakevens.append(Breakeven(s, b, ref_name, ref_sps, ref_spd, faster,
                                            max(cheaper) if cheaper else None))

    warnings += [f"skipped: {why}" for why in skipped]
    notes = list(models.notes)
    notes.append("memory: 16 B/param (bf16 weights 2 + bf16 grads 2 + fp32 master 4 + Adam m 4 + v 4), sharded by "
                 "strategy; activations per Korthikanti et al. 2022"
                 + (" with flash attention" if flash_attention else "") + "; GB = 1e9 B")
    notes.append("eff_1dev: against one device with the same micro-batch and no communication "
                 "(whether or not the model fits on it)")
    if any(r.layout.pp > 1 for r in rows):
        notes.append(("pp: 4 x stages micro-batches per step (set --micro-batches)" if micro_batches is None
                      else f"pp: {micro_batches} micro-batches per step")
                     + "; bubble (p-1)/(m+p-1) counted in step time, not in CCR")
    if any(r.layout.tp > 1 for r in rows):
        notes.append("tp: compute uses the profile's FLOP/s at unsplit GEMM shapes; tensor-parallel GEMMs are "
                     "1/tp as wide and usually reach less (profile with --hidden/--ffn divided by tp to check)")
    if straggler_cv:
        notes.append(f"stragglers: compute x (1 + {straggler_cv:g} x E[max of N standard normals]), N = world")
    return CcrResult(cfg, tuple(rows), tuple(breakevens), tuple(notes), tuple(warnings))


def _layout_ok(strategy: str, world: int, gpus_per_node: int, tp_degree: int | None, layers: int,
               pp_degree: int | None = None) -> bool:
    try:
        make_layout(strategy, world, gpus_per_node, tp_degree, layers, pp_degree)
    except UsageError:
        return False
    return True


def _replace(est: StepEstimate, **changes) -> StepEstimate:
    from dataclasses import replace
    return replace(est, **changes)


# ---------------------------------------------------------------------------
# plan: the field's advice, with the figures that justify it

# A model "fits comfortably" when it leaves this fraction of device memory for the
# CUDA context, allocator fragmentation and the buffers the estimate does not count.
PLAN_HEADROOM = 0.8


@dataclass(frozen=True)
class Plan:
    """Advice for one model on one kind of device, with the figures behind it.

    Attributes
    ----------
    verdict : str
        ``fits one device``, ``fits only just`` or ``does not fit one device``.
    advice : tuple of str
        Recommendations in order, each with its numbers.
    memory_one_device : MemoryEstimate
        Unsharded memory (DDP layout) on one device.
    rows : tuple of StepEstimate
        Configurations evaluated for the advice.
    recommended : StepEstimate or None
        The configuration the advice ends on.
    notes : tuple of str
    """

    verdict: str
    advice: tuple[str, ...]
    memory_one_device: MemoryEstimate
    rows: tuple[StepEstimate, ...]
    recommended: StepEstimate | None
    notes: tuple[str, ...] = ()

    def to_dict(self) -> dict:
        return {"schema": "pybench.plan", "schema_version": 1, "verdict": self.verdict,
                "advice": list(self.advice), "memory_one_device": self.memory_one_device.to_dict(),
                "rows": [r.to_dict() for r in self.rows],
                "recommended": None if self.recommended is None else self.recommended.to_dict(),
                "notes": list(self.notes)}

    def text(self) -> str:
        lines = [f"verdict: {self.verdict}"]
        lines += [f"{i}. {a}" for i, a in enumerate(self.advice, 1)]
        if self.recommended is not None:
            r = self.recommended
            lines.append(f"recommended: {r.strategy} on {r.world} devices [{r.layout}], batch {r.batch}: "
                         f"{_row_figures(r)}")
        lines += [f"note: {n}" for n in self.notes]
        return "\n".join(lines)

    def __repr__(self) -> str:
        rec = "none" if self.recommended is None else f"{self.recommended.strategy} x{self.recommended.world}"
        return f"Plan({self.verdict}; recommended {rec}; {len(self.rows)} configurations evaluated)"


def _gb(x: float) -> str:
    return f"{x / 1e9:.1f} GB"


def _row_figures(r: StepEstimate) -> str:
    exposed = f", exposed {r.exposed_fraction:.2f} ({r.band_exposed})" if r.overlap else ""
    eff_node = "" if r.efficiency_vs_node is None else f", eff vs node {r.efficiency_vs_node:.2f}"
    mem = r.memory.total_checkpointed_bytes if r.memory.fits == "fits with checkpointing" else r.memory.total_bytes
    return (f"CCR {r.ccr:.2f} ({r.band}){exposed}, {r.samples_per_s:.2f} samples/s, "
            f"eff vs 1 device {r.efficiency_vs_device:.2f}{eff_node}, {_gb(mem)}/device ({r.memory.fits})")


def _worlds_up_to(gpus_per_node: int, max_world: int) -> list[int]:
    worlds = [w for w in (1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024) if w < gpus_per_node and w <= max_world]
    w = gpus_per_node
    while w <= max_world:
        worlds.append(w)
        w *= 2
    return worlds


def plan(params: int | str, seq: int, batch: int = 1, *, models: ModelSet | Iterable[CollectiveModel] | str,
         compute: ComputeProfile | str | None = None, flops_per_s: float | None = None, gpus_per_node: int = 8,
         shape: TransformerShape | None = None, max_world: int = 64, device_memory_gb: float = 80,
         overlap: bool = True, bucket_mb: float = 25, target_samples_per_s: float | None = None,
         flash_attention: bool = True, backend: str | None = None, peak_flops_per_s: float | None = None,
         max_batch: int = 64) -> Plan:
    """The field's advice for training ``params`` on devices like the profiled one.

    - Fits one device with headroom: scale up first (DDP over the node's
      NVLink), then data parallel across nodes while the exposed
      communication stays out of the comm-bound band (or until
      ``target_samples_per_s`` is reached).
    - Fits only just (over 80% of memory, or only with checkpointing): ZeRO-1/2
      to shard optimizer state, or gradient accumulation with a smaller micro-batch.
    - Does not fit: ZeRO-3 if sharding alone makes it fit; tensor parallel inside
      the node, pipeline across nodes (smallest pp that fits), data parallel on top.

    - Low utilisation (measured FLOP/s under 40% of ``peak_flops_per_s``, a
      datasheet figure the user gives as a reference): fix the input pipeline and
      the kernels first; more nodes multiply the waste.
    - Where the recommended configuration is not in the ``fits`` band, the batch
      (up to ``max_batch``) at which larger batches amortise communication enough
      to change the band.

    Parameters are those of :func:`ccr`; ``max_world`` bounds the world sizes tried.

    Returns
    -------
    Plan
    """
    P = parse_param_count(params)
    shape = shape or shape_for_params(P)
    if int(batch) < 1:
        raise UsageError(f"--batch must be at least 1, got {batch}")
    if max_world < 1:
        raise UsageError(f"--max-world must be at least 1, got {max_world}")
    if isinstance(models, str):
        models = load_model_set(models, backend)
    elif not isinstance(models, ModelSet):
        models = ModelSet(models, backend)
    if isinstance(compute, str):
        compute = load_compute(compute)
    common = dict(models=models, compute=compute, flops_per_s=flops_per_s, gpus_per_node=gpus_per_node,
                  shape=shape, overlap=overlap, bucket_mb=bucket_mb, device_memory_gb=device_memory_gb,
                  flash_attention=flash_attention)
    device_bytes = device_memory_gb * 1e9
    g = gpus_per_node
    worlds = _worlds_up_to(g, max_world)
    notes: list[str] = []

    def rows_for(strategy: str, wlist: list[int], b: int = int(batch), **kw) -> list[StepEstimate]:
        ok = [w for w in wlist if _layout_ok(strategy, w, g, kw.get("tp_degree"), shape.layers, kw.get("pp_degree"))]
        if not ok:
            return []
        try:
            res = ccr(P, seq, b, ok, strategy, **common, **kw)
        except UsageError as exc:
            notes.append(f"could not evaluate {strategy}: {exc}")
            return []
        for n in res.notes:
            if n not in notes:
                notes.append(n)
        return list(res.rows)

    one = memory_per_device(make_layout("ddp", 1, g), Workload(P, shape, int(seq), int(batch)), device_bytes,
                            flash_attention)
    mem_text = (f"one device needs {_gb(one.total_bytes)} ({_gb(one.states_bytes)} weights+grads+Adam at "
                f"16 B/param, {_gb(one.activations_bytes)} activations; {_gb(one.total_checkpointed_bytes)} "
                f"with activation checkpointing) of {_gb(device_bytes)}")
    advice: list[str] = []
    evaluated: list[StepEstimate] = []
    recommended: StepEstimate | None = None

    def good(r: StepEstimate) -> bool:
        frac = r.exposed_fraction if r.overlap else r.ccr
        return band(frac) != "comm-bound" and r.memory.fits != "does not fit"

    if one.total_bytes <= PLAN_HEADROOM * device_bytes:
        verdict = "fits one device"
        advice.append(f"it fits: {mem_text}. Data parallelism (DDP) is enough; no model sharding needed.")
        ddp = rows_for("ddp", worlds)
        evaluated += ddp
        node = next((r for r in ddp if r.world == g), None)
        if node is not None:
            advice.append(f"scale up first: fill one node ({g} devices over intra-node links) with DDP: "
                          f"{_row_figures(node)}.")
        multi = [r for r in ddp if r.world > g]
        fine = [r for r in multi if good(r)]
        if multi:
            worst = multi[-1]
            advice.append("then scale out with DDP across nodes: " + "; ".join(
                f"{r.world} devices: CCR {r.ccr:.2f}, exposed {r.exposed_fraction:.2f}, eff vs node "
                f"{r.efficiency_vs_node if r.efficiency_vs_node is not None else float('nan'):.2f}"
                for r in multi)
                + (f". Beyond {fine[-1].world} devices communication is comm-bound" if fine and fine[-1] is not worst
                   else "" if fine else ". Across nodes the gradient all-reduce is comm-bound: prefer a bigger "
                   "node, a larger batch per device, or fewer, faster nodes"))
        candidates = [r for r in ddp if good(r)] or ddp
    elif one.total_checkpointed_bytes <= device_bytes:
        verdict = "fits only just"
        advice.append(f"it fits only just: {mem_text}.")
        wl = [w for w in worlds if w >= min(g, max_world)] or worlds
        zs = rows_for("ddp", wl) + rows_for("zero1", wl) + rows_for("zero2", wl)
        evaluated += zs
        at = min(wl)
        by = {r.strategy: r for r in zs if r.world == at}
        if by:
            advice.append(f"shard the optimizer state with ZeRO at {at} devices: " + "; ".join(
                f"{s} {_gb(r.memory.total_bytes)}/device, CCR {r.ccr:.2f}" for s, r in by.items()) + ".")
        if int(batch) > 1:
            small = memory_per_device(make_layout("ddp", 1, g), Workload(P, shape, int(seq), 1), device_bytes,
                                      flash_attention)
            advice.append(f"or keep DDP with gradient accumulation: micro-batch 1 x {batch} accumulation steps "
                          f"needs {_gb(small.total_bytes)}/device and communicates once per step.")
        advice.append(f"or checkpoint activations: {_gb(one.total_checkpointed_bytes)}/device at 8/6 the compute.")
        candidates = [r for r in zs if good(r)] or zs
    else:
        verdict = "does not fit one device"
        advice.append(f"it does not fit: {mem_text}.")
        z3 = rows_for("zero3", [w for w in worlds if w >= 2])
        evaluated += z3
        z3_fit = [r for r in z3 if r.memory.fits != "does not fit"]
        if z3_fit:
            r = z3_fit[0]
            advice.append(f"ZeRO-3/FSDP fits from {r.world} devices: {_row_figures(r)}.")
        tpdp = rows_for("tp+dp", [w for w in worlds if w >= g])
        evaluated += tpdp
        tp_node = next((r for r in tpdp if r.world == g), None)
        if tp_node is not None and tp_node.memory.fits != "does not fit":
            advice.append(f"tensor parallel inside the node (tp={g}) fits: {_row_figures(tp_node)}; "
                          f"then data parallel across nodes.")
            threed: list[StepEstimate] = []
        else:
            threed = []
            pp = 2
            while pp <= shape.layers and g * pp <= max_world:
                rows = rows_for("tp+pp+dp", [w for w in worlds if w % (g * pp) == 0], pp_degree=pp)
                if rows and rows[0].memory.fits != "does not fit":
                    threed = rows
                    break
                pp *= 2
            if threed:
                r = threed[0]
                advice.append(f"tensor parallel inside the node (tp={g}) is not enough"
                              + (f" ({_gb(tp_node.memory.total_bytes)}/device)" if tp_node else "")
                              + f"; add pipeline stages across nodes: tp={g} x pp={r.layout.pp} fits: "
                              f"{_row_figures(r)}; then data parallel on top.")
            else:
                advice.append(f"no tp x pp layout within {max_world} devices fits; raise --max-world or use "
                              f"devices with more memory")
        evaluated += threed
        candidates = [r for r in z3 + tpdp + threed if good(r)] or \
                     [r for r in z3 + tpdp + threed if r.memory.fits != "does not fit"]
    if candidates:
        if target_samples_per_s is not None:
            meeting = [r for r in candidates if r.samples_per_s >= target_samples_per_s]
            recommended = (min(meeting, key=lambda r: (r.world, -r.samples_per_s)) if meeting
                           else max(candidates, key=lambda r: r.samples_per_s))
            if not meeting:
                notes.append(f"no configuration within {max_world} devices reaches {target_samples_per_s:g} "
                             f"samples/s; recommended is the fastest")
        else:
            # Without a target: the largest configuration that is not comm-bound, else the most efficient.
            recommended = max(candidates, key=lambda r: (good(r), r.world if good(r) else r.efficiency_vs_device))
    measured = flops_per_s if flops_per_s is not None else getattr(compute, "flops_per_s", None)
    if peak_flops_per_s and measured:
        fraction = measured / peak_flops_per_s
        if fraction < LOW_UTILISATION:
            advice.insert(0, f"low accelerator utilisation: the step's GEMMs reach {measured / 1e12:.3g} TFLOP/s, "
                             f"{fraction:.0%} of the {peak_flops_per_s / 1e12:.3g} TFLOP/s peak you gave: fix the "
                             f"input pipeline and the kernels first, not the node count (more nodes multiply the "
                             f"waste)")
    if recommended is not None and band(recommended.exposed_fraction if recommended.overlap else recommended.ccr) != "fits":
        advice.append(_batch_amortisation(recommended, int(batch), max_batch, rows_for))
    notes.append(f"fits comfortably means within {PLAN_HEADROOM:.0%} of device memory (context, fragmentation "
                 f"and buffers are not in the estimate)")
    return Plan(verdict, tuple(advice), one, tuple(evaluated), recommended, tuple(notes))


# Measured FLOP/s below this share of the datasheet peak is a utilisation problem, not a scaling one.
LOW_UTILISATION = 0.40


def _batch_amortisation(r: StepEstimate, batch: int, max_batch: int, rows_for) -> str:
    """Where a larger batch per device changes the recommended configuration's band."""
    def frac(x: StepEstimate) -> float:
        return x.exposed_fraction if x.overlap else x.ccr

    start = band(frac(r))
    kw = {"tp_degree": r.layout.tp} if r.layout.tp > 1 else {}
    if r.layout.pp > 1:
        kw["pp_degree"] = r.layout.pp
    b = batch * 2
    while b <= max_batch:
        rows = rows_for(r.strategy, [r.world], b, **kw)
        if rows and rows[0].memory.fits != "does not fit" and band(frac(rows[0])) != start:
            x = rows[0]
            return (f"larger batches amortise communication: {r.strategy} on {r.world} devices goes from "
                    f"{frac(r):.2f} ({start}) at batch {batch} to {frac(x):.2f} ({band(frac(x))}) from batch {b} "
                    f"per device, {x.samples_per_s:.2f} samples/s, {_gb(x.memory.total_checkpointed_bytes if x.memory.fits == 'fits with checkpointing' else x.memory.total_bytes)}/device")
        if rows and rows[0].memory.fits == "does not fit":
            return (f"a larger batch does not help here: at batch {b} {r.strategy} on {r.world} devices no longer fits "
                    f"in memory, and up to batch {b // 2} the band stays {start}")
        b *= 2
    return (f"larger batches do not change the band of {r.strategy} on {r.world} devices up to batch {max_batch} "
            f"per device: it stays {start}; communication, not the batch, sets the step")
