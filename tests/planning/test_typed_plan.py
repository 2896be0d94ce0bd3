"""The plan layer's typed surface: ccr(CcrConfig), str-valued enums for bands and memory fit,
advice records rendered apart from the decisions, documents from the format registry, and
library errors that name parameters while the CLI says flags."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from test_ccr import FLOPS, SHAPE, all_links, run

from pybench.cli.main import main
from pybench.cli.planning import flag_names
from pybench.errors import UsageError
from pybench.io.files import read_document
from pybench.io.formats import CCR, COMPUTE, PLAN, check_document
from pybench.planning.advice import plan
from pybench.planning.bands import Band, band
from pybench.planning.config import CcrConfig, make_ccr_config
from pybench.planning.grid import ccr
from pybench.planning.overlap import bucket_sizes
from pybench.planning.plan_result import advice_sentence
from pybench.planning.records import Advice, MemoryAdvice, OneDevice, Rule, ScaleUpAdvice, ScaleUpVerdict
from pybench.planning.strategies import MemoryFit

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"


def test_ccr_takes_a_typed_config_and_the_plain_form_builds_the_same():
    cfg = make_ccr_config(1000, 4, "1,2", "2,4", "ddp,zero1", flops_per_s=FLOPS, shape=SHAPE, gpus_per_node=2,
                          overlap=True, bucket_mb=500 / 2**20)
    assert isinstance(cfg, CcrConfig) and cfg.batches == (1, 2) and cfg.strategies == ("ddp", "zero1")
    typed = ccr(cfg, models=all_links("allreduce"))
    plain = run("ddp,zero1", world="2,4", batch="1,2", overlap=True, bucket_mb=500 / 2**20)
    assert typed.to_dict() == plain.to_dict()
    assert typed.table() == plain.table()


def test_a_config_refuses_bad_fields_by_name():
    cfg = make_ccr_config(1000, 4, 2, 4, flops_per_s=FLOPS, shape=SHAPE)
    with pytest.raises(UsageError, match="^bucket_bytes must be positive"):
        CcrConfig(**{**cfg.__dict__, "bucket_bytes": 0})
    with pytest.raises(UsageError, match="^straggler_cv must be 0 or more"):
        CcrConfig(**{**cfg.__dict__, "straggler_cv": -1.0})


def test_bands_and_memory_fit_are_enums_that_read_as_their_strings():
    assert band(0.1) is Band.FITS and band(0.2) is Band.CAUTION and band(0.5) is Band.COMM_BOUND
    assert f"{Band.COMM_BOUND:>11}" == " comm-bound" and str(Band.FITS) == "fits"
    (r,) = run().rows
    assert r.band is Band.COMM_BOUND and r.memory.fits is MemoryFit.FITS
    d = json.loads(json.dumps(r.to_dict()))
    assert d["band"] == "comm-bound" and d["memory"]["fits"] == "fits"
    assert "comm-bound" in run().table() and "Band." not in run().table()


def test_plan_returns_records_rendered_by_separate_functions():
    p = plan(1000, 4, 2, models=all_links("allreduce"), flops_per_s=FLOPS, gpus_per_node=2, shape=SHAPE,
             device_memory_gb=100000 / 1e9, max_world=8)
    assert all(isinstance(a, Advice) for a in p.records)
    first = p.records[0]
    assert isinstance(first, MemoryAdvice) and first.verdict is OneDevice.FITS and first.one.total_bytes == 20352
    up = next(a for a in p.records if isinstance(a, ScaleUpAdvice))
    assert up.node.world == 2 and up.rule is Rule.SCALE_UP
    assert p.advice == tuple(advice_sentence(a) for a in p.records)
    # 2 devices at eff 0.50 train no faster than one: the record says so rather than advising to fill the node
    assert up.verdict is ScaleUpVerdict.NO_GAIN and p.advice[1].startswith("do not scale up with DDP: one node (2 dev")
    doc = p.to_dict()
    assert [rec["rule"] for rec in doc["records"]] == [a.rule for a in p.records]
    assert doc["records"][1]["node"]["world"] == 2 and doc["advice"] == list(p.advice)
    json.dumps(doc)


def test_documents_come_from_the_registry(tmp_path):
    res = run()
    check_document(json.loads(json.dumps(res.to_dict())), CCR, "ccr")
    p = plan(1000, 4, 2, models=all_links("allreduce"), flops_per_s=FLOPS, gpus_per_node=2, shape=SHAPE,
             device_memory_gb=1e-4, max_world=4)
    check_document(json.loads(json.dumps(p.to_dict())), PLAN, "plan")
    from pybench.planning.compute import load_compute
    prof = load_compute(FIXTURES / "compute_profile_v1.json")
    path = tmp_path / "c.json"
    prof.save(path)
    assert read_document(path, COMPUTE)["flops_per_s"] == pytest.approx(prof.flops_per_s)


def test_library_errors_name_parameters_not_flags():
    with pytest.raises(UsageError, match="^bucket_bytes must be positive") as exc:
        bucket_sizes(100.0, 0.0)
    assert "--" not in str(exc.value)
    for kwargs in ({"bucket_mb": 0}, {"device_memory_gb": -1}, {"gpus_per_node": 0}, {"straggler_cv": -1},
                   {"micro_batches": 0}, {"price_per_node_hour": 0}, {"big_node_gpus": 8}):
        with pytest.raises(UsageError) as exc:
            run(**kwargs)
        assert "--" not in str(exc.value), str(exc.value)
    with pytest.raises(UsageError, match="^max_world must be at least 1"):
        plan(1000, 4, 2, models=all_links("allreduce"), flops_per_s=FLOPS, shape=SHAPE, max_world=0)


@pytest.mark.parametrize("message, said", [
    ("bucket_mb must be positive, got 0", "--bucket-mb must be positive, got 0"),
    ("batch must be at least 1, got 0", "--batch must be at least 1, got 0"),
    ("pp: 4 x stages (set micro_batches); bubble", "pp: 4 x stages (set --micro-batches); bubble"),
    ("rerun compute with params=7B", "rerun compute with --params 7B"),
    ("models for backends mpi, nccl: using nccl (choose with backend=NAME)",
     "models for backends mpi, nccl: using nccl (choose with --backend NAME)"),
    ("batch 2 of world 8", "batch 2 of world 8"),  # plain words stay words
    ("peak_flops_per_s must be positive", "--peak-tflops must be positive"),
])
def test_flag_names(message, said):
    assert flag_names(message) == said
    assert flag_names(said) == said


def test_cli_says_flags_for_library_errors(capsys):
    """Values the argument types pass but the library refuses come back naming the flag, not the parameter."""
    model = str(FIXTURES / "model_v1_allreduce.json")
    common = ["ccr", "--params", "125M", "--model", model, "--tflops", "100"]
    assert main([*common, "--world", "0"]) == 2
    assert capsys.readouterr().err.strip() == "pybench: error: --world must be at least 1, got '0'"
    assert main([*common, "--world", "8", "--batch", "0,2"]) == 2
    assert capsys.readouterr().err.strip() == "pybench: error: --batch must be at least 1, got '0'"
    # range checks the argument types make also name the flag, and say the range
    assert main([*common, "--world", "8", "--bucket-mb", "0"]) == 2
    assert "argument --bucket-mb: '0' must be more than 0" in capsys.readouterr().err
    assert main([*common, "--world", "8", "--straggler-cv", "-1"]) == 2
    assert "argument --straggler-cv: '-1' must be at least 0" in capsys.readouterr().err
    assert main(["plan", "--params", "125M", "--model", model, "--tflops", "100", "--batch", "0"]) == 2
    assert "argument --batch: '0' must be at least 1" in capsys.readouterr().err


def test_cli_ccr_and_plan_write_registry_documents(tmp_path, capsys):
    model = str(FIXTURES / "model_v1_allreduce.json")
    out = tmp_path / "ccr.json"
    assert main(["ccr", "--params", "125M", "--model", model, "--tflops", "100", "--world", "2,8",
                 "--strategy", "ddp,pp", "--json", str(out)]) == 0
    text = capsys.readouterr().out
    assert "(set --micro-batches)" in text and "micro_batches" not in text
    doc = read_document(out, CCR)
    assert len(doc["rows"]) == 4 and any("(set --micro-batches)" in n for n in doc["notes"])
    pout = tmp_path / "plan.json"
    assert main(["plan", "--params", "125M", "--model", model, "--tflops", "100", "--max-world", "8",
                 "--json", str(pout)]) == 0
    assert "verdict: fits one device" in capsys.readouterr().out
    assert read_document(pout, PLAN)["records"][0]["rule"] == "memory"
