"""Groups crossing the same node's NICs share them: a tp x dp layout is never priced below the NIC floor.

The floor (issue 13): the bytes every concurrent group sends out of one node, over the NICs'
bus bandwidth, which the same log's whole-node all-reduce measures.
"""

from __future__ import annotations

import json

import pytest
from conftest import SHARED_DATA

from pybench.cli.main import main
from pybench.model.model_files import load_models
from pybench.planning.nic_sharing import sharing_groups
from pybench.planning.strategies import CommOp, Layout

H100 = SHARED_DATA / "nccl-tests" / "h100_p5_2node_16gpu_efa_allreduce_srunprefix.txt"


def test_how_many_groups_share_a_node():
    grads = CommOp("gradients", "allreduce", 1 << 30, 1, 2, "inter-node", True)
    assert sharing_groups(Layout("tp+dp", 16, 8, dp=2, tp=8), grads) == 8      # 8 dp groups, one rank each per node
    assert sharing_groups(Layout("tp+dp", 32, 8, dp=8, tp=4), grads) == 4
    assert sharing_groups(Layout("ddp", 16, 8, dp=16), grads) == 1             # one group holds the node
    stages = CommOp("activations (pipeline)", "sendrecv", 1 << 20, 8, 2, "inter-node")
    assert sharing_groups(Layout("tp+pp+dp", 16, 8, dp=1, tp=8, pp=2), stages) == 8
    intra = CommOp("activations (tensor parallel)", "allreduce", 1 << 20, 8, 8, "intra-node")
    assert sharing_groups(Layout("tp+dp", 16, 8, dp=2, tp=8), intra) == 1


def test_tp8_dp2_on_the_h100_log_is_never_below_the_nic_floor(tmp_path, capsys):
    model_file, out = tmp_path / "h100.json", tmp_path / "ccr.json"
    assert main(["fit", str(H100), "-o", str(model_file)]) == 0
    assert main(["ccr", "--params", "7B", "--model", str(model_file), "--tflops", "400", "--world", "16",
                 "--gpus-per-node", "8", "--strategy", "tp+dp,ddp", "--json", str(out)]) == 0
    capsys.readouterr()
    rows = {r["strategy"]: r for r in json.loads(out.read_text())["rows"]}
    grads = next(op for op in rows["tp+dp"]["ops"] if op["purpose"] == "gradients")
    # The NICs' bus bandwidth, from the log's own 16-rank all-reduce at 1 GiB.
    (model,) = load_models(model_file)
    size = 1 << 30
    node_busbw = size * 2 * 15 / 16 / model.predict(size, world=16).time_s
    # 8 dp groups each all-reduce 1/8 of 7B bf16 gradients over 2 ranks, one per node: every
    # group sends half of 2 x its share out of each node, so the node sends 7e9 x 2 bytes.
    floor_s = 7e9 * 2 / node_busbw
    assert grads["time_s"] >= floor_s * 0.999, (grads["time_s"], floor_s)
    # ... and the whole-node ring of ddp moves more (2 x 15/16 of the buffer) through the same NICs
    ddp = next(op for op in rows["ddp"]["ops"] if op["purpose"] == "gradients")
    assert ddp["time_s"] >= grads["time_s"]
    assert grads["time_s"] == pytest.approx(floor_s, rel=0.15)  # latency and the 1/p ring share on top


@pytest.mark.parametrize("system, flows_per_nic", [("h100-xr01", 1), ("aws-p4d", 2), ("aws-p3dn", 8), (None, 8)])
def test_pipeline_stages_share_a_nic_only_where_the_node_has_fewer_than_their_flows(tmp_path, capsys, system,
                                                                                    flows_per_nic):
    """A send/recv is one rank's flow through its GPU's NICs: tp=8 stage boundaries on a node of 8 NICs each take
    their own (they had been priced at 8 flows on one), on a node of one NIC all 8 share it, and without a
    description nothing says they do not (helper-88 M5)."""
    from conftest import PUBLIC_LOGS
    model, out = tmp_path / "n2.json", tmp_path / "ccr.json"
    assert main(["fit", str(PUBLIC_LOGS / "xr01_h100_N1_G8_002.log"), str(PUBLIC_LOGS / "xr01_h100_N2_G8_002_003.log"),
                 "-o", str(model)]) == 0
    described = ["--system", str(PUBLIC_LOGS / "systems" / f"{system}.json") if system == "h100-xr01" else system]
    assert main(["ccr", "--params", "7B", "--model", str(model), "--tflops", "400", "--world", "16",
                 "--strategy", "tp+pp+dp", "--tp-degree", "8", "--pp-degree", "2", "--json", str(out),
                 *(described if system else [])]) == 0
    capsys.readouterr()
    (row,) = json.loads(out.read_text())["rows"]
    stages = next(op for op in row["ops"] if op["purpose"] == "activations (pipeline)")
    assert stages["collective"] == "sendrecv" and stages["group_size"] == 2
    # one flow of 16 MiB at the fitted one-flow rate (about 40 GB/s) takes about 0.4 ms; eight on one NIC, 3 ms; on
    # p4d one flow is held to its 100 Gb/s NIC (1.3 ms), and two share each of its four (helper-94 M1: 1.3 ms)
    if flows_per_nic == 1:
        assert "flows per NIC" not in stages["model"] and stages["time_per_call_s"] < 1e-3
    else:
        assert f"{flows_per_nic} flows per NIC" in stages["model"] and stages["time_per_call_s"] > 2e-3


@pytest.mark.parametrize("tp, pp", [(4, 4), (2, 8)])
def test_fewer_stage_flows_than_gpus_share_the_nics_their_gpus_reach(tmp_path, capsys, tp, pp):
    """tp 4 on aws-p4d (a NIC per pair of GPUs): the stage's 4 flows leave through the 2 NICs their GPUs reach, not
    all 4 of the node's; they had been priced with no sharing (helper-95 M1)."""
    from conftest import PUBLIC_LOGS
    model, out = tmp_path / "n2.json", tmp_path / "ccr.json"
    assert main(["fit", str(PUBLIC_LOGS / "xr01_h100_N1_G8_002.log"), str(PUBLIC_LOGS / "xr01_h100_N2_G8_002_003.log"),
                 "-o", str(model)]) == 0
    assert main(["ccr", "--params", "7B", "--model", str(model), "--tflops", "400", "--world", "16",
                 "--strategy", "tp+pp+dp", "--tp-degree", str(tp), "--pp-degree", str(pp), "--json", str(out),
                 "--system", "aws-p4d"]) == 0
    capsys.readouterr()
    (row,) = json.loads(out.read_text())["rows"]
    stages = next(op for op in row["ops"] if op["purpose"] == "activations (pipeline)" and
                  op["link_class"] == "inter-node")
    assert "2 flows per NIC" in stages["model"] and stages["time_per_call_s"] > 2e-3
