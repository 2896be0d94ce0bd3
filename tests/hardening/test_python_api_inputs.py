"""The Python API refuses bad arguments with one pybench error naming the argument: no bare numpy or builtin
exception, no silent truncation or coercion (a hostile review found each of these)."""

from __future__ import annotations

import numpy as np
import pytest
from conftest import SHARED_DATA

import pybench
from pybench.errors import UsageError

SIZES = [2.0 ** k for k in range(10, 24)]
TIMES = [20e-6 + s / 10e9 for s in SIZES]
LOG = SHARED_DATA / "nccl-tests" / "h100_p5_2node_16gpu_efa_allreduce_srunprefix.txt"


@pytest.mark.parametrize("kwargs, said", [
    ({"min_points": 0}, "min_points must be a whole number in 2-1000, got 0"),
    ({"min_points": 2.5}, "min_points must be a whole number"),
    ({"max_segments": 0}, "max_segments must be a whole number of at least 1"),
    ({"noise_floor": float("nan")}, "noise_floor must be a relative error in [0, 1)"),
    ({"noise_floor": -1}, "noise_floor must be a relative error"),
    ({"confidence": 1.5}, "confidence must lie strictly between 0 and 1"),
    ({"confidence": 0}, "confidence must lie strictly between 0 and 1"),
])
def test_fit_settings_out_of_range_are_refused(kwargs, said):
    with pytest.raises(UsageError, match=f"^{said.replace('[', '.').replace(')', '.')}"):
        pybench.fit_alpha_beta(SIZES, TIMES, **kwargs)


@pytest.mark.parametrize("kwargs", [{"min_points": 4.0}, {"max_segments": 2.0}, {"noise_floor": np.float32(0.01)},
                                    {"confidence": np.float32(0.95)}, {"confidence": np.array(0.95)}])
def test_fit_settings_as_numpy_numbers_or_whole_floats_are_taken(kwargs):
    assert pybench.fit_alpha_beta(SIZES, TIMES, **kwargs).segments


def test_fit_data_that_are_no_numbers_or_no_messages_are_refused():
    with pytest.raises(UsageError, match="^sizes and times must be numbers"):
        pybench.fit_alpha_beta(["a", "b"], ["c", "d"])
    with pytest.raises(UsageError, match="^a size above 16T is no message"):
        pybench.fit_alpha_beta([1e30, 2e30, 4e30], [1.0, 2.0, 4.0])


@pytest.mark.parametrize("path", [None, 3, 2.5])
def test_a_measurement_path_that_is_no_path_is_refused(path):
    with pytest.raises(UsageError, match="^path must be a file's path"):
        pybench.load_measurements(path)


@pytest.mark.parametrize("change, said", [
    ({"world": 16.5}, "world: 16.5 is not a whole number"),
    ({"batch": 1.5}, "batch: 1.5 is not a whole number"),
    ({"seq": 1.5}, "seq: 1.5 is not a whole number"),
    ({"flops_per_s": float("inf")}, "flops_per_s must be positive and finite"),
    ({"models": None}, "models must be a model file's path, a ModelSet or fitted models, not None"),
])
def test_ccr_arguments_are_refused_by_name_not_truncated(tmp_path, change, said):
    from pybench.cli.main import main
    path = tmp_path / "p5.json"
    assert main(["fit", str(LOG), "--nodes", "2", "-o", str(path)]) == 0
    args = {"seq": 4096, "batch": 1, "world": 16, "strategy": "ddp", "models": str(path), "flops_per_s": 4e14}
    with pytest.raises(UsageError, match=f"^{said}"):
        pybench.ccr("7B", **{**args, **change})
    # numpy's whole numbers are whole numbers, and one preset is one preset, not its letters
    res = pybench.ccr("7B", **{**args, "world": np.int64(16), "links": "nvlink4"})
    assert [r.world for r in res.rows] == [16]
    # a count given twice is one row (it printed two); numpy arrays of counts, and presets in a comma list
    assert len(pybench.ccr("7B", **{**args, "world": "16,16", "batch": [1, 1]}).rows) == 1
    assert [r.world for r in pybench.ccr("7B", **{**args, "world": np.array([8, 16])}).rows] == [8, 16]
    assert pybench.ccr("7B", **{**args, "links": "nvlink4,ib-ndr"}).rows
    with pytest.raises(UsageError, match="^flops_per_s must be a number of FLOP/s"):
        pybench.ccr("7B", **{**args, "flops_per_s": 10**400})
