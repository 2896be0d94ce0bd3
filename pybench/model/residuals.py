"""What the measurements say between the lines: each measured size's relative residual, carried
to the sizes between them.

A piecewise alpha-beta line averages the sizes of its piece; a real sweep bends a little inside
a piece (NCCL's channel count and chunk size change with the message). At a size between two
measured ones, the best guess of that bend is the residuals of its two measured neighbours,
interpolated linearly in log size: the prediction is the line's time times
``1 + r(size)``. At a measured size this returns the measured median. Outside the measured
sizes the nearest end's residual is carried: the sweep's last size may be where a regime starts
that no piece holds yet (a CPU sweep leaving its caches), and what the line alone says there
ignores it; the interval beyond the sizes widens with the distance either way.

Each residual is first shrunk by the noise of its own median: ``r * r^2 / (r^2 + var)``, with
``var`` the variance of the median from the replicates at that size (nccl-tests' out-of-place
and in-place columns, pybench's repeats; a size measured once is taken as it is). A bend the
replicates agree on is carried whole; a "bend" no larger than their disagreement is mostly
noise, and carrying it moves the neighbours' predictions the wrong way (where nccl-tests' two
time columns disagree). The effect of each choice on held-out sizes is measured by
``python benchmarks/model_cross_validation.py``.

Residuals are kept per piece (:attr:`pybench.model.segment.SegmentFit.residuals`) and hold
only at the fitted world size: a model asked about another world size drops them.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np


def measured_residuals(size: np.ndarray, time: np.ndarray, line_time: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(distinct sizes, median measured time / line time - 1 at each, shrunk by its noise), sizes ascending."""
    sizes = np.unique(size)
    ratio = time / line_time
    out = []
    for u in sizes:
        rr = ratio[size == u]
        r = float(np.median(rr)) - 1.0
        if rr.size > 1:  # the median's variance, from the replicates' spread
            v = float(np.var(rr, ddof=1)) / rr.size
            if r * r + v > 0:
                r *= r * r / (r * r + v)
        out.append(r)
    return sizes, np.array(out)


def correction_at(segments: Sequence, size: np.ndarray) -> np.ndarray:
    """Relative correction ``r(size)`` from the pieces' residuals: linear in log size between the
    measured sizes around ``size``, the nearest end's beyond the measured range, 0 where none were recorded."""
    pairs = sorted(pair for seg in segments for pair in getattr(seg, "residuals", ()))
    out = np.zeros_like(size, dtype=float)
    if len(pairs) < 2:
        return out
    knots = np.log(np.array([p[0] for p in pairs], dtype=float))
    values = np.array([p[1] for p in pairs], dtype=float)
    return np.interp(np.log(size), knots, values)  # beyond either end: that end's residual, carried
