"""Issue 25, the search's gaps: worlds between the old ones (part of a node across nodes, node counts
between doublings), pipeline depths that are not powers of two, tp degrees that do not divide the node,
and the global batch the user trains with. On the shared 2-node H100 log, fitted as a user would."""

from __future__ import annotations

import math

import pytest
from conftest import SHARED_DATA
from shared_models import fitted

from pybench.cli.main import main
from pybench.errors import UsageError
from pybench.planning.advice import plan
from pybench.planning.config import make_ccr_config
from pybench.planning.model_set import as_model_set
from pybench.planning.records import NeedAdvice, NeedVerdict
from pybench.planning.search import pipeline_depths, tp_degrees
from pybench.planning.step import estimate_step
from pybench.planning.strategies import INTER, make_layout
from pybench.planning.transformer import shape_for_params

H100 = SHARED_DATA / "nccl-tests" / "h100_p5_2node_16gpu_efa_allreduce_srunprefix.txt"


@pytest.fixture(scope="module")
def h100n(tmp_path_factory):
    return fitted(tmp_path_factory, "h100n", [H100])  # once per session, shared with test_plan_search


def _verdict(p):
    (need,) = [a for a in p.records if isinstance(a, NeedAdvice)]
    return need.verdict


def test_a_target_between_one_and_two_nodes_takes_part_of_the_second_node(h100n):
    """1.3B trains at about 25 samples/s per device: 280 samples/s needs 12 devices, where a search over
    whole nodes beyond the first gave 16."""
    p = plan("1.3B", 2048, 1, models=h100n, flops_per_s=400e12, target_samples_per_s=280)
    r = p.recommended
    assert _verdict(p) is NeedVerdict.TARGET_MET and r.samples_per_s >= 280
    assert 8 < r.world < 16 and r.layout.nodes == 2
    assert all(x.samples_per_s < 280 for x in p.rows if x.world < r.world)  # none smaller meets it


def test_node_counts_between_the_doublings_are_searched(h100n):
    """2000 samples/s of 1.3B needs about 10 nodes: it took 16 when node counts doubled beyond 8."""
    p = plan("1.3B", 2048, 1, models=h100n, flops_per_s=400e12, target_samples_per_s=2000, max_world=256)
    r = p.recommended
    assert _verdict(p) is NeedVerdict.TARGET_MET and r.samples_per_s >= 2000
    assert r.world % 8 == 0 and 8 < r.layout.nodes < 16
    assert set(range(9, 33)) <= {w // 8 for w in p.search.worlds if w % 8 == 0}


def test_pipeline_depths_are_the_fewest_stages_for_each_largest_stage():
    # 32 layers: 12 to 15 stages hold at most 3 layers each, as 11 do; 9 and 10 hold 4, as 8 do
    assert pipeline_depths(32) == (2, 3, 4, 5, 6, 7, 8, 11, 16, 32)
    assert pipeline_depths(80) == (2, 3, 4, 5, 6, 7, 8, 9, 10, 12, 14, 16, 20, 27, 40, 80)
    for layers in (7, 32, 80, 96):
        depths = pipeline_depths(layers)
        every = {math.ceil(layers / p) for p in range(2, layers + 1)}
        assert {math.ceil(layers / p) for p in depths} == every  # each largest stage once, with its fewest


def test_a_pipeline_that_does_not_divide_the_layers_is_paced_by_its_largest_stage(h100n):
    """3 stages of 32 layers hold 11, 11 and 10: the step computes 11/32 of the model per device, not 1/3,
    and the largest stage's parameters set the memory."""
    cfg = make_ccr_config("7B", 4096, 1, 1, "ddp", flops_per_s=400e12, overlap=True)
    models = as_model_set(h100n)
    three = estimate_step(cfg, models, "pp", 3, 1, micro_batches=12)
    four = estimate_step(cfg, models, "pp", 4, 1, micro_batches=12)
    assert three.compute_s == pytest.approx(four.compute_s * 11 / 8)  # 11 layers against 8
    assert three.memory.weights_bytes == pytest.approx(2 * cfg.params * 11 / 32)
    p = plan("7B", 4096, 1, models=h100n, flops_per_s=400e12)
    assert {3, 5} <= {x.layout.pp for x in p.rows}  # priced inside the node
    assert {3, 5, 11} <= {pp for _, _, _, pp in p.search.layouts_fitting}
    assert not {9, 10, 12} & {pp for _, _, _, pp in p.search.layouts_fitting}


def test_a_tp_degree_not_dividing_the_node_runs_whole_groups_per_node_with_gpus_idle(h100n):
    """13B has 40 heads: tp 5 is a degree Megatron can run (whole heads per rank). On nodes of 8 a Megatron or
    NeMo user runs 5 ranks per node rather than let a group straddle two nodes (its per-layer all-reduce over
    the network): 3 GPUs idle per node, paid for when nodes are billed, not when devices are."""
    shape = shape_for_params(13_000_000_000)
    assert shape.heads == 40 and tp_degrees(8, shape.heads, shape.kv_heads) == (1, 2, 4, 5, 8)
    assert tp_degrees(8, 32, 8) == (1, 2, 4, 8)  # grouped-query attention: the key/value heads too
    p = plan("13B", 4096, 1, models=h100n, flops_per_s=400e12, target_samples_per_s=60)
    assert {("tp+dp", 10, 5, 1), ("tp+dp", 5 * 8, 5, 1)} <= p.search.layouts_fitting
    assert "across nodes tp 5 runs 5 ranks per node, 3 GPUs idle" in p.text()
    across = make_layout("tp+dp", 10, 8, 5)
    assert (across.gpus_per_node, across.idle_per_node, across.nodes) == (5, 3, 2)
    assert {k: across.to_dict()[k] for k in ("gpus_per_node", "ranks_per_node", "idle_per_node")} == {
        "gpus_per_node": 8, "ranks_per_node": 5, "idle_per_node": 3}
    assert make_layout("tp+dp", 12, 8, 3).nodes == 2 and make_layout("tp+dp", 5, 8, 5).idle_per_node == 0
    for world in (5, 10, 40):
        tp_op = [o for o in make_layout_ops(p, "tp+dp", world, 5) if o.purpose.startswith("activations")]
        assert tp_op[0].link_class != INTER, world  # every group inside one node
    models = as_model_set(h100n)
    by_node = estimate_step(make_ccr_config("13B", 4096, 1, 40, "tp+dp", flops_per_s=400e12, tp_degree=5,
                                            price_per_node_hour=98.0), models, "tp+dp", 40, 1)
    assert by_node.layout.nodes == 8 and by_node.cost_per_hour == 8 * 98.0  # 40 ranks at 5 a node
    by_device = estimate_step(make_ccr_config("13B", 4096, 1, 40, "tp+dp", flops_per_s=400e12, tp_degree=5,
                                              price_per_device_hour=12.0), models, "tp+dp", 40, 1)
    assert by_device.cost_per_hour == 40 * 12.0


def make_layout_ops(p, strategy, world, tp):
    from pybench.planning.strategies import Workload, comm_ops
    shape = shape_for_params(13_000_000_000)
    return comm_ops(make_layout(strategy, world, 8, tp, shape.layers), Workload(13_000_000_000, shape, 4096, 1))


def test_a_named_global_batch_is_held_by_every_layout(h100n, capsys):
    """The global batch is a training hyperparameter (Megatron's --global-batch-size): when named, every
    row trains exactly it, and the plan says so; without it the plan says the batch was free."""
    p = plan("7B", 4096, 1, models=h100n, flops_per_s=400e12, global_batch=256)
    assert p.rows and all(r.global_batch == 256 for r in p.rows)
    assert p.recommended.global_batch == 256 and p.to_dict()["search"]["global_batch"] == 256
    assert any("to the global batch of 256 sequences (global_batch" in a for a in p.advice)
    free = plan("7B", 4096, 1, models=h100n, flops_per_s=400e12)
    assert any("the global batch is free within it: give global_batch to hold yours" in a for a in free.advice)
    assert main(["plan", "--params", "7B", "--seq", "4096", "--model", h100n, "--tflops", "400",
                 "--global-batch", "96", "--target-samples-per-s", "30"]) == 0
    out = capsys.readouterr().out
    assert "to the global batch of 96 sequences (--global-batch;" in out
    assert "give --global-batch to hold yours" not in out


@pytest.mark.parametrize("value", ["0", "x", "1.5"])
def test_a_bad_global_batch_is_one_line_exit_2(h100n, capsys, value):
    assert main(["plan", "--params", "7B", "--model", h100n, "--tflops", "400", "--global-batch", value]) == 2
    err = capsys.readouterr().err.strip()
    # the flag itself (an abbreviation of --global-batch-limit before it existed)
    assert "argument --global-batch:" in err and "\n" not in err and "Traceback" not in err


@pytest.mark.parametrize("value", [0, "64", 2.5, float("inf")])
def test_a_bad_global_batch_in_python_is_a_usage_error(h100n, value):
    with pytest.raises(UsageError, match="global_batch"):
        plan("7B", 4096, 1, models=h100n, flops_per_s=400e12, global_batch=value)


def test_a_pipeline_pick_is_compared_with_the_users_batch_at_the_default_micro_batch_count(h100n):
    """The batch the plan adopted is set beside the user's micro-batch at its default count (4 x stages
    with a pipeline), not at one micro-batch per step, where a pipeline idles (p - 1) / p of it."""
    from pybench.planning.records import BatchAdvice, BatchVerdict
    p = plan("70B", 4096, 1, models=h100n, flops_per_s=400e12)
    r = p.recommended
    assert r.layout.pp > 1 and r.global_batch > r.layout.dp * 4 * r.layout.pp
    (said,) = [a for a in p.records if isinstance(a, BatchAdvice)]
    assert said.verdict is BatchVerdict.ADOPTED and said.row.micro_batches == 4 * r.layout.pp
    assert said.row.samples_per_s > 0.8 * r.samples_per_s  # a fair comparison, not a pipeline left idle
    assert "the global batch grows with it" in p.text()


def test_a_global_batch_below_one_replicas_micro_batch_is_refused(h100n, capsys):
    """`plan --global-batch 1 --batch 4` answered: its memory verdict at micro-batch 4, its advice at 1."""
    assert main(["plan", "--params", "1.3B", "--model", h100n, "--tflops", "300", "--global-batch", "1",
                 "--batch", "4"]) == 2
    err = capsys.readouterr().err.strip()
    assert err == ("pybench: error: --global-batch 1 is smaller than --batch 4, one replica's micro-batch: no split "
                   "of the global batch gives it; give --global-batch 4 or more, or a smaller batch")
