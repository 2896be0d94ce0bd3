"""Protocol regimes in the topology model: the fastest of a few fitted frames, as NCCL picks a protocol.

Synthetic sweeps built from two known regimes are recovered and carried to other world sizes
exactly; real 2-node nccl-tests sweeps (tests/fixtures/shared_data, verbatim copies) are fitted
far better than by one frame (figures pinned a little above today's, so a regression fails);
sweeps one frame already fits within the noise floor (vTrain) keep one regime.
"""

from __future__ import annotations

import json

import numpy as np
import pytest
from conftest import SHARED_DATA

from pybench.errors import FileFormatError
from pybench.model.link_cost import LinkCost
from pybench.model.regimes import Regime, _bandwidth_regime_last, envelope, fit_regimes
from pybench.model.topology import Observation, TopologyModel
from pybench.model.topology_fit import fit_topology
from pybench.model.topology_schedules import algorithm_steps

SIZES = [float(2 ** k) for k in range(3, 31)]  # 8 B .. 1 GiB
# Truth: an LL-like regime (little latency, a tenth of the bandwidth) and a Simple-like one.
LL = LinkCost(4e-6, 0.4e-6, 20e9, 0.0, "truth")
SIMPLE = LinkCost(12e-6, 1.5e-6, 200e9, 0.5, "truth")


def _truth(size: float, world: int) -> float:
    return min(LL.time_s("allreduce", "ring", size, world), SIMPLE.time_s("allreduce", "ring", size, world))


def _sweep(world: int, wobble: float = 0.0) -> list[Observation]:
    # A deterministic +-wobble, alternating with size, stands in for measurement noise.
    return [Observation(s, world, 1, _truth(s, world) * (1 + wobble * (-1) ** i)) for i, s in enumerate(SIZES)]


def test_two_known_regimes_are_recovered_and_carried_to_another_world_size():
    model = fit_topology("allreduce", _sweep(2) + _sweep(4), algorithm="ring")
    assert model.intra is not None and len(model.intra.regimes) == 1
    small, big = model.intra.all_regimes()
    assert small.busbw_Bps == pytest.approx(LL.busbw_Bps, rel=1e-6)
    assert big.busbw_Bps == pytest.approx(SIMPLE.busbw_Bps, rel=1e-6)
    assert big.step_s == pytest.approx(SIMPLE.step_s, rel=1e-6)
    # 8 ranks were never measured: every size, the switch included, is the truth's.
    for size in SIZES:
        assert model.predict(int(size), 8).time_s == pytest.approx(_truth(size, 8), rel=1e-6)
    regimes = [model.predict(int(s), 8).regime for s in SIZES]
    assert regimes[0] == "1 of 2" and regimes[-1] == "2 of 2"


def test_the_switch_moves_with_the_world_size_as_the_regimes_cross():
    model = fit_topology("allreduce", _sweep(2) + _sweep(4), algorithm="ring")

    def first_big(world: int) -> float:
        return next(s for s in SIZES if model.predict(int(s), world).regime == "2 of 2")

    def truth_first_big(world: int) -> float:
        return next(s for s in SIZES if SIMPLE.time_s("allreduce", "ring", s, world)
                    < LL.time_s("allreduce", "ring", s, world))

    for world in (2, 8, 64):
        assert first_big(world) == truth_first_big(world)
    assert first_big(64) > first_big(2)  # more hops: the low-latency protocol holds longer


def test_noise_below_the_floor_keeps_one_regime_per_split_and_noise_above_it_is_not_fitted_as_regimes():
    # 1% alternating wobble on two regimes: still two regimes, each within the wobble.
    model = fit_topology("allreduce", _sweep(2, 0.01) + _sweep(4, 0.01), algorithm="ring")
    assert len(model.intra.regimes) == 1
    for size in SIZES:
        assert model.predict(int(size), 8).time_s == pytest.approx(_truth(size, 8), rel=0.03)
    # One straight frame with 2% wobble: nothing to split.
    frame = LinkCost(10e-6, 1e-6, 100e9, 0.0, "truth")
    obs = [Observation(s, w, 1, frame.time_s("allreduce", "ring", s, w) * (1 + 0.02 * (-1) ** i))
           for w in (2, 4) for i, s in enumerate(SIZES)]
    assert fit_topology("allreduce", obs, algorithm="ring").intra.regimes == ()


def _vtrain(world: int) -> list[Observation]:
    path = SHARED_DATA / "vtrain" / f"a100_nvswitch_allreduce_{world}gpu.csv"
    if not path.is_file():
        pytest.skip(f"{path} is missing")
    table = np.loadtxt(path, delimiter=",", skiprows=1, usecols=(0, 3))
    return [Observation(float(size), world, 1, float(ns) * 1e-9) for size, ns in table]


def test_vtrain_stays_one_regime_because_one_frame_fits_it_within_the_floor():
    """Two regimes fit 2 and 4 GPUs to 1.1% rms instead of 2.2% but take the 8-GPU max from 18% to 28%."""
    obs = _vtrain(2) + _vtrain(4)
    model = fit_topology("allreduce", obs)
    assert model.intra.regimes == ()
    x = np.array([[1.0, *algorithm_steps("allreduce", "ring", o.world), 0.0] for o in obs])
    x[:, 2] = [o.size_bytes * s / o.world for o, s in zip(obs, x[:, 2])]
    x[:, 3] = [o.size_bytes / o.world for o in obs]
    y = np.array([o.time_s for o in obs])
    forced = fit_regimes(x, y, np.array([o.size_bytes for o in obs]), noise_floor=0.001)
    assert forced is not None and len(forced) >= 2  # the data does bend; the floor keeps it out


def _real(name: str):
    import dataclasses

    from pybench.model.logs import load_measurements
    from pybench.model.topology_fit import fit_topology_models
    path = SHARED_DATA / "nccl-tests" / name
    if not path.is_file():
        pytest.skip(f"{path} is missing")
    sets = load_measurements(path)
    if name.startswith("h100"):  # no Rank lines: its source names 2 nodes (what `fit --nodes 2` records)
        sets = [dataclasses.replace(ms, notes=(*ms.notes, f"{ms.world_size} ranks on 2 host(s) per --nodes"))
                for ms in sets]
    models, _ = fit_topology_models(sets)
    (model,) = models
    ms = sets[0]
    errs = np.array([abs(model.predict(int(s), ms.world_size, 2).time_s / t - 1)
                     for s, t in zip(ms.size_bytes, ms.time_s)])
    return model, ms, errs


@pytest.mark.parametrize("name, regimes, median, worst, one_frame_worst", [
    # today: 4 regimes 1.6% / 9.4% (one frame 15.8% / 35.2%)
    ("a100_2node_16gpu_oci_roce_allreduce.txt", 4, 0.02, 0.10, 0.30),
    # today: 2 regimes 15.5% / 35.6% (one frame 26.9% / 81.3%): 2 MiB is slower than 4 MiB
    ("b200_2node_16gpu_gke_a4_allgather.txt", 2, 0.16, 0.36, 0.75),
    # today: 3 regimes 3.2% / 11.5% (one frame 20.8% / 45.7%)
    ("h100_p5_2node_16gpu_efa_allreduce_srunprefix.txt", 3, 0.035, 0.12, 0.40),
])
def test_real_two_node_sweeps_are_fitted_by_their_regimes(name, regimes, median, worst, one_frame_worst):
    model, ms, errs = _real(name)
    assert len(model.inter.all_regimes()) == regimes
    assert np.median(errs) <= median and errs.max() <= worst
    one = TopologyModel.from_dict({**model.to_dict(), "inter": {**model.inter.to_dict(), "regimes": []}})
    one_errs = np.array([abs(one.predict(int(s), ms.world_size, 2).time_s / t - 1)
                         for s, t in zip(ms.size_bytes, ms.time_s)])
    assert one_errs.max() > one_frame_worst  # the bandwidth regime alone misses the middle of the sweep
    # Every regime wins at 3 or more of the measured sizes, smallest-size regime first.
    won = [model.predict(int(s), ms.world_size, 2).regime for s in ms.size_bytes]
    for k in range(1, regimes + 1):
        assert won.count(f"{k} of {regimes}") >= 3
    assert won[0] == f"1 of {regimes}" and won[-1] == f"{regimes} of {regimes}"


def test_the_bandwidth_regime_is_the_one_that_wins_at_the_largest_size():
    sizes = np.array([2.0 ** k for k in range(10, 21)])
    x = np.column_stack([np.ones_like(sizes), np.zeros_like(sizes), sizes, np.zeros_like(sizes)])
    slow = np.array([0.0, 0.0, 1e-9, 0.0])       # wins everywhere measured
    steep = np.array([1e-2, 0.0, 1e-12, 0.0])     # 10 ms + more bandwidth: would win only past 10 MB
    y = x @ slow
    kept = _bandwidth_regime_last([x], y, sizes, [Regime(steep), Regime(slow)])
    assert kept is not None and len(kept) == 1 and np.allclose(kept[0].theta, slow)
    time, winner = envelope([x], [Regime(slow)])
    assert np.allclose(time, y) and not winner.any()


def test_model_files_keep_the_regimes_and_refuse_malformed_ones(tmp_path):
    model = fit_topology("allreduce", _sweep(2) + _sweep(4), algorithm="ring")
    doc = json.loads(json.dumps(model.to_dict()))
    again = TopologyModel.from_dict(doc)
    assert again.intra == model.intra
    assert again.predict(4096, 16).time_s == model.predict(4096, 16).time_s
    link = doc["intra"]
    bad = [
        {**link, "regimes": {"base_s": 0}},                                     # not a list
        {**link, "regimes": [{**link["regimes"][0], "regimes": [link["regimes"][0]]}]},  # nested
        {**link, "regimes": [link["regimes"][0]] * 4},                           # more than 3 small-size regimes
        {**link, "regimes": [{**link["regimes"][0], "busbw_Bps": 2 * link["busbw_Bps"]}]},  # faster than the link
        {**link, "regimes": [{**link["regimes"][0], "base_s": -1.0}]},           # negative latency
    ]
    for d in bad:
        with pytest.raises(FileFormatError):
            TopologyModel.from_dict({**doc, "intra": d})
    older = {k: v for k, v in link.items() if k != "regimes"}  # a file from before regimes
    assert TopologyModel.from_dict({**doc, "intra": older}).intra.regimes == ()


def test_fit_lists_the_regimes_and_predict_names_the_one_used_per_size(tmp_path, capsys):
    from pybench.cli.main import main
    log = SHARED_DATA / "nccl-tests" / "a100_2node_16gpu_oci_roce_allreduce.txt"
    out, pj = tmp_path / "a100.json", tmp_path / "p.json"
    assert main(["fit", str(log), "-o", str(out)]) == 0
    text = capsys.readouterr().out
    assert "inter-node regime 1 of 4:" in text and "inter-node regime 4 of 4 (bandwidth):" in text
    # where each regime wins at the fitted layout: the protocol switches, in sizes
    lines = [line for line in text.splitlines() if "inter-node regime" in line]
    assert ", fastest from 8 B to " in lines[0] and lines[-1].endswith(" to 8 GiB at 16 ranks on 2 nodes")
    assert main(["predict", str(out), "--world", "32", "--nodes", "4", "--sizes", "8,1M,8G",
                 "--json", str(pj)]) == 0
    table = capsys.readouterr().out
    assert "another node count; regime 1 of 4" in table and "another node count; regime 4 of 4" in table
    records = json.loads(pj.read_text())["records"]
    assert [r["regime"] for r in records] == ["1 of 4", "3 of 4", "4 of 4"]


@pytest.mark.parametrize("times", [
    [1e-5, 3e-4, 1e-2],                         # 3 sizes, one frame misses: nothing to split
    [1e-5, 5e-5, 1e-5, 3e-4, 1e-4],             # 5 sizes, zig-zag: still too few for two regimes of 3
    [1e-5, 5e-5, 1e-5, 3e-4, 1e-4, 2e-3, 1e-3],  # 7: a split is tried, each side must keep 3 sizes
])
def test_short_or_erratic_sweeps_fit_without_error_and_every_regime_wins_at_three_sizes(times):
    obs = [Observation(1e3 * 4 ** i, 2, 1, t) for i, t in enumerate(times)]
    model = fit_topology("allreduce", obs)
    won = [model.predict(int(o.size_bytes), 2).regime for o in obs]
    for k in range(1, len(model.intra.all_regimes()) + 1):
        assert not model.intra.regimes or won.count(f"{k} of {len(model.intra.all_regimes())}") >= 3


def _public(name: str):
    from conftest import PUBLIC_LOGS

    from pybench.model.logs import load_measurements
    from pybench.model.topology_fit import undisturbed_observations
    (ms,) = load_measurements(PUBLIC_LOGS / name)
    return ms, undisturbed_observations(ms)


def test_a_sweep_whose_best_regimes_share_no_split_with_fewer_is_still_fitted_by_them():
    """An H100 InfiniBand 2-node all-reduce (nccl-tests#309) bends twice above 512 KiB (LL128 to Simple near
    32 MiB, and more channels near 256 MiB): its best 3- and 4-regime splits share no split point with its best
    2-regime one. Adding one split to the last, the search stopped at 2 regimes and missed its own 8 GiB by 9%
    (its bandwidth regime 432 GB/s, where the sweep reaches 469); the contiguous search finds the 4."""
    ms, obs = _public("issue309_qoofyk_bmh100_2node16_allreduce_xpmem.log")
    model = fit_topology("allreduce", obs)
    assert len(model.inter.all_regimes()) == 4
    large = [abs(model.predict(o.size_bytes, o.world, o.nodes).time_s / o.time_s - 1)
             for o in obs if o.size_bytes >= 1 << 20]
    assert np.median(large) < 0.03 and max(large) < 0.08, large


def test_a_size_slower_than_its_neighbours_is_not_fitted_but_a_faster_one_is():
    """The same log's 8 B runs 1.9x slower than 16 B and 32 B (out-of-place 69 us, in-place 25 us): no lower
    envelope bends up at one size, and taken in it set the noise every regime was judged against."""
    ms, obs = _public("issue309_qoofyk_bmh100_2node16_allreduce_xpmem.log")
    off = {int(o.size_bytes) for o in obs if o.off_trend}
    assert off == {8}
    model = fit_topology("allreduce", obs)
    assert len(model.residuals) == len(obs) - 1  # the fit left it out, and only it
    # a faster point stays: a regime of its own may run there
    import dataclasses

    from pybench.model.topology_fit import undisturbed_observations
    times = np.array(ms.time_s, dtype=float)
    times[np.asarray(ms.size_bytes) == 1 << 20] /= 3
    faster = undisturbed_observations(dataclasses.replace(ms, time_s=times, time_in_place_s=None))
    assert not any(o.off_trend for o in faster if o.size_bytes == 1 << 20)


def test_the_first_size_of_a_slower_plateau_stays_in_the_fit():
    """Polaris's 2-node all-reduce steps up at 128 KiB (73 -> 371 us, then 411 and 463) and at 2 MiB: each first
    size lies off its neighbours' trend, but the larger sizes stay up, so it is a protocol NCCL's tuner chose, not
    a spike. Left out, the 540-node prediction moved further off (review of the off-trend rule)."""
    from pybench.model.logs import load_measurements
    from pybench.model.topology_fit import undisturbed_observations
    (ms,) = load_measurements(SHARED_DATA / "nccl-tests" / "polaris_a100_2node_4gpu_slingshot_allreduce.txt")
    assert not any(o.off_trend for o in undisturbed_observations(ms) if o.size_bytes in (128 << 10, 2 << 20))
    model = fit_topology("allreduce", undisturbed_observations(ms))
    assert model.size_range[0] == int(min(ms.size_bytes))  # what was measured, off-trend sizes included
