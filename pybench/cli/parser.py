"""The one argument parser class and the one error mapper of the command line.

Every error a user can cause is a :class:`~pybench.errors.PyBenchError` printed as one line
on stderr, with the exit code the error class carries (2 for bad input); argparse's own
multi-line usage errors are turned into the same one line.
"""

from __future__ import annotations

import argparse
import errno
import sys
from typing import NoReturn

from pybench.errors import EnvironmentFault, PyBenchError, UsageError
from pybench.io.files import path_error
from pybench.measure.output_relay import mute_stdout
from pybench.sizes import parse_sizes


class Parser(argparse.ArgumentParser):
    """argparse with one-line errors: ``error`` raises a UsageError that :func:`run` prints; an option of one
    value added to a parser itself (the model and planning commands) and given twice with two values is refused
    (argparse would keep the last one silently). The measuring commands' option groups keep the last value, as
    nccl-tests' and OSU's getopt do: harnesses append a user's flags to their own."""

    def error(self, message: str) -> NoReturn:  # raises instead of printing usage and exiting
        raise UsageError(f"{message} (see `{self.prog} --help`)")

    def add_argument(self, *args, **kwargs):
        if args and str(args[0]).startswith("-") and kwargs.get("action") is None and kwargs.get("nargs") is None:
            kwargs["action"] = _Once
        return super().add_argument(*args, **kwargs)

    def parse_known_args(self, args=None, namespace=None):
        parsed, rest = super().parse_known_args(args, namespace)
        if hasattr(parsed, _GIVEN):
            delattr(parsed, _GIVEN)  # (what each option was given as: no argument of the command)
        return parsed, rest

    def _print_message(self, message: str, file=None) -> None:
        # argparse drops an OSError here: --help into a full disk or a closed pipe would exit 0
        if message:
            file = file or sys.stderr
            try:
                file.write(message)
            except OSError as exc:
                if file is not sys.stdout:
                    raise
                raise _StdoutFailed(exc) from None


_GIVEN = "_pybench_options_given"


class _Once(argparse.Action):
    """Store the option's value, refusing a second, other value: `fit --world 32 --world 64` meant one world per
    input, and argparse would have fitted both logs at 64 ranks."""

    def __call__(self, parser, namespace, values, option_string=None) -> None:
        given = getattr(namespace, _GIVEN, None)
        if given is None:
            given = {}
            setattr(namespace, _GIVEN, given)
        if self.dest in given and not _same(given[self.dest][1], values):
            first, _ = given[self.dest]
            each = (f"; one per input goes comma-separated ({option_string} {first},{_values_text(values)})"
                    if "[,N...]" in str(self.metavar) else "")
            raise argparse.ArgumentError(self, f"given twice ({first} and {_values_text(values)}): give it once{each}")
        given[self.dest] = (_values_text(values), values)
        setattr(namespace, self.dest, values)


def _same(one, other) -> bool:
    """Whether two parsed values are one (a type that parses into an array compares element-wise: no one answer)."""
    try:
        return bool(one == other)
    except (TypeError, ValueError):
        return one is other


def _values_text(values) -> str:
    """An option's parsed value as the user wrote it, near enough: (2, 4) as 2,4."""
    return ",".join(map(str, values)) if isinstance(values, tuple) else str(values)


class _StdoutFailed(BaseException):
    """Writing stdout failed, where the error would otherwise read as some file's. A BaseException, as
    Ctrl-C is: no command's own ``except Exception`` may take it for its own failure."""

    def __init__(self, error: OSError) -> None:
        super().__init__(str(error))
        self.error = error


class _GuardedStdout:
    """sys.stdout while a command runs: a write or flush that fails (a full disk) is stdout's failure."""

    def __init__(self, stream) -> None:
        self._stream = stream

    def write(self, text: str) -> int:
        try:
            return self._stream.write(text)
        except BrokenPipeError:
            raise  # the reader left: quietly 141
        except OSError as exc:
            raise _StdoutFailed(exc) from None

    def flush(self) -> None:
        try:
            self._stream.flush()
        except BrokenPipeError:
            raise
        except OSError as exc:
            raise _StdoutFailed(exc) from None

    def __getattr__(self, name: str):
        return getattr(self._stream, name)


def subcommands(parser: argparse.ArgumentParser):
    """The subparsers action every command module adds its commands to."""
    return parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=Parser)


def _reject_dash_sizes(argv: list[str]) -> None:
    # argparse reads `--sizes -1M` as a missing value followed by an unknown option;
    # say what is really wrong.
    for flag, value in zip(argv, argv[1:]):
        if flag in ("--sizes", "-s") and value.startswith("-") and value[1:2].isdigit():
            parse_sizes(value)


def run(parser: argparse.ArgumentParser, argv: list[str], no_command_hint: str) -> int:
    """Parse ``argv`` and run its subcommand, with every error a user can cause as one line.

    The one place that turns exceptions into exit codes: the PyBenchError's own code (2 for
    bad input), 130 for Ctrl-C, 141 when the reader of our output went away; an OSError nothing
    else caught is 2 (a path that cannot be used) or 3 (the machine failed), MemoryError 3.
    Stdout is flushed here, not at exit, where Python would print a traceback-like
    "Exception ignored" and exit 120 (or 0 after --help) for a full disk or a closed pipe.
    """
    real = sys.stdout
    if real is not None:
        sys.stdout = _GuardedStdout(real)
    try:
        try:
            code = _run(parser, argv, no_command_hint)
        except _StdoutFailed as failed:
            return _stdout_error(failed.error)
        except SystemExit:  # --help, --version: their text may still be buffered
            lost = _flush_stdout(real)
            if lost is None:
                raise
            raise SystemExit(lost) from None
        lost = _flush_stdout(real)
        return lost if lost is not None and code in (0, 1) else code
    finally:
        sys.stdout = real


def _flush_stdout(stream) -> int | None:
    """Flush stdout; None when it took everything, else the exit code (141 a closed pipe, quietly)."""
    try:
        if stream is not None:
            stream.flush()
        return None
    except OSError as exc:
        return _stdout_error(exc)


def _stdout_error(exc: OSError) -> int:
    mute_stdout()
    if isinstance(exc, BrokenPipeError):
        return 141
    fix = "free space on its disk or send it elsewhere" if exc.errno == errno.ENOSPC else "send it elsewhere"
    print(f"pybench: error: cannot write the output to stdout: {exc.strerror or exc}; {fix}",
          file=sys.stderr, flush=True)
    return EnvironmentFault.exit_code


def _run(parser: argparse.ArgumentParser, argv: list[str], no_command_hint: str) -> int:
    try:
        _reject_dash_sizes(argv)
        args = parser.parse_args(argv)
        if not getattr(args, "command", None):
            raise UsageError(f"no command given; try {no_command_hint}")
        args.argv = argv  # the ranks re-run exactly what the user typed
        return args.func(args)
    except PyBenchError as exc:
        print(f"pybench: error: {exc}", file=sys.stderr, flush=True)
        return exc.exit_code
    except KeyboardInterrupt:
        print("pybench: interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:
        # `pybench ... | head`: the reader left; say nothing more and leave quietly
        mute_stdout()
        return 141
    except OSError as exc:
        # Any OSError no writer or reader turned into a PyBenchError itself: one line all the same.
        error = path_error(exc, exc.filename, "use")
        print(f"pybench: error: {error}", file=sys.stderr, flush=True)
        return error.exit_code
    except MemoryError:
        print("pybench: error: out of memory (free memory, ulimit -v or the cgroup's memory.max); use smaller "
              "inputs or raise the limit", file=sys.stderr, flush=True)
        return EnvironmentFault.exit_code

