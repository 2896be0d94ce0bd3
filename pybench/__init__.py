"""pybench: communication microbenchmarks and communication/computation models.

Importing pybench never starts MPI or touches a GPU; the native modules load on
first use (see pybench._native). The names below are the Python API:

>>> from pybench import load_model
>>> model = load_model("model.json", collective="allreduce")
>>> model.predict(1 << 30, world=64).time_s
"""

from __future__ import annotations

__version__ = "0.1.0"

from pybench.errors import BackendUnavailable, FileFormatError, NativeError, PyBenchError, SizeError, UsageError
from pybench.measure.results import RunResult, SizeRecord, load_result
from pybench.model.alpha_beta import AlphaBetaModel, load_model, load_models
from pybench.model.fit import cross_validate, fit_alpha_beta
from pybench.model.logs import load_measurements
from pybench.plan.ccr import ccr, plan
from pybench.plan.compute import ComputeProfile, load_compute, profile_compute
from pybench.sizes import format_size, parse_size, parse_sizes

__all__ = [
    "__version__",
    "PyBenchError", "UsageError", "SizeError", "BackendUnavailable", "FileFormatError", "NativeError",
    "parse_size", "parse_sizes", "format_size",
    "RunResult", "SizeRecord", "load_result",
    "load_measurements", "fit_alpha_beta", "cross_validate", "AlphaBetaModel", "load_model", "load_models",
    "ComputeProfile", "load_compute", "profile_compute", "ccr", "plan",
]
