"""Fewer ranks per node than any fitted layout, on more nodes: the interval stays within what a ring over every rank
could take (the fitted layout's latency, its bytes at most doubled and carried at the asked ranks' share of the
NICs), and above one crossing step. A 2 x 8 H100 fit asked for 16 x 1 had put 1 GiB between 10.7 ms and 33 s,
and 1 KiB down to 30 ns."""

from __future__ import annotations

import pytest
from conftest import PUBLIC_LOGS, SHARED_DATA

from pybench import load_model
from pybench.cli.main import main
from pybench.model.logs import load_measurements

P5 = SHARED_DATA / "nccl-tests" / "h100_p5_2node_16gpu_efa_allreduce_srunprefix.txt"


@pytest.fixture(scope="module")
def fitted(tmp_path_factory):
    path = tmp_path_factory.mktemp("p5") / "p5.json"
    assert main(["fit", str(P5), "--nodes", "2", "-o", str(path)]) == 0
    return load_model(path)


@pytest.mark.parametrize("size", [1 << 10, 1 << 20, 1 << 30])
def test_one_rank_per_node_on_more_nodes_has_a_bounded_interval(fitted, size):
    fit_2x8 = fitted.predict(size, world=16, nodes=2)
    p = fitted.predict(size, world=16, nodes=16)
    assert p.time_low_s <= p.time_s <= p.time_high_s
    # a ring of 16 crossings pays no more steps than the fitted ring of 16 ranks, and its bytes at most twice as
    # many, each rank at an eighth of the node's NICs; the fitted times stray by the calibrated factor (about 3.5)
    assert p.time_high_s < 60 * fit_2x8.time_s
    assert p.time_low_s > fit_2x8.time_s / 16 / 4  # at least one of the fitted layout's steps, less that stray


def test_fewer_ranks_per_node_bounds_keep_the_measured_time(tmp_path):
    """The h100-xr01 cluster on 10 nodes, fitted at 8 ranks per node: the measured 1 rank per node stays inside."""
    path = tmp_path / "x8.json"
    assert main(["fit", str(PUBLIC_LOGS / "xr01_h100_N10_G8.log"), "-o", str(path)]) == 0
    model = load_model(path, collective="allreduce")
    (ms,) = [m for m in load_measurements(PUBLIC_LOGS / "xr01_h100_N10_G1.log") if m.collective == "allreduce"]
    inside = 0
    sizes = [(s, t) for s, t in zip(ms.size_bytes, ms.time_s) if s >= 1 << 20]
    for size, measured in sizes:
        p = model.predict(int(size), world=10, nodes=10)
        inside += p.time_low_s <= measured <= p.time_high_s
        assert p.time_high_s < 40 * p.time_s
    assert inside == len(sizes)


def test_fewer_ranks_on_the_fitted_nodes_take_no_higher_ceiling_than_the_fitted_layout_allows(tmp_path):
    """On the nodes fitted, fewer ranks per node pay no more steps than the fitted ring and no more tree levels: the
    ceiling stays the fitted time's, stray included, whatever the ranks per node (an every-step-crosses reading had
    put 10 x 1 at 9 times 10 x 8's latency, above 20 x 1 and 40 x 1; helper-94 M2)."""
    path = tmp_path / "x8.json"
    assert main(["fit", str(PUBLIC_LOGS / "xr01_h100_N10_G8.log"), "-o", str(path)]) == 0
    model = load_model(path, collective="allreduce")
    fitted = model.predict(8, world=80, nodes=10)
    highs = [model.predict(8, world=w, nodes=10).time_high_s for w in (10, 20, 40)]
    assert all(h <= highs[-1] * 1.001 for h in highs) and highs[-1] < 5 * fitted.time_s, (highs, fitted.time_s)
