"""The topology-aware cost model: exact on synthetic data, and world-size extrapolation on real sweeps.

The real data is the vTrain table of one 8 x A100 NVSwitch node measured at 2..8 GPUs
(tests/fixtures: verbatim copies). Issue 13's acceptance: fit the 2- and 4-GPU tables,
predict 8 GPUs at every 1 MiB step, median <= 10%, max <= 20%, interval coverage >= 80%.
Today's figures (median 1.3%, max 18.2%, coverage 96%) are pinned a little above them so a
regression fails.
"""

from __future__ import annotations

import dataclasses
import json
import math
from pathlib import Path

import numpy as np
import pytest
from conftest import SHARED_DATA

from pybench.collectives import busbw_factor
from pybench.errors import FileFormatError, UsageError
from pybench.io.model_names import TOPOLOGY_CROSSING_VERSION
from pybench.model.crossing import nic_floor_s
from pybench.model.link_cost import LinkCost
from pybench.model.link_presets import PRESETS, get_preset
from pybench.model.system import load_system, most_ports_per_gpu
from pybench.model.topology import Observation, TopologyModel
from pybench.model.topology_fit import fit_topology
from pybench.model.topology_schedules import algorithm_steps

VTRAIN = SHARED_DATA / "vtrain"


def _vtrain(world: int) -> list[Observation]:
    path = VTRAIN / f"a100_nvswitch_allreduce_{world}gpu.csv"
    if not path.is_file():
        pytest.skip(f"{path} is missing")
    table = np.loadtxt(path, delimiter=",", skiprows=1, usecols=(0, 3))
    return [Observation(float(size), world, 1, float(ns) * 1e-9) for size, ns in table]


def _errors(model: TopologyModel, obs: list[Observation]) -> tuple[np.ndarray, float]:
    errs, covered = [], 0
    for o in obs:
        pred = model.predict(int(o.size_bytes), o.world, o.nodes)
        errs.append(abs(pred.time_s / o.time_s - 1.0))
        covered += pred.low_s <= o.time_s <= pred.high_s
    return np.array(errs), covered / len(obs)


def test_vtrain_fit_at_2_and_4_gpus_predicts_8():
    model = fit_topology("allreduce", _vtrain(2) + _vtrain(4))
    errs, coverage = _errors(model, _vtrain(8))
    assert len(errs) == 1024
    assert np.median(errs) <= 0.02  # acceptance 0.10; measured 0.013
    assert errs.max() <= 0.20       # acceptance 0.20; measured 0.182 (at 22 MiB)
    assert coverage >= 0.90         # acceptance 0.80; measured 0.96
    assert model.predict(1 << 30, 8).provenance == "another GPU count"
    assert model.predict(1 << 30, 3).provenance == "another GPU count"


@pytest.mark.parametrize("world", [3, 5, 6, 7])
def test_vtrain_every_other_world_from_2_and_4(world):
    model = fit_topology("allreduce", _vtrain(2) + _vtrain(4))
    errs, coverage = _errors(model, _vtrain(world))
    assert np.median(errs) <= 0.02 and errs.max() <= 0.20 and coverage >= 0.90, (world, np.median(errs), errs.max())


def test_exact_parameters_come_back_from_synthetic_sweeps():
    truth = LinkCost(20e-6, 1.5e-6, 150e9, 0.5, "truth")
    sizes = [2.0 ** k for k in range(10, 31)]
    obs = [Observation(s, p, 1, truth.time_s("allreduce", "ring", s, p)) for p in (2, 4, 8) for s in sizes]
    model = fit_topology("allreduce", obs, algorithm="ring")
    fitted = model.intra
    assert fitted is not None
    assert fitted.base_s == pytest.approx(truth.base_s, rel=1e-6)
    assert fitted.step_s == pytest.approx(truth.step_s, rel=1e-6)
    assert fitted.busbw_Bps == pytest.approx(truth.busbw_Bps, rel=1e-6)
    assert fitted.extra_steps == pytest.approx(truth.extra_steps, rel=1e-6)
    assert model.predict(1 << 20, 64).time_s == pytest.approx(truth.time_s("allreduce", "ring", 1 << 20, 64))


def test_latency_grows_with_the_hops_the_algorithm_takes():
    assert algorithm_steps("allreduce", "ring", 8) == (14.0, 14.0)
    assert algorithm_steps("allreduce", "tree", 8) == (6.0, 14.0)
    assert algorithm_steps("allreduce", "nvls", 64) == (2.0, 126.0)
    assert algorithm_steps("allgather", "ring", 8) == (7.0, 7.0)
    # a tree-shaped sweep is recognised as a tree: its latency does not grow linearly with p
    truth = LinkCost(10e-6, 4e-6, 100e9, 0.0, "truth")
    obs = [Observation(s, p, 1, truth.time_s("allreduce", "tree", s, p))
           for p in (2, 4, 8, 16) for s in (2.0 ** k for k in range(8, 28))]
    assert fit_topology("allreduce", obs).algorithm == "tree"


def test_one_world_size_is_said_and_extrapolates_with_wider_intervals():
    model = fit_topology("allreduce", _vtrain(4)).with_system(load_system("dgx-a100"))
    assert any("one world size" in n for n in model.notes)
    near = model.predict(64 << 20, 4)
    far = model.predict(64 << 20, 8)
    assert far.provenance == "another GPU count" and near.provenance == "measured"
    assert (far.high_s / far.time_s) > (near.high_s / near.time_s)


# Bus bandwidth at 1 GiB of a DGX-1 V100 (NVLink hybrid cube mesh) at 2..8 GPUs, as issue 24 quotes it:
# each GPU count gets other links, so no count says what another gets.
_CUBE_MESH_BUSBW = {2: 22e9, 3: 45e9, 4: 85e9, 5: 37e9, 6: 46e9, 7: 87e9, 8: 134e9}


def _cube_mesh(p: int) -> list[Observation]:
    return [Observation(s, p, 1, 8e-6 + 2 * (p - 1) * 1.5e-6 + s * 2 * (p - 1) / p / _CUBE_MESH_BUSBW[p])
            for s in (2.0 ** k for k in range(10, 31))]


def test_one_gpu_count_without_a_description_does_not_determine_another():
    """Fitted at 4 GPUs of a cube mesh, the switch reading misses 8 GPUs by half (2 GPUs by 4x): without a
    description saying the node is switched, the answer is that these inputs do not determine it."""
    for fitted, asked in ((4, 8), (4, 2), (2, 8)):
        model = fit_topology("allreduce", _cube_mesh(fitted))
        p = model.predict(1 << 30, asked)
        assert not p.determined and math.isnan(p.time_s)
        assert f"one GPU count ({fitted})" in p.undetermined and "--system" in p.undetermined
        assert f"--np {asked}" in p.undetermined
        assert model.predict(1 << 30, fitted).determined  # the measured count still answers
        # the node's description says which: a mesh keeps it undetermined, a switch answers
        assert not model.with_system(load_system("dgx-1-v100")).predict(1 << 30, asked).determined
        assert model.with_system(load_system("dgx-a100")).predict(1 << 30, asked).determined
    # several counts that one switch joins need no description; a cube mesh's do not join
    assert fit_topology("allreduce", _vtrain(2) + _vtrain(8)).predict(1 << 30, 4).determined
    assert not fit_topology("allreduce", _cube_mesh(4) + _cube_mesh(8)).predict(1 << 30, 6).determined
    # CPU ranks share one memory: an MPI fit at one rank count answers for another
    mpi = dataclasses.replace(fit_topology("allreduce", _cube_mesh(4)), backend="mpi")
    assert mpi.predict(1 << 30, 8).determined
    assert mpi.predict(1 << 30, 8).provenance == "another rank count"  # processes, not GPUs


def test_predicted_busbw_never_exceeds_the_fitted_link():
    model = fit_topology("allreduce", _vtrain(2) + _vtrain(4))
    assert model.intra is not None
    for world in (2, 8, 64, 1024):
        for size in (1 << 20, 1 << 30, 1 << 40):
            busbw = size / model.predict(size, world).time_s * busbw_factor("allreduce", world)
            assert busbw <= model.intra.busbw_Bps


def test_across_nodes_the_nic_sets_the_pace_and_the_floor_holds():
    intra = LinkCost.from_preset(get_preset("nvlink4"))
    nic = LinkCost(30e-6, 8e-6, 45e9, 0.3, "fitted at 16 ranks on 2 nodes")
    obs = [Observation(s, 16, 2, intra.base_s + 30 * nic.step_s + (30 + 0.3) / 16 * s / nic.busbw_Bps + nic.base_s)
           for s in (2.0 ** k for k in range(16, 31))]
    model = fit_topology("allreduce", obs, intra_preset=get_preset("nvlink4"))
    assert model.inter is not None and model.intra is not None
    assert model.intra.label == "preset nvlink4"
    # one world size cannot separate the pipeline term c from B: their product is what is known
    assert model.inter.busbw_Bps == pytest.approx(45e9 * 30 / 30.3, rel=1e-6)
    size = 1 << 30
    pred = model.predict(size, 16, 2)
    assert "preset nvlink4" in pred.links and "inter-node fitted" in pred.links
    # the bytes an all-reduce sends through a node's NICs at their full rate bound every layout from below:
    # no interval's low end promises less (a description says what the NICs are)
    described = model.with_system(load_system("dgx-h100"))
    floor = nic_floor_s(described, size, 16, 2)
    assert floor == pytest.approx(size / 400e9)  # the tree's S per node through 8 x 400 Gb/s, fewer than the ring's
    assert described.predict(size, 16, 2).low_s >= floor
    # without one, each rank behind its own port of the fastest NIC any preset knows (800 Gb/s), S through it
    assert nic_floor_s(dataclasses.replace(model, backend="nccl"), size, 16, 2) == pytest.approx(size / (8 * 100e9))
    assert nic_floor_s(dataclasses.replace(model, backend="mpi"), size, 16, 2) == 0.0  # (CPU ranks share NICs)
    assert model.predict(size, 32, 4).time_s > pred.time_s


def test_a_nic_preset_is_one_port_and_the_ranks_of_a_node_may_drive_one_each():
    """A preset cannot say how many NICs a node has: 8 ranks per node lie between one port per node and as
    many per rank as a named system holds of that rate (AWS p5: four 100 Gb/s ports per GPU; the real
    2 x 8 A100 node has 16 such ports), with that span in the interval; a description counts the NICs,
    and one rank per node is one port either way."""
    assert most_ports_per_gpu(get_preset("eth-100g").bandwidth_Bps) == 4.0
    assert most_ports_per_gpu(get_preset("ib-ndr").bandwidth_Bps) == 1.0
    assert most_ports_per_gpu(get_preset("ib-xdr").bandwidth_Bps) == 1.0  # no named system: one per rank
    model = fit_topology("allreduce", _vtrain(8)).with_preset(get_preset("eth-100g"))
    size = 1 << 30
    one_port = model.predict(size, 16, 2, nics_as_fitted=True)  # the planner's reading: it shares NICs itself
    every_port = model._time(size, 16, 2, rails=32.0)[0]
    p = model.predict(size, 16, 2)
    assert p.time_s == pytest.approx(math.sqrt(one_port.time_s * every_port), rel=1e-9)
    assert p.low_s < every_port < one_port.time_s < p.high_s
    assert "may drive 32" in p.links and "up to 4 per GPU" in p.links
    assert p.provenance == "preset" and "NICs per node unknown" in p.links and "--system" in p.links
    assert "NICs per node unknown" not in one_port.links
    described = fit_topology("allreduce", _vtrain(8)).with_system(load_system("oci-bm-gpu4.8")).predict(size, 16, 2)
    assert "NICs per node unknown" not in described.links and described.high_s < p.high_s
    single = model.predict(size, 2, 2)
    assert "NICs per node unknown" not in single.links


def test_bad_layouts_and_missing_link_classes_are_one_line_usage_errors():
    model = fit_topology("allreduce", _vtrain(2) + _vtrain(4))
    with pytest.raises(UsageError, match="not divisible"):
        model.predict(1 << 20, 12, 5)
    with pytest.raises(UsageError, match="world 1: a collective over one rank.*give 2 or more ranks"):
        model.predict(1 << 20, 1, 1)  # was a ZeroDivisionError
    with pytest.raises(UsageError, match="no inter-node parameters.*--link"):
        model.predict(1 << 20, 16, 2)
    with pytest.raises(UsageError, match="unknown link preset 'nvlink9'"):
        get_preset("nvlink9")
    with pytest.raises(UsageError, match="no topology model for collective"):
        algorithm_steps("scan", "ring", 4)


def test_presets_carry_published_per_direction_rates():
    assert PRESETS["nvlink3"].bandwidth_Bps == 300e9 and PRESETS["nvlink4"].bandwidth_Bps == 450e9
    assert PRESETS["ib-ndr"].bandwidth_Bps == 50e9 and PRESETS["eth-25g"].bandwidth_Bps == 3.125e9
    assert all(p.link_class in ("intra-node", "inter-node") for p in PRESETS.values())
    assert all(math.isfinite(p.bandwidth_Bps) and p.bandwidth_Bps > 0 for p in PRESETS.values())


# -- through the command line: fit saves the topology model, predict answers one table -------------

_FITTED: dict[tuple[int, ...], bytes] = {}  # one fit per set of tables per session: each takes seconds


def _fit_vtrain(tmp_path, capsys, *worlds: int):
    from pybench.cli.main import main
    out = tmp_path / "vt.json"
    if worlds not in _FITTED:
        paths = [str(VTRAIN / f"a100_nvswitch_allreduce_{w}gpu.csv") for w in worlds]
        assert main(["fit", *paths, "-o", str(out)]) == 0
        text = capsys.readouterr().out
        assert "topology model: allreduce / nccl / algorithm ring, fitted at " + ", ".join(map(str, worlds)) in text
        _FITTED[worlds] = out.read_bytes()
    out.write_bytes(_FITTED[worlds])
    return out


def test_predict_at_an_unmeasured_world_is_one_table_from_the_topology_model(tmp_path, capsys):
    import json

    from pybench.cli.main import main
    model_file = _fit_vtrain(tmp_path, capsys, 2, 4)
    pj = tmp_path / "p.json"
    assert main(["predict", str(model_file), "--sizes", "1M,1G", "--world", "8", "--json", str(pj)]) == 0
    table = capsys.readouterr().out
    assert table.count("# allreduce") == 1 and "topology model" in table and "another GPU count" in table
    records = json.loads(pj.read_text())["records"]
    assert [r["provenance"] for r in records] == ["another GPU count", "another GPU count"]
    measured_8gpu_1g = 8193.0e-6  # the vTrain 8-GPU table at 1 GiB
    assert records[1]["time_low_s"] <= measured_8gpu_1g <= records[1]["time_high_s"]
    # a measured world answers from its own piecewise model only
    assert main(["predict", str(model_file), "--sizes", "1G", "--world", "4"]) == 0
    assert capsys.readouterr().out.count("# allreduce") == 1
    # a size no float32 run has (measuring refuses it; predict printed its time)
    assert main(["predict", str(model_file), "--sizes", "4,6", "--world", "8"]) == 2
    assert "6 B is not a whole number of float32 elements (4 B each); give multiples of 4 B" in capsys.readouterr().err
    import json as _json  # a file of two element types: the size one cannot take is refused naming the other
    doc = _json.loads(model_file.read_text())
    doc["models"].append({**doc["models"][0], "dtype": "float64"})
    both = tmp_path / "both.json"
    both.write_text(_json.dumps(doc))
    assert main(["predict", str(both), "--sizes", "4,1M"]) == 2
    assert "the float64 allreduce model (--dtype float32 takes them)" in capsys.readouterr().err


def test_predict_across_nodes_needs_an_inter_node_link_and_labels_presets(tmp_path, capsys):
    from pybench.cli.main import main
    model_file = _fit_vtrain(tmp_path, capsys, 2, 4)
    assert main(["predict", str(model_file), "--sizes", "1G", "--world", "16", "--nodes", "2"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "no inter-node parameters" in err[0] and "--link" in err[0]
    assert main(["predict", str(model_file), "--sizes", "1G", "--world", "16", "--nodes", "2",
                 "--link", "ib-ndr"]) == 0
    out = capsys.readouterr().out
    assert "inter-node preset ib-ndr" in out and "16 ranks on 2 node(s)" in out
    for argv, message in ((["--world", "16", "--nodes", "3"], "not divisible"),
                          (["--world", "16", "--nodes", "2", "--link", "nvlink9"], "unknown link preset"),
                          (["--nodes", "2"], "need --world (the rank count to predict for): they price layouts no sweep measured; the measured ones (2 ranks, 4 ranks) answer"),
                          (["--world", "8", "--nodes", "0"], "'0' must be at least 1")):
        assert main(["predict", str(model_file), "--sizes", "1G", *argv]) == 2
        err = capsys.readouterr().err.strip().splitlines()
        assert len(err) == 1 and message in err[0], err


def test_topology_models_round_trip_through_the_model_file(tmp_path, capsys):
    from pybench.model.model_files import load_topology
    model_file = _fit_vtrain(tmp_path, capsys, 2, 4)
    (loaded,) = load_topology(model_file)
    fresh = fit_topology("allreduce", _vtrain(2) + _vtrain(4))
    assert loaded.predict(1 << 30, 8).time_s == pytest.approx(fresh.predict(1 << 30, 8).time_s, rel=1e-12)
    assert loaded.backend == "nccl"


def test_a_multi_node_log_fits_the_inter_node_link(tmp_path):
    """The shared 2-node A100 RoCE log: its Rank lines put 16 ranks on 2 hosts."""
    from pybench.model.logs import load_measurements
    from pybench.model.topology_fit import fit_topology_models
    log = SHARED_DATA / "nccl-tests" / "a100_2node_16gpu_oci_roce_allreduce.txt"
    sets = load_measurements(log)
    models, skipped = fit_topology_models(sets)
    (model,) = models
    assert model.fitted == ((16, 2),) and model.intra is None and model.inter is not None
    assert 150e9 < model.inter.busbw_Bps < 300e9  # its busbw tops out at 238 GB/s
    joint = model.with_preset(get_preset("nvlink3"))
    assert joint.predict(1 << 30, 16, 2).provenance == "measured"
    assert joint.predict(1 << 30, 32, 4).time_s > joint.predict(1 << 30, 16, 2).time_s


def test_a_hierarchical_schedule_crosses_nodes_with_one_leader_each():
    """Open MPI's HAN (and NCCL's trees) combine inside a node first: between nodes only leaders talk."""
    nic = LinkCost(0.0, 0.0, 125e6, 0.0, "truth")  # a 1 Gbit/s link per host
    # 2 hosts x 2 ranks: the leaders' ring over 2 nodes moves 2(2-1)/2 = 1 buffer through each NIC
    obs = [Observation(s, 4, 2, s / 125e6) for s in (2.0 ** k for k in range(20, 25))]
    model = fit_topology("allreduce", obs, algorithm="ring", schedule="hierarchical")
    assert model.schedule == "hierarchical" and model.inter is not None
    assert model.inter.busbw_Bps == pytest.approx(nic.busbw_Bps, rel=1e-9)
    size = 1 << 24
    # 4 hosts: 2(4-1)/4 = 1.5 buffers per NIC, whether 1 or 2 ranks per host
    assert model.predict(size, 4, 4).time_s == pytest.approx(1.5 * size / 125e6, rel=1e-9)
    assert model.predict(size, 8, 4).time_s == pytest.approx(1.5 * size / 125e6, rel=1e-9)
    assert model.predict(size, 8, 4).schedule == "hierarchical"
    ring = fit_topology("allreduce", obs, algorithm="ring")  # the same sweep read as one ring over 4 ranks
    assert ring.predict(size, 8, 4).time_s != pytest.approx(model.predict(size, 8, 4).time_s, rel=0.01)
    round_trip = TopologyModel.from_dict(model.to_dict())
    assert round_trip.schedule == "hierarchical" and round_trip.predict(size, 4, 4).time_s == \
        pytest.approx(model.predict(size, 4, 4).time_s)


# ---------------------------------------------------------------- pybench's own results: hosts and the MPI library
def _multi_host_result(tmp_path, library: str, name: str):
    import json
    src = json.loads((Path(__file__).resolve().parents[1] / "fixtures" / "cpu_mpi2_allreduce.json").read_text())
    src["hosts"] = {"h1": 1, "h2": 1}  # one rank on each of two hosts, as the netns testbed runs
    src["link_class"] = "inter-node"
    src["environment"]["mpi"]["library"] = library
    path = tmp_path / name
    path.write_text(json.dumps(src))
    return path


def test_a_multi_host_pybench_result_feeds_the_topology_model_with_its_library_schedule(tmp_path):
    from pybench.model.logs import load_measurements
    from pybench.model.topology_fit import fit_topology_models, nodes_of
    ompi = load_measurements(_multi_host_result(tmp_path, "Open MPI v5.0.11, package: Open MPI", "ompi.json"))
    assert nodes_of(ompi[0]) == 2  # from the result's hosts (it was 'node count unknown')
    models, skipped = fit_topology_models(ompi)
    assert skipped == [] and [(m.collective, m.backend, m.schedule) for m in models] == [("allreduce", "mpi", "openmpi")]
    mpich = load_measurements(_multi_host_result(tmp_path, "MPICH Version: 4.0.2", "mpich.json"))
    models, _ = fit_topology_models(mpich)
    assert [m.schedule for m in models] == ["ring"]  # Open MPI's rules are not MPICH's


def test_another_node_count_is_extrapolated_and_its_band_wider():
    # Fitted on 2 hosts x 2 ranks: 4 hosts x 1 rank has the same world but twice the nodes, which
    # the data never saw; it used to be labelled interpolated, with the fitted layout's band.
    obs = [Observation(s, 4, 2, s / 125e6 * (1 + 0.01 * (-1) ** k)) for k, s in
           enumerate(2.0 ** k for k in range(20, 25))]
    model = fit_topology("allreduce", obs, algorithm="ring", schedule="hierarchical")
    size = 1 << 22
    same, other = model.predict(size, 4, 2), model.predict(size, 4, 4)
    assert same.provenance in ("measured", "between measured sizes") and other.provenance == "another node count"
    assert (other.high_s - other.low_s) / other.time_s > (same.high_s - same.low_s) / same.time_s


# ---------------------------------------------------------------- fit --nodes: logs that do not list their hosts
def test_fit_nodes_gives_a_log_without_rank_lines_its_topology_model(tmp_path, capsys):
    """The shared H100 log (srun prefixes, no Rank lines) ran on 2 nodes; only --nodes can say so."""
    from pybench.cli.main import main
    from pybench.model.model_files import load_topology
    log = SHARED_DATA / "nccl-tests" / "h100_p5_2node_16gpu_efa_allreduce_srunprefix.txt"
    out = tmp_path / "h100.json"
    assert main(["fit", str(log), "-o", str(out)]) == 0
    assert "node count unknown (no hosts listed); not in the topology model: give fit --nodes N" in capsys.readouterr().err
    assert load_topology(out) == []
    assert main(["fit", str(log), "--nodes", "2", "-o", str(out), "--force"]) == 0
    text = capsys.readouterr().out
    assert "16 ranks on 2 host(s) per --nodes" in text
    assert "topology model: allreduce / nccl / algorithm ring; across nodes tree or ring (one node count cannot tell), fitted at 16 ranks on 2 nodes" in text
    (model,) = load_topology(out)
    assert model.fitted == ((16, 2),) and model.inter is not None and model.intra is None
    # without --nodes, predict takes the nodes the Python API takes: the fitted 8 ranks per node
    from pybench.model.model_files import load_model
    assert main(["predict", str(out), "--sizes", "1M", "--world", "64", "--json", str(tmp_path / "p.json")]) == 0
    capsys.readouterr()
    (record,) = json.loads((tmp_path / "p.json").read_text())["records"]
    expected = load_model(out).predict(1 << 20, world=64)
    assert record["nodes"] == 8 and record["time_s"] == pytest.approx(float(expected.time_s), rel=1e-12)
    assert main(["predict", str(out), "--sizes", "1M", "--world", "60"]) == 2
    assert "--world 60: give --nodes" in capsys.readouterr().err


def test_a_curve_without_topology_is_refused_with_the_fits_own_reason(tmp_path, capsys):
    """Asked for another layout, a curve that got no topology model says why the fit gave it none (here the
    log's node count was unknown: give --nodes), not a generic 'refit'; a file from before the reason was
    recorded says to refit."""
    import json

    from pybench.cli.main import main
    from pybench.model.model_files import load_model
    log = SHARED_DATA / "nccl-tests" / "h100_p5_2node_16gpu_efa_allreduce_srunprefix.txt"
    out = tmp_path / "h100.json"
    assert main(["fit", str(log), "-o", str(out)]) == 0
    capsys.readouterr()
    assert main(["predict", str(out), "--world", "32", "--sizes", "1M"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "node count unknown" in err[0] and "give fit --nodes N" in err[0]
    with pytest.raises(UsageError, match="node count unknown.*give fit --nodes N"):
        load_model(out).predict(1 << 20, world=64)
    doc = json.loads(out.read_text())
    for m in doc["models"]:
        m["notes"] = [n for n in m["notes"] if not n.startswith("no topology model")]
    old = tmp_path / "old.json"
    old.write_text(json.dumps(doc))
    with pytest.raises(UsageError, match="without topology models: refit it"):
        load_model(old).predict(1 << 20, world=64)


@pytest.mark.parametrize("log, nodes, says", [
    ("nccl-tests/h100_p5_2node_16gpu_efa_allreduce_srunprefix.txt", "3", "16 ranks, not divisible by 3 nodes"),
    ("nccl-tests/a100_2node_16gpu_oci_roce_allreduce.txt", "4", "ran on 2 node(s) by its own record"),
    ("vtrain/a100_nvswitch_allreduce_2gpu.csv", "2", "ran on 1 node(s) by its own record"),
])
def test_fit_nodes_that_cannot_hold_is_one_line_and_exit_2(tmp_path, capsys, log, nodes, says):
    from pybench.cli.main import main
    out = tmp_path / "m.json"
    assert main(["fit", str(SHARED_DATA / log), "--nodes", nodes, "-o", str(out)]) == 2
    err = capsys.readouterr().err.strip()
    assert says in err and len(err.splitlines()) == 1 and "Traceback" not in err
    assert not out.exists()


# ---------------------------------------------------------------- leader schedules: the phase inside each node
def test_a_leader_schedule_prices_its_intra_node_phase_with_the_intra_node_link():
    """hierarchical / HAN: combine inside the node, leaders talk, spread again. With single-node sweeps
    the inside phase is priced apart, so another ranks-per-node count is predicted exactly."""
    sizes = [float(2 ** k) for k in range(16, 27)]
    intra = LinkCost(5e-6, 1e-6, 20e9, 0.0, "truth")      # shared memory, say
    nic = LinkCost(30e-6, 0.0, 1.25e9, 0.0, "truth")     # one 10 Gbit/s NIC per node

    def truth(size: float, world: int, nodes: int) -> float:
        g = world // nodes
        inside = intra.time_s("allreduce", "ring", size, g) if g > 1 else 0.0
        _, steps = algorithm_steps("allreduce", "ring", nodes)
        return inside + nic.base_s + steps / nodes * size / nic.busbw_Bps

    obs = [Observation(s, w, 1, intra.time_s("allreduce", "ring", s, w)) for w in (2, 4) for s in sizes]
    obs += [Observation(s, 8, 2, truth(s, 8, 2)) for s in sizes]   # 2 nodes x 4 ranks
    model = fit_topology("allreduce", obs, algorithm="ring", schedule="hierarchical")
    assert not model.inter_absorbs_intra
    assert model.inter.busbw_Bps == pytest.approx(nic.busbw_Bps, rel=1e-6)
    for world, nodes in ((16, 2), (8, 4), (32, 4), (4, 4)):
        for size in (sizes[0], sizes[-1]):
            pred = model.predict(int(size), world, nodes)
            assert pred.time_s == pytest.approx(truth(size, world, nodes), rel=1e-6)
    assert "intra-node phase on 8 ranks" in model.predict(1 << 20, 16, 2).schedule
    # Without single-node sweeps the inter-node link absorbs the phase, and it is not added twice
    # when an intra-node preset joins later.
    alone = fit_topology("allreduce", [o for o in obs if o.nodes > 1], algorithm="ring", schedule="hierarchical")
    assert alone.inter_absorbs_intra
    joined = alone.with_preset(get_preset("nvlink4"))
    assert joined.predict(1 << 20, 8, 2).time_s == pytest.approx(alone.predict(1 << 20, 8, 2).time_s, rel=1e-12)
    round_trip = TopologyModel.from_dict(model.to_dict())
    assert round_trip.predict(1 << 24, 32, 4).time_s == pytest.approx(model.predict(1 << 24, 32, 4).time_s)
    older = {k: v for k, v in alone.to_dict().items() if k != "inter_absorbs_intra"}  # before the flag
    assert TopologyModel.from_dict(older).inter_absorbs_intra
    with pytest.raises(FileFormatError):
        TopologyModel.from_dict({**model.to_dict(), "inter_absorbs_intra": "yes"})


def test_fit_nodes_1_on_a_sweep_that_says_it_crossed_nodes_is_refused():
    from pybench.cli.fit_inputs import with_nodes
    from pybench.model.logs.measurements import MeasurementSet
    ms = MeasurementSet("nccl-tests", "allreduce", "nccl", 16, "inter-node", "float32",
                        np.array([1 << 20, 1 << 21, 1 << 22]), np.array([1e-4, 2e-4, 4e-4]), path="x.txt")
    with pytest.raises(UsageError, match="crossed nodes by its own record"):
        with_nodes(ms, 1)
    assert "16 ranks on 2 host(s) per --nodes" in with_nodes(ms, 2).notes


def test_hosts_of_one_nvlink_domain_are_named_and_prediction_beyond_it_is_flagged(tmp_path, capsys):
    # A GB200 NVL72 rack: 18 trays x 4 GPUs list as 18 hosts, yet move 800 GB/s bus bandwidth,
    # more than 4 ranks could push through 800 Gbit/s NICs (400 GB/s). Inside the rack the fit
    # holds; 1440 ranks cross the network beyond it, which the log never measured.
    from pybench.cli.main import main
    from pybench.model.nvlink_domains import nvlink_domain_ranks
    from pybench.model.model_files import load_topology

    head = "".join(f"#  Rank {r:2d} Group  0 Pid {r} on tray{r // 4:02d} device  {r % 4} [0x01] NVIDIA GB200\n"
                   for r in range(72))
    head += ("#       size         count      type   redop    root     time   algbw   busbw #wrong"
             "     time   algbw   busbw #wrong\n#        (B)    (elements)                               (us)  (GB/s)"
             "  (GB/s)            (us)  (GB/s)  (GB/s)\n")
    rows = ""
    for k in range(20, 34):
        s = 2 ** k
        t = 20.0 + 2 * 71 / 72 * s / 800e3
        rows += f"{s} {s // 4} float sum -1 {t:.1f} {s / t / 1e3:.2f} {s / t / 1e3 * 142 / 72:.2f} 0 "
        rows += f"{t:.1f} {s / t / 1e3:.2f} {s / t / 1e3 * 142 / 72:.2f} 0\n"
    log = tmp_path / "nvl72.log"
    log.write_text("# Collective test starting: all_reduce_perf\n" + head + rows)
    path = tmp_path / "rack.json"
    assert main(["fit", str(log), "-o", str(path)]) == 0
    assert "share an NVLink domain" in capsys.readouterr().out
    (model,) = load_topology(path)
    assert nvlink_domain_ranks(model) == 72
    assert main(["predict", str(path), "--world", "72", "--nodes", "18", "--sizes", "1G"]) == 0
    assert "warning" not in capsys.readouterr().err
    # beyond it the rows say not determined (exit 0), and Python says the same
    assert main(["predict", str(path), "--world", "1440", "--nodes", "360", "--sizes", "1G"]) == 0
    out = capsys.readouterr().out
    assert "not determined by these inputs: the inter-node figures were fitted inside an NVLink domain" in out
    assert "lower bound" in out and "--np 1440" in out
    assert not model.predict(1 << 30, 1440, 360).determined
    assert model.predict(1 << 30, 36, 9).determined  # fewer ranks of the same domain: the fit holds
    # described as an NVL72 rack, the trays measured together still price the rack, not its nominal rate
    rack = model.with_system(load_system("gb200-nvl72"))
    measured, alone = model.predict(1 << 30, 72, 18), rack.predict(1 << 30, 72, 18)
    assert alone.provenance == "measured" and alone.time_s == pytest.approx(measured.time_s)
    assert alone.high_s / alone.time_s < 1.05
    assert not rack.predict(1 << 30, 144, 36).determined
    # a real network (2 x 8 GPUs, 200 GB/s bus bandwidth) is not taken for one
    nic = [Observation(2.0 ** k, 16, 2, 30e-6 + 2 * 15 / 16 * 2.0 ** k / 200e9) for k in range(20, 34)]
    assert nvlink_domain_ranks(fit_topology("allreduce", nic)) == 0


def test_a_fitted_inter_node_link_answers_its_own_sweep_even_when_faster_than_the_intra_node_link():
    # A 2-node sweep measured end to end at 250 GB/s bus bandwidth (in-network reduction, or another
    # system's node sweeps beside it) with single-node sweeps at 200 GB/s: the prediction at the
    # fitted layout is the sweep's own, not capped at the intra-node rate (it was 17% off on the
    # A100 logs: vTrain's 234 GB/s node capping OCI's 253 GB/s 2-node regime). A preset NIC is a
    # port rate and is capped by the slower intra-node link.
    sizes = [2.0 ** k for k in range(20, 31)]
    single = [Observation(s, p, 1, 10e-6 + 2 * (p - 1) / p * s / 200e9) for p in (2, 4, 8) for s in sizes]
    multi = [Observation(s, 16, 2, 30e-6 + 2 * 15 / 16 * s / 250e9) for s in sizes]
    model = fit_topology("allreduce", single + multi, algorithm="ring")
    assert model.inter.busbw_Bps > model.intra.busbw_Bps
    for o in multi:
        assert model.predict(int(o.size_bytes), 16, 2).time_s == pytest.approx(o.time_s, rel=0.01)
    slow_node = [Observation(s, p, 1, 10e-6 + 2 * (p - 1) / p * s / 20e9) for p in (2, 4) for s in sizes]
    preset = fit_topology("allreduce", slow_node, algorithm="ring", inter_preset=get_preset("ib-xdr"))
    big = preset.predict(1 << 30, 16, 2)
    # the node's 20 GB/s, not the NIC's 100
    assert big.time_s == pytest.approx(2 * 15 / 16 * (1 << 30) / 20e9, rel=0.05)


def test_a_fit_over_hundreds_of_node_counts_writes_a_file_it_reads_back():
    """A model file's text fields are bounded (4096 characters): the inter-node link's label names a long
    list of fitted layouts by their count and range, so pybench never writes a file it then refuses."""
    obs = [Observation(2.0 ** k, 8 * n, n, 2e-5 + 8e-6 * n + 2.0 ** k / 40e9) for n in range(2, 300)
           for k in range(16, 24)]
    model = fit_topology("allgather", obs)
    assert model.inter is not None and model.inter.label == "fitted at 298 layouts, 16 to 2392 ranks on 2 to 299 nodes"
    assert TopologyModel.from_dict(json.loads(json.dumps(model.to_dict()))) == model
    few = fit_topology("allgather", [o for o in obs if o.nodes in (2, 8)])
    assert few.inter is not None and few.inter.label == "fitted at 16 ranks on 2 nodes, 64 ranks on 8 nodes"


def test_more_nodes_of_the_same_ranks_per_node_never_take_less_time_than_fewer_as_fitted():
    """A GB200 rack measured alone, described: two racks paid the NICs' time only, half the rack's own
    all-reduce (CoreWeave's 2-rack log runs as long as one rack). More nodes of the same ranks per node
    add steps and bytes, so a prediction is raised to the fitted layout with fewer nodes, and says so."""
    sizes = [2.0 ** k for k in range(29, 34)]
    rack = [Observation(s, 72, 18, 600e-6 + 2 * 71 / 72 * s / 850e9) for s in sizes]
    nvl72 = load_system("gb200-nvl72")
    model = fit_topology("allreduce", rack, system=nvl72).with_system(nvl72)
    for s in sizes:
        two = model.predict(int(s), 144, 36)
        assert two.time_s >= model.predict(int(s), 72, 18).time_s * 0.999
        assert int(s) / two.time_s * busbw_factor("allreduce", 144) <= 850e9 * 1.001  # (the rack's own links)
    # the low end is not raised: real logs run some sizes faster on more nodes than the fit of fewer says (an H100
    # InfiniBand cluster's 8 nodes at 1-8 MiB against its 4-node fit), and the interval must still hold them
    assert "raised" not in two.links  # a size's own note: a table prints the links once per layout
    # the same holds between node counts of a multi-node fit: 128 nodes from 32 + 64 are not faster than 64
    grow = [Observation(s, 96 * n, n, 1e-4 * n + s / 10e9) for n in (32, 64) for s in sizes]
    fitted = fit_topology("allreduce", grow)
    for s in sizes:
        assert fitted.predict(int(s), 96 * 128, 128).time_s >= fitted.predict(int(s), 96 * 64, 64).time_s * 0.999


def test_a_described_crossing_widens_with_the_nodes_beyond_the_two_it_is_calibrated_on():
    """Every log the described crossing's constants were chosen on ran on 2 nodes: 20 nodes are further out."""
    model = fit_topology("allreduce", _vtrain(8)).with_system(load_system("dgx-a100"))
    near, far = model.predict(1 << 30, 16, 2), model.predict(1 << 30, 160, 20)
    assert near.provenance == far.provenance == "system description"
    assert far.high_s / far.time_s > 1.2 * near.high_s / near.time_s


def test_a_gpu_count_on_an_unswitched_described_node_never_measured_is_not_determined():
    """A 2-node fit on dgx-1-v100 (NVLink mesh) asked for 4 GPUs in one node priced them at the nominal per-GPU
    rate: no node count was measured, and on a mesh only a measurement says what a count gets."""
    sizes = [2.0 ** k for k in range(20, 31)]
    across = fit_topology("allreduce", [Observation(s, 16, 2, 30e-6 + 2 * 15 / 16 * s / 40e9) for s in sizes])
    for system, determined in (("dgx-1-v100", False), ("ethernet-25g", False), ("dgx-a100", True)):
        p = across.with_system(load_system(system)).predict(1 << 30, 4, 1)
        assert p.determined == determined, system
        assert determined or "measured: none in one node" in p.undetermined


def test_a_cost_shape_that_misses_its_own_layouts_widens_its_other_layouts_by_that_miss():
    """MPI on 96 ranks per node at 32 and 64 nodes, its latency growing with the nodes faster than any tree: the one
    shape misses its own sweeps, so 128 nodes are known no better than that; where it misses them by more than
    OWN_MISS (a real EKS log: by 52%), other node counts are not determined (test_node_counts_determined.py)."""
    sizes = [2.0 ** k for k in range(2, 21)]
    steep = [Observation(s, 96 * n, n, 8e-6 * n * n / 32 + s / 2e9) for n in (32, 64) for s in sizes]
    assert not fit_topology("allreduce", steep).predict(1024, 96 * 128, 128).determined
    obs = [Observation(s, 96 * n, n, 256e-6 * (n / 32) ** 0.6 + s / 2e9) for n in (32, 64) for s in sizes]
    model = fit_topology("allreduce", obs)
    assert 0.1 < max(m for _, _, m in model.layout_misses) <= 0.15
    missed = model.predict(1024, 96 * 128, 128)
    clean = dataclasses.replace(model, layout_misses=()).predict(1024, 96 * 128, 128)
    miss = max(m for _, _, m in model.layout_misses)
    assert missed.high_s / missed.time_s == pytest.approx(clean.high_s / clean.time_s * (1 + miss), rel=1e-6)


def _crossing(world: int, nodes: int) -> list[Observation]:
    """A ring all-reduce across ``nodes`` nodes: 25 us and 10 GB/s of bus bandwidth."""
    return [Observation(float(s), world, nodes, 25e-6 + 2 * (world - 1) / world * s / 10e9)
            for s in (2.0 ** k for k in range(16, 28))]


def test_cpu_ranks_at_another_count_per_node_are_not_determined():
    # A public OSU log at 36 CPU ranks per node, asked for 1 per node, was priced 10x slower than one rank's
    # ring through the measured NIC: the bottleneck (memory, reductions, the shared NIC) moves with the count.
    cpu = dataclasses.replace(fit_topology("allreduce", _crossing(16, 2)), backend="mpi")
    p = cpu.predict(1 << 20, 4, 4)
    assert not p.determined and "8 ranks per node only" in p.undetermined and "CPU ranks" not in p.undetermined
    assert fit_topology("allreduce", _crossing(16, 2)).predict(1 << 20, 4, 4).determined  # GPUs: NICs per rank


def test_cpu_ranks_on_another_node_count_need_two_fitted_node_counts():
    """OSU on cloud CPU clusters, fitted at one node count: GKE's 128 nodes predicted 256 at +7% where the run took
    4x as long at every size (0 of 19 sizes inside), AKS's 128 predicted 32 1018% off. An MPI library picks its
    algorithm by the number of ranks, and one node count cannot say how its network's latency grows: not determined.
    Two node counts that one cost shape holds answer between and beyond them; GPUs (NCCL's ring and tree) answer
    from one."""
    cpu = dataclasses.replace(fit_topology("allreduce", _crossing(16, 2)), backend="mpi")
    p = cpu.predict(1 << 20, 32, 4)
    assert not p.determined and "at 2 nodes only" in p.undetermined and "two or more node counts" in p.undetermined
    assert "MPI ranks" in p.undetermined and "CPU ranks" not in p.undetermined  # (OSU -d cuda ranks are MPI's on GPUs)
    assert cpu.predict(1 << 20, 16, 2).determined  # its own layout
    two = dataclasses.replace(fit_topology("allreduce", _crossing(16, 2) + _crossing(32, 4)), backend="mpi")
    assert two.predict(1 << 20, 64, 8).determined and two.predict(1 << 20, 24, 3).determined
    assert fit_topology("allreduce", _crossing(16, 2)).predict(1 << 20, 32, 4).determined


def test_the_api_says_what_is_wrong_with_one_rank_and_labels_a_fitted_layout_beyond_its_sizes(tmp_path, capsys):
    """From a public OSU log's users: ``predict(size, world=1)`` on a multi-node model asked for nodes=, and with
    nodes=1 named the CLI's --world; a size below the sweep at another fitted layout read "between measured
    sizes, beyond the measured sizes", and the CLI's row added "outside measured sizes" to "beyond ..."."""
    from pybench.cli.main import main
    from pybench.model.model_files import load_model
    log = SHARED_DATA / "nccl-tests" / "polaris_a100_2node_4gpu_slingshot_allreduce.txt"
    log8 = SHARED_DATA / "nccl-tests" / "polaris_a100_8node_4gpu_slingshot_allreduce.txt"
    out = tmp_path / "m.json"
    assert main(["fit", str(log), str(log8), "-o", str(out)]) == 0
    capsys.readouterr()
    model = load_model(out, world_size=8)
    for kw in ({"world": 1}, {"world": 1, "nodes": 1}):
        with pytest.raises(UsageError, match=r"one rank moves nothing between ranks.*2 or more") as info:
            model.predict(1 << 20, **kw)
        assert "--world" not in str(info.value) and "nodes=" not in str(info.value).split(";")[0]
    p = model.predict(1.0, world=32, nodes=8)
    assert p.provenance == "fitted sweep, beyond the measured sizes"
    assert main(["predict", str(out), "--world", "8", "--nodes", "2", "--sizes", "64G"]) == 0
    row = capsys.readouterr().out.strip().splitlines()[-1]
    assert "beyond the measured sizes" in row and "outside measured sizes" not in row


def test_an_all_to_all_sends_each_ranks_share_across_nodes_at_once():
    """Every rank sends (p - g)/p of its buffer to other nodes, all g ranks of a node through its NICs at once
    (no ring passes it on): g (N - 1)/N S per node, so bus bandwidth falls as N/(N - 1) times the per-GPU NIC
    rate, as nccl-tests' maintainer states it (NVIDIA/nccl-tests#130). A 2-node fit priced 4 and 8 nodes at the
    2-node bus bandwidth (a ring's bytes), 15-40% too fast against that; a public MI355X 2 x 8 log (8 x 400G
    per node) ran at 97% of its NICs by this count."""
    per_gpu_nic = 48.5e9
    def measured(world, nodes):
        g = world // nodes
        return [Observation(s, world, nodes, 30e-6 + g * (nodes - 1) / nodes * s / (g * per_gpu_nic))
                for s in (2.0 ** k for k in range(20, 35))]
    model = fit_topology("alltoall", measured(16, 2))
    for nodes in (4, 8):
        size = 1 << 34
        expected = [o for o in measured(8 * nodes, nodes) if o.size_bytes == size][0].time_s
        p = model.predict(size, 8 * nodes, nodes)
        assert p.time_s == pytest.approx(expected, rel=0.03) and p.schedule == "pairwise"
        busbw = size / p.time_s * busbw_factor("alltoall", 8 * nodes)
        assert busbw == pytest.approx(nodes / (nodes - 1) * per_gpu_nic * (8 * nodes - 1) / (8 * nodes), rel=0.03)


def test_an_all_to_all_fitted_with_a_rings_bytes_is_refused_in_one_line(tmp_path):
    from pybench.model.model_files import load_models
    model = fit_topology("alltoall", [Observation(s, 16, 2, 30e-6 + s / 20e9)
                                      for s in (2.0 ** k for k in range(20, 30))])
    doc = model.to_dict()
    assert doc["crossing_version"] == TOPOLOGY_CROSSING_VERSION
    del doc["crossing_version"]  # as files before it wrote them
    with pytest.raises(FileFormatError, match="all-to-all was fitted across nodes with a ring's bytes.*refit"):
        TopologyModel.from_dict(doc)
    doc["collective"] = "allgather"  # the other collectives' bytes did not change: their files load
    assert TopologyModel.from_dict(doc).inter is not None


def test_a_described_all_to_all_waits_on_the_network_once_not_once_per_peer():
    """An all-to-all sends to every peer at once: a node measured alone plus its description crossed 2 x 8 with
    a ring's 15 network steps, 13x the 55 us a public MI355X 2 x 8 log measured at 1 MiB. One round trip waits
    on the network; the other peers' steps go at the node's own pace."""
    from pybench.model.calibration import load_calibration
    node = fit_topology("alltoall", [Observation(s, 8, 1, 20e-6 + 7 / 8 * s / 300e9)
                                     for s in (2.0 ** k for k in range(10, 31))])
    described = node.with_system(load_system("dgx-h100"))
    cal = load_calibration()
    network_step = max(cal.crossing_step_latency_s, cal.bandwidth_step_latency_s)
    small = described.predict(1 << 10, 16, 2).time_s
    assert small < node.predict(1 << 10, 8, 1).time_s + 2 * network_step


def test_every_predict_record_says_whether_it_is_determined_and_its_nodes_where_known(tmp_path, capsys):
    """Readers of `predict --json` found `determined` and `nodes` on other layouts' records only."""
    from pybench.cli.main import main
    out, pred = tmp_path / "m.json", tmp_path / "p.json"
    log = SHARED_DATA / "nccl-tests" / "polaris_a100_2node_4gpu_slingshot_allreduce.txt"
    assert main(["fit", str(log), "-o", str(out)]) == 0
    for extra in ([], ["--world", "16", "--nodes", "4"]):
        assert main(["predict", str(out), "--sizes", "1M", "--json", str(pred), "--force", *extra]) == 0
        (record,) = json.loads(pred.read_text())["records"]
        assert record["determined"] is True and record["nodes"] == (4 if extra else 2)
        assert record["size_notes"] == []  # a list on every record, as on the layouts a time was raised on
    capsys.readouterr()


def test_the_cli_says_one_rank_moves_nothing_before_asking_for_nodes(tmp_path, capsys):
    from pybench.cli.main import main
    out = tmp_path / "m.json"
    assert main(["fit", str(SHARED_DATA / "nccl-tests" / "polaris_a100_2node_4gpu_slingshot_allreduce.txt"),
                 "-o", str(out)]) == 0
    capsys.readouterr()
    assert main(["predict", str(out), "--world", "1", "--sizes", "1M"]) == 2
    (line,) = capsys.readouterr().err.strip().splitlines()
    assert "one rank moves nothing between ranks" in line and "give --nodes" not in line


def test_groups_sharing_the_nics_take_longer_between_fitted_node_counts_too():
    """The bounds from the fitted node counts on either side were taken without the sharing: 1 GiB on 4 nodes of an
    H100 cluster fitted at 2 and 8 nodes took 7360 us whether 2, 4 or 8 groups shared the NICs."""
    from conftest import PUBLIC_LOGS

    from pybench.model.logs import load_measurements
    from pybench.model.topology_fit import fit_topology_models

    sets = [m for n in (2, 8) for m in load_measurements(PUBLIC_LOGS / f"h100ib_gjaion_{n}node{8 * n}_allreduce.log")]
    (model,), _ = fit_topology_models(sets, None)
    times = [model.predict(1 << 30, 32, 4, sharing=k).time_s for k in (1, 2, 4, 8)]
    assert all(a < b for a, b in zip(times, times[1:])), times


def test_sendrecv_is_one_step_of_every_rank_at_once_at_any_world():
    """nccl-tests' sendrecv_perf sends to the next rank and receives from the one before, every rank at once:
    one step at any world. Priced as a chain of p - 1 steps, a B200 cluster's 2-node fit put 1 KiB on 8 nodes
    at 126 us; the same cluster measured 30 us there (30 us on 2 nodes: together-nccl-tests)."""
    from conftest import PUBLIC_LOGS

    from pybench.model.build import fit_model
    from pybench.model.logs import load_measurements
    from pybench.model.topology_fit import undisturbed_observations

    def sweep(nodes: int) -> list[Observation]:
        return [o for ms in load_measurements(PUBLIC_LOGS / f"together_b200_sendrecv_{nodes}node{8 * nodes}.log")
                if np.unique(ms.size_bytes).size > 2 for o in undisturbed_observations(ms)]

    assert algorithm_steps("sendrecv", "ring", 512) == (1.0, 512.0)  # one step; S through each rank
    model = fit_topology("sendrecv", sweep(2))
    for o in sweep(8):
        if o.size_bytes <= 64 << 10:  # latency rules: the same step on any number of nodes
            p = model.predict(o.size_bytes, o.world, o.nodes)
            assert abs(p.time_s / o.time_s - 1) < 0.25 and p.low_s <= o.time_s <= p.high_s, (o, p)
    # a file written when a sendrecv's steps grew with its ranks is refused, not misread
    with pytest.raises(FileFormatError, match="chain of p - 1 steps.*refit"):
        TopologyModel.from_dict({**model.to_dict(), "crossing_version": 2})
    # in a file, only that collective loses its topology model (its curve still answers where it was measured)
    from pybench.model.model_files import models_from_document
    from pybench.model.model_writer import models_to_document
    curve = fit_model([m for m in load_measurements(PUBLIC_LOGS / "together_b200_sendrecv_2node16.log")
                       if np.unique(m.size_bytes).size > 2])
    other = fit_topology("allreduce", [Observation(s, 16, 2, 30e-6 + s / 40e9) for s in (1e3, 1e5, 1e6, 1e7, 1e8)])
    doc = models_to_document([curve], [model, other])
    doc["topology"] = [{**t, "crossing_version": 2} for t in doc["topology"]]
    (loaded,) = models_from_document(doc)
    assert loaded.topology is None and "chain of p - 1 steps" in loaded.why_no_topology()
    assert loaded.predict(1 << 20, 16).provenance == "measured"
    pair = fit_topology("sendrecv", [Observation(s, 2, 2, 20e-6 + s / 40e9) for s in (1e3, 1e5, 1e6, 1e7, 1e8)])
    assert TopologyModel.from_dict({**pair.to_dict(), "crossing_version": 2}) == pair  # 2 ranks: one step either way
