"""The step model: one (strategy, world, micro-batch) priced as compute, bubble and communication.

- ``compute_s`` = FLOPs per device / measured FLOP/s, FLOPs = 6 x P x tokens
  (8 with full activation recomputation, asked for or needed because the layout
  fits only with checkpointing) divided over tp, for the largest pipeline stage
  (ceil(L / p) of the L layers: 1/p when p divides L).
- Three overheads (issue 14): ``latency_s`` = calls (buckets) x the model's time
  of a 1-byte message (its alpha), ``bandwidth_s`` = comm_s - latency_s, and
  ``sync_s``, the wait for the slowest rank: compute_s x (straggler factor /
  slow_node - 1), where ``straggler_cv`` gives the straggler factor and one node
  runs at ``slow_node`` of the others' speed (only when the step spans nodes).
  The wait counts as communication: in CCR, in the exposed fraction and in the step.
- ``bubble_s`` = compute_s x (p - 1) / m for a pipeline of p stages and m
  micro-batches, so the bubble is (p - 1) / (m + p - 1) of the pipelined time.
- ``comm_s`` = sum over the step's collectives (``pybench.planning.strategies.comm_ops``)
  of calls x predicted time from fitted alpha-beta models, full-size messages.
- ``ccr`` = (comm_s + sync_s) / (comm_s + sync_s + compute_s): no overlap; the
  bubble is idle time, neither communication nor compute, and is reported separately.
- With overlap, the gradient exchange runs in buckets of ``bucket_bytes`` under
  the backward pass of the last micro-batch (2/3 of its compute; 3/4 with
  recomputation). Buckets become ready uniformly through backward and go out
  one after another on one stream (as DDP does), so the last bucket, ready when
  backward ends, can never overlap. Everything else is exposed. A measured
  :class:`pybench.planning.overlap.OverlapProfile` replaces the uniform readiness and
  the 2/3, and slows compute while buckets are in flight (CPU transports).
  ``exposed_fraction`` = (exposed_s + sync_s) / (exposed_s + sync_s + compute_s).
- ``step_s`` = compute_s + bubble_s + exposed_s + sync_s (exposed_s = comm_s without overlap).
- Scaling efficiency at N = throughput(N) / (N x throughput(1)); throughput(1)
  is one device with the same micro-batch and no communication (whether or not
  the model would fit on it). Against one node: throughput(N) / (N/g x throughput(g)).
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from pybench.errors import UsageError
from pybench.planning.bands import Band, band
from pybench.planning.config import CcrConfig
from pybench.planning.model_set import CommTime, ModelSet
from pybench.planning.nic_sharing import shared_time, sharing_groups
from pybench.planning.overlap import OverlapProfile, bucket_sizes, bucketed_serial_s, overlap_exposed_s
from pybench.planning.stragglers import straggler_factor
from pybench.planning.strategies import (
    INTER,
    INTRA,
    CommOp,
    Layout,
    MemoryEstimate,
    MemoryFit,
    Workload,
    bubble_fraction,
    comm_ops,
    make_layout,
    memory_per_device,
    stage_share,
)
from pybench.planning.transformer import training_flops
from pybench.sizes import MAX_SIZE_BYTES

__all__ = ["OpTime", "StepEstimate", "estimate_step", "default_micro_batches"]


@dataclass(frozen=True)
class OpTime:
    """One kind of communication in the step with its predicted time per step."""

    op: CommOp
    call: CommTime
    buckets: int = 1
    """The pieces each call is sent in (an exchange under backward with overlap); ``call`` is their sum."""

    @property
    def time_s(self) -> float:
        return self.op.calls * self.call.time_s

    def to_dict(self) -> dict[str, Any]:
        return {**self.op.to_dict(), "buckets": self.buckets, "time_per_call_s": self.call.time_s,
                "time_s": self.time_s,
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
    latency_s: float = 0.0
    sync_s: float = 0.0
    recomputed: bool = False

    @property
    def bandwidth_s(self) -> float:
        """Serial communication time beyond the per-call latency: bytes over the link."""
        return max(0.0, self.comm_s - self.latency_s)

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
        """Communication (network and the wait for the slowest rank) over communication plus compute."""
        comm = self.comm_s + self.sync_s
        total = comm + self.compute_s
        return comm / total if total else 0.0

    @property
    def exposed_fraction(self) -> float:
        exposed = self.exposed_s + self.sync_s
        total = exposed + self.compute_s
        return exposed / total if total else 0.0

    @property
    def comm_fraction(self) -> float:
        """The fraction that decides the band: exposed with overlap, else CCR."""
        return self.exposed_fraction if self.overlap else self.ccr

    @property
    def band(self) -> Band:
        return band(self.ccr)

    @property
    def band_exposed(self) -> Band:
        return band(self.exposed_fraction)

    @property
    def decisive_band(self) -> Band:
        """Band of :attr:`comm_fraction`."""
        return band(self.comm_fraction)

    @property
    def bubble_fraction(self) -> float:
        return bubble_fraction(self.layout.pp, self.micro_batches)

    @property
    def step_s(self) -> float:
        return self.compute_s + self.bubble_s + self.exposed_s + self.sync_s

    @property
    def samples_per_s(self) -> float:
        return self.global_batch / self.step_s

    @property
    def comm_interval_calibrated(self) -> bool:
        """Whether every call's interval says how far its time may stray (see ``CommTime.calibrated``)."""
        return all(o.call.calibrated for o in self.ops)

    @property
    def samples_per_s_slow_comm(self) -> float:
        """Samples/s with the communication at the slow end of its 95% interval, all of the extra time exposed (a
        lower bound: overlap may hide some of it); 0 where no calibrated interval bounds it."""
        extra = self.comm_high_s - self.comm_s
        if not self.comm_interval_calibrated or not math.isfinite(extra):
            return 0.0
        return self.global_batch / (self.step_s + max(0.0, extra))

    @property
    def slow_comm_figure(self) -> float | None:
        """:attr:`samples_per_s_slow_comm` for JSON: None where no calibrated interval bounds the communication."""
        return self.samples_per_s_slow_comm if self.comm_interval_calibrated else None

    @property
    def efficiency_vs_device(self) -> float:
        return self.samples_per_s / (self.world * self.samples_per_s_one_device)

    @property
    def samples_per_dollar(self) -> float | None:
        """Samples per second over dollars per second."""
        if self.cost_per_hour is None:
            return None
        return self.samples_per_s * 3600.0 / self.cost_per_hour

    def to_dict(self) -> dict[str, Any]:
        return {"strategy": self.strategy, "world": self.world, "batch": self.batch,
                "layout": self.layout.to_dict(), "micro_batches": self.micro_batches,
                "global_batch": self.global_batch, "bytes_per_rank": self.bytes_per_rank,
                "wire_bytes_per_rank": self.wire_bytes_per_rank, "bytes_intra_node": self.bytes_on(INTRA),
                "bytes_inter_node": self.bytes_on(INTER), "links": self.links,
                "ops": [o.to_dict() for o in self.ops], "compute_s": self.compute_s,
                "bubble_s": self.bubble_s, "bubble_fraction": self.bubble_fraction, "comm_s": self.comm_s,
                "comm_low_s": self.comm_low_s, "comm_high_s": self.comm_high_s, "latency_s": self.latency_s,
                "bandwidth_s": self.bandwidth_s, "sync_s": self.sync_s, "recomputed": self.recomputed,
                "ccr": self.ccr,
                "band": self.band, "overlap": self.overlap, "exposed_s": self.exposed_s,
                "exposed_fraction": self.exposed_fraction, "band_exposed": self.band_exposed,
                "straggler_factor": self.straggler_factor, "step_s": self.step_s,
                "samples_per_s": self.samples_per_s, "samples_per_s_slow_comm": self.slow_comm_figure,
                "comm_interval_calibrated": self.comm_interval_calibrated,
                "efficiency_vs_device": self.efficiency_vs_device,
                "efficiency_vs_node": self.efficiency_vs_node, "cost_per_hour": self.cost_per_hour,
                "samples_per_dollar": self.samples_per_dollar, "memory": self.memory.to_dict()}

    def __repr__(self) -> str:
        return (f"StepEstimate({self.strategy} world={self.world} batch={self.batch} [{self.layout}]: "
                f"compute {self.compute_s * 1e3:.1f} ms, comm {self.comm_s * 1e3:.1f} ms, "
                f"CCR {self.ccr:.3f} ({self.band}), step {self.step_s * 1e3:.1f} ms, "
                f"{self.samples_per_s:.2f} samples/s, memory {self.memory.fits})")


def _memo(models: ModelSet, key: tuple[Any, ...], compute: Callable[[], Any]) -> Any:
    """``compute()``, remembered under ``key`` when ``models`` keeps a cache (the plan's search prices the
    same exchange of one layout at many micro-batches)."""
    cache = getattr(models, "step_cache", None)
    if cache is None:
        return compute()
    if key not in cache:
        cache[key] = compute()
    return cache[key]


def _call_key(layout: Layout, op: CommOp) -> tuple[Any, ...]:
    """What the time of one call of ``op`` depends on (not its number of calls)."""
    return layout, op.purpose, op.collective, op.size_bytes, op.group_size, op.link_class, op.nodes


def _op_time(models: ModelSet, layout: Layout, op: CommOp) -> OpTime:
    """One kind of communication with its predicted time per call, the NICs' sharing included."""
    def compute() -> CommTime:
        if op.size_bytes > MAX_SIZE_BYTES:  # every model prices calls up to 16 TiB: say which input made it larger
            raise UsageError(f"params is too large: its {op.purpose} make a bucket of {op.size_bytes:.3g} "
                             f"bytes ({op.collective}), over the 16 TiB a fitted sweep prices; give fewer "
                             f"parameters")
        alone = models.time(op.collective, op.size_bytes, op.group_size, op.link_class, op.nodes)
        return shared_time(models, op, op.size_bytes, alone, sharing_groups(layout, op), layout.world,
                           layout.nodes)
    return OpTime(op, _memo(models, ("call", *_call_key(layout, op)), compute))


def default_micro_batches(cfg: CcrConfig, layout: Layout) -> int:
    """Micro-batches per step: the configured number, else Megatron's m = 4p with a pipeline, else 1."""
    if cfg.micro_batches is not None:
        return cfg.micro_batches
    # m >= 4p keeps the bubble under ~20%; no accumulation otherwise.
    return 4 * layout.pp if layout.pp > 1 else 1


@dataclass(frozen=True)
class _Comm:
    """Communication of one step: serial time with its interval, and the part left exposed."""

    serial_s: float
    low_s: float
    high_s: float
    exposed_s: float
    ops: tuple[OpTime, ...]


def _overlapped(cfg: CcrConfig, models: ModelSet, timed: tuple[OpTime, ...], compute_s: float, m: int,
                recompute: bool, layout: Layout) -> _Comm:
    """Communication when the gradient exchange runs in buckets under backward (its ops' calls timed as buckets)."""
    ops = []
    prof = cfg.overlap_profile or OverlapProfile()
    # Backward of the last micro-batch: 4 of 6 FLOP units (6 of 8 with recomputation), unless measured.
    share = prof.backward_share if prof.backward_share is not None else (0.75 if recompute else 2 / 3)
    backward_s = compute_s / m * share
    exposed = 0.0
    for o in timed:
        if not o.op.overlaps_backward:
            exposed += o.time_s
            ops.append(o)
            continue

        def bucket_time(size: float, o: OpTime = o) -> CommTime:
            alone = models.time(o.op.collective, size, o.op.group_size, o.op.link_class, o.op.nodes)
            return shared_time(models, o.op, size, alone, sharing_groups(layout, o.op), layout.world, layout.nodes)

        def one_bucket(size: float, bucket_time: Callable[[float], CommTime] = bucket_time) -> float:
            return bucket_time(size).time_s
        key = (*_call_key(layout, o.op), cfg.bucket_bytes, cfg.explicit_buckets)
        serial = _memo(models, ("buckets", *key),
                       lambda o=o, one_bucket=one_bucket: bucketed_serial_s(  # type: ignore[misc]
                           o.op.size_bytes, cfg.bucket_bytes, one_bucket, cfg.explicit_buckets))
        # The exchange really runs in buckets: the serial time (and so CCR) is theirs too, and so is its interval
        # and what it rests on (a bucket may lie below the measured sizes, where the whole exchange did not)
        sizes = bucket_sizes(o.op.size_bytes, cfg.bucket_bytes, cfg.explicit_buckets)
        bucket = bucket_time(max(sizes))
        share = serial / bucket.time_s if bucket.time_s > 0 else 1.0
        call = CommTime(serial, bucket.time_low_s * share, bucket.time_high_s * share,
                        f"{len(sizes)} buckets of up to {max(sizes) / 2**20:.4g} MiB: {bucket.source}",
                        bucket.calibrated)
        ops.append(dataclasses.replace(o, call=call, buckets=len(sizes)))
        ready = None if prof.ready_fractions is None else tuple(prof.ready_fractions)
        how = (ready, prof.compute_slowdown, prof.copy_in_s, prof.copy_out_s)
        per_call = _memo(models, ("exposed", *key, backward_s, how),
                         lambda o=o, one_bucket=one_bucket: overlap_exposed_s(  # type: ignore[misc]
                             o.op.size_bytes, cfg.bucket_bytes, backward_s, one_bucket, cfg.explicit_buckets,
                             prof.ready_fractions, prof.compute_slowdown, prof.copy_in_s, prof.copy_out_s))
        # Only the last micro-batch's exchange can hide; earlier calls (zero3) stay exposed.
        exposed += per_call + (o.op.calls - 1) * serial
    return _Comm(sum(o.time_s for o in ops), sum(o.op.calls * o.call.time_low_s for o in ops),
                 sum(o.op.calls * o.call.time_high_s for o in ops), exposed, tuple(ops))


def _latency_s(cfg: CcrConfig, models: ModelSet, timed: tuple[OpTime, ...]) -> float:
    """Calls (buckets, for an exchange sent in buckets) x the predicted time of a 1-byte message."""
    total = 0.0
    for o in timed:
        op = o.op
        pieces = (len(bucket_sizes(op.size_bytes, cfg.bucket_bytes, cfg.explicit_buckets))
                  if cfg.overlap and op.overlaps_backward else 1)
        alpha = min(o.call.time_s, models.latency_s(op.collective, op.group_size, op.link_class, op.nodes))
        total += op.calls * pieces * alpha
    return total


def _sync_s(cfg: CcrConfig, compute_s: float, world: int, nodes: int) -> tuple[float, float]:
    """The straggler factor and the wait for the slowest rank (see the module docstring)."""
    sf = straggler_factor(cfg.straggler_cv, world)
    slow = cfg.slow_node if nodes > 1 else 1.0
    return sf, compute_s * (sf / slow - 1.0)


def estimate_step(cfg: CcrConfig, models: ModelSet, strategy: str, world: int, batch: int,
                  gpus_per_node: int | None = None, micro_batches: int | None = None) -> StepEstimate:
    """The step model for one (strategy, world, batch) of ``cfg``.

    ``gpus_per_node`` overrides the config's (a bigger reference node); ``micro_batches`` the
    config's micro-batches per step (the plan's search weighs many).

    Raises
    ------
    UsageError
        When the layout is impossible or a collective has no model.
    """
    g = cfg.gpus_per_node if gpus_per_node is None else gpus_per_node
    layout = make_layout(strategy, world, g, cfg.tp_degree, cfg.shape.layers, cfg.pp_degree,
                         (cfg.shape.heads, cfg.shape.kv_heads))
    m = default_micro_batches(cfg, layout) if micro_batches is None else micro_batches
    work = Workload(cfg.params, cfg.shape, cfg.seq, batch, m, cfg.grad_bytes_per_value, cfg.param_bytes_per_value)
    timed = tuple(_op_time(models, layout, op) for op in comm_ops(layout, work))
    tokens = batch * cfg.seq * m
    memory = memory_per_device(layout, work, cfg.device_memory_bytes, cfg.flash_attention, cfg.memory_headroom,
                               cfg.bytes_per_param)
    # A layout that fits only with activation checkpointing pays for it in time too (8 x P x tokens).
    recompute = cfg.recompute or memory.fits is MemoryFit.WITH_CHECKPOINTING
    # Each device computes its tp share of the largest pipeline stage, which sets the pace.
    flops = training_flops(cfg.params, tokens, recompute) * stage_share(layout, cfg.shape.layers) / layout.tp
    compute_s = flops / cfg.flops_per_s
    nodes = layout.nodes  # a tp degree not dividing the node leaves GPUs idle: more nodes
    sf, sync_s = _sync_s(cfg, compute_s, world, nodes)
    one_device_s = training_flops(cfg.params, tokens, cfg.recompute) / cfg.flops_per_s
    if cfg.overlap:
        comm = _overlapped(cfg, models, timed, compute_s, m, recompute, layout)
    else:
        serial = sum(o.time_s for o in timed)
        comm = _Comm(serial, sum(o.op.calls * o.call.time_low_s for o in timed),
                     sum(o.op.calls * o.call.time_high_s for o in timed), serial, timed)
    cost = cfg.cost_per_hour(world, layout.gpus_per_node)
    return StepEstimate(strategy=layout.strategy, world=world, batch=batch, layout=layout, micro_batches=m,
                        global_batch=batch * m * layout.dp, ops=comm.ops, compute_s=compute_s,
                        bubble_s=compute_s * (layout.pp - 1) / m, comm_s=comm.serial_s, comm_low_s=comm.low_s,
                        comm_high_s=comm.high_s, exposed_s=comm.exposed_s, overlap=cfg.overlap,
                        straggler_factor=sf, samples_per_s_one_device=batch * m / one_device_s,
                        memory=memory, cost_per_hour=cost,
                        latency_s=min(comm.serial_s, _latency_s(cfg, models, timed)), sync_s=sync_s,
                        recomputed=recompute)


def node_efficiency(samples_per_s: float, world: int, gpus_per_node: int, node_samples_per_s: float) -> float:
    """Scaling efficiency against one node of the same layout, at most 1: more nodes never communicate less (where
    one node is priced from a description or a bound and more nodes from their measurement, the node's price may
    read a little slower than theirs)."""
    return min(1.0, samples_per_s / (world / gpus_per_node * node_samples_per_s))
