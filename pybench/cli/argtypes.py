"""argparse types shared by every subcommand: numbers with bounds, fractions and
percentages, each failing with a message that says what is accepted."""

from __future__ import annotations

import argparse
import math
import re

_INT_RE = re.compile(r"^\s*[+-]?[0-9]+\s*$", re.ASCII)
_FLOAT_RE = re.compile(r"^\s*[+-]?([0-9]+\.?[0-9]*|\.[0-9]+)([eE][+-]?[0-9]+)?\s*$", re.ASCII)


def number(kind: type, minimum: float, strict: bool, maximum: float | None = None):
    """A finite number of ``kind``, at least (or, if strict, above) ``minimum`` and at most ``maximum``.

    Only ASCII digits: int() and float() would also take fullwidth or Arabic-Indic digits,
    and float() takes nan and inf, which no option means.
    """
    def show(x: float) -> str:
        return str(int(x)) if kind is int else f"{x:g}"

    bound = f"must be {'more than' if strict else 'at least'} {show(minimum)}"
    if maximum is not None:
        bound += f" and at most {show(maximum)}"

    def parse(text: str):
        pattern = _INT_RE if kind is int else _FLOAT_RE
        if not pattern.match(text):
            raise argparse.ArgumentTypeError(f"{text!r} is not a {'whole ' if kind is int else ''}number")
        value = kind(text)
        if not math.isfinite(value):
            raise argparse.ArgumentTypeError(f"{text!r} is not a finite number")
        if not (value > minimum if strict else value >= minimum) or (maximum is not None and value > maximum):
            raise argparse.ArgumentTypeError(f"{text!r} {bound}")
        return value
    return parse


def fraction(allow_zero: bool = False):
    """A fraction written 0.05 or 5%: in (0, 1), or [0, 1) with ``allow_zero``."""
    def parse(text: str) -> float:
        t = text.strip()
        try:
            value = float(t[:-1]) / 100 if t.endswith("%") else float(t)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{text!r} is not a number; use e.g. 0.05 or 5%") from None
        if not ((0 <= value < 1) if allow_zero else (0 < value < 1)):
            low = "at least 0" if allow_zero else "more than 0"
            raise argparse.ArgumentTypeError(f"{text!r} must be {low} and below 1 (100%); use e.g. 0.05 or 5%")
        return value
    return parse


def percent(text: str) -> float:
    """A percentage of 0 or more, written 10 or 10%."""
    t = text.strip().rstrip("%")
    try:
        value = float(t)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a percentage; use e.g. 10 or 10%") from None
    if not value >= 0:
        raise argparse.ArgumentTypeError(f"{text!r} must be 0 or more percent")
    return value


positive_int = number(int, 1, strict=False)
nonneg_int = number(int, 0, strict=False)
positive_float = number(float, 0, strict=True)
nonneg_float = number(float, 0, strict=False)


# A sweep longer than this is a typo (`-i 1` over gigabytes), not a plan: refuse it in one line.
MAX_SWEEP_SIZES = 4096


def nccl_tests_sizes(minbytes: str | None, maxbytes: str | None, stepfactor: int | None,
                     stepbytes: str | None) -> list[int]:
    """The sizes nccl-tests' ``-b/-e/-f/-i`` name, as nccl-tests reads them.

    Unset values take nccl-tests' defaults (-b 32M, -e 32M, -f 1, -i 1M): with a factor
    above 1 each size is the last times the factor, else the last plus ``stepbytes``.
    """
    from pybench.errors import SizeError, UsageError
    from pybench.sizes import format_size, parse_size
    lo = parse_size(minbytes if minbytes is not None else "32M")
    hi = parse_size(maxbytes if maxbytes is not None else "32M")
    factor = 1 if stepfactor is None else stepfactor
    step = parse_size(stepbytes if stepbytes is not None else "1M")
    if hi < lo:
        raise SizeError(f"-e {format_size(hi)} is below -b {format_size(lo)}: the sweep goes down")
    sizes, size = [], lo
    while size <= hi:
        sizes.append(size)
        if len(sizes) > MAX_SWEEP_SIZES:
            raise UsageError(f"-b/-e/-f/-i give more than {MAX_SWEEP_SIZES} sizes; use a factor (-f 2) or a "
                             "larger step (-i)")
        size = size * factor if factor > 1 else size + step
    return sizes


def timeout_seconds(text: str) -> float:
    """A timeout: seconds >= 0, where 0 turns it off and ``inf`` (or ``never``) means the same."""
    if text.strip().lower() in ("inf", "infinity", "never", "none"):
        return 0.0
    return nonneg_float(text)
