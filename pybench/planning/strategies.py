"""What each parallelism strategy communicates per step, over which links, and
how much memory it needs per device.

Definitions (DESIGN.md; P = parameters, b = bytes per communicated value):

- ``ddp``: one all-reduce of P b (gradients), over all ranks.
- ``zero1`` / ``zero2``: a reduce-scatter of P b (gradients) and an all-gather
  of P b (updated parameters), over all ranks.
- ``zero3`` (alias ``fsdp``): two all-gathers of P b (parameters before
  forward and before backward) and one reduce-scatter of P b, per micro-batch.
- ``tp``: four all-reduces of micro_batch x seq x hidden values per layer per
  micro-batch (two forward, two backward); inside one node.
- ``pp``: point-to-point activations (forward) and their gradients (backward)
  of micro_batch x seq x hidden values per micro-batch per stage boundary; a
  bubble of (p - 1) / (m + p - 1).
- ``tp+dp``: tensor parallel inside the node (degree = GPUs per node unless
  given), data parallel (all-reduce of P b / tp) across nodes.
- ``tp+pp+dp`` (3D): tensor parallel inside the node, pipeline stages across
  nodes (degree ``pp_degree``, default 2), data parallel over the rest
  (all-reduce of the largest stage's P b ceil(L / pp) / L, over tp). TP all-reduces cover the stage's layers only;
  stage boundaries send the full micro_batch x seq x hidden activations (no
  scatter-gather optimisation, so an upper bound).

Sizes are the collective's size argument as nccl-tests defines it (all-gather:
output buffer; reduce-scatter: input buffer), which is what a fitted model
predicts from. ``wire_bytes`` are the bytes each rank actually sends with ring
algorithms (size x bus-bandwidth factor).

Link class: a group whose ranks live on more than one node is ``inter-node``
(its ring is limited by the network), else ``intra-node``. Ranks fill nodes in
order: rank r sits on node r // gpus_per_node, where a layout's ``gpus_per_node`` is
the ranks it runs per node: all the node's GPUs, except for a tensor-parallel degree
that does not divide them (``make_layout``).
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass

from pybench.collectives import COLLECTIVES
from pybench.errors import UsageError
from pybench.planning.text_enum import TextEnum
from pybench.planning.transformer import TransformerShape

__all__ = [
    "STRATEGIES", "Layout", "Workload", "CommOp", "MemoryEstimate", "canonical_strategy",
    "make_layout", "comm_ops", "grad_comm_bytes", "WIRE_BYTES_PER_VALUE", "memory_per_device",
    "activation_bytes_per_sbh", "bubble_fraction", "INTRA", "INTER",
    "BYTES_PER_PARAM", "BYTES_PER_PARAM_FP32_GRADS", "ACCOUNTINGS", "MemoryFit", "MEMORY_HEADROOM", "stage_share",
]

INTRA = "intra-node"
INTER = "inter-node"
STRATEGIES = ("ddp", "zero1", "zero2", "zero3", "tp", "pp", "tp+dp", "tp+pp+dp")
_ALIASES = {"3d": "tp+pp+dp", "dp+tp+pp": "tp+pp+dp", "tp+dp+pp": "tp+pp+dp",
            "fsdp": "zero3", "dp": "ddp", "zero": "zero1", "zero-1": "zero1", "zero-2": "zero2",
            "zero-3": "zero3", "dp+tp": "tp+dp", "hybrid": "tp+dp"}

# One headroom rule for every memory verdict (issue 14): a step "fits" when it leaves this share
# of device memory for the CUDA context, allocator fragmentation and the buffers the estimate
# does not count. The plan's one-device verdict and every row of the CCR table use it.
MEMORY_HEADROOM = 0.8

# Mixed-precision Adam, the classic accounting (ZeRO paper, Rajbhandari et al. 2020):
# bf16 weights 2 + bf16 gradients 2 + fp32 master weights 4 + Adam m 4 + Adam v 4.
BYTES_PER_PARAM = {"weights": 2, "grads": 2, "optimizer": 12}
# The 18 B/param accounting: the same with fp32 gradients (frameworks without a distributed
# optimizer that keep gradients in fp32, e.g. Megatron's default without --use-distributed-optimizer).
BYTES_PER_PARAM_FP32_GRADS = {"weights": 2, "grads": 4, "optimizer": 12}
ACCOUNTINGS = {16: BYTES_PER_PARAM, 18: BYTES_PER_PARAM_FP32_GRADS}
# Parameters and activations travel as bf16 (the weights of both accountings) by default; the gradient
# exchange follows the gradients' dtype (``comm_bytes_per_value``, fp32 with the 18 B/param accounting).
# A communication dtype the user chooses applies to the gradient exchange and ZeRO's parameter gathers.
WIRE_BYTES_PER_VALUE = 2


def grad_comm_bytes(bytes_per_param: int) -> int:
    """Bytes per value of the gradient exchange an accounting implies: its gradients' dtype."""
    return ACCOUNTINGS[bytes_per_param]["grads"]


def canonical_strategy(name: str) -> str:
    """Normalise a strategy name (``fsdp`` -> ``zero3``); UsageError when unknown."""
    key = name.strip().lower().replace("_", "")
    key = _ALIASES.get(key, key)
    if key not in STRATEGIES:
        raise UsageError(f"unknown strategy {name!r}; known: {', '.join(STRATEGIES)} (fsdp = zero3)")
    return key


def bubble_fraction(stages: int, micro_batches: int) -> float:
    """Pipeline bubble: the idle fraction (p - 1) / (m + p - 1) of a GPipe/1F1B schedule."""
    if stages < 1 or micro_batches < 1:
        raise UsageError(f"pipeline stages and micro-batches must be at least 1, got {stages} and {micro_batches}")
    return (stages - 1) / (micro_batches + stages - 1)


@dataclass(frozen=True)
class Layout:
    """How ``world`` ranks split into data (dp), tensor (tp) and pipeline (pp) parallel groups."""

    strategy: str
    world: int
    gpus_per_node: int  # ranks per node: the node's GPUs less those left idle
    dp: int
    tp: int = 1
    pp: int = 1
    idle_per_node: int = 0  # GPUs of each node left idle so that no tp group straddles two nodes

    @property
    def nodes(self) -> int:
        return math.ceil(self.world / self.gpus_per_node)

    def to_dict(self) -> dict:
        # gpus_per_node is the node's in the file; ranks_per_node what the layout runs on each
        return {**asdict(self), "gpus_per_node": self.gpus_per_node + self.idle_per_node,
                "ranks_per_node": self.gpus_per_node, "nodes": self.nodes}

    def __str__(self) -> str:
        # "@5/node": 5 ranks on each node, the rest of its GPUs idle
        idle = f"@{self.gpus_per_node}/node" if self.idle_per_node else ""
        return f"dp{self.dp}xtp{self.tp}xpp{self.pp}{idle}"


def _check_heads(tp: int, heads: tuple[int, int]) -> None:
    """UsageError where a tensor-parallel degree splits an attention or key/value head across ranks."""
    attention, kv = heads
    if tp > 1 and attention and (attention % tp or kv % tp):
        fits = [t for t in range(1, max(attention, 1) + 1) if attention % t == 0 and kv % t == 0 and t <= 64]
        raise UsageError(f"tensor-parallel degree {tp} does not divide the model's {attention} attention heads and "
                         f"{kv} key/value heads (each rank holds whole heads, as Megatron and NeMo require): use a "
                         f"degree among {', '.join(map(str, fits))}, or give the model's heads (--heads) where it "
                         f"has others")


def make_layout(strategy: str, world: int, gpus_per_node: int, tp_degree: int | None = None,
                layers: int | None = None, pp_degree: int | None = None, heads: tuple[int, int] = (0, 0)) -> Layout:
    """Check a (strategy, world) combination and return its layout.

    Raises
    ------
    UsageError
        For world or gpus_per_node below 1; ``tp`` on more ranks than one node
        holds; ``tp+dp`` / ``tp+pp+dp`` whose world is not a multiple of GPUs
        per node (or of tp x pp), or whose TP degree exceeds or does not divide
        GPUs per node; ``pp`` with more stages than layers; a tensor-parallel degree that does not divide
        ``heads``, the model's (attention, key/value) heads where given (each rank holds whole heads, as
        Megatron and NeMo require).
    """
    strategy = canonical_strategy(strategy)
    if world < 1:
        raise UsageError(f"world size must be at least 1, got {world}")
    if gpus_per_node < 1:
        raise UsageError(f"gpus_per_node must be at least 1, got {gpus_per_node}")
    g = gpus_per_node
    if strategy in ("ddp", "zero1", "zero2", "zero3"):
        return Layout(strategy, world, g, dp=world)
    if strategy == "tp":
        if world > g:
            raise UsageError(f"tp on {world} ranks: tensor parallelism needs its group inside one node, "
                             f"which has {g} GPUs; use tp+dp (tp inside the node, dp across) or pp")
        _check_heads(world, heads)
        return Layout(strategy, world, g, dp=1, tp=world)
    if strategy == "pp":
        _check_stages(world, layers)
        return Layout(strategy, world, g, dp=1, pp=world)
    # tp+dp and tp+pp+dp
    t = g if tp_degree is None else tp_degree
    if t < 1 or t > g:
        raise UsageError(f"{strategy}: tensor-parallel degree {t} must lie in 1-{g}, the GPUs per node "
                         f"(a tp group larger than a node would cross the network for every layer)")
    # Any world the tp degree divides. Ranks fill nodes in order: a degree dividing the node keeps every tp
    # group inside one node (tp2 x dp3 on 6 of 8, tp4 x dp3 on 12). One that does not (tp 5 or 3 on nodes of
    # 8) runs as Megatron and NeMo users run it once the world spans nodes: as many ranks per node as whole tp
    # groups fit (5 or 6 of 8), the other GPUs idle, so no group's per-layer all-reduce crosses the network.
    used = g - g % t
    if world > used:
        g, idle = used, g - used
    else:
        idle = 0
    if strategy == "tp+dp":
        if world % t:
            raise UsageError(f"tp+dp on {world} ranks: world must be a multiple of the tensor-parallel degree {t}")
        _check_heads(t, heads)
        return Layout(strategy, world, g, dp=world // t, tp=t, idle_per_node=idle)
    p = 2 if pp_degree is None else pp_degree
    if p < 1:
        raise UsageError(f"tp+pp+dp: pipeline degree must be at least 1, got {p}")
    if world % (t * p):  # before the layers: a depth past the world is wrong whatever the layers
        raise UsageError(f"tp+pp+dp on {world} ranks: world must be a multiple of tp x pp = {t} x {p} = {t * p}")
    _check_stages(p, layers)
    _check_heads(t, heads)
    return Layout(strategy, world, g, dp=world // (t * p), tp=t, pp=p, idle_per_node=idle)


def stage_share(layout: Layout, layers: int) -> float:
    """The share of the model's layers on the largest pipeline stage: ceil(L / p) / L (1 without a pipeline).

    Stages hold whole layers, so with a depth that does not divide the layers (3 stages of 32) the
    largest stage sets the step's pace and the memory a device needs.
    """
    return math.ceil(layers / layout.pp) / layers if layout.pp > 1 else 1.0


def _check_stages(stages: int, layers: int | None) -> None:
    if layers is not None and stages > layers:
        raise UsageError(f"pp with {stages} stages: only {layers} layers to split into stages; "
                         f"use at most {layers} stages or combine with dp")


@dataclass(frozen=True)
class Workload:
    """One training step's size as a rank group sees it.

    Attributes
    ----------
    params : int
        Parameter count P used for gradients and FLOPs.
    shape : TransformerShape
        Gives hidden and layers for TP/PP activations.
    seq : int
        Sequence length.
    batch : int
        Micro-batch size (sequences) per data-parallel replica.
    micro_batches : int
        Micro-batches per step (gradient accumulation, pipeline micro-batches).
    comm_bytes_per_value : int
        b: bytes per value of the gradient exchange (2 = bf16, 4 = fp32 gradients).
    param_bytes_per_value : int
        Bytes per value of the parameter all-gathers of ZeRO (the bf16 weights both accountings hold,
        ``WIRE_BYTES_PER_VALUE``, unless a communication dtype says otherwise). Tensor- and
        pipeline-parallel activations always travel at the compute precision (bf16).
    """

    params: int
    shape: TransformerShape
    seq: int
    batch: int
    micro_batches: int = 1
    comm_bytes_per_value: int = 2
    param_bytes_per_value: int = WIRE_BYTES_PER_VALUE

    def __post_init__(self) -> None:
        for label in ("params", "seq", "batch", "micro_batches", "comm_bytes_per_value", "param_bytes_per_value"):
            if getattr(self, label) < 1:
                raise UsageError(f"{label.replace('_', ' ')} must be at least 1, got {getattr(self, label)}")

    @property
    def activation_bytes(self) -> int:
        """One micro-batch's hidden states: batch x seq x hidden bf16 values."""
        return self.batch * self.seq * self.shape.hidden * WIRE_BYTES_PER_VALUE

    def to_dict(self) -> dict:
        return {"params": self.params, "shape": self.shape.to_dict(), "seq": self.seq, "batch": self.batch,
                "micro_batches": self.micro_batches, "comm_bytes_per_value": self.comm_bytes_per_value,
                "param_bytes_per_value": self.param_bytes_per_value}


@dataclass(frozen=True)
class CommOp:
    """One kind of communication a rank does in a step.

    Attributes
    ----------
    purpose : str
        What it moves, e.g. ``gradients``, ``parameters (forward)``.
    collective : str
        allreduce, allgather, reducescatter or sendrecv.
    size_bytes : int
        Size argument of one call (nccl-tests convention).
    calls : int
        Calls per step.
    group_size : int
        Ranks taking part.
    link_class : str
        ``intra-node`` or ``inter-node``.
    overlaps_backward : bool
        True for the gradient exchange, which can run in buckets under backward.
    nodes : int
        Nodes the group's ranks lie on, as the layout places them (1 inside a node): what the network
        joins for it, which sets the bytes and levels of NCCL's tree across nodes.
    """

    purpose: str
    collective: str
    size_bytes: int
    calls: int
    group_size: int
    link_class: str
    overlaps_backward: bool = False
    nodes: int = 1

    @property
    def bytes_per_step(self) -> int:
        """Size argument summed over the step's calls."""
        return self.size_bytes * self.calls

    @property
    def wire_bytes_per_step(self) -> float:
        """Bytes this rank sends per step with ring algorithms (size x bus factor)."""
        return self.bytes_per_step * COLLECTIVES[self.collective].busbw_factor(self.group_size)

    def to_dict(self) -> dict:
        return {**asdict(self), "bytes_per_step": self.bytes_per_step,
                "wire_bytes_per_step": self.wire_bytes_per_step}


def _group_link(group_span_ranks: int, gpus_per_node: int) -> str:
    return INTER if group_span_ranks > gpus_per_node else INTRA


def _nodes_of(ranks: range, gpus_per_node: int) -> int:
    """Nodes the ranks lie on, ranks placed node by node (``gpus_per_node`` on each)."""
    return len({r // gpus_per_node for r in ranks})


def comm_ops(layout: Layout, work: Workload) -> tuple[CommOp, ...]:
    """The communication of one step for one rank (a middle stage for ``pp``).

    Returns an empty tuple when nothing is communicated (world 1).
    """
    s, g, P, b = layout.strategy, layout.gpus_per_node, work.params, work.comm_bytes_per_value
    w = work.param_bytes_per_value  # the bf16 weights, unless a communication dtype was chosen
    m, L = work.micro_batches, work.shape.layers
    ops: list[CommOp] = []
    if s in ("ddp", "zero1", "zero2", "zero3") and layout.dp > 1:
        link = _group_link(layout.world, g)
        n, spans = layout.dp, layout.nodes
        if s == "ddp":
            ops.append(CommOp("gradients", "allreduce", P * b, 1, n, link, True, spans))
        elif s in ("zero1", "zero2"):
            ops.append(CommOp("gradients", "reducescatter", P * b, 1, n, link, True, spans))
            ops.append(CommOp("parameters (after step)", "allgather", P * w, 1, n, link, nodes=spans))
        else:
            ops.append(CommOp("parameters (forward)", "allgather", P * w, m, n, link, nodes=spans))
            ops.append(CommOp("parameters (backward)", "allgather", P * w, m, n, link, nodes=spans))
            ops.append(CommOp("gradients", "reducescatter", P * b, m, n, link, True, spans))
    if s in ("tp", "tp+dp", "tp+pp+dp") and layout.tp > 1:
        # Megatron: one all-reduce after attention and one after the MLP, forward and backward,
        # for the layers this rank's pipeline stage holds.
        stage_layers = math.ceil(L / layout.pp)
        # A degree that does not divide the node runs whole groups per node (make_layout): never across.
        tp_link = INTER if g % layout.tp and layout.world > g else INTRA
        ops.append(CommOp("activations (tensor parallel)", "allreduce", work.activation_bytes,
                          4 * stage_layers * m, layout.tp, tp_link,
                          nodes=_nodes_of(range(layout.tp), g) if tp_link == INTER else 1))
    if s in ("pp", "tp+pp+dp") and layout.pp > 1:
        # A middle stage sends its activations forward and their gradients backward, once per
        # micro-batch; consecutive stages are tp ranks apart, so they cross nodes when tp x pp > g.
        replica = layout.tp * layout.pp
        # A replica that does not divide the node can straddle a node boundary somewhere in the world.
        link = INTER if replica > g or (g % replica and layout.world > g) else INTRA
        ops.append(CommOp("activations (pipeline)", "sendrecv", work.activation_bytes, 2 * m, 2, link,
                          nodes=2 if link == INTER else 1))
    if s in ("tp+dp", "tp+pp+dp") and layout.dp > 1:
        # The DP group holds one rank per model replica (tp x pp ranks apart).
        stride = layout.tp * layout.pp
        span = (layout.dp - 1) * stride + 1
        # The largest stage's share of the parameters (ceil(L / p) of L layers), split over tp.
        ops.append(CommOp("gradients", "allreduce", P * b * math.ceil(L / layout.pp) // (L * layout.tp), 1,
                          layout.dp, _group_link(span, g), True, _nodes_of(range(0, span, stride), g)))
    return tuple(ops)


class MemoryFit(TextEnum):
    """Whether a step fits a device's memory; the values read as they always printed."""

    FITS = "fits"
    WITH_CHECKPOINTING = "fits with checkpointing"
    DOES_NOT_FIT = "does not fit"


@dataclass(frozen=True)
class MemoryEstimate:
    """Memory one device needs for a step, in bytes.

    Weights, gradients and optimizer state follow the 16 bytes/param accounting
    (``BYTES_PER_PARAM``) divided by how the strategy shards them. Activations
    follow Korthikanti et al. 2022 (16-bit, per layer per micro-batch):
    ``s b h (34 + 5 a s / h)`` without tensor parallelism and
    ``s b h (10 + 24 / t + 5 a s / (h t))`` with it, the 24 adjusted to the shape's grouped-query
    attention and MLP width and gating (:func:`activation_bytes_per_sbh`); the ``5 a s / h`` term
    (attention scores) is dropped with flash attention. Full activation
    checkpointing keeps each layer's input (2 s b h) plus one layer's full
    activations during recomputation. Embedding/logit buffers, the CUDA context
    and fragmentation are not counted.
    """

    weights_bytes: float
    grads_bytes: float
    optimizer_bytes: float
    activations_bytes: float
    activations_checkpointed_bytes: float
    device_bytes: float
    headroom: float = MEMORY_HEADROOM

    @property
    def usable_bytes(self) -> float:
        """Device memory a step may use: ``headroom`` of it (see ``MEMORY_HEADROOM``)."""
        return self.headroom * self.device_bytes

    @property
    def states_bytes(self) -> float:
        return self.weights_bytes + self.grads_bytes + self.optimizer_bytes

    @property
    def total_bytes(self) -> float:
        """Without activation checkpointing."""
        return self.states_bytes + self.activations_bytes

    @property
    def total_checkpointed_bytes(self) -> float:
        return self.states_bytes + self.activations_checkpointed_bytes

    @property
    def fits(self) -> MemoryFit:
        """``fits``, ``fits with checkpointing`` or ``does not fit`` within :attr:`usable_bytes`."""
        if self.total_bytes <= self.usable_bytes:
            return MemoryFit.FITS
        if self.total_checkpointed_bytes <= self.usable_bytes:
            return MemoryFit.WITH_CHECKPOINTING
        return MemoryFit.DOES_NOT_FIT

    @property
    def fits_at_all(self) -> bool:
        """True when the step fits, with or without activation checkpointing."""
        return self.fits is not MemoryFit.DOES_NOT_FIT

    @property
    def needed_bytes(self) -> float:
        """What the step needs per device: checkpointed when only that fits, else the full figure."""
        return self.total_checkpointed_bytes if self.fits is MemoryFit.WITH_CHECKPOINTING else self.total_bytes

    def to_dict(self) -> dict:
        return {**asdict(self), "states_bytes": self.states_bytes, "total_bytes": self.total_bytes,
                "total_checkpointed_bytes": self.total_checkpointed_bytes, "fits": self.fits}

    def __repr__(self) -> str:
        gb = 1e9
        return (f"MemoryEstimate(weights {self.weights_bytes / gb:.2f} GB + grads {self.grads_bytes / gb:.2f} GB"
                f" + optimizer {self.optimizer_bytes / gb:.2f} GB + activations {self.activations_bytes / gb:.2f} GB"
                f" ({self.activations_checkpointed_bytes / gb:.2f} GB checkpointed) of {self.device_bytes / gb:.0f} GB"
                f" x {self.headroom:g}:"
                f" {self.fits})")


def activation_bytes_per_sbh(shape: TransformerShape, tp: int = 1) -> float:
    """Bytes of one layer's stored activations per (sequence x batch x hidden) element, without the scores.

    Korthikanti et al. 2022 count 34 for GPT (10 + 24 / t with tensor parallelism): 10 that TP does not
    split (two layer-norm inputs 4, attention and MLP inputs 4, two dropout masks 2) and 24 it does:
    Q, K and V 6, the attention output projection's input 2, and the MLP's 16 (its up projection's
    output and the activation's output, 2 x 4h values of 2 bytes). With grouped-query attention K and V
    are kv_heads / heads as wide; with another MLP width the 16 scales as ffn / hidden; a gated MLP
    (SwiGLU) keeps three ffn-wide tensors (gate, up and their product), not two.
    """
    kv = shape.kv_heads / shape.heads
    mlp = (3 if shape.gated_mlp else 2) * 2 * shape.ffn / shape.hidden
    return 10 + (2 + 4 * kv + 2 + mlp) / tp


def memory_per_device(layout: Layout, work: Workload, device_bytes: float, flash_attention: bool = True,
                      headroom: float = MEMORY_HEADROOM, bytes_per_param: int = 16) -> MemoryEstimate:
    """Memory per device for ``layout`` running ``work`` (see :class:`MemoryEstimate`).

    ``headroom``: the share of ``device_bytes`` a step may use to "fit". ``bytes_per_param``:
    16 (bf16 gradients) or 18 (fp32 gradients, no distributed optimizer), see ``ACCOUNTINGS``.
    """
    if not 0 < headroom <= 1:
        raise UsageError(f"memory_headroom must lie in (0, 1], got {headroom}")
    if bytes_per_param not in ACCOUNTINGS:
        raise UsageError(f"bytes_per_param must be one of {', '.join(map(str, ACCOUNTINGS))}, got {bytes_per_param}")
    accounting = ACCOUNTINGS[bytes_per_param]
    P, n = work.params, layout.dp
    wb, gb, ob = (float(accounting[k] * P) for k in ("weights", "grads", "optimizer"))
    s = layout.strategy
    if s == "zero1":
        ob /= n
    elif s == "zero2":
        gb, ob = gb / n, ob / n
    elif s == "zero3":
        wb, gb, ob = wb / n, gb / n, ob / n
    # The largest pipeline stage holds ceil(L / p) of the L layers (1 / p when p divides L), split over tp.
    model_split = layout.tp / stage_share(layout, work.shape.layers)
    wb, gb, ob = wb / model_split, gb / model_split, ob / model_split

    sh, t = work.shape, layout.tp
    sbh = work.seq * work.batch * sh.hidden
    attn_term = 0.0 if flash_attention else 5 * sh.heads * work.seq / (sh.hidden * t)
    per_layer = sbh * (activation_bytes_per_sbh(sh, t) + attn_term)
    # 1F1B: the first stage keeps min(m, p) micro-batches of its L/p layers in flight.
    layers_per_stage = math.ceil(sh.layers / layout.pp)
    in_flight = min(work.micro_batches, layout.pp)
    act = per_layer * layers_per_stage * in_flight
    act_ckpt = 2.0 * sbh * layers_per_stage * in_flight + per_layer
    return MemoryEstimate(float(wb), float(gb), float(ob), act, min(act, act_ckpt), float(device_bytes), headroom)
