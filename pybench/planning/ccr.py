"""The CCR planner's public names in one place: ``from pybench.planning.ccr import ccr, plan, ModelSet``.

The planner is split by idea; this module only gathers its public names:

- :mod:`pybench.planning.model_set`: choosing a fitted model per collective (ModelSet, CommTime);
- :mod:`pybench.planning.config`: the typed inputs (CcrConfig);
- :mod:`pybench.planning.step`: the step model for one configuration (StepEstimate, OpTime);
- :mod:`pybench.planning.stragglers`, :mod:`pybench.planning.bands`, :mod:`pybench.planning.overlap`;
- :mod:`pybench.planning.grid`: the CCR grid, :func:`ccr` (CcrResult, Breakeven);
- :mod:`pybench.planning.result`: what the grid returns, as a table and a JSON document;
- :mod:`pybench.planning.search`: every layout the plan weighs, within stated bounds;
- :mod:`pybench.planning.choice`: the decision rules that pick one of them;
- :mod:`pybench.planning.preset_check`: link presets a model file cannot use, said;
- :mod:`pybench.planning.advice` and :mod:`pybench.planning.records`: :func:`plan`, the advice records;
- :mod:`pybench.planning.plan_result`: the Plan, as sentences and a JSON document.
"""

from __future__ import annotations

from pybench.planning.advice import PLAN_HEADROOM, plan
from pybench.planning.bands import BAND_CAUTION, BAND_FITS, Band, band
from pybench.planning.config import CcrConfig
from pybench.planning.grid import ccr
from pybench.planning.model_set import CollectiveModel, CommTime, ModelSet, Prediction, load_model_set
from pybench.planning.overlap import OverlapProfile, bucket_sizes, bucketed_serial_s, overlap_exposed_s
from pybench.planning.plan_result import Plan
from pybench.planning.records import Advice
from pybench.planning.result import Breakeven, CcrResult
from pybench.planning.step import OpTime, StepEstimate
from pybench.planning.stragglers import expected_max_normal, straggler_factor
from pybench.planning.strategies import MemoryFit

__all__ = [
    "CollectiveModel", "Prediction", "ModelSet", "CommTime", "OpTime", "StepEstimate", "Breakeven",
    "CcrConfig", "CcrResult", "ccr", "band", "Band", "MemoryFit", "expected_max_normal", "straggler_factor",
    "overlap_exposed_s", "bucket_sizes", "bucketed_serial_s", "OverlapProfile", "load_model_set", "BAND_FITS",
    "BAND_CAUTION", "Plan", "Advice", "plan", "PLAN_HEADROOM",
]
