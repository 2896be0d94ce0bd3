"""pybench: communication microbenchmarks and communication/computation models.

Importing pybench never starts MPI or touches a GPU; the native modules load on
first use (see pybench._native).
"""

from __future__ import annotations

__version__ = "0.1.0"

from .errors import (BackendUnavailable, FileFormatError, NativeError, PyBenchError, RunFailed, SizeError,
                     UsageError)
from .sizes import format_size, parse_size, parse_sizes

__all__ = [
    "__version__",
    "PyBenchError", "UsageError", "SizeError", "BackendUnavailable", "FileFormatError", "NativeError", "RunFailed",
    "parse_size", "parse_sizes", "format_size",
]
