"""Parameter counts, transformer shapes and the GEMMs of one training step.

A parameter count such as ``7B`` maps to a standard decoder-only transformer
shape (GPT-3 / Llama tables below). Counts use *decimal* suffixes
(K = 1e3, M = 1e6, B = G = 1e9, T = 1e12), as model names do; message sizes
(``pybench.sizes``) use binary suffixes instead.

A count that is not in the table gets a derived shape with the usual aspect
ratio hidden / layers ~ 128 and ``12 * layers * hidden**2 ~ params``
(embeddings ignored), hidden rounded to a multiple of 128 so heads are 128 wide.

GEMM convention: a linear layer computes ``Y[M, N] = X[M, K] @ W[K, N]`` with
M = tokens in the micro-batch. Its backward pass is two GEMMs of the same FLOP
count: dgrad ``dX[M, K] = dY[M, N] @ W.T`` (m, k, n = M, N, K) and wgrad
``dW[K, N] = X.T @ dY`` (m, k, n = K, M, N). Each costs ``2 * m * k * n`` FLOPs.
"""

from __future__ import annotations

import math
import re
from dataclasses import asdict, dataclass

from pybench.errors import UsageError

__all__ = [
    "TransformerShape", "Gemm", "SHAPES", "parse_param_count", "format_param_count",
    "shape_for_params", "derive_shape", "shape_from_dims", "step_gemms", "training_flops", "SMALLEST_DERIVED",
    "check_derivable",
]

_COUNT_RE = re.compile(r"^\s*(\d+(?:\.\d*)?|\.\d+)(?:[eE](\d{1,3}))?\s*([KMBGT]?)\s*$", re.IGNORECASE | re.ASCII)
_COUNT_SUFFIX = {"": 1, "K": 10**3, "M": 10**6, "B": 10**9, "G": 10**9, "T": 10**12}


def parse_param_count(text: str | int) -> int:
    """Parse a parameter count such as ``7B``, ``1.3B``, ``350M``, ``7e9`` or ``125000000``.

    Suffixes are decimal (K = 1e3, M = 1e6, B/G = 1e9, T = 1e12).

    Raises
    ------
    UsageError
        When the text is not a positive count.
    """
    if isinstance(text, bool):
        raise UsageError(f"parameter count {text!r} is not a number; use e.g. 7B, 1.3B, 350M")
    if isinstance(text, int):
        value = text
    else:
        m = _COUNT_RE.match(str(text))
        if not m:
            raise UsageError(f"parameter count {text!r} is not a count; use e.g. 125M, 1.3B, 7B, 70B or 7e9")
        mant, exp, suffix = m.groups()
        power = int(exp) if exp else 0
        scaled = float(mant) * 10.0 ** min(power, 300) * _COUNT_SUFFIX[suffix.upper()]
        if power > 300 or not math.isfinite(scaled) or scaled > 10**15:
            raise UsageError(f"parameter count {text!r} is implausibly large (over 1e15); use e.g. 70B")
        value = round(scaled)
    if value <= 0:
        raise UsageError(f"parameter count {text!r} must be positive; use e.g. 7B")
    if value > 10**15:
        raise UsageError(f"parameter count {text!r} is implausibly large (over 1e15); use e.g. 70B")
    return int(value)


def format_param_count(n: int) -> str:
    """Short decimal form: 7_000_000_000 -> '7B', 1_300_000_000 -> '1.3B'."""
    for suffix, scale in (("T", 10**12), ("B", 10**9), ("M", 10**6), ("K", 10**3)):
        if n >= scale:
            return f"{n / scale:.3g}{suffix}"
    return str(n)


@dataclass(frozen=True)
class TransformerShape:
    """Shape of a decoder-only transformer.

    Attributes
    ----------
    name : str
        Table name (``7B``), ``derived`` or ``custom``.
    hidden, layers, heads, ffn, vocab : int
        Model width, depth, attention heads, MLP inner width, vocabulary.
    kv_heads : int
        Key/value heads (grouped-query attention); equals ``heads`` without GQA.
    gated_mlp : bool
        True for SwiGLU-style MLPs (Llama): the up projection is ``2 * ffn`` wide
        (gate and up fused) and the MLP has ``3 * hidden * ffn`` weights.
    """

    name: str
    hidden: int
    layers: int
    heads: int
    ffn: int
    vocab: int
    kv_heads: int = 0
    gated_mlp: bool = False

    def __post_init__(self) -> None:
        for field in ("hidden", "layers", "heads", "ffn", "vocab"):
            if getattr(self, field) <= 0:
                raise UsageError(f"transformer {field} must be positive, got {getattr(self, field)}")
        if self.kv_heads == 0:
            object.__setattr__(self, "kv_heads", self.heads)
        if self.hidden % self.heads:
            raise UsageError(f"hidden {self.hidden} is not a multiple of heads {self.heads}")

    @property
    def head_dim(self) -> int:
        """Width of one attention head."""
        return self.hidden // self.heads

    @property
    def layer_params(self) -> int:
        """Weights of one layer (attention + MLP; biases and norms ignored)."""
        qkv = self.hidden * (self.hidden + 2 * self.kv_heads * self.head_dim)
        attn_out = self.hidden * self.hidden
        mlp = (3 if self.gated_mlp else 2) * self.hidden * self.ffn
        return qkv + attn_out + mlp

    @property
    def param_count(self) -> int:
        """Weights of the whole model: layers plus one (tied) embedding table."""
        return self.layers * self.layer_params + self.vocab * self.hidden

    def to_dict(self) -> dict:
        return asdict(self)

    @classmethod
    def from_dict(cls, d: dict) -> TransformerShape:
        return cls(**{k: d[k] for k in ("name", "hidden", "layers", "heads", "ffn", "vocab")},
                   kv_heads=int(d.get("kv_heads", 0)), gated_mlp=bool(d.get("gated_mlp", False)))

    def __str__(self) -> str:
        gqa = f", kv_heads={self.kv_heads}" if self.kv_heads != self.heads else ""
        mlp = "gated" if self.gated_mlp else "plain"
        return (f"{self.name}: hidden={self.hidden} layers={self.layers} heads={self.heads}{gqa} "
                f"ffn={self.ffn} ({mlp}) vocab={self.vocab} ~{format_param_count(self.param_count)} params")


# Nominal count -> shape. GPT-3 paper (Brown et al. 2020, table 2.1) up to 6.7B and
# 175B; Llama 2 (Touvron et al. 2023) for 7B, 13B and 70B (gated MLP, GQA on 70B).
SHAPES: dict[int, TransformerShape] = {
    125 * 10**6: TransformerShape("125M", 768, 12, 12, 3072, 50257),
    350 * 10**6: TransformerShape("350M", 1024, 24, 16, 4096, 50257),
    760 * 10**6: TransformerShape("760M", 1536, 24, 16, 6144, 50257),
    1300 * 10**6: TransformerShape("1.3B", 2048, 24, 16, 8192, 50257),
    2700 * 10**6: TransformerShape("2.7B", 2560, 32, 32, 10240, 50257),
    6700 * 10**6: TransformerShape("6.7B", 4096, 32, 32, 16384, 50257),
    7 * 10**9: TransformerShape("7B", 4096, 32, 32, 11008, 32000, gated_mlp=True),
    13 * 10**9: TransformerShape("13B", 5120, 40, 40, 13824, 32000, gated_mlp=True),
    70 * 10**9: TransformerShape("70B", 8192, 80, 64, 28672, 32000, kv_heads=8, gated_mlp=True),
    175 * 10**9: TransformerShape("175B", 12288, 96, 96, 49152, 50257),
}


def derive_shape(params: int, vocab: int = 50257) -> TransformerShape:
    """A plausible shape for a count not in the table, embedding included.

    Counts the way the table does (``param_count``: 12 L h^2 for the layers plus
    the tied vocab x h embedding), so a small model is not silently two or three
    times the size asked for (at 20M the embedding alone is over half). Among
    hidden sizes in steps of 64, keeps those whose layer count lands the total
    within 10% and takes the one whose h / L is nearest the usual 128 (in log
    ratio); when none lands that close, the closest total.
    """
    candidates = []
    for hidden in range(128, 64 * 1024 + 1, 64):
        rest = params - vocab * hidden
        if rest < 12 * hidden**2 * 0.5:
            break
        layers = max(1, round(rest / (12 * hidden**2)))
        total = layers * 12 * hidden**2 + vocab * hidden
        candidates.append((abs(total / params - 1), abs(math.log(hidden / layers / 128)), hidden, layers))
    if not candidates:  # smaller than one layer plus the embedding at h = 128
        hidden, layers = 128, 1
    else:
        close = [c for c in candidates if c[0] <= 0.10]
        best = min(close, key=lambda c: c[1]) if close else min(candidates)
        hidden, layers = best[2], best[3]
    heads = hidden // 128 if hidden % 128 == 0 else hidden // 64  # head size 128, or 64 where 128 does not divide
    return TransformerShape("derived", hidden, layers, heads, 4 * hidden, vocab)


# The smallest shape derive_shape makes: one layer at hidden 128 and the 50257-token embedding (~6.63M).
SMALLEST_DERIVED = TransformerShape("derived", 128, 1, 1, 512, 50257)


def check_derivable(params: int) -> None:
    """UsageError for a count below :data:`SMALLEST_DERIVED`'s, which ``shape_for_params`` would give a larger
    shape than the count (the embedding alone is larger): pricing the count given beside that shape's
    activations would mix two models. ``ccr`` and ``plan`` (their commands, and :func:`pybench.plan`) call it
    before deriving a shape; the profiler, which prices its own small models' gradients only, does not."""
    smallest = SMALLEST_DERIVED.param_count
    if params < smallest:
        said = format_param_count(smallest)
        raise UsageError(f"params={format_param_count(params)} is below the smallest model the planner derives "
                         f"a shape for, {said} ({smallest} params: hidden 128, 1 layer, a 50257-token "
                         f"embedding); give at least {said}, or give the shape itself: hidden=H and layers=L")


def shape_for_params(params: int) -> TransformerShape:
    """Table shape for a nominal count (within 0.5%), else a derived shape (:func:`check_derivable` says
    whether one holds the count)."""
    for nominal, shape in SHAPES.items():
        if abs(params - nominal) <= 0.005 * nominal:
            return shape
    return derive_shape(params)


def shape_from_dims(hidden: int, layers: int, heads: int | None = None, ffn: int | None = None,
                    vocab: int = 50257) -> TransformerShape:
    """A custom shape from explicit ``hidden`` and ``layers`` (heads of 128, ffn = 4 h by default)."""
    if hidden <= 0 or layers <= 0:
        raise UsageError(f"hidden and layers must be positive, got {hidden} and {layers}")
    if heads is None:  # heads of 128, or of 64 where 128 does not divide the width (as derive_shape takes them)
        heads = hidden // 128 if hidden % 128 == 0 else hidden // 64 if hidden % 64 == 0 else 1
    return TransformerShape("custom", hidden, layers, heads, ffn or 4 * hidden, vocab)


@dataclass(frozen=True)
class Gemm:
    """One GEMM ``C[m, n] = A[m, k] @ B[k, n]`` of a training step.

    ``layer_op`` names the linear layer (qkv, attn_out, mlp_up, mlp_down) and
    ``phase`` the pass (forward, dgrad, wgrad).
    """

    layer_op: str
    phase: str
    m: int
    k: int
    n: int

    @property
    def name(self) -> str:
        return f"{self.layer_op}.{self.phase}"

    @property
    def flops(self) -> int:
        """Floating-point operations: one multiply and one add per m*k*n."""
        return 2 * self.m * self.k * self.n

    def to_dict(self) -> dict:
        return asdict(self)


def _linear_gemms(layer_op: str, tokens: int, k_in: int, n_out: int) -> list[Gemm]:
    return [
        Gemm(layer_op, "forward", tokens, k_in, n_out),
        Gemm(layer_op, "dgrad", tokens, n_out, k_in),
        Gemm(layer_op, "wgrad", k_in, tokens, n_out),
    ]


def step_gemms(shape: TransformerShape, tokens: int, tp: int = 1) -> list[Gemm]:
    """The twelve GEMMs of one layer's forward and backward pass for ``tokens`` tokens.

    Parameters
    ----------
    shape : TransformerShape
    tokens : int
        Tokens in the micro-batch (micro-batch size x sequence length): the M dimension.
    tp : int
        Tensor-parallel degree: column-parallel layers (QKV, MLP up) split N,
        row-parallel ones (attention output, MLP down) split K, as Megatron does.

    Returns
    -------
    list of Gemm
        QKV, attention output, MLP up, MLP down; each forward, dgrad, wgrad.
        Attention score GEMMs (QK^T, AV) are not included: the 6 x params x
        tokens rule that the step model uses does not count them either.
    """
    if tokens <= 0:
        raise UsageError(f"tokens per GEMM must be positive, got {tokens}")
    h = shape.hidden
    qkv_n = h + 2 * shape.kv_heads * shape.head_dim
    up_n = (2 if shape.gated_mlp else 1) * shape.ffn
    gemms = []
    gemms += _linear_gemms("qkv", tokens, h, max(1, qkv_n // tp))
    gemms += _linear_gemms("attn_out", tokens, max(1, h // tp), h)
    gemms += _linear_gemms("mlp_up", tokens, h, max(1, up_n // tp))
    gemms += _linear_gemms("mlp_down", tokens, max(1, shape.ffn // tp), h)
    return gemms


def training_flops(params: int, tokens: int, recompute: bool = False) -> int:
    """FLOPs of one training step: 6 x params x tokens (8 with full activation recomputation)."""
    return (8 if recompute else 6) * params * tokens
