"""The plan's search: every layout within stated bounds, timed wherever it fits in memory.

Dimensions, all of them weighed (issue 25):

- strategy: ddp, zero1, zero2, zero3, tp inside one node, pp alone, tp+dp with every
  tensor-parallel degree that divides the node, and tp x pp x dp with every such degree and
  every pipeline depth (powers of two up to the layers). tp+dp and tp x pp x dp run on every
  searched world their tp x pp divides, part of a node included (tp2 x dp3 on 6 of 8 devices); a tp
  group never straddles two nodes because its degree divides the node.
- world: every device count of one node, then whole nodes, every count up to
  ``EVERY_NODE_COUNT_UP_TO`` nodes and doubling beyond, up to ``max_world``.
- micro-batch and gradient accumulation: micro-batch b (powers of two up to ``max_batch``) x m
  micro-batches per step, the global batch within ``global_batch_limit``. Only the splits that
  can win are priced; the others are no faster, no cheaper and no less comm-bound, because:
  - at a fixed b (and fixed memory) the step time is affine in m (compute, the wait and the
    per-micro-batch calls grow with m, the once-per-step exchange does not), so samples/s, cost
    per sample and the comm fraction are monotone in m: the best is at an end of m's range;
  - without a pipeline, at a fixed per-replica batch S a smaller b computes the same FLOPs and
    communicates no less (the same exchange under a shorter last backward, more calls), and at a
    fixed m a larger b amortises the same calls over more work;
  so without a pipeline the largest b that fits without checkpointing and the largest that fits
  at all are priced, each at m = 1 and at the most micro-batches within the limit. With a
  pipeline every b is priced (a smaller b shrinks the bubble but adds calls), at the fewest and
  the most micro-batches that fit without checkpointing, and the same of those that fit only with
  it (memory grows with the micro-batches in flight, up to the stages). The user's own
  micro-batch, with the default count (1, or 4 x stages with a pipeline), is always priced too.
  tests/planning/test_plan_search.py prices every split of several layouts to check this.
- activation checkpointing: where a layout needs it to fit. Where it fits without, checkpointing
  only adds a third to compute, so such a row can never be the better choice and is not timed.

Memory is checked first (arithmetic); only the layouts that fit are priced, and the fitted
models' answers are kept per (collective, size, ranks, link class).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass, replace
from typing import Any

from pybench.errors import UsageError
from pybench.planning.config import CcrConfig
from pybench.planning.model_set import CommTime, ModelSet
from pybench.planning.step import StepEstimate, default_micro_batches, estimate_step
from pybench.planning.strategies import (
    INTER,
    Layout,
    MemoryEstimate,
    MemoryFit,
    Workload,
    make_layout,
    memory_per_device,
)

__all__ = ["SearchBounds", "CachedModels", "search_layouts", "world_sizes", "batch_sizes", "prices_inter_node",
           "EVERY_NODE_COUNT_UP_TO"]

# Whole-node counts are all searched up to here (the default max_world is 8 nodes of 8), then doubled:
# beyond it, one node more or less is within the models' own error of the step time.
EVERY_NODE_COUNT_UP_TO = 8


class CachedModels(ModelSet):
    """A ModelSet that asks its models once per (collective, size, ranks, link class), and keeps the step
    model's time of each exchange of a layout (the search prices one layout at many micro-batches).

    It shares the wrapped set's models and notes (notes it adds are the wrapped set's too).
    """

    def __init__(self, inner: ModelSet) -> None:
        self.__dict__.update(inner.__dict__)
        self._answers: dict[tuple[str, float, int, str], CommTime] = {}
        # The step model's answers per layout and exchange (pybench.planning.step), kept for this search.
        self.step_cache: dict[tuple[Any, ...], Any] = {}

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
    """Every device count of one node, every whole-node count up to ``EVERY_NODE_COUNT_UP_TO``,
    then whole nodes doubling, up to ``max_world``."""
    g = gpus_per_node
    worlds = list(range(1, min(g, max_world) + 1))
    nodes = 2
    while nodes * g <= max_world:
        worlds.append(nodes * g)
        nodes = nodes + 1 if nodes < EVERY_NODE_COUNT_UP_TO else nodes * 2
    return tuple(worlds)


def batch_sizes(batch: int, max_batch: int) -> tuple[int, ...]:
    """Micro-batches: powers of two from 1 to ``max_batch``, and the user's ``batch``."""
    out, b = {batch}, 1
    while b <= max_batch:
        out.add(b)
        b *= 2
    return tuple(sorted(out))


def _degrees(gpus_per_node: int) -> list[int]:
    return [t for t in range(1, gpus_per_node + 1) if gpus_per_node % t == 0]


def _candidates(g: int, layers: int, worlds: tuple[int, ...]) -> Iterator[tuple[str, int, int | None, int | None]]:
    """(strategy, world, tp degree, pp degree) for every layout the strategies allow at these worlds."""
    degrees = _degrees(g)
    for w in worlds:
        yield ("ddp", w, None, None)
        if w > 1:
            yield from (("zero1", w, None, None), ("zero2", w, None, None), ("zero3", w, None, None))
        if 1 < w < g and w in degrees:
            yield ("tp", w, None, None)
        if 1 < w <= layers:
            yield ("pp", w, None, None)
        # tp alone (dp 1) inside a node is weighed above as "tp"
        yield from (("tp+dp", w, t, None) for t in degrees if t > 1 and w % t == 0 and (w >= g or t < w))
        p = 2
        while p <= layers and p <= w:
            # tp 1 with dp 1 is pp alone, weighed above
            yield from (("tp+pp+dp", w, t, p) for t in degrees if w % (t * p) == 0 and not (t == 1 and w == p))
            p *= 2


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
    gpus_per_node: int = 8
    every_node_count_up_to: int = EVERY_NODE_COUNT_UP_TO
    accumulation: str = ("micro-batch b x m micro-batches per step, global batch within global_batch_limit; "
                         "without a pipeline the largest b that fits without checkpointing and the largest that "
                         "fits at all, each at m = 1 and the most m (the rest are no better); with a pipeline "
                         "every b at the fewest and most m that fit with and without checkpointing; and the "
                         "user's micro-batch at the default count")

    def to_dict(self) -> dict[str, Any]:
        return {**self.__dict__, "worlds": list(self.worlds), "batches": list(self.batches),
                "strategies": list(self.strategies)}


def _splits(layout: Layout, user_batch: int, user_m: int, bounds: SearchBounds,
            memory: Callable[[int, int], MemoryEstimate]) -> Iterator[tuple[int, int]]:
    """(micro-batch, micro-batches) pairs worth pricing for ``layout`` (see the module docstring)."""
    pairs: list[tuple[int, int]] = []
    if memory(user_batch, user_m).fits_at_all:
        pairs.append((user_batch, user_m))
    most = bounds.global_batch_limit // layout.dp  # sequences per replica per step
    if most >= 1:
        S = 1 << (most.bit_length() - 1)  # the largest power of two within the limit
        micro = [b for b in bounds.batches if b & (b - 1) == 0 and b <= S]  # powers of two divide S
        if layout.pp == 1:
            # Memory does not depend on m here: the largest micro-batch that fits, without checkpointing
            # and at all, each at both ends of its range of micro-batch counts.
            plain = max((b for b in micro if memory(b, 1).fits is MemoryFit.FITS), default=0)
            any_fit = max((b for b in micro if memory(b, 1).fits_at_all), default=0)
            pairs += [(b, m) for b in sorted({plain, any_fit} - {0}) for m in (1, S // b)]
        else:
            # Memory grows with the micro-batches in flight (up to p): the ends of the counts that fit
            # without checkpointing and of those that fit only with it.
            for b in micro:
                counts = [1 << k for k in range((S // b).bit_length())]
                plain_m = [m for m in counts if memory(b, m).fits is MemoryFit.FITS]
                ckpt_m = [m for m in counts if memory(b, m).fits is MemoryFit.WITH_CHECKPOINTING]
                if not plain_m and not ckpt_m:
                    break  # a larger micro-batch needs more memory still
                pairs += [(b, m) for group in (plain_m, ckpt_m) if group for m in (group[0], group[-1])]
    yield from dict.fromkeys(pairs)


def search_layouts(cfg: CcrConfig, models: ModelSet, bounds: SearchBounds,
                   user_batch: int) -> tuple[list[StepEstimate], SearchBounds]:
    """Every layout within ``bounds`` that fits in memory, priced; and the bounds with the counts.

    ``cfg`` supplies everything but the layout (its strategies, worlds, batches, degrees and
    micro-batch count are ignored). Rows are sorted by world, strategy, degrees, micro-batch and
    micro-batch count.

    Raises
    ------
    UsageError
        When a layout that fits cannot be priced (no model for its collective and link class).
    """
    g, layers = cfg.gpus_per_node, cfg.shape.layers
    configs: dict[tuple[int | None, int | None], CcrConfig] = {}
    estimates: dict[tuple[str, int | None, int | None, int, int, int], StepEstimate] = {}

    def estimate(strategy: str, tp: int | None, pp: int | None, world: int, batch: int, m: int) -> StepEstimate:
        key = (strategy, tp, pp, world, batch, m)
        if key not in estimates:
            if (tp, pp) not in configs:
                configs[(tp, pp)] = replace(cfg, tp_degree=tp, pp_degree=pp, micro_batches=None)
            estimates[key] = estimate_step(configs[(tp, pp)], models, strategy, world, batch, micro_batches=m)
        return estimates[key]

    rows: list[StepEstimate] = []
    tried = 0
    base = replace(cfg, micro_batches=None)
    for strategy, world, tp, pp in _candidates(g, layers, bounds.worlds):
        layout = make_layout(strategy, world, g, tp, layers, pp)
        user_m = default_micro_batches(base, layout)
        sized: dict[tuple[int, int], MemoryEstimate] = {}
        asked: set[tuple[int, int]] = set()

        def memory(b: int, m: int, layout: Layout = layout, sized: dict = sized, asked: set = asked) -> MemoryEstimate:
            asked.add((b, m))
            # Memory depends on m only through the pipeline's micro-batches in flight.
            key = (b, min(m, layout.pp))
            if key not in sized:
                work = Workload(cfg.params, cfg.shape, cfg.seq, b, key[1], cfg.grad_bytes_per_value)
                sized[key] = memory_per_device(layout, work, cfg.device_memory_bytes, cfg.flash_attention,
                                               cfg.memory_headroom, cfg.bytes_per_param)
            return sized[key]

        for b, m in _splits(layout, user_batch, user_m, bounds, memory):
            row = estimate(strategy, tp, pp, world, b, m)
            rows.append(_with_node_efficiency(row, estimate, strategy, tp, pp, g))
        tried += len(asked)
    rows.sort(key=lambda r: (r.world, r.strategy, r.layout.tp, r.layout.pp, r.batch, r.micro_batches))
    return rows, replace(bounds, layouts_tried=tried, rows_fitting=len(rows))


def _with_node_efficiency(row: StepEstimate, estimate: Any, strategy: str, tp: int | None, pp: int | None,
                          g: int) -> StepEstimate:
    """Scaling efficiency against one node running the same layout and micro-batches (where one node can)."""
    w = row.world
    if w == g:
        return replace(row, efficiency_vs_node=1.0)
    if w > g and w % g == 0:
        try:
            node = estimate(strategy, tp, pp, g, row.batch, row.micro_batches)
        except UsageError:
            return row
        return replace(row, efficiency_vs_node=row.samples_per_s / (w / g * node.samples_per_s))
    return row
