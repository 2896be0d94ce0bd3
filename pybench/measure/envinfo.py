"""What this machine and build offer: recorded in every result and printed by `pybench env`."""

from __future__ import annotations

import platform
import sys
from functools import cache
from typing import Any

from pybench import __version__
from pybench._native import build_info
from pybench.errors import BackendUnavailable


@cache
def cpu_model() -> str:
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def gpu_summary() -> dict[str, Any]:
    """The CUDA module's probe, or why there is no GPU. Never raises."""
    try:
        from pybench._native import cuda
        return dict(cuda().probe())
    except BackendUnavailable as exc:
        return {"device_count": 0, "no_gpu_reason": str(exc), "devices": []}


def mpi_summary() -> dict[str, Any]:
    try:
        from pybench._native import core
        return {"available": True, "library": core().mpi_library_version()}
    except BackendUnavailable as exc:
        return {"available": False, "error": str(exc)}


def optional_version(module: str) -> str | None:
    try:
        mod = __import__(module)
    except Exception:  # an optional package that fails to import is reported as absent
        return None
    return getattr(mod, "__version__", "unknown")


def environment(include_gpu: bool = True) -> dict[str, Any]:
    """Everything a result file records about where it was measured."""
    env: dict[str, Any] = {
        "pybench_version": __version__,
        "python": sys.version.split()[0],
        "platform": platform.platform(),
        "cpu_model": cpu_model(),
        "build": build_info(),
        "mpi": mpi_summary(),
    }
    if include_gpu:
        env["gpu"] = gpu_summary()
    return env
