"""Leave-one-dataset-out validation: the generated table and constants match the code, and today's
held-out accuracy is pinned so that a regression fails."""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pytest

from conftest import PUBLIC_LOGS, SHARED_DATA
from pybench.errors import NotDetermined
from pybench.model.calibration import BEYOND_SIZES, Calibration, Spread, load_calibration
from pybench.model.logs import load_measurements
from pybench.model.system import load_system
from pybench.model.topology import OTHER_GPU_COUNT, OTHER_GPUS_PER_NODE, OTHER_NODE_COUNT
from pybench.model.topology_fit import fit_topology, observations_from, undisturbed_observations
from pybench.model.validation import choose_calibration, validate
from pybench.model.validation_cases import LEAVE_ONE_SIZE_OUT, Point
from pybench.model.validation_osu import osu_table

REPO = Path(__file__).resolve().parents[2]
NCCL = SHARED_DATA / "nccl-tests"


@pytest.fixture(scope="module")
def result():
    return validate(SHARED_DATA, PUBLIC_LOGS)


def test_the_shipped_constants_are_the_ones_chosen_on_every_dataset(result):
    shipped = json.loads((REPO / "pybench" / "model" / "calibration.json").read_text())
    chosen = result.calibration.to_dict()
    assert shipped.keys() == chosen.keys()
    for key, value in chosen.items():
        if isinstance(value, float):
            assert shipped[key] == pytest.approx(value, rel=1e-9), key
        else:
            assert shipped[key] == value, key


def test_the_generated_document_holds_todays_table(result):
    doc = (REPO / "docs" / "model-validation.md").read_text()
    assert result.table() in doc, "regenerate with: python benchmarks/model_validation.py --write"
    assert osu_table(result.osu_clusters) in doc, "regenerate with: python benchmarks/model_validation.py --write"


# OSU clusters no constant is chosen on (pybench.model.validation_osu), today: answered predictions pooled and per
# cluster, and how many the pairs answer at all. Azure AKS's CPU nodes answered one pair of six until session 32:
# fitted at 128 + 256 nodes (789 us per step of the tree at small sizes), 32 and 64 nodes ran 10 to 60 times faster
# at small sizes than the fitted shape allowed (5% of 38 covered). Such steps are beyond every system the
# calibration read, so those node counts are now refused as not determined (a rule made after seeing this cluster:
# its figure here is not held out for it).
# Added in session 33 after the constants: OSU on ABCI's V100 nodes ran 3.3 times as long on 32 nodes as on 16 from
# 1 MiB up (its nccl-tests runs of the same jobs 1.3 times), which no pair of fewer node counts shows.
OSU_SHORT_TODAY: dict[str, float] = {"osu-abci-v100-cuda": 0.87}


def test_the_osu_clusters_no_constant_was_chosen_on_are_pinned(result):
    scores = {s.dataset: s for s in result.osu_clusters}
    pooled = scores.pop("all")
    assert pooled.coverage >= 0.95 and pooled.answered >= 1420 and pooled.median_error <= 9.0, pooled
    assert pooled.median_half_width <= 72.0, pooled
    for dataset, s in scores.items():
        assert s.answered + s.refused > 0, s
        if s.answered:
            assert s.coverage >= OSU_SHORT_TODAY.get(dataset, 0.90), s
    # no refusal is silent: every unanswered prediction of the CPU clusters that answer none is counted
    assert scores["osu-eks-cpu"].refused == scores["osu-gke-cpu"].refused == scores["osu-aks-cpu"].refused == 228


# (kind, pooled coverage, median half-width %, median error %) held out today; a regression fails. (The p3dn V100
# cluster, added in session 30, scores 80% left one size out: the pins moved with it; its described row left in
# session 36, as its log forced NCCL's ring, which no description can know. The per-node pins tightened in session
# 34: a rate on rails, and send/recv's one flow per node.)
TODAY = [("between measured sizes", 0.995, 3.2, 0.4), (LEAVE_ONE_SIZE_OUT, 0.93, 16.5, 3.0),
         ("beyond the measured sizes", 0.97, 250.0, 19.0),
         ("another GPU count", 0.995, 25.0, 3.2), ("another GPU count per node", 0.95, 130.0, 26.0),
         ("another node count", 0.93, 215.0, 15.5),
         ("system description", 0.96, 110.0, 20.5), ("preset", 0.98, 650.0, 175.0)]


@pytest.mark.parametrize("kind, coverage, half_width, error", TODAY)
def test_held_out_accuracy_is_pinned(result, kind, coverage, half_width, error):
    score = result.score(kind)
    assert score.coverage >= coverage, score
    assert score.median_half_width <= half_width, score
    assert score.median_error <= error, score


def test_a_measured_node_with_its_description_is_pinned_held_out(result):
    score = result.score("system description", "a100-oci-2x8")  # a log with its node type measured alone
    assert score.coverage >= 0.99 and score.median_error <= 14.5 and score.median_half_width <= 84.0, score
    # the node on another cluster, whose one-node bus bandwidth is below this cluster's 2-node one: its 4 and 8 GiB
    # all-reduces run 1.23 times faster than that node allows, outside the interval in session 36, inside since
    # session 37 (ALCF Sophia's all-gather, 1.3 times faster at 1 GiB than the other rings' NIC efficiency says,
    # widened the described bandwidth part from 0.11 to 0.14, and both logs' half-widths with it)
    score = result.score("system description", "mi300x-aac10-2x8")
    assert score.coverage >= 0.86 and score.median_error <= 33.0 and score.median_half_width <= 87.0, score


# Held-out median error of each described log: the middle sizes, where the bandwidth protocol's steps
# across nodes rule, are what a description misses most.
# (Session 37: a described all-gather's ring waits on the network at one of each node's steps, not all: Polaris's
# all-gather 46.8% -> 7.6%; GCP A4's, whose every step ran as if waiting on the network, 11.9% -> 77.0%, inside its
# interval by its reach; ALCF Sophia's DGX A100 logs joined, its all-gather held out at 33.6%.)
DESCRIBED_TODAY = {"a100-oci-2x8": 14.5, "b200-a4-2x8": 77.5, "b200-a4-gke-2x8": 11.0, "h100-p5-2x8": 11.5,
                   "polaris-allgather": 8.0, "polaris-allreduce": 34.0, "h100-ib-nx8": 6.0, "h100-a3mega-2x8": 31.0,
                   "mi300x-aac10-2x8": 33.0, "mi355x-aac14-2x8": 7.0, "a100-sophia-allreduce": 12.0,
                   "a100-sophia-allgather": 34.0}


@pytest.mark.parametrize("dataset", sorted(DESCRIBED_TODAY))
def test_each_described_log_is_pinned_held_out(result, dataset):
    score = result.score("system description", dataset)
    assert score.median_error <= DESCRIBED_TODAY[dataset], score


# Held-out coverage below issue 24's 75% on one dataset, pinned so that it cannot fall further where one is.
# GCP A3 Mega's description: its GPUDirect-TCPXO steps across nodes in the bandwidth protocol are the slowest of
# all (444 us per step, the other logs' 34-168), so its sizes from 16 to 256 MiB run slower than the interval
# reaches (8 of 14 covered; 9 until session 37, when a described ring's latency narrowed the latency half-width
# chosen on the other systems). Until session 36 a NIC efficiency chosen at 0.59 (the mean of logs whose node's
# links bound them) made its middle sizes slower and covered 12, while its largest ran 1.6 times faster than
# predicted.
SHORT_TODAY: dict[tuple[str, str], float] = {("system description", "h100-a3mega-2x8"): 0.57}


def test_every_kind_is_calibrated_pooled_and_on_each_dataset(result):
    """Issue 24's calibration bar, held out: >= 90% pooled and >= 75% on each dataset, for every kind, but
    where :data:`SHORT_TODAY` pins a shortfall."""
    for s in result.scores:
        floor = SHORT_TODAY.get((s.kind, s.dataset), 0.90 if s.dataset == "all" else 0.75)
        assert s.coverage >= floor, s


def _polaris(collective, nodes):
    return observations_from(load_measurements(NCCL / f"polaris_a100_{nodes}node_4gpu_slingshot_{collective}.txt"))


def _polaris_fitted(collective, nodes):
    """The sweep as `pybench fit` takes it in (its disturbed sizes out, its sizes off the trend marked)."""
    (ms,) = load_measurements(NCCL / f"polaris_a100_{nodes}node_4gpu_slingshot_{collective}.txt")
    return undisturbed_observations(ms)


@pytest.mark.parametrize("collective, median_at_256, median_at_540", [("allreduce", 18.5, 24.5),
                                                                       ("allgather", 12.5, 10.0)])
def test_polaris_fitted_at_2_and_8_nodes_predicts_256_and_540(collective, median_at_256, median_at_540):
    model = fit_topology(collective, _polaris_fitted(collective, 2) + _polaris_fitted(collective, 8))
    for nodes, pinned in ((256, median_at_256), (540, median_at_540)):
        errors, inside = [], []
        for o in _polaris(collective, nodes):
            if o.size_bytes < 1 << 20:
                continue
            p = model.predict(int(o.size_bytes), o.world, o.nodes)
            assert p.provenance == OTHER_NODE_COUNT
            errors.append(abs(p.time_s / o.time_s - 1))
            inside.append(p.low_s <= o.time_s <= p.high_s)
        assert 100 * np.median(errors) <= pinned and np.mean(inside) >= 0.9


def test_one_node_and_its_system_description_predict_two_nodes():
    """The A100 node measured alone (vTrain, 8 GPUs) and the OCI A100 shape's NICs: the 2 x 8 RoCE log.

    The shipped constants were chosen with this log among the others; its held-out figure is in
    docs/model-validation.md. Pinned a little above today's median error, from 1 MiB to 1 GiB."""
    node = fit_topology("allreduce", observations_from(
        load_measurements(SHARED_DATA / "vtrain" / "a100_nvswitch_allreduce_8gpu.csv"), lambda _: 1))
    model = node.with_system(load_system("oci-bm-gpu4.8"))
    errors = [abs(model.predict(int(o.size_bytes), 16, 2).time_s / o.time_s - 1)
              for o in observations_from(load_measurements(NCCL / "a100_2node_16gpu_oci_roce_allreduce.txt"))
              if 1 << 20 <= o.size_bytes <= 1 << 30]
    # issue 24 asks for 15%: 18.1% until session 36, when the NIC efficiency came to be read at the largest sizes
    # of the logs whose NICs bound them, and an all-reduce on switches that do not reduce lies between NCCL's tree
    # and its ring; 12.9% today
    assert 100 * np.median(errors) <= 13.5


def test_a_kind_seen_on_one_system_takes_the_widest_widening():
    """Node-count predictions checked on one cluster alone have no other system to be checked on: they
    take the widest widening of any kind; a kind two systems hold is chosen on its own points."""
    def point(kind, group, error):
        return Point(group, group, kind, "case", error, spread=Spread(kind, 0.0, 1.0, False, False))

    calibration = choose_calibration([point(OTHER_GPU_COUNT, "a", 0.1), point(OTHER_NODE_COUNT, "b", 0.5),
                                      point(OTHER_NODE_COUNT, "c", 0.3)], [])
    both = {"bandwidth": pytest.approx(0.5), "latency": pytest.approx(0.5)}
    assert calibration.widening_several_layouts == {OTHER_NODE_COUNT: both, OTHER_GPU_COUNT: both,
                                                    OTHER_GPUS_PER_NODE: both, BEYOND_SIZES: both}
    calibration = choose_calibration([point(OTHER_GPU_COUNT, "a", 0.1), point(OTHER_GPU_COUNT, "d", 0.2),
                                      point(OTHER_NODE_COUNT, "b", 0.5), point(OTHER_NODE_COUNT, "c", 0.3)], [])
    both_02 = {"bandwidth": pytest.approx(0.2), "latency": pytest.approx(0.2)}
    assert calibration.widening_several_layouts == {OTHER_NODE_COUNT: both, OTHER_GPU_COUNT: both_02,
                                                    OTHER_GPUS_PER_NODE: both, BEYOND_SIZES: both}
    assert calibration.widening(OTHER_GPU_COUNT + ", beyond the measured sizes", False) == both_02
    assert calibration.widening("measured, beyond the measured sizes", False) == both


def test_more_nodes_bound_the_lower_end_below_the_fewer_node_time_by_what_real_runs_reached():
    """A 2-node fit asked for 540 nodes had a 95% interval from 0.01 us to 2 s at 1 KiB (2 nodes took 30 us): the
    widening over so many doublings reached nine decades. More nodes of the same ranks per node run at most as much
    faster than the fewer-node fit (and fewer nodes as much slower than the more-node fit) as any point of the
    calibration systems that the widenings cover: the bound takes none of those, so its misses and theirs do not
    add; over systems what covers one more."""
    def point(group, error, above_fewer=math.inf, below_more=math.inf):
        return Point(group, group, OTHER_NODE_COUNT, "case", error, spread=Spread(
            OTHER_NODE_COUNT, 0.0, 1.0, False, False, above_fewer_nodes=above_fewer, below_more_nodes=below_more))

    # more nodes measured 0.3 below the fewer-node time; fewer nodes 0.5 above the more-node time
    calibration = choose_calibration([point("a", 0.5, above_fewer=0.2), point("a", -0.4, above_fewer=0.0),
                                      point("b", 0.1, above_fewer=0.0), point("b", -0.6, below_more=0.1)], [])
    assert calibration.widening_several_layouts[OTHER_NODE_COUNT]["bandwidth"] == pytest.approx(0.6)
    assert calibration.more_nodes_speedup == pytest.approx(0.5)
    more = Spread(OTHER_NODE_COUNT, 0.0, 20.0, False, False, above_fewer_nodes=0.2)
    assert more.bounds(calibration) == pytest.approx((0.2 + 0.5, 12.0))  # the upper end still widens with distance
    fewer = Spread(OTHER_NODE_COUNT, 0.0, 20.0, False, False, below_more_nodes=0.1)
    assert fewer.bounds(calibration) == pytest.approx((12.0, 0.1 + 0.5))
    assert Spread(OTHER_NODE_COUNT, 0.0, 20.0, False, False).bounds(calibration) == pytest.approx((12.0, 12.0))


def test_the_shipped_lower_end_on_many_more_nodes_stays_near_the_fewer_node_time():
    from pybench.model.calibration import load_calibration
    from pybench.model.topology_fit import fit_topology
    from pybench.model.validation_cases import _polaris

    layouts = _polaris(REPO / "tests" / "fixtures" / "shared_data", "allreduce")
    model = fit_topology("allreduce", layouts[2])
    speedup = load_calibration().more_nodes_speedup
    assert 0.0 < speedup < 2.0
    for size in (1 << 10, 1 << 20, 1 << 30):
        fewer = model.predict(size, 8, 2).time_s
        p = model.predict(size, 2160, 540)
        assert p.low_s >= fewer * math.exp(-speedup) * (1 - 1e-9) and p.high_s > p.time_s >= fewer, (size, p)
    # and from the other side: a 540-node fit asked for 2 nodes takes no longer than it, nor reaches further above
    model = fit_topology("allreduce", layouts[540])
    for size in (1 << 10, 1 << 20, 1 << 30):
        more = model.predict(size, 2160, 540).time_s
        p = model.predict(size, 8, 2)
        assert p.low_s < p.time_s <= more * (1 + 1e-9) and p.high_s <= more * math.exp(speedup) * (1 + 1e-9), (size, p)
        # and no lower than a ring over 8 ranks instead of 2160 would take, give or take the same stray
        assert p.low_s >= more * 7 / 2159 * math.exp(-speedup) * (1 - 1e-9), (size, p)


def test_the_upper_end_on_many_more_nodes_grows_no_faster_than_a_rings_steps():
    """A 2-node Polaris fit asked for 540 nodes answered 1 GiB with an upper end of 606 s (the node-count widening
    over eight doublings): a ring over all 2160 ranks pays 2159 / 7 times the fitted latency and at most twice the
    bytes per node, and no algorithm NCCL picks pays more; the upper end reaches no further past that than a
    fitted time strays. The measured 540-node times stay inside."""
    from pybench.model.calibration import load_calibration
    from pybench.model.node_count_bounds import MOST_BYTES_GROWTH
    from pybench.model.topology_fit import fit_topology
    from pybench.model.validation_cases import _polaris

    layouts = _polaris(REPO / "tests" / "fixtures" / "shared_data", "allreduce")
    model = fit_topology("allreduce", layouts[2])
    stray = math.exp(load_calibration().more_nodes_speedup)
    for size in (1 << 20, 1 << 30):
        fitted = model.predict(size, 8, 2).time_s
        p = model.predict(size, 2160, 540)
        assert p.high_s <= stray * fitted * max(2159 / 7, MOST_BYTES_GROWTH) * (1 + 1e-9), (size, p)
    big = model.predict(1 << 30, 2160, 540)
    assert big.high_s < 1.0  # seconds, for a 1 GiB all-reduce that measured 74 ms
    for o in layouts[540]:
        if o.size_bytes >= 1 << 20:
            p = model.predict(o.size_bytes, 2160, 540)
            assert p.low_s <= o.time_s <= p.high_s, (o, p)


def test_mpi_runs_take_no_rings_steps_bound():
    """MPI libraries run algorithms of more steps or bytes than a ring (an Open MPI all-gather on 64 cloud nodes
    took 7.6 times what the ring's bound allowed from 4 nodes): the bound is NCCL's and RCCL's alone."""
    import dataclasses

    from pybench.model.logs import load_measurements
    from pybench.model.topology_fit import fit_topology_models

    (eks,) = load_measurements(REPO / "tests" / "fixtures" / "public_logs" /
                               "osu_awseks_hpc7a_n32_ppn96_allreduce.log", world_size=3072)
    (model,), _ = fit_topology_models([dataclasses.replace(eks, notes=(*eks.notes, "3072 ranks on 32 host(s)"))])
    assert model.backend == "mpi" and model.schedule == "ring"
    p = model.predict(1 << 20, 12288, 128)
    assert p.spread is not None and p.spread.below_most_steps == math.inf


def test_a_widening_has_a_bandwidth_part_and_a_latency_part_each_its_own_factor_of_its_share():
    """A cluster whose small sizes stray far between node counts (an H100 InfiniBand cluster's 4-node sweep ran
    its 1-8 MiB sizes at twice the 2- and 8-node times) does not widen the interval of the sizes its bytes rule:
    the latency part is chosen on the points latency rules, beside the bandwidth part, and each prediction's
    ends are the sums of its two parts' ends."""
    def point(group, error, share):
        return Point(group, group, OTHER_NODE_COUNT, "case", error, spread=Spread(OTHER_NODE_COUNT, 0.0, 1.0, False,
                                                                                 False, bandwidth_share=share))

    calibration = choose_calibration([point("a", 0.1, 1.0), point("a", -1.0, 0.0), point("b", 0.2, 0.98),
                                      point("b", -0.6, 0.2)], [])
    parts = calibration.widening_several_layouts[OTHER_NODE_COUNT]
    # the larger of the two systems' bandwidth points: 0.2 x 0.98 + 0.02 x 0.2 of the time, both parts alike
    assert parts["bandwidth"] == pytest.approx(0.2)
    # above the time by 0.6: 0.2 e^0.2 + 0.8 e^x = e^0.6, so x = 0.68 < 1.0
    assert parts["latency"] == pytest.approx(1.0)
    assert Spread(OTHER_NODE_COUNT, 0.0, 1.0, False, False, 1.0).bounds(calibration) == pytest.approx((0.2, 0.2))
    assert Spread(OTHER_NODE_COUNT, 0.0, 1.0, False, False, 0.0).bounds(calibration) == pytest.approx((1.0, 1.0))
    below, above = Spread(OTHER_NODE_COUNT, 0.0, 1.0, False, False, 0.5).bounds(calibration)
    assert above == pytest.approx(math.log(0.5 * math.exp(0.2) + 0.5 * math.exp(1.0)))
    assert below == pytest.approx(-math.log(0.5 * math.exp(-0.2) + 0.5 * math.exp(-1.0)))
    assert below < 0.6 < above  # a latency several times the priced one lifts the upper end more than the lower


def test_calibration_files_are_validated(tmp_path):
    good = load_calibration().to_dict()
    assert Calibration.from_dict(good) == load_calibration()
    for bad in ({**good, "widening_one_layout": -1}, {**good, "nic_efficiency": {"ring": 1.0}},
                {**good, "widening_one_layout": {OTHER_GPU_COUNT: 0.1}},
                {**good, "widening_several_layouts": {OTHER_GPU_COUNT: 0.1, OTHER_NODE_COUNT: -0.1}},
                {**good, "widening_several_layouts": {k: {"bandwidth": 0.1} for k in (OTHER_GPU_COUNT,
                                                                                     OTHER_NODE_COUNT)}},
                {**good, "widening_one_layout": {k: {"bandwidth": 0.1, "latency": -1.0} for k in (OTHER_GPU_COUNT,
                                                                                                 OTHER_NODE_COUNT)}},
                {k: v for k, v in good.items() if k != "crossing_latency_half_width"},
                {**good, "described_bandwidth_half_width": math.nan},
                {**good, "crossing_step_latency_s": math.inf}, {**good, "small_protocol_busbw_Bps": 0.0},
                {k: v for k, v in good.items() if k != "bandwidth_step_latency_s"},
                {k: v for k, v in good.items() if k != "nominal_step_latency_s"},
                {k: v for k, v in good.items() if k != "widening_one_layout"}):
        with pytest.raises(Exception, match="calibration"):
            Calibration.from_dict(bad)


def test_two_logs_of_one_system_are_one_draw_of_how_far_a_system_strays():
    """Polaris' all-reduce and all-gather are one cluster: counted as two systems, three draws made Student's
    bound of the next system far wider than two systems' largest."""
    def point(dataset, group, error):
        return Point(dataset, group, OTHER_NODE_COUNT, "case", error, spread=Spread(OTHER_NODE_COUNT, 0.0, 1.0, False,
                                                                                   False))

    calibration = choose_calibration([point("p-ar", "p", 0.3), point("p-ag", "p", 0.05), point("h", "h", 0.15)], [])
    assert calibration.widening_several_layouts[OTHER_NODE_COUNT]["bandwidth"] == pytest.approx(0.3)


def test_a_held_out_size_whose_replicates_disagree_is_not_scored():
    """The H100 InfiniBand cluster's 8-node sweep ran 8 MiB at 1272 us out of place and 321 us in place: no fit
    takes that size in, and no prediction is scored against it."""
    from pybench.model.validation_cases import _observations
    sizes = {int(o.size_bytes) for o in _observations(PUBLIC_LOGS / "h100ib_gjaion_8node64_allreduce.log", 8)}
    assert 8 << 20 not in sizes and {4 << 20, 16 << 20} <= sizes


def test_every_kind_ships_a_widening_even_where_its_points_chose_no_part():
    """Node-count points of two systems whose bytes take 70-90% of the time choose neither part: the kind was
    left out of the table, and the calibration written could not be read back."""
    def point(group, share):
        return Point(group, group, OTHER_NODE_COUNT, "case", 1.0, spread=Spread(OTHER_NODE_COUNT, 0.0, 1.0, False,
                                                                                False, bandwidth_share=share))

    gpu = [Point(g, g, OTHER_GPU_COUNT, "case", 0.1, spread=Spread(OTHER_GPU_COUNT, 0.0, 1.0, False, False))
           for g in ("c", "d")]
    calibration = choose_calibration([point("a", 0.7), point("b", 0.9), *gpu], [])
    assert set(calibration.widening_several_layouts) == {OTHER_GPU_COUNT, OTHER_GPUS_PER_NODE, OTHER_NODE_COUNT,
                                                         BEYOND_SIZES}
    d = calibration.to_dict()
    d["small_protocol_busbw_Bps"] = 1e9  # no 2-node case here to choose it
    assert Calibration.from_dict(d).widening(OTHER_NODE_COUNT, False) == {"bandwidth": pytest.approx(0.1),
                                                                          "latency": pytest.approx(0.1)}


def test_points_no_latency_widening_covers_count_among_the_misses():
    """A time far below its bytes' priced part (at a latency-ruled size) cannot be reached by any latency part: such
    points were left out of a system's percentile, as if covered. They take their place among its 5% of misses, and
    where they are more, the largest value that covers a point stands."""
    from pybench.model.validation import _percentile, _widening
    assert _percentile([0.1] * 38 + [0.4, math.inf]) == pytest.approx(0.4)  # left out, the 95th was 0.1
    assert _percentile([0.1] * 18 + [math.inf] * 2) == pytest.approx(0.1)  # more misses than 5%: the largest reached

    def point(error, share):
        return Point("a", "a", OTHER_NODE_COUNT, "case", error, spread=Spread(OTHER_NODE_COUNT, 0.0, 1.0, False,
                                                                             False, bandwidth_share=share))

    # 12x too slow where the bytes take 30% of the time: below t * 0.3 * e^-0.1 no latency part reaches
    late = [point(-0.2, 0.3)] * 38 + [point(-0.8, 0.3), point(math.log(12.0), 0.3)]
    parts = _widening({"a": [point(0.1, 1.0), *late]})
    assert parts["bandwidth"] == pytest.approx(0.1)
    needed = math.log((math.exp(0.8) - 0.3 * math.exp(0.1)) / 0.7)  # the -0.8 point, just covered
    assert parts["latency"] == pytest.approx(needed, rel=1e-6)


def test_a_measured_sweep_carried_beyond_its_sizes_takes_the_widening_validated_for_it():
    """Sizes beyond a sweep took the widest widening of the layout kinds, which no held-out point checked (one
    cluster's send/recv across node counts set it); they are a validated kind of their own now."""
    calibration = load_calibration()
    own = calibration.widening_one_layout[BEYOND_SIZES]
    assert calibration.widening(BEYOND_SIZES, True) == own
    assert calibration.widening("fitted sweep, " + BEYOND_SIZES, True) == own
    described = calibration.widening("system description, " + BEYOND_SIZES, True)  # a description's: the shapes'
    assert described == {p: max(calibration.widening_one_layout[k][p] for k in (OTHER_GPU_COUNT, OTHER_NODE_COUNT))
                         for p in ("bandwidth", "latency")}


def test_a_sweep_carried_beyond_its_sizes_has_a_slow_side_of_its_own():
    """NCCL runs each size in the fastest of its protocols, so a curve carried on (one protocol's) overestimates
    most sizes above a sweep: the interval's fast side is chosen on the points it overestimates, its slow side
    on those it underestimates, each its own widening, and the slow side above and below the sweep apart (smaller
    sizes may run on fewer channels); other kinds keep one widening for both sides."""
    def point(group, error, below=False, kind=BEYOND_SIZES):
        return Point(group, group, kind, "case", error, spread=Spread(kind, 0.0, 1.0, True, False, below_sweep=below))

    calibration = choose_calibration([point("a", 1.0), point("a", -0.1), point("b", 0.5), point("b", -0.2),
                                      point("a", -0.6, True), point("b", -0.3, True)], [])
    assert calibration.widening_one_layout[BEYOND_SIZES]["bandwidth"] == pytest.approx(1.0)
    assert calibration.slower_widening_above_sweep == pytest.approx(0.2)
    assert calibration.slower_widening_below_sweep == pytest.approx(0.6)
    assert Spread(BEYOND_SIZES, 0.0, 2.0, True, False).bounds(calibration) == pytest.approx((2.0, 0.4))
    assert Spread("fitted sweep, " + BEYOND_SIZES, 0.0, 2.0, True, False).bounds(calibration) == pytest.approx(
        (2.0, 0.4))
    assert Spread(BEYOND_SIZES, 0.0, 2.0, True, False, below_sweep=True).bounds(calibration) == pytest.approx(
        (2.0, 1.2))
    node = Spread(OTHER_NODE_COUNT, 0.0, 1.0, True, False).bounds(calibration)
    assert node[0] == node[1]
    shipped = load_calibration()  # the real sweeps say the same: above a sweep the slow side is the narrowest
    assert shipped.slower_widening_above_sweep < shipped.slower_widening_below_sweep
    assert shipped.slower_widening_above_sweep < shipped.widening_one_layout[BEYOND_SIZES]["bandwidth"]


def test_a_sweep_that_ended_while_latency_ruled_says_its_bytes_rate_is_not_measured():
    """The OCI 2-node all-reduce fitted up to 64 KiB predicted 1 GiB 6.6x too slow: nothing it measured shows the
    bytes' rate. Where its own line says the bytes would take most of the time, the prediction says so."""
    import dataclasses as dc

    from pybench.model.build import fit_model
    (ms,) = load_measurements(NCCL / "a100_2node_16gpu_oci_roce_allreduce.txt")
    keep = ms.size_bytes <= 1 << 16
    short = fit_model(dc.replace(ms, **{k: getattr(ms, k)[keep] for k in ("size_bytes", "time_s", "time_in_place_s")}))
    assert "bytes' rate is not measured" in short.provenance_at(float(1 << 30))
    with pytest.raises(NotDetermined, match=r"the sweep ended at 64K while latency ruled \(its last piece's fixed "
                                            r"[0-9.]+ us per call took over half of its time\), so the bytes' rate "
                                            r"that rules at 1G is not measured; measure it with `pybench allreduce "
                                            r"--sizes 64K:1G`"):
        short.predict(1 << 30)
    with pytest.raises(NotDetermined):  # any size of an array that it cannot answer
        short.predict([float(1 << k) for k in range(17, 33)])
    assert short.predict(1 << 17).time_s > 0  # latency still rules there: carried on, with its interval
    assert fit_model(ms).predict(1 << 34).time_s > 0  # a sweep that reached its bytes' rate
    # below a sweep its widening answers (a latency is at most the one carried down)
    long = fit_model(dc.replace(ms, **{k: getattr(ms, k)[ms.size_bytes >= 1 << 28]
                                       for k in ("size_bytes", "time_s", "time_in_place_s")}))
    assert long.undetermined_at(64.0) == "" and long.predict(64.0).time_s > 0


def test_a_point_is_scored_on_the_interval_its_prediction_returns():
    """Validation had scored each prediction's calibrated spread, while `predict` bounds it further (above the
    measured sizes no faster than the largest, nor slower per byte): the reported beyond-the-sizes half-width was
    776% where users got 242%. The spread still chooses the constants; the answer is scored."""
    spread = Spread(OTHER_NODE_COUNT, 0.0, 1.0, False, False)
    calibration = choose_calibration([Point("a", "a", OTHER_NODE_COUNT, "case", 0.5, spread=spread)], [])
    answered = Point("a", "a", OTHER_NODE_COUNT, "case", 0.5, spread=spread,
                     ends=lambda c: (2.0, 2.0 * math.exp(-0.3), 2.0 * math.exp(0.7)))
    assert answered.bounds(calibration) == pytest.approx((0.5, 0.5))
    assert answered.answered_bounds(calibration) == pytest.approx((0.3, 0.7))
    assert Point("a", "a", OTHER_NODE_COUNT, "case", 0.5, spread=spread).answered_bounds(calibration) == \
        pytest.approx((0.5, 0.5))


def test_above_a_sweep_the_fast_side_stops_at_a_calibrated_multiple_of_its_last_rate():
    """Above a sweep the interval's low end was the largest measured size's own: an OSU latency sweep carried from
    4 MiB to 1 GiB said 0.9 ms to 243 ms. No log's rate beyond a sweep grew without bound: the fast side stops at
    the bytes' time at the last piece's rate, over the factor that covered every calibration system's points."""
    def point(group, error, above_bytes_time):
        return Point(group, group, BEYOND_SIZES, "case", error,
                     spread=Spread(BEYOND_SIZES, 0.0, 1.0, True, False, above_bytes_time=above_bytes_time))

    calibration = choose_calibration([point("a", 0.5, 0.1), point("a", 0.2, 0.0), point("b", 0.9, 0.3),
                                      point("b", 0.1, math.inf)], [])
    assert calibration.beyond_bytes_speedup == pytest.approx(0.6)  # b's 0.9 - 0.3, a's 0.4 (two systems: largest)
    assert Spread(BEYOND_SIZES, 0.0, 5.0, True, False, above_bytes_time=0.2).bounds(calibration)[0] == \
        pytest.approx(0.8)
    shipped = load_calibration()
    assert 0.0 < shipped.beyond_bytes_speedup < 5.0
    from pybench.model.build import fit_model
    (ms,) = load_measurements(SHARED_DATA.parent / "osu_latency_f.txt")
    model = fit_model(ms)
    p = model.predict([float(1 << 26), float(1 << 30)])
    bytes_s = np.array([1 << 26, 1 << 30]) * model.segments[-1].inv_bw_s_per_byte
    assert np.all(p.time_low_s >= bytes_s * math.exp(-shipped.beyond_bytes_speedup) * (1 - 1e-9))
    assert p.time_low_s[1] > 15 * p.time_low_s[0] and np.all(p.time_low_s < p.time_s)  # 16x the bytes
