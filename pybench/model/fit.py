"""Fit the alpha-beta model T(size) = alpha + size / B, piecewise, to measured sweeps.

Why piecewise: NCCL and MPI switch algorithm and protocol with message size (LL, LL128,
Simple; ring, tree, NVLS), so a real sweep is a chain of roughly straight pieces in
(size, time), each with its own latency and bandwidth. The design brief cites one line
missing a real 8 x A100 sweep by more than 100% at 1-4 MiB; on the 2 x 8 A100 all-reduce
log in shared/data one line misses by up to 37% (leave-one-size-out: median 23%), the
piecewise fit by up to 6% (leave-one-size-out: median 2.7%, max 13%; both nccl-tests
columns used, see :meth:`pybench.model.logs.MeasurementSet.fit_points`). The table for every
log and CPU run: ``python benchmarks/model_cross_validation.py``.

How:

* Each piece is fitted by least squares on *relative* residuals
  ``(T_i - alpha - s_i c) / T_i`` (weights 1/T^2), with ``c = 1/B``: sizes span nine
  decades, and an absolute fit would ignore every small message.
* Physics is a constraint, not a hope: alpha >= 0 and 1/B >= 0 in every piece. Where the
  unconstrained fit breaks one (on CPU sweeps the time grows faster than linearly as
  buffers leave the caches, ~10 GB/s cache-resident against ~2.5 GB/s or less from
  memory, and a line through such a convex stretch has a negative intercept), the
  constrained optimum holds that parameter at 0 and fits the other alone; the piece then
  counts one parameter in the criterion. Predictions are therefore positive at every
  size and, through the algorithm formulas (positive factors), at every world size.
* Breakpoints are chosen by exact dynamic programming (the best split into k pieces
  for every k and every count of free parameters), and the number of pieces by an
  information criterion (BIC by default, AICc on request) on the weighted residual sum of
  squares. Each piece keeps ``min_points - 2`` residual degrees of freedom (4 points by
  default, 3 for a piece whose latency is held at 0). Breakpoints count as parameters.
  Pieces are fitted independently, so the model may jump at a breakpoint (a protocol
  switch does). The search weighs residuals with Huber weights (repeated until the split
  stops changing), so one size far off every line cannot hide a misfit spanning octaves;
  the pieces themselves are then fitted by plain relative least squares.
* The residual sum of squares gets a floor of ``noise_floor`` relative error per point
  (1% by default): these machines are noisy to at least that level, and without a floor
  the criterion would keep splitting to chase noise it cannot see.
* Confidence intervals come from the weighted least-squares covariance
  ``s^2 (X^T W X)^-1`` and Student's t quantile (scipy's ``stdtrit``),
  intersected with the physical range (alpha >= 0, 1/B >= 0): that keeps their coverage.
  The upper end of B is inf when the interval of 1/B reaches 0 (unbounded, said in
  words by :meth:`SegmentFit.ci_notes` and as null plus a note in JSON), and intervals
  are nan (undefined) without residual degrees of freedom.
* Between measured sizes a prediction carries the measured neighbours' relative residuals
  (:mod:`~pybench.model.residuals`): the line's time times ``1 + r``, ``r`` interpolated in
  log size, so a measured size predicts its measured median and a curve's bend inside a
  piece is kept; outside the measured sizes and at other world sizes the lines answer.
* Prediction bands also hold the fit's own leave-one-size-out errors
  (:mod:`~pybench.model.jackknife`): a piece's residual scatter says nothing about the
  step to the next piece, so a band is never narrower than the errors of the measured
  sizes nearby, holds both pieces' bands in a gap, and widens per octave beyond the data.

Public entry points: :func:`fit_alpha_beta`, :func:`fit_single_line`,
:func:`fit_segment`, :func:`cross_validate`.

This module is their public face; the code lives in one module per idea:
:mod:`~pybench.model.segment` (one constrained
piece), :mod:`~pybench.model.piecewise` (the regime search), :mod:`~pybench.model.cross_validation`
and :mod:`~pybench.model.algorithm_choice` (which formula explains several world sizes).
"""

from pybench.model.cross_validation import CrossValidation, cross_validate
from pybench.model.piecewise import PiecewiseFit, fit_alpha_beta, fit_single_line, predict_segments
from pybench.model.segment import (
    DEFAULT_CONFIDENCE,
    DEFAULT_MIN_POINTS,
    DEFAULT_NOISE_FLOOR,
    HELD_CHOICES,
    SegmentFit,
    fit_segment,
)

__all__ = ["CrossValidation", "DEFAULT_CONFIDENCE", "DEFAULT_MIN_POINTS", "DEFAULT_NOISE_FLOOR",
           "HELD_CHOICES", "PiecewiseFit", "SegmentFit", "cross_validate", "fit_alpha_beta", "fit_segment",
           "fit_single_line", "predict_segments"]
