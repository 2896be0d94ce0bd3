"""Issue 14: the plan's decision rules, scenario by scenario, on a real two-node H100 all-reduce log.

Without a named need the plan stays on one node and shows efficiency at 2, 4 and 8 workers; a
device that is not well used (loader-bound, or GEMMs far under peak) gets "fix it first" and no
multi-node layout; a target is met by the smallest configuration reaching it, preferring one its
own bands do not call comm-bound.
"""

from __future__ import annotations

import pytest
from conftest import SHARED_DATA, fitted_model_file

from pybench.cli.main import main
from pybench.errors import UsageError
from pybench.planning.advice import plan
from pybench.planning.bands import Band
from pybench.planning.records import RULE_ORDER, InputPipelineAdvice, NeedAdvice, NeedVerdict, ScalingAdvice

LOG = SHARED_DATA / "nccl-tests" / "h100_p5_2node_16gpu_efa_allreduce_srunprefix.txt"
PEAK = 989e12  # H100 SXM dense bf16 datasheet figure, a reference only


@pytest.fixture(scope="module")
def h100():
    if not LOG.exists():
        pytest.skip(f"shared logs not found at {SHARED_DATA}")
    from pybench.model.build import fit_models
    from pybench.model.logs import load_measurements
    return fit_models(load_measurements(LOG))


def _need(p) -> NeedAdvice:
    (need,) = [a for a in p.records if isinstance(a, NeedAdvice)]
    return need


def test_records_follow_the_rule_order(h100):
    p = plan("125M", 2048, 1, models=h100, flops_per_s=400e12, peak_flops_per_s=PEAK,
             loader_samples_per_s=5.0)
    ranks = [RULE_ORDER.index(a.rule) for a in p.records]
    assert ranks == sorted(ranks) and p.records[0].rule == "memory"
    assert [a.rule for a in p.records][:2] == ["memory", "input pipeline"]


def test_125m_without_a_need_stays_on_one_node_and_shows_small_counts(h100):
    p = plan("125M", 2048, 1, models=h100, flops_per_s=400e12, peak_flops_per_s=PEAK, device_memory_gb=80)
    assert p.recommended is not None and p.recommended.world <= 8
    (scaling,) = [a for a in p.records if isinstance(a, ScalingAdvice)]
    assert [r.world for r in scaling.rows] == [2, 4, 8]
    assert all(0 < r.efficiency_vs_device <= 1 for r in scaling.rows)
    said = [a for a in p.advice if a.startswith("check scaling efficiency")]
    assert said and "2 devices" in said[0] and "4 devices" in said[0]
    assert _need(p).verdict is NeedVerdict.NO_NAMED_NEED
    assert any("target_samples_per_s" in a and "no named need" in a and "suffices" in a for a in p.advice)
    assert any(r.world > 8 for r in p.rows)  # the multi-node rows are still shown, just not recommended


@pytest.mark.parametrize("kind", ["loader", "gemms"])
def test_a_device_not_well_used_gets_fixed_first_and_no_multi_node_layout(h100, kind):
    kw = dict(flops_per_s=400e12, peak_flops_per_s=PEAK, target_samples_per_s=1e6)  # even with a target
    if kind == "loader":
        kw["loader_samples_per_s"] = 5.0
    else:
        kw["flops_per_s"] = 0.15 * PEAK
    p = plan("125M", 2048, 1, models=h100, **kw)
    assert p.recommended is not None and p.recommended.world <= 8
    assert _need(p).verdict is NeedVerdict.DEVICE_NOT_WELL_USED
    if kind == "loader":
        (loader,) = [a for a in p.records if isinstance(a, InputPipelineAdvice)]
        assert loader.loader_samples_per_s == 5.0 and loader.compute_samples_per_s > 5.0
        assert any(a.startswith("fix the input pipeline") for a in p.advice)
    else:
        assert any(a.startswith("low accelerator utilisation") and "15%" in a for a in p.advice)


def test_a_loader_faster_than_the_device_changes_nothing(h100):
    base = plan("125M", 2048, 1, models=h100, flops_per_s=400e12)
    fast = plan("125M", 2048, 1, models=h100, flops_per_s=400e12, loader_samples_per_s=1e9)
    assert fast.advice == base.advice and fast.recommended == base.recommended


@pytest.mark.parametrize("params", ["1.3B", "7B"])
def test_a_target_is_met_by_the_smallest_row_its_bands_allow(h100, params):
    one = plan(params, 2048, 1, models=h100, flops_per_s=400e12)
    fitting = [r for r in one.rows if r.memory.fits_at_all]
    rates = sorted({r.samples_per_s for r in fitting})
    for target in rates[:: max(1, len(rates) // 3)]:
        p = plan(params, 2048, 1, models=h100, flops_per_s=400e12, target_samples_per_s=target * 0.999)
        meeting = [r for r in p.rows if r.memory.fits_at_all and r.samples_per_s >= target * 0.999]
        assert meeting and p.target_met and not any("reaches" in n for n in p.notes)
        assert p.recommended.samples_per_s >= target * 0.999
        if any(r.decisive_band is not Band.COMM_BOUND for r in meeting):
            assert p.recommended.decisive_band is not Band.COMM_BOUND
            assert _need(p).verdict is NeedVerdict.TARGET_MET
        else:
            assert _need(p).verdict is NeedVerdict.TARGET_MET_ONLY_COMM_BOUND


@pytest.mark.parametrize("kw, match", [({"loader_samples_per_s": 0}, "loader_samples_per_s must be positive"),
                                       ({"target_samples_per_s": -1}, "target_samples_per_s must be positive")])
def test_bad_rates_are_one_line_errors(kw, match):
    from test_ccr import FLOPS, SHAPE, all_links
    with pytest.raises(UsageError, match=match):
        plan(1000, 4, 2, models=all_links("allreduce"), flops_per_s=FLOPS, shape=SHAPE, **kw)


def test_cli_loader_flag(capsys):
    from pathlib import Path
    model = str(Path(__file__).resolve().parents[1] / "fixtures" / "model_v1_allreduce.json")
    common = ["plan", "--params", "125M", "--model", model, "--tflops", "400", "--max-world", "8"]
    assert main([*common, "--loader-samples-per-s", "0"]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("pybench: error: argument --loader-samples-per-s: '0' must be more than 0")
    assert main([*common, "--loader-samples-per-s", "3"]) == 0
    assert "fix the input pipeline" in capsys.readouterr().out


# --- issue 14, point 5: prices and the global batch in the plan ---------------------------------------------

def _small_plan(**kw):
    from test_ccr import FLOPS, SHAPE, all_links
    kw.setdefault("max_world", 8)
    return plan(1000, 4, 2, models=all_links("allreduce"), flops_per_s=FLOPS, gpus_per_node=2, shape=SHAPE,
                device_memory_gb=1e-4, **kw)


def test_plan_prices_per_node_or_per_device():
    from pybench.planning.records import CostAdvice
    by_node = _small_plan(price_per_node_hour=3.6)
    by_device = _small_plan(price_per_device_hour=1.8)  # 2 devices per node
    (cost,) = [a for a in by_node.records if isinstance(a, CostAdvice)]
    assert cost.price_per_node_hour == 3.6
    # issue 25: billed per device, a layout pays for the devices it uses, not whole nodes
    assert all(r.cost_per_hour == pytest.approx(1.8 * r.world) for r in by_device.rows)
    assert all(r.cost_per_hour == pytest.approx(3.6 * r.layout.nodes) for r in by_node.rows)
    r = by_node.recommended
    assert r.samples_per_dollar == pytest.approx(r.samples_per_s * 3600 / (r.layout.nodes * 3.6))
    assert all(row.samples_per_dollar is not None for row in by_node.rows)
    assert f"{r.samples_per_dollar:.4g} samples/$" in by_node.text()
    assert _small_plan().records == tuple(a for a in _small_plan().records if not isinstance(a, CostAdvice))


@pytest.mark.parametrize("kw, match", [({"price_per_node_hour": 0}, "price_per_node_hour must be positive"),
                                       ({"price_per_device_hour": -2}, "price_per_device_hour must be positive"),
                                       ({"price_per_node_hour": 1, "price_per_device_hour": 1}, "not both"),
                                       ({"global_batch_limit": 0}, "global_batch_limit must be at least 1")])
def test_bad_prices_and_limits(kw, match):
    with pytest.raises(UsageError, match=match):
        _small_plan(**kw)


def test_global_batch_line_past_the_limit():
    from pybench.planning.records import GlobalBatchAdvice
    quiet = _small_plan()
    # across two devices the step is comm-bound here, so one device (dp 1 x micro-batch 2) is recommended
    assert quiet.recommended.global_batch == 2
    assert not any(isinstance(a, GlobalBatchAdvice) for a in quiet.records)
    loud = _small_plan(global_batch_limit=1)
    (line,) = [a for a in loud.advice if a.startswith("the global batch is 2 sequences")]
    assert "8 tokens" in line and "learning rate" in line and "warm-up" in line and "above 1" in line


def test_cli_plan_price_flags(capsys):
    from pathlib import Path
    model = str(Path(__file__).resolve().parents[1] / "fixtures" / "model_v1_allreduce.json")
    common = ["plan", "--params", "125M", "--model", model, "--tflops", "400", "--max-world", "8"]
    assert main([*common, "--price-per-node-hour", "0"]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("pybench: error: argument --price-per-node-hour: '0' must be more than 0")
    assert main([*common, "--price-per-device-hour", "2.5", "--global-batch-limit", "4", "--batch", "8"]) == 0
    out = capsys.readouterr().out
    assert "at 2.5 per device-hour" in out and "samples per dollar" in out and "the global batch is 8 sequences" in out


def test_70b_gets_the_cheapest_layout_that_fits_with_recompute_time(h100):
    from pybench.planning.choice import COST_TOLERANCE, cost_per_sample
    from pybench.planning.records import OneDevice
    p = plan("70B", 2048, 1, models=h100, flops_per_s=400e12, max_world=64)
    assert p.verdict is OneDevice.DOES_NOT_FIT
    r = p.recommended
    assert r is not None and r.memory.fits_at_all
    fitting = [x for x in p.rows if x.memory.fits_at_all and x.decisive_band is not Band.COMM_BOUND]
    assert cost_per_sample(r, None) <= min(cost_per_sample(x, None) for x in fitting) * (1 + COST_TOLERANCE)
    if r.memory.fits == "fits with checkpointing":
        assert r.recomputed  # 8 x P x tokens: the time agrees with the memory it was given
        assert r.compute_s * r.layout.tp * r.layout.pp * 400e12 == pytest.approx(
            8 * 70e9 * 2048 * r.micro_batches * r.batch, rel=1e-9)


def test_7b_with_a_target_of_four_nodes_worth(h100):
    """Issue 14's scenario: 7B, the shared 2-node H100 log, 80 GB devices, a target of 4x one node's
    samples/s: a layout its bands do not call comm-bound that meets it, or a clear "not reachable"."""
    base = plan("7B", 2048, 1, models=h100, flops_per_s=400e12, max_world=64)
    node = max(r.samples_per_s for r in base.rows if r.world <= 8 and r.memory.fits_at_all)
    p = plan("7B", 2048, 1, models=h100, flops_per_s=400e12, max_world=64, target_samples_per_s=4 * node)
    need = _need(p)
    if p.target_met:
        assert p.recommended.samples_per_s >= 4 * node
        good = [r for r in p.rows if r.memory.fits_at_all and r.samples_per_s >= 4 * node
                and r.decisive_band is not Band.COMM_BOUND]
        if good:
            assert need.verdict is NeedVerdict.TARGET_MET and p.recommended.decisive_band is not Band.COMM_BOUND
        else:  # said plainly, with the fastest layout the bands allow
            assert need.verdict is NeedVerdict.TARGET_MET_ONLY_COMM_BOUND and need.best_allowed is not None
            assert any(a.startswith("only layouts comm-bound by") and "reach the target" in a for a in p.advice)
    else:
        assert need.verdict is NeedVerdict.TARGET_NOT_REACHABLE
        assert any("nothing evaluated reaches the target" in a for a in p.advice)
        assert any("reaches" in n for n in p.notes)


def test_a_larger_batch_that_leaves_the_comm_bound_band_is_recommended(h100):
    """Issue 14: zero3 on 64 devices at exposed 0.51 was recommended for 120 samples/s while batch 2
    took the same layout to 0.16; the search (issue 25) weighs the micro-batch too and says so."""
    from pybench.planning.records import BatchAdvice, BatchVerdict
    p = plan("7B", 2048, 1, models=h100, flops_per_s=400e12, max_world=64, target_samples_per_s=120)
    r = p.recommended
    assert r.samples_per_s >= 120 and r.decisive_band is not Band.COMM_BOUND and r.batch > 1
    (adopted,) = [a for a in p.records if isinstance(a, BatchAdvice)]
    assert adopted.verdict is BatchVerdict.ADOPTED and adopted.at == r and r in p.rows
    assert adopted.row.batch == 1 and adopted.row.layout == r.layout
    assert _need(p).verdict is NeedVerdict.TARGET_MET and f"at micro-batch {r.batch}" in p.text()


# --- issue 14, point 2: the loader's rate measured by `pybench profile -n 1` ------------------------------

@pytest.fixture(scope="module")
def slow_loader_profile(tmp_path_factory):
    """A pipeline profile of the tiny synthetic MLP fed 20 ms per batch: real torch on CPU, a few steps."""
    torch = pytest.importorskip("torch")
    from pybench.io.files import write_json
    from pybench.profile.synthetic_pipeline import profile_mlp_pipeline
    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # a second spinning thread would stall the step on two shared cores
    try:
        res = profile_mlp_pipeline(2000, [1, 4], delay_s=0.020, steps=3, warmup=1)
    finally:
        torch.set_num_threads(threads)
    path = tmp_path_factory.mktemp("pipeline") / "pipe.json"
    write_json(path, res.to_dict())
    return path, res


@pytest.fixture(scope="module")
def h100_model_file(tmp_path_factory):
    """The two-node H100 log fitted to a model file (intra- and inter-node), as a user would."""
    if not LOG.exists():
        pytest.skip(f"shared logs not found at {SHARED_DATA}")
    return str(fitted_model_file(tmp_path_factory, LOG))


def _plan_cli(model):
    return ["plan", "--params", "125M", "--model", model, "--tflops", "400", "--max-world", "16"]


def test_plan_profile_caps_as_the_loader_flag_does_and_says_fix_the_input_pipeline(slow_loader_profile,
                                                                                      h100_model_file, capsys):
    import re
    path, res = slow_loader_profile
    (row,) = [r for r in res.rows if r.batch == 1]  # the row of --batch 1
    assert row.bound == "loader" and row.loader_samples_per_s is not None
    target = ["--target-samples-per-s", "1e6"]  # even with a named need, no multi-node layout
    assert main([*_plan_cli(h100_model_file), *target, "--profile", str(path)]) == 0
    got = capsys.readouterr()
    assert f"measured at batch 1 ({path})" in got.err
    assert re.search(r"^\d+\. fix the input pipeline: the data loader delivers", got.out, re.M)
    (world,) = re.findall(r"^recommended: \S+ on (\d+) devices", got.out, re.M)
    assert int(world) <= 8
    assert main([*_plan_cli(h100_model_file), *target, "--loader-samples-per-s", repr(row.loader_samples_per_s)]) == 0
    assert capsys.readouterr().out == got.out


@pytest.mark.parametrize("extra, said", [
    (["--loader-samples-per-s", "3"], "give --loader-samples-per-s or --profile, not both"),
    (["--profile", "DDP"], "a 'ddp' profile has no input-pipeline figure"),
    (["--profile", "MODEL"], "schema 'pybench.model' is not 'pybench.profile'"),
    (["--profile", "no_such.json"], "no_such.json")])
def test_plan_profile_bad_input_is_one_line_exit_2(slow_loader_profile, h100_model_file, capsys, extra, said):
    from pathlib import Path
    fixtures = Path(__file__).resolve().parents[1] / "fixtures"
    names = {"DDP": str(fixtures / "profile_20M_loopback.json"), "MODEL": str(fixtures / "model_v1_allreduce.json")}
    extra = [names.get(x, x) for x in extra]
    if "--profile" not in extra:
        extra += ["--profile", str(slow_loader_profile[0])]
    assert main([*_plan_cli(h100_model_file), *extra]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and err.startswith("pybench: error:") and said in err, err


def test_a_model_no_layout_holds_says_memory_decides_not_that_nothing_is_needed(h100):
    """70B on 8 GB devices up to 8 of them: nothing searched fits. The advice said "no named need for more
    than one node ... efficiency nan"; memory, not communication, decides, and the line says what to change."""
    p = plan("70B", 2048, 1, models=h100, flops_per_s=400e12, max_world=8, device_memory_gb=8)
    assert not any(r.memory.fits_at_all for r in p.rows) and p.recommended is None
    assert _need(p).verdict is NeedVerdict.MEMORY
    assert not any("nan" in a or "no named need" in a for a in p.advice)
    assert any("no layout searched holds it" in a for a in p.advice)


def test_plan_says_larger_batches_amortise_communication_only_where_they_do(tmp_path_factory):
    """A 13B plan on Polaris: a larger micro-batch moved the recommended layout from caution (0.26) to comm-bound
    (0.56) at a sixth of the throughput, and the line said "larger batches amortise communication"."""
    from pybench.planning.plan_result import _batch
    from pybench.planning.records import BatchAdvice, BatchVerdict

    polaris = SHARED_DATA / "nccl-tests" / "polaris_a100_2node_4gpu_slingshot_allreduce.txt"
    p = plan("13B", 4096, 1, models=str(fitted_model_file(tmp_path_factory, polaris)), flops_per_s=150e12,
             device_memory_gb=40, gpus_per_node=4, max_world=256)
    low, high = (min(p.rows, key=lambda r: r.comm_fraction), max(p.rows, key=lambda r: r.comm_fraction))
    assert low.comm_fraction < high.comm_fraction
    rising = _batch(BatchAdvice(BatchVerdict.CHANGES_BAND, low, 1, 2, 64, high))
    falling = _batch(BatchAdvice(BatchVerdict.CHANGES_BAND, high, 1, 2, 64, low))
    assert rising.startswith("larger batches do not amortise communication here"), rising
    assert falling.startswith("larger batches amortise communication:"), falling


def test_no_layout_accumulates_gradients_past_the_global_batch_limit(tmp_path_factory):
    """Step 6 says the search accumulates gradients to every global batch within the limit, but the default
    pipeline's 4p micro-batches were priced whatever the limit: a 2048-device plan recommended 4096 sequences
    (dp 128 x 32 micro-batches) against a limit of 1024. Only more replicas than the limit exceed it now."""
    polaris = SHARED_DATA / "nccl-tests" / "polaris_a100_2node_4gpu_slingshot_allreduce.txt"
    p = plan("13B", 4096, 1, models=str(fitted_model_file(tmp_path_factory, polaris)), flops_per_s=150e12,
             device_memory_gb=40, gpus_per_node=4, max_world=256, global_batch_limit=64, target_samples_per_s=1e6)
    piped = [r for r in p.rows if r.layout.pp > 1]
    assert piped and any(r.micro_batches > 1 for r in piped)
    assert all(r.global_batch <= 64 for r in p.rows if r.layout.dp <= 64), \
        sorted({(str(r.layout), r.batch, r.micro_batches) for r in p.rows if r.global_batch > 64})
