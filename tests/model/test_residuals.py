"""Predictions between measured sizes carry the measured neighbours' residuals
(pybench.model.residuals): exact at measured sizes, the line outside the measured range,
dropped at other world sizes, kept in model files (old files without them still load)."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from pybench.errors import UsageError
from pybench.model.piecewise import fit_alpha_beta, fit_single_line
from pybench.model.piecewise_model import AlphaBetaModel
from pybench.model.segment import SegmentFit

SIZES = 2.0 ** np.arange(16, 31)


def _bent_sweep():
    # alpha 20 us, 50 GB/s, bent by a smooth +-3% wave in log size (as NCCL's channel changes bend one)
    rel = 0.03 * np.sin(np.log2(SIZES))
    return SIZES, (20e-6 + SIZES / 50e9) * (1 + rel)


def test_a_measured_size_predicts_its_measured_median_and_in_between_follows_the_bend():
    size, time = _bent_sweep()
    fit = fit_alpha_beta(np.repeat(size, 2), np.repeat(time, 2))  # replicates that agree: no noise
    t, _ = fit.predict(size)
    assert np.allclose(t, time, rtol=1e-9)
    # halfway (in log size) between measured sizes the carried bend is closer to the truth than a line
    mid = np.sqrt(size[:-1] * size[1:])
    got = fit.predict(mid)[0]
    truth = (20e-6 + mid / 50e9) * (1 + 0.03 * np.sin(np.log2(mid)))
    plain = fit_single_line(size, time).predict(mid)[0]
    assert np.median(np.abs(got / truth - 1)) < np.median(np.abs(plain / truth - 1))


def test_a_residual_is_carried_in_proportion_to_how_far_it_stands_above_its_own_noise():
    # Each residual is shrunk by r^2 / (r^2 + var(median)): replicates 1% apart barely touch a 3%
    # bend; replicates as far apart as the bend itself (H100's out-of-place vs in-place at 32 KiB)
    # keep only part of it.
    from pybench.model.residuals import measured_residuals

    line = np.ones(4)
    size = np.repeat([1.0, 2.0], 2)
    for spread in (0.01, 0.06):
        kept = 0.03 ** 2 / (0.03 ** 2 + spread ** 2)  # two replicates +-spread: var(median) = spread^2
        time = np.array([1.03 - spread, 1.03 + spread, 1.0, 1.0])
        _, r = measured_residuals(size, time, line)
        assert r[0] == pytest.approx(0.03 * kept, rel=1e-9) and r[1] == 0.0
    one = measured_residuals(np.array([1.0, 2.0]), np.array([1.05, 0.97]), np.ones(2))[1]
    assert np.allclose(one, [0.05, -0.03])  # one measurement per size: nothing to tell noise from bend


def test_outside_the_measured_sizes_the_nearest_ends_residual_is_carried():
    """Beyond the sweep the line times the residual of the sweep's end on that side (a last size where a
    slower regime starts, which no piece holds yet, is not forgotten one size further)."""
    size, time = _bent_sweep()
    fit = fit_alpha_beta(size, time)
    far = np.array([2.0 ** 10, 2.0 ** 36])
    got = fit.predict(far)[0]
    bare = dataclasses.replace(fit, segments=tuple(dataclasses.replace(s, residuals=()) for s in fit.segments))
    pairs = sorted(p for seg in fit.segments for p in seg.residuals)
    ends = np.array([pairs[0][1], pairs[-1][1]])
    assert np.allclose(got, bare.predict(far)[0] * (1 + ends), rtol=1e-12) and np.any(ends != 0)
    assert fit_single_line(size, time).segments[0].residuals == ()  # the textbook baseline stays one line


def test_residuals_hold_at_the_fitted_world_only_and_survive_the_model_file(tmp_path):
    size, time = _bent_sweep()
    fit = fit_alpha_beta(size, time)
    model = AlphaBetaModel(collective="allreduce", backend="nccl", link_class="intra-node", world_size=8,
                           dtype="float32", algorithm="ring_allreduce", segments=fit.segments)
    again = AlphaBetaModel.from_dict(model.to_dict())
    assert [s.residuals for s in again.segments] == [s.residuals for s in fit.segments]
    assert again.predict(size[3]).time_s == pytest.approx(time[3], rel=1e-9)
    with pytest.raises(UsageError, match="holds no topology model"):  # other worlds: the topology model's
        again.predict(size[3], world=16)
    # a file written before residuals were recorded loads and predicts with the lines
    d = model.to_dict()
    for seg in d["segments"]:
        del seg["residuals"]
    old = AlphaBetaModel.from_dict(d)
    assert all(s.residuals == () for s in old.segments)


def test_a_residual_at_or_below_minus_one_is_refused_as_unphysical():
    seg = fit_alpha_beta(*_bent_sweep()).segments[0].to_dict()
    seg["residuals"] = [[65536, -1.0]]
    with pytest.raises(ValueError, match="residuals must be relative errors above -1"):
        SegmentFit.from_dict(seg)


def test_a_residual_at_an_impossible_size_is_refused():
    seg = fit_alpha_beta(*_bent_sweep()).segments[0].to_dict()
    for size in (0, -4096, 1 << 60):
        seg["residuals"] = [[size, 0.01]]
        with pytest.raises(ValueError, match="at sizes from 1 to"):
            SegmentFit.from_dict(seg)
