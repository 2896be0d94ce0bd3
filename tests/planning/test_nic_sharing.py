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
