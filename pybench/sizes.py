"""Parse and format message sizes.

Sizes are bytes with binary suffixes as nccl-tests uses them: K = 2**10,
M = 2**20, G = 2**30 (T = 2**40 for completeness). A SPEC is either
``LO:HI`` (every power of two from LO to HI inclusive), ``LO:HI:F`` (LO, LO*F,
LO*F**2, ... up to HI), ``LO:HI:+STEP`` (LO, LO+STEP, ... up to HI: nccl-tests'
``-i``, e.g. every 1 MiB step as the vTrain tables) or a comma list ``8,1K,1M``.
"""

from __future__ import annotations

import re
from fractions import Fraction

from pybench.errors import SizeError

_SUFFIX = {"": 1, "B": 1, "K": 1 << 10, "M": 1 << 20, "G": 1 << 30, "T": 1 << 40}
# ASCII digits only: \d and int() would take fullwidth, Arabic-Indic or superscript digits.
# (a fraction before a suffix, 0.5M, as nccl-tests' sscanf reads it, where it makes whole bytes)
_SIZE_RE = re.compile(r"^\s*([0-9]+(?:\.[0-9]*)?|\.[0-9]+)\s*([KMGT]?)(?:I?B)?\s*$", re.IGNORECASE | re.ASCII)
_FACTOR_RE = re.compile(r"^\s*[0-9]+\s*$", re.ASCII)
# Guards against typos like 1000G that would ask for petabytes and overflow counts.
MAX_SIZE_BYTES = 1 << 44
# A linear range can ask for billions of sizes (1:1G:+1); no sweep or table needs this many.
MAX_SIZE_COUNT = 1 << 16
_ACCEPTED = "accepted: bytes with an optional K/M/G suffix (binary), e.g. 8, 64K, 0.5M, 1G"


def parse_size(text: str) -> int:
    """Return the number of bytes in one size such as ``64K``.

    Raises
    ------
    SizeError
        When the text is not a positive whole size.
    """
    if not isinstance(text, str):
        raise SizeError(f"size {text!r} is not text; {_ACCEPTED}")
    m = _SIZE_RE.match(text)
    if not m and text.strip().startswith("-"):
        raise SizeError(f"size {text.strip()!r} is negative; sizes are positive byte counts, e.g. 8, 64K, 1M")
    if not m:
        raise SizeError(f"size {text.strip()!r} is not a size; {_ACCEPTED}")
    digits, suffix = m.groups()
    if len(digits.split(".")[0].lstrip("0")) > 20 or len(digits) > 64:
        raise SizeError(f"size {text.strip()!r} is too large; the largest is {format_size(MAX_SIZE_BYTES)}")
    exact = Fraction(digits) * _SUFFIX[suffix.upper()]
    if exact.denominator != 1:
        raise SizeError(f"size {text.strip()!r} is not a whole number of bytes; {_ACCEPTED}")
    value = int(exact)
    if value <= 0:
        raise SizeError(f"size {text.strip()!r} must be at least 1 byte; {_ACCEPTED}")
    if value > MAX_SIZE_BYTES:
        raise SizeError(f"size {text.strip()!r} is too large; the largest is {format_size(MAX_SIZE_BYTES)}")
    return value


def parse_sizes(spec: str) -> list[int]:
    """Expand a size SPEC into a sorted list of distinct sizes in bytes.

    ``1M:1G`` gives every power of two from 1 MiB to 1 GiB inclusive;
    ``1K:1G:4`` multiplies by 4; ``1M:1G:+1M`` adds 1 MiB (at most :data:`MAX_SIZE_COUNT`
    sizes); ``8,1K,1M`` is a list.
    """
    if not isinstance(spec, str) or not spec.strip():
        raise SizeError("empty size spec; use a range 1M:1G, a range with a factor 1K:1G:4, with a step "
                        "1M:1G:+1M or a list 8,1K,1M")
    spec = spec.strip()
    if ":" in spec:
        parts = spec.split(":")
        if len(parts) not in (2, 3):
            raise SizeError(f"size range {spec!r} must be LO:HI, LO:HI:FACTOR or LO:HI:+STEP, "
                            f"e.g. 1M:1G, 1K:1G:4 or 1M:1G:+1M")
        lo, hi = parse_size(parts[0]), parse_size(parts[1])
        if lo > hi:
            raise SizeError(f"size range {spec!r} goes down: LO must not exceed HI "
                            f"(did you mean {parts[1]}:{parts[0]}?)")
        factor = 2
        if len(parts) == 3 and parts[2].strip().startswith("+"):
            return _linear_range(spec, lo, hi, parts[2].strip()[1:])
        if len(parts) == 3:
            if not _FACTOR_RE.match(parts[2]) or len(parts[2].strip()) > 6 or int(parts[2]) < 2:
                raise SizeError(f"size range factor {parts[2]!r} must be a whole number of at least 2, e.g. 1K:1G:4")
            factor = int(parts[2])
        sizes = []
        s = lo
        while s <= hi:
            sizes.append(s)
            s *= factor
        return sizes
    # Counted before it is split: a list of 10^7 sizes is refused without making 10^7 strings.
    count = spec.count(",") + 1
    if count > MAX_SIZE_COUNT:
        raise SizeError(f"size list has {count} items, more than {MAX_SIZE_COUNT}; "
                        f"use a range (e.g. 1K:1G or 1K:1G:+1K) or split the run")
    items = spec.split(",")
    if any(not item.strip() for item in items):
        raise SizeError(f"size list {spec!r} has an empty item; use e.g. 8,1K,1M")
    return sorted({parse_size(item) for item in items})


def _linear_range(spec: str, lo: int, hi: int, step_text: str) -> list[int]:
    """LO, LO+STEP, ... up to HI (``LO:HI:+STEP``)."""
    try:
        step = parse_size(step_text)
    except SizeError as exc:  # (it is the step that is wrong, not a size)
        raise SizeError(f"size range {spec!r}, its step (after '+'): {exc}") from exc
    count = (hi - lo) // step + 1
    if count > MAX_SIZE_COUNT:
        raise SizeError(f"size range {spec!r} has {count} sizes, more than {MAX_SIZE_COUNT}; "
                        f"use a larger step or a factor (e.g. {format_size(lo)}:{format_size(hi)}:2)")
    return list(range(lo, hi + 1, step))


def format_size(n: int) -> str:
    """Short binary form of a size: 1048576 -> '1M', 1536 -> '1536'."""
    for suffix, scale in (("T", 1 << 40), ("G", 1 << 30), ("M", 1 << 20), ("K", 1 << 10)):
        if n >= scale and n % scale == 0:
            return f"{n // scale}{suffix}"
    return str(n)
