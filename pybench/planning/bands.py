"""The bands a CCR or exposed fraction falls in: fits, caution, comm-bound.

Below 0.15 communication is a small tax; 0.15-0.30 it is worth watching; above
0.30 the step is communication-bound and more devices mostly buy waiting.
The band values are plain strings too (``Band.FITS == "fits"``), so tables and
JSON read the same as before they were an enum.
"""

from __future__ import annotations

from pybench.planning.text_enum import TextEnum

__all__ = ["Band", "band", "BAND_FITS", "BAND_CAUTION"]

BAND_FITS = 0.15
BAND_CAUTION = 0.30


class Band(TextEnum):
    """Band of a communication fraction (CCR, or the exposed fraction with overlap)."""

    FITS = "fits"
    CAUTION = "caution"
    COMM_BOUND = "comm-bound"


def band(fraction: float) -> Band:
    """Band of a CCR or exposed fraction: ``fits`` (< 0.15), ``caution`` (0.15-0.30), ``comm-bound`` (> 0.30)."""
    if fraction < BAND_FITS:
        return Band.FITS
    if fraction <= BAND_CAUTION:
        return Band.CAUTION
    return Band.COMM_BOUND
