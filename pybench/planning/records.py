"""The advice records :func:`pybench.planning.advice.plan` returns: each rule it applied, its
verdict and the figures behind it, as data. :mod:`pybench.planning.plan_result` turns them into
prose and JSON; nothing here writes sentences.
"""

from __future__ import annotations

from dataclasses import dataclass, fields
from typing import Any, ClassVar

from pybench.planning.step import StepEstimate
from pybench.planning.strategies import MemoryEstimate
from pybench.planning.text_enum import TextEnum

__all__ = [
    "Rule", "RULE_ORDER", "OneDevice", "ScaleUpVerdict", "ScaleOutVerdict", "BatchVerdict", "NeedVerdict", "Advice",
    "MemoryAdvice", "UtilisationAdvice", "ScaleUpAdvice", "ScaleOutAdvice", "ZeroAdvice", "AccumulationAdvice",
    "CheckpointAdvice", "Zero3Advice", "TensorParallelAdvice", "PipelineAdvice", "NoLayoutAdvice", "BatchAdvice",
    "InputPipelineAdvice", "ScalingAdvice", "NeedAdvice", "CostAdvice", "GlobalBatchAdvice", "SearchAdvice",
    "row_summary",
]


class Rule(TextEnum):
    """Which decision rule a record comes from."""

    MEMORY = "memory"
    UTILISATION = "utilisation"
    SCALE_UP = "scale up"
    SCALE_OUT = "scale out"
    ZERO = "zero"
    ACCUMULATION = "gradient accumulation"
    CHECKPOINTING = "activation checkpointing"
    ZERO3 = "zero3"
    TENSOR_PARALLEL = "tensor parallel"
    PIPELINE = "pipeline parallel"
    NO_LAYOUT = "no layout"
    INPUT_PIPELINE = "input pipeline"
    SCALING = "scaling efficiency"
    NEED = "named need"
    COST = "cost"
    GLOBAL_BATCH = "global batch"
    BATCH = "batch"
    SEARCH = "search"


# The order the decision rules are applied and reported in (issue 14): does it fit one device,
# is one device well used, scale up inside one node, shard the optimizer, tensor / pipeline
# parallel, and only then multi-node; what the recommendation rests on, then the batch.
RULE_ORDER: tuple[Rule, ...] = (
    Rule.MEMORY, Rule.UTILISATION, Rule.INPUT_PIPELINE, Rule.SCALE_UP, Rule.SCALING, Rule.ZERO,
    Rule.ACCUMULATION, Rule.CHECKPOINTING, Rule.ZERO3, Rule.TENSOR_PARALLEL, Rule.PIPELINE, Rule.NO_LAYOUT,
    Rule.SCALE_OUT, Rule.SEARCH, Rule.NEED, Rule.COST, Rule.GLOBAL_BATCH, Rule.BATCH,
)


class OneDevice(TextEnum):
    """The memory verdict for one device."""

    FITS = "fits one device"
    FITS_ONLY_JUST = "fits only just"
    DOES_NOT_FIT = "does not fit one device"


class ScaleUpVerdict(TextEnum):
    """Whether filling one node with DDP gives more throughput than one device."""

    FILL = "fill one node"
    NO_GAIN = "one node gives no more than one device"


class ScaleOutVerdict(TextEnum):
    """How data parallelism across nodes fares."""

    NOT_COMM_BOUND = "not comm-bound"
    COMM_BOUND_BEYOND = "comm-bound beyond a size"
    COMM_BOUND = "comm-bound across nodes"


class NeedVerdict(TextEnum):
    """What the recommendation rests on."""

    NO_NAMED_NEED = "no named need beyond one node"
    DEVICE_NOT_WELL_USED = "one device is not well used"
    TARGET_MET = "target met"
    TARGET_MET_ONLY_COMM_BOUND = "target met only by comm-bound layouts"
    TARGET_NOT_REACHABLE = "target not reachable"
    MEMORY = "memory sets the layout"


class BatchVerdict(TextEnum):
    """What a larger micro-batch does to the recommended configuration's band."""

    CHANGES_BAND = "changes the band"
    ADOPTED = "a larger batch is recommended"
    STOPS_FITTING = "stops fitting first"
    UNCHANGED = "band unchanged"


def row_summary(r: StepEstimate) -> dict[str, Any]:
    """The figures of a row that advice quotes (the full row is in the plan's ``rows``)."""
    return {"strategy": r.strategy, "world": r.world, "batch": r.batch, "micro_batches": r.micro_batches,
            "layout": str(r.layout), "ccr": r.ccr,
            "band": r.band, "overlap": r.overlap, "exposed_fraction": r.exposed_fraction,
            "samples_per_s": r.samples_per_s, "samples_per_s_slow_comm": r.slow_comm_figure,
            "efficiency_vs_device": r.efficiency_vs_device,
            "efficiency_vs_node": r.efficiency_vs_node, "memory_bytes": r.memory.needed_bytes,
            "memory_fit": r.memory.fits}


def _figure(value: Any) -> Any:
    if isinstance(value, StepEstimate):
        return row_summary(value)
    if isinstance(value, MemoryEstimate):
        return value.to_dict()
    if isinstance(value, tuple):
        return [_figure(v) for v in value]
    if hasattr(value, "to_dict"):
        return value.to_dict()
    return value


@dataclass(frozen=True)
class Advice:
    """One applied rule: its verdict and the figures behind it (subclasses add the figures)."""

    rule: ClassVar[Rule]
    verdict: str

    def to_dict(self) -> dict[str, Any]:
        return {"rule": self.rule, **{f.name: _figure(getattr(self, f.name)) for f in fields(self)}}


@dataclass(frozen=True)
class MemoryAdvice(Advice):
    """Does the model fit one device (``one``: the unsharded DDP memory)?"""

    rule = Rule.MEMORY
    one: MemoryEstimate
    headroom: float
    bytes_per_param: int = 16


@dataclass(frozen=True)
class UtilisationAdvice(Advice):
    """Measured FLOP/s far under the datasheet peak: fix the device before adding devices."""

    rule = Rule.UTILISATION
    measured_flops_per_s: float
    peak_flops_per_s: float

    @property
    def fraction(self) -> float:
        return self.measured_flops_per_s / self.peak_flops_per_s


@dataclass(frozen=True)
class ScaleUpAdvice(Advice):
    """Fill one node first (``ScaleUpVerdict.FILL``), unless it gives no more samples/s than one device."""

    rule = Rule.SCALE_UP
    gpus_per_node: int
    node: StepEstimate


@dataclass(frozen=True)
class ScaleOutAdvice(Advice):
    """Data parallel across nodes, row by row; ``last_good_world``: the largest not comm-bound."""

    rule = Rule.SCALE_OUT
    rows: tuple[StepEstimate, ...]
    last_good_world: int | None


@dataclass(frozen=True)
class ZeroAdvice(Advice):
    """Shard the optimizer state (ZeRO-1/2) at ``world`` devices; ``rows`` per strategy."""

    rule = Rule.ZERO
    world: int
    rows: tuple[StepEstimate, ...]


@dataclass(frozen=True)
class AccumulationAdvice(Advice):
    """Keep DDP with micro-batch 1 and ``batch`` accumulation steps."""

    rule = Rule.ACCUMULATION
    batch: int
    memory: MemoryEstimate


@dataclass(frozen=True)
class CheckpointAdvice(Advice):
    """Checkpoint activations on one device."""

    rule = Rule.CHECKPOINTING
    memory: MemoryEstimate


@dataclass(frozen=True)
class Zero3Advice(Advice):
    """ZeRO-3 / FSDP: the smallest world where sharding everything fits."""

    rule = Rule.ZERO3
    row: StepEstimate


@dataclass(frozen=True)
class TensorParallelAdvice(Advice):
    """Tensor parallel inside the node fits."""

    rule = Rule.TENSOR_PARALLEL
    tp: int
    row: StepEstimate


@dataclass(frozen=True)
class PipelineAdvice(Advice):
    """TP inside the node is not enough; ``row`` adds pipeline stages across nodes."""

    rule = Rule.PIPELINE
    tp: int
    tp_node: StepEstimate | None
    row: StepEstimate


@dataclass(frozen=True)
class NoLayoutAdvice(Advice):
    """No tensor x pipeline layout within ``max_world`` devices fits."""

    rule = Rule.NO_LAYOUT
    max_world: int


@dataclass(frozen=True)
class InputPipelineAdvice(Advice):
    """The data loader delivers fewer samples per second than one replica's compute takes."""

    rule = Rule.INPUT_PIPELINE
    loader_samples_per_s: float
    compute_samples_per_s: float


@dataclass(frozen=True)
class ScalingAdvice(Advice):
    """Scaling efficiency at 2, 4 and 8 workers, to check before larger counts.

    ``rows``: the fastest layout that fits at each count (at the user's micro-batch where it fits);
    ``missing``: the counts at which nothing fits or was priced; ``undetermined``: those of them whose layouts
    these inputs do not determine (weighed and left out, never priced).
    """

    rule = Rule.SCALING
    rows: tuple[StepEstimate, ...]
    missing: tuple[int, ...] = ()
    undetermined: tuple[int, ...] = ()


@dataclass(frozen=True)
class NeedAdvice(Advice):
    """What the recommendation rests on: the named need (a target) or its absence.

    ``node``: the best configuration inside one node; ``target_samples_per_s``: the need, if named;
    ``best_allowed``: the fastest layout its bands do not call comm-bound (when only comm-bound ones meet it);
    ``loader_samples_per_s``: one replica's data loader, which caps every row (None: no cap given);
    ``target_met``: whether the recommendation reaches the target; ``met_at_slow_comm``: whether it still does with
    its communication at the slow end of its 95% interval (else these inputs do not determine that it does);
    ``determined``: then the cheapest allowed layout that does, if one was priced.
    """

    rule = Rule.NEED
    row: StepEstimate | None
    node: StepEstimate | None
    target_samples_per_s: float | None = None
    best_allowed: StepEstimate | None = None
    loader_samples_per_s: float | None = None
    target_met: bool = True
    met_at_slow_comm: bool | None = None
    determined: StepEstimate | None = None


@dataclass(frozen=True)
class CostAdvice(Advice):
    """What the recommendation costs per sample, beside one node's best."""

    rule = Rule.COST
    price_per_node_hour: float
    row: StepEstimate
    node: StepEstimate | None
    price_per_device_hour: float | None = None


@dataclass(frozen=True)
class GlobalBatchAdvice(Advice):
    """The recommendation's global batch (dp x micro-batch x micro-batches) passes ``limit`` sequences."""

    rule = Rule.GLOBAL_BATCH
    row: StepEstimate
    seq: int
    limit: int


@dataclass(frozen=True)
class BatchAdvice(Advice):
    """Where a larger micro-batch changes the band of ``row`` (``at``: the first row that does)."""

    rule = Rule.BATCH
    row: StepEstimate
    batch: int
    tried_batch: int
    max_batch: int
    at: StepEstimate | None = None


@dataclass(frozen=True)
class SearchAdvice(Advice):
    """What the search weighed (``bounds``, a :class:`pybench.planning.search.SearchBounds`), and whether
    ``max_world`` bounded the answer (a target not reached, or one node only for want of an inter-node model)."""

    rule = Rule.SEARCH
    bounds: Any
    bounded: bool = False
