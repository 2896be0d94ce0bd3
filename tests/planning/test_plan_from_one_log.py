"""Issue 14, point 6: the plan works from one log. A two-node log's topology model prices the
inter-node link; a link preset fills the class no log holds; when nothing can price a layout the
plan needs, it exits 2 saying which input to give, instead of "no layout fits"."""

from __future__ import annotations

import pytest
from conftest import SHARED_DATA
from shared_models import fitted

from pybench.cli.main import main
from pybench.errors import UsageError
from pybench.planning.advice import plan
from pybench.planning.bands import Band
from pybench.planning.grid import ccr
from pybench.planning.records import NeedAdvice, NeedVerdict, NoLayoutAdvice

FIXTURES = SHARED_DATA.parent
A100_2NODE = SHARED_DATA / "nccl-tests" / "a100_2node_16gpu_oci_roce_allreduce.txt"
A100_NODE = [SHARED_DATA / "vtrain" / f"a100_nvswitch_allreduce_{n}gpu.csv" for n in (2, 8)]


@pytest.fixture(scope="module")
def two_node_model(tmp_path_factory):
    return fitted(tmp_path_factory, "a100n", [A100_2NODE])


@pytest.fixture(scope="module")
def one_node_model(tmp_path_factory):
    return fitted(tmp_path_factory, "a100_node", A100_NODE)


def test_the_two_node_log_alone_evaluates_every_layout_with_an_upper_bound(two_node_model, capsys):
    """Issue 14: the shared 2-node A100 log alone: every layout evaluated, no false "does not fit".

    Inside a node the links are at least as fast as between nodes, so the inter-node model prices
    intra-node collectives as an upper bound, and the plan says so and how to do better.
    """
    p = plan("7B", 2048, 1, models=two_node_model, flops_per_s=250e12)
    assert not any(isinstance(a, NoLayoutAdvice) for a in p.records)
    # every layout weighed; those across nodes are priced only where a named need could choose them
    worlds = {(s, w) for s, w, _, _ in p.search.layouts_fitting}
    assert {("zero3", w) for w in (2, 4, 8, 16, 32, 64)} <= worlds
    assert {("tp+dp", w) for w in (8, 16, 32, 64)} <= worlds
    far = plan("7B", 2048, 1, models=two_node_model, flops_per_s=250e12, target_samples_per_s=1e6)
    assert far.recommended.layout.nodes > 1 and any(r.layout.nodes > 1 for r in far.rows)  # priced across nodes
    assert any("upper bound" in n and "--link" in n for n in p.notes)
    with_preset = plan("7B", 2048, 1, models=two_node_model, flops_per_s=250e12, links=["nvlink3"])
    def key(r):
        return r.layout, r.batch, r.micro_batches
    bound = {key(r): r.comm_s for r in p.rows}
    for r in with_preset.rows:  # NVLink is faster than the bound: a preset never prices above it
        if key(r) in bound and r.layout.nodes == 1:
            assert r.comm_s <= bound[key(r)] * 1.0001
    assert main(["plan", "--params", "7B", "--model", two_node_model, "--tflops", "250"]) == 0
    assert "upper bound" in capsys.readouterr().out


def test_the_two_node_log_with_an_intra_node_preset_evaluates_every_layout(two_node_model):
    p = plan("7B", 2048, 1, models=two_node_model, flops_per_s=250e12, links=["nvlink3"])
    assert not any(isinstance(a, NoLayoutAdvice) for a in p.records)  # no false "does not fit"
    worlds = {(s, w) for s, w, _, _ in p.search.layouts_fitting}
    assert {("zero3", w) for w in (2, 4, 8, 16, 32, 64)} <= worlds
    assert {("tp+dp", w) for w in (8, 16, 32, 64)} <= worlds
    sources = {o.call.source for r in p.rows for o in r.ops}
    assert any("preset nvlink3" in s for s in sources)  # said, never passed off as measured
    assert any("preset nvlink3" in n for n in p.notes)
    assert p.recommended is not None and p.recommended.memory.fits_at_all


def test_one_node_log_and_25g_ethernet_stays_on_one_node(one_node_model):
    p = plan("1.3B", 2048, 1, models=one_node_model, flops_per_s=250e12, links=["eth-25g"], max_world=32)
    assert p.recommended is not None and p.recommended.world <= 8
    (need,) = [a for a in p.records if isinstance(a, NeedAdvice)]
    assert need.verdict is NeedVerdict.NO_NAMED_NEED
    multi = [r for r in p.rows if r.world > 8 and r.strategy == "ddp" and r.batch == 1]
    assert multi and all(r.decisive_band is Band.COMM_BOUND for r in multi)
    assert all("preset eth-25g" in o.call.source for r in multi for o in r.ops)


def test_ccr_takes_link_presets_too(one_node_model):
    res = ccr("1.3B", 2048, 1, "8,16", "ddp", models=one_node_model, flops_per_s=250e12, links=["eth-25g"])
    assert [r.world for r in res.rows] == [8, 16]
    # without a link for 16 devices, the grid still answers 8 and says why not 16 (it refused both)
    res = ccr("1.3B", 2048, 1, "8,16", "ddp", models=one_node_model, flops_per_s=250e12)
    assert [r.world for r in res.rows] == [8]
    (why,) = [n for n in res.notes if n.startswith("not priced")]
    assert "ddp on 16" in why and "no allreduce model for inter-node links" in why and "--system" in why
    (unpriced,) = res.to_dict()["not_priced"]
    assert unpriced["strategy"] == "ddp" and unpriced["world"] == 16 and "inter-node" in unpriced["reason"]
    with pytest.raises(UsageError, match="no allreduce model for inter-node links"):
        ccr("1.3B", 2048, 1, 16, "ddp", models=one_node_model, flops_per_s=250e12)
    with pytest.raises(UsageError, match="unknown link preset"):
        ccr("1.3B", 2048, 1, 8, "ddp", models=one_node_model, flops_per_s=250e12, links=["carrier-pigeon"])


def test_one_gpu_count_prices_only_that_count_and_says_why_not_the_others(tmp_path_factory, capsys):
    """Issue 24: one GPU count (8) without the node's description does not determine 2- or 4-GPU groups. The
    plan leaves those layouts out, says so with the remedy, and answers from the 8-GPU ones; described as
    the switched node it is, every count is priced."""
    one_count = fitted(tmp_path_factory, "a100_8gpu", A100_NODE[1:])
    p = plan("7B", 2048, 1, models=one_count, flops_per_s=250e12)
    assert p.recommended is not None and {r.world for r in p.rows if r.world > 1} == {8}
    (why,) = [n for n in p.notes if n.startswith("not priced")]
    assert "one GPU count (8)" in why and "--system" in why and "tp on 2" in why
    described = plan("7B", 2048, 1, models=one_count, flops_per_s=250e12, system="dgx-a100")
    assert not any(n.startswith("not priced") for n in described.notes)
    assert {2, 4, 8} <= {r.world for r in described.rows}
    assert main(["plan", "--params", "7B", "--seq", "2048", "--model", one_count, "--tflops", "250"]) == 0
    assert "note: not priced" in capsys.readouterr().out


def test_ccr_prices_the_rows_one_gpu_count_determines_and_names_the_rest(tmp_path_factory, capsys):
    """ccr over worlds 4 and 8 on a model fitted at 8 GPUs alone: the 8-GPU rows are priced, the 4-GPU
    ones are named in a note with the missing input (exit 0); asked for 4 GPUs alone, nothing can be
    priced and the one-line error says why (exit 2)."""
    one_count = fitted(tmp_path_factory, "a100_8gpu_ccr", A100_NODE[1:])
    result = ccr("7B", 2048, 1, [4, 8], ["ddp", "tp"], models=one_count, flops_per_s=250e12)
    assert {(r.strategy, r.world) for r in result.rows} == {("ddp", 8), ("tp", 8)}
    (why,) = [n for n in result.notes if n.startswith("not priced")]
    assert "2 layout(s)" in why and "ddp on 4" in why and "tp on 4" in why and "--system" in why
    described = ccr("7B", 2048, 1, [4, 8], ["ddp", "tp"], models=one_count, flops_per_s=250e12, system="dgx-a100")
    assert len(described.rows) == 4 and not any(n.startswith("not priced") for n in described.notes)
    with pytest.raises(UsageError, match="not determined by these inputs"):
        ccr("7B", 2048, 1, 4, "ddp", models=one_count, flops_per_s=250e12)
    args = ["ccr", "--params", "7B", "--seq", "2048", "--world", "4,8", "--strategy", "ddp", "--model", one_count,
            "--tflops", "250"]
    assert main(args) == 0
    assert "note: not priced, 1 layout(s) (strategy on devices: ddp on 4)" in capsys.readouterr().out
    assert main([*args[:6], "4", *args[7:]]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "not determined by these inputs" in err[0]


def test_a_described_system_prices_groups_on_as_many_nodes_as_its_gpus_need(two_node_model, capsys):
    """The 2 x 8 A100 log with its description (8 GPUs per node): a 20-rank data-parallel group crosses at
    least 3 nodes, never "10 ranks on each of 2 nodes", which the description refuses."""
    assert main(["plan", "--params", "70B", "--seq", "4096", "--model", two_node_model, "--tflops", "250",
                 "--system", "oci-bm-gpu4.8", "--max-world", "256"]) == 0
    assert "recommended: " in capsys.readouterr().out


def test_a_group_is_priced_on_the_nodes_its_layout_places_it_on(two_node_model):
    """A data-parallel group of 64 ranks on nodes of 8 spans 8 nodes, not the 2 the log measured: NCCL's
    tree sends more through each node's NICs and has more levels there. Priced as 2 nodes of 32 ranks
    (what the plan did), DDP scaled out at no extra cost per node."""
    from pybench.model.model_files import load_topology
    from pybench.planning.model_set import load_model_set
    from pybench.planning.strategies import Workload, comm_ops, make_layout
    from pybench.planning.transformer import shape_for_params

    work = Workload(7_000_000_000, shape_for_params(7_000_000_000), 2048, 1)
    ops = {(s, w): comm_ops(make_layout(s, w, 8, tp_degree=8 if s == "tp+dp" else None), work)
           for s, w in (("ddp", 64), ("ddp", 12), ("tp+dp", 64))}
    assert [o.nodes for o in ops["ddp", 64]] == [8] and [o.nodes for o in ops["ddp", 12]] == [2]
    assert [(o.purpose, o.nodes) for o in ops["tp+dp", 64]] == [("activations (tensor parallel)", 1),
                                                                ("gradients", 8)]
    models = load_model_set(two_node_model)
    (tm,) = load_topology(two_node_model)
    on_8 = models.time("allreduce", 1 << 28, 64, "inter-node", 8).time_s
    assert on_8 == pytest.approx(tm.predict(1 << 28, 64, 8, nics_as_fitted=True).time_s, rel=1e-9)
    assert on_8 > 1.2 * models.time("allreduce", 1 << 28, 16, "inter-node", 2).time_s
    # (32 ranks on each of 2 nodes of 8 GPUs: no node of the log, nor any named one, holds them)
    from pybench.errors import NotDetermined
    with pytest.raises(NotDetermined, match="32 GPUs per node, more than any named system's node holds"):
        models.time("allreduce", 1 << 28, 64, "inter-node", None)
    # one node count measured: NCCL's tree or its ring across 8 nodes, and the plan says so
    assert any(n.startswith("allreduce across nodes: fitted at one node count") for n in models.notes)


POLARIS_2NODE = SHARED_DATA / "nccl-tests" / "polaris_a100_2node_4gpu_slingshot_allreduce.txt"


@pytest.fixture(scope="module")
def polaris_two_nodes(tmp_path_factory):
    return fitted(tmp_path_factory, "polaris2", [POLARIS_2NODE])


def test_a_target_met_only_at_the_estimate_of_a_far_layout_is_said_not_determined(polaris_two_nodes, one_node_model):
    """A 2-node log (4 ranks per node) had the plan recommend 512 nodes for a target, "caution by its own bands",
    while that layout's communication per step had a 95% interval from 0.1 s to thousands of seconds (since bounded
    by a ring's steps: still several times its estimate): the plan now says the target is met at the estimate only,
    with the interval and what would narrow it."""
    kw = dict(models=polaris_two_nodes, flops_per_s=150e12, device_memory_gb=40, gpus_per_node=4, max_world=4096,
              target_samples_per_s=400)
    p = plan("13B", 4096, 1, **kw)
    (need,) = [a for a in p.records if isinstance(a, NeedAdvice)]
    r = p.recommended
    assert need.verdict is NeedVerdict.TARGET_MET and r.layout.nodes > 2
    assert r.samples_per_s >= 400 > r.samples_per_s_slow_comm and r.comm_high_s > 2 * r.comm_s
    assert not need.met_at_slow_comm and need.to_dict()["met_at_slow_comm"] is False
    said = next(a for a in p.advice if a.startswith("the target of 400"))
    assert "met at the estimate only" in said and f"{r.comm_high_s:.3g}" in said
    # where the inputs do determine it (a one-node log, a target inside the node), nothing is added
    near = plan("1.3B", 2048, 1, models=one_node_model, flops_per_s=250e12, max_world=8, target_samples_per_s=10)
    (need,) = [a for a in near.records if isinstance(a, NeedAdvice)]
    assert need.verdict is NeedVerdict.TARGET_MET and need.met_at_slow_comm
    assert not any("estimate only" in a for a in near.advice)


def test_a_sweep_carried_by_the_ring_formula_never_counts_as_meeting_the_target_for_sure(tmp_path_factory):
    """A 16-rank sweep whose log lists no hosts holds no topology model; the planner carries it to 2048 ranks by the
    ring formula with the sweep's own 2% band, and the plan called that target met with no caveat, while the same
    log fitted with --nodes 2 said its communication might be thousands of times slower."""
    model = fitted(tmp_path_factory, "p5", [SHARED_DATA / "nccl-tests" / "h100_p5_2node_16gpu_efa_allreduce_srunprefix.txt"])
    p = plan("13B", 4096, 1, models=model, flops_per_s=150e12, device_memory_gb=40, gpus_per_node=8,
             max_world=4096, target_samples_per_s=610)
    (need,) = [a for a in p.records if isinstance(a, NeedAdvice)]
    r = p.recommended
    assert need.verdict is NeedVerdict.TARGET_MET and r.world > 16 and not r.comm_interval_calibrated
    assert not need.met_at_slow_comm and r.samples_per_s_slow_comm == 0.0
    said = next(a for a in p.advice if a.startswith("the target of 610"))
    assert "which these inputs do not bound" in said and "ring formula" in said
    assert r.to_dict()["comm_interval_calibrated"] is False and need.to_dict()["met_at_slow_comm"] is False


def test_device_counts_whose_layouts_no_input_determines_are_not_said_to_fit_nothing(tmp_path):
    """A Lassen OSU all-reduce at 4 nodes x 1 rank (its cost shape misses its own sweep): the scaling check said
    "2 devices: nothing fits" of a 1.3B model that fits one device, and a note called the fresh file "written by a
    pybench without topology models"."""
    from conftest import PUBLIC_LOGS

    from pybench.cli.main import main

    out = tmp_path / "lassen.json"
    assert main(["fit", str(PUBLIC_LOGS / "osu_lassen_n4_jsrun_20runs_allreduce.log"), "--collective", "allreduce",
                 "-o", str(out)]) == 0
    p = plan("1.3B", 2048, 1, models=str(out), flops_per_s=100e12, gpus_per_node=4, target_samples_per_s=50)
    said = next(a for a in p.advice if a.startswith("check scaling efficiency"))
    assert "2 devices: not determined by these inputs" in said and "nothing fits" not in said, said
    assert not any("without topology models" in n for n in p.notes)


def test_scaling_efficiency_against_one_node_is_at_most_one(tmp_path):
    """p5's 2-node fit with --system aws-p5: one node is priced from the description's NVLink rate, 16 ranks from
    their measurement, and 16 ranks came out 1.001x one node's throughput per node. More nodes never communicate
    less: the efficiency against one node is at most 1."""
    import json
    p5, out = tmp_path / "p5.json", tmp_path / "c.json"
    assert main(["fit", str(SHARED_DATA / "nccl-tests" / "h100_p5_2node_16gpu_efa_allreduce_srunprefix.txt"),
                 "--nodes", "2", "-o", str(p5)]) == 0
    assert main(["ccr", "--model", str(p5), "--tflops", "400", "--params", "7B", "--world", "8,16,32", "--system",
                 "aws-p5", "--batch", "1,4", "--json", str(out)]) == 0
    effs = [r["efficiency_vs_node"] for r in json.loads(out.read_text())["rows"] if r["world"] > 8]
    assert effs and all(0 < e <= 1.0 for e in effs)


def test_a_bucket_over_16_tib_is_refused_at_every_world(tmp_path, capsys):
    """--params 1e15 priced a 1819 TiB bucket at world 8 (one node, the topology model) and refused it at world 16
    (the sweep): every model prices calls up to 16 TiB, and the refusal names the input."""
    model = tmp_path / "p5.json"
    assert main(["fit", str(SHARED_DATA / "nccl-tests" / "h100_p5_2node_16gpu_efa_allreduce_srunprefix.txt"),
                 "--nodes", "2", "-o", str(model)]) == 0
    for world in ("8", "16"):
        capsys.readouterr()
        assert main(["ccr", "--model", str(model), "--tflops", "400", "--params", "1e15", "--world", world]) == 2
        assert "--params is too large" in capsys.readouterr().err


def test_a_scale_out_row_whose_one_node_time_is_not_determined_says_so(tmp_path, capsys):
    """A 2-node fit whose small sizes wait longer per network step than any calibrated system allows (an MI300X log
    run eight times slower): one node's time is not determined, and the scale-out advice printed "eff vs node
    nan"."""
    from conftest import PUBLIC_LOGS, slower_nccl_tests_log
    log = slower_nccl_tests_log(PUBLIC_LOGS / "mi300x_aac10_2node16_allreduce.log", 8.0, tmp_path / "slow.log")
    model = tmp_path / "slow.json"
    assert main(["fit", str(log), "-o", str(model)]) == 0
    capsys.readouterr()
    assert main(["plan", "--params", "1.3B", "--model", str(model), "--tflops", "500",
                 "--target-samples-per-s", "300"]) == 0
    out = capsys.readouterr().out
    assert "eff vs node not known (one node's time is not determined)" in out and "nan" not in out
    # one reason, one note, whatever rank and node counts its layouts name (there were twenty)
    assert sum("not priced" in line for line in out.splitlines()) == 1
