"""Bounds a model file and the Python API hold to: a hand-edited file and an absurd size are refused."""

from __future__ import annotations

import json

import pytest
from conftest import SHARED_DATA, fitted_model_file

from pybench.cli.main import main as main_for_tests
from pybench.errors import FileFormatError, UsageError
from pybench.model.model_files import load_model, load_models
from pybench.sizes import MAX_SIZE_BYTES


@pytest.fixture(scope="module")
def node_model(tmp_path_factory):
    return fitted_model_file(tmp_path_factory, SHARED_DATA / "vtrain" / "a100_nvswitch_allreduce_2gpu.csv")


@pytest.mark.parametrize("field", ["rel_sigma", "median_ape", "max_ape"])
def test_a_negative_scatter_in_a_model_file_is_refused(node_model, tmp_path, field):
    data = json.loads(node_model.read_text())
    data["models"][0]["segments"][0][field] = -0.1
    edited = tmp_path / "edited.json"
    edited.write_text(json.dumps(data))
    with pytest.raises(FileFormatError, match=f"{field} is -0.1, below zero"):
        load_models(edited)


def test_python_refuses_sizes_the_cli_refuses(node_model):
    model = load_model(node_model)
    assert model.predict(MAX_SIZE_BYTES).time_s > 0
    with pytest.raises(UsageError, match="at most 16T"):
        model.predict(2 ** 62)
    with pytest.raises(UsageError, match="world 9223372036854775807 must be a whole number from 1 to 16777216"):
        model.predict(1 << 20, world=2 ** 63 - 1, nodes=2)


def test_a_sweep_without_its_node_count_says_so_when_nodes_are_given(tmp_path, capsys):
    """An osu_latency sweep (2 ranks, nodes unrecorded): asked with nodes=, it names the missing input, not
    "not determined"; without nodes= the sweep answers."""
    from conftest import REPO

    lat = REPO / "tests" / "fixtures" / "osu_latency_f.txt"
    path = tmp_path / "lat.json"
    assert main_for_tests(["fit", str(lat), "-o", str(path)]) == 0
    capsys.readouterr()
    assert main_for_tests(["predict", str(path), "--sizes", "1K", "--world", "2", "--nodes", "2"]) == 2
    assert "does not record how many nodes it ran on" in capsys.readouterr().err
    model = load_model(path)
    with pytest.raises(UsageError, match="does not record how many nodes it ran on"):
        model.predict(1024, world=2, nodes=2)
    assert model.predict(1024, world=2).time_s > 0


def test_a_link_class_no_fit_writes_is_refused(node_model, tmp_path):
    data = json.loads(node_model.read_text())
    data["models"][0]["link_class"] = "warp"
    edited = tmp_path / "edited.json"
    edited.write_text(json.dumps(data))
    with pytest.raises(FileFormatError, match="link_class: Input should be 'intra-node' or 'inter-node'"):
        load_models(edited)


@pytest.mark.parametrize("path", [None, 123, b"model.json", {}, ""])
def test_load_model_names_a_path_that_is_no_file_name(path):
    with pytest.raises(UsageError, match="a file is named by a non-empty str or pathlib.Path"):
        load_model(path)


@pytest.mark.parametrize("edit, fragment", [
    # a piece at infinite bandwidth (1/B = 0) that the fit never held there predicted 64 GiB in 303 us, "measured"
    (lambda m: m["segments"][-1].update(inv_bw_s_per_byte=0.0, held=""), "unphysical piece"),
    # a negative variance narrowed the interval
    (lambda m: m["segments"][0].update(cov=[-1.0, 0.0, -1.0]), "the variances >= 0"),
    (lambda m: m.update(collective="foo"), "collective 'foo' is none pybench fits"),
    # two regimes for one size (a piece's start moved to 1 B): the pieces are taken in order, one per size
    (lambda m: m["segments"][1].update(size_min_bytes=1), r"pieces .* overlap or are out of order"),
    (lambda m: m.update(segments=m["segments"][::-1]), r"pieces .* overlap or are out of order"),
])
def test_a_hand_edited_model_that_no_fit_writes_is_refused(node_model, tmp_path, edit, fragment):
    data = json.loads(node_model.read_text())
    edit(data["models"][0])
    edited = tmp_path / "edited.json"
    edited.write_text(json.dumps(data))
    with pytest.raises(FileFormatError, match=fragment):
        load_models(edited)


@pytest.mark.parametrize("nic_gbps", [0.01, 1.0, 10.0, 50.0, 100.0, 200.0, 400.0, 3200.0])
def test_beyond_a_measured_sweep_the_described_nics_never_invert_the_interval(tmp_path, capsys, nic_gbps):
    """A description given at predict whose NICs carry less than the sweep's curve carried on raised only the low
    end above the sweep: 1 TiB read time 164 s, low 3518 s, high 274 s (helper-98's hostile sweep)."""
    model, system, out = tmp_path / "m.json", tmp_path / "slow.json", tmp_path / "p.json"
    assert main_for_tests(["fit", str(SHARED_DATA / "nccl-tests" / "a100_2node_16gpu_oci_roce_allreduce.txt"),
                           "--nodes", "2", "-o", str(model)]) == 0
    system.write_text(json.dumps({"name": "slow", "source": "a test of slow NICs", "gpus_per_node": 8,
                                  "intra_fabric": "nvswitch", "intra_GBps_per_gpu": 300, "nics_per_node": 1,
                                  "nic_Gbps": nic_gbps}))
    assert main_for_tests(["predict", str(model), "--sizes", "16G,1T", "--world", "16", "--nodes", "2", "--system",
                           str(system), "--json", str(out)]) == 0
    for r in json.loads(out.read_text())["records"]:
        assert r["time_low_s"] <= r["time_s"] <= r["time_high_s"], r
