"""Issue 25: the plan weighs every layout within stated bounds and picks the one the rules pick,
honours every input (a preset it cannot use, a slow loader, prices per device, the comm dtype) and
says the wait for stragglers apart. One test per case of the issue, on the real shared logs."""

from __future__ import annotations

import json
import math
import re
from dataclasses import replace

import pytest
from conftest import SHARED_DATA
from shared_models import fitted

from pybench.cli.main import main
from pybench.errors import UsageError
from pybench.planning.advice import plan
from pybench.planning.bands import Band
from pybench.planning.config import make_ccr_config
from pybench.planning.grid import ccr
from pybench.planning.model_set import as_model_set
from pybench.planning.records import (
    BatchAdvice,
    BatchVerdict,
    NeedAdvice,
    NeedVerdict,
    OneDevice,
    ScalingAdvice,
)
from pybench.planning.search import CachedModels, SearchBounds, batch_sizes, search_layouts, world_sizes
from pybench.planning.step import estimate_step
from pybench.planning.strategies import MemoryFit, Workload, make_layout, memory_per_device
from pybench.planning.transformer import shape_for_params

LOGS = SHARED_DATA / "nccl-tests"
H100 = LOGS / "h100_p5_2node_16gpu_efa_allreduce_srunprefix.txt"
A100 = LOGS / "a100_2node_16gpu_oci_roce_allreduce.txt"
A100_NODE = [SHARED_DATA / "vtrain" / f"a100_nvswitch_allreduce_{n}gpu.csv" for n in (2, 8)]


def _fit(tmp_path_factory, name, logs):
    return fitted(tmp_path_factory, name, logs)  # once per session, shared with test_plan_from_one_log


@pytest.fixture(scope="module")
def h100n(tmp_path_factory):
    """The issue's h100n.json: the shared 2-node H100 all-reduce log, fitted as a user would."""
    return _fit(tmp_path_factory, "h100n", [H100])


@pytest.fixture(scope="module")
def a100n(tmp_path_factory):
    return _fit(tmp_path_factory, "a100n", [A100])


@pytest.fixture(scope="module")
def a100_node(tmp_path_factory):
    return _fit(tmp_path_factory, "a100_node", A100_NODE)


def _need(p) -> NeedAdvice:
    (need,) = [a for a in p.records if isinstance(a, NeedAdvice)]
    return need


def _search(p):
    (s,) = [a for a in p.records if a.rule == "search"]
    return s


# The rules' measure, written out here: price per hour (devices when unpriced) over samples per hour.
COST_TOLERANCE = 0.01


def cost_per_sample(r, loader=None):
    return (r.cost_per_hour if r.cost_per_hour is not None else r.world) / (3600 * r.samples_per_s)


def good(r):
    return r.decisive_band is not Band.COMM_BOUND and r.memory.fits_at_all


# --- 1. every strategy weighed -------------------------------------------------------------------------

def test_zero12_and_tp_pp_layouts_are_weighed_and_the_cheapest_meeting_the_target_wins(h100n):
    """7B, target 66.3: it recommended ZeRO-3 on 64 devices (124.6 samples/s) while ZeRO-1/2 on 32
    reach the target at a fraction of the exposed communication."""
    p = plan("7B", 4096, 1, models=h100n, flops_per_s=400e12, target_samples_per_s=66.3)
    kinds = {(r.strategy, r.layout.tp, r.layout.pp) for r in p.rows}
    assert {("zero1", 1, 1), ("zero2", 1, 1), ("zero3", 1, 1)} <= kinds
    assert any(s == "tp+pp+dp" and tp < 8 for s, tp, _ in kinds)  # tp x pp x dp below tp=8 too
    assert any(r.strategy == "tp+dp" and r.world == 4 and r.layout.tp == 2 for r in p.rows)  # on part of a node
    assert any(s == "pp" for s, _, _ in kinds) and {r.batch for r in p.rows} >= {1, 2, 4}
    r = p.recommended
    assert r.samples_per_s >= 66.3 and good(r) and r.world <= 32
    meeting = [x for x in p.rows if x.samples_per_s >= 66.3 and good(x)]
    assert cost_per_sample(r, None) <= min(cost_per_sample(x, None) for x in meeting) * (1 + COST_TOLERANCE)
    assert _need(p).verdict is NeedVerdict.TARGET_MET


def test_without_a_target_the_a100_plan_takes_the_cheapest_layout_per_sample_not_the_fewest_devices(a100n):
    """With the A100 2-node log it picked ZeRO-3 on 2 devices although ZeRO-1/2 on 4 train cheaper per sample."""
    p = plan("7B", 2048, 1, models=a100n, flops_per_s=150e12)
    assert p.verdict is OneDevice.DOES_NOT_FIT
    z3_on_2 = [x for x in p.rows if x.strategy == "zero3" and x.world == 2 and x.batch == 1]
    assert z3_on_2 and p.recommended != z3_on_2[0]
    assert cost_per_sample(p.recommended, None) < cost_per_sample(z3_on_2[0], None)
    assert _need(p).verdict is NeedVerdict.MEMORY and p.recommended.layout.nodes == 1


def test_the_search_states_its_bounds(h100n):
    p = plan("7B", 4096, 1, models=h100n, flops_per_s=400e12, max_world=128, max_batch=8)
    s = _search(p)
    # every device count up to 8 nodes (part of a node too), then every node count up to 32 nodes
    assert s.bounds.worlds == tuple(range(1, 65)) + (72, 80, 88, 96, 104, 112, 120, 128)
    assert s.bounds.batches == (1, 2, 4, 8) and s.bounds.tp_degrees == (1, 2, 4, 8)
    assert s.bounds.pipeline_depths == (2, 3, 4, 5, 6, 7, 8, 11, 16, 32)  # 32 layers
    assert s.bounds.rows_priced == len(p.rows) < s.bounds.rows_fitting < s.bounds.layouts_tried
    assert s.bounds.rows_priced + s.bounds.rows_left_out == s.bounds.rows_fitting
    said = [a for a in p.advice if a.startswith("searched every layout")]
    assert said and "every device count up to 64 (at most 8 nodes of 8; counts that are not a multiple of 8 use " \
                    "part of a node), then every whole-node count up to 16 nodes of 8 (128 devices) (max_world)" \
                    in said[0]
    assert "tp degrees 1, 2, 4, 8: those dividing the heads; pipeline depths 2, 3, 4, 5, 6, 7, 8, 11, 16, 32" in said[0]
    assert "micro-batch 1-8 (max_batch) with gradient accumulation to every global batch within 1024" in said[0]
    assert f"{s.bounds.rows_priced} priced; the {s.bounds.rows_left_out} others cannot be chosen" in said[0]
    doc = p.to_dict()["search"]  # the same bounds in the JSON
    assert doc["worlds"] == list(s.bounds.worlds) and doc["every_node_count_up_to"] == 32
    assert doc["every_device_count_up_to_nodes"] == 8 and doc["pipeline_depths"][:3] == [2, 3, 4]
    assert "micro-batches" in doc["accumulation"] and doc["global_batch_limit"] == 1024
    assert doc["global_batch"] is None and doc["rows_left_out"] == s.bounds.rows_left_out


def test_gradient_accumulation_is_searched_and_wins_where_it_avoids_checkpointing(h100n):
    """7B at 4096: micro-batch 1 fits ZeRO-1 on 32 devices only with checkpointing at 8/6 the compute
    unless the step accumulates; the search weighs micro-batch x micro-batches, and the pick needs none."""
    p = plan("7B", 4096, 1, models=h100n, flops_per_s=400e12, target_samples_per_s=66.3)
    r = p.recommended
    assert r.layout.pp == 1 and r.micro_batches > 1 and r.memory.fits is MemoryFit.FITS and not r.recomputed
    assert r.global_batch == r.batch * r.micro_batches * r.layout.dp <= 1024
    # without accumulation (one micro-batch per step) the same strategy meets the target only dearer
    cfg = make_ccr_config("7B", 4096, 1, 1, "ddp", flops_per_s=400e12, overlap=True)
    models = as_model_set(h100n)
    single = [x for w in range(r.world, 65) for b in (1, 2)
              for x in [estimate_step(cfg, models, r.strategy, w, b, micro_batches=1)]
              if x.memory.fits_at_all and x.samples_per_s >= 66.3 and good(x)]
    assert single and cost_per_sample(r) < min(cost_per_sample(x) for x in single)
    assert f"micro-batch {r.batch} x {r.micro_batches} micro-batches" in p.text()


def test_the_splits_left_out_are_never_better_than_those_priced(h100n):
    """The search prices only the micro-batch x micro-batches splits that can win; pricing every split of
    a few layouts by brute force finds none cheaper per sample, faster or less comm-bound."""
    limit = 64
    cfg = make_ccr_config("7B", 4096, 1, 1, "ddp", flops_per_s=400e12, overlap=True)
    models = as_model_set(h100n)
    bounds = SearchBounds(32, "max_world", world_sizes(8, 32), batch_sizes(1, 8), limit, ("ddp",))
    p = search_layouts(cfg, CachedModels(models), bounds, 1, prune=False)
    for strategy, world, tp, pp in [("zero2", 6, None, None), ("zero1", 32, None, None), ("zero3", 8, None, None),
                                    ("tp+dp", 16, 4, None), ("tp+pp+dp", 16, 2, 2), ("pp", 4, None, None)]:
        layout = make_layout(strategy, world, 8, tp, cfg.shape.layers, pp)
        priced = [r for r in p.rows if r.layout == layout]
        every = []
        for b in (1, 2, 4, 8):
            m = 1
            while b * m * layout.dp <= limit:
                c = replace(cfg, tp_degree=tp, pp_degree=pp, micro_batches=m)
                row = estimate_step(c, models, strategy, world, b)
                if row.memory.fits_at_all:
                    every.append(row)
                m *= 2
        assert priced and every, (strategy, world)
        assert min(map(cost_per_sample, priced)) <= min(map(cost_per_sample, every)) * (1 + 1e-9), layout
        assert max(r.samples_per_s for r in priced) >= max(r.samples_per_s for r in every) * (1 - 1e-9), layout
        assert min(r.comm_fraction for r in priced) <= min(r.comm_fraction for r in every) + 1e-12, layout


def test_partial_nodes_are_searched_so_a_target_takes_no_more_devices_than_it_needs(h100n):
    """1.3B trains at about 25 samples/s per device: 120 samples/s needs 5 devices, not the 8 a search
    over powers of two would give; tp x dp on part of a node and on three nodes is weighed too."""
    p = plan("1.3B", 2048, 1, models=h100n, flops_per_s=400e12, target_samples_per_s=120, max_world=24)
    r = p.recommended
    assert r.world == 5 and r.samples_per_s >= 120 and _need(p).verdict is NeedVerdict.TARGET_MET
    weighed = p.search.layouts_fitting  # (strategy, world, tp, pp)
    assert {("tp+dp", 6, 2, 1), ("tp+dp", 24, 8, 1), ("ddp", 24, 1, 1), ("zero3", 7, 1, 1)} <= weighed
    assert make_layout("tp+dp", 12, 8, 4).dp == 3  # in ccr too: tp groups of 4 never straddle a node of 8


def test_the_plan_searches_micro_batch_counts_and_names_no_flag_it_lacks(h100n, capsys):
    """The pipeline note told plan users to set --micro-batches, which plan does not have."""
    args = ["plan", "--params", "7B", "--seq", "4096", "--model", h100n, "--tflops", "400", "--max-world", "16"]
    assert main(args) == 0
    out = capsys.readouterr().out
    assert "micro-batches per step searched" in out and "--micro-batches" not in out
    assert main([*args, "--micro-batches", "4"]) == 2  # not an option of plan: one line, exit 2
    assert len(capsys.readouterr().err.strip().splitlines()) == 1


# --- 2. a preset that cannot apply ---------------------------------------------------------------------

def test_a_preset_the_model_file_already_covers_is_one_stderr_line_and_a_json_note(a100n, tmp_path, capsys):
    out = tmp_path / "plan.json"
    args = ["plan", "--params", "1.3B", "--model", a100n, "--tflops", "250", "--link", "eth-25g",
            "--max-world", "16", "--json", str(out)]
    assert main(args) == 0
    err = [line for line in capsys.readouterr().err.splitlines() if "eth-25g" in line]
    assert len(err) == 1 and err[0].startswith("warning: link preset eth-25g is not used") and "inter-node" in err[0]
    doc = json.loads(out.read_text())
    assert any("eth-25g is not used" in n for n in doc["notes"]) and doc["warnings"]
    res = ccr("1.3B", 2048, 1, "8,16", "ddp", models=a100n, flops_per_s=250e12, links=["eth-25g"])
    assert any("eth-25g is not used" in w for w in res.warnings)
    applied = ccr("1.3B", 2048, 1, "8,16", "ddp", models=a100n, flops_per_s=250e12, links=["nvlink3"])
    assert not any("is not used" in w for w in applied.warnings)  # the file has no intra-node model: it applies


# --- 3. a loader-bound plan ----------------------------------------------------------------------------

def test_a_loader_bound_plan_recommends_no_scale_out_and_names_the_unmet_target(h100n):
    p = plan("125M", 2048, 1, models=h100n, flops_per_s=400e12, loader_samples_per_s=100,
             target_samples_per_s=2000)
    assert p.recommended.layout.nodes == 1
    need = _need(p)
    assert need.verdict is NeedVerdict.DEVICE_NOT_WELL_USED and not need.target_met
    said = [a for a in p.advice if a.startswith("no scale-out until one device is well used")]
    assert said and "target of 2000 samples/s is not met" in said[0] and "fix the input pipeline" in said[0]
    assert "800.00 with this data loader" in said[0]
    assert not any("max_world bounded" in n for n in p.notes)  # the loader bounds it, not the search


# --- 4. money -----------------------------------------------------------------------------------------

def test_prices_per_device_bill_the_devices_a_layout_uses(h100n):
    p = plan("7B", 4096, 1, models=h100n, flops_per_s=400e12, price_per_device_hour=12.25, max_world=16)
    small = [r for r in p.rows if r.world < 8]
    assert small and all(r.cost_per_hour == pytest.approx(12.25 * r.world) for r in small)
    assert any("12.25 per device-hour" in a for a in p.advice)


def test_the_breakeven_sentence_is_whole(h100n):
    res = ccr("1.3B", 2048, 1, "8,16", "ddp", models=h100n, flops_per_s=400e12, price_per_node_hour=98)
    line = next(x for x in res.table().splitlines() if x.startswith("breakeven"))
    assert line.endswith("only layouts that fit in memory are compared")


# --- 5. one memory figure per row ----------------------------------------------------------------------

def test_ccr_and_plan_show_the_same_memory_figure_for_a_row_that_fits_with_checkpointing(h100n):
    res = ccr("7B", 4096, 1, 2, "zero3", models=h100n, flops_per_s=400e12, overlap=True)
    (row,) = res.rows
    assert row.memory.fits == "fits with checkpointing"
    figure = f"{row.memory.needed_bytes / 1e9:.1f}"
    line = res.table().splitlines()[2]
    assert f" {figure}  fits with checkpointing" in line
    p = plan("7B", 4096, 1, models=h100n, flops_per_s=400e12)
    said = [a for a in p.advice if a.startswith("ZeRO-3/FSDP fits from 2 devices")]
    assert said and f"{figure} GB/device" in said[0]


# --- 6. stragglers -------------------------------------------------------------------------------------

def test_the_wait_for_stragglers_is_shown_apart_wherever_ccr_is(h100n):
    p = plan("7B", 4096, 1, models=h100n, flops_per_s=400e12, straggler_cv=0.1, slow_node=0.9,
             target_samples_per_s=60)
    r = p.recommended
    assert r.sync_s > 0
    lines = [*p.advice, next(x for x in p.text().splitlines() if x.startswith("recommended:"))]
    for line in lines:
        for ccr_said in re.findall(r"CCR \d\.\d\d \([^)]*\)", line):
            assert "wait for the slowest rank" in ccr_said, line
    assert not any("communication, not the batch, sets the step" in a for a in p.advice)


# --- 7. efficiency at 2, 4 and 8 in every plan ---------------------------------------------------------

@pytest.mark.parametrize("params, memory_gb, verdict", [("7B", 150, OneDevice.FITS_ONLY_JUST),
                                                        ("7B", 80, OneDevice.DOES_NOT_FIT),
                                                        ("70B", 80, OneDevice.DOES_NOT_FIT)])
def test_every_plan_shows_efficiency_at_2_4_and_8(h100n, params, memory_gb, verdict):
    p = plan(params, 4096, 1, models=h100n, flops_per_s=400e12, device_memory_gb=memory_gb)
    assert p.verdict is verdict
    (scaling,) = [a for a in p.records if isinstance(a, ScalingAdvice)]
    assert sorted([r.world for r in scaling.rows] + list(scaling.missing)) == [2, 4, 8]
    said = next(a for a in p.advice if a.startswith("check scaling efficiency"))
    assert all(f"{w} devices" in said for w in (2, 4, 8))


# --- 8. the comm dtype ---------------------------------------------------------------------------------

def test_fp32_gradients_are_priced_as_fp32_in_the_exchange(h100n, capsys):
    P = 1_300_000_000

    def grads(**kw):
        (row,) = ccr("1.3B", 2048, 1, 16, "ddp", models=h100n, flops_per_s=400e12, **kw).rows
        (op,) = [o.op for o in row.ops if o.op.purpose == "gradients"]
        return op.size_bytes, row.comm_s

    bf16, t16 = grads()
    fp32, t32 = grads(bytes_per_param=18)
    assert (bf16, fp32) == (2 * P, 4 * P) and t32 > t16
    assert grads(bytes_per_param=18, comm_bytes_per_value=2)[0] == 2 * P  # --comm-dtype overrides
    p16 = plan("1.3B", 2048, 1, models=h100n, flops_per_s=400e12, max_world=16)
    p18 = plan("1.3B", 2048, 1, models=h100n, flops_per_s=400e12, max_world=16, bytes_per_param=18)
    ddp16 = {r.world: r for r in p16.rows if r.strategy == "ddp" and (r.batch, r.micro_batches) == (1, 1)}
    ddp18 = {r.world: r for r in p18.rows if r.strategy == "ddp" and (r.batch, r.micro_batches) == (1, 1)}
    assert ddp18[16].comm_s > ddp16[16].comm_s
    args = ["plan", "--params", "1.3B", "--model", h100n, "--tflops", "400", "--max-world", "8"]
    assert main([*args, "--comm-dtype", "fp32"]) == 0
    assert "gradients exchanged at 4 B per value (fp32" in capsys.readouterr().out
    assert main([*args, "--comm-dtype", "fp8"]) == 2
    assert len(capsys.readouterr().err.strip().splitlines()) == 1


def test_the_comm_dtype_prices_every_exchange_it_affects_and_activations_keep_bf16(h100n, tmp_path, capsys):
    """--comm-dtype fp32 priced only the gradient exchange: ZeRO's parameter gathers stayed bf16."""
    P = 1_300_000_000

    def sizes(strategy, world=16, **kw):
        (row,) = ccr("1.3B", 2048, 1, world, strategy, models=h100n, flops_per_s=400e12, **kw).rows
        return {o.op.purpose: o.op.size_bytes for o in row.ops}

    assert sizes("zero1", comm_bytes_per_value=4) == {"gradients": 4 * P, "parameters (after step)": 4 * P}
    z3 = sizes("zero3", comm_bytes_per_value=4)
    assert z3["parameters (forward)"] == z3["parameters (backward)"] == z3["gradients"] == 4 * P
    # without a comm dtype the weights are gathered as they are held (bf16), whatever the gradients' dtype
    assert sizes("zero1", bytes_per_param=18) == {"gradients": 4 * P, "parameters (after step)": 2 * P}
    # tensor- and pipeline-parallel activations keep the compute precision
    acts = {k: v for k, v in sizes("tp+pp+dp", tp_degree=4, pp_degree=2, comm_bytes_per_value=4).items()
            if k.startswith("activations")}
    assert acts and acts == {k: v for k, v in sizes("tp+pp+dp", tp_degree=4, pp_degree=2).items()
                             if k.startswith("activations")}
    out = tmp_path / "plan.json"
    args = ["plan", "--params", "1.3B", "--model", h100n, "--tflops", "400", "--max-world", "8"]
    assert main([*args, "--comm-dtype", "fp32", "--json", str(out)]) == 0
    assert json.loads(out.read_text())["comm_bytes_per_value"] == {
        "gradients": 4, "parameters (zero all-gathers)": 4, "activations (tp, pp)": 2}
    assert main(["ccr", "--params", "1.3B", "--model", h100n, "--tflops", "400", "--strategy", "zero1",
                 "--comm-dtype", "fp32", "--json", str(tmp_path / "ccr.json")]) == 0
    config = json.loads((tmp_path / "ccr.json").read_text())["config"]
    assert (config["comm_bytes_per_value"], config["param_comm_bytes_per_value"]) == (4, 4)
    capsys.readouterr()
    with pytest.raises(SystemExit):
        main(["plan", "--help"])
    said = " ".join(capsys.readouterr().out.split())
    assert "ZeRO's parameter all-gathers" in said and "activations keep the compute precision" in said


# --- 9. the nearest is the nearest ---------------------------------------------------------------------

def test_an_unreachable_target_recommends_the_fastest_of_every_layout_and_says_the_bound(h100n):
    p = plan("7B", 4096, 1, models=h100n, flops_per_s=400e12, target_samples_per_s=1000)
    assert not p.target_met
    assert p.recommended.samples_per_s == max(r.samples_per_s for r in p.rows)
    assert _search(p).bounded
    assert any("bounded by 64 devices" in a for a in p.advice)
    assert any("max_world bounded the search" in n for n in p.notes)


# --- 10. a one-node model file -------------------------------------------------------------------------

def test_a_one_node_model_file_answers_on_one_node_and_says_what_more_needs(a100_node, capsys):
    p = plan("1.3B", 2048, 1, models=a100_node, flops_per_s=250e12)
    assert p.recommended is not None and max(r.world for r in p.rows) == 8
    s = _search(p)
    assert s.bounded and s.bounds.max_world == 8 and "inter-node" in s.bounds.max_world_reason
    assert main(["plan", "--params", "1.3B", "--model", a100_node, "--tflops", "250"]) == 0
    out = capsys.readouterr().out
    assert "one node: the models price no inter-node link" in out and "--link NAME" in out
    with pytest.raises(UsageError, match="inter-node"):  # asked for more explicitly: still refused, said why
        plan("1.3B", 2048, 1, models=a100_node, flops_per_s=250e12, max_world=16)


# --- 11. the Python API's errors -----------------------------------------------------------------------

@pytest.mark.parametrize("kw, said", [({"target_samples_per_s": "4x"}, "target_samples_per_s must be a number"),
                                      ({"device_memory_gb": math.inf}, "device_memory_gb must be finite"),
                                      ({"max_world": 8.5}, "max_world must be a whole number"),
                                      ({"loader_samples_per_s": math.nan}, "loader_samples_per_s must be finite")])
def test_bad_python_arguments_are_usage_errors(h100n, kw, said):
    with pytest.raises(UsageError, match=said):
        plan("1.3B", 2048, 1, models=h100n, flops_per_s=400e12, **kw)


# --- 12. smaller ---------------------------------------------------------------------------------------

def test_llama_activation_memory_counts_grouped_query_attention_and_the_gated_mlp():
    shape = shape_for_params(70 * 10**9)  # Llama 2 70B: hidden 8192, 64 heads, 8 kv heads, gated ffn 28672
    assert shape.gated_mlp and shape.kv_heads == 8
    mem = memory_per_device(make_layout("ddp", 1, 8), Workload(70 * 10**9, shape, 4096, 1), 80e9)
    sbh = 4096 * 8192
    # 10 + Q 2 + K, V 4 x 8/64 + out-proj input 2 + gate, up and product 3 x 2 x 28672/8192
    per_layer = 10 + 2 + 4 * 8 / 64 + 2 + 3 * 2 * 28672 / 8192
    assert per_layer == 35.5 and mem.activations_bytes == pytest.approx(sbh * per_layer * 80)
    gpt = shape_for_params(1_300_000_000)  # plain MLP, ffn 4h, no GQA: Korthikanti's 34
    plain = memory_per_device(make_layout("ddp", 1, 8), Workload(1_300_000_000, gpt, 2048, 1), 80e9)
    assert plain.activations_bytes == pytest.approx(2048 * gpt.hidden * 34 * gpt.layers)


def test_without_a_need_one_device_suffices_and_filling_the_node_is_quoted(h100n):
    p = plan("1.3B", 2048, 1, models=h100n, flops_per_s=400e12)
    assert p.recommended.world == 1 and _need(p).verdict is NeedVerdict.NO_NAMED_NEED
    said = next(a for a in p.advice if a.startswith("no named need"))
    assert "on 1 device at micro-batch 1 suffices" in said and "one node's best is" in said
    assert "1 devices" not in p.text()


def test_a_micro_batch_other_than_the_users_is_said_beside_the_users(h100n):
    p = plan("7B", 4096, 1, models=h100n, flops_per_s=400e12, target_samples_per_s=66.3)
    r = p.recommended
    # cheaper per sample than any one-sequence step: a larger micro-batch or gradient accumulation
    assert r.batch * r.micro_batches > 1 and r.decisive_band is not Band.COMM_BOUND
    (b,) = [a for a in p.records if isinstance(a, BatchAdvice)]
    assert b.verdict is BatchVerdict.ADOPTED and (b.row.batch, b.row.micro_batches) == (1, 1) and b.at == r
    assert b.row.layout == r.layout
    assert any(a.startswith(f"micro-batch {r.batch} x {r.micro_batches} micro-batches per device is recommended, "
                            f"not micro-batch 1 (batch=1, the default unless given)") for a in p.advice)


@pytest.mark.parametrize("kw, said", [({"device_memory_gb": math.inf}, "device_memory_gb must be finite"),
                                      ({"bucket_mb": "25"}, "bucket_mb must be a number")])
def test_bad_python_arguments_to_ccr_are_usage_errors(h100n, kw, said):
    with pytest.raises(UsageError, match=said):
        ccr("1.3B", 2048, 1, 8, "ddp", models=h100n, flops_per_s=400e12, **kw)


@pytest.mark.parametrize("value", ["fp32", 3, 2.5, math.inf, True])
def test_a_comm_dtype_that_is_not_one_is_a_usage_error_in_ccr_and_plan(h100n, value):
    """comm_bytes_per_value='fp32' raised TypeError, and 3 or 2.5 bytes per value were priced."""
    said = "comm_bytes_per_value must be one of 2, 4, 8"
    with pytest.raises(UsageError, match=said):
        ccr("1.3B", 2048, 1, 8, "zero1", models=h100n, flops_per_s=400e12, comm_bytes_per_value=value)
    with pytest.raises(UsageError, match=said):
        plan("1.3B", 2048, 1, models=h100n, flops_per_s=400e12, max_world=8, comm_bytes_per_value=value)


@pytest.mark.parametrize("extra, said", [
    (["--price-per-device-hour", "0"], "argument --price-per-device-hour: '0' must be more than 0"),
    (["--price-per-device-hour", "2", "--price-per-node-hour", "16"], "not both"),
    (["--comm-dtype", "int8"], "argument --comm-dtype: invalid choice")])
def test_the_new_ccr_options_refuse_bad_input_in_one_line(h100n, capsys, extra, said):
    args = ["ccr", "--params", "1.3B", "--model", h100n, "--tflops", "400", "--world", "8,16"]
    assert main([*args, *extra]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and err.startswith("pybench: error:") and said in err, err
    assert main([*args, "--price-per-device-hour", "2"]) == 0
    out = capsys.readouterr().out
    assert "samples/$" in out and "vs one 8-GPU node" in out  # breakeven against 8 devices at 2 each


@pytest.mark.parametrize("params, kw", [
    ("7B", dict(target_samples_per_s=30)), ("7B", dict(target_samples_per_s=1000, price_per_node_hour=98.0)),
    ("1.3B", dict(target_samples_per_s=120, loader_samples_per_s=20.0)),
    ("7B", dict(target_samples_per_s=20, straggler_cv=0.1, slow_node=0.9)),
    # met within the tolerance of the least cost any combination could reach: layouts on more nodes left out
    ("1.3B", dict(target_samples_per_s=500)),
    # met at the estimate only: the cheapest that meets it at its communication's slow end was left out
    ("1.3B", dict(target_samples_per_s=300)),
])
def test_the_combinations_left_out_never_change_the_plan(h100n, params, kw, monkeypatch):
    """Pricing only what could be chosen or is quoted (a best-case bound against priced layouts) says what
    pricing every combination says, sentence for sentence: the pick, the verdict, the node's best, the
    fastest allowed, the scaling check, scale-out, ZeRO and the batch line."""
    import functools

    import pybench.planning.advice as advice
    args = dict(models=h100n, flops_per_s=400e12, max_world=40, max_batch=4, **kw)
    pruned = plan(params, 2048, 1, **args)
    monkeypatch.setattr(advice, "search_layouts", functools.partial(search_layouts, prune=False))
    full = plan(params, 2048, 1, **args)
    assert pruned.search.rows_left_out > 0 and full.search.rows_left_out == 0

    def said(p):  # every sentence but the search's counts and the notes (those say what the models were asked)
        return [x for x in p.text().splitlines() if not x.startswith("note:") and "combinations of layout" not in x]
    assert pruned.recommended == full.recommended
    assert said(pruned) == said(full)
    if kw == dict(target_samples_per_s=300):
        assert any("the cheapest that meets it at the slow end of a calibrated interval is" in x for x in said(pruned))


def test_scale_out_quotes_every_node_count_to_8_nodes_then_powers_of_two(h100n):
    """A line of every node count to 32 nodes and beyond said no more than this one, and each count it
    quoted was priced at every split the advice needs."""
    from pybench.planning.records import ScaleOutAdvice
    p = plan("1.3B", 2048, 1, models=h100n, flops_per_s=400e12, max_world=1024)
    (out,) = [a for a in p.records if isinstance(a, ScaleOutAdvice)]
    assert [r.world // 8 for r in out.rows] == [2, 3, 4, 5, 6, 7, 8, 16, 32, 64, 128]
    assert {9, 17, 31} <= {w // 8 for w in p.search.worlds if w % 8 == 0}  # the search still weighs them


def test_the_zero_sentence_quotes_one_row_per_strategy(h100n):
    """7B at micro-batch 4: ZeRO-1 fits at m = 1 and m = 64 alike; the sentence quoted both as two zero1s."""
    from pybench.planning.records import ZeroAdvice
    p = plan("7B", 4096, 4, models=h100n, flops_per_s=400e12)
    (zero,) = [a for a in p.records if isinstance(a, ZeroAdvice)]
    strategies = [r.strategy for r in zero.rows]
    assert len(strategies) == len(set(strategies)) and "zero1" in strategies
    assert all(r.batch == 4 and r.micro_batches == 1 for r in zero.rows)


def test_a_target_met_only_by_comm_bound_layouts_is_weighed_at_the_slow_end_too(h100n):
    """The flag said True for a comm-bound pick giving 6 samples/s at its communication's slow end against a target of
    2000, and for a target nothing reaches."""
    from pybench.planning.records import NeedAdvice, NeedVerdict
    p = plan("1.3B", 2048, 1, models=h100n, flops_per_s=800e12, target_samples_per_s=2000, max_world=256,
             global_batch=64)
    (need,) = [a for a in p.records if isinstance(a, NeedAdvice)]
    assert need.verdict is NeedVerdict.TARGET_MET_ONLY_COMM_BOUND
    assert need.met_at_slow_comm is False and need.determined is None
    assert any(a.startswith("only layouts comm-bound by") and "met at the estimate only" in a for a in p.advice)
    far = plan("1.3B", 2048, 1, models=h100n, flops_per_s=800e12, target_samples_per_s=1e9, max_world=64)
    (need,) = [a for a in far.records if isinstance(a, NeedAdvice)]
    assert need.verdict is NeedVerdict.TARGET_NOT_REACHABLE and need.met_at_slow_comm is None
