"""A string-valued enum that prints as its value on every supported Python (3.10 has no StrEnum).

Members compare equal to their strings and serialise to them in JSON, so a table or a
document reads the same whether a state is an enum member or the string it used to be.
"""

from __future__ import annotations

from enum import Enum

__all__ = ["TextEnum"]


class TextEnum(str, Enum):
    """``str`` and ``format`` give the value (``f"{Band.FITS}" == "fits"``)."""

    def __str__(self) -> str:
        return str(self.value)

    def __format__(self, spec: str) -> str:
        return format(str(self.value), spec)
