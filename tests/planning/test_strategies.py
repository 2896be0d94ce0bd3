"""Bytes per rank, link classes, layouts and memory for a small known config,
against numbers computed by hand."""

import pytest

from pybench.errors import UsageError
from pybench.planning.strategies import (
    INTER,
    INTRA,
    Workload,
    bubble_fraction,
    canonical_strategy,
    comm_ops,
    make_layout,
    memory_per_device,
)
from pybench.planning.transformer import TransformerShape

# hidden 8, 2 layers, 2 heads, ffn 32; P = 1000 params, seq 4, micro-batch 2, bf16 (2 B):
# gradients P b = 2000 B; activations b s h x 2 B = 2 * 4 * 8 * 2 = 128 B.
SHAPE = TransformerShape("small", 8, 2, 2, 32, 10)
WORK = Workload(params=1000, shape=SHAPE, seq=4, batch=2, micro_batches=1, comm_bytes_per_value=2)


def ops_for(strategy, world, gpus_per_node=2, work=WORK, tp_degree=None):
    return comm_ops(make_layout(strategy, world, gpus_per_node, tp_degree, SHAPE.layers), work)


def summary(ops):
    return [(o.collective, o.size_bytes, o.calls, o.group_size, o.link_class, o.overlaps_backward) for o in ops]


def test_ddp_bytes_and_link():
    assert summary(ops_for("ddp", 4)) == [("allreduce", 2000, 1, 4, INTER, True)]
    assert summary(ops_for("ddp", 2)) == [("allreduce", 2000, 1, 2, INTRA, True)]
    (op,) = ops_for("ddp", 4)
    assert op.wire_bytes_per_step == 2000 * 2 * 3 / 4  # ring all-reduce sends 2(n-1)/n of the buffer
    assert ops_for("ddp", 1) == ()


def test_zero_bytes():
    assert summary(ops_for("zero1", 4)) == [("reducescatter", 2000, 1, 4, INTER, True),
                                           ("allgather", 2000, 1, 4, INTER, False)]
    assert summary(ops_for("zero2", 4)) == summary(ops_for("zero1", 4))
    z3 = ops_for("fsdp", 4)
    assert summary(z3) == [("allgather", 2000, 1, 4, INTER, False), ("allgather", 2000, 1, 4, INTER, False),
                           ("reducescatter", 2000, 1, 4, INTER, True)]
    assert sum(o.bytes_per_step for o in z3) == 6000
    # the textbook figure: ZeRO-3 / FSDP moves 1.5x the bytes of data parallel on the wire
    ddp_wire = sum(o.wire_bytes_per_step for o in ops_for("ddp", 4))
    assert sum(o.wire_bytes_per_step for o in z3) == pytest.approx(1.5 * ddp_wire)
    assert sum(o.wire_bytes_per_step for o in ops_for("zero1", 4)) == pytest.approx(ddp_wire)


def test_tp_bytes():
    # four all-reduces per layer per micro-batch: 4 x 2 layers = 8 calls of 128 B
    assert summary(ops_for("tp", 2)) == [("allreduce", 128, 8, 2, INTRA, False)]
    work3 = Workload(1000, SHAPE, 4, 2, micro_batches=3)
    assert ops_for("tp", 2, work=work3)[0].calls == 24


def test_pp_bytes_and_link():
    assert summary(ops_for("pp", 2)) == [("sendrecv", 128, 2, 2, INTRA, False)]
    work4 = Workload(1000, SHAPE, 4, 2, micro_batches=4)
    assert summary(ops_for("pp", 2, gpus_per_node=1, work=work4)) == [("sendrecv", 128, 8, 2, INTER, False)]


def test_tp_dp_bytes():
    ops = ops_for("tp+dp", 4)
    assert summary(ops) == [("allreduce", 128, 8, 2, INTRA, False), ("allreduce", 1000, 1, 2, INTER, True)]
    # one node: dp = 1, only the tensor-parallel traffic
    assert summary(ops_for("tp+dp", 2)) == [("allreduce", 128, 8, 2, INTRA, False)]
    # tp degree 1 inside 2-GPU nodes: dp group of 4 spans nodes
    assert summary(ops_for("tp+dp", 4, tp_degree=1)) == [("allreduce", 2000, 1, 4, INTER, True)]


def test_layouts():
    lay = make_layout("tp+dp", 16, 8)
    assert (lay.dp, lay.tp, lay.pp, lay.nodes) == (2, 8, 1, 2)
    assert str(lay) == "dp2xtp8xpp1"
    assert make_layout("pp", 4, 8).pp == 4
    assert make_layout("ddp", 12, 8).nodes == 2


@pytest.mark.parametrize("args, match", [
    (("tp", 16, 8), "inside one node"),
    (("tp+dp", 12, 8), "multiple of the tensor-parallel degree 8"),
    (("tp+dp", 16, 8, 3), "multiple of the tensor-parallel degree 3"),
    (("tp+dp", 16, 8, 16), "must lie in 1-8"),
    (("pp", 4, 8, None, 2), "layers"),
    (("ddp", 0, 8), "at least 1"),
    (("ddp", 8, 0), "gpus_per_node"),
    (("mystery", 8, 8), "unknown strategy"),
])
def test_bad_layouts(args, match):
    with pytest.raises(UsageError, match=match):
        make_layout(*args)


def test_canonical_strategy():
    assert canonical_strategy("FSDP") == "zero3"
    assert canonical_strategy("dp+tp") == "tp+dp"
    assert canonical_strategy("zero_2") == "zero2"


def test_workload_rejects_zero_batch():
    with pytest.raises(UsageError, match="batch"):
        Workload(1000, SHAPE, 4, 0)
    with pytest.raises(UsageError):
        Workload(1000, SHAPE, 0, 1)


def test_bubble_formula():
    assert bubble_fraction(1, 1) == 0.0
    assert bubble_fraction(4, 8) == 3 / 11
    assert bubble_fraction(8, 1) == 7 / 8
    with pytest.raises(UsageError):
        bubble_fraction(0, 4)


def test_memory_accounting_by_strategy():
    dev = 1e6

    def mem(strategy, world, **kw):
        return memory_per_device(make_layout(strategy, world, 4, None, 2), WORK, dev, **kw)

    m = mem("ddp", 4)
    assert (m.weights_bytes, m.grads_bytes, m.optimizer_bytes) == (2000, 2000, 12000)
    # activations, flash attention: s b h x 34 per layer = 64 x 34, two layers
    assert m.activations_bytes == 2 * 64 * 34
    # checkpointed: layer inputs 2 s b h per layer + one layer recomputed in full
    assert m.activations_checkpointed_bytes == 2 * 2 * 64 + 64 * 34
    assert m.total_bytes == 16000 + 4352
    z1, z2, z3 = mem("zero1", 4), mem("zero2", 4), mem("zero3", 4)
    assert (z1.weights_bytes, z1.grads_bytes, z1.optimizer_bytes) == (2000, 2000, 3000)
    assert (z2.weights_bytes, z2.grads_bytes, z2.optimizer_bytes) == (2000, 500, 3000)
    assert (z3.weights_bytes, z3.grads_bytes, z3.optimizer_bytes) == (500, 500, 3000)
    tp = mem("tp", 2)
    assert tp.states_bytes == 8000
    assert tp.activations_bytes == 2 * 64 * (10 + 24 / 2)
    # without flash attention: + 5 a s / h = 5 x 2 x 4 / 8 = 5 per s b h
    assert mem("ddp", 4, flash_attention=False).activations_bytes == 2 * 64 * 39


def test_memory_pp_in_flight_and_fit_status():
    work = Workload(1000, SHAPE, 4, 2, micro_batches=8)
    pp = memory_per_device(make_layout("pp", 2, 4, None, 2), work, 1e6)
    assert pp.states_bytes == 8000
    assert pp.activations_bytes == 64 * 34 * 1 * 2  # one layer per stage, 2 micro-batches in flight
    lay = make_layout("ddp", 4, 4)
    assert memory_per_device(lay, WORK, 30000).fits == "fits"
    # 80% usable (MEMORY_HEADROOM): 20352 B > 19000 B >= 18432 B checkpointed
    assert memory_per_device(lay, WORK, 23750).fits == "fits with checkpointing"
    assert memory_per_device(lay, WORK, 23750, headroom=1.0).fits == "fits"
    assert memory_per_device(lay, WORK, 10000).fits == "does not fit"
    assert "does not fit" in repr(memory_per_device(lay, WORK, 10000))


def test_3d_bytes_layout_and_memory():
    lay = make_layout("3d", 8, 2, None, 2, pp_degree=2)
    assert (lay.strategy, lay.dp, lay.tp, lay.pp) == ("tp+pp+dp", 2, 2, 2)
    ops = comm_ops(lay, WORK)
    # TP: 4 all-reduces x 1 layer per stage; PP: stages are 2 ranks apart -> cross 2-GPU nodes;
    # DP: P b / (tp pp) = 500 B over 2 replicas on different nodes
    assert summary(ops) == [("allreduce", 128, 4, 2, INTRA, False), ("sendrecv", 128, 2, 2, INTER, False),
                            ("allreduce", 500, 1, 2, INTER, True)]
    mem = memory_per_device(lay, WORK, 1e6)
    assert mem.states_bytes == 16000 / 4
    assert mem.activations_bytes == 64 * (10 + 12) * 1 * 1  # 1 layer per stage, 1 micro-batch in flight
    with pytest.raises(UsageError, match="tp x pp"):
        make_layout("tp+pp+dp", 6, 2, None, 2, pp_degree=2)
    with pytest.raises(UsageError, match="layers"):
        make_layout("tp+pp+dp", 8, 2, None, 2, pp_degree=4)
