"""One exception family for everything pybench reports to a user.

The CLI prints any ``PyBenchError`` as a single line on stderr and exits with
``exit_code``, so messages must say what was wrong, what is accepted and what to do.
Library code names its own parameters in messages; the CLI maps them to flags.

Exit codes (README, "Exit codes"): 0 success; 1 a wrong value found by the check, or a
gate (``--min-busbw``, ``--fail-on-regression``) failed; 2 bad input (:class:`UsageError`,
:class:`SizeError`, :class:`FileFormatError`); 3 the environment failed (:class:`EnvironmentFault`:
a backend, device or library missing or failing, an MPI/CUDA/NCCL error, a full disk);
124 an operation timed out; 130 interrupted.
"""

from __future__ import annotations


class PyBenchError(Exception):
    """Base of every error pybench raises on purpose."""

    exit_code = 2


class UsageError(PyBenchError):
    """The user asked for something that cannot be done as given."""


class SizeError(UsageError):
    """A size string or a size/world/dtype combination is not acceptable."""


class NotDetermined(UsageError):
    """The inputs cannot determine the answer for this layout (the message says which input is missing);
    a caller weighing many layouts leaves this one out and says why."""


class NoModelFor(UsageError):
    """No fitted model, direct or derived, prices a collective on a link class (the message says what to give). A
    grid of the sizes asked leaves those rows out and says so; a search for the best layout may not recommend
    around layouts nobody priced, and refuses."""


class EnvironmentFault(PyBenchError):
    """The machine, not the input, failed: a library, device or file system error."""

    exit_code = 3


class BackendUnavailable(EnvironmentFault):
    """A backend (MPI, CUDA, NCCL, torch) is missing; the message says how to get it."""


class FileFormatError(PyBenchError):
    """A results file, model file or imported log cannot be read."""


class SeveralTestsNamed(FileFormatError):
    """A collective given for a log whose tables name several tests: it would name them all alike."""


class NativeError(EnvironmentFault):
    """An error raised by the C++ core (mapped from its exception type)."""


class Terminated(PyBenchError):
    """SIGTERM reached a command that turns it into an exit of its own (one line, 128 + 15), as Ctrl-C is."""

    exit_code = 143
