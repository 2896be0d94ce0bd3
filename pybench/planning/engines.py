"""The array libraries that time GEMMs: numpy (CPU), torch (CUDA or CPU) and cupy (CUDA).

Engines are optional imports: each says how to install its library when it is
missing. ``auto`` picks torch on a GPU, then cupy, then numpy. The clock of
:func:`time_gemm` is injectable so tests check the arithmetic with a fake one.
"""

from __future__ import annotations

import os
import platform
import time
from collections.abc import Callable
from typing import Any, Protocol

from pybench.errors import BackendUnavailable, UsageError

__all__ = ["Engine", "NumpyEngine", "TorchEngine", "CupyEngine", "ENGINES", "get_engine", "time_gemm", "Clock"]

Clock = Callable[[], float]


class Engine(Protocol):
    """What the timing loop needs from an array library."""

    name: str
    device_name: str

    def supports(self, dtype: str) -> bool: ...

    def operands(self, m: int, k: int, n: int, dtype: str) -> Any: ...

    def matmul(self, ops: Any) -> None: ...

    def synchronize(self) -> None: ...


def _cpu_name() -> str:
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip() + f" ({os.cpu_count()} threads)"
    except OSError:
        pass
    return (platform.processor() or platform.machine() or "CPU") + f" ({os.cpu_count()} threads)"


class NumpyEngine:
    """CPU GEMMs through numpy's BLAS. fp32 only: numpy has no bfloat16, and its
    float16 matmul does not use BLAS, so timing it would not measure the CPU."""

    name = "numpy"

    def __init__(self) -> None:
        import numpy as np
        self._np = np
        self.device_name = _cpu_name()

    def supports(self, dtype: str) -> bool:
        return dtype == "fp32"

    def operands(self, m: int, k: int, n: int, dtype: str) -> Any:
        np = self._np
        rng = np.random.default_rng(0)
        # Random data: all-zero or constant inputs can take fast paths on some BLAS.
        a = rng.standard_normal((m, k), dtype=np.float32)
        b = rng.standard_normal((k, n), dtype=np.float32)
        return a, b, np.empty((m, n), dtype=np.float32)

    def matmul(self, ops: Any) -> None:
        a, b, c = ops
        self._np.matmul(a, b, out=c)

    def synchronize(self) -> None:
        pass


class TorchEngine:
    """torch GEMMs on CUDA when available (``device='auto'``), else on the CPU."""

    name = "torch"

    def __init__(self, device: str = "auto") -> None:
        try:
            import torch
        except ImportError:
            raise BackendUnavailable(
                "engine 'torch' needs PyTorch, which is not installed; pip install torch "
                "(CUDA builds: https://pytorch.org/get-started/locally/), or use engine=numpy") from None
        self._torch = torch
        if device == "auto":
            device = "cuda" if torch.cuda.is_available() else "cpu"
        if device == "cuda" and not torch.cuda.is_available():
            raise BackendUnavailable("engine 'torch' on cuda: torch.cuda.is_available() is False "
                                     "(a CPU-only torch build or no visible GPU)")
        self.device = device
        self.device_name = torch.cuda.get_device_name(0) if device == "cuda" else _cpu_name()

    def supports(self, dtype: str) -> bool:
        # fp16 GEMMs on CPU are emulated in many torch builds; bf16 is native on recent CPUs.
        return self.device == "cuda" or dtype in ("fp32", "bf16")

    def operands(self, m: int, k: int, n: int, dtype: str) -> Any:
        torch = self._torch
        tdt = {"bf16": torch.bfloat16, "fp16": torch.float16, "fp32": torch.float32}[dtype]
        g = torch.Generator(device=self.device).manual_seed(0)
        a = torch.randn((m, k), generator=g, device=self.device, dtype=tdt)
        b = torch.randn((k, n), generator=g, device=self.device, dtype=tdt)
        return a, b, torch.empty((m, n), device=self.device, dtype=tdt)

    def matmul(self, ops: Any) -> None:
        a, b, c = ops
        self._torch.matmul(a, b, out=c)

    def synchronize(self) -> None:
        if self.device == "cuda":
            self._torch.cuda.synchronize()


class CupyEngine:
    """cupy GEMMs (cuBLAS) on the current CUDA device."""

    name = "cupy"

    def __init__(self) -> None:
        try:
            import cupy
        except ImportError:
            raise BackendUnavailable(
                "engine 'cupy' needs CuPy, which is not installed; pip install cupy-cuda13x "
                "(cupy-cuda12x for CUDA 12), or use engine=torch or engine=numpy") from None
        try:
            props = cupy.cuda.runtime.getDeviceProperties(cupy.cuda.Device().id)
        except Exception as exc:  # cupy raises its own CUDARuntimeError without a GPU
            raise BackendUnavailable(f"engine 'cupy': no usable CUDA device ({exc})") from None
        self._cp = cupy
        name = props.get("name", b"CUDA device")
        self.device_name = name.decode() if isinstance(name, bytes) else str(name)

    def supports(self, dtype: str) -> bool:
        return dtype in ("fp16", "fp32")  # cupy has no bfloat16 dtype

    def operands(self, m: int, k: int, n: int, dtype: str) -> Any:
        cp = self._cp
        dt = {"fp16": cp.float16, "fp32": cp.float32}[dtype]
        rs = cp.random.RandomState(0)
        a = rs.standard_normal((m, k), dtype=cp.float32).astype(dt)
        b = rs.standard_normal((k, n), dtype=cp.float32).astype(dt)
        return a, b, cp.empty((m, n), dtype=dt)

    def matmul(self, ops: Any) -> None:
        a, b, c = ops
        self._cp.matmul(a, b, out=c)

    def synchronize(self) -> None:
        self._cp.cuda.Device().synchronize()


ENGINES = ("auto", "torch", "cupy", "numpy")


def get_engine(name: str = "auto") -> Engine:
    """Build an engine by name; ``auto`` prefers a GPU (torch, then cupy), else numpy.

    Raises
    ------
    BackendUnavailable
        When the named engine's library is missing, with the pip command to fix it.
    UsageError
        For an unknown name.
    """
    key = name.strip().lower()
    if key == "numpy":
        return NumpyEngine()
    if key == "torch":
        return TorchEngine()
    if key == "cupy":
        return CupyEngine()
    if key == "auto":
        try:
            eng = TorchEngine()
            if eng.device == "cuda":
                return eng
        except BackendUnavailable:
            pass
        try:
            return CupyEngine()
        except BackendUnavailable:
            pass
        return NumpyEngine()
    raise UsageError(f"unknown compute engine {name!r}; use one of {', '.join(ENGINES)}")


def time_gemm(engine: Engine, m: int, k: int, n: int, dtype: str, repeats: int = 5,
              warmup: int = 1, clock: Clock = time.perf_counter) -> tuple[float, ...]:
    """Time ``repeats`` GEMMs of shape (m, k, n); return seconds per GEMM, one per repeat.

    Each sample brackets one matmul and a device synchronize with two clock
    reads, so a fake clock that advances by ``d`` per read gives samples of ``d``.
    Warm-up calls (library initialisation, first-touch of output) are not timed.
    """
    if repeats < 1:
        raise UsageError(f"repeats must be at least 1, got {repeats}")
    ops = engine.operands(m, k, n, dtype)
    for _ in range(warmup):
        engine.matmul(ops)
    engine.synchronize()
    samples = []
    for _ in range(repeats):
        t0 = clock()
        engine.matmul(ops)
        engine.synchronize()
        samples.append(clock() - t0)
    return tuple(samples)


