"""The MPI backend: host buffers, the native C++ harness, MPI for everything."""

from __future__ import annotations

import atexit
from typing import Any

from pybench import _native
from pybench.measure.benchmark import make_native_bench


class MpiBackend:
    name = "mpi"

    def __init__(self) -> None:
        self._core = _native.core()

    def start(self) -> dict[str, Any]:
        self._core.mpi_init()
        atexit.register(self._core.mpi_finalize)
        return dict(self._core.rank_info())

    def watch(self, timeout_s: float, on_timeout) -> None:
        self._core.start_watchdog(timeout_s, on_timeout)

    def agree_max(self, values: list[int]) -> list[int]:
        return list(self._core.allreduce_max_ints(values))

    def make_bench(self, cfg, size_bytes: int):
        return make_native_bench(cfg, size_bytes)

    def describe_buffers(self, cfg) -> str:
        return self._core.host_allocation(cfg.huge_pages)

    def library_version(self) -> str:
        return self._core.mpi_library_version()

    def abort(self, code: int) -> None:
        self._core.mpi_abort(code)

    def finish(self) -> None:
        self._core.mpi_finalize()
