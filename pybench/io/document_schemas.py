"""The schemas of pybench's own documents besides the result (pybench.io.schemas has that one):
fitted models, compute profiles, CCR tables, step profiles, comparisons and pair matrices.

Each names what its readers rely on, typed and bounded as the result's are (finite, positive where
physical, sizes below 2^60, worlds at least 1, text as text, lists of a bounded length), so a
reader gets a document it can use without checks of its own. Fields a newer pybench adds pass
(``extra="allow"``, from the shared base class).
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import AfterValidator, Field, model_validator

from pybench.io.model_names import (
    LINK_ALGORITHMS,
    MAX_LINK_REGIMES,
    TOPOLOGY_ALGORITHMS,
    TOPOLOGY_CROSSING_VERSION,
    TOPOLOGY_SCHEDULES,
)
from pybench.io.schemas import (
    MAX_RECORDS,
    MAX_SIZE_BYTES,
    MAX_WORLD,
    Count,
    Finite,
    Rate,
    Size,
    Spread,
    Text,
    Time,
    _Body,
)

World = Annotated[int, Field(ge=1, le=MAX_WORLD)]
Positive = Annotated[float, Field(gt=0, le=1e30, allow_inf_nan=False)]
NonNegative = Annotated[float, Field(ge=0, le=1e30, allow_inf_nan=False)]
Fraction = Annotated[float, Field(ge=0, le=1, allow_inf_nan=False)]
PositiveSize = Annotated[int, Field(gt=0, lt=MAX_SIZE_BYTES)]
Notes = Annotated[list[Text], Field(max_length=4096)]
#: A pair matrix covers at most 1024 GPUs (an index above 1023 is not a GPU of one machine).
MAX_GPU = 1023


# JSON pairs as lists of two: strict validation takes no list for a tuple.
WorldPair = Annotated[list[World], Field(min_length=2, max_length=2)]
SizePair = Annotated[list[Size], Field(min_length=2, max_length=2)]
Figures = Annotated[list[Finite], Field(max_length=MAX_RECORDS)]


# ---------------------------------------------------------------- fitted models (MODEL)
class SegmentSchema(_Body):
    """One regime of a fitted alpha-beta curve."""

    size_min_bytes: Size
    size_max_bytes: Size
    alpha_s: Finite  # a negative one (files from before the fit was constrained) is refused with its remedy
    inv_bw_s_per_byte: Finite
    cov: Annotated[list[Finite], Field(max_length=64)] | None = None
    n_points: Count | None = None


class CurveSchema(_Body):
    """One fitted curve (pybench.model's AlphaBetaModel)."""

    collective: Text
    backend: Text | None = None
    link_class: Literal["intra-node", "inter-node"] | None = None
    world_size: World
    dtype: Text | None = None
    algorithm: Text | None = None
    n_points: Count | None = None
    sources: Notes | None = None
    notes: Notes | None = None
    segments: Annotated[list[SegmentSchema], Field(min_length=1, max_length=MAX_RECORDS)]


def _one_of(names: tuple[str, ...], what: str) -> AfterValidator:
    def check(value: str) -> str:
        if value not in names:
            raise ValueError(f"{what} {value[:40]!r} is not one of {', '.join(names)}")
        return value
    return AfterValidator(check)


class SmallRegimeSchema(_Body):
    """A link regime that wins below its link's bandwidth regime (no regimes of its own)."""

    base_s: NonNegative
    step_s: NonNegative
    busbw_Bps: Positive
    extra_steps: NonNegative
    label: Text | None = None
    algorithm: Annotated[Text, _one_of(LINK_ALGORITHMS, "algorithm")] = "ring"
    regimes: Annotated[list[Any], Field(max_length=0)] | None = None  # none of its own


class LinkSchema(SmallRegimeSchema):
    """One link class of a topology model (pybench.model.link_cost.LinkCost): its bandwidth regime, and
    the regimes that win below it, none faster."""

    regimes: Annotated[list[SmallRegimeSchema], Field(max_length=MAX_LINK_REGIMES - 1)] | None = None

    @model_validator(mode="after")
    def _bandwidth_regime_is_fastest(self) -> LinkSchema:
        if any(r.busbw_Bps > self.busbw_Bps for r in self.regimes or []):
            raise ValueError("a small-size regime has more bandwidth than its link's bandwidth regime")
        return self


# A layout the fit missed: [ranks, nodes, median relative miss].
LayoutMiss = Annotated[list[Finite], Field(min_length=3, max_length=3)]


# A fitted layout's measured sizes: [ranks, nodes, smallest, largest].
LayoutSizes = Annotated[list[Size], Field(min_length=4, max_length=4)]


class TopologySchema(_Body):
    """One collective's topology model: what answers for the layouts not measured
    (pybench.model.topology.TopologyModel; its system is a description, checked by its own schema)."""

    collective: Text
    algorithm: Annotated[Text, _one_of(TOPOLOGY_ALGORITHMS, "algorithm")]
    schedule: Annotated[Text, _one_of(TOPOLOGY_SCHEDULES, "schedule")] = "ring"
    fitted: Annotated[list[WorldPair], Field(min_length=1, max_length=4096)]  # [ranks, nodes] pairs
    size_range: SizePair
    residual_sizes: Figures | None = None
    residuals: Figures | None = None
    notes: Notes | None = None
    backend: Text | None = None
    inter_absorbs_intra: bool = True
    intra: LinkSchema | None = None
    inter: LinkSchema | None = None
    system: dict[str, Any] | None = None
    layout_misses: Annotated[list[LayoutMiss], Field(max_length=4096)] | None = None
    layout_sizes: Annotated[list[LayoutSizes], Field(max_length=4096)] | None = None
    hosts_per_node: Annotated[int, Field(ge=1, le=MAX_WORLD)] = 1  # an NVLink domain's hosts, where it is the node
    rails_ranks: Annotated[int, Field(ge=0, le=MAX_WORLD)] = 0  # 0: one rate through a node's NICs (older files)
    crossing_version: Annotated[int, Field(ge=1, le=TOPOLOGY_CROSSING_VERSION)] = 1  # 1: files before the field

    @model_validator(mode="after")
    def _consistent(self) -> TopologySchema:
        sizes, residuals = self.residual_sizes or [], self.residuals or []
        if len(sizes) != len(residuals):
            raise ValueError(f"{len(sizes)} residual_sizes but {len(residuals)} residuals: one residual per size")
        for world, nodes in self.fitted:
            if world % nodes:
                raise ValueError(f"fitted layout [{world}, {nodes}] is not whole nodes: ranks per node x nodes")
        for miss in self.layout_misses or []:
            if not all(x == int(x) and 1 <= x <= MAX_WORLD for x in miss[:2]):
                shown = ", ".join(f"{x:g}" for x in miss)
                raise ValueError(f"layout_misses entry [{shown}] does not start with a world and a node count")
        if self.rails_ranks:  # a rate on rails is fitted at the most ranks per node of several, on a ring's crossing
            counts = sorted({w // n for w, n in self.fitted if n > 1})
            if (self.collective == "sendrecv" or self.inter is None or self.schedule != "ring" or len(counts) < 2
                    or self.rails_ranks != counts[-1]):
                raise ValueError(f"rails_ranks {self.rails_ranks} is not the most ranks per node of a ring crossing "
                                 f"fitted at several counts (fitted across nodes at {counts or 'none'}): refit the "
                                 f"logs with `pybench fit`")
        spans = {(w, n): (lo, hi) for w, n, lo, hi in self.layout_sizes or []}
        if spans and (len(spans) != len(self.layout_sizes or []) or set(spans) != {tuple(f) for f in self.fitted}
                      or any(not self.size_range[0] <= lo <= hi <= self.size_range[1] for lo, hi in spans.values())):
            raise ValueError("layout_sizes must give each fitted layout once, [ranks, nodes, smallest, largest] with "
                             "smallest <= largest, both within size_range")
        return self


class ModelSchema(_Body):
    models: Annotated[list[CurveSchema], Field(min_length=1, max_length=65536)]
    topology: Annotated[list[TopologySchema], Field(max_length=65536)] | None = None


# ---------------------------------------------------------------- compute profiles (COMPUTE)
class GemmSchema(_Body):
    m: Annotated[int, Field(ge=1, le=1 << 40)]
    k: Annotated[int, Field(ge=1, le=1 << 40)]
    n: Annotated[int, Field(ge=1, le=1 << 40)]
    samples_s: Annotated[list[Time], Field(min_length=1, max_length=1 << 16)]
    median_s: Time | None = None


class ComputeSchema(_Body):
    engine: Text
    device: Text
    dtype: Text
    params: Annotated[int, Field(ge=1, le=1 << 50)]
    seq: Annotated[int, Field(ge=1, le=1 << 30)]
    micro_batch: Annotated[int, Field(ge=1, le=1 << 30)]
    timed_tokens: Annotated[int, Field(ge=1, le=1 << 40)]
    repeats: Annotated[int, Field(ge=1, le=1 << 30)]
    flops_per_s: Positive | None = None
    warnings: Notes | None = None
    gemms: Annotated[list[GemmSchema], Field(min_length=1, max_length=4096)]


# ---------------------------------------------------------------- CCR tables (CCR)
class CCRRowSchema(_Body):
    strategy: Text
    world: World
    batch: Annotated[int, Field(ge=1, le=1 << 40)]
    ccr: Fraction
    efficiency_vs_device: Annotated[float, Field(ge=0, le=1e6, allow_inf_nan=False)]
    comm_s: Spread
    compute_s: Spread
    step_s: Spread
    samples_per_s: Annotated[float, Field(ge=0, le=1e30, allow_inf_nan=False)]
    comm_low_s: Spread | None = None
    comm_high_s: Spread | None = None
    exposed_s: Spread | None = None
    exposed_fraction: Fraction | None = None


class CCRSchema(_Body):
    rows: Annotated[list[CCRRowSchema], Field(max_length=1 << 20)]
    config: dict | None = None
    notes: Notes | None = None


# ---------------------------------------------------------------- step profiles (PROFILE)
class ProfileRowSchema(_Body):
    batch: Annotated[int, Field(ge=1, le=1 << 40)] | None = None
    steps: Count | None = None
    step_s: Spread | None = None
    compute_s: Spread | None = None
    comm_s: Spread | None = None
    exposed_s: Spread | None = None
    loader_samples_per_s: Annotated[float, Field(ge=0, le=1e30, allow_inf_nan=False)] | None = None


class ProfileSchema(_Body):
    kind: Text | None = None
    world_size: World | None = None
    params: Annotated[int, Field(ge=1, le=1 << 50)] | None = None
    notes: Notes | None = None
    rows: Annotated[list[ProfileRowSchema], Field(max_length=1 << 16)]


# ---------------------------------------------------------------- comparisons (COMPARISON)
Ratio = Annotated[float, Field(gt=0, le=1e12, allow_inf_nan=False)]


class SizeComparisonSchema(_Body):
    size_bytes: PositiveSize
    time_ratio: Ratio | None
    ratio_ci: Annotated[list[Ratio | None], Field(min_length=2, max_length=2)]  # [low, high]
    verdict: Literal["slower", "faster", "not significant"]


class ComparisonSchema(_Body):
    noise: Annotated[float, Field(ge=0, le=100, allow_inf_nan=False)] = 0.0
    summary: Text | None = None
    sizes: Annotated[list[SizeComparisonSchema], Field(max_length=MAX_RECORDS)]


# ---------------------------------------------------------------- GPU pair matrices (P2P_MATRIX)
Gpu = Annotated[int, Field(ge=0, le=MAX_GPU)]


class PairSchema(_Body):
    src: Gpu
    dst: Gpu
    bandwidth_gbps: Rate
    latency_s: Spread
    link: Text | None = None
    slow_bandwidth: bool | None = None
    slow_latency: bool | None = None


class PairMatrixSchema(_Body):
    bandwidth_size_bytes: PositiveSize | None = None
    pairs: Annotated[list[PairSchema], Field(min_length=1, max_length=(MAX_GPU + 1) ** 2)]
