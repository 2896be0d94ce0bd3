"""The one argument parser class and the one error mapper of the command line.

Every error a user can cause is a :class:`~pybench.errors.PyBenchError` printed as one line
on stderr, with the exit code the error class carries (2 for bad input); argparse's own
multi-line usage errors are turned into the same one line.
"""

from __future__ import annotations

import argparse
import os
import sys
from typing import NoReturn

from pybench.errors import EnvironmentFault, PyBenchError, UsageError
from pybench.io.files import path_error
from pybench.sizes import parse_sizes


class Parser(argparse.ArgumentParser):
    """argparse with one-line errors: ``error`` raises a UsageError that :func:`run` prints."""

    def error(self, message: str) -> NoReturn:  # raises instead of printing usage and exiting
        raise UsageError(f"{message} (see `{self.prog} --help`)")


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
    """
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
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
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

