"""One exception family for everything pybench reports to a user.

The CLI prints any ``PyBenchError`` as a single line on stderr and exits with
``exit_code`` (2 for bad input), so messages must say what was wrong, what is
accepted and what to do.
"""

from __future__ import annotations


class PyBenchError(Exception):
    """Base of every error pybench raises on purpose."""

    exit_code = 2


class UsageError(PyBenchError):
    """The user asked for something that cannot be done as given."""


class SizeError(UsageError):
    """A size string or a size/world/dtype combination is not acceptable."""


class BackendUnavailable(PyBenchError):
    """A backend (MPI, CUDA, NCCL, torch) is missing; the message says how to get it."""


class FileFormatError(PyBenchError):
    """A results file, model file or imported log cannot be read."""


class NativeError(PyBenchError):
    """An error raised by the C++ core (mapped from its exception type)."""
