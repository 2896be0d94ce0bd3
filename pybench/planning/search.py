"""The plan's search: every layout within stated bounds, timed wherever it fits in memory.

Dimensions, all of them weighed (issue 25):

- strategy: ddp, zero1, zero2, zero3, tp inside one node, pp alone, tp+dp with every
  tensor-parallel degree that divides the node, and tp x pp x dp with every such degree and
  every pipeline depth (powers of two up to the layers), on whole nodes or an equal share of one;
- world: powers of two up to the node, then whole nodes doubling, up to ``max_world``;
- micro-batch: powers of two from 1 to ``max_batch`` (and the user's batch), while the global
  batch stays within ``global_batch_limit`` (the user's own batch is always kept);
- activation checkpointing: where a layout needs it to fit. Where it fits without, checkpointing
  only adds a third to compute, so such a row can never be the better choice and is not timed.

Memory is checked first (arithmetic); only the layouts that fit are priced, and the fitted
models' answers are kept per (collective, size, ranks, link class), so the search costs a few
hundred step estimates, not thousands of model calls.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any

from pybench.errors import UsageError
from pybench.planning.config import CcrConfig
from pybench.planning.model_set import CommTime, ModelSet
from pybench.planning.step import StepEstimate, default_micro_batches, estimate_step
from pybench.planning.strategies import INTER, Workload, make_layout, memory_per_device

__all__ = ["SearchBounds", "CachedModels", "search_layouts", "world_sizes", "batch_sizes", "prices_inter_node"]


class CachedModels(ModelSet):
    """A ModelSet that asks its models once per (collective, size, ranks, link class).

    It shares the wrapped set's models and notes (notes it adds are the wrapped set's too).
    """

    def __init__(self, inner: ModelSet) -> None:
        self.__dict__.update(inner.__dict__)
        self._answers: dict[tuple[str, float, int, str], CommTime] = {}

    def time(self, collective: str, size_bytes: float, world: int, link_class: str) -> CommTime:
        key = (collective, float(size_bytes), int(world), link_class)
        if key not in self._answers:
            self._answers[key] = super().time(collective, size_bytes, world, link_class)
        return self._answers[key]


def prices_inter_node(models: ModelSet, gpus_per_node: int) -> bool:
    """Whether the models can price an all-reduce across two nodes (their notes are left as they were)."""
    saved = list(models.notes)
    try:
        models.time("allreduce", 2**20, 2 * gpus_per_node, INTER)
    except UsageError:
        return False
    finally:
        models.notes[:] = saved
    return True


def world_sizes(gpus_per_node: int, max_world: int) -> tuple[int, ...]:
    """Powers of two below one node, then whole nodes doubling, up to ``max_world``."""
    worlds, w = [], 1
    while w < gpus_per_node and w <= max_world:
        worlds.append(w)
        w *= 2
    w = gpus_per_node
    while w <= max_world:
        worlds.append(w)
        w *= 2
    return tuple(worlds)


def batch_sizes(batch: int, max_batch: int) -> tuple[int, ...]:
    """Powers of two from 1 to ``max_batch``, and the user's ``batch``."""
    out, b = {batch}, 1
    while b <= max_batch:
        out.add(b)
        b *= 2
    return tuple(sorted(out))


def _degrees(gpus_per_node: int) -> list[int]:
    return [t for t in range(1, gpus_per_node + 1) if gpus_per_node % t == 0]


def _candidates(g: int, layers: int, worlds: tuple[int, ...]) -> list[tuple[str, int, int | None, int | None]]:
    """(strategy, world, tp degree, pp degree) for every layout the strategies allow at these worlds."""
    out: list[tuple[str, int, int | None, int | None]] = []
    for w in worlds:
        out.append(("ddp", w, None, None))
        if w > 1:
            out += [("zero1", w, None, None), ("zero2", w, None, None), ("zero3", w, None, None)]
        if 1 < w < g:
            out.append(("tp", w, None, None))
        if 1 < w <= layers:
            out.append(("pp", w, None, None))
        if w % g == 0 or g % w == 0:  # whole nodes, or an equal share of one
            # tp alone (dp 1) inside a node is weighed above as "tp"
            out += [("tp+dp", w, t, None) for t in _degrees(g) if t > 1 and w % t == 0 and (w >= g or t < w)]
            p = 2
            while p <= layers and p <= w:
                # tp 1 with dp 1 is pp alone, weighed above
                out += [("tp+pp+dp", w, t, p) for t in _degrees(g)
                        if w % (t * p) == 0 and not (t == 1 and w == p)]
                p *= 2
    return out


@dataclass(frozen=True)
class SearchBounds:
    """What the search weighed: its bounds, and how many layouts it tried and found fitting."""

    max_world: int
    max_world_reason: str
    worlds: tuple[int, ...]
    batches: tuple[int, ...]
    global_batch_limit: int
    strategies: tuple[str, ...]
    layouts_tried: int = 0
    rows_fitting: int = 0

    def to_dict(self) -> dict[str, Any]:
        return {**self.__dict__, "worlds": list(self.worlds), "batches": list(self.batches),
                "strategies": list(self.strategies)}


def search_layouts(cfg: CcrConfig, models: ModelSet, bounds: SearchBounds,
                   user_batch: int) -> tuple[list[StepEstimate], SearchBounds]:
    """Every layout within ``bounds`` that fits in memory, priced; and the bounds with the counts.

    ``cfg`` supplies everything but the layout (its strategies, worlds, batches and degrees are
    ignored). Rows are sorted by world, strategy and batch.

    Raises
    ------
    UsageError
        When a layout that fits cannot be priced (no model for its collective and link class).
    """
    g, layers = cfg.gpus_per_node, cfg.shape.layers
    configs: dict[tuple[int | None, int | None], CcrConfig] = {}
    estimates: dict[tuple[str, int | None, int | None, int, int], StepEstimate] = {}

    def estimate(strategy: str, tp: int | None, pp: int | None, world: int, batch: int) -> StepEstimate:
        key = (strategy, tp, pp, world, batch)
        if key not in estimates:
            if (tp, pp) not in configs:
                configs[(tp, pp)] = replace(cfg, tp_degree=tp, pp_degree=pp)
            c = configs[(tp, pp)]
            estimates[key] = estimate_step(c, models, strategy, world, batch)
        return estimates[key]

    rows: list[StepEstimate] = []
    tried = 0
    for strategy, world, tp, pp in _candidates(g, layers, bounds.worlds):
        layout = make_layout(strategy, world, g, tp, layers, pp)
        m = default_micro_batches(cfg, layout)
        for b in bounds.batches:
            tried += 1
            if b != user_batch and b * m * layout.dp > bounds.global_batch_limit:
                continue
            work = Workload(cfg.params, cfg.shape, cfg.seq, b, m, cfg.grad_bytes_per_value)
            mem = memory_per_device(layout, work, cfg.device_memory_bytes, cfg.flash_attention,
                                    cfg.memory_headroom, cfg.bytes_per_param)
            if not mem.fits_at_all:
                if b >= user_batch:
                    break  # memory only grows with the batch
                continue
            row = estimate(strategy, tp, pp, world, b)
            rows.append(_with_node_efficiency(row, estimate, strategy, tp, pp, g))
    rows.sort(key=lambda r: (r.world, r.strategy, r.layout.tp, r.layout.pp, r.batch))
    return rows, replace(bounds, layouts_tried=tried, rows_fitting=len(rows))


def _with_node_efficiency(row: StepEstimate, estimate: Any, strategy: str, tp: int | None, pp: int | None,
                          g: int) -> StepEstimate:
    """Scaling efficiency against one node running the same layout (where one node can)."""
    w = row.world
    if w == g:
        return replace(row, efficiency_vs_node=1.0)
    if w > g and w % g == 0:
        try:
            node = estimate(strategy, tp, pp, g, row.batch)
        except UsageError:
            return row
        return replace(row, efficiency_vs_node=row.samples_per_s / (w / g * node.samples_per_s))
    return row
