"""The CCR grid: the step model over every strategy x micro-batch x world size, with
scaling efficiency against one node, breakeven against a reference machine, and notes.

- Cost: samples per dollar = samples/s x 3600 / (nodes x price per node-hour).
  Breakeven compares scale-out rows with one reference machine (one node of
  the cluster, or a bigger node with its own GPU count and price): the
  smallest world that is faster, and the largest that is as cheap per sample.
- Bands (of ccr, and of exposed_fraction with overlap): ``pybench.planning.bands``.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import replace

from pybench.errors import NoModelFor, NotDetermined, UsageError
from pybench.planning.compute import ComputeProfile, load_compute
from pybench.planning.config import CcrConfig, compute_warnings, make_ccr_config, node_gpus
from pybench.planning.model_set import CollectiveModel, ModelSet, as_model_set, preset_names
from pybench.planning.overlap import OverlapProfile
from pybench.planning.preset_check import system_caveats, unused_presets
from pybench.planning.result import Breakeven, CcrResult
from pybench.planning.step import StepEstimate, estimate_step, node_efficiency
from pybench.planning.strategies import MEMORY_HEADROOM, make_layout
from pybench.planning.transformer import TransformerShape, parse_param_count

__all__ = ["Breakeven", "CcrResult", "ccr", "layout_ok", "grid_notes", "BREAKEVEN_TOLERANCE", "check_degrees"]


def layout_ok(strategy: str, world: int, gpus_per_node: int, tp_degree: int | None, layers: int,
              pp_degree: int | None = None, heads: tuple[int, int] = (0, 0)) -> bool:
    """True when ``make_layout`` accepts the combination."""
    try:
        make_layout(strategy, world, gpus_per_node, tp_degree, layers, pp_degree, heads)
    except UsageError:
        return False
    return True


def _with_node_efficiency(cfg: CcrConfig, models: ModelSet, est: StepEstimate) -> StepEstimate:
    g, w = cfg.gpus_per_node, est.world
    if w == g:
        return replace(est, efficiency_vs_node=1.0)
    if w > g and w % g == 0:
        try:
            node = estimate_step(cfg, models, est.strategy, g, est.batch)
        except UsageError:
            return est
        return replace(est, efficiency_vs_node=node_efficiency(est.samples_per_s, w, g, node.samples_per_s))
    return est


def _rows(cfg: CcrConfig, models: ModelSet, skipped: list[str],
          undetermined: dict[str, set[str]]) -> list[StepEstimate]:
    """Every row these models price; the rest, by reason, in ``undetermined`` (none priced: the first reason)."""
    rows: list[StepEstimate] = []
    first: NotDetermined | NoModelFor | None = None
    g, layers, heads = cfg.gpus_per_node, cfg.shape.layers, (cfg.shape.heads, cfg.shape.kv_heads)
    for s in cfg.strategies:
        for b in cfg.batches:
            for w in cfg.worlds:
                try:
                    make_layout(s, w, g, cfg.tp_degree, layers, cfg.pp_degree, heads)
                except UsageError as exc:
                    # In a grid some combinations are impossible (tp across nodes); skip and say so,
                    # but a strategy with no possible combination at all is an error.
                    if len(cfg.worlds) == 1 or not any(layout_ok(s, w2, g, cfg.tp_degree, layers, cfg.pp_degree,
                                                                 heads) for w2 in cfg.worlds):
                        raise
                    if str(exc) not in skipped:
                        skipped.append(str(exc))
                    continue
                try:
                    rows.append(_with_node_efficiency(cfg, models, estimate_step(cfg, models, s, w, b)))
                except (NotDetermined, NoModelFor) as exc:  # not these inputs' to price: the others still are
                    first = first or exc
                    undetermined.setdefault(str(exc), set()).add(f"{s} on {w}")
    if first is not None and not rows:
        raise first
    return rows


def _world_of(layout: str) -> int:
    """The device count of a layout said as "strategy on W" (``Search.undetermined``)."""
    return int(layout.rsplit(" ", 1)[1])


def undetermined_worlds(undetermined: dict[str, set[str]]) -> set[int]:
    """The device counts of the layouts these inputs do not determine."""
    return {_world_of(x) for layouts in undetermined.values() for x in layouts}


def not_priced_notes(undetermined: dict[str, set[str]]) -> list[str]:
    """One note per reason (whatever group size it names) for the layouts whose communication these inputs
    do not determine: they were weighed and left out, never priced."""
    by_reason: dict[str, set[str]] = {}
    for why, layouts in undetermined.items():
        said = re.sub(r"\b\d+ (nodes|ranks)\b", r"N \1", re.sub(r"--np \d+", "--np N", why))  # one reason, any count
        by_reason.setdefault(said, set()).update(layouts)
    out = []
    for why, layouts in sorted(by_reason.items()):
        shown = sorted(layouts, key=lambda x: (_world_of(x), x))
        more = ", ..." if len(shown) > 6 else ""
        out.append(f"not priced, {len(shown)} layout(s) (strategy on devices: {', '.join(shown[:6])}{more}): {why}")
    return out


# Samples per dollar within this share of the reference's count as "as cheap": the models'
# own error is larger than that, and 682.5 against 682.8 is no difference anyone can act on.
BREAKEVEN_TOLERANCE = 0.01


def _breakevens(cfg: CcrConfig, models: ModelSet, rows: list[StepEstimate],
                warnings: list[str]) -> list[Breakeven]:
    node_price = cfg.cost_per_hour(cfg.gpus_per_node)
    if node_price is None:
        return []
    big = cfg.big_node_gpus is not None and cfg.big_node_price_per_hour is not None
    ref_g = cfg.big_node_gpus if big and cfg.big_node_gpus else cfg.gpus_per_node
    ref_price = cfg.big_node_price_per_hour if big and cfg.big_node_price_per_hour else node_price
    ref_name = f"one {ref_g}-GPU big node at {ref_price:g}/h" if big else f"one {cfg.gpus_per_node}-GPU node"
    out = []
    for s in cfg.strategies:
        for b in cfg.batches:
            try:
                ref = estimate_step(cfg, models, s, ref_g, b, gpus_per_node=ref_g)
            except UsageError as exc:
                warnings.append(f"breakeven {s} batch {b}: no reference node configuration ({exc})")
                continue
            if not ref.memory.fits_at_all:
                warnings.append(f"breakeven {s} batch {b}: {ref_name} {ref.memory.fits} in memory, so there is "
                                f"nothing to break even with")
                continue
            ref_sps = ref.samples_per_s
            ref_spd = ref_sps * 3600.0 / ref_price
            multi = sorted((r for r in rows if r.strategy == s and r.batch == b and r.world > cfg.gpus_per_node
                            and r.memory.fits_at_all), key=lambda r: r.world)
            faster = next((r.world for r in multi if r.samples_per_s > ref_sps), None)
            cheaper = [r.world for r in multi
                       if (r.samples_per_dollar or 0.0) >= ref_spd * (1.0 - BREAKEVEN_TOLERANCE)]
            out.append(Breakeven(s, b, ref_name, ref_sps, ref_spd, faster, max(cheaper) if cheaper else None,
                                 BREAKEVEN_TOLERANCE))
    return out


def grid_notes(cfg: CcrConfig, models: ModelSet, rows: list[StepEstimate], searched: bool = False) -> list[str]:
    """The notes under a table of ``rows``; ``searched``: the plan's rows, whose micro-batch counts were searched."""
    notes = list(models.notes)
    grads = "bf16 grads 2" if cfg.bytes_per_param == 16 else "fp32 grads 4"
    why = "" if cfg.bytes_per_param == 16 else ": fp32 gradients, no distributed optimizer"
    notes.append(f"memory: {cfg.bytes_per_param} B/param (bf16 weights 2 + {grads} + fp32 master 4 + Adam m 4 + v 4"
                 f"{why}), sharded by strategy; activations per Korthikanti et al. 2022"
                 + (" with flash attention" if cfg.flash_attention else "") + f"; GB = 1e9 B; fits = within "
                 f"{cfg.memory_headroom:.0%} of device memory (context, fragmentation and buffers are not in the "
                 f"estimate)")
    b = cfg.grad_bytes_per_value
    names = {2: "bf16", 4: "fp32"}
    w = cfg.param_bytes_per_value
    notes.append(f"comm: gradients exchanged at {b} B per value ({names.get(b, 'custom')}), ZeRO's parameter "
                 f"all-gathers at {w} B ({names.get(w, 'custom')}): comm_bytes_per_value sets both (by default "
                 f"the gradients' dtype and the bf16 weights); tensor- and pipeline-parallel activations at the "
                 f"compute precision (bf16, 2 B)")
    if any(r.recomputed and not cfg.recompute for r in rows):
        notes.append("layouts that fit only with activation checkpointing are timed with recomputation "
                     "(8 x P x tokens, not 6)")
    notes.append("eff_1dev: against one device with the same micro-batch and no communication "
                 "(whether or not the model fits on it)")
    if any(r.layout.pp > 1 for r in rows):
        notes.append(("pp: micro-batches per step searched, each row says its count" if searched
                      else "pp: 4 x stages micro-batches per step (set micro_batches)" if cfg.micro_batches is None
                      else f"pp: {cfg.micro_batches} micro-batches per step")
                     + "; bubble (p-1)/(m+p-1) counted in step time, not in CCR")
    if any(r.layout.tp > 1 for r in rows):
        notes.append("tp: compute uses the profile's FLOP/s at unsplit GEMM shapes; tensor-parallel GEMMs are "
                     "1/tp as wide and usually reach less (profile with hidden/ffn divided by tp to check)")
    if cfg.straggler_cv or cfg.slow_node < 1:
        notes.append(f"sync: the wait for the slowest rank, compute x ((1 + {cfg.straggler_cv:g} x E[max of N "
                     f"standard normals]) / {cfg.slow_node:g} - 1) with N = world and one node at {cfg.slow_node:g} "
                     f"speed when the step spans nodes; it counts as communication in CCR and the exposed fraction")
    notes.append("latency: calls (buckets) x the model's time of a 1-byte message; bandwidth: the rest of comm")
    return notes


# The strategies that read each degree; tp and pp take theirs from the world (tp=world, pp=world stages).
_DEGREE_USERS = {"tp_degree": ("tp+dp", "tp+pp+dp"), "pp_degree": ("tp+pp+dp",)}
_DEGREE_OWN = {"tp_degree": "tp alone takes its degree from the world size",
               "pp_degree": "pp alone runs one stage per rank: its depth is the world size"}


def check_degrees(cfg: CcrConfig) -> None:
    """UsageError when a tp or pp degree is given and no strategy of ``cfg`` reads it: it would be ignored."""
    for name, users in _DEGREE_USERS.items():
        value = getattr(cfg, name)
        if value is None or any(s in users for s in cfg.strategies):
            continue
        own = f" ({_DEGREE_OWN[name]})" if _DEGREE_OWN[name].split()[0] in cfg.strategies else ""
        raise UsageError(f"{name} {value} is used only by {' and '.join(users)}, and strategy "
                         f"{','.join(cfg.strategies)} does not read it{own}; add "
                         f"{' or '.join(users)} to the strategies, or leave {name} out")


def evaluate(cfg: CcrConfig, models: ModelSet, warnings: Sequence[str] = ()) -> CcrResult:
    """The CCR grid of ``cfg`` with these models (``warnings`` are carried into the result)."""
    check_degrees(cfg)
    models = models.for_wire_bytes(cfg.grad_bytes_per_value)
    skipped: list[str] = []
    undetermined: dict[str, set[str]] = {}
    rows = _rows(cfg, models, skipped, undetermined)
    found = list(warnings)
    breakevens = _breakevens(cfg, models, rows, found)
    found += [f"skipped: {why}" for why in skipped]
    notes = (*not_priced_notes(undetermined), *grid_notes(cfg, models, rows))
    unpriced = sorted((x.rsplit(" on ", 1)[0], _world_of(x), why) for why, layouts in undetermined.items()
                      for x in layouts)
    return CcrResult(cfg, tuple(rows), tuple(breakevens), notes, tuple(found), tuple(unpriced))


def ccr(params: CcrConfig | int | str, seq: int | None = None, batch: int | str | Sequence[int] = 1,
        world: int | str | Sequence[int] = 8, strategy: str | Sequence[str] = "ddp", *,
        models: ModelSet | Iterable[CollectiveModel] | str,
        compute: ComputeProfile | str | None = None, flops_per_s: float | None = None,
        gpus_per_node: int | None = None, shape: TransformerShape | None = None,
        micro_batches: int | None = None,
        tp_degree: int | None = None, pp_degree: int | None = None, overlap: bool = False, bucket_mb: float = 25,
        recompute: bool = False, comm_bytes_per_value: int | None = None, device_memory_gb: float = 80,
        flash_attention: bool = True, price_per_node_hour: float | None = None,
        big_node_gpus: int | None = None, big_node_price_per_hour: float | None = None,
        straggler_cv: float = 0.0, slow_node: float = 1.0, memory_headroom: float = MEMORY_HEADROOM,
        bytes_per_param: int = 16, backend: str | None = None, links: Sequence[str] = (), system: str | None = None,
        bucket_sizes_bytes: Sequence[float] | None = None,
        overlap_profile: OverlapProfile | None = None, price_per_device_hour: float | None = None) -> CcrResult:
    """CCR, step time, scaling efficiency, cost and memory for every combination.

    Call it as ``ccr(cfg, models=...)`` with a :class:`~pybench.planning.config.CcrConfig`
    (whose attributes document every input), or with plain arguments from which one is
    built: the same names, in the units a person types.

    Parameters
    ----------
    params : CcrConfig, int or str
        A typed config (then only ``models`` and ``backend`` are read), or the
        parameter count (``7B``), which sets the shape unless ``shape`` is given.
    seq : int
        Sequence length.
    batch, world : int, str or sequence of int
        Micro-batch sizes per data-parallel replica and world sizes (``1,2,4``).
    strategy : str or sequence of str
        ddp, zero1, zero2, zero3 (fsdp), tp, pp, tp+dp, tp+pp+dp.
    models : ModelSet, iterable of CollectiveModel, or str
        Fitted alpha-beta models or a model file path.
    compute, flops_per_s : ComputeProfile or path, float
        Measured GEMM timings that supply the FLOP/s, or a FLOP/s figure measured elsewhere.
    bucket_mb, bucket_sizes_bytes : float, sequence of float
        Gradient bucket size in MiB, or the buckets a framework really used, in
        reduction order (DDP's reducer reports them).
    device_memory_gb : float
        Device memory in GB (1e9 bytes; conservative against GiB-sized cards).
    backend : str, optional
        Use only models of this backend (default: nccl when the file mixes backends).
    links : sequence of str
        Link presets (``nvlink4``, ``eth-25g``, ...) for the link classes the model file's
        topology models do not hold.
    gpus_per_node : int, optional
        Devices per node (default: the GPUs of one host of ``system``, else 8; more than the host's are refused).
    **others
        micro_batches, tp_degree, pp_degree, overlap, recompute,
        comm_bytes_per_value, flash_attention, price_per_node_hour, big_node_gpus,
        big_node_price_per_hour, straggler_cv, slow_node, memory_headroom, bytes_per_param, overlap_profile,
        price_per_device_hour: As the CcrConfig attributes of the same names (comm_bytes_per_value: the
        bytes per value of the gradient exchange and of ZeRO's parameter all-gathers, by default the
        gradients' dtype under ``bytes_per_param`` and the bf16 weights; tp and pp activations stay bf16).

    Returns
    -------
    CcrResult

    Raises
    ------
    UsageError
        For bad input (unknown strategy, zero batch, invalid layouts, missing
        models), naming the parameter.
    """
    links = preset_names(links)
    model_set = as_model_set(models, backend, links, system)
    unused = unused_presets(model_set, links, isinstance(models, str)) + system_caveats(
        model_set, system, isinstance(models, str))
    if isinstance(params, CcrConfig):
        return evaluate(params, model_set, unused)
    if seq is None:
        raise UsageError("seq is required unless the first argument is a CcrConfig")
    profile = load_compute(compute) if isinstance(compute, str) else compute
    cfg = make_ccr_config(params, seq, batch, world, strategy, compute=profile, flops_per_s=flops_per_s,
                          shape=shape, bucket_mb=bucket_mb, device_memory_gb=device_memory_gb,
                          bucket_sizes_bytes=bucket_sizes_bytes, gpus_per_node=node_gpus(gpus_per_node, system),
                          micro_batches=micro_batches, tp_degree=tp_degree, pp_degree=pp_degree, overlap=overlap,
                          recompute=recompute, comm_bytes_per_value=comm_bytes_per_value,
                          param_comm_bytes_per_value=comm_bytes_per_value,
                          flash_attention=flash_attention, price_per_node_hour=price_per_node_hour,
                          big_node_gpus=big_node_gpus, big_node_price_per_hour=big_node_price_per_hour,
                          straggler_cv=straggler_cv, slow_node=slow_node, memory_headroom=memory_headroom,
                          bytes_per_param=bytes_per_param, price_per_device_hour=price_per_device_hour,
                          overlap_profile=overlap_profile)
    warnings = [] if flops_per_s is not None else compute_warnings(profile, cfg.shape, parse_param_count(params))
    return evaluate(cfg, model_set, unused + warnings)
