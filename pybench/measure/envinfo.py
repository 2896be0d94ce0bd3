"""What this machine and build offer: recorded in every result and printed by `pybench env`."""

from __future__ import annotations

import glob
import importlib.metadata
import importlib.util
import os
import platform
import sys
from functools import cache
from typing import Any

from pybench import __version__
from pybench._native import build_info
from pybench.errors import BackendUnavailable
from pybench.measure.system_probe import recorded_system


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
    """The installed version of the optional package ``module`` (None where it is not installed),
    read from its metadata: importing torch to ask would take seconds."""
    try:
        if importlib.util.find_spec(module) is None:
            return None
    except (ImportError, ValueError):  # a broken parent package or a module without a spec
        return None
    try:
        return importlib.metadata.version(module)
    except importlib.metadata.PackageNotFoundError:  # importable, but installed without metadata
        return "unknown"


# Environment variables that set BLAS / OpenMP thread counts, read when threadpoolctl is absent.
THREAD_VARIABLES = ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS", "BLIS_NUM_THREADS",
                    "VECLIB_MAXIMUM_THREADS", "NUMEXPR_NUM_THREADS")


def usable_cores() -> int:
    """CPU cores the machine gives its jobs: the CPU count, lowered by a cgroup quota where one is set.

    Not this process's affinity mask: an MPI rank is often bound to one core while the
    load average counts the whole machine.
    """
    cores = os.cpu_count() or 1
    try:
        with open("/sys/fs/cgroup/cpu.max") as f:
            quota, period = f.read().split()[:2]
        if quota != "max":
            cores = max(1, min(cores, round(int(quota) / int(period))))
    except (OSError, ValueError):
        pass
    return cores


def load_average() -> list[float] | None:
    """The 1, 5 and 15 minute load averages, or None where the system has none."""
    try:
        return [round(x, 2) for x in os.getloadavg()]
    except (AttributeError, OSError):
        return None


def thread_settings(environ: dict[str, str] | None = None) -> dict[str, Any]:
    """BLAS / OpenMP thread pools in use: threadpoolctl's view where it is installed, else the
    environment variables that set them (``source`` says which)."""
    env = os.environ if environ is None else environ
    variables = {k: env[k] for k in THREAD_VARIABLES if k in env}
    try:
        from threadpoolctl import threadpool_info
    except ImportError:
        return {"source": "environment", "variables": variables}
    pools = [{"user_api": p.get("user_api"), "library": p.get("internal_api"), "threads": p.get("num_threads"),
              "version": p.get("version")} for p in threadpool_info()]
    return {"source": "threadpoolctl", "pools": pools, "variables": variables}


def cpu_governor() -> str | None:
    """The CPU frequency governor(s) ("performance", "powersave, performance"), None where unreadable."""
    found = set()
    for path in glob.glob("/sys/devices/system/cpu/cpu[0-9]*/cpufreq/scaling_governor"):
        try:
            with open(path) as f:
                found.add(f.read().strip())
        except OSError:
            continue
    return ", ".join(sorted(found)) or None


class MachineLoad(dict):
    """The machine's load, recorded at the start and taken again each time it is read.

    A result file is written last when the run ends, so ``load_average_end`` as written by the
    last write is the load at the end of the run; JSON writers read a mapping through
    ``items()``, which is where the end figure is refreshed.
    """

    def refresh(self) -> MachineLoad:
        self["load_average_end"] = load_average()
        return self

    def items(self):  # the same view, with the end figure taken now
        self.refresh()
        return super().items()


def machine_load() -> MachineLoad:
    """Cores, the load average at the start (and end, see MachineLoad), thread pools, governor."""
    start = load_average()
    return MachineLoad(cores=usable_cores(), load_average_start=start, load_average_end=start,
                       threads=thread_settings(), cpu_governor=cpu_governor())


def environment(include_gpu: bool = True) -> dict[str, Any]:
    """Everything a result file records about where it was measured."""
    env: dict[str, Any] = {
        "pybench_version": __version__,
        "python": sys.version.split()[0],
        "platform": platform.platform(),
        "cpu_model": cpu_model(),
        "build": build_info(),
        "mpi": mpi_summary(),
        "machine": machine_load(),
        # GPUs, NVLinks, NICs and CPUs with where each came from: the system this result ran on
        "system": recorded_system(),
    }
    if include_gpu:
        env["gpu"] = gpu_summary()
    return env
