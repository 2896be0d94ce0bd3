"""A model file without topology models still takes --link presets; the recommendation shows the loader's cap."""

from __future__ import annotations

from pathlib import Path

from pybench.cli.main import main

MODEL = str(Path(__file__).resolve().parents[1] / "fixtures" / "model_v1_allreduce.json")  # intra-node only
COMMON = ["plan", "--params", "125M", "--model", MODEL, "--tflops", "400"]


def test_an_inter_node_preset_prices_multi_node_layouts_of_a_piecewise_only_file(capsys):
    assert main([*COMMON, "--max-world", "16"]) == 2
    assert "no allreduce model for inter-node links" in capsys.readouterr().err
    assert main([*COMMON, "--max-world", "16", "--link", "ib-ndr"]) == 0
    out = capsys.readouterr().out
    assert "inter-node preset ib-ndr" in out and "recommended:" in out


def test_the_recommendation_says_when_the_loader_caps_it(capsys):
    assert main([*COMMON, "--max-world", "8", "--loader-samples-per-s", "49"]) == 0
    rec = next(line for line in capsys.readouterr().out.splitlines() if line.startswith("recommended:"))
    world = int(rec.split(" on ")[1].split(" device")[0])
    assert rec.endswith(f"the data loader caps it at {49 * world:.2f} samples/s"), rec


def test_a_system_the_measured_models_need_not_is_said_not_dropped(tmp_path_factory, capsys):
    # ccr --system on a file that measured both link classes printed what it printed without it
    from conftest import PUBLIC_LOGS
    from shared_models import fitted

    from pybench.planning.ccr import ccr
    from pybench.planning.model_set import ModelSet
    model = fitted(tmp_path_factory, "xr01_g8", [PUBLIC_LOGS / "xr01_h100_N1_G8_002.log",
                                                 PUBLIC_LOGS / "xr01_h100_N2_G8_002_003.log"])
    capsys.readouterr()
    argv = ["ccr", "--params", "7B", "--seq", "4096", "--world", "8,16", "--model", model, "--tflops", "300"]
    assert main([*argv, "--system", "ethernet-25g"]) == 0
    said = [ln for ln in capsys.readouterr().err.splitlines() if "system ethernet-25g" in ln]
    assert any("alltoall, sendrecv models: measured both link classes" in ln for ln in said)
    assert any("more than ethernet-25g's 1 x 25 Gb/s NICs per node carry" in ln for ln in said)
    from pybench.model.model_files import load_models
    res = ccr("7B", 4096, 1, 8, "ddp", models=ModelSet(load_models(model)), flops_per_s=300e12, system="dgx-h100")
    assert any("system dgx-h100 sets the GPUs per node only" in w for w in res.warnings)
