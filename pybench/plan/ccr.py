"""The CCR planner's public names in one place: ``from pybench.plan.ccr import ccr, plan, ModelSet``.

The planner is split by idea; this module only gathers its public names:

- :mod:`pybench.plan.model_set`: choosing a fitted model per collective (ModelSet, CommTime);
- :mod:`pybench.plan.config`: the typed inputs (CcrConfig);
- :mod:`pybench.plan.step`: the step model for one configuration (StepEstimate, OpTime);
- :mod:`pybench.plan.stragglers`, :mod:`pybench.plan.bands`, :mod:`pybench.plan.overlap`;
- :mod:`pybench.plan.grid`: the CCR grid, :func:`ccr` (CcrResult, Breakeven);
- :mod:`pybench.plan.result`: what the grid returns, as a table and a JSON document;
- :mod:`pybench.plan.advice` and :mod:`pybench.plan.records`: :func:`plan`, the advice records;
- :mod:`pybench.plan.plan_result`: the Plan, as sentences and a JSON document.
"""

from __future__ import annotations

from pybench.plan.advice import PLAN_HEADROOM, plan
from pybench.plan.bands import BAND_CAUTION, BAND_FITS, Band, band
from pybench.plan.config import CcrConfig
from pybench.plan.grid import ccr
from pybench.plan.model_set import CollectiveModel, CommTime, ModelSet, Prediction, load_model_set
from pybench.plan.overlap import OverlapProfile, bucket_sizes, bucketed_serial_s, overlap_exposed_s
from pybench.plan.plan_result import Plan
from pybench.plan.records import Advice
from pybench.plan.result import Breakeven, CcrResult
from pybench.plan.step import OpTime, StepEstimate
from pybench.plan.stragglers import expected_max_normal, straggler_factor
from pybench.plan.strategies import MemoryFit

__all__ = [
    "CollectiveModel", "Prediction", "ModelSet", "CommTime", "OpTime", "StepEstimate", "Breakeven",
    "CcrConfig", "CcrResult", "ccr", "band", "Band", "MemoryFit", "expected_max_normal", "straggler_factor",
    "overlap_exposed_s", "bucket_sizes", "bucketed_serial_s", "OverlapProfile", "load_model_set", "BAND_FITS",
    "BAND_CAUTION", "Plan", "Advice", "plan", "PLAN_HEADROOM",
]
