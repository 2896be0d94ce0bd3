"""The advisor: :func:`plan` applies the field's rules to the step model and returns a
:class:`~pybench.planning.plan_result.Plan`, advice records with the figures behind them.

The rules, in order (``RULE_ORDER``); each applies only when the previous cannot meet the need:

- Does it fit one device, within the one headroom (``MEMORY_HEADROOM``)?
- Is one device well used: GEMMs under 40% of a datasheet peak the user gives, or a data
  loader slower than the device, say fix that first (more nodes multiply the waste).
- Scale up inside one node (DDP over the node's links), with scaling efficiency at 2, 4
  and 8 workers shown before larger counts.
- Fits only just (only with checkpointing): ZeRO-1/2 to shard optimizer state, gradient
  accumulation with a smaller micro-batch, or activation checkpointing.
- Does not fit: ZeRO-3 if sharding alone makes it fit; tensor parallel inside the node,
  pipeline across nodes (smallest pp that fits), data parallel on top.
- Multi-node only for a named need: memory that does not fit one node, or a throughput
  target; without one the recommendation stays on one node and says what would justify more.
  A target is met by the smallest configuration reaching it, preferring one its own bands do
  not call comm-bound; memory by the smallest configuration that fits.
- Then what the recommendation costs, a global-batch line past the user's limit, and the
  batch at which larger batches would change its band.

The decisions live here; the sentences live in :mod:`pybench.planning.plan_result`.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

from pybench.errors import UsageError
from pybench.planning.bands import Band
from pybench.planning.compute import ComputeProfile, load_compute
from pybench.planning.grid import ccr, layout_ok
from pybench.planning.model_set import CollectiveModel, ModelSet, as_model_set
from pybench.planning.plan_result import Plan
from pybench.planning.records import (
    RULE_ORDER,
    AccumulationAdvice,
    Advice,
    BatchAdvice,
    BatchVerdict,
    CheckpointAdvice,
    CostAdvice,
    GlobalBatchAdvice,
    InputPipelineAdvice,
    MemoryAdvice,
    NeedAdvice,
    NeedVerdict,
    NoLayoutAdvice,
    OneDevice,
    PipelineAdvice,
    ScaleOutAdvice,
    ScaleOutVerdict,
    ScaleUpAdvice,
    ScalingAdvice,
    TensorParallelAdvice,
    UtilisationAdvice,
    Zero3Advice,
    ZeroAdvice,
)
from pybench.planning.step import StepEstimate
from pybench.planning.strategies import (
    MEMORY_HEADROOM,
    MemoryEstimate,
    MemoryFit,
    Workload,
    make_layout,
    memory_per_device,
)
from pybench.planning.transformer import TransformerShape, parse_param_count, shape_for_params

__all__ = ["plan", "Plan", "PLAN_HEADROOM", "LOW_UTILISATION"]

# The one headroom rule (pybench.planning.strategies.MEMORY_HEADROOM), under its older name.
PLAN_HEADROOM = MEMORY_HEADROOM
# Measured FLOP/s below this share of the datasheet peak is a utilisation problem, not a scaling one.
LOW_UTILISATION = 0.40
# Above this many sequences per optimizer step, the plan says what a growing global batch asks for.
GLOBAL_BATCH_LIMIT = 1024
# Scaling efficiency is shown at these worker counts before larger ones are considered.
SCALING_CHECK_WORLDS = (2, 4, 8)


@dataclass
class _Evaluator:
    """Runs the CCR grid for the advisor with the plan's inputs and collects what it noted."""

    params: int
    seq: int
    batch: int
    gpus_per_node: int
    shape: TransformerShape
    models: ModelSet
    compute: ComputeProfile | None
    flops_per_s: float | None
    overlap: bool
    bucket_mb: float
    device_memory_gb: float
    flash_attention: bool
    price_per_node_hour: float | None = None
    memory_headroom: float = MEMORY_HEADROOM
    bytes_per_param: int = 16
    straggler_cv: float = 0.0
    slow_node: float = 1.0
    notes: list[str] = field(default_factory=list)

    def rows(self, strategy: str, worlds: list[int], batch: int | None = None, tp_degree: int | None = None,
             pp_degree: int | None = None) -> list[StepEstimate]:
        ok = [w for w in worlds if layout_ok(strategy, w, self.gpus_per_node, tp_degree, self.shape.layers,
                                             pp_degree)]
        if not ok:
            return []
        try:
            res = ccr(self.params, self.seq, self.batch if batch is None else batch, ok, strategy,
                      models=self.models, compute=self.compute, flops_per_s=self.flops_per_s,
                      gpus_per_node=self.gpus_per_node, shape=self.shape, tp_degree=tp_degree, pp_degree=pp_degree,
                      overlap=self.overlap, bucket_mb=self.bucket_mb, device_memory_gb=self.device_memory_gb,
                      flash_attention=self.flash_attention, price_per_node_hour=self.price_per_node_hour,
                      memory_headroom=self.memory_headroom, bytes_per_param=self.bytes_per_param,
                      straggler_cv=self.straggler_cv, slow_node=self.slow_node)
        except UsageError as exc:
            if "model for" not in str(exc):
                raise
            # Saying nothing fits, or recommending around a layout nobody priced, would be false.
            raise UsageError(f"cannot price {strategy} on {', '.join(map(str, ok))} devices: {exc}; or give a "
                             f"link preset for that link class (links=NAME, e.g. nvlink4, ib-ndr, eth-100g), or a "
                             f"max_world the models cover") from None
        self.notes += [n for n in res.notes if n not in self.notes]
        return list(res.rows)


def good(r: StepEstimate) -> bool:
    """Not comm-bound (by the exposed fraction with overlap) and fits in memory somehow."""
    return r.decisive_band != Band.COMM_BOUND and r.memory.fits_at_all


def _worlds_up_to(gpus_per_node: int, max_world: int) -> list[int]:
    worlds = [w for w in (1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024) if w < gpus_per_node and w <= max_world]
    w = gpus_per_node
    while w <= max_world:
        worlds.append(w)
        w *= 2
    return worlds


@dataclass
class _Advising:
    """What one branch of the advice found: records, rows evaluated, and the candidates to recommend."""

    records: list[Advice] = field(default_factory=list)
    evaluated: list[StepEstimate] = field(default_factory=list)
    candidates: list[StepEstimate] = field(default_factory=list)


def _fits_one_device(ev: _Evaluator, worlds: list[int], out: _Advising) -> None:
    g = ev.gpus_per_node
    ddp = ev.rows("ddp", worlds)
    out.evaluated += ddp
    node = next((r for r in ddp if r.world == g), None)
    if node is not None:
        out.records.append(ScaleUpAdvice("fill one node", g, node))
    small = tuple(r for r in ddp if r.world in SCALING_CHECK_WORLDS)
    if small:
        out.records.append(ScalingAdvice("check before larger counts", small))
    multi = [r for r in ddp if r.world > g]
    fine = [r for r in multi if good(r)]
    if multi:
        last = fine[-1].world if fine else None
        verdict = (ScaleOutVerdict.COMM_BOUND if last is None else ScaleOutVerdict.NOT_COMM_BOUND
                   if last == multi[-1].world else ScaleOutVerdict.COMM_BOUND_BEYOND)
        out.records.append(ScaleOutAdvice(verdict, tuple(multi), last))
    out.candidates = [r for r in ddp if good(r)] or ddp


def _fits_only_just(ev: _Evaluator, worlds: list[int], max_world: int, one_batch: MemoryEstimate | None,
                    one: MemoryEstimate, out: _Advising) -> None:
    wl = [w for w in worlds if w >= min(ev.gpus_per_node, max_world)] or worlds
    zs = ev.rows("ddp", wl) + ev.rows("zero1", wl) + ev.rows("zero2", wl)
    out.evaluated += zs
    at = min(wl)
    by = {r.strategy: r for r in zs if r.world == at}
    if by:
        out.records.append(ZeroAdvice("shard the optimizer state", at, tuple(by.values())))
    if one_batch is not None:
        out.records.append(AccumulationAdvice("micro-batch 1 with accumulation", ev.batch, one_batch))
    out.records.append(CheckpointAdvice("checkpoint activations", one))
    out.candidates = [r for r in zs if good(r)] or zs


def _tp_pp(ev: _Evaluator, worlds: list[int], max_world: int) -> list[StepEstimate]:
    """The smallest pipeline depth whose tp x pp layout fits (no rows when none does)."""
    g, pp = ev.gpus_per_node, 2
    while pp <= ev.shape.layers and g * pp <= max_world:
        rows = ev.rows("tp+pp+dp", [w for w in worlds if w % (g * pp) == 0], pp_degree=pp)
        if rows and rows[0].memory.fits_at_all:
            return rows
        pp *= 2
    return []


def _does_not_fit(ev: _Evaluator, worlds: list[int], max_world: int, out: _Advising) -> None:
    g = ev.gpus_per_node
    z3 = ev.rows("zero3", [w for w in worlds if w >= 2])
    out.evaluated += z3
    z3_fit = [r for r in z3 if r.memory.fits_at_all]
    if z3_fit:
        out.records.append(Zero3Advice("shard everything", z3_fit[0]))
    tpdp = ev.rows("tp+dp", [w for w in worlds if w >= g])
    out.evaluated += tpdp
    tp_node = next((r for r in tpdp if r.world == g), None)
    threed: list[StepEstimate] = []
    if tp_node is not None and tp_node.memory.fits_at_all:
        out.records.append(TensorParallelAdvice("fits", g, tp_node))
    else:
        threed = _tp_pp(ev, worlds, max_world)
        if threed:
            out.records.append(PipelineAdvice("add pipeline stages", g, tp_node, threed[0]))
        else:
            out.records.append(NoLayoutAdvice("nothing fits", max_world))
    out.evaluated += threed
    every = z3 + tpdp + threed
    out.candidates = [r for r in every if good(r)] or [r for r in every if r.memory.fits_at_all]


def _throughput(r: StepEstimate, loader_samples_per_s: float | None) -> float:
    """Samples/s of a configuration, capped by the data loader of each data-parallel replica."""
    if loader_samples_per_s is None:
        return r.samples_per_s
    return min(r.samples_per_s, loader_samples_per_s * r.layout.dp)


@dataclass(frozen=True)
class _Need:
    """What the recommendation must meet: a throughput target, memory, or neither."""

    target: float | None
    memory: bool
    device_well_used: bool
    gpus_per_node: int
    loader_samples_per_s: float | None = None


def _recommend(out: _Advising, need: _Need) -> tuple[StepEstimate | None, bool]:
    """The configuration to recommend, and whether it meets the target (True without one).

    Without a named need (a target, or memory that does not fit one device), or while one device
    is not well used, the recommendation stays inside one node. A target is met by the smallest
    configuration that reaches it, preferring one its own bands do not call comm-bound; memory by
    the smallest configuration that fits.
    """
    in_node = not need.device_well_used or (need.target is None and not need.memory)
    fitting = [r for r in out.evaluated if r.memory.fits_at_all]
    pool = [r for r in fitting if r.world <= need.gpus_per_node] if in_node else fitting
    candidates = [r for r in out.candidates if not in_node or r.world <= need.gpus_per_node] or out.candidates
    if not candidates:
        return None, True
    if need.target is not None and need.device_well_used:
        meeting = [r for r in pool if _throughput(r, need.loader_samples_per_s) >= need.target]
        meeting = [r for r in meeting if good(r)] or meeting
        if meeting:
            return min(meeting, key=lambda r: (r.world, -_throughput(r, need.loader_samples_per_s))), True
        return max(candidates, key=lambda r: _throughput(r, need.loader_samples_per_s)), False
    if need.memory and not in_node:
        # The need is to fit: the smallest configuration that fits and is not comm-bound meets it.
        return min(candidates, key=lambda r: (not good(r), r.world, -r.samples_per_s)), True
    # The largest configuration that is not comm-bound, else the most efficient.
    return max(candidates, key=lambda r: (good(r), r.world if good(r) else r.efficiency_vs_device)), True


def _need_record(out: _Advising, need: _Need, recommended: StepEstimate | None, met: bool) -> NeedAdvice | None:
    in_node = [r for r in out.evaluated if r.world <= need.gpus_per_node and good(r)]
    node = max(in_node, key=lambda r: r.samples_per_s) if in_node else None
    if not need.device_well_used:
        return NeedAdvice(NeedVerdict.DEVICE_NOT_WELL_USED, recommended, node, need.target)
    if need.target is not None:
        if met and recommended is not None and not good(recommended):
            allowed = [r for r in out.evaluated if good(r)]
            best = max(allowed, key=lambda r: r.samples_per_s) if allowed else None
            return NeedAdvice(NeedVerdict.TARGET_MET_ONLY_COMM_BOUND, recommended, node, need.target, best)
        verdict = NeedVerdict.TARGET_MET if met else NeedVerdict.TARGET_NOT_REACHABLE
        return NeedAdvice(verdict, recommended, node, need.target)
    if not need.memory:
        return NeedAdvice(NeedVerdict.NO_NAMED_NEED, recommended, node)
    return None


def _batch_amortisation(ev: _Evaluator, r: StepEstimate, max_batch: int) -> BatchAdvice:
    """Where a larger batch per device changes the recommended configuration's band."""
    start = r.decisive_band
    tp = r.layout.tp if r.layout.tp > 1 else None
    pp = r.layout.pp if r.layout.pp > 1 else None
    b = ev.batch * 2
    while b <= max_batch:
        rows = ev.rows(r.strategy, [r.world], b, tp_degree=tp, pp_degree=pp)
        if rows and rows[0].memory.fits_at_all and rows[0].decisive_band != start:
            return BatchAdvice(BatchVerdict.CHANGES_BAND, r, ev.batch, b, max_batch, rows[0])
        if rows and not rows[0].memory.fits_at_all:
            return BatchAdvice(BatchVerdict.STOPS_FITTING, r, ev.batch, b, max_batch)
        b *= 2
    return BatchAdvice(BatchVerdict.UNCHANGED, r, ev.batch, b, max_batch)


def _adopt_larger_batch(ev: _Evaluator, out: _Advising, need: _Need, r: StepEstimate,
                        advice: BatchAdvice) -> tuple[StepEstimate, BatchAdvice]:
    """Pick by the plan's own bands across batches too: when the recommendation is comm-bound and a
    larger micro-batch takes its layout out of that band, recommend the smallest world at that batch
    that meets the same need (the target, else the comm-bound choice's samples/s) without being
    comm-bound. The global batch grows with it; the global-batch line says what that asks for."""
    if (advice.verdict != BatchVerdict.CHANGES_BAND or advice.at is None or r.decisive_band != Band.COMM_BOUND
            or advice.at.decisive_band == Band.COMM_BOUND):
        return r, advice
    worlds = sorted({x.world for x in out.evaluated if x.strategy == r.strategy and x.world <= r.world})
    rows = ev.rows(r.strategy, worlds, advice.tried_batch, tp_degree=r.layout.tp if r.layout.tp > 1 else None,
                   pp_degree=r.layout.pp if r.layout.pp > 1 else None)
    need_sps = need.target if need.target is not None else _throughput(r, need.loader_samples_per_s)
    meeting = [x for x in rows if good(x) and _throughput(x, need.loader_samples_per_s) >= need_sps]
    if not meeting:
        return r, advice
    choice = min(meeting, key=lambda x: (x.world, -x.samples_per_s))
    out.evaluated += [x for x in rows if x not in out.evaluated]
    return choice, BatchAdvice(BatchVerdict.ADOPTED, r, advice.batch, advice.tried_batch, advice.max_batch, choice)


def _device_use(measured: float | None, peak: float | None, loader: float | None,
                rows: list[StepEstimate]) -> list[Advice]:
    """Is one device well used? Its GEMMs against the datasheet peak, its data loader against its compute."""
    found: list[Advice] = []
    if peak and measured and measured / peak < LOW_UTILISATION:
        found.append(UtilisationAdvice("low", measured, peak))
    if loader is not None and rows:
        replica = rows[0].samples_per_s_one_device
        if loader < replica:
            found.append(InputPipelineAdvice("loader-bound", loader, replica))
    return found


def _check_plan_inputs(batch: int, max_world: int, loader: float | None, target: float | None,
                       node_price: float | None, device_price: float | None, global_batch_limit: int,
                       gpus_per_node: int) -> float | None:
    """One-line UsageError naming the bad parameter; the price per node-hour (or None)."""
    if batch < 1:
        raise UsageError(f"batch must be at least 1, got {batch}")
    if max_world < 1:
        raise UsageError(f"max_world must be at least 1, got {max_world}")
    if global_batch_limit < 1:
        raise UsageError(f"global_batch_limit must be at least 1, got {global_batch_limit}")
    for name, value in (("loader_samples_per_s", loader), ("target_samples_per_s", target),
                        ("price_per_node_hour", node_price), ("price_per_device_hour", device_price)):
        if value is not None and not value > 0:
            raise UsageError(f"{name} must be positive, got {value}")
    if node_price is not None and device_price is not None:
        raise UsageError("give price_per_node_hour or price_per_device_hour, not both")
    return node_price if device_price is None else device_price * gpus_per_node


def _cost_and_batch(out: _Advising, need: _Need, recommended: StepEstimate | None, node_price: float | None,
                    seq: int, limit: int) -> list[Advice]:
    """What the recommendation costs, and whether its global batch asks for learning-rate care."""
    if recommended is None:
        return []
    found: list[Advice] = []
    if node_price is not None:
        in_node = [r for r in out.evaluated if r.world <= need.gpus_per_node and good(r)]
        node = max(in_node, key=lambda r: r.samples_per_s) if in_node else None
        found.append(CostAdvice("priced", node_price, recommended, node))
    if recommended.global_batch > limit:
        found.append(GlobalBatchAdvice("above the limit", recommended, seq, limit))
    return found


def plan(params: int | str, seq: int, batch: int = 1, *, models: ModelSet | Iterable[CollectiveModel] | str,
         compute: ComputeProfile | str | None = None, flops_per_s: float | None = None, gpus_per_node: int = 8,
         shape: TransformerShape | None = None, max_world: int = 64, device_memory_gb: float = 80,
         overlap: bool = True, bucket_mb: float = 25, target_samples_per_s: float | None = None,
         flash_attention: bool = True, backend: str | None = None, peak_flops_per_s: float | None = None,
         max_batch: int = 64, loader_samples_per_s: float | None = None,
         price_per_node_hour: float | None = None, price_per_device_hour: float | None = None,
         global_batch_limit: int = GLOBAL_BATCH_LIMIT, memory_headroom: float = MEMORY_HEADROOM,
         links: Sequence[str] = (), bytes_per_param: int = 16, straggler_cv: float = 0.0,
         slow_node: float = 1.0) -> Plan:
    """The field's advice for training ``params`` on devices like the profiled one.

    The rules, in the order they apply, are in this module's docstring. Parameters are
    those of :func:`pybench.planning.grid.ccr`, and: ``max_world`` bounds the world sizes tried;
    ``target_samples_per_s`` is a named need; ``peak_flops_per_s`` (a datasheet figure) and
    ``loader_samples_per_s`` (one replica's data loader) say whether one device is well
    used; ``max_batch`` bounds the batch search; ``price_per_node_hour`` or
    ``price_per_device_hour`` price every row; ``global_batch_limit`` (sequences) sets the
    global-batch line; ``links`` are presets for link classes the model file lacks;
    ``bytes_per_param`` is 16 (bf16 gradients) or 18 (fp32 gradients, no distributed optimizer);
    ``straggler_cv`` and ``slow_node`` add the wait for the slowest rank to every row.

    Returns
    -------
    Plan
        Advice records (rule, verdict, figures), rendered by :mod:`pybench.planning.plan_result`.

    Raises
    ------
    UsageError
        For bad input, naming the parameter, and when no model prices a layout the advice
        needs (the message says which input to give).
    """
    P = parse_param_count(params)
    shape = shape or shape_for_params(P)
    node_price = _check_plan_inputs(int(batch), max_world, loader_samples_per_s, target_samples_per_s,
                                    price_per_node_hour, price_per_device_hour, global_batch_limit, gpus_per_node)
    profile = load_compute(compute) if isinstance(compute, str) else compute
    ev = _Evaluator(P, int(seq), int(batch), gpus_per_node, shape, as_model_set(models, backend, links), profile,
                    flops_per_s, overlap, bucket_mb, device_memory_gb, flash_attention, node_price, memory_headroom,
                    bytes_per_param, straggler_cv, slow_node)
    device_bytes = device_memory_gb * 1e9
    worlds = _worlds_up_to(gpus_per_node, max_world)
    one = memory_per_device(make_layout("ddp", 1, gpus_per_node), Workload(P, shape, int(seq), int(batch)),
                            device_bytes, flash_attention, memory_headroom, bytes_per_param)
    out = _Advising()
    if one.fits is MemoryFit.FITS:
        verdict = OneDevice.FITS
        out.records.append(MemoryAdvice(verdict, one, memory_headroom, bytes_per_param))
        _fits_one_device(ev, worlds, out)
    elif one.fits is MemoryFit.WITH_CHECKPOINTING:
        verdict = OneDevice.FITS_ONLY_JUST
        out.records.append(MemoryAdvice(verdict, one, memory_headroom, bytes_per_param))
        micro = (memory_per_device(make_layout("ddp", 1, gpus_per_node), Workload(P, shape, int(seq), 1),
                                   device_bytes, flash_attention, memory_headroom, bytes_per_param)
                 if int(batch) > 1 else None)
        _fits_only_just(ev, worlds, max_world, micro, one, out)
    else:
        verdict = OneDevice.DOES_NOT_FIT
        out.records.append(MemoryAdvice(verdict, one, memory_headroom, bytes_per_param))
        _does_not_fit(ev, worlds, max_world, out)
    use = _device_use(flops_per_s if flops_per_s is not None else getattr(profile, "flops_per_s", None),
                      peak_flops_per_s, loader_samples_per_s, out.evaluated)
    out.records += use
    need = _Need(target_samples_per_s, verdict is not OneDevice.FITS, not use, gpus_per_node, loader_samples_per_s)
    recommended, met = _recommend(out, need)
    if recommended is not None and recommended.decisive_band != Band.FITS:
        batch_advice = _batch_amortisation(ev, recommended, max_batch)
        recommended, batch_advice = _adopt_larger_batch(ev, out, need, recommended, batch_advice)
        out.records.append(batch_advice)
    said = _need_record(out, need, recommended, met)
    if said is not None:
        out.records.append(said)
    out.records += _cost_and_batch(out, need, recommended, node_price, int(seq), global_batch_limit)
    records = sorted(out.records, key=lambda a: RULE_ORDER.index(a.rule))
    return Plan(verdict, tuple(records), one, tuple(out.evaluated), recommended, tuple(ev.notes),
                target_samples_per_s, met, max_world, memory_headroom)
