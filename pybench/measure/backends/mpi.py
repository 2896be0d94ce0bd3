"""The MPI backend: host buffers, the native C++ harness, MPI for everything."""

from __future__ import annotations

import atexit
import signal
import threading
from typing import Any

from pybench import _native
from pybench.measure.benchmark import make_native_bench

# MPI_Finalize waits for the launcher; a stopped or lost launcher must not hold a rank forever.
FINALIZE_LIMIT_S = 120
# Timeouts from here up (inf included) mean "never": the native deadline is int64 nanoseconds.
NEVER_S = 1e9


class MpiBackend:
    name = "mpi"

    def __init__(self) -> None:
        self._core = _native.core()

    def start(self) -> dict[str, Any]:
        self._core.mpi_init()
        atexit.register(self.finish)
        return dict(self._core.rank_info())

    def watch(self, timeout_s: float, on_timeout) -> None:
        self._core.start_watchdog(timeout_s if 0 < timeout_s < NEVER_S else 0.0, on_timeout)

    def agree_max(self, values: list[int]) -> list[int]:
        return list(self._core.allreduce_max_ints(values))

    def make_bench(self, cfg, size_bytes: int):
        return make_native_bench(cfg, size_bytes)

    def make_in_place_bench(self, cfg, size_bytes: int):
        """The same collective on one buffer (MPI_IN_PLACE): every size is measured both ways, as
        nccl-tests measures them."""
        return make_native_bench(cfg, size_bytes, in_place=True)

    def describe_buffers(self, cfg) -> str:
        return self._core.host_allocation(cfg.huge_pages)

    def library_version(self) -> str:
        return self._core.mpi_library_version()

    def abort(self, code: int) -> None:
        self._core.mpi_abort(code)

    def finish(self, limit_s: int = FINALIZE_LIMIT_S) -> None:
        """MPI_Finalize, bounded: it holds the GIL, so the kernel ends a hung finalize (SIGALRM's
        default action) after ``limit_s`` seconds; the launcher reports the rank."""
        bounded = hasattr(signal, "alarm") and threading.current_thread() is threading.main_thread()
        if bounded:
            signal.signal(signal.SIGALRM, signal.SIG_DFL)
            signal.alarm(limit_s)
        try:
            self._core.mpi_finalize()
        finally:
            if bounded:
                signal.alarm(0)
