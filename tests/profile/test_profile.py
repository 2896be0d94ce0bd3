"""pybench.profile: the measured CCR of a real DDP step (torch, gloo, 2 ranks) and its decomposition.

Behaviour only: fractions in [0, 1], compute + exposed communication adds up to
the step, the prediction sits beside the measurement; never a wall-clock bound.
"""

from __future__ import annotations

import json
import math
import subprocess
import sys
from pathlib import Path

import pytest

from pybench.errors import UsageError
from pybench.profile import mlp
from pybench.profile import trace as ps

FIXTURES = (Path(__file__).resolve().parents[1] / "fixtures")
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


def test_median_step_is_a_whole_step():
    steps = [ps.StepTrace(s, s / 2, 1, 0.5, 0.5, s / 2 - 0.5) for s in (3.0, 1.0, 2.0, 4.0)]
    assert ps.median_step(steps).step_s == 2.0 and ps.median_step([]) is None


def test_result_document_is_stamped_and_strict_json():
    """The document is a pybench.profile file from the registry; a figure that could not be measured is null."""
    from pybench.io.files import json_text, parse_json
    from pybench.io.formats import PROFILE, check_document
    from pybench.profile.result import ProfileResult, ProfileRow
    row = ProfileRow(batch=8, steps=3, buckets=1, bucket_bytes=[400], grad_bytes=400, compute_s=1.0, step_s=2.0,
                     exposed_s=1.0, comm_s=1.0, trace_step_s=2.0, trace_compute_s=1.0, trace_comm_s=1.0,
                     trace_exposed_s=1.0, trace_overlap_s=0.0, trace_idle_s=0.0, ccr=0.5, exposed_fraction=0.5,
                     backward_share=float("nan"), ready_fractions=[float("inf")])
    res = ProfileResult(params=100, world_size=2, hosts=["a", "a"], link_class="intra-node", process_group="gloo",
                        torch_version="x", rows=[row], fitted=object())
    doc = check_document(parse_json(json_text(res.to_dict()), "p.json"), PROFILE, "p.json")
    assert doc["rows"][0]["backward_share"] is None and doc["rows"][0]["ready_fractions"] == [None]
    assert "fitted" not in doc and doc["trace_files"] == [] and "ccr_diff" not in doc["rows"][0]
    assert "       8        1" in res.table()


def test_mlp_shape_hits_the_parameter_count():
    w, layers = mlp.mlp_shape(20_000_000)
    assert abs(layers * (w * w + w) - 20e6) / 20e6 < 0.15
    with pytest.raises(UsageError, match="^params 500 is too small"):  # the parameter, not the flag
        mlp.mlp_shape(500)


# -- a real run -----------------------------------------------------------------------

@pytest.fixture(scope="module")
def tiny_profile(tmp_path_factory, native):
    pytest.importorskip("torch")
    out = tmp_path_factory.mktemp("profile")
    proc = subprocess.run([sys.executable, "-m", "pybench.cli.profile", "profile", "--params", "300K",
                           "--batch", "8,32", "--steps", "3", "--warmup", "2", "--json", str(out / "p.json"),
                           "--trace-dir", "traces"],
                          cwd=out, capture_output=True, text=True, timeout=180, stdin=subprocess.DEVNULL)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return json.loads((out / "p.json").read_text()), proc.stdout, proc.stderr, out


def test_profile_measures_a_consistent_step(tiny_profile):
    d, stdout, _, _ = tiny_profile
    assert d["schema"] == "pybench.profile" and d["world_size"] == 2 and d["process_group"] == "gloo"
    assert [r["batch"] for r in d["rows"]] == [8, 32]
    for r in d["rows"]:
        assert 0.0 <= r["ccr"] <= 1.0 and 0.0 <= r["exposed_fraction"] <= 1.0
        assert r["buckets"] >= 1 and sum(r["bucket_bytes"]) == r["grad_bytes"]
        # the trace decomposition: compute + exposed + idle is the step, and idle is small
        assert r["trace_compute_s"] + r["trace_exposed_s"] + r["trace_idle_s"] == pytest.approx(r["trace_step_s"],
                                                                                                  rel=1e-6)
        # How well the trace accounts for the wall-clock step depends on the Python gaps between ops,
        # which grow on a busy machine: a live run only checks it is a figure; the stored runs hold the bound.
        assert math.isfinite(r["trace_mismatch"]) and r["trace_mismatch"] >= 0.0
        assert r["trace_comm_s"] > 0 and r["trace_exposed_s"] <= r["trace_comm_s"] + 1e-9
        assert 0.0 <= r["pred_ccr"] <= 1.0 and r["ccr_diff"] == pytest.approx(r["pred_ccr"] - r["ccr"])
        # the overlap profile came from this run's hooks and CPU meter
        assert len(r["ready_fractions"]) == r["buckets"] and r["ready_fractions"][-1] == 1.0
        assert 0.0 < r["backward_share"] <= 1.0 and 0.0 <= r["compute_slowdown"] <= 1.0
        assert r["copy_in_s"] > 0 and r["copy_out_s"] > 0  # DDP's default copies gradients into its buckets
    assert "pred_ccr" in stdout and "comm model: fitted here" in stdout and "overlap: buckets ready at" in stdout


def test_profile_saves_the_traces_it_read_and_kineto_stays_quiet(tiny_profile):
    """--trace-dir: one Chrome trace per batch size and rank, holding the steps the decomposition read."""
    d, stdout, stderr, out = tiny_profile
    names = sorted(p.name for p in (out / "traces").iterdir())
    assert names == [f"profile_batch{b}_rank{r}.json" for b in (32, 8) for r in (0, 1)]
    assert d["trace_files"] == [str(Path("traces") / f"profile_batch{b}_rank{r}.json") for b in (8, 32) for r in (0, 1)]
    for name in names:
        events = json.loads((out / "traces" / name).read_text())["traceEvents"]
        ops = {e.get("name", "") for e in events}
        assert {f"pybench.step{i}" for i in range(3)} <= ops and {f"pybench.nosync{i}" for i in range(3)} <= ops
        assert any(op.startswith("gloo:") for op in ops)  # the communication the trace decomposition counted
    assert "perfetto" in stdout
    # kineto's own STAGE / USDT lines are silenced
    assert not [line for line in stderr.splitlines() if line.startswith(("STAGE:", "USDT:"))], stderr[-2000:]


def test_profile_refuses_a_trace_dir_it_cannot_use(tmp_path):
    (tmp_path / "file").write_text("x")
    (tmp_path / "old").mkdir()
    (tmp_path / "old" / "profile_batch4_rank1.json").write_text("{}")
    for args, said in ((["--trace-dir", "file"], "not a folder"), (["--trace-dir", "no/such"], "does not exist"),
                       (["--trace-dir", "old"], "--force")):
        proc = subprocess.run([sys.executable, "-m", "pybench.cli.profile", "profile", "--batch", "4", *args],
                              cwd=tmp_path, capture_output=True, text=True, timeout=60)
        assert proc.returncode == 2, (args, proc.stderr)
        assert len(proc.stderr.strip().splitlines()) == 1 and said in proc.stderr, proc.stderr


def test_profile_bad_input_is_one_line_exit_2(tmp_path):
    for args in (["--batch", "0"], ["--strategy", "zero3"], ["--params", "abc"]):
        proc = subprocess.run([sys.executable, "-m", "pybench.cli.profile", "profile", *args], cwd=tmp_path,
                              capture_output=True, text=True, timeout=60)
        assert proc.returncode == 2, (args, proc.stderr)
        assert len(proc.stderr.strip().splitlines()) == 1 and proc.stderr.startswith("pybench: error:")


REPEATS = ["profile_20M_netns_1gbit.json", "profile_20M_netns_1gbit_repeat2.json",
           "profile_20M_netns_1gbit_repeat3.json"]


def _stored(name):
    path = FIXTURES / name
    if not path.exists():
        pytest.skip(f"fixture {name} not recorded")
    return json.loads(path.read_text())


LOOPBACK = ["profile_20M_loopback.json", "profile_20M_loopback_repeat2.json"]


@pytest.mark.parametrize("name", REPEATS + LOOPBACK)
def test_stored_measurement_keeps_its_invariants(name):
    """The 20M-parameter runs the README quotes: 1 Gbit/s between namespaces (3 repeats), and loopback."""
    d = _stored(name)
    assert d["comm_model"] and d["link_class"] == ("intra-node" if "loopback" in name else "inter-node")
    fr = [r["exposed_fraction"] for r in d["rows"]]
    assert fr[0] > 0.5 and fr[-1] < 0.15  # the smallest batch waits on the link, the largest mostly computes
    for r in d["rows"]:
        assert r["trace_mismatch"] <= DECOMPOSITION_TOLERANCE
        assert r["buckets"] == len(r["bucket_bytes"]) == len(r["ready_fractions"]) >= 3
        assert r["ready_fractions"] == sorted(r["ready_fractions"]) and r["ready_fractions"][-1] == 1.0
        assert 0.0 <= r["compute_slowdown"] < 1.0 and r["comm_cpu_cores"] >= 0.0
        assert r["copy_in_s"] > 0 and r["copy_out_s"] > 0
        # this MLP's first layer computes no input gradient, so its buckets are ready later than their
        # bytes say; contention and the bucket copies can only add exposed time
        assert r["pred_exposed_fraction_uniform"] <= r["pred_exposed_fraction_readiness"] + 1e-12
        assert r["pred_exposed_fraction_readiness"] <= r["pred_exposed_fraction_contention"] + 1e-12
        assert r["pred_exposed_fraction_contention"] <= r["pred_exposed_fraction"] + 1e-12


def test_stored_repeats_meet_the_reality_check():
    """Issue 6's acceptance on the recorded runs: at every batch, in every repeat, prediction within
    0.05 of the measurement for the serial CCR and the exposed fraction; batches spanning < 0.15 to > 0.5."""
    runs = [_stored(n) for n in REPEATS]
    for d in runs:
        fr = [r["exposed_fraction"] for r in d["rows"]]
        assert min(fr) < 0.15 and max(fr) > 0.5 and len(fr) >= 4
        for r in d["rows"]:
            assert abs(r["ccr_diff"]) <= 0.05, (r["batch"], r["ccr_diff"])
            assert abs(r["exposed_fraction_diff"]) <= 0.05, (r["batch"], r["exposed_fraction_diff"])


@pytest.mark.parametrize("name", REPEATS)
def test_stored_prediction_is_reproduced_from_the_stored_model(name):
    """The prediction beside the measurement is pybench.ccr's, from the stored model and overlap profile."""
    from pybench.planning.ccr import ccr, load_model_set
    from pybench.planning.overlap import OverlapProfile
    d = _stored(name)
    models = load_model_set(str(FIXTURES / "profile_torch_gloo_netns_1gbit_model.json"), backend="torch")
    for r in d["rows"]:
        def predict(profile, r=r):
            return ccr(d["params"], seq=1, batch=r["batch"], world=2, strategy="ddp", models=models,
                       flops_per_s=r["flops_per_s"], gpus_per_node=1, overlap=True, bucket_mb=25,
                       comm_bytes_per_value=4, device_memory_gb=1e6, bucket_sizes_bytes=r["bucket_bytes"],
                       overlap_profile=profile).rows[0]
        est = predict(OverlapProfile(tuple(r["ready_fractions"]), r["backward_share"], r["compute_slowdown"],
                                     copy_in_s=r["copy_in_s"], copy_out_s=r["copy_out_s"]))
        assert est.ccr == pytest.approx(r["pred_ccr"], rel=1e-9)
        assert est.exposed_fraction == pytest.approx(r["pred_exposed_fraction"], rel=1e-9)
        assert predict(None).exposed_fraction == pytest.approx(r["pred_exposed_fraction_uniform"], rel=1e-9)
        buckets = sum(models.time("allreduce", s, 2, "inter-node").time_s for s in r["bucket_bytes"])
        assert buckets == pytest.approx(r["pred_comm_buckets_s"], rel=1e-9)


USER_SCRIPT = '''
import json, sys, torch, torch.distributed as dist
from pybench.measure.backends.torch import TorchBackend
from pybench.profile.step import profile_step

class TwoHeads(torch.nn.Module):  # a user's model: its output is a dict, not one tensor
    def __init__(self):
        super().__init__()
        self.body = torch.nn.Sequential(torch.nn.Linear(256, 256), torch.nn.ReLU(), torch.nn.Linear(256, 256))
        self.head, self.aux = torch.nn.Linear(256, 10), torch.nn.Linear(256, 1)
    def forward(self, x):
        h = self.body(x)
        return {"logits": self.head(h), "aux": self.aux(h)}

def step(model, batch):
    x, y = batch
    out = model(x)
    loss = torch.nn.functional.cross_entropy(out["logits"], y) + out["aux"].square().mean()
    model.zero_grad(set_to_none=True)
    loss.backward()

torch.manual_seed(0)
backend = TorchBackend()
backend.start()
res = profile_step(TwoHeads(), step, [4, 64], lambda b: (torch.randn(b, 256), torch.randint(0, 10, (b,))),
                   steps=3, warmup=1, bucket_mb=0.25, label="two heads")
if dist.get_rank() == 0:
    open(sys.argv[1], "w").write(json.dumps(res.to_dict()))
backend.finish()
'''


def test_profile_step_api_with_a_users_model_under_torchrun(tmp_path, native):
    """The Python API on a user's own model and step function, launched by torchrun."""
    pytest.importorskip("torch")
    (tmp_path / "user.py").write_text(USER_SCRIPT)
    out = tmp_path / "u.json"
    proc = subprocess.run([sys.executable, "-m", "torch.distributed.run", "--nproc-per-node", "2", "user.py",
                           str(out)], cwd=tmp_path, capture_output=True, text=True, timeout=180,
                          stdin=subprocess.DEVNULL)
    assert proc.returncode == 0, proc.stderr[-3000:]
    d = json.loads(out.read_text())
    assert d["model"] == "two heads" and d["world_size"] == 2 and [r["batch"] for r in d["rows"]] == [4, 64]
    for r in d["rows"]:
        assert r["buckets"] >= 2 and sum(r["bucket_bytes"]) == r["grad_bytes"]  # 0.25 MiB buckets: several
        # backward start came from the dict output's tensors, so readiness was measured, not assumed
        assert r["ready_fractions"] is not None and len(r["ready_fractions"]) == r["buckets"]
        assert r["ready_fractions"][-1] == 1.0 and 0.0 < r["backward_share"] <= 1.0
        assert 0.0 <= r["exposed_fraction"] <= 1.0 and r["pred_exposed_fraction"] is not None
