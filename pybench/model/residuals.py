"""What the measurements say between the lines: each measured size's relative residual, carried
to the sizes between them.

A piecewise alpha-beta line averages the sizes of its piece; a real sweep bends a little inside
a piece (NCCL's channel count and chunk size change with the message). At a size between two
measured ones, the best guess of that bend is the residuals of its two measured neighbours,
interpolated linearly in log size: the prediction is the line's time times
``1 + r(size)``. At a measured size this returns the measured median. Outside the measured
sizes (extrapolation) the line alone answers, since nothing measured says how the bend goes on.

Measured (leave-one-size-out from 64 KiB, median / max % with named anomalies left out;
vTrain tables fitted on their powers of two, every 1 MiB step predicted, median %):

=========================  =================  =================
                           line only          line x (1 + r)
=========================  =================  =================
A100 2x8 all-reduce        2.73 / 13.0        2.94 / 12.6
H100 2x8 all-reduce        4.12 / 14.3        3.49 / 15.1
B200 2x8 all-gather        14.05 / 36.9       11.72 / 40.5
vTrain 2..8 GPUs (median)  0.30 - 1.56        0.21 - 0.62
=========================  =================  =================

Residuals are kept per piece (:attr:`pybench.model.segment.SegmentFit.residuals`) and hold
only at the fitted world size: a model asked about another world size drops them.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np


def measured_residuals(size: np.ndarray, time: np.ndarray, line_time: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(distinct sizes, median measured time / line time - 1 at each), sizes ascending."""
    sizes = np.unique(size)
    ratio = time / line_time
    return sizes, np.array([float(np.median(ratio[size == u])) - 1.0 for u in sizes])


def correction_at(segments: Sequence, size: np.ndarray) -> np.ndarray:
    """Relative correction ``r(size)`` from the pieces' residuals: linear in log size between the
    measured sizes around ``size``, 0 outside the measured range or where none were recorded."""
    pairs = sorted(pair for seg in segments for pair in getattr(seg, "residuals", ()))
    out = np.zeros_like(size, dtype=float)
    if len(pairs) < 2:
        return out
    knots = np.log(np.array([p[0] for p in pairs], dtype=float))
    values = np.array([p[1] for p in pairs], dtype=float)
    logs = np.log(size)
    inside = (logs >= knots[0]) & (logs <= knots[-1])
    out[inside] = np.interp(logs[inside], knots, values)
    return out
