"""System descriptions: named systems as validated data, every NIC counted, layouts the inputs cannot determine."""

from __future__ import annotations

import dataclasses
import json
import math

import pytest
from conftest import PUBLIC_LOGS, REPO, SHARED_DATA, fitted_model_file

from pybench.cli.main import main as main_for_tests
from pybench.collectives import busbw_factor
from pybench.errors import FileFormatError, UsageError
from pybench.model.calibration import load_calibration
from pybench.model.link_presets import get_preset
from pybench.model.logs import load_measurements
from pybench.model.system import SystemDescription, load_system, named_systems
from pybench.model.topology import Observation, TopologyModel
from pybench.model.topology_fit import fit_topology
from pybench.model.validation_cases import _own_calibration, system_cases

OSU_ALLREDUCE = REPO / "tests" / "fixtures" / "osu_allreduce.txt"
NAMED = ("dgx-1-v100", "dgx-a100", "dgx-h100", "dgx-h200", "hgx-b200", "gb200-nvl72", "aws-p4d", "aws-p4de",
         "aws-p5", "gcp-a3", "gcp-a3-mega", "azure-nd-h100-v5", "ethernet-25g")


def test_named_systems_are_data_files_citing_their_source():
    assert set(NAMED) <= set(named_systems())
    for name in named_systems():
        system = load_system(name)
        assert system.name == name and len(system.source) > 20
        assert system.nic_Bps_per_node == system.nics_per_node * system.nic_Gbps * 1e9 / 8
    assert load_system("aws-p5").nic_Bps_per_node == 400e9  # 32 x 100 Gb/s EFA, not one port
    assert load_system("gb200-nvl72").domain_gpus() == 72


def test_the_docs_list_every_named_system():
    listed = (REPO / "docs" / "model.md").read_text()
    assert [n for n in named_systems() if f"`{n}`" not in listed] == []


def _write(tmp_path, **change):
    good = json.loads((load_system.__globals__["SYSTEMS_DIR"] / "dgx-h100.json").read_text())
    good.update(change)
    path = tmp_path / "mine.json"
    path.write_text(json.dumps(good))
    return path


@pytest.mark.parametrize("change, fragment", [
    ({"nics_per_node": 0}, "nics_per_node"),
    ({"intra_fabric": "hypercube"}, "intra_fabric"),
    ({"gpus_per_node": 8, "nvlink_domain_gpus": 12}, "multiple of gpus_per_node"),
    ({"nic_Gbps": "fast"}, "nic_Gbps"),
    ({"nic_Gbps": float("inf")}, "non-finite"),
    ({"nic_Gbps": 1e-300}, "nic_Gbps"),  # (a traceback: times beyond what a float holds)
    ({"intra_GBps_per_gpu": 1e-300}, "intra_GBps_per_gpu"),
    ({"surprise": 1}, "surprise"),
    ({"intra_fabric": "pcie", "in_switch_reduction": True}, "only NVSwitches reduce"),
    # (2^20 GPUs in one NVLink domain priced 8 nodes as one; NVLink Switch Systems join 576 at most)
    ({"gpus_per_node": 8, "nvlink_domain_gpus": 1 << 20}, "nvlink_domain_gpus.*576"),
    # (a name heads every table it prices: a newline and a terminal escape broke the '#' header)
    ({"name": "mine\n#       size\u001b[31m"}, "name: .*a name is letters, digits"),
    ({"name": "-rf"}, "from a letter or digit"),
])
def test_bad_descriptions_are_refused_in_one_line(tmp_path, change, fragment):
    path = _write(tmp_path, **change)
    with pytest.raises(FileFormatError, match=fragment) as info:
        load_system(path)
    assert "\n" not in str(info.value)


def test_a_description_file_of_ones_own_loads(tmp_path):
    mine = load_system(_write(tmp_path, name="my-cluster", nics_per_node=4))
    assert isinstance(mine, SystemDescription) and mine.nic_Bps_per_node == 4 * 400e9 / 8
    bom = tmp_path / "bom.json"  # as Windows editors save it (it was "Unexpected UTF-8 BOM (decode using ...)")
    bom.write_bytes(b"\xef\xbb\xbf" + _write(tmp_path, name="my-cluster", nics_per_node=4).read_bytes())
    assert load_system(bom) == mine
    with pytest.raises(UsageError, match="unknown system 'nope'.*dgx-h100"):
        load_system("nope")


def _sweep(world, nodes=1, alpha=10e-6, bw=200e9):
    return [Observation(float(s), world, nodes, alpha + 2 * (world - 1) / world * s / bw)
            for s in (2.0 ** k for k in range(16, 31))]


def test_gpus_per_node_must_hold_the_layout():
    model = fit_topology("allreduce", _sweep(8)).with_system(load_system("dgx-h100"))
    with pytest.raises(UsageError, match="16 ranks per node exceed the 8 GPUs"):
        model.predict(1 << 20, 16, 1)
    with pytest.raises(UsageError, match="not divisible|whole number"):
        model.predict(1 << 20, 12, 5)


def test_a_measured_node_and_its_nics_price_two_nodes_and_say_so():
    model = fit_topology("allreduce", _sweep(8)).with_system(load_system("dgx-h100"))
    p = model.predict(1 << 30, 16, 2)
    assert p.provenance == "system description" and "8 x 400 Gb/s" in p.links
    # Every NIC counts: 8 x 400 Gb/s at the calibrated efficiency, capped by the node's own link; the
    # tree sends S out of each of 2 nodes where a ring sends 2(p-1)/p S, so the bus bandwidth may exceed it
    assert (1 << 30) / p.time_s * busbw_factor("allreduce", 16) <= 2 * 15 / 16 * 200e9 * 1.001
    assert p.algorithm == "ring" and "double-tree" in model.inter.algorithm
    one_port = fit_topology("allreduce", _sweep(8)).with_system(load_system("dgx-h100").model_copy(
        update={"nics_per_node": 1}))
    assert one_port.predict(1 << 30, 16, 2).time_s > 3 * p.time_s


def test_a_ring_limited_node_at_an_unmeasured_gpu_count_is_not_determined(tmp_path, capsys):
    model = fit_topology("allreduce", _sweep(2) + _sweep(4)).with_system(load_system("dgx-1-v100"))
    p = model.predict(1 << 30, 8, 1)
    assert not p.determined and "not determined by these inputs" in p.undetermined
    assert "pybench allreduce --np 8" in p.undetermined
    assert model.predict(1 << 30, 4, 1).determined  # measured there
    switched = fit_topology("allreduce", _sweep(2) + _sweep(4)).with_system(load_system("dgx-a100"))
    assert switched.predict(1 << 30, 8, 1).determined


def test_cli_predict_with_a_system_and_the_undetermined_line(tmp_path, capsys):
    log = SHARED_DATA / "vtrain" / "a100_nvswitch_allreduce_4gpu.csv"
    model = tmp_path / "m.json"
    assert main_for_tests(["fit", str(log), str(SHARED_DATA / "vtrain" / "a100_nvswitch_allreduce_2gpu.csv"),
                           "-o", str(model)]) == 0
    capsys.readouterr()
    out = tmp_path / "p.json"
    assert main_for_tests(["predict", str(model), "--sizes", "1M,1G", "--world", "16", "--nodes", "2",
                           "--system", "dgx-a100", "--json", str(out)]) == 0
    table = capsys.readouterr().out
    assert "system description" in table and "8 x 200 Gb/s" in table
    assert main_for_tests(["predict", str(model), "--sizes", "1M", "--world", "8", "--system", "dgx-1-v100",
                           "--json", str(out), "--force"]) == 0
    table = capsys.readouterr().out
    assert "not determined by these inputs" in table
    (record,) = json.loads(out.read_text())["records"]
    assert record["determined"] is False and record["time_s"] is None
    # Bad input: one line, exit 2.
    for bad in (["--system", "nope"], ["--system", str(tmp_path / "missing.json")],
                ["--world", "12", "--nodes", "5", "--system", "dgx-a100"],
                ["--world", "32", "--nodes", "2", "--system", "dgx-a100"]):
        argv = ["predict", str(model), "--sizes", "1M"] + (bad if "--world" in bad else ["--world", "16", *bad])
        assert main_for_tests(argv) == 2
        err = capsys.readouterr().err.strip().splitlines()
        assert len(err) == 1 and err[0].startswith("pybench: error: "), err


def test_a_preset_that_cannot_apply_is_said(tmp_path, capsys):
    log = SHARED_DATA / "nccl-tests" / "a100_2node_16gpu_oci_roce_allreduce.txt"
    model = tmp_path / "m.json"
    assert main_for_tests(["fit", str(log), "-o", str(model)]) == 0
    capsys.readouterr()
    assert main_for_tests(["predict", str(model), "--sizes", "1G", "--world", "32", "--nodes", "4",
                           "--link", "eth-25g"]) == 0
    err = capsys.readouterr().err
    assert "--link eth-25g" in err and "the preset is not used" in err
    # an intra-node preset or description on a crossing measured end to end prices none of these layouts: said
    for flag in (["--link", "pcie4"], ["--system", "oci-bm-gpu4.8"]):
        assert main_for_tests(["predict", str(model), "--sizes", "1G", "--world", "32", "--nodes", "4", *flag]) == 0
        assert "measured end to end, the legs inside each node included" in capsys.readouterr().err


def test_fit_says_when_it_misses_its_own_sweeps_and_outruns_the_fabric():
    """A DGX-1-like node: bus bandwidth is no smooth function of the GPU count (a hybrid cube-mesh)."""
    obs = []
    for world, busbw in ((2, 45e9), (4, 20e9), (8, 134e9)):
        obs += [Observation(s, world, 1, 10e-6 + 2 * (world - 1) / world * s / busbw)
                for s in (2.0 ** k for k in range(16, 31))]
    model = fit_topology("allreduce", obs)
    assert any("misses its own 4-rank sweep" in n for n in model.notes)
    on_dgx1 = model.with_system(load_system("dgx-1-v100"))
    assert any("above the 150 GB/s per GPU" in n and "no fitted size runs that fast" in n for n in on_dgx1.notes)
    assert not on_dgx1.predict(1 << 30, 6).determined


# Bus bandwidth at 1 GiB of a DGX-1 V100 node (hybrid cube-mesh) at 2..8 GPUs, as issue 24 quotes it.
DGX1_BUSBW = {2: 22e9, 3: 45e9, 4: 85e9, 5: 37e9, 6: 46e9, 7: 87e9, 8: 134e9}


def _dgx1(*worlds):
    return [Observation(s, w, 1, 10e-6 + 2 * (w - 1) / w * s / DGX1_BUSBW[w])
            for w in worlds for s in (2.0 ** k for k in range(16, 31))]


@pytest.mark.parametrize("fitted, asked", [((4, 8), 5), ((4, 8), 6), ((2, 4, 8), 7), ((5, 6), 8)])
def test_gpu_counts_the_data_show_are_not_switched_are_not_determined(fitted, asked):
    """Without a system description, sweeps that one cost shape cannot join (each GPU count gets other
    links) leave every unmeasured GPU count in one node undetermined: said, not guessed."""
    model = fit_topology("allreduce", _dgx1(*fitted))
    p = model.predict(1 << 30, asked, 1)
    assert not p.determined and math.isnan(p.time_s)
    assert "not determined by these inputs" in p.undetermined and f"--np {asked}" in p.undetermined
    assert model.predict(1 << 30, fitted[0], 1).determined  # a measured count still answers
    again = TopologyModel.from_dict(json.loads(json.dumps(model.to_dict())))
    assert not again.predict(1 << 30, asked, 1).determined  # and so does the saved file


def test_gpu_counts_no_cost_shape_joins_are_refused_with_that_reason():
    """DGX-1 at 2 and 4 GPUs: no non-negative latency and bandwidth join them. The file keeps each
    sweep's curve, and a question about 8 GPUs is refused with that reason, in one line."""
    with pytest.raises(UsageError, match="cannot join the allreduce sweeps at 2, 4 GPUs.*not determined"):
        fit_topology("allreduce", _dgx1(2, 4))
    import numpy as np

    from pybench.model.build import fit_model_file
    from pybench.model.logs.measurements import MeasurementSet
    sets = []
    for w in (2, 4):
        obs = _dgx1(w)
        sets.append(MeasurementSet("pybench", "allreduce", "nccl", w, "intra-node", "float32",
                                   np.array([o.size_bytes for o in obs]), np.array([o.time_s for o in obs]),
                                   path=f"dgx1-{w}"))
    models, topology, skipped = fit_model_file(sets)
    assert topology == [] and any("cannot join" in s for s in skipped)
    with pytest.raises(UsageError, match="holds no topology model .one cost shape.*cannot join"):
        models[0].predict(1 << 30, world=8)


def test_switched_gpu_counts_stay_determined():
    """NVSwitch: the A100 tables at 2 and 4 GPUs join in one cost shape; 8 GPUs is predicted."""
    from pybench.model.topology_fit import observations_from
    obs = [o for w in (2, 4) for o in observations_from(
        load_measurements(SHARED_DATA / "vtrain" / f"a100_nvswitch_allreduce_{w}gpu.csv"), lambda _: 1)]
    assert fit_topology("allreduce", obs).predict(1 << 30, 8, 1).determined


@pytest.mark.parametrize("setup", ["k8s", "docker"])
def test_gpu_counts_whose_bandwidth_one_shape_misses_leave_other_counts_undetermined(setup):
    """RTX 4090 PCIe at 2 and 4 GPUs (public logs). In the pod the two counts got other PCIe paths: one
    cost shape meets both within a few percent where latency rules, and misses their largest sizes by 14
    and 22% in opposite directions; a median over every size hid that, and 8 GPUs were priced as on a
    switch. In the container the two counts follow one shape at every size, but at a rate no NVSwitch runs
    at (a few GB/s): 8 GPUs may cross another socket, and are not determined either; 3 lie between."""
    from pybench.model.topology_fit import observations_from
    logs = REPO / "tests" / "fixtures" / "public_logs"
    obs = [o for g in (2, 4) for o in observations_from(
        load_measurements(logs / f"rtx4090_kalavai_{setup}_g{g}_allreduce.log"), lambda _: 1)]
    model = fit_topology("allreduce", obs)
    p = model.predict(1 << 30, 8, 1)
    assert not p.determined and "--np 8" in p.undetermined
    if setup == "k8s":
        assert "misses the measured 4-rank sweep" in p.undetermined
    else:
        assert "no more than PCIe carries" in p.undetermined
        assert model.predict(1 << 30, 3, 1).determined


def _ring_node(world, busbw):
    return [Observation(s, world, 1, 20e-6 + 2 * (world - 1) / world * s / busbw) for s in (2.0 ** k for k in range(20, 31))]


def test_on_switches_that_reduce_another_gpu_count_reaches_the_other_algorithm():
    """An H100 node measured at 4 GPUs by a ring (355 GB/s bus bandwidth): at 8 GPUs NCCL may run NVLS on
    the switches' reduction, whose algorithm bandwidth reaches the 450 GB/s per-GPU link rate (an 8-GPU
    H100 measures about 460 GB/s bus bandwidth there, 1.3x the ring's). The interval reaches it; on switches
    that do not reduce (an A100 node) nothing changes. The answer itself stays the fitted ring."""
    model = fit_topology("allreduce", _ring_node(4, 355e9))
    size = 1 << 30
    nvls_s = size / 450e9
    on_h100 = model.with_system(load_system("dgx-h100")).predict(size, 8, 1)
    on_a100_rate = model.with_system(load_system("dgx-h100").model_copy(update={"in_switch_reduction": False}))
    plain = on_a100_rate.predict(size, 8, 1)
    assert on_h100.time_s == pytest.approx(plain.time_s)
    assert on_h100.low_s <= 1.01 * nvls_s < plain.low_s
    measured = model.with_system(load_system("dgx-h100")).predict(size, 4, 1)  # the fitted count: as measured
    assert measured.low_s == pytest.approx(on_a100_rate.predict(size, 4, 1).low_s)


def test_a_fit_faster_than_any_ring_reaches_a_ring_at_another_gpu_count():
    """An 8-GPU fit at 478 GB/s bus bandwidth on a 450 GB/s-per-GPU node ran on the switches' reduction; at 2
    GPUs a ring may run instead, at most at the link rate: the interval's slow end reaches it."""
    model = fit_topology("allreduce", _ring_node(8, 478e9))
    size = 1 << 30
    h100 = load_system("dgx-h100")
    for world in (2, 4):
        p = model.with_system(h100).predict(size, world, 1)
        plain = model.with_system(h100.model_copy(update={"in_switch_reduction": False})).predict(size, world, 1)
        ring_s = size * 2 * (world - 1) / world / 450e9
        assert p.time_s == pytest.approx(plain.time_s) and p.time_s < ring_s
        assert p.high_s > plain.high_s and p.high_s > ring_s


def test_a_regime_with_milliseconds_of_latency_inside_a_node_is_named():
    obs = [Observation(s, w, 1, 8e-3 + 2 * (w - 1) / w * s / 100e9) for w in (2, 4)
           for s in (2.0 ** k for k in range(20, 31))]
    assert any("per-call latency of 8.0 ms" in n for n in fit_topology("allreduce", obs).notes)


def test_every_rank_of_a_node_drives_its_own_nic():
    """A 2 x 1 fit measured one NIC per node; 2 x 8 on a node of 8 NICs may drive all eight (rails), or be held
    by the node's own links as the one rank was not: the description counts the NICs, not what held the rate
    (on a public H100 cluster 8 ranks per node reached 2.5x what 2 did, not 4x), so the answer lies between."""
    one_per_node = [Observation(s, 2, 2, 20e-6 + s / 45e9) for s in (2.0 ** k for k in range(16, 31))]
    model = fit_topology("allgather", one_per_node)
    b200, four_nics = model.with_system(load_system("hgx-b200")), model.with_system(load_system("aws-p4d"))
    size = 1 << 30
    shared, railed = model._time(size, 16, 2)[0], model._time(size, 16, 2, rails=8.0)[0]
    assert shared / railed == pytest.approx(8.0, rel=0.1)
    bare, on_b200 = model.predict(size, 16, 2), b200.predict(size, 16, 2)
    assert "NICs per rank unknown" in bare.links
    assert "drive 8x the NICs of the fitted layout's on hgx-b200" in on_b200.links
    assert on_b200.time_s == pytest.approx(math.sqrt(shared * railed), rel=0.1)
    assert on_b200.low_s <= railed and on_b200.high_s >= shared
    # four NICs for eight GPUs: eight ranks drive four, the rails reading is four times the fitted rate
    assert four_nics.predict(size, 16, 2).time_s == pytest.approx(math.sqrt(shared * shared / 4), rel=0.1)


def test_ccr_and_plan_take_a_system_description(tmp_path, capsys):
    node = tmp_path / "node.json"
    assert main_for_tests(["fit", str(SHARED_DATA / "vtrain" / "a100_nvswitch_allreduce_8gpu.csv"),
                           "-o", str(node)]) == 0
    capsys.readouterr()
    args = ["ccr", "--params", "1.3B", "--model", str(node), "--tflops", "150", "--world", "16",
            "--strategy", "ddp"]
    assert main_for_tests(args) == 2  # one node measured: nothing prices 16 ranks across nodes
    capsys.readouterr()
    assert main_for_tests([*args, "--system", "dgx-a100"]) == 0
    assert "system dgx-a100" in capsys.readouterr().out
    # the nodes are the system's (4 GPUs per Polaris node), unless --gpus-per-node says otherwise; an 8-GPU node's
    # fit says nothing of 4 GPUs on a Polaris node's all-to-all NVLink (not a switch): not determined
    assert main_for_tests([*args, "--system", "alcf-polaris"]) == 2
    assert "4 GPUs per node were never measured" in capsys.readouterr().err
    polaris = tmp_path / "polaris.json"
    assert main_for_tests(["fit", str(SHARED_DATA / "nccl-tests" / "polaris_a100_2node_4gpu_slingshot_allreduce.txt"),
                           "-o", str(polaris)]) == 0
    capsys.readouterr()
    on_polaris = [a if a != str(node) else str(polaris) for a in args]
    assert main_for_tests([*on_polaris, "--system", "alcf-polaris"]) == 0
    assert ", 4 GPUs/node," in capsys.readouterr().out.splitlines()[0]
    assert main_for_tests([*on_polaris, "--system", "alcf-polaris", "--gpus-per-node", "8"]) == 2
    capsys.readouterr()
    assert main_for_tests([*args, "--system", "nope"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "unknown system 'nope'" in err[0]


def test_a_crossing_on_a_measured_node_is_as_uncertain_as_nics_and_crossings_vary_not_more():
    """With the node measured, the crossing keeps its protocol shape: the latency part of the interval is
    the spread of the latency per step between systems; without a node (nominal fabric) or with a preset
    NIC the shape is unknown too, and that part is never the narrower one. The bytes cross at the NICs' pace
    either way: the bandwidth part is the same."""
    calibration = load_calibration()  # a measured shape knows at least as much as none: never the wider
    assert calibration.crossing_latency_half_width <= calibration.described_latency_half_width
    measured = fit_topology("allreduce", _sweep(8)).with_system(load_system("dgx-h100"))
    nominal = TopologyModel("allreduce", "ring", None, None, ((2, 1),), (1, 1 << 40)).with_system(
        load_system("dgx-h100"))
    preset = fit_topology("allreduce", _sweep(8)).with_preset(get_preset("ib-ndr"))
    for size in (1 << 16, 1 << 20, 1 << 30):  # (the sweep from 64 KiB: far below it, another bound)
        on_node, on_nothing, on_preset = (m.predict(size, 16, 2) for m in (measured, nominal, preset))
        assert on_node.spread.shape_measured and not on_nothing.spread.shape_measured
        assert not on_preset.spread.shape_measured
        s = on_node.spread
        expected = s.bounds(calibration)[1]
        assert math.log(on_node.high_s / on_node.time_s) == pytest.approx(expected)
        wider = dataclasses.replace(s, shape_measured=False).bounds(calibration)[1]
        assert expected <= wider  # equal where the systems' latencies per step stray as far as the descriptions'
        narrower = dataclasses.replace(calibration, crossing_latency_half_width=calibration.described_latency_half_width
                                       / 2)  # where they stray less, the measured shape is the narrower
        assert s.bounds(narrower)[1] < wider or s.bandwidth_share == 1.0
    # inside the node nothing is described: no described part at all
    assert not measured.predict(1 << 20, 8, 1).spread.described


def test_fewer_ranks_per_node_than_fitted_leaves_the_nics_they_drive_open_without_a_description():
    """A fit at 8 ranks per node asked for 1: one NIC (rails) or all of them (shared) is not in the
    data. The interval spans both readings and says which input decides; a description closes it."""
    fitted = fit_topology("allreduce", _sweep(16, 2, alpha=40e-6, bw=180e9))
    size = 1 << 30
    open_ = fitted.predict(size, 2, 2)
    assert "NICs per rank unknown at 1 rank per node (fitted at 8)" in open_.links and "--system" in open_.links
    shared = fitted._time(size, 2, 2)[0]
    railed = fitted._time(size, 2, 2, rails=1 / 8)[0]
    assert railed > 5 * shared
    assert open_.high_s >= railed * 0.999
    # its low end is the shared reading's, but no faster than one rank behind one port of the fastest NIC (800 Gb/s)
    # sends S (an all-reduce reduced in the switch): 180 GB/s through one rank is no network's
    assert open_.low_s == pytest.approx(max(shared, size / 100e9), rel=1e-6)
    described = fitted.with_system(load_system("dgx-h100")).predict(size, 2, 2)  # 8 NICs: one rank drives 1
    assert "1 rank per node drives 0.125x the NICs" in described.links and described.high_s >= railed * 0.999
    # the shared reading would push 180 GB/s through one rank's 400 Gb/s NIC: no faster than that NIC at full rate
    one_nic = size / 50e9
    assert described.low_s == pytest.approx(one_nic, rel=1e-6) and described.time_s >= one_nic > shared
    # 4 NICs, one to each pair of GPUs: 4 ranks drive half of them; on 16 NICs, 8 ranks drive all of them, as 8 did
    p4d = fitted.with_system(load_system("aws-p4d"))
    assert "4 ranks per node drive 0.5x the NICs" in p4d.predict(size, 8, 2).links
    sixteen = load_system("dgx-h100").model_copy(update={"name": "sixteen", "nics_per_node": 16})
    assert "drive" not in fitted.with_system(sixteen).predict(size, 16, 2).links
    # the fitted layout itself, and fits at two ranks-per-node counts, are not in doubt
    assert "NICs per rank unknown" not in fitted.predict(size, 16, 2).links
    # groups that share the node's NICs count together: 8 one-rank groups drive what 8 ranks did
    assert "NICs per rank unknown" not in fitted.predict(size, 2, 2, sharing=8).links
    assert "unknown at 4 ranks per node (fitted at 8)" in fitted.predict(size, 2, 2, sharing=4).links
    both = fit_topology("allreduce", _sweep(16, 2, alpha=40e-6, bw=180e9) + _sweep(4, 2, alpha=30e-6, bw=45e9))
    assert both.rails_ranks == 8 and "NICs per rank unknown" not in both.predict(size, 8, 2).links
    assert ("1 rank per node, fewer than fitted on rails (2, 8): between the rails' share of the NICs and the 2 "
            "ranks' rate, in the interval") in both.predict(size, 2, 2).links


def test_a_described_crossing_pays_a_network_step_where_its_schedule_crosses_nodes():
    """A ring that passes chunks on (all-gather) waits on the network at one of each node's steps, the others at
    the node's own per-step pace (NCCL's tuning model charges a ring's latency so), NCCL's tree at each level
    between nodes: the latency of a described crossing grows with those steps, from the whole 2-node crossing's
    latency the calibration was chosen on (the node's own per-call part held inside it). Every ring step at the
    network's pace (as GCP A4's and Polaris's all-gathers ran) is the interval's reach."""
    step = load_calibration().crossing_step_latency_s
    node = fit_topology("allgather", [Observation(float(s), 8, 1, 10e-6 + 7 / 8 * s / 200e9)
                                      for s in (2.0 ** k for k in range(10, 31))])
    model = node.with_system(load_system("dgx-h100"))
    assert model.inter is not None and node.intra is not None
    first = model.inter.all_regimes()[0]
    assert first.step_s == node.intra.all_regimes()[0].step_s and first.node_step_s == step  # a network step per node
    tiny = 1 << 10
    full, sparse, many = model.predict(tiny, 16, 2), model.predict(tiny, 4, 2), model.predict(tiny, 64, 8)
    assert full.time_s - sparse.time_s == pytest.approx((15 - 3) * first.step_s, abs=1e-6)  # 16 ranks against 4
    # (NCCL's tuning model: an all-gather's chunk passes nodes - 1 boundaries)
    assert many.time_s - full.time_s == pytest.approx((63 - 15) * first.step_s + (7 - 1) * step, abs=1e-6)
    assert full.time_s < 15 * step / 2 < full.high_s  # every step on the network: the reach, not the answer
    # one rank per node: every step leaves a node, as on a node of one GPU
    one = load_system("dgx-h100").model_copy(update={"name": "one-gpu", "gpus_per_node": 1, "nics_per_node": 1})
    lone = model.predict(tiny, 16, 16).time_s
    assert lone == pytest.approx(node.with_system(one).predict(tiny, 16, 16).time_s, rel=0.05)
    tree = fit_topology("allreduce", _sweep(8)).with_system(load_system("dgx-h100"))
    two, sixteen = tree.predict(tiny, 16, 2).time_s, tree.predict(tiny, 128, 16).time_s
    assert sixteen - two == pytest.approx((8 - 2) * step, rel=0.05)  # 2 ceil(log2 nodes) levels


def test_a_described_crossing_runs_its_middle_sizes_in_the_bandwidth_protocol():
    """Every 2-node log runs its middle sizes in NCCL's Simple protocol, at a network step several
    times the small-size protocols' own, and those (LL, LL128) move little per round trip across nodes
    whatever the NICs' rate: a described crossing prices both, and its middle sizes pay the first."""
    calibration = load_calibration()
    assert calibration.bandwidth_step_latency_s > calibration.crossing_step_latency_s
    node = fit_topology("allgather", [Observation(float(s), 8, 1, 10e-6 + 7 / 8 * s / 200e9)
                                      for s in (2.0 ** k for k in range(10, 31))])
    model = node.with_system(load_system("dgx-h100"))
    assert model.inter is not None
    *small, bandwidth = model.inter.all_regimes()
    assert small and all(r.busbw_Bps <= calibration.small_protocol_busbw_Bps for r in small)
    assert node.intra is not None
    assert bandwidth.node_step_s == pytest.approx(calibration.bandwidth_step_latency_s)  # (per node boundary)
    assert bandwidth.node_step_s > small[0].node_step_s
    middle = model.predict(4 << 20, 16, 2)
    assert middle.time_s >= calibration.bandwidth_step_latency_s  # an all-gather's chunk passes 1 boundary of 2 nodes
    assert middle.regime == f"{len(small) + 1} of {len(small) + 1}"
    assert model.predict(1 << 10, 16, 2).regime == "1 of 2"


def test_a_node_at_its_nominal_rate_pays_the_step_its_description_needs_in_the_middle_sizes():
    """A nominal rate does not know that the middle sizes run below the rate the largest reach (NCCL fills its
    pipeline and channels only there): priced with a fit's bandwidth-regime latency, which comes with that
    regime's own lower rate, most logs' 4-64 MiB all-reduces came out too fast. A node without a measurement
    pays the step its description needs (chosen where each log's description meets it); a measured node keeps
    the regime's, its own regimes carrying their rates."""
    calibration = dataclasses.replace(load_calibration(), bandwidth_step_latency_s=40e-6, nominal_step_latency_s=90e-6)
    system = load_system("dgx-h100")
    nominal = TopologyModel("allreduce", "ring", None, None, ((2, 1),), (1, 1 << 40)).with_system(system, calibration)
    measured = fit_topology("allreduce", [Observation(float(s), 8, 1, 10e-6 + 14 / 8 * s / 200e9)
                                          for s in (2.0 ** k for k in range(10, 31))]).with_system(system, calibration)
    assert nominal.inter is not None and measured.inter is not None
    assert nominal.inter.all_regimes()[-1].step_s == pytest.approx(90e-6)
    assert measured.inter.all_regimes()[-1].step_s == pytest.approx(40e-6)


def test_each_logs_nominal_step_is_the_one_at_which_its_description_meets_it():
    def cost(case, step):
        nominal = dataclasses.replace(case, node_model=None)
        return sum(p.error ** 2 for p in nominal.points(_own_calibration(case, case.nics_met_at, step)))

    for case in system_cases(SHARED_DATA, PUBLIC_LOGS)[:3]:
        chosen = case.nominal_step_latency_s
        assert cost(case, chosen) <= min(cost(case, chosen * 1.2), cost(case, chosen / 1.2)) + 1e-12, case.dataset
        assert math.isfinite(chosen) and chosen > 0


def test_a_described_crossing_read_from_a_file_is_priced_again_with_the_shipped_calibration():
    """A described link is not a measurement: a file written with other constants (an older calibration)
    predicts what `predict --system` does today, and a file written today reads back unchanged."""
    node = fit_topology("allgather", [Observation(float(s), 8, 1, 10e-6 + 7 / 8 * s / 200e9)
                                      for s in (2.0 ** k for k in range(10, 31))])
    model = node.with_system(load_system("dgx-h100"))
    assert model.inter is not None and model.inter.is_described
    assert TopologyModel.from_dict(model.to_dict()) == model
    older = model.to_dict()
    older["inter"] = {**older["inter"], "busbw_Bps": 1e9, "step_s": 1e-6, "regimes": []}
    assert TopologyModel.from_dict(older) == model


def test_a_model_fitted_with_one_system_is_priced_by_another_given_at_predict(tmp_path, capsys):
    # The file's crossing was priced from dgx-a100's NICs, not measured: --system aws-p4d prices it from
    # p4d's (four 100 Gb/s EFA ports, not eight 200 Gb/s), as a model fitted without a system would be.
    log = str(SHARED_DATA / "vtrain" / "a100_nvswitch_allreduce_8gpu.csv")
    with_a100, plain = tmp_path / "a100.json", tmp_path / "plain.json"
    assert main_for_tests(["fit", log, "-o", str(with_a100), "--system", "dgx-a100"]) == 0
    assert main_for_tests(["fit", log, "-o", str(plain)]) == 0
    capsys.readouterr()
    times = {}
    for model in (with_a100, plain):
        out = tmp_path / f"p-{model.name}"
        assert main_for_tests(["predict", str(model), "--sizes", "1M,1G", "--world", "16", "--nodes", "2",
                               "--system", "aws-p4d", "--json", str(out)]) == 0
        assert "measured both link classes" not in capsys.readouterr().err
        times[model] = [r["time_s"] for r in json.loads(out.read_text())["records"]]
    assert times[with_a100] == pytest.approx(times[plain], rel=1e-9)
    assert main_for_tests(["predict", str(with_a100), "--sizes", "1G", "--world", "16", "--nodes", "2",
                           "--json", str(tmp_path / "own.json")]) == 0
    own = json.loads((tmp_path / "own.json").read_text())["records"][0]["time_s"]
    assert own < times[with_a100][1] / 2  # eight 200 Gb/s NICs against four 100 Gb/s


def test_ranks_fewer_than_the_gpus_of_a_described_node_reach_only_their_own_gpus_nics():
    # dgx-a100: one 200 Gb/s NIC per GPU. A lone rank per node cannot move more than its one NIC (25 GB/s);
    # eight ranks drive all eight. aws-p5: four 100 Gb/s ports per GPU, so a lone rank reaches four.
    node = fit_topology("allreduce", [Observation(float(s), 8, 1, 5e-6 + s / 150e9) for s in (1 << k for k in
                                                                                               range(10, 31))])
    for system, one_rank_GBps in (("dgx-a100", 25.0), ("aws-p5", 50.0)):
        described = node.with_system(load_system(system))
        lone = described.predict(1 << 30, 2, 2)
        lone_busbw = (1 << 30) / lone.time_s * busbw_factor("allreduce", 2)
        assert lone_busbw <= one_rank_GBps * 1e9 and lone.high_s > lone.time_s  # the NICs of one GPU
        full = described.predict(1 << 30, 16, 2)
        assert (1 << 30) / full.time_s * busbw_factor("allreduce", 16) > 3 * lone_busbw  # eight GPUs' NICs


def test_ranks_that_do_not_fill_their_nodes_are_priced_on_those_nodes(tmp_path, capsys):
    # 29 ranks on 8-GPU nodes run on four nodes (the last part-full): not on 29 one-GPU nodes (1.6 s, against
    # 160 ms for 32 ranks)
    model = tmp_path / "oci.json"
    assert main_for_tests(["fit", str(SHARED_DATA / "nccl-tests" / "a100_2node_16gpu_oci_roce_allreduce.txt"),
                           "-o", str(model)]) == 0
    capsys.readouterr()
    assert main_for_tests(["ccr", "--params", "7B", "--seq", "4096", "--world", "29,32", "--model", str(model),
                           "--tflops", "400", "--strategy", "ddp", "--system", "oci-bm-gpu4.8"]) == 0
    out = capsys.readouterr().out
    comm = {int(r.split()[1]): float(r.split()[8]) for r in out.splitlines() if r.startswith("ddp ")}
    assert comm[29] == pytest.approx(comm[32], rel=0.05)
    assert "ranks that do not fill their nodes evenly are priced as the even layout" in out


def test_no_interval_promises_more_than_the_described_nics_carry():
    # Polaris: two 200 Gb/s NICs per node. A ring all-gather of 16 GiB over 1000 nodes sends (p-1)/p of it
    # through each node's NICs: no low end may be under that at their full 50 GB/s.
    obs = [Observation(float(s), 8, 2, 30e-6 + s / 20e9) for s in (1 << k for k in range(16, 31))] + \
          [Observation(float(s), 32, 8, 60e-6 + s / 18e9) for s in (1 << k for k in range(16, 31))]
    model = fit_topology("allgather", obs).with_system(load_system("alcf-polaris"))
    p = model.predict(16 << 30, 4000, 1000)
    floor = 3999 / 4000 * (16 << 30) / 50e9
    assert p.low_s >= floor * (1 - 1e-9) and p.low_s <= p.time_s <= p.high_s


def test_a_described_crossing_may_reach_the_nics_full_rate_and_no_more():
    """The calibrated NIC efficiency is what logs typically reach, not a bound: a GCP A3 Mega log moved its
    largest all-reduces at 0.9 of its NICs' rate where the others reached about half. A description cannot
    say which, so at sizes the bytes rule the fast end is the NICs at their full rate, and never faster."""
    from pybench.model.crossing import nic_floor_s
    # (a node whose own links outrun its NICs' tree: 900 GB/s of bus bandwidth, NVLink 5 behind 8 x 400 Gb/s)
    model = fit_topology("allreduce", _sweep(8, bw=900e9)).with_system(load_system("dgx-h100"))
    size = 512 << 20  # inside the node's sweep: nothing but the description widens it
    # however narrow the calibrated spread of efficiencies, the full rate stays inside the interval
    narrow = dataclasses.replace(load_calibration(), described_bandwidth_half_width=0.0)
    p, floor = model.predict(size, 16, 2, calibration=narrow), nic_floor_s(model, size, 16, 2)
    assert floor <= p.low_s <= 1.06 * floor  # (its latency above the floor)
    assert p.time_s >= floor / load_calibration().efficiency("allreduce") * 0.98  # the point stays typical
    # and so on nodes that run fewer ranks than GPUs (the NICs they reach at their full rate, not the typical share:
    # an H100 cluster's 4-of-8-GPU all-to-all on 2 nodes ran below the low end that share gave)
    half, floor = model.predict(size, 8, 2, calibration=narrow), nic_floor_s(model, size, 8, 2)
    assert floor <= half.low_s <= 1.06 * floor


@pytest.mark.parametrize("schedule", ["ring", "hierarchical", "openmpi"])
def test_the_nic_floor_holds_under_every_schedule(schedule):
    # NCCL's double tree is a floor's candidate under its own schedule only: a leader ring or Open MPI's
    # all-reduce with a --system refused to predict at all ("crosses nodes with the ring only")
    obs = [Observation(float(s), 8, 2, 30e-6 + s / 2e9) for s in (1 << k for k in range(10, 28))]
    model = fit_topology("allreduce", obs, schedule=schedule).with_system(load_system("ethernet-25g"))
    p = model.predict(1 << 26, 16, 4)
    assert 0 < p.low_s <= p.time_s <= p.high_s


def test_a_description_the_measurements_contradict_is_said(tmp_path, capsys):
    """A node measured far below the described fabric, and a crossing faster than the described NICs."""
    node = SHARED_DATA / "vtrain" / "a100_nvswitch_allreduce_8gpu.csv"
    model = tmp_path / "node.json"
    assert main_for_tests(["fit", str(node), "-o", str(model)]) == 0
    capsys.readouterr()
    assert main_for_tests(["predict", str(model), "--sizes", "1G", "--world", "16", "--nodes", "4",
                           "--system", "gb200-nvl72"]) == 0
    assert "the node measured is not gb200-nvl72's, or its GPUs do not reach that rate" in capsys.readouterr().err
    assert main_for_tests(["predict", str(model), "--sizes", "1G", "--world", "16", "--nodes", "2",
                           "--system", "dgx-a100"]) == 0
    assert "likely not" not in capsys.readouterr().err  # the node it was measured on

    crossing = _sweep(16, nodes=2, bw=400e9)
    fitted = fit_topology("allreduce", crossing)
    slow_nics = fitted.with_system(load_system("ethernet-25g"))
    assert any("more than ethernet-25g's 1 x 25 Gb/s NICs per node carry" in n for n in slow_nics.notes)
    own = fitted.with_system(load_system("dgx-h100"))  # 8 x 400 Gb/s: 400 GB/s, twice that for a tree
    assert not any("NICs per node carry" in n for n in own.notes)


def test_a_crossing_far_below_the_described_nics_is_said_and_healthy_logs_are_not():
    """A cluster whose 2 x 8 all-to-all crossed at 1/8 of its dgx-h100 NICs (helper-98's cluster00) was fitted
    without a word; only its description's other layouts would show it, too fast."""
    slow = fit_topology("allreduce", _sweep(16, nodes=2, bw=8e9))  # (8 x 400 Gb/s carry 400 GB/s: 1/25 of it)
    said = [n for n in slow.with_system(load_system("dgx-h100")).notes if "of what the NICs its ranks reach" in n]
    assert len(said) == 1 and "a fabric running far below its rating" in said[0], said
    for case in system_cases(SHARED_DATA, PUBLIC_LOGS):  # every public 2-node log: 0.67 of its NICs or more
        fitted = fit_topology(case.collective, list(case.observations)).with_system(load_system(case.system))
        assert not any("of what the NICs its ranks reach" in n for n in fitted.notes), case.dataset


def test_cpu_ranks_are_not_bound_by_a_descriptions_gpus(tmp_path, capsys):
    """OSU on a CPU cluster: 32 MPI ranks per node on a node description with 8 GPUs and one 25 Gb/s port."""
    model = tmp_path / "osu.json"
    assert main_for_tests(["fit", str(OSU_ALLREDUCE), "--world", "4", "--nodes", "2", "-o", str(model)]) == 0
    capsys.readouterr()
    assert main_for_tests(["predict", str(model), "--sizes", "1M", "--world", "64", "--nodes", "2",
                           "--system", "ethernet-25g"]) == 0
    out = capsys.readouterr().out
    assert "64 ranks on 2 node(s)" in out and "NCCL" not in out
    assert "per GPU" not in out  # no GPU fabric prices CPU ranks inside a node
    # inside one node nothing priced CPU ranks: the missing input is named, exit 2
    assert main_for_tests(["predict", str(model), "--sizes", "1M", "--world", "32", "--nodes", "1",
                           "--system", "ethernet-25g"]) == 2
    assert "CPU ranks share a node's memory" in capsys.readouterr().err


def test_a_polaris_log_with_its_own_description_is_not_called_a_mismatch(tmp_path, capsys):
    """The 256-node all-gather's fitted regime has a steep slope (57 GB/s) no size ran at (23 GB/s at most):
    the description is not blamed; the regime is named as the sweep's shape."""
    log = SHARED_DATA / "nccl-tests" / "polaris_a100_256node_4gpu_slingshot_allgather.txt"
    assert main_for_tests(["fit", str(log), "--system", "alcf-polaris", "-o", str(tmp_path / "m.json")]) == 0
    out = capsys.readouterr().out
    assert "does not match the measured cluster" not in out and "likely not" not in out
    assert "no fitted size runs that fast" in out


def test_a_described_crossing_runs_no_faster_than_the_nodes_own_links_run_the_collective():
    """A 2-node all-reduce by NCCL's tree sends S through each node's NICs, not the ring's 2(p-1)/p S, but every
    byte still passes each GPU's links: its bus bandwidth stays at about the node's own (logs: H100 InfiniBand
    467 GB/s on 2 nodes, the node's NVLS about 480; OCI's A100 238 beside 229 on one node). A 230 GB/s A100 node
    behind 8 x 400 Gb/s was priced at the NICs' tree rate, twice the node's own bus bandwidth."""
    node = fit_topology("allreduce", _sweep(8, bw=230e9))
    system = SystemDescription(name="a100-8x400", source="test", gpus_per_node=8, intra_fabric="nvswitch",
                               intra_GBps_per_gpu=300, nics_per_node=8, nic_Gbps=400)
    model = node.with_system(system)
    for size in (256 << 20, 1 << 30):
        busbw = size / model.predict(size, 16, 2).time_s * busbw_factor("allreduce", 16)
        assert busbw <= 230e9 * 1.001
        assert busbw >= 0.7 * 230e9  # (the node's links bind, not a far lower rate)
    # one rank per node sends from its GPU to its NIC: no node link in the way
    one = model.predict(1 << 30, 2, 2)
    assert (1 << 30) / one.time_s > 0.5 * load_calibration().efficiency("allreduce") * 50e9


@pytest.mark.parametrize("backend", ["nccl", "mpi"])
def test_a_node_running_fewer_ranks_than_gpus_reaches_its_own_gpus_nics(backend):
    """One GPU rank per node reaches its own GPU's NICs (one of eight, two of sixteen) at the calibrated
    efficiency, whatever the node's own links carry; CPU ranks are no GPU's and reach every NIC."""
    node = dataclasses.replace(fit_topology("allreduce", [Observation(float(s), 8, 1, 5e-6 + 1.75 * s / 230e9)
                                                          for s in (1 << k for k in range(16, 31))]), backend=backend)
    efficiency = load_calibration().efficiency("allreduce")
    for nics in (8, 16):
        system = SystemDescription(name=f"nic{nics}", source="test", gpus_per_node=8, intra_fabric="nvswitch",
                                   intra_GBps_per_gpu=300, nics_per_node=nics, nic_Gbps=100)
        reached = (1 << 30) / node.with_system(system).predict(1 << 30, 2, 2).time_s  # 2 ranks: bus = alg
        own_gpus = efficiency * nics / 8 * 12.5e9  # (all of the node's NICs carry less than its links: they bind)
        if backend == "nccl":
            assert reached == pytest.approx(own_gpus, rel=0.02), nics
        else:
            assert reached > 1.5 * own_gpus, nics


def test_cpu_ranks_in_one_node_answer_whatever_gpu_fabric_a_description_names(tmp_path, capsys):
    model = tmp_path / "osu.json"
    assert main_for_tests(["fit", str(OSU_ALLREDUCE), "--world", "4", "--nodes", "1", "-o", str(model)]) == 0
    capsys.readouterr()
    assert main_for_tests(["predict", str(model), "--sizes", "1M", "--world", "128", "--nodes", "1",
                           "--system", "ethernet-25g"]) == 0
    out = capsys.readouterr().out
    assert "not determined" not in out and "GPUs" not in out


def test_a_fit_that_outran_the_described_nics_spans_both_readings():
    """A crossing fitted on a fast network, asked on a description of one 25 Gb/s port: the fit itself says the
    description is not of the measured cluster (or the question is of another cluster). Neither input is
    favoured: the answer stays the fit's, the interval reaches what those NICs carry, and it says why. (Raising
    the answer to the NICs' floor put a public GCP A3 Mega fit given --system aws-p4d 3.5x above its own data,
    with an interval whose low end was the answer.)"""
    from pybench.model.crossing import nic_floor_s

    fast = fit_topology("allreduce", _sweep(16, nodes=2, bw=400e9))
    slow = fast.with_system(load_system("ethernet-25g"))
    p = slow.predict(1 << 30, 32, 4)
    floor = nic_floor_s(slow, 1 << 30, 32, 4)
    assert p.time_s < floor / 10 and p.high_s == pytest.approx(floor) and p.low_s < p.time_s
    assert any("the fit outran the described NICs" in c and "interval reaches both" in c for c in p.caveats)
    assert any("bound no prediction" in n or "more than ethernet-25g" in n for n in slow.notes)


def test_no_prediction_is_faster_than_nics_the_fit_never_outran():
    """One rank per node fitted at 3.2 GB/s bus bandwidth over a 25 Gb/s (3.125 GB/s) port: within what it carries (two ranks'
    all-reduce sends S out of each node, so its bus bandwidth is what the port carries). Eight ranks per node of
    that one port cannot move more than it: the answer is raised to what it carries, and says so."""
    from pybench.model.crossing import nic_floor_s

    slow = fit_topology("allreduce", _sweep(2, nodes=2, bw=3.2e9)).with_system(load_system("ethernet-25g"))
    for world, nodes in ((16, 2), (32, 4)):
        p = slow.predict(1 << 30, world, nodes)
        floor = nic_floor_s(slow, 1 << 30, world, nodes)
        assert p.time_s == pytest.approx(floor) and p.low_s == pytest.approx(floor)
        assert any("raised to what the described NICs carry" in c for c in p.caveats)


def test_more_cpu_ranks_per_node_never_speed_a_described_crossing():
    """MPI ranks fitted at one per node, asked for more per node on a CPU cluster's description: they share
    the node's NICs at the rate the fit found, never one NIC per rank as GPUs' rails would."""
    fitted = dataclasses.replace(fit_topology("allreduce", _sweep(4, nodes=4, bw=10e9) + _sweep(8, nodes=8, bw=10e9)),
                                 backend="mpi")
    cpu = SystemDescription(name="cpu-cluster", source="test", gpus_per_node=64, intra_fabric="pcie",
                            intra_GBps_per_gpu=10, nics_per_node=2, nic_Gbps=100)
    model = fitted.with_system(cpu)
    times = [model.predict(1 << 20, 16 * per_node, 16).time_s for per_node in (1, 2, 8, 32)]
    assert times == sorted(times), times


@pytest.fixture(scope="module")
def oci_model(tmp_path_factory):
    """The OCI 2 x 8 A100 all-reduce log fitted as the README fits a log."""
    return fitted_model_file(tmp_path_factory, SHARED_DATA / "nccl-tests" / "a100_2node_16gpu_oci_roce_allreduce.txt")


def test_a_confidence_band_asked_at_another_layout_says_it_is_a_prediction_interval(oci_model, capsys):
    """--band confidence (band="confidence") at a layout no sweep measured gave the prediction interval unsaid;
    a band that is neither was accepted there."""
    from pybench import load_model

    model = oci_model
    capsys.readouterr()
    assert main_for_tests(["predict", str(model), "--sizes", "1G", "--world", "32", "--nodes", "4",
                           "--band", "confidence"]) == 0
    assert "another layout has no confidence band" in capsys.readouterr().err
    m = load_model(model)
    assert "no confidence band" in m.predict(1 << 30, world=32, nodes=4, band="confidence").provenance
    with pytest.raises(UsageError, match="unknown band 'bogus'"):
        m.predict(1 << 30, world=32, nodes=4, band="bogus")


def test_a_refused_prediction_is_its_one_error_line_alone(oci_model, capsys):
    """predict said "the preset is not used" and then refused: two lines on stderr for one bad input."""
    model = oci_model
    capsys.readouterr()
    assert main_for_tests(["predict", str(model), "--sizes", "1M", "--world", "8", "--nodes", "1",
                           "--link", "ib-ndr"]) == 2
    err = capsys.readouterr().err
    assert len(err.strip().splitlines()) == 1 and "holds no intra-node parameters" in err


def test_an_all_to_all_that_outran_the_described_nics_is_said_in_its_own_bytes():
    """An all-to-all sends g(N-1)/N S out of each node, not a ring's S: a 2 x 8 fit at 80 GB/s per GPU moves
    640 GB/s through each node's NICs, more than a DGX H100's 8 x 400 Gb/s carry. The bus-bandwidth check
    (150 GB/s against 400) called it consistent and raised other layouts to the NICs' floor."""
    from pybench.model.description_checks import nics_contradicted
    obs = [Observation(s, 16, 2, 30e-6 + 8 * 0.5 * s / (8 * 80e9)) for s in (2.0 ** k for k in range(20, 35))]
    h100 = load_system("dgx-h100")
    model = fit_topology("alltoall", obs).with_system(h100)
    assert nics_contradicted(model, h100)
    assert any("moves 640 GB/s through each node's NICs" in n for n in model.notes)
    assert not any("though no fitted size runs that fast" in n for n in model.notes)
    p = model.predict(1 << 30, 32, 4)
    assert any("the fit outran the described NICs" in c for c in p.caveats) and p.time_s < p.high_s


def test_a_gpu_description_on_an_mpi_model_says_only_its_nics_price_it():
    """An OSU all-reduce on CPU nodes asked with --system dgx-h100 took the GPU node's NICs at NCCL's efficiency
    on them without a word (an NCCL model with more ranks per node than GPUs is refused)."""
    from pybench.model.description_checks import fabric_mismatches
    cpu = [Observation(s, 96, 1, 20e-6 + s / 5e9) for s in (1e4, 1e6, 1e8)]
    tm = dataclasses.replace(fit_topology("allreduce", cpu), backend="mpi")
    (line, *_) = fabric_mismatches(tm, load_system("dgx-h100"))
    assert "measured over MPI, not NCCL" in line and "8 x 400 Gb/s NICs" in line
    nccl = fit_topology("allreduce", [Observation(s, 16, 2, 30e-6 + s / 40e9) for s in (1e4, 1e6, 1e8)])
    assert not any("not NCCL" in n for n in fabric_mismatches(nccl, load_system("dgx-h100")))


def test_a_huge_description_file_is_refused_before_it_is_read(tmp_path):
    """A 1 GB file of zeros given as --system was read whole before its JSON failed."""
    huge = tmp_path / "zeros.json"
    with open(huge, "wb") as f:
        f.truncate(64 << 20)  # sparse: no disk used
    with pytest.raises(FileFormatError, match=r"zeros.json is 67108864 bytes, larger than"):
        load_system(huge)
