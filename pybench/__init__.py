"""pybench: communication microbenchmarks and communication/computation models.

Importing pybench never starts MPI or touches a GPU; the native modules load on
first use (see pybench._native), and the names below load their module on first
access, so ``import pybench`` costs next to nothing on every rank. The Python API:

>>> from pybench import load_model
>>> model = load_model("model.json", collective="allreduce")
>>> model.predict(1 << 30, world=64).time_s
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

__version__ = "0.1.0"

# name -> module that defines it; resolved on first access (PEP 562).
_API = {
    "PyBenchError": "pybench.errors", "UsageError": "pybench.errors", "SizeError": "pybench.errors",
    "BackendUnavailable": "pybench.errors", "FileFormatError": "pybench.errors", "NativeError": "pybench.errors",
    "EnvironmentFault": "pybench.errors",
    "parse_size": "pybench.sizes", "parse_sizes": "pybench.sizes", "format_size": "pybench.sizes",
    "RunResult": "pybench.measure.results", "SizeRecord": "pybench.measure.results",
    "load_result": "pybench.measure.results",
    "load_measurements": "pybench.model.logs",
    "fit_alpha_beta": "pybench.model.piecewise", "cross_validate": "pybench.model.cross_validation",
    "AlphaBetaModel": "pybench.model.piecewise_model", "load_model": "pybench.model.model_files",
    "load_models": "pybench.model.model_files",
    "ComputeProfile": "pybench.planning.compute", "load_compute": "pybench.planning.compute",
    "profile_compute": "pybench.planning.compute",
    "ccr": "pybench.planning.ccr", "plan": "pybench.planning.ccr",
}

__all__ = [
    "__version__",
    "PyBenchError", "UsageError", "SizeError", "BackendUnavailable", "FileFormatError", "NativeError",
    "EnvironmentFault", "parse_size", "parse_sizes", "format_size", "RunResult", "SizeRecord", "load_result",
    "load_measurements", "fit_alpha_beta", "cross_validate", "AlphaBetaModel", "load_model", "load_models",
    "ComputeProfile", "load_compute", "profile_compute", "ccr", "plan",
]
assert set(__all__) == {"__version__", *_API}


def __getattr__(name: str) -> Any:
    module = _API.get(name)
    if module is None:
        # A subpackage (pybench.model, pybench.planning, ...) that is not loaded yet.
        try:
            return importlib.import_module(f"{__name__}.{name}")
        except ModuleNotFoundError as exc:
            if exc.name != f"{__name__}.{name}":
                raise
            raise AttributeError(f"module 'pybench' has no attribute {name!r}") from None
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value  # later accesses skip this function
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))


if TYPE_CHECKING:  # the static view of the lazy names, for type checkers and IDEs
    from pybench.errors import (
        BackendUnavailable,
        EnvironmentFault,
        FileFormatError,
        NativeError,
        PyBenchError,
        SizeError,
        UsageError,
    )
    from pybench.measure.results import RunResult, SizeRecord, load_result
    from pybench.model.cross_validation import cross_validate
    from pybench.model.logs import load_measurements
    from pybench.model.model_files import load_model, load_models
    from pybench.model.piecewise import fit_alpha_beta
    from pybench.model.piecewise_model import AlphaBetaModel
    from pybench.planning.ccr import ccr, plan
    from pybench.planning.compute import ComputeProfile, load_compute, profile_compute
    from pybench.sizes import format_size, parse_size, parse_sizes
