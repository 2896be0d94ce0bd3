"""argparse types shared by every subcommand: numbers with bounds, fractions and
percentages, each failing with a message that says what is accepted.

Every numeric option goes through one strict parser (:func:`parse_decimal`): ASCII digits
only (``int()`` and ``float()`` also take Arabic-Indic or fullwidth digits and ``1_0``),
finite (no ``nan``, ``inf`` or ``1e400``, which overflows to inf), no underflow (``1e-400``
is not zero: a timeout of 1e-400 s must not silently mean "no timeout"), at most one ``%``.
"""

from __future__ import annotations

import argparse
import math
import re

_INT_RE = re.compile(r"^[+-]?[0-9]+$", re.ASCII)
_FLOAT_RE = re.compile(r"^[+-]?([0-9]+\.?[0-9]*|\.[0-9]+)([eE][+-]?[0-9]+)?$", re.ASCII)
# Longer than any number an option means; Python's int() also refuses more than 4300 digits.
_MAX_NUMBER_CHARS = 64


def parse_decimal(text: str, whole: bool = False) -> int | float:
    """``text`` as a finite int (``whole``) or float, or argparse.ArgumentTypeError saying why not."""
    t = text.strip()
    kind = "whole number" if whole else "number"
    if len(t) > _MAX_NUMBER_CHARS or not (_INT_RE if whole else _FLOAT_RE).match(t):
        shown = text if len(text) <= 40 else text[:37] + "..."
        example = "10 or 64" if whole else "10 or 2.5e-3"
        raise argparse.ArgumentTypeError(f"{shown!r} is not a {kind} (ASCII digits, e.g. {example})")
    if whole:
        return int(t)
    value = float(t)
    if not math.isfinite(value):
        raise argparse.ArgumentTypeError(f"{text!r} is not a finite number (it overflows a double)")
    if value == 0 and any(c in "123456789" for c in t.split("e")[0].split("E")[0]):
        raise argparse.ArgumentTypeError(f"{text!r} is too small to be told from 0; give 0 or a larger number")
    return value


def number(kind: type, minimum: float, strict: bool, maximum: float | None = None):
    """A finite number of ``kind`` (:func:`parse_decimal`), at least (or, if strict, above) ``minimum``
    and at most ``maximum``."""
    def show(x: float) -> str:
        return str(int(x)) if kind is int else f"{x:g}"

    bound = f"must be {'more than' if strict else 'at least'} {show(minimum)}"
    if maximum is not None:
        bound += f" and at most {show(maximum)}"

    def parse(text: str):
        value = parse_decimal(text, whole=kind is int)
        if not (value > minimum if strict else value >= minimum) or (maximum is not None and value > maximum):
            raise argparse.ArgumentTypeError(f"{text!r} {bound}")
        return value
    return parse


def _strip_percent(text: str) -> tuple[str, bool]:
    """(the number's text, whether it ended in one ``%``); ``10%%`` is not a percentage."""
    t = text.strip()
    return (t[:-1], True) if t.endswith("%") else (t, False)


def fraction(allow_zero: bool = False):
    """A fraction written 0.05 or 5%: in (0, 1), or [0, 1) with ``allow_zero``."""
    def parse(text: str) -> float:
        t, pct = _strip_percent(text)
        try:
            value = float(parse_decimal(t))
        except argparse.ArgumentTypeError:
            raise argparse.ArgumentTypeError(f"{text!r} is not a number; use e.g. 0.05 or 5%") from None
        value = value / 100 if pct else value
        if not ((0 <= value < 1) if allow_zero else (0 < value < 1)):
            low = "at least 0" if allow_zero else "more than 0"
            raise argparse.ArgumentTypeError(f"{text!r} must be {low} and below 1 (100%); use e.g. 0.05 or 5%")
        return value
    return parse


def percent(text: str) -> float:
    """A percentage of 0 or more, written 10 or 10%."""
    t, _ = _strip_percent(text)
    try:
        value = float(parse_decimal(t))
    except argparse.ArgumentTypeError:
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
    # nccl-tests takes a step of 0, unused beside a factor (NVIDIA CloudAI's configs pass `--stepbytes 0 -f 2`)
    zero_step = stepbytes is not None and re.fullmatch(r"\s*0+(\.0*)?\s*[kmgt]?i?b?\s*", stepbytes, re.I) is not None
    if zero_step and factor <= 1:
        raise UsageError(f"-i {(stepbytes or '').strip()} with no factor above 1 (-f) never moves past -b; give a "
                         f"step of at least 1 byte or a factor (-f 2)")
    step = 0 if zero_step else parse_size(stepbytes if stepbytes is not None else "1M")
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


def output_file(text: str) -> str:
    """An output file name: not empty, and not ``-`` (only ``pybench env`` writes its JSON to stdout)."""
    if not text.strip():
        raise argparse.ArgumentTypeError("needs a file name")
    if text == "-":
        raise argparse.ArgumentTypeError("'-' (stdout) is pybench env's only; give a file name")
    return text
