"""The typed inputs of the CCR grid: :class:`CcrConfig`, and building one from plain arguments.

``ccr(cfg, models=...)`` takes a CcrConfig; the keyword form
``ccr(params, seq, batch, world, strategy, models=..., flops_per_s=...)`` builds
one with :func:`make_ccr_config`, which accepts the user's units (GB, MiB, comma
lists) and names the parameter that was wrong in every error.
"""

from __future__ import annotations

import importlib
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from pybench.errors import UsageError
from pybench.io.schemas import MAX_WORLD
from pybench.planning.compute import ComputeProfile, load_compute
from pybench.planning.overlap import OverlapProfile
from pybench.planning.strategies import (
    ACCOUNTINGS,
    MEMORY_HEADROOM,
    WIRE_BYTES_PER_VALUE,
    canonical_strategy,
    grad_comm_bytes,
)
from pybench.planning.transformer import TransformerShape, format_param_count, parse_param_count, shape_for_params

# The slowest node a plan weighs (its speed over the others'): below it a node has failed, and a step's wait
# for it would be read as a plan (1e-300 gave a 2e299 s step).
SLOWEST_NODE = 0.01

__all__ = ["CcrConfig", "make_ccr_config", "compute_warnings", "parse_list", "COMM_BYTES_PER_VALUE", "node_gpus"]

# Bytes per value of the communication dtypes ccr and plan price: bf16 or fp16, fp32 (--comm-dtype),
# and fp64 (a profiled double-precision model's gradients, pybench.profile.predict).
COMM_BYTES_PER_VALUE = (2, 4, 8)


@dataclass(frozen=True)
class CcrConfig:
    """Inputs of :func:`pybench.planning.grid.ccr` (also recorded in its result).

    Attributes
    ----------
    params : int
        Parameter count P.
    shape : TransformerShape
    seq : int
        Sequence length.
    batches, worlds : tuple of int
        Micro-batch sizes per data-parallel replica and world sizes of the grid.
    strategies : tuple of str
        Canonical strategy names (``pybench.planning.strategies.STRATEGIES``).
    gpus_per_node : int
    flops_per_s : float
        Achieved FLOP/s of one device; ``flops_source`` says where it came from.
    micro_batches, tp_degree, pp_degree : int, optional
        Micro-batches per step (default 1; 4 x stages with pp), TP and PP degrees.
    overlap : bool
        Overlap the gradient exchange with backward in buckets of ``bucket_bytes``.
    explicit_buckets : tuple of float, optional
        Real bucket sizes in reduction order (DDP reports them).
    recompute : bool
        Full activation recomputation (8 x P x tokens FLOPs).
    comm_bytes_per_value : int
        Bytes per value of the gradient exchange; None (the default) takes the gradients' dtype
        from ``bytes_per_param`` (2 for 16 B/param, 4 for 18).
    param_comm_bytes_per_value : int, optional
        Bytes per value of ZeRO's parameter all-gathers; None (the default) gathers the bf16
        weights (2). ``ccr`` and ``plan`` set it with ``comm_bytes_per_value`` when the user chose a
        communication dtype. Tensor- and pipeline-parallel activations stay at bf16.
    device_memory_bytes : float
    flash_attention : bool
    price_per_node_hour, big_node_gpus, big_node_price_per_hour : optional
        Prices for samples per dollar and breakeven.
    price_per_device_hour : float, optional
        Instead of ``price_per_node_hour``: a layout is billed for the devices it uses, not whole nodes.
    straggler_cv : float
        Coefficient of variation of per-rank compute time.
    slow_node : float
        Speed of one node relative to the others (0.9: 10% slower), in [:data:`SLOWEST_NODE`, 1].
    memory_headroom : float
        Share of device memory a step may use to "fit" (``MEMORY_HEADROOM``, 0.8).
    bytes_per_param : int
        16 (bf16 gradients) or 18 (fp32 gradients, no distributed optimizer).
    overlap_profile : OverlapProfile, optional
        Measured bucket readiness and contention (``pybench.profile.step``).
    """

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
    explicit_buckets: tuple[float, ...] | None = None
    recompute: bool = False
    comm_bytes_per_value: int | None = None
    param_comm_bytes_per_value: int | None = None
    device_memory_bytes: float = 80e9
    flash_attention: bool = True
    price_per_node_hour: float | None = None
    big_node_gpus: int | None = None
    big_node_price_per_hour: float | None = None
    straggler_cv: float = 0.0
    overlap_profile: OverlapProfile | None = None
    slow_node: float = 1.0
    memory_headroom: float = MEMORY_HEADROOM
    bytes_per_param: int = 16
    price_per_device_hour: float | None = None

    def __post_init__(self) -> None:
        if self.comm_bytes_per_value is None and self.bytes_per_param in ACCOUNTINGS:
            object.__setattr__(self, "comm_bytes_per_value", grad_comm_bytes(self.bytes_per_param))
        _check_config(self)

    @property
    def grad_bytes_per_value(self) -> int:
        """Bytes per value of the gradient exchange (resolved from the accounting when not given)."""
        return self.comm_bytes_per_value or grad_comm_bytes(self.bytes_per_param)

    @property
    def param_bytes_per_value(self) -> int:
        """Bytes per value of ZeRO's parameter all-gathers (the bf16 weights unless a comm dtype was chosen)."""
        return self.param_comm_bytes_per_value or WIRE_BYTES_PER_VALUE

    def comm_dtypes(self) -> dict[str, int]:
        """Bytes per value of each kind of exchange, as the JSON records them."""
        return {"gradients": self.grad_bytes_per_value, "parameters (zero all-gathers)": self.param_bytes_per_value,
                "activations (tp, pp)": WIRE_BYTES_PER_VALUE}

    def cost_per_hour(self, world: int, gpus_per_node: int | None = None) -> float | None:
        """What ``world`` devices cost per hour: per device when priced so, else whole nodes."""
        if self.price_per_device_hour is not None:
            return world * self.price_per_device_hour
        if self.price_per_node_hour is None:
            return None
        return -(-world // (gpus_per_node or self.gpus_per_node)) * self.price_per_node_hour

    @property
    def priced(self) -> bool:
        return self.price_per_node_hour is not None or self.price_per_device_hour is not None

    def to_dict(self) -> dict[str, Any]:
        d = dict(self.__dict__)
        d["shape"] = self.shape.to_dict()
        d["overlap_profile"] = self.overlap_profile.to_dict() if self.overlap_profile else None
        d["batches"], d["worlds"], d["strategies"] = list(self.batches), list(self.worlds), list(self.strategies)
        return d


def _check_config(c: CcrConfig) -> None:
    """One-line UsageError naming the field that cannot be used."""
    if c.bytes_per_param not in ACCOUNTINGS:
        raise UsageError(f"bytes_per_param must be one of {', '.join(map(str, ACCOUNTINGS))}, got {c.bytes_per_param}")
    for name in ("comm_bytes_per_value", "param_comm_bytes_per_value"):
        value = getattr(c, name)
        if value is not None and (isinstance(value, bool) or value not in COMM_BYTES_PER_VALUE):
            raise UsageError(f"comm_bytes_per_value must be one of {', '.join(map(str, COMM_BYTES_PER_VALUE))} "
                             f"(bytes per value: 2 for bf16 or fp16, 4 for fp32), got {value!r}")
    for name in ("params", "seq", "gpus_per_node", "comm_bytes_per_value"):
        if getattr(c, name) is None or getattr(c, name) < 1:
            raise UsageError(f"{name} must be at least 1, got {getattr(c, name)}")
    for name in ("batches", "worlds", "strategies"):
        if not getattr(c, name):
            raise UsageError(f"{name} is empty")
    for name in ("micro_batches", "tp_degree", "pp_degree", "big_node_gpus", "param_comm_bytes_per_value"):
        if getattr(c, name) is not None and getattr(c, name) < 1:
            raise UsageError(f"{name} must be at least 1, got {getattr(c, name)}")
    for name in ("flops_per_s", "bucket_bytes", "device_memory_bytes"):
        if not 0 < getattr(c, name) < math.inf:
            raise UsageError(f"{name} must be positive and finite, got {getattr(c, name)}")
    for name in ("price_per_node_hour", "big_node_price_per_hour", "price_per_device_hour"):
        if getattr(c, name) is not None and not getattr(c, name) > 0:
            raise UsageError(f"{name} must be positive, got {getattr(c, name)}")
    if (c.big_node_gpus is None) != (c.big_node_price_per_hour is None):
        raise UsageError("give both big_node_gpus and big_node_price_per_hour, or neither")
    if c.price_per_node_hour is not None and c.price_per_device_hour is not None:
        raise UsageError("give price_per_node_hour or price_per_device_hour, not both")
    if c.big_node_gpus is not None and not c.priced:
        raise UsageError("big_node_gpus needs price_per_node_hour (or price_per_device_hour) to compare costs")
    if not c.straggler_cv >= 0:
        raise UsageError(f"straggler_cv must be 0 or more, got {c.straggler_cv}")
    if c.bytes_per_param not in ACCOUNTINGS:
        raise UsageError(f"bytes_per_param must be one of {', '.join(map(str, ACCOUNTINGS))}, got {c.bytes_per_param}")
    if not 0 < c.memory_headroom <= 1:
        raise UsageError(f"memory_headroom must lie in (0, 1], got {c.memory_headroom}")
    if not SLOWEST_NODE <= c.slow_node <= 1:
        raise UsageError(f"slow_node must lie in [{SLOWEST_NODE:g}, 1] (the slow node's speed over the others'; "
                         f"one slower than that has failed: plan without it), got {c.slow_node}")
    for w in c.worlds:
        if w > MAX_WORLD:
            raise UsageError(f"world must be at most {MAX_WORLD} ranks (as pybench predict's), got {w}")


def node_gpus(gpus_per_node: int | None, system: str | None) -> int:
    """GPUs per node: ``gpus_per_node``, else the GPUs of one host of the ``system`` description (a GB200 NVL72
    tray holds 4), else 8; one that exceeds the described host's is refused (``ccr``, ``plan`` and their
    commands lay out alike)."""
    if system is None:
        return 8 if gpus_per_node is None else gpus_per_node
    described = importlib.import_module("pybench.model.system").load_system(system)
    if gpus_per_node is None:
        return int(described.gpus_per_node)  # per host, as descriptions count them
    if isinstance(gpus_per_node, int) and not isinstance(gpus_per_node, bool) \
            and gpus_per_node > described.gpus_per_node:
        raise UsageError(f"gpus_per_node {gpus_per_node} exceeds the {described.gpus_per_node} GPUs per host of "
                         f"{described.name}; give at most {described.gpus_per_node}, or describe another "
                         f"(system=NAME|FILE)")
    return gpus_per_node


def parse_list(value: int | float | str | Sequence[Any], label: str,
               conv: Callable[[Any], int] = int) -> tuple[int, ...]:
    """``1,2,4`` (or a number, or a sequence) as a tuple of whole numbers of at least 1."""
    if isinstance(value, (int, float, np.integer, np.floating)) and not isinstance(value, bool):
        items: list[Any] = [value]
    elif isinstance(value, str):
        items = value.split(",")
    elif isinstance(value, (Sequence, np.ndarray)):
        items = list(np.asarray(value).reshape(-1)) if isinstance(value, np.ndarray) else list(value)
    else:
        raise UsageError(f"{label}: {value!r} is not a list of whole numbers; use a comma list such as 1,2,4")
    out = []
    for item in items:
        if isinstance(item, bool) or (isinstance(item, (float, np.floating)) and not float(item).is_integer()):
            raise UsageError(f"{label}: {item!r} is not a whole number; use a comma list such as 1,2,4")
        try:
            v = conv(item.strip()) if isinstance(item, str) else conv(item)
        except (TypeError, ValueError, OverflowError):
            raise UsageError(f"{label}: {item!r} is not a whole number; use a comma list such as 1,2,4") from None
        if v < 1:
            raise UsageError(f"{label} must be at least 1, got {item!r}")
        out.append(v)
    if not out:
        raise UsageError(f"{label} is empty; give a comma list such as 1,2,4")
    return tuple(out)


def _flops(compute: ComputeProfile | None, flops_per_s: float | None) -> tuple[float, str]:
    """FLOP/s and where they come from: the figure given, else the profile's."""
    if flops_per_s is not None:
        try:
            flops_per_s = float(flops_per_s)
        except (TypeError, ValueError, OverflowError):
            raise UsageError(f"flops_per_s must be a number of FLOP/s, got {str(flops_per_s)[:40]}") from None
        if not 0 < flops_per_s < math.inf:
            raise UsageError(f"flops_per_s must be positive and finite, got {flops_per_s}")
        return float(flops_per_s), "given"
    if compute is not None:
        return compute.flops_per_s, f"measured: {compute.engine} {compute.dtype} on {compute.device}"
    raise UsageError("no compute figure: give compute (a compute profile from `pybench compute --json FILE`) "
                     "or flops_per_s")


def compute_warnings(compute: ComputeProfile | None, shape: TransformerShape, params: int) -> list[str]:
    """What the user should know about using ``compute``'s FLOP/s for this shape."""
    if compute is None:
        return []
    warnings = []
    if compute.shape.hidden != shape.hidden:
        warnings.append(f"compute profile was measured at hidden {compute.shape.hidden}, this model has hidden "
                        f"{shape.hidden}; FLOP/s may differ at these shapes "
                        f"(rerun compute with params={format_param_count(params)})")
    return warnings + [f"compute profile: {w}" for w in compute.warnings]


def make_ccr_config(params: int | str, seq: int, batch: int | str | Sequence[int], world: int | str | Sequence[int],
                    strategy: str | Sequence[str] = "ddp", *, compute: ComputeProfile | str | None = None,
                    flops_per_s: float | None = None, shape: TransformerShape | None = None,
                    gpus_per_node: int = 8, bucket_mb: float = 25, device_memory_gb: float = 80,
                    bucket_sizes_bytes: Sequence[float] | None = None, **fields: Any) -> CcrConfig:
    """A CcrConfig from :func:`pybench.planning.grid.ccr`'s plain arguments (see its parameters).

    ``fields`` are CcrConfig fields given as they are (gpus_per_node, micro_batches, overlap, ...).

    Raises
    ------
    UsageError
        For bad input, naming the parameter.
    """
    P = parse_param_count(params)
    seqs = parse_list(seq, "seq")
    if len(seqs) != 1:
        raise UsageError(f"seq is one sequence length, got {seq!r}")
    seq = seqs[0]
    for name, value in (("bucket_mb", bucket_mb), ("device_memory_gb", device_memory_gb)):
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise UsageError(f"{name} must be a number, got {value!r}")
        if not math.isfinite(value):
            raise UsageError(f"{name} must be finite, got {value!r}")
        if not value > 0:
            raise UsageError(f"{name} must be positive, got {value}")
    strategies = tuple(dict.fromkeys(canonical_strategy(s) for s in
                                     (strategy.split(",") if isinstance(strategy, str) else strategy)))
    profile = load_compute(compute) if isinstance(compute, str) else compute
    flops, source = _flops(profile, flops_per_s)
    return CcrConfig(params=P, shape=shape or shape_for_params(P), seq=int(seq),
                     batches=tuple(dict.fromkeys(parse_list(batch, "batch"))),  # (a count given twice: one row)
                     worlds=tuple(dict.fromkeys(parse_list(world, "world"))), strategies=strategies,
                     gpus_per_node=gpus_per_node,
                     flops_per_s=flops,
                     flops_source=source, bucket_bytes=int(bucket_mb * 2**20),
                     device_memory_bytes=device_memory_gb * 1e9,
                     explicit_buckets=tuple(bucket_sizes_bytes) if bucket_sizes_bytes else None, **fields)
