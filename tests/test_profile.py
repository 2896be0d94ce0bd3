"""pybench.profile_step: the measured CCR of a real DDP step (torch, gloo, 2 ranks) and its decomposition.

Behaviour only: fractions in [0, 1], compute + exposed communication adds up to
the step, the prediction sits beside the measurement; never a wall-clock bound.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from pybench import profile_step as ps

FIXTURES = Path(__file__).with_name("fixtures")
# The trace's compute + exposed communication must account for the synchronised step
# up to the gaps between ops (Python between autograd nodes), a few percent here.
DECOMPOSITION_TOLERANCE = 0.25


# -- interval arithmetic (no torch) ------------------------------------------------------

def test_merge_and_overlap_counted_once():
    assert ps.merge([(0, 2), (1, 3), (5, 6), (6, 7)]) == [(0, 3), (5, 7)]
    assert ps.total([(0, 2), (1, 3)]) == 3
    assert ps.intersection([(0, 4)], [(1, 2), (3, 6)]) == 2


def test_decompose_adds_up():
    # step 0..10; compute 0..6; comm 4..9 on two threads that overlap each other
    t = ps.decompose((0, 10), [(0, 3), (2, 6)], [(4, 8), (5, 9)])
    assert (t.compute_s, t.comm_s, t.overlap_s, t.exposed_s, t.idle_s) == (6, 5, 2, 3, 1)
    assert t.compute_s + t.exposed_s + t.idle_s == t.step_s


def test_mlp_shape_hits_the_parameter_count():
    w, layers = ps.mlp_shape(20_000_000)
    assert abs(layers * (w * w + w) - 20e6) / 20e6 < 0.15


# -- a real run -----------------------------------------------------------------------

@pytest.fixture(scope="module")
def tiny_profile(tmp_path_factory, native):
    pytest.importorskip("torch")
    out = tmp_path_factory.mktemp("profile")
    proc = subprocess.run([sys.executable, "-m", "pybench.cli_profile", "profile", "--params", "300K",
                           "--batch", "8,32", "--steps", "3", "--warmup", "2", "--json", str(out / "p.json")],
                          cwd=out, capture_output=True, text=True, timeout=180, stdin=subprocess.DEVNULL)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return json.loads((out / "p.json").read_text()), proc.stdout


def test_profile_measures_a_consistent_step(tiny_profile):
    d, stdout = tiny_profile
    assert d["schema"] == "pybench.profile" and d["world_size"] == 2 and d["process_group"] == "gloo"
    assert [r["batch"] for r in d["rows"]] == [8, 32]
    for r in d["rows"]:
        assert 0.0 <= r["ccr"] <= 1.0 and 0.0 <= r["exposed_fraction"] <= 1.0
        assert r["buckets"] >= 1 and sum(r["bucket_bytes"]) == r["grad_bytes"]
        # the trace decomposition: compute + exposed + idle is the step, and idle is small
        assert r["trace_compute_s"] + r["trace_exposed_s"] + r["trace_idle_s"] == pytest.approx(r["trace_step_s"],
                                                                                                  rel=1e-6)
        assert r["trace_mismatch"] <= DECOMPOSITION_TOLERANCE
        assert r["trace_comm_s"] > 0 and r["trace_exposed_s"] <= r["trace_comm_s"] + 1e-9
        assert 0.0 <= r["pred_ccr"] <= 1.0 and r["ccr_diff"] == pytest.approx(r["pred_ccr"] - r["ccr"])
    assert "pred_ccr" in stdout and "comm model: fitted here" in stdout


def test_profile_bad_input_is_one_line_exit_2(tmp_path):
    for args in (["--batch", "0"], ["--strategy", "zero3"], ["--params", "abc"]):
        proc = subprocess.run([sys.executable, "-m", "pybench.cli_profile", "profile", *args], cwd=tmp_path,
                              capture_output=True, text=True, timeout=60)
        assert proc.returncode == 2, (args, proc.stderr)
        assert len(proc.stderr.strip().splitlines()) == 1 and proc.stderr.startswith("pybench: error:")


def test_stored_measurement_keeps_its_invariants():
    """The 20M-parameter run over a 1 Gbit/s namespace link that the README quotes."""
    path = FIXTURES / "profile_20M_netns_1gbit.json"
    if not path.exists():
        pytest.skip("fixture not recorded")
    d = json.loads(path.read_text())
    assert d["link_class"] == "inter-node" and d["comm_model"]
    fr = [r["exposed_fraction"] for r in d["rows"]]
    assert fr[0] > 0.5 > fr[-1]  # the smallest batch waits on the link, the largest mostly computes
    for r in d["rows"]:
        assert r["trace_mismatch"] <= DECOMPOSITION_TOLERANCE
        assert r["buckets"] == len(r["bucket_bytes"]) >= 3


def test_stored_prediction_is_reproduced_from_the_stored_model():
    """The prediction beside the measurement is pybench.ccr's, from the model fitted through the namespaces."""
    path = FIXTURES / "profile_20M_netns_1gbit.json"
    model = FIXTURES / "profile_torch_gloo_netns_1gbit_model.json"
    if not path.exists() or not model.exists():
        pytest.skip("fixture not recorded")
    from pybench.ccr import ccr, load_model_set
    d = json.loads(path.read_text())
    models = load_model_set(str(model), backend="torch")
    for r in d["rows"]:
        est = ccr(d["params"], seq=1, batch=r["batch"], world=2, strategy="ddp", models=models,
                  flops_per_s=r["flops_per_s"], gpus_per_node=1, overlap=True, bucket_mb=25,
                  comm_bytes_per_value=4, device_memory_gb=1e6, bucket_sizes_bytes=r["bucket_bytes"]).rows[0]
        assert est.ccr == pytest.approx(r["pred_ccr"], rel=1e-9)
        assert est.exposed_fraction == pytest.approx(r["pred_exposed_fraction"], rel=1e-9)
        buckets = sum(models.time("allreduce", s, 2, "inter-node").time_s for s in r["bucket_bytes"])
        assert buckets == pytest.approx(r["pred_comm_buckets_s"], rel=1e-9)
