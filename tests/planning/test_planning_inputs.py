"""ccr and plan on a hostile tester's input: a parameter count below any shape the planner derives, a
count whose gradients no model prices, a degree no strategy given reads, and plan text that must say
what its own figures say.

The model is the shared 2 x 8 H100 all-reduce log fitted as the README fits it (16 ranks on 2 nodes).
"""

from __future__ import annotations

from dataclasses import replace

import pytest
from conftest import SHARED_DATA, fitted_model_file, refused_in_one_line

import pybench
from pybench.cli.main import main
from pybench.errors import UsageError
from pybench.planning.plan_result import advice_sentence
from pybench.planning.records import NeedAdvice, NeedVerdict, ScaleUpAdvice, ScaleUpVerdict

H100_LOG = SHARED_DATA / "nccl-tests" / "h100_p5_2node_16gpu_efa_allreduce_srunprefix.txt"


@pytest.fixture(scope="module")
def h100(tmp_path_factory):
    if not H100_LOG.exists():
        pytest.skip(f"shared log not found: {H100_LOG}")
    return str(fitted_model_file(tmp_path_factory, H100_LOG, "--nodes", "2"))


_refused = refused_in_one_line


def _out(capsys, argv):
    capsys.readouterr()
    assert main(argv) == 0
    return capsys.readouterr().out


# --- 1: a count below the smallest derived shape ----------------------------------------------------------

@pytest.mark.parametrize("command", ["plan", "ccr"])
@pytest.mark.parametrize("params", ["1", "500", "6.6M"])
def test_a_count_below_the_smallest_derived_shape_is_refused_naming_the_smallest(h100, capsys, command, params):
    # --params 1 was priced as 1 parameter of compute beside a 6.63M-parameter shape's activations
    err = _refused(capsys, [command, "--params", params, "--model", h100, "--tflops", "400"])
    assert f"--params {params} is below the smallest model the planner derives a shape for, 6.63M" in err
    assert "give at least 6.63M, or give the shape itself: --hidden H and --layers L" in err
    with pytest.raises(UsageError, match="below the smallest model"):
        pybench.plan(params, 2048, models=h100, flops_per_s=4e14)


def test_the_smallest_derived_shape_itself_and_a_shape_given_are_priced(h100, capsys):
    head = _out(capsys, ["ccr", "--params", "6.63M", "--model", h100, "--tflops", "400"]).splitlines()[0]
    assert "6.63M params as given" in head and "hidden=128 layers=1" in head
    assert "custom" in _out(capsys, ["ccr", "--hidden", "128", "--layers", "1", "--model", h100, "--tflops", "400"])


def test_the_profilers_small_models_are_still_priced_by_the_python_ccr(h100):
    # pybench.profile prices the gradients of its own small models (300K parameters, seq 1) through pybench.ccr
    # with no shape: only ccr and plan's commands and pybench.plan refuse a count no derived shape holds
    (row,) = pybench.ccr(300_000, 1, 8, 2, "ddp", models=h100, flops_per_s=4e14, gpus_per_node=2).rows
    assert row.ops[0].op.size_bytes == 600_000


def test_filling_a_node_that_trains_no_faster_than_one_device_is_not_advised(h100):
    # 7M parameters at 16 tokens a sample: the gradient all-reduce dwarfs the compute, and 8 devices train
    # fewer samples/s than one (eff vs 1 device 0.01); "scale up first" was said there all the same
    p = pybench.plan("7M", 16, models=h100, flops_per_s=4e14)
    (up,) = [a for a in p.records if isinstance(a, ScaleUpAdvice)]
    assert up.node.efficiency_vs_device * up.node.world <= 1 and up.verdict is ScaleUpVerdict.NO_GAIN
    said = advice_sentence(up)
    assert said.startswith("do not scale up with DDP: one node (8 devices") and "no more than one device" in said
    assert not any(a.startswith(("scale up first", "then scale out")) for a in p.advice)
    # where the node does train faster, the advice stands
    p = pybench.plan("1.3B", 2048, models=h100, flops_per_s=4e14)
    (up,) = [a for a in p.records if isinstance(a, ScaleUpAdvice)]
    assert up.verdict is ScaleUpVerdict.FILL and advice_sentence(up).startswith("scale up first: fill one node")
    # one device per node has no node to fill: nothing is said of it (it said "do not scale up ... the gradient
    # all-reduce costs more" at CCR 0.00, where one device exchanges nothing)
    p = pybench.plan("125M", 2048, models=h100, flops_per_s=4e14, gpus_per_node=1, max_world=4)
    assert not [a for a in p.records if isinstance(a, ScaleUpAdvice)]


# --- 2: gradients over what a fitted sweep prices, at any world -------------------------------------------

@pytest.mark.parametrize("world", [[], ["--world", "8"], ["--world", "8,16"]])
def test_a_count_whose_gradients_no_sweep_prices_is_refused_at_every_world(h100, capsys, world):
    err = _refused(capsys, ["ccr", "--params", "1e15", "--model", h100, "--tflops", "400", *world])
    assert "--params is too large: its gradients make a bucket of 2e+15 bytes (allreduce), over the 16 TiB" in err


def test_a_width_of_64_wide_heads_splits_where_they_do(h100, capsys):
    """GPT-2 XL's width, 1600: 25 heads of 64 by default (it took 1 head, and refused every degree above 1)."""
    args = ["ccr", "--hidden", "1600", "--layers", "48", "--model", h100, "--tflops", "400", "--strategy", "tp+dp"]
    assert "does not divide the model's 25 attention heads" in _refused(capsys, [*args, "--tp-degree", "2",
                                                                                 "--world", "16"])
    assert main([*args, "--tp-degree", "5", "--world", "10", "--gpus-per-node", "5"]) == 0



def test_a_group_inside_one_node_priced_by_the_crossing_carries_none_of_its_layout_notes(h100):
    """7 ranks on one node, priced with the 2-node fit as an upper bound, said "7 ranks on 2 nodes as 8"; the rows
    across nodes keep theirs."""
    res = pybench.ccr("7B", 4096, 1, "7,29", "ddp", models=h100, flops_per_s=4e14)
    assert not any("7 ranks on 2 nodes" in n for n in res.notes)
    assert any("(29 ranks on 4 nodes as 32)" in n for n in res.notes)
    assert any("intra-node links priced with the inter-node model, an upper bound" in n for n in res.notes)

# --- 3: a degree the strategies given do not read ---------------------------------------------------------

@pytest.mark.parametrize("args,said", [
    (["--strategy", "pp", "--pp-degree", "64", "--world", "16"], "--pp-degree 64 is used only by tp+pp+dp"),
    (["--strategy", "pp", "--pp-degree", "5", "--world", "16"], "--pp-degree 5 is used only by tp+pp+dp"),
    (["--strategy", "ddp", "--tp-degree", "4"], "--tp-degree 4 is used only by tp+dp and tp+pp+dp"),
    (["--strategy", "tp", "--tp-degree", "4"], "--tp-degree 4 is used only by tp+dp and tp+pp+dp"),
    (["--strategy", "zero3", "--tp-degree", "2", "--pp-degree", "2"], "--tp-degree 2 is used only by"),
    (["--strategy", "tp+dp", "--pp-degree", "2", "--world", "16"], "--pp-degree 2 is used only by tp+pp+dp"),
    # a strategy that reads it: past the world, or not dividing it
    (["--strategy", "tp+pp+dp", "--pp-degree", "64", "--world", "16"],
     "tp+pp+dp on 16 ranks: world must be a multiple of tp x pp = 8 x 64 = 512"),
    (["--strategy", "tp+pp+dp", "--pp-degree", "5", "--world", "16"], "world must be a multiple of tp x pp = 8 x 5"),
    (["--strategy", "tp+dp", "--tp-degree", "16", "--world", "16"], "tensor-parallel degree 16 must lie in 1-8"),
    (["--strategy", "tp+dp", "--tp-degree", "3", "--world", "16"], "multiple of the tensor-parallel degree 3"),
    # a degree that splits a head: plan searches none such, and ccr priced them (tp 3 of 32 heads)
    (["--strategy", "tp+dp", "--tp-degree", "3", "--world", "6", "--gpus-per-node", "6"],
     "tensor-parallel degree 3 does not divide the model's 32 attention heads and 32 key/value heads"),
    (["--strategy", "tp", "--world", "5", "--gpus-per-node", "5"], "use a degree among 1, 2, 4, 8, 16, 32"),
    (["--strategy", "tp+pp+dp", "--tp-degree", "3", "--pp-degree", "2", "--world", "6", "--gpus-per-node", "6"],
     "tensor-parallel degree 3 does not divide"),
])
def test_a_degree_no_strategy_given_reads_or_the_world_cannot_hold_is_refused(h100, capsys, args, said):
    err = _refused(capsys, ["ccr", "--params", "7B", "--model", h100, "--tflops", "400", *args])
    assert said in err
    if "is used only by" in said:
        assert "add tp+" in err and "to the strategies, or leave --" in err and "-degree out" in err


def test_a_degree_is_read_where_one_strategy_of_several_uses_it_and_plan_searches_its_own(h100, capsys):
    res = pybench.ccr("7B", 2048, 1, 16, "ddp,tp+dp", models=h100, flops_per_s=4e14, tp_degree=4)
    assert {(r.strategy, r.layout.tp) for r in res.rows} == {("ddp", 1), ("tp+dp", 4)}
    with pytest.raises(UsageError, match="^pp_degree 3 is used only by tp\\+pp\\+dp"):
        pybench.ccr("7B", 2048, 1, 16, "pp", models=h100, flops_per_s=4e14, pp_degree=3)
    # plan searches every degree: it takes none, in one line as any unknown flag
    for flag in ("--tp-degree", "--pp-degree"):
        assert f"unrecognized arguments: {flag} 4" in _refused(
            capsys, ["plan", "--params", "7B", "--model", h100, "--tflops", "400", flag, "4"])


# --- 4: plan text that says what its figures say ----------------------------------------------------------

def _need(p):
    return next(a for a in p.records if isinstance(a, NeedAdvice))


def test_the_memory_choice_says_the_figure_it_calls_not_comm_bound(h100):
    # zero1 on 7 devices: CCR 0.37 (comm-bound), exposed 0.11 (fits); "not comm-bound" meant the exposed share
    p = pybench.plan("7B", 2048, models=h100, flops_per_s=4e14, global_batch=7, max_world=16)
    need, r = _need(p), p.recommended
    assert need.verdict is NeedVerdict.MEMORY and r is not None and r.band == "comm-bound" and r.overlap
    said = advice_sentence(need)
    assert ("among the layouts that fit and are not comm-bound by the communication they leave exposed after "
            "overlap with backward, the cheapest per sample is zero1 on 7 devices") in said
    assert f"exposed {r.exposed_fraction:.2f} ({r.band_exposed}); its CCR {r.ccr:.2f} (comm-bound) also counts" in said
    # without overlap the band is the CCR's, and it says so
    p = pybench.plan("7B", 2048, models=h100, flops_per_s=4e14, global_batch=7, max_world=16, overlap=False)
    assert "not comm-bound by their CCR (no overlap)" in advice_sentence(_need(p))
    # a pick that is comm-bound (nothing that fits is not) is not called "not comm-bound"
    worse = replace(r, exposed_s=10 * r.compute_s)
    said = advice_sentence(replace(need, row=worse))
    assert "every layout that fits is comm-bound by the communication they leave exposed" in said
    assert "not comm-bound" not in said


@pytest.mark.parametrize("args,said", [
    (["--max-world", "12"], "every device count up to 12 (at most 1 node of 8 and 4 devices of one more; counts "
                            "that are not a multiple of 8 use part of a node) (--max-world)"),
    (["--max-world", "64"], "every device count up to 64 (at most 8 nodes of 8; counts that are not a multiple of 8 "
                            "use part of a node) (--max-world)"),
    (["--system", "aws-p5", "--gpus-per-node", "3"],
     "every device count up to 24 (at most 8 nodes of 3; counts that are not a multiple of 3 use part of a node), "
     "then every whole-node count up to 21 nodes of 3 (63 devices) (the default"),
    (["--max-world", "1000"], "then whole nodes of 8 (every count up to 32 nodes, then doubling: node counts between "
                              "the doublings are not searched) up to 64 nodes (512 devices) (--max-world)"),
])
def test_the_search_bounds_say_the_nodes_they_span(h100, capsys, args, said):
    out = _out(capsys, ["plan", "--params", "7B", "--model", h100, "--tflops", "400", *args])
    assert said in out


def test_the_part_full_note_names_the_layouts_priced(h100, capsys):
    out = _out(capsys, ["ccr", "--params", "7B", "--model", h100, "--tflops", "400", "--gpus-per-node", "3",
                        "--world", "16"])
    notes = [x for x in out.splitlines() if "even layout" in x]
    assert notes == ["note: allreduce across nodes: ranks that do not fill their nodes evenly are priced as the even "
                     "layout on those nodes that holds them (16 ranks on 6 nodes as 18): the busiest node's NICs "
                     "carry as much"]
    # one note per collective: the first three layouts named, then that there are others
    res = pybench.ccr("7B", 2048, 1, "9,11,13,16,29", "ddp", models=h100, flops_per_s=4e14)
    (note,) = [n for n in res.notes if "even layout" in n]
    assert "(9 ranks on 2 nodes as 10; 11 ranks on 2 nodes as 12; 13 ranks on 2 nodes as 14; and others)" in note
    res = pybench.ccr("7B", 2048, 1, "29,32", "ddp", models=h100, flops_per_s=4e14)
    assert any("(29 ranks on 4 nodes as 32)" in n for n in res.notes)
