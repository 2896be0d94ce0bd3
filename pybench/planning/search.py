"""The plan's search: every layout within stated bounds, timed wherever it fits in memory and could win.

Dimensions, all of them weighed (issue 25):

- strategy: ddp, zero1, zero2, zero3, tp inside one node, pp alone, tp+dp and tp x pp x dp.
- tensor-parallel degrees: every degree up to the node's GPUs that divides the attention heads and the
  key/value heads (Megatron's rule: each rank holds whole heads). A degree that divides the node keeps
  its groups inside one node; one that does not (tp 5 of 40 heads on nodes of 8) runs, once the world
  spans nodes, as many ranks per node as whole groups fit (5 of 8), the other GPUs idle
  (``pybench.planning.strategies.make_layout``): what a Megatron or NeMo user launches.
- pipeline depths: for every size of the largest stage, the fewest stages that give it (the step's pace
  is the largest stage's; a deeper pipeline with it is no faster). Depths need not be powers of two.
- world: every device count up to ``EVERY_DEVICE_COUNT_UP_TO_NODES`` nodes (part of a node included: 12 devices
  on nodes of 8), then every whole-node count up to ``EVERY_NODE_COUNT_UP_TO`` nodes, then doubling to ``max_world``.
- micro-batch and gradient accumulation: micro-batch b (powers of two up to ``max_batch``, and the
  user's) x m micro-batches per step. With a named global batch G every split has b x m x dp = G
  (a layout whose dp does not divide G cannot train it and is not weighed); without one, the global
  batch is free within ``global_batch_limit``. Only the splits that can win are priced; the others are
  no faster, no cheaper and no less comm-bound, because:
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
  it (memory grows with the micro-batches in flight, up to the stages). The user's own micro-batch, with the
  default count (1, or 4 x stages with a pipeline, within the limit), is always priced too (test_plan_search.py).
- activation checkpointing: where a layout needs it to fit. Where it fits without, checkpointing only adds a
  third to compute, so such a row can never be the better choice and is not timed.

Memory is checked first (arithmetic). Every combination inside one node is priced, and so is what the
advice quotes whatever the choice (every layout at 2, 4 and 8 devices, ddp's user micro-batch inside one
node and at the node counts the scale-out line quotes, the first ZeRO and tp x pp x dp layouts that fit).
A combination across nodes is priced only if the rules (``choice``) could choose it:

- without a throughput target (or while one device is not well used) the choice stays inside one node
  whenever something fits there, so nothing else across nodes is priced;
- otherwise its best case bounds it: its step takes at least its compute, bubble and wait for the
  slowest rank plus the communication that never overlaps (tp and pp activations, ZeRO's parameter
  all-gathers, each call priced alone), which bounds its samples/s from above and its cost per sample
  from below. It is left out when a priced layout, not comm-bound and on no more nodes, is faster than
  that bound and cheaper beyond the choice's tolerance; or, once a layout not comm-bound meets the
  target, when it cannot meet the target, when its cost bound exceeds that layout's beyond the tolerance,
  or is no lower and it needs more nodes or devices (among equals the choice takes fewer), or it needs
  more nodes or devices and that layout costs within the tolerance of the least bound of any combination
  (it is then among the equals whatever else is priced). The never-overlapped communication is added to
  a bound only where the rest does not settle it (tests/planning/test_plan_search.py: the same choice).
The fitted models' answers are kept per (collective, size, ranks, link class).
"""

from __future__ import annotations

import heapq
import math
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field, replace
from typing import Any

from pybench.errors import NotDetermined, UsageError
from pybench.planning.config import CcrConfig
from pybench.planning.model_set import CommTime, ModelSet
from pybench.planning.pruning import Candidate, Frontier, Pace
from pybench.planning.step import StepEstimate, default_micro_batches, estimate_step, node_efficiency
from pybench.planning.strategies import (
    INTER,
    Layout,
    MemoryFit,
    Workload,
    make_layout,
    memory_per_device,
)

__all__ = ["SearchBounds", "CachedModels", "Search", "search_layouts", "world_sizes", "batch_sizes", "quoted_scale_out",
           "prices_inter_node", "EVERY_NODE_COUNT_UP_TO", "EVERY_DEVICE_COUNT_UP_TO_NODES", "tp_degrees",
           "pipeline_depths"]

# Every device count is searched up to this many nodes (the default max_world is 8 nodes of 8), part of a
# node included; then every whole-node count up to EVERY_NODE_COUNT_UP_TO nodes, then doubling: beyond
# it, one node more or less changes the step time by less than the models' own error.
EVERY_DEVICE_COUNT_UP_TO_NODES = 8
EVERY_NODE_COUNT_UP_TO = 32


class CachedModels(ModelSet):
    """A ModelSet that asks its models once per (collective, size, ranks, link class, nodes), and keeps the step
    model's time of each exchange of a layout (the search prices one layout at many micro-batches).

    It shares the wrapped set's models and notes (notes it adds are the wrapped set's too).
    """

    def __init__(self, inner: ModelSet) -> None:
        self.__dict__.update(inner.__dict__)
        self._answers: dict[tuple[str, float, int, str, int | None], CommTime] = {}
        # The step model's answers per layout and exchange (pybench.planning.step), kept for this search.
        self.step_cache: dict[tuple[Any, ...], Any] = {}

    def time(self, collective: str, size_bytes: float, world: int, link_class: str,
             nodes: int | None = None) -> CommTime:
        key = (collective, float(size_bytes), int(world), link_class, nodes)
        if key not in self._answers:
            self._answers[key] = super().time(collective, size_bytes, world, link_class, nodes)
        return self._answers[key]


def prices_inter_node(models: ModelSet, gpus_per_node: int) -> bool:
    """Whether the models can price an all-reduce across two nodes (their notes are left as they were)."""
    saved = list(models.notes)
    try:
        models.time("allreduce", 2**20, 2 * gpus_per_node, INTER)
    except UsageError as exc:  # not determined: the link is there, this size or layout is what it cannot say
        return isinstance(exc, NotDetermined)
    finally:
        models.notes[:] = saved
    return True


def world_sizes(gpus_per_node: int, max_world: int) -> tuple[int, ...]:
    """Every device count up to ``EVERY_DEVICE_COUNT_UP_TO_NODES`` nodes, then every whole-node count up to
    ``EVERY_NODE_COUNT_UP_TO``, then whole nodes doubling, up to ``max_world``."""
    g = gpus_per_node
    worlds = list(range(1, min(g * EVERY_DEVICE_COUNT_UP_TO_NODES, max_world) + 1))
    nodes = EVERY_DEVICE_COUNT_UP_TO_NODES + 1
    while nodes * g <= max_world:
        worlds.append(nodes * g)
        nodes = nodes + 1 if nodes < EVERY_NODE_COUNT_UP_TO else nodes * 2
    return tuple(worlds)


def quoted_scale_out(world: int, g: int) -> bool:
    """Whether the scale-out line quotes DDP at ``world`` devices: whole nodes, every count up to
    ``EVERY_DEVICE_COUNT_UP_TO_NODES`` nodes, then powers of two (a line of every count to 32 nodes and
    beyond says no more, and each costs the models' time)."""
    nodes, whole = divmod(world, g)
    return world > g and not whole and (nodes <= EVERY_DEVICE_COUNT_UP_TO_NODES or nodes & (nodes - 1) == 0)


def batch_sizes(batch: int, max_batch: int) -> tuple[int, ...]:
    """Micro-batches: powers of two from 1 to ``max_batch``, and the user's ``batch``."""
    out, b = {batch}, 1
    while b <= max_batch:
        out.add(b)
        b *= 2
    return tuple(sorted(out))


def tp_degrees(gpus_per_node: int, heads: int, kv_heads: int) -> tuple[int, ...]:
    """Tensor-parallel degrees: up to the node's GPUs, dividing the attention and key/value heads."""
    return tuple(t for t in range(1, gpus_per_node + 1) if heads % t == 0 and kv_heads % t == 0)


def pipeline_depths(layers: int) -> tuple[int, ...]:
    """Pipeline depths from 2: for each size of the largest stage, ceil(L / p) layers, the fewest stages."""
    return tuple(sorted({math.ceil(layers / math.ceil(layers / p)) for p in range(2, layers + 1)}))


def _candidates(g: int, degrees: tuple[int, ...], depths: tuple[int, ...],
                worlds: tuple[int, ...]) -> Iterator[tuple[str, int, int | None, int | None]]:
    """(strategy, world, tp degree, pp degree) for every layout the strategies allow at these worlds."""
    for w in worlds:
        yield ("ddp", w, None, None)
        if w > 1:
            yield from (("zero1", w, None, None), ("zero2", w, None, None), ("zero3", w, None, None))
        if 1 < w < g and w in degrees:
            yield ("tp", w, None, None)
        if w in depths:
            yield ("pp", w, None, None)
        # tp alone (dp 1) inside a node is weighed above as "tp"
        yield from (("tp+dp", w, t, None) for t in degrees if t > 1 and w % t == 0 and (w >= g or t < w))
        for p in depths:
            if p > w:
                break
            # tp 1 with dp 1 is pp alone, weighed above
            yield from (("tp+pp+dp", w, t, p) for t in degrees if w % (t * p) == 0 and not (t == 1 and w == p))


@dataclass(frozen=True)
class SearchBounds:
    """What the search weighed: its bounds, and how many combinations it checked, priced and left out."""

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
    every_device_count_up_to_nodes: int = EVERY_DEVICE_COUNT_UP_TO_NODES
    # The global batch every split trains (sequences per optimizer step), or None: free within the limit.
    global_batch: int | None = None
    tp_degrees: tuple[int, ...] = ()
    pipeline_depths: tuple[int, ...] = ()
    # Combinations that fit and could win but were left out: a priced layout beats their best case, or
    # they span nodes and nothing names a need for more than one (the module docstring).
    rows_left_out: int = 0
    rows_priced: int = 0
    # (strategy, world, tp, pp) of every layout with a split that fits (not in the JSON: the counts are).
    layouts_fitting: frozenset[tuple[str, int, int, int]] = field(default=frozenset(), repr=False, compare=False)
    accumulation: str = ("micro-batch b x m micro-batches per step, b x m x dp = the global batch when one is "
                         "named, else within global_batch_limit; without a pipeline the largest b that fits "
                         "without checkpointing and the largest that fits at all, each at m = 1 and the most m "
                         "(the rest are no better); with a pipeline every b at the fewest and most m that fit "
                         "with and without checkpointing; and the user's micro-batch at the default count")

    def to_dict(self) -> dict[str, Any]:
        doc = {k: v for k, v in self.__dict__.items() if k != "layouts_fitting"}
        return {**doc, "worlds": list(self.worlds), "batches": list(self.batches),
                "strategies": list(self.strategies), "tp_degrees": list(self.tp_degrees),
                "pipeline_depths": list(self.pipeline_depths)}


def _splits(layout: Layout, user_batch: int, user_m: int, bounds: SearchBounds,
            fit: Callable[[int, int], MemoryFit]) -> Iterator[tuple[int, int]]:
    """(micro-batch, micro-batches) pairs worth pricing for ``layout`` (see the module docstring)."""
    if bounds.global_batch is not None:
        yield from _fixed_splits(layout, user_batch, bounds, fit)
        return
    pairs: list[tuple[int, int]] = []
    if fit(user_batch, user_m) is not MemoryFit.DOES_NOT_FIT:
        pairs.append((user_batch, user_m))
    most = bounds.global_batch_limit // layout.dp  # sequences per replica per step
    if most >= 1:
        S = 1 << (most.bit_length() - 1)  # the largest power of two within the limit
        micro = [b for b in bounds.batches if b & (b - 1) == 0 and b <= S]  # powers of two divide S
        if layout.pp == 1:
            # Memory does not depend on m here: the largest micro-batch that fits, without checkpointing
            # and at all, each at both ends of its range of micro-batch counts.
            plain = max((b for b in micro if fit(b, 1) is MemoryFit.FITS), default=0)
            any_fit = max((b for b in micro if fit(b, 1) is not MemoryFit.DOES_NOT_FIT), default=0)
            pairs += [(b, m) for b in sorted({plain, any_fit} - {0}) for m in (1, S // b)]
        else:
            # Memory grows with the micro-batches in flight (up to p): the ends of the counts that fit
            # without checkpointing and of those that fit only with it.
            for b in micro:
                counts = [1 << k for k in range((S // b).bit_length())]
                fits = []
                for m in counts:
                    fits.append(fit(b, m))
                    if m >= layout.pp:
                        break  # no more micro-batches in flight beyond the stages
                fits += [fits[-1]] * (len(counts) - len(fits))
                plain_m = [m for m, f in zip(counts, fits) if f is MemoryFit.FITS]
                ckpt_m = [m for m, f in zip(counts, fits) if f is MemoryFit.WITH_CHECKPOINTING]
                if not plain_m and not ckpt_m:
                    break  # a larger micro-batch needs more memory still
                pairs += [(b, m) for group in (plain_m, ckpt_m) if group for m in (group[0], group[-1])]
    yield from dict.fromkeys(pairs)


def _per_replica(layout: Layout, bounds: SearchBounds) -> int:
    """What ``_splits`` reads of the world: sequences per replica per step (G / dp with a named global batch,
    -1 when dp does not divide it; else the largest power of two within the limit, 0 when none)."""
    if bounds.global_batch is not None:
        return -1 if bounds.global_batch % layout.dp else bounds.global_batch // layout.dp
    most = bounds.global_batch_limit // layout.dp
    return 1 << (most.bit_length() - 1) if most >= 1 else 0


def _fixed_splits(layout: Layout, user_batch: int, bounds: SearchBounds,
                  fit: Callable[[int, int], MemoryFit]) -> Iterator[tuple[int, int]]:
    """Splits b x m of a named global batch: every replica trains S = G / dp sequences per step."""
    G = bounds.global_batch or 0
    if G % layout.dp:
        return  # this many replicas cannot share the global batch evenly
    S = G // layout.dp
    micro = sorted(b for b in {*bounds.batches, user_batch} if S % b == 0)
    fitting = [b for b in micro if fit(b, S // b) is not MemoryFit.DOES_NOT_FIT]
    if layout.pp == 1:
        # m = S / b is fixed by b; at a fixed S a larger b is no worse (the module docstring)
        plain = [b for b in fitting if fit(b, S // b) is MemoryFit.FITS]
        keep = {max(plain)} if plain else set()
        keep |= {max(fitting)} if fitting else set()
        keep |= {user_batch} & set(fitting)
        yield from ((b, S // b) for b in sorted(keep))
    else:
        yield from ((b, S // b) for b in fitting)


def _quoted(candidates: list[Candidate], user_batch: int, g: int, worlds: tuple[int, ...]) -> None:
    """Mark the combinations the advice quotes whatever the choice (pybench.planning.advice): everything at
    ``worlds`` (the scaling check), the user's micro-batch of ddp inside one node and at the node counts the
    scale-out line quotes (``quoted_scale_out``), of ZeRO-1/2 (and ddp beside them) and of ZeRO-3 at the fewest
    devices they fit, and every split of the shallowest, smallest tp x pp x dp over a whole node's tp."""
    for c in candidates:
        c.must = c.must or c.layout.world in worlds
    mine = [c for c in candidates if c.batch == user_batch]
    for c in mine:
        c.must = c.must or (c.strategy == "ddp" and (c.layout.world <= g or quoted_scale_out(c.layout.world, g)))
    zero12 = [c.layout.world for c in mine if c.strategy in ("zero1", "zero2")]
    for c in mine:
        if zero12 and c.layout.world == min(zero12) and c.strategy in ("ddp", "zero1", "zero2"):
            c.must = True
    zero3 = [c for c in mine if c.strategy == "zero3"] or [c for c in candidates if c.strategy == "zero3"]
    if zero3:
        fewest = min(c.layout.world for c in zero3)
        for c in zero3:
            c.must = c.must or c.layout.world == fewest
    threed = [c for c in candidates if c.strategy == "tp+pp+dp" and c.layout.tp == g]
    if threed:
        first = min((c.layout.pp, c.layout.world) for c in threed)
        for c in threed:
            c.must = c.must or (c.layout.pp, c.layout.world) == first


def _price_unbeaten(candidates: list[Candidate], search: Search, frontier: Frontier) -> None:
    """Price those of ``candidates`` the rules could still choose, by rising cost bound; the others are left
    out. Each is first checked on its compute-only bound, and its never-overlapped communication is counted
    (model calls) only if that does not settle it: the bound only rises, so the order stays rising."""
    heap = [(c.cost_bound, i, c) for i, c in enumerate(candidates)]
    heapq.heapify(heap)
    while heap:
        _, i, c = heapq.heappop(heap)
        if frontier.beaten(c):
            search.left.append(c)
        elif not c.refined:
            c.refine()
            heapq.heappush(heap, (c.cost_bound, i, c))
        else:
            _add(frontier, search.price(c))


def _add(frontier: Frontier, row: StepEstimate | None) -> None:
    if row is not None:  # None: the inputs do not determine that layout's communication
        frontier.add(row)


def search_layouts(cfg: CcrConfig, models: ModelSet, bounds: SearchBounds, user_batch: int,
                   loader_samples_per_s: float | None = None, target_samples_per_s: float | None = None,
                   multi_node_needs_target: bool = False, quoted_worlds: tuple[int, ...] = (),
                   prune: bool = True) -> Search:
    """Every layout within ``bounds`` that fits in memory and could be chosen or is quoted, priced.

    ``cfg`` supplies everything but the layout (its strategies, worlds, batches, degrees and
    micro-batch count are ignored); ``loader_samples_per_s`` caps each replica and
    ``target_samples_per_s`` is the need, as in the choice; ``multi_node_needs_target``: the rules
    allow more than one node only for a throughput target (no layout across nodes is then priced
    without one, unless the advice quotes it or nothing fits inside one node); every layout at
    ``quoted_worlds`` is priced (the advice quotes the fastest at each). ``prune=False`` prices every
    split that fits (the tests check that pruning never changes the choice).
    Rows are sorted by world, strategy, degrees, micro-batch and micro-batch count.

    Raises
    ------
    UsageError
        When a layout that fits cannot be priced (no model for its collective and link class).
    """
    g, shape = cfg.gpus_per_node, cfg.shape
    degrees = bounds.tp_degrees or tp_degrees(g, shape.heads, shape.kv_heads)
    depths = bounds.pipeline_depths or pipeline_depths(shape.layers)
    bounds = replace(bounds, tp_degrees=degrees, pipeline_depths=depths)
    search = Search(cfg, models, g, bounds)
    tried = 0
    candidates: list[Candidate] = []
    base = replace(cfg, micro_batches=None)
    # Memory depends on the layout only through how it shards (ZeRO over dp; tp and the largest stage), and on
    # m only through the pipeline's micro-batches in flight: one answer per such key serves every world.
    sized: dict[tuple[Any, ...], MemoryFit] = {}
    call_times: dict[tuple[Any, ...], float] = {}
    # The splits worth pricing depend on the layout only through how it shards and how many sequences each
    # replica trains per step (a power of two, or G / dp): one list serves every world sharing both.
    split_lists: dict[tuple[Any, ...], list[tuple[int, int, MemoryFit]]] = {}
    for strategy, world, tp, pp in _candidates(g, degrees, depths, bounds.worlds):
        layout = make_layout(strategy, world, g, tp, shape.layers, pp)
        user_m = default_micro_batches(base, layout)
        if bounds.global_batch is None:  # the default pipeline's 4p micro-batches, within the limit too
            user_m = max(1, min(user_m, bounds.global_batch_limit // layout.dp // user_batch))
        shard = (layout.strategy, layout.dp if layout.strategy in ("zero1", "zero2", "zero3") else 0,
                 layout.tp, layout.pp)

        def fit(b: int, m: int, layout: Layout = layout, shard: tuple = shard) -> MemoryFit:
            key = (*shard, b, min(m, layout.pp))
            if key not in sized:
                work = Workload(cfg.params, shape, cfg.seq, b, key[-1], cfg.grad_bytes_per_value)
                sized[key] = memory_per_device(layout, work, cfg.device_memory_bytes, cfg.flash_attention,
                                               cfg.memory_headroom, cfg.bytes_per_param).fits
            return sized[key]

        pace = Pace(cfg, models, layout, loader_samples_per_s, call_times)
        key = (*shard, _per_replica(layout, bounds), user_m)
        if key not in split_lists:
            split_lists[key] = [(b, m, fit(b, m)) for b, m in _splits(layout, user_batch, user_m, bounds, fit)]
        for b, m, f in split_lists[key]:
            sps, cost = pace.bound(b, m, f)
            candidates.append(Candidate(strategy, tp, pp, layout, b, m, layout.nodes == 1, sps, cost, pace, f,
                                        refined=not pace.exposes))
        tried += _weighed(layout, user_batch, bounds)
    _quoted(candidates, user_batch, g, quoted_worlds)
    for c in candidates:
        c.must = c.must or not prune

    frontier = Frontier(loader_samples_per_s, target_samples_per_s,
                        min((c.cost_bound for c in candidates), default=0.0))
    for c in candidates:
        if c.must:
            _add(frontier, search.price(c))
    rest = [c for c in candidates if not c.priced]
    if multi_node_needs_target and target_samples_per_s is None and any(r.layout.nodes == 1 for r in search.rows):
        search.left.extend(rest)  # the choice stays inside the node; nothing else across nodes is quoted
        rest = []
    if target_samples_per_s is not None:
        # Those that could meet the target first: once one its bands allow does, the others cannot be chosen.
        could = [c for c in rest if c.samples_per_s_bound >= target_samples_per_s]
        cannot = [c for c in rest if c.samples_per_s_bound < target_samples_per_s]
        _price_unbeaten(could, search, frontier)
        _price_unbeaten(cannot, search, frontier)
    else:
        _price_unbeaten(rest, search, frontier)
    search.bounds = replace(bounds, layouts_tried=tried, rows_fitting=len(candidates),
                            rows_left_out=len(search.left), rows_priced=len(search.priced),
                            layouts_fitting=frozenset((c.strategy, c.layout.world, c.layout.tp, c.layout.pp)
                                                      for c in candidates))
    return search


class Search:
    """The rows the search priced (``rows``, sorted), its ``bounds``, and the combinations it left out
    (``left``), which :meth:`complete` prices for one layout (the advice quotes every split of the pick)."""

    def __init__(self, cfg: CcrConfig, models: ModelSet, g: int, bounds: SearchBounds) -> None:
        self.cfg, self.models, self.g, self.bounds = cfg, models, g, bounds
        self.priced: list[StepEstimate] = []
        self.left: list[Candidate] = []
        self.undetermined: dict[str, set[str]] = {}
        """Why the inputs do not determine some layouts' communication -> those layouts (never priced)."""
        self._configs: dict[tuple[int | None, int | None], CcrConfig] = {}
        self._estimates: dict[tuple[str, int | None, int | None, int, int, int], StepEstimate] = {}

    def estimate(self, strategy: str, tp: int | None, pp: int | None, world: int, batch: int,
                 m: int) -> StepEstimate:
        key = (strategy, tp, pp, world, batch, m)
        if key not in self._estimates:
            if (tp, pp) not in self._configs:
                self._configs[(tp, pp)] = replace(self.cfg, tp_degree=tp, pp_degree=pp, micro_batches=None)
            self._estimates[key] = estimate_step(self._configs[(tp, pp)], self.models, strategy, world, batch,
                                                 micro_batches=m)
        return self._estimates[key]

    def price(self, c: Candidate) -> StepEstimate | None:
        """``c`` priced and kept, or None (recorded in ``undetermined``) where the inputs cannot price it."""
        try:
            row = self.estimate(c.strategy, c.tp, c.pp, c.layout.world, c.batch, c.micro_batches)
        except NotDetermined as exc:
            self.undetermined.setdefault(str(exc), set()).add(f"{c.strategy} on {c.layout.world}")
            c.priced = True  # weighed, and left out for good
            return None
        row = _with_node_efficiency(row, self.estimate, c.strategy, c.tp, c.pp, self.g)
        self.priced.append(row)
        c.priced = True
        return row

    @property
    def rows(self) -> list[StepEstimate]:
        return sorted(self.priced, key=lambda r: (r.world, r.strategy, r.layout.tp, r.layout.pp, r.batch,
                                                  r.micro_batches))

    def complete(self, layout: Layout) -> None:
        """Price every combination of ``layout`` left out (no choice changes: they could not win)."""
        mine: list[Candidate] = []
        keep: list[Candidate] = []
        for c in self.left:
            (mine if c.layout == layout else keep).append(c)
        self.left = keep
        for c in mine:
            self.price(c)
        self.bounds = replace(self.bounds, rows_left_out=len(self.left), rows_priced=len(self.priced))


def _weighed(layout: Layout, user_batch: int, bounds: SearchBounds) -> int:
    """How many (micro-batch, micro-batches) splits of ``layout`` lie within the bounds."""
    if bounds.global_batch is not None:
        G = bounds.global_batch
        if G % layout.dp:
            return 0
        return sum(1 for b in {*bounds.batches, user_batch} if (G // layout.dp) % b == 0)
    most = bounds.global_batch_limit // layout.dp
    if most < 1:
        return 1
    S = 1 << (most.bit_length() - 1)
    return 1 + sum((S // b).bit_length() for b in bounds.batches if b & (b - 1) == 0 and b <= S)


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
        return replace(row, efficiency_vs_node=node_efficiency(row.samples_per_s, w, g, node.samples_per_s))
    return row
