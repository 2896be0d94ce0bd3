"""The yardsticks of leave-one-size-out: the neighbours' log-log line and the repeats' spread.

They say what a log allows, so that a missed criterion can be told apart from a weak fit.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from conftest import SHARED_DATA  # the repo's copies of ../shared/data

from pybench.errors import UsageError
from pybench.model.cross_validation import cross_validate, neighbour_baseline, replicate_spread
from pybench.model.logs import load_measurements

SIZES = 2.0 ** np.arange(10, 31)  # 1 KiB .. 1 GiB


def test_a_power_law_is_exact_between_and_beyond_the_neighbours():
    time = 3e-6 * (SIZES / 1024) ** 0.8
    nb = neighbour_baseline((SIZES, time), min_size=1024)
    assert nb.size_bytes[0] == 1024 and nb.size_bytes[-1] == 1 << 30  # both ends held out too
    assert nb.max_ape < 1e-9
    assert nb.covered is None  # no band is claimed


def test_on_alpha_beta_data_the_fit_beats_the_neighbours():
    # the knee of t = alpha + s/B bends in log-log: a straight line between the neighbours
    # misses it, the piecewise alpha-beta fit does not
    time = 20e-6 + SIZES / 10e9
    nb = neighbour_baseline((SIZES, time), min_size=1024)
    cv = cross_validate((SIZES, time), min_size=1024)
    assert cv.max_ape < 1e-6
    assert nb.max_ape > 5.0
    worst = int(nb.size_bytes[int(np.argmax(nb.ape_percent))])
    assert 64 << 10 <= worst <= 1 << 20, worst  # at the knee, alpha * B = 200 KB


def test_a_bump_costs_the_neighbours_its_height_on_each_side():
    time = 1e-6 * SIZES / 1024
    time[SIZES == 1 << 20] *= 1.5  # one size 1.5x slow
    nb = neighbour_baseline((SIZES, time), min_size=1024)
    at = {int(s): e for s, e in zip(nb.size_bytes, nb.ape_percent)}
    assert at[1 << 20] == pytest.approx(100 * (1 - 1 / 1.5))
    assert at[512 << 10] == pytest.approx(100 * (math.sqrt(1.5) - 1))
    assert at[4 << 20] < 1e-9


def test_replicated_sizes_count_as_their_median_and_their_spread_is_reported():
    size = np.repeat(SIZES, 2)
    time = 1e-6 * size / 1024
    time[1::2] *= 1.10  # the second column 10% slower everywhere
    nb = neighbour_baseline((size, time), min_size=1024)
    assert nb.max_ape < 1e-9  # both columns scale alike: their medians are a power law
    assert replicate_spread((size, time), min_size=1024) == pytest.approx(100 * 0.10 / 1.05)
    assert math.isnan(replicate_spread((SIZES, 1e-6 * SIZES)))  # measured once: nothing to say


def test_too_few_sizes_is_a_usage_error():
    with pytest.raises(UsageError, match="at least 3 distinct sizes"):
        neighbour_baseline(([1024.0, 2048.0], [1e-6, 2e-6]))


# Measured on the shared logs (`python benchmarks/model_cross_validation.py`), the sizes `fit`
# names left out: (neighbours' median %, max %, repeats' spread %). On B200 no fit between
# measured sizes meets the 5% median: the neighbours miss by 9.3% at the median, and the
# out-of-place and in-place columns disagree by 5.7% at the median (24% at 256 KiB: 380 vs 484 us).
BASELINE_PINS = {
    "a100_2node_16gpu_oci_roce_allreduce.txt": (2.65, 15.95, 1.26),
    "h100_p5_2node_16gpu_efa_allreduce_srunprefix.txt": (2.34, 14.84, 0.74),
    "b200_2node_16gpu_gke_a4_allgather.txt": (9.32, 25.51, 5.69),
}


@pytest.mark.parametrize("name", sorted(BASELINE_PINS))
def test_baselines_of_the_shared_logs(name):
    path = SHARED_DATA / "nccl-tests" / name
    if not path.is_file():
        pytest.skip(f"shared log {path} not found")
    m = load_measurements(path)[0]
    nb = neighbour_baseline(m, exclude_anomalies=True)
    cv = cross_validate(m, exclude_anomalies=True)
    assert np.array_equal(nb.size_bytes, cv.size_bytes)  # the same held-out sizes as the fit's
    median, worst, spread = BASELINE_PINS[name]
    assert nb.median_ape == pytest.approx(median, abs=0.01)
    assert nb.max_ape == pytest.approx(worst, abs=0.01)
    assert replicate_spread(m) == pytest.approx(spread, abs=0.01)
