"""Backends: how ranks start, agree and run one size of a benchmark.

A backend gives the runner (pybench.measure.runner) the same few things whatever moves
the data: rank facts, a way for ranks to agree on flags, a bench object per size
with ``warmup`` / ``check`` / ``measure`` (pybench.measure.benchmark.NativeBench), and an
abort that stops every rank. Adding a backend adds one module here and one row
in BACKENDS; the runner, the stop rule, the files and the table stay as they are.
"""

from __future__ import annotations

import importlib
from typing import Any, Protocol

from pybench.errors import BackendUnavailable, UsageError


class Backend(Protocol):
    name: str

    def start(self) -> dict[str, Any]:
        """Initialise; return rank, world_size, local_rank, local_size, host and hosts (by rank)."""

    def watch(self, timeout_s: float, on_timeout) -> None:
        """Abort this rank when one operation makes no progress for ``timeout_s``;
        ``on_timeout(message)`` runs first so results can be saved."""

    def agree_max(self, values: list[int]) -> list[int]:
        """Element-wise maximum of ``values`` over all ranks."""

    def make_bench(self, cfg, size_bytes: int):
        """The bench object for one size (allocates its buffers)."""

    # Optional: ``make_in_place_bench(cfg, size_bytes)``, the same collective on one buffer (None where
    # there is none); a backend that has it (mpi, nccl, torch) measures every collective size out of place and
    # then in place.

    def describe_buffers(self, cfg) -> str:
        """How buffers are allocated, for the result file."""

    def library_version(self) -> str:
        """Version of what moves the data, for the table header and the result file."""

    def abort(self, code: int) -> None:
        """Stop every rank of the job now."""

    def finish(self) -> None:
        """Orderly shutdown at the end of a run."""


# name -> "module:Class"; modules import lazily so a missing optional backend costs nothing.
BACKENDS: dict[str, str] = {
    "mpi": "pybench.measure.backends.mpi:MpiBackend",
    "torch": "pybench.measure.backends.torch:TorchBackend",
    "nccl": "pybench.measure.backends.nccl:NcclBackend",
}
NOT_YET: dict[str, str] = {}


def get_backend(name: str) -> Backend:
    """Instantiate a backend by name, or raise a one-line error saying what is available."""
    if name in NOT_YET:
        raise BackendUnavailable(NOT_YET[name])
    if name not in BACKENDS:
        raise UsageError(f"unknown backend {name!r}; known: {', '.join(BACKENDS)}")
    module, cls = BACKENDS[name].split(":")
    return getattr(importlib.import_module(module), cls)()
