"""Time the GEMMs of a transformer training step and report achieved FLOP/s.

The figure that the CCR model needs is the FLOP/s a device *reaches* at the
step's GEMM shapes, measured here, never a datasheet peak.

Engines (all optional imports): ``torch`` (CUDA when available, else CPU),
``cupy`` (CUDA) and ``numpy`` (CPU). ``auto`` picks torch on a GPU, then cupy,
then numpy.

On a slow CPU a 7B-shape GEMM takes seconds, so the timed M dimension (tokens)
may be scaled down: FLOP/s at the real K and N is what matters. Every scaled
GEMM records both the real and the timed shape, and the profile says so.

The clock is injectable (``clock=``, a zero-argument callable returning
seconds, as ``torch.utils.benchmark.Timer(timer=...)``) so tests can check the
FLOP/s arithmetic exactly with a fake clock and a fake engine. The engines live
in :mod:`pybench.planning.engines`; the file format is :data:`pybench.io.formats.COMPUTE`.
"""

from __future__ import annotations

import datetime as _dt
import math
import os
import statistics
import time
from dataclasses import dataclass, field
from typing import Any

from pybench.errors import FileFormatError, UsageError
from pybench.io.files import read_document, refuse_existing, write_json
from pybench.io.formats import COMPUTE, check_document, stamp
from pybench.io.memory import memory_left
from pybench.planning.engines import Clock, CupyEngine, Engine, NumpyEngine, TorchEngine, get_engine, time_gemm
from pybench.planning.transformer import Gemm, TransformerShape, step_gemms

__all__ = [
    "GemmTiming", "ComputeProfile", "Engine", "NumpyEngine", "TorchEngine", "CupyEngine",
    "get_engine", "time_gemm", "profile_compute", "load_compute", "timed_tokens_for", "DTYPES",
]

DTYPES = ("bf16", "fp16", "fp32")
_DTYPE_ALIASES = {"bfloat16": "bf16", "float16": "fp16", "half": "fp16", "float32": "fp32",
                  "float": "fp32", "f32": "fp32"}
# On CPU engines each timed GEMM is capped at this many FLOPs by shrinking M
# (~0.06 s at ~250 GFLOP/s on the 2-core dev machine), keeping a 7B profile short.
DEFAULT_CPU_MAX_GEMM_FLOPS = 16e9
# M is never scaled below this: tiny GEMMs measure call overhead, not the device.
MIN_TIMED_TOKENS = 64


def canonical_compute_dtype(name: str) -> str:
    """Map bf16/fp16/fp32 and their long names to the short form."""
    key = _DTYPE_ALIASES.get(name.strip().lower(), name.strip().lower())
    if key not in DTYPES:
        raise UsageError(f"unknown compute dtype {name!r}; use one of {', '.join(DTYPES)}")
    return key


@dataclass(frozen=True)
class GemmTiming(Gemm):
    """Timing of one GEMM of the step: the GEMM (its real shape ``m, k, n``,
    name and FLOPs) and what was measured.

    ``timed_m, timed_k, timed_n`` is the shape that was timed (M, the tokens,
    may be scaled down; for wgrad tokens are the K dimension). ``flops_per_s``
    is achieved at the timed shape and is used as the estimate for the real one.
    """

    timed_m: int
    timed_k: int
    timed_n: int
    samples_s: tuple[float, ...]

    @property
    def timed_flops(self) -> int:
        """FLOPs of the GEMM that was timed."""
        return 2 * self.timed_m * self.timed_k * self.timed_n

    @property
    def median_s(self) -> float:
        """Median seconds of the timed GEMM."""
        return statistics.median(self.samples_s)

    @property
    def flops_per_s(self) -> float:
        """Achieved FLOP/s: timed FLOPs over the median time."""
        return self.timed_flops / self.median_s

    @property
    def scaled(self) -> bool:
        return (self.timed_m, self.timed_k, self.timed_n) != (self.m, self.k, self.n)

    @property
    def est_time_s(self) -> float:
        """Estimated time of the real GEMM at the achieved FLOP/s."""
        return self.flops / self.flops_per_s

    def to_dict(self) -> dict:
        return {"layer_op": self.layer_op, "phase": self.phase, "m": self.m, "k": self.k, "n": self.n,
                "timed_m": self.timed_m, "timed_k": self.timed_k, "timed_n": self.timed_n,
                "samples_s": list(self.samples_s), "median_s": self.median_s,
                "flops": self.flops, "flops_per_s": self.flops_per_s}

    @classmethod
    def from_dict(cls, d: dict) -> GemmTiming:
        g = cls(str(d["layer_op"]), str(d["phase"]), int(d["m"]), int(d["k"]), int(d["n"]),
                int(d["timed_m"]), int(d["timed_k"]), int(d["timed_n"]),
                tuple(float(x) for x in d["samples_s"]))
        if min(g.m, g.k, g.n, g.timed_m, g.timed_k, g.timed_n) < 1:
            raise ValueError(f"GEMM {g.name} has a dimension below 1")
        if not g.samples_s or not all(math.isfinite(s) and s > 0 for s in g.samples_s):
            raise ValueError(f"GEMM {g.name} needs samples_s of finite positive seconds")
        return g

    def __repr__(self) -> str:
        scaled = f" timed at {self.timed_m}x{self.timed_k}x{self.timed_n}" if self.scaled else ""
        return (f"GemmTiming({self.name} {self.m}x{self.k}x{self.n}{scaled}: "
                f"{self.median_s * 1e3:.3f} ms, {self.flops_per_s / 1e12:.3f} TFLOP/s)")


def _utc_now() -> str:
    return _dt.datetime.now(_dt.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


@dataclass(frozen=True)
class ComputeProfile:
    """Measured GEMM timings of one transformer layer's training step on one device.

    Attributes
    ----------
    engine, device, dtype : str
        What ran: engine name, device name and the dtype actually timed.
    dtype_requested : str
        The dtype asked for; differs from ``dtype`` after a fallback (numpy has no bf16).
    shape : TransformerShape
    params : int
        Nominal parameter count the profile was made for.
    seq, micro_batch : int
        Sequence length and micro-batch size: tokens = seq x micro_batch is M.
    timed_tokens : int
        M actually timed (smaller than tokens when scaled down).
    gemms : tuple of GemmTiming
    warnings : tuple of str
        Fallbacks and scalings, in words.
    """

    engine: str
    device: str
    dtype: str
    dtype_requested: str
    shape: TransformerShape
    params: int
    seq: int
    micro_batch: int
    timed_tokens: int
    gemms: tuple[GemmTiming, ...]
    repeats: int
    warnings: tuple[str, ...] = ()
    created_utc: str = field(default_factory=_utc_now)

    @property
    def tokens(self) -> int:
        return self.seq * self.micro_batch

    @property
    def scaled(self) -> bool:
        return any(g.scaled for g in self.gemms)

    @property
    def layer_flops(self) -> int:
        """FLOPs of the timed GEMMs of one layer, forward and backward, at the real shape."""
        return sum(g.flops for g in self.gemms)

    @property
    def layer_time_s(self) -> float:
        """Estimated seconds of one layer's GEMMs at the real shape."""
        return sum(g.est_time_s for g in self.gemms)

    @property
    def flops_per_s(self) -> float:
        """Achieved FLOP/s of the whole step: total FLOPs over total time (a
        FLOP-weighted harmonic mean, so slow shapes weigh as they would in a step)."""
        return self.layer_flops / self.layer_time_s

    def to_dict(self) -> dict[str, Any]:
        """The ``pybench.compute`` document (:data:`pybench.io.formats.COMPUTE`)."""
        return stamp(COMPUTE, {
            "created_utc": self.created_utc, "engine": self.engine, "device": self.device, "dtype": self.dtype,
            "dtype_requested": self.dtype_requested, "shape": self.shape.to_dict(), "params": self.params,
            "seq": self.seq, "micro_batch": self.micro_batch, "tokens": self.tokens,
            "timed_tokens": self.timed_tokens, "scaled": self.scaled, "repeats": self.repeats,
            "warnings": list(self.warnings), "flops_per_s": self.flops_per_s,
            "gemms": [g.to_dict() for g in self.gemms]})

    @classmethod
    def from_dict(cls, d: Any, source: str = "compute profile") -> ComputeProfile:
        """A profile from its document; one-line FileFormatError naming ``source`` otherwise."""
        d = check_document(d, COMPUTE, source)
        try:
            profile = cls(engine=str(d["engine"]), device=str(d["device"]), dtype=str(d["dtype"]),
                       dtype_requested=str(d.get("dtype_requested", d["dtype"])),
                       shape=TransformerShape.from_dict(d["shape"]), params=int(d["params"]),
                       seq=int(d["seq"]), micro_batch=int(d["micro_batch"]),
                       timed_tokens=int(d["timed_tokens"]),
                       gemms=tuple(GemmTiming.from_dict(g) for g in d["gemms"]),
                       repeats=int(d["repeats"]), warnings=tuple(str(w) for w in d.get("warnings", ())),
                       created_utc=str(d.get("created_utc", "")))
        except (KeyError, TypeError, ValueError, AttributeError, UsageError) as exc:
            raise FileFormatError(f"{source}: compute profile is missing or has a bad field: {exc!r}") from None
        return _consistent(profile, d, source)

    def save(self, path: str | os.PathLike, force: bool = False) -> None:
        """Write versioned JSON atomically (temp file + os.replace); refuse to overwrite unless ``force``."""
        refuse_existing(path, force)
        write_json(path, self.to_dict(), force)

    def table(self) -> str:
        """Per-GEMM table for stdout."""
        lines = [f"# compute: {self.engine} on {self.device}, dtype {self.dtype}, {self.shape}",
                 f"# tokens per GEMM (M) {self.tokens} = seq {self.seq} x micro-batch {self.micro_batch}"
                 + (f"; timed with M = {self.timed_tokens} (scaled down)" if self.scaled else ""),
                 f"{'gemm':<18}{'m':>8}{'k':>8}{'n':>8}{'GFLOP':>10}{'time(ms)':>11}{'min(ms)':>10}"
                 f"{'max(ms)':>10}{'TFLOP/s':>10}"]
        for g in self.gemms:
            lines.append(f"{g.name:<18}{g.timed_m:>8}{g.timed_k:>8}{g.timed_n:>8}{g.timed_flops / 1e9:>10.3f}"
                         f"{g.median_s * 1e3:>11.3f}{min(g.samples_s) * 1e3:>10.3f}"
                         f"{max(g.samples_s) * 1e3:>10.3f}{g.flops_per_s / 1e12:>10.3f}")
        lines.append(f"step (all GEMMs, FLOP-weighted): {self.flops_per_s / 1e9:.1f} GFLOP/s achieved; "
                     f"one layer fwd+bwd at the real shape ~{self.layer_time_s * 1e3:.2f} ms, "
                     f"{self.shape.layers} layers ~{self.layer_time_s * self.shape.layers * 1e3:.1f} ms")
        return "\n".join(lines)

    def __repr__(self) -> str:
        return (f"ComputeProfile({self.engine} on {self.device!r}, {self.dtype}, {self.shape.name} "
                f"M={self.tokens}{' (timed ' + str(self.timed_tokens) + ')' if self.scaled else ''}: "
                f"{self.flops_per_s / 1e12:.3f} TFLOP/s over {len(self.gemms)} GEMMs)")


def _consistent(profile: ComputeProfile, d: dict, source: str) -> ComputeProfile:
    """The profile, when it has GEMMs and the FLOP/s it states are the ones its GEMMs give."""
    if not profile.gemms:
        raise FileFormatError(f"{source}: compute profile has no GEMMs; remake it with `{COMPUTE.made_by}`")
    stated = d.get("flops_per_s")
    if stated is not None and not (isinstance(stated, (int, float)) and not isinstance(stated, bool)
                                   and math.isclose(stated, profile.flops_per_s, rel_tol=1e-6)):
        raise FileFormatError(f"{source}: states {stated!r} FLOP/s but its GEMMs give {profile.flops_per_s:.6g}; "
                              f"the file was edited or damaged: remake it with `{COMPUTE.made_by}`")
    return profile


def load_compute(path: str | os.PathLike) -> ComputeProfile:
    """Read a compute profile written by :meth:`ComputeProfile.save`.

    Raises
    ------
    FileFormatError
        When the file is missing, not JSON or not a compute profile.
    """
    if not os.path.exists(path):
        raise FileFormatError(f"compute profile {os.fspath(path)} does not exist; make one with "
                              f"`{COMPUTE.made_by}`")
    return ComputeProfile.from_dict(read_document(path, COMPUTE), os.fspath(path))


def timed_tokens_for(gemms: list[Gemm], tokens: int, max_gemm_flops: float | None) -> int:
    """Largest M <= tokens keeping every forward GEMM under ``max_gemm_flops``.

    Never below ``MIN_TIMED_TOKENS`` (or ``tokens`` when that is smaller); a
    multiple of 64 when scaled so the shape stays friendly to BLAS tiling.
    """
    if max_gemm_flops is None:
        return tokens
    widest = max(2 * g.k * g.n for g in gemms if g.phase == "forward")  # FLOPs per token
    m = int(max_gemm_flops // widest)
    if m >= tokens:
        return tokens
    m = max(MIN_TIMED_TOKENS, (m // 64) * 64)
    return min(tokens, m)


def _with_tokens(g: Gemm, tokens: int, timed: int) -> tuple[int, int, int]:
    """The timed shape of a GEMM when M (tokens) is scaled from ``tokens`` to ``timed``."""
    if g.phase == "wgrad":  # tokens are the contraction dimension
        return g.m, timed, g.n
    return timed, g.k, g.n


def _timed_dtype(eng: Engine, requested: str) -> tuple[str, list[str]]:
    """The dtype an engine can time for ``requested``, and the warning when it falls back."""
    if eng.supports(requested):
        return requested, []
    reason = {"numpy": "numpy has no bfloat16 and its float16 matmul bypasses BLAS",
              "cupy": "cupy has no bfloat16"}.get(eng.name, f"{eng.name} does not support it here")
    fallback = "fp16" if eng.name == "cupy" and requested == "bf16" else "fp32"
    return fallback, [f"dtype {requested} not available on engine {eng.name} ({reason}); "
                      f"timed {fallback} instead, so FLOP/s are {fallback} figures"]


_ELEMENT_BYTES = {"bf16": 2, "fp16": 2, "fp32": 4}


def _available_bytes(on_gpu: bool) -> int | None:
    """Memory a GEMM's operands may take: free device memory on a GPU (via torch), else what this
    process may allocate."""
    if on_gpu:
        try:
            import torch
            return int(torch.cuda.mem_get_info()[0])
        except Exception:  # no torch or no device query: the GPU library will say so itself
            return None
    return memory_left()  # free RAM, but also ulimit -v and the cgroup's limit: numpy fails at any of them


def _check_gemm_memory(shapes: list[tuple[int, int, int]], dtype: str, on_gpu: bool) -> None:
    """Refuse, before any allocation, a GEMM whose three operands would not fit in 80% of free memory."""
    m, k, n = max(shapes, key=lambda s: s[0] * s[1] + s[1] * s[2] + s[0] * s[2])
    need = (m * k + k * n + m * n) * _ELEMENT_BYTES.get(dtype, 4)
    free = _available_bytes(on_gpu)
    if free is not None and need > 0.8 * free:
        raise UsageError(f"the largest GEMM ({m} x {k} x {n}, {dtype}) needs {need / 1e9:.1f} GB for its operands, "
                         f"more than 80% of the {free / 1e9:.1f} GB free on this {'device' if on_gpu else 'host'}; "
                         f"give a smaller hidden size or timed_tokens")


def profile_compute(shape: TransformerShape, params: int | None = None, seq: int = 2048,
                    micro_batch: int = 1, dtype: str | None = None, engine: str | Engine = "auto",
                    repeats: int = 5, warmup: int = 1, timed_tokens: int | None = None,
                    max_gemm_flops: float | None | str = "auto",
                    clock: Clock = time.perf_counter) -> ComputeProfile:
    """Time the GEMMs of one layer's training step (QKV, attention output, MLP up and down;
    forward, dgrad, wgrad) and return a :class:`ComputeProfile`.

    Parameters
    ----------
    shape : TransformerShape
    params : int, optional
        Nominal parameter count recorded in the profile (default: the shape's count).
    seq, micro_batch : int
        Tokens per GEMM M = seq x micro_batch.
    dtype : {'bf16', 'fp16', 'fp32'}, optional
        Default bf16 on GPU engines, fp32 on numpy. An unsupported dtype falls
        back to fp32 with a warning recorded in ``warnings``.
    engine : str or Engine
        ``auto``, ``torch``, ``cupy``, ``numpy`` or an engine object.
    repeats, warmup : int
        Timed and untimed calls per GEMM.
    timed_tokens : int, optional
        Time with this M instead of seq x micro_batch (explicit scaling).
    max_gemm_flops : float, None or 'auto'
        Scale M down so no forward GEMM exceeds this many FLOPs; ``auto`` is
        16e9 on CPU engines and no cap on GPUs; None disables scaling.
    clock : callable
        Seconds clock; injectable for tests.

    Raises
    ------
    UsageError
        For non-positive seq, micro_batch, repeats or timed_tokens.
    BackendUnavailable
        When the engine's library is missing.
    """
    for label, value in (("seq", seq), ("micro_batch", micro_batch), ("repeats", repeats)):
        if int(value) < 1:
            raise UsageError(f"{label} must be at least 1, got {value}")
    if warmup < 0:
        raise UsageError(f"warmup must be 0 or more, got {warmup}")
    eng = get_engine(engine) if isinstance(engine, str) else engine
    on_gpu = getattr(eng, "device", "cpu") == "cuda" or eng.name == "cupy"
    requested = canonical_compute_dtype(dtype) if dtype else ("bf16" if on_gpu else "fp32")
    used, warnings = _timed_dtype(eng, requested)
    tokens = seq * micro_batch
    gemms = step_gemms(shape, tokens)
    if timed_tokens is not None:
        if timed_tokens < 1:
            raise UsageError(f"timed_tokens must be at least 1, got {timed_tokens}")
        timed = min(int(timed_tokens), tokens)
    elif isinstance(max_gemm_flops, str):
        if max_gemm_flops != "auto":
            raise UsageError(f"max_gemm_flops must be a number, None or 'auto', got {max_gemm_flops!r}")
        timed = timed_tokens_for(gemms, tokens, None if on_gpu else DEFAULT_CPU_MAX_GEMM_FLOPS)
    else:
        timed = timed_tokens_for(gemms, tokens, max_gemm_flops)
    if timed < tokens:
        warnings.append(f"timed with M = {timed} tokens instead of {tokens} (seq x micro-batch) to keep the "
                        f"run short; FLOP/s are at the real K and N (set timed_tokens={tokens} for the full shape)")
    _check_gemm_memory([_with_tokens(g, tokens, timed) for g in gemms], used, on_gpu)
    timings = []
    for g in gemms:
        tm, tk, tn = _with_tokens(g, tokens, timed)
        samples = time_gemm(eng, tm, tk, tn, used, repeats=repeats, warmup=warmup, clock=clock)
        if min(samples) <= 0 or not all(math.isfinite(s) for s in samples):
            raise UsageError(f"clock gave a non-positive time for {g.name}; the clock is too coarse")
        timings.append(GemmTiming(g.layer_op, g.phase, g.m, g.k, g.n, tm, tk, tn, samples))
    return ComputeProfile(engine=eng.name, device=eng.device_name, dtype=used, dtype_requested=requested,
                          shape=shape, params=params if params is not None else shape.param_count,
                          seq=seq, micro_batch=micro_batch, timed_tokens=timed, gemms=tuple(timings),
                          repeats=repeats, warnings=tuple(warnings))
