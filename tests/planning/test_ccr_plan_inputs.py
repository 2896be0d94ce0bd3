"""ccr and plan: the layout a fitted sweep answers for, the system's GPUs per node, and absurd input.

The model is the shared 2 x 8 H100 all-reduce log fitted as the README fits it (16 ranks on 2 nodes).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from conftest import SHARED_DATA, fitted_model_file, refused_in_one_line

import pybench
from pybench.cli.main import main
from pybench.errors import UsageError

H100_LOG = SHARED_DATA / "nccl-tests" / "h100_p5_2node_16gpu_efa_allreduce_srunprefix.txt"
GRADIENTS_7B = 14_000_000_000  # bytes of 7B parameters' bf16 gradients: the DDP all-reduce


@pytest.fixture(scope="module")
def h100(tmp_path_factory):
    if not H100_LOG.exists():
        pytest.skip(f"shared log not found: {H100_LOG}")
    return str(fitted_model_file(tmp_path_factory, H100_LOG, "--nodes", "2"))


def _ccr_op(h100, tmp_path, capsys, *args):
    out = tmp_path / "ccr.json"
    assert main(["ccr", "--params", "7B", "--model", h100, "--tflops", "400", "--json", str(out), "--force",
                 *args]) == 0
    capsys.readouterr()
    row = json.loads(out.read_text())["rows"][0]
    return row, row["ops"][0]


def _predict(h100, tmp_path, capsys, nodes):
    out = tmp_path / f"predict{nodes}.json"
    assert main(["predict", h100, "--sizes", str(GRADIENTS_7B), "--world", "16", "--nodes", str(nodes),
                 "--system", "aws-p5", "--json", str(out), "--force"]) == 0
    capsys.readouterr()
    return json.loads(out.read_text())["records"][0]


_refused = refused_in_one_line


@pytest.mark.parametrize("gpus_per_node,nodes", [(8, 2), (4, 4), (2, 8)])
def test_the_sweep_answers_at_its_own_layout_only_other_node_counts_as_predict(h100, tmp_path, capsys,
                                                                               gpus_per_node, nodes):
    row, op = _ccr_op(h100, tmp_path, capsys, "--world", "16", "--gpus-per-node", str(gpus_per_node),
                      "--system", "aws-p5")
    assert row["layout"]["nodes"] == nodes and op["size_bytes"] == GRADIENTS_7B
    record = _predict(h100, tmp_path, capsys, nodes)
    assert op["time_per_call_s"] == pytest.approx(record["time_s"], rel=1e-9)
    assert record["provenance"] in op["model"]  # the same words predict prints
    if nodes == 2:
        assert "fitted at 16 ranks on 2 nodes" in op["model"]
    else:
        assert "another node count" in op["model"] and "topology model" in op["model"]


def test_python_ccr_takes_the_systems_gpus_per_node_as_the_cli(h100, tmp_path, capsys):
    res = pybench.ccr("7B", 2048, 1, 16, "ddp", models=h100, flops_per_s=4e14, system="gb200-nvl72")
    row, op = _ccr_op(h100, tmp_path, capsys, "--world", "16", "--system", "gb200-nvl72")
    assert res.rows[0].layout.gpus_per_node == row["layout"]["gpus_per_node"] == 4
    assert res.rows[0].ops[0].call.time_s == pytest.approx(op["time_per_call_s"], rel=1e-9)
    with pytest.raises(UsageError, match="exceeds the 4 GPUs per host"):
        pybench.ccr("7B", 2048, 1, 16, "ddp", models=h100, flops_per_s=4e14, system="gb200-nvl72", gpus_per_node=8)


@pytest.mark.parametrize("args,said", [
    (["--world", "1"], "--world 1: give 2 to 16777216 ranks"),
    (["--world", "16777217"], "--world 16777217: give 2 to 16777216"),
    (["--world", "1000000000000"], "--world 1000000000000: give 2 to 16777216"),
    (["--world", "16", "--params", "1e15", "--system", "aws-p5"], "--params is too large"),
])
def test_absurd_ccr_input_is_refused_in_one_line(h100, capsys, args, said):
    argv = ["ccr", *([] if "--params" in args else ["--params", "7B"]), "--model", h100, "--tflops", "400", *args]
    err = _refused(capsys, argv)
    assert said in err
    if "--params" in said:
        assert "gradients make a bucket" in err and "16 TiB" in err


@pytest.mark.parametrize("command", ["ccr", "plan"])
def test_a_description_file_missing_a_field_names_its_field_not_a_flag(h100, tmp_path, capsys, command):
    """The file's own field (gpus_per_node), as predict says it: "--gpus-per-node: Field required" sent the
    user to a flag they never gave."""
    described = json.loads((Path(pybench.__file__).parent / "model" / "systems" / "aws-p5.json").read_text())
    del described["gpus_per_node"]
    path = tmp_path / "p5.json"
    path.write_text(json.dumps(described))
    err = _refused(capsys, [command, "--params", "7B", "--model", h100, "--tflops", "400", "--system", str(path)])
    assert "system description: gpus_per_node: Field required" in err and "--gpus-per-node" not in err


def test_a_world_beyond_the_cap_is_refused_in_python_too(h100):
    with pytest.raises(UsageError, match="world must be at most 16777216"):
        pybench.ccr("7B", 2048, 1, 10**12, "ddp", models=h100, flops_per_s=4e14)


def test_plan_needs_at_least_two_devices(h100, capsys):
    err = _refused(capsys, ["plan", "--params", "7B", "--max-world", "1", "--model", h100, "--tflops", "400",
                            "--system", "aws-p5"])
    assert "--max-world must be at least 2" in err
    with pytest.raises(UsageError, match="max_world must be at least 2"):
        pybench.plan("7B", 2048, 1, models=h100, flops_per_s=4e14, max_world=1)


def test_intra_node_links_priced_by_the_inter_node_model_are_labelled_an_upper_bound(h100, tmp_path, capsys):
    # docs/planning.md: with a multi-node log alone, intra-node links are priced with the inter-node model as
    # an upper bound (predict refuses them); the call's label says so first, and a note says it too
    out = tmp_path / "ccr8.json"
    assert main(["ccr", "--params", "7B", "--world", "8", "--model", h100, "--tflops", "400", "--json",
                 str(out)]) == 0
    text = capsys.readouterr().out
    doc = json.loads(out.read_text())
    (op,) = doc["rows"][0]["ops"]
    assert op["link_class"] == "intra-node"
    assert op["model"].startswith("upper bound for intra-node links, from the inter-node model: ")
    assert "intra-node links priced with the inter-node model, an upper bound" in text


@pytest.mark.parametrize("command", [["ccr", "--params", "7B", "--tflops", "400"],
                                     ["plan", "--params", "1.3B", "--tflops", "300", "--max-world", "8"]])
def test_ccr_and_plan_never_write_over_a_file_they_read_even_with_force(h100, tmp_path, capsys, command):
    """`ccr ... --model M --json M --force` replaced the model with its CCR table (and plan's the same), where fit
    and predict refused: now refused before any work, the model kept."""
    model = tmp_path / "m.json"
    model.write_bytes(Path(h100).read_bytes())
    kept = model.read_bytes()
    err = refused_in_one_line(capsys, [*command, "--model", str(model), "--json", str(model), "--force"])
    assert "is one of this command's inputs" in err and model.read_bytes() == kept


def test_ccr_never_writes_over_the_compute_profile_it_reads(h100, tmp_path, capsys):
    profile = tmp_path / "compute.json"
    assert main(["compute", "--params", "20M", "--seq", "128", "--json", str(profile)]) == 0
    kept = profile.read_bytes()
    err = refused_in_one_line(capsys, ["ccr", "--params", "1.3B", "--model", h100, "--compute", str(profile),
                                       "--json", str(profile), "--force"])
    assert "is one of this command's inputs" in err and profile.read_bytes() == kept


def test_the_text_says_when_a_call_is_larger_than_any_size_measured(tmp_path, capsys):
    """A 1.3B model's 2.6 GB gradient all-reduce priced from an OSU sweep that ends at 1 MiB gave a comm-bound
    verdict whose text never said the figure was carried 2000x beyond the sweep (only the JSON did)."""
    log = tmp_path / "osu.out"
    log.write_text("# OSU MPI Allreduce Latency Test v7.3\n# Datatype: MPI_FLOAT.\n# Size       Avg Latency(us)\n"
                   + "".join(f"{1 << k} {3.0 + (1 << k) / 2e3:.2f}\n" for k in range(2, 21)))
    model = tmp_path / "m.json"
    assert main(["fit", str(log), "--world", "16", "--nodes", "2", "-o", str(model)]) == 0
    capsys.readouterr()
    assert main(["ccr", "--params", "1.3B", "--world", "16", "--gpus-per-node", "8", "--model", str(model),
                 "--tflops", "300"]) == 0
    out = capsys.readouterr().out
    assert "allreduce: messages beyond the largest size its model measured (1M) carry its fitted curve on" in out
