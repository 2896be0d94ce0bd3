"""The advisor: :func:`plan` searches every layout within stated bounds, applies the field's rules
and returns a :class:`~pybench.planning.plan_result.Plan`, advice records with the figures behind them.

The rules, in order (``RULE_ORDER``); each record quotes rows of one exhaustive search
(:mod:`pybench.planning.search`), and the choice follows :mod:`pybench.planning.choice`:

- Does it fit one device, within the one headroom (``MEMORY_HEADROOM``)?
- Is one device well used: GEMMs under 40% of a datasheet peak the user gives, or a data
  loader slower than the device, say fix that first (more nodes multiply the waste).
- Scale up inside one node, with scaling efficiency at 2, 4 and 8 workers in every plan.
- Fits only just (only with checkpointing): ZeRO-1/2 to shard optimizer state, gradient
  accumulation with a smaller micro-batch, or activation checkpointing.
- Does not fit: ZeRO-1/2 or ZeRO-3 where sharding alone makes it fit; tensor parallel inside
  the node, pipeline stages (the smallest that fit), data parallel on top.
- What the search weighed, and whether ``max_world`` bounded the answer.
- Multi-node only for a named need: a throughput target, or memory that does not fit one node.
  The layout chosen is the cheapest per sample that meets the need without being comm-bound;
  among equals, fewer nodes.
- Then what the recommendation costs, a global-batch line past the user's limit, and the
  batch at which larger batches would change its band.

The decisions live here and in :mod:`pybench.planning.choice`; the sentences live in
:mod:`pybench.planning.plan_result`.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from numbers import Real
from typing import Any

from pybench.errors import UsageError
from pybench.planning.bands import Band
from pybench.planning.choice import Choice, Need, choose, good, met_at_slow_comm
from pybench.planning.compute import ComputeProfile, load_compute
from pybench.planning.config import SLOWEST_NODE, CcrConfig, make_ccr_config, node_gpus
from pybench.planning.grid import grid_notes, not_priced_notes, undetermined_worlds
from pybench.planning.model_set import CollectiveModel, ModelSet, as_model_set, preset_names
from pybench.planning.plan_result import Plan
from pybench.planning.preset_check import system_caveats, unused_presets
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
    ScaleUpVerdict,
    ScalingAdvice,
    SearchAdvice,
    TensorParallelAdvice,
    UtilisationAdvice,
    Zero3Advice,
    ZeroAdvice,
)
from pybench.planning.search import (
    CachedModels,
    Search,
    SearchBounds,
    batch_sizes,
    prices_inter_node,
    quoted_scale_out,
    search_layouts,
    world_sizes,
)
from pybench.planning.slow_end import cheapest_met_at_slow_comm
from pybench.planning.step import StepEstimate
from pybench.planning.strategies import (
    MEMORY_HEADROOM,
    MemoryEstimate,
    MemoryFit,
    Workload,
    make_layout,
    memory_per_device,
)
from pybench.planning.transformer import (
    TransformerShape,
    check_derivable,
    parse_param_count,
    shape_for_params,
    training_flops,
)

__all__ = ["plan", "Plan", "PLAN_HEADROOM", "LOW_UTILISATION", "DEFAULT_MAX_WORLD"]

# The one headroom rule (pybench.planning.strategies.MEMORY_HEADROOM), under its older name.
PLAN_HEADROOM = MEMORY_HEADROOM
# Measured FLOP/s below this share of the datasheet peak is a utilisation problem, not a scaling one.
LOW_UTILISATION = 0.40
# Above this many sequences per optimizer step, the plan says what a growing global batch asks for.
GLOBAL_BATCH_LIMIT = 1024
# Scaling efficiency is shown at these worker counts before larger ones are considered.
SCALING_CHECK_WORLDS = (2, 4, 8)
# Without max_world the search goes to 8 nodes of 8, where the models can price more than one node.
DEFAULT_MAX_WORLD = 64
STRATEGIES_WEIGHED = ("ddp", "zero1", "zero2", "zero3", "tp", "pp", "tp+dp", "tp+pp+dp")


def _at(rows: Sequence[StepEstimate], batch: int, **match: Any) -> list[StepEstimate]:
    """Rows at micro-batch ``batch`` whose attributes (strategy, world) or layout degrees (tp, pp) match."""
    out = []
    for r in rows:
        if r.batch != batch:
            continue
        if any((getattr(r.layout, k) if k in ("tp", "pp") else getattr(r, k)) != v for k, v in match.items()):
            continue
        out.append(r)
    return out


def _faster_than_one_device(r: StepEstimate) -> bool:
    """Whether ``r`` trains more samples/s than one device: eff vs 1 device x devices over 1 (at eff 0.01,
    eight devices give 0.08 of one device's samples/s)."""
    return r.efficiency_vs_device * r.world > 1


def _fits_one_device(rows: list[StepEstimate], batch: int, g: int) -> list[Advice]:
    found: list[Advice] = []
    node = _at(rows, batch, strategy="ddp", world=g) if g > 1 else []  # (one device per node: no node to fill)
    gains = not node or _faster_than_one_device(node[0])
    if node:  # filling the node is advice only where it trains faster than one device
        found.append(ScaleUpAdvice(ScaleUpVerdict.FILL if gains else ScaleUpVerdict.NO_GAIN, g, node[0]))
    # the user's micro-batch at its default count: one row per world (rows are sorted by micro-batch count)
    # whole nodes only: a part of a node bills like the whole one in a scale-out decision
    multi = tuple({r.world: r for r in reversed(_at(rows, batch, strategy="ddp"))
                   if quoted_scale_out(r.world, g)}.values())[::-1]
    if multi and (gains or any(_faster_than_one_device(r) for r in multi)):  # no "then scale out" past no gain
        fine = [r for r in multi if good(r)]
        last = fine[-1].world if fine else None
        verdict = (ScaleOutVerdict.COMM_BOUND if last is None else ScaleOutVerdict.NOT_COMM_BOUND
                   if last == multi[-1].world else ScaleOutVerdict.COMM_BOUND_BEYOND)
        found.append(ScaleOutAdvice(verdict, multi, last))
    return found


def _zero_record(rows: list[StepEstimate], batch: int) -> list[Advice]:
    """ZeRO-1/2 at the smallest world where either fits (DDP beside them at that world)."""
    zs = [r for r in rows if r.batch == batch and r.strategy in ("zero1", "zero2")]
    if not zs:
        return []
    at = min(r.world for r in zs)
    # One row per strategy: the user's micro-batch at the fewest micro-batches per step (rows are sorted by it)
    by: dict[str, StepEstimate] = {}
    for r in rows:
        if r.batch == batch and r.world == at and r.strategy in ("ddp", "zero1", "zero2"):
            by.setdefault(r.strategy, r)
    return [ZeroAdvice("shard the optimizer state", at, tuple(by.values()))]


def _fits_only_just(rows: list[StepEstimate], ev: _Inputs, one: MemoryEstimate) -> list[Advice]:
    found = _zero_record(rows, ev.batch)
    if ev.batch > 1:
        micro = memory_per_device(make_layout("ddp", 1, ev.cfg.gpus_per_node), Workload(
            ev.cfg.params, ev.cfg.shape, ev.cfg.seq, 1), ev.cfg.device_memory_bytes, ev.cfg.flash_attention,
            ev.cfg.memory_headroom, ev.cfg.bytes_per_param)
        found.append(AccumulationAdvice("micro-batch 1 with accumulation", ev.batch, micro))
    found.append(CheckpointAdvice("checkpoint activations", one))
    return found


def _does_not_fit(rows: list[StepEstimate], ev: _Inputs, max_world: int) -> list[Advice]:
    g, b = ev.cfg.gpus_per_node, ev.batch
    found = _zero_record(rows, b)
    z3 = _at(rows, b, strategy="zero3") or [r for r in rows if r.strategy == "zero3"]
    if z3:
        found.append(Zero3Advice("shard everything", min(z3, key=lambda r: (r.world, -r.samples_per_s))))
    tp_node = _at(rows, b, strategy="tp+dp", world=g, tp=g)
    if tp_node:
        found.append(TensorParallelAdvice("fits", g, tp_node[0]))
        return found
    threed = [r for r in rows if r.strategy == "tp+pp+dp" and r.layout.tp == g]
    if threed:
        first = min(threed, key=lambda r: (r.layout.pp, r.world, r.batch != b, -r.samples_per_s))
        node = ev.estimate_at_node(b)
        found.append(PipelineAdvice("add pipeline stages", g, node, first))
    elif not rows:
        found.append(NoLayoutAdvice("nothing fits", max_world))
    return found


def _scaling(rows: list[StepEstimate], batch: int, max_world: int, undetermined: set[int]) -> ScalingAdvice:
    """Efficiency at 2, 4 and 8 workers: the fastest layout that fits at each, at the user's batch if one does."""
    shown, missing = [], []
    for w in (w for w in SCALING_CHECK_WORLDS if w <= max_world):
        at = _at(rows, batch, world=w) or [r for r in rows if r.world == w]
        if at:
            shown.append(max(at, key=lambda r: r.samples_per_s))
        else:
            missing.append(w)
    return ScalingAdvice("check before larger counts", tuple(shown), tuple(missing),
                         tuple(w for w in missing if w in undetermined))


def _batch_advice(rows: list[StepEstimate], choice: Choice, need: Need, max_batch: int) -> BatchAdvice | None:
    """A micro-batch other than the user's was chosen (say so beside the user's), or where a larger one
    would change the band of the recommendation."""
    r = choice.row
    if r is None:
        return None
    same = [x for x in rows if x.strategy == r.strategy and x.world == r.world and x.layout == r.layout]
    # The user's row: their micro-batch at the default count (1, or 4 x stages with a pipeline: one
    # micro-batch per step would leave a pipeline idle (p - 1) / p of it), else at the fewest.
    default_m = 4 * r.layout.pp if r.layout.pp > 1 else 1
    mine = min((x for x in same if x.batch == need.batch),
               key=lambda x: (x.micro_batches != default_m, x.micro_batches), default=None)
    if mine is not None and mine != r:
        return BatchAdvice(BatchVerdict.ADOPTED, mine, need.batch, r.batch, max_batch, r)
    if r.batch != need.batch:
        return None
    if r.decisive_band == Band.FITS:
        return None
    larger = sorted((x for x in same if x.batch > r.batch), key=lambda x: x.batch)
    for x in larger:
        if x.decisive_band != r.decisive_band:
            return BatchAdvice(BatchVerdict.CHANGES_BAND, r, r.batch, x.batch, max_batch, x)
    if larger and larger[-1].batch * 2 <= max_batch:
        return BatchAdvice(BatchVerdict.STOPS_FITTING, r, r.batch, larger[-1].batch * 2, max_batch)
    return BatchAdvice(BatchVerdict.UNCHANGED, r, r.batch, max_batch, max_batch)


def _device_use(measured: float | None, peak: float | None, loader: float | None,
                replica_samples_per_s: float) -> list[Advice]:
    """Is one device well used? Its GEMMs against the datasheet peak, its data loader against its compute."""
    found: list[Advice] = []
    if peak and measured and measured / peak < LOW_UTILISATION:
        found.append(UtilisationAdvice("low", measured, peak))
    if loader is not None and loader < replica_samples_per_s:
        found.append(InputPipelineAdvice("loader-bound", loader, replica_samples_per_s))
    return found


def _number(name: str, value: Any, *, whole: bool = False, minimum: float = 0.0, strict: bool = True,
            maximum: float | None = None) -> None:
    """UsageError unless ``value`` is a finite real number in range (a string or inf is not)."""
    if isinstance(value, bool) or not isinstance(value, Real):
        raise UsageError(f"{name} must be {'a whole number' if whole else 'a number'}, got {value!r}")
    x = float(value)
    if not math.isfinite(x):
        raise UsageError(f"{name} must be finite, got {value!r}")
    if whole and x != int(x):
        raise UsageError(f"{name} must be a whole number, got {value!r}")
    if (strict and not x > minimum) or (not strict and not x >= minimum):
        what = "positive" if minimum == 0 and strict else f"at least {minimum:g}"
        raise UsageError(f"{name} must be {what}, got {value!r}")
    if maximum is not None and x > maximum:
        raise UsageError(f"{name} must be at most {maximum:g}, got {value!r}")


def _check_plan_inputs(values: dict[str, Any]) -> None:
    """One-line UsageError naming the bad parameter (numbers only; the config checks the rest)."""
    for name in ("batch", "max_batch", "global_batch_limit", "gpus_per_node", "seq"):
        _number(name, values[name], whole=True, minimum=1, strict=False)
    for name in ("max_world", "global_batch"):
        if values[name] is not None:
            _number(name, values[name], whole=True, minimum=1, strict=False)
    if values["global_batch"] is not None and values["global_batch"] < values["batch"]:
        raise UsageError(f"global_batch={values['global_batch']} is smaller than batch={values['batch']}, one "
                         f"replica's micro-batch: no split of the global batch gives it; give global_batch="
                         f"{values['batch']} or more, or a smaller batch")
    if values["max_world"] is not None and values["max_world"] < 2:
        raise UsageError(f"max_world must be at least 2, got {values['max_world']!r}: the plan weighs one device "
                         f"against more (give 2 or more; memory on one device is the plan's first check either way)")
    for name in ("device_memory_gb", "bucket_mb", "target_samples_per_s", "loader_samples_per_s",
                 "price_per_node_hour", "price_per_device_hour", "peak_flops_per_s", "flops_per_s"):
        if values[name] is not None:
            _number(name, values[name])
    _number("memory_headroom", values["memory_headroom"], maximum=1.0)
    _number("straggler_cv", values["straggler_cv"], strict=False)
    _number("slow_node", values["slow_node"], minimum=SLOWEST_NODE, strict=False, maximum=1.0)
    if values["price_per_node_hour"] is not None and values["price_per_device_hour"] is not None:
        raise UsageError("give price_per_node_hour or price_per_device_hour, not both")


@dataclass
class _Inputs:
    """The plan's typed inputs: the step config every row shares, the models, the user's batch."""

    cfg: CcrConfig
    models: ModelSet
    batch: int

    def estimate_at_node(self, batch: int) -> StepEstimate | None:
        """tp+dp on one node at ``batch`` (whether or not it fits), for the pipeline record."""
        from dataclasses import replace

        from pybench.planning.step import estimate_step
        g = self.cfg.gpus_per_node
        try:
            return estimate_step(replace(self.cfg, tp_degree=g), self.models, "tp+dp", g, batch)
        except UsageError:
            return None


def _search(ev: _Inputs, max_world: int | None, max_batch: int, limit: int, global_batch: int | None,
            loader: float | None, target: float | None, well_used: bool) -> Search:
    g = ev.cfg.gpus_per_node
    if max_world is None:
        inter = prices_inter_node(ev.models, g)
        reason = ("default" if inter else "one node: the models price no inter-node link; fit a multi-node log "
                  "or give links=NAME (e.g. ib-ndr, eth-100g) to weigh more nodes")
        max_world = DEFAULT_MAX_WORLD if inter else g
    else:
        reason = "max_world"
    bounds = SearchBounds(max_world, reason, world_sizes(g, max_world), batch_sizes(ev.batch, max_batch), limit,
                          STRATEGIES_WEIGHED, gpus_per_node=g, global_batch=global_batch)
    try:
        # Multi-node only for a named need (choice): a target on a well-used device, or memory.
        return search_layouts(ev.cfg, ev.models, bounds, ev.batch, loader, target if well_used else None,
                              multi_node_needs_target=True, quoted_worlds=SCALING_CHECK_WORLDS)
    except UsageError as exc:
        if "model for" not in str(exc):
            raise
        # Saying nothing fits, or recommending around a layout nobody priced, would be false.
        raise UsageError(f"cannot price every layout within {max_world} devices: {exc}; or give a link preset for "
                         f"that link class (links=NAME, e.g. nvlink4, ib-ndr, eth-100g), or a max_world the models "
                         f"cover") from None


def plan(params: int | str, seq: int, batch: int = 1, *, models: ModelSet | Iterable[CollectiveModel] | str,
         compute: ComputeProfile | str | None = None, flops_per_s: float | None = None,
         gpus_per_node: int | None = None,
         shape: TransformerShape | None = None, max_world: int | None = None, device_memory_gb: float = 80,
         overlap: bool = True, bucket_mb: float = 25, target_samples_per_s: float | None = None,
         flash_attention: bool = True, backend: str | None = None, peak_flops_per_s: float | None = None,
         max_batch: int = 64, loader_samples_per_s: float | None = None,
         price_per_node_hour: float | None = None, price_per_device_hour: float | None = None,
         global_batch_limit: int = GLOBAL_BATCH_LIMIT, memory_headroom: float = MEMORY_HEADROOM,
         links: Sequence[str] = (), system: str | None = None, bytes_per_param: int = 16,
         straggler_cv: float = 0.0,
         slow_node: float = 1.0, comm_bytes_per_value: int | None = None, global_batch: int | None = None) -> Plan:
    """The field's advice for training ``params`` on devices like the profiled one.

    The rules, in the order they apply, are in this module's docstring. Parameters are
    those of :func:`pybench.planning.grid.ccr`, and: ``max_world`` bounds the world sizes searched
    (default 64, or one node when the models price no inter-node link); ``target_samples_per_s``
    is a named need; ``peak_flops_per_s`` (a datasheet figure) and ``loader_samples_per_s`` (one
    replica's data loader) say whether one device is well used; ``max_batch`` bounds the
    micro-batches searched; ``price_per_node_hour`` or ``price_per_device_hour`` price every row
    (whole nodes, or the devices a layout uses); ``global_batch_limit`` (sequences) bounds the
    micro-batches searched and sets the global-batch line; ``links`` are presets for link classes
    the model file lacks; ``bytes_per_param`` is 16 (bf16 gradients) or 18 (fp32 gradients, no
    distributed optimizer); ``comm_bytes_per_value`` prices the gradient exchange and ZeRO's parameter
    all-gathers (default: the gradients' dtype under ``bytes_per_param``, and the bf16 weights;
    tensor- and pipeline-parallel activations stay bf16); ``straggler_cv`` and ``slow_node`` add the wait
    for the slowest rank to every row; ``global_batch`` (sequences per optimizer step) is held: every row
    trains exactly that batch (micro-batch x micro-batches x data-parallel replicas), as Megatron's
    ``--global-batch-size`` does; without it the global batch is free within ``global_batch_limit``.

    Returns
    -------
    Plan
        Advice records (rule, verdict, figures), rendered by :mod:`pybench.planning.plan_result`.

    Raises
    ------
    UsageError
        For bad input, naming the parameter (a string or an infinite number is bad input too),
        and when no model prices a layout the advice needs (the message says which input to give).
    """
    gpus_per_node = node_gpus(gpus_per_node, system)  # the described host's GPUs by default, as ccr
    _check_plan_inputs(dict(batch=batch, max_batch=max_batch, global_batch_limit=global_batch_limit,
                            gpus_per_node=gpus_per_node, seq=seq, max_world=max_world, global_batch=global_batch,
                            device_memory_gb=device_memory_gb, bucket_mb=bucket_mb,
                            target_samples_per_s=target_samples_per_s, loader_samples_per_s=loader_samples_per_s,
                            price_per_node_hour=price_per_node_hour, price_per_device_hour=price_per_device_hour,
                            peak_flops_per_s=peak_flops_per_s, flops_per_s=flops_per_s,
                            memory_headroom=memory_headroom, straggler_cv=straggler_cv, slow_node=slow_node))
    P = parse_param_count(params)
    if shape is None:
        check_derivable(P)
        shape = shape_for_params(P)
    batch, seq = int(batch), int(seq)
    global_batch = None if global_batch is None else int(global_batch)
    profile = load_compute(compute) if isinstance(compute, str) else compute
    links = preset_names(links)
    given = as_model_set(models, backend, links, system)
    warnings = unused_presets(given, links, isinstance(models, str)) + system_caveats(
        given, system, isinstance(models, str))
    cfg = make_ccr_config(P, seq, batch, 1, "ddp", compute=profile, flops_per_s=flops_per_s, shape=shape,
                          gpus_per_node=gpus_per_node, bucket_mb=bucket_mb, device_memory_gb=device_memory_gb,
                          overlap=overlap, flash_attention=flash_attention, price_per_node_hour=price_per_node_hour,
                          price_per_device_hour=price_per_device_hour, memory_headroom=memory_headroom,
                          bytes_per_param=bytes_per_param, straggler_cv=straggler_cv, slow_node=slow_node,
                          comm_bytes_per_value=comm_bytes_per_value, param_comm_bytes_per_value=comm_bytes_per_value)
    ev = _Inputs(cfg, CachedModels(given.for_wire_bytes(cfg.grad_bytes_per_value)), batch)
    replica = batch / (training_flops(P, batch * seq, False) / cfg.flops_per_s)
    use = _device_use(cfg.flops_per_s, peak_flops_per_s, loader_samples_per_s, replica)
    search = _search(ev, max_world, max_batch, global_batch_limit, global_batch, loader_samples_per_s,
                     target_samples_per_s, not use)
    rows = search.rows
    one = memory_per_device(make_layout("ddp", 1, gpus_per_node), Workload(P, shape, seq, batch),
                            cfg.device_memory_bytes, flash_attention, memory_headroom, bytes_per_param)
    verdict = {MemoryFit.FITS: OneDevice.FITS, MemoryFit.WITH_CHECKPOINTING: OneDevice.FITS_ONLY_JUST}.get(
        one.fits, OneDevice.DOES_NOT_FIT)
    records: list[Advice] = [MemoryAdvice(verdict, one, memory_headroom, bytes_per_param)]
    if verdict is OneDevice.FITS:
        records += _fits_one_device(rows, batch, gpus_per_node)
    elif verdict is OneDevice.FITS_ONLY_JUST:
        records += _fits_only_just(rows, ev, one)
    else:
        records += _does_not_fit(rows, ev, search.bounds.max_world)
    records.append(_scaling(rows, batch, search.bounds.max_world, undetermined_worlds(search.undetermined)))
    records += use
    need = Need(target_samples_per_s, verdict is not OneDevice.FITS, not use, gpus_per_node, batch,
                loader_samples_per_s)
    choice = choose(rows, need)
    if choice.row is not None:
        # Every split of the pick, for the batch advice (those left out could not be chosen).
        search.complete(choice.row.layout)
        rows = search.rows
    # only a target met by a layout its bands allow is weighed against its communication's slow end
    # a target met: whether also with the communication at the slow end of its interval (None: no target met)
    sure = None if need.target is None or not choice.met or choice.row is None else met_at_slow_comm(choice.row, need)
    determined = cheapest_met_at_slow_comm(search, need) if (sure is False and choice.verdict ==
                                                              NeedVerdict.TARGET_MET) else None
    rows = search.rows
    bounds = search.bounds
    bounded = (not choice.met and not use) or bounds.max_world_reason.startswith("one node")
    records.append(SearchAdvice("searched", bounds, bounded))
    batch_record = _batch_advice(rows, choice, need, max_batch)
    if batch_record is not None:
        records.append(batch_record)
    records.append(NeedAdvice(choice.verdict, choice.row, choice.node, target_samples_per_s, choice.best_allowed,
                              loader_samples_per_s, choice.met, sure, determined))
    r = choice.row
    if r is not None and cfg.priced:
        records.append(CostAdvice("priced", cfg.cost_per_hour(gpus_per_node) or 0.0, r, choice.node,
                                  price_per_device_hour))
    if r is not None and r.global_batch > global_batch_limit:
        records.append(GlobalBatchAdvice("above the limit", r, seq, global_batch_limit))
    records.sort(key=lambda a: RULE_ORDER.index(a.rule))
    notes = (*warnings, *not_priced_notes(search.undetermined),
             *(n for n in grid_notes(cfg, ev.models, rows, searched=True) if n not in warnings))
    return Plan(verdict, tuple(records), one, tuple(rows), r, notes, target_samples_per_s, choice.met,
                bounds.max_world, memory_headroom, tuple(warnings), bounds, cfg.comm_dtypes())
