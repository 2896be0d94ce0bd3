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
