"""pybench.profile.pipeline: one device's step split into data wait, copy, forward, backward, optimizer.

Real torch on CPU, a tiny MLP and a few steps. The loader's delay is slept inside next(), so a
data wait of at least the delay is a fact, not a timing guess; the other checks are ratios.
"""

from __future__ import annotations

import json
import math

import pytest
from conftest import REPO

from pybench.cli.main import main
from pybench.errors import FileFormatError, UsageError
from pybench.io.files import json_text, parse_json
from pybench.io.formats import PROFILE, check_document
from pybench.profile.pipeline import profile_pipeline
from pybench.profile.pipeline_result import loader_rate
from pybench.profile.synthetic_pipeline import SyntheticLoader, profile_mlp_pipeline

torch = pytest.importorskip("torch")

# Between the parts' ranges run only a few Python lines; medians of separate parts need not add
# up exactly to the median step, so the split must account for the step within this share.
DELAY_S = 0.020
TINY = 2000  # parameters: a 16-wide MLP, a step of about a millisecond


@pytest.fixture
def one_thread():
    """One intra-op thread: on two shared cores, a second spinning thread would stall the step."""
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


def _users_model_and_loader():
    from torch.utils.data import DataLoader, TensorDataset
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(8, 32), torch.nn.ReLU(), torch.nn.Linear(32, 1))
    data = TensorDataset(torch.randn(256, 8), torch.randn(256, 1))

    def loss_fn(m, batch):
        x, y = batch
        return torch.nn.functional.mse_loss(m(x), y)
    return model, (lambda b: DataLoader(data, batch_size=b, shuffle=True)), loss_fn


def test_the_split_adds_up_to_the_step_for_a_users_model_and_loader(one_thread):
    model, loaders, loss_fn = _users_model_and_loader()
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    res = profile_pipeline(model, loaders, loss_fn, opt, batches=[4, 16], steps=4, warmup=1)
    assert [r.batch for r in res.rows] == [4, 16] and res.device == "cpu"
    for r in res.rows:
        parts = (r.data_wait_s, r.h2d_s, r.forward_s, r.backward_s, r.optimizer_s)
        assert all(p > 0 for p in parts), parts
        # How closely the parts add up to the step depends on the gaps between them, which a busy machine
        # widens: a live run checks each is a figure, not how close (no test may fail on a busy machine).
        assert 0 < r.parts_s < math.inf and 0 < r.trace_step_s < math.inf and r.step_s > 0
        assert r.compute_samples_per_s == pytest.approx(r.batch / r.compute_s)


def test_one_loader_gives_its_batch_size_and_running_out_is_one_line(one_thread):
    model, loaders, loss_fn = _users_model_and_loader()
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    res = profile_pipeline(model, loaders(8), loss_fn, opt, steps=2, warmup=1)
    assert [r.batch for r in res.rows] == [8] and res.loader == "DataLoader"
    with pytest.raises(UsageError, match="the loader ran out after 4 batches; steps and warmup need 5"):
        profile_pipeline(model, list(loaders(8))[:4], loss_fn, opt, steps=4, warmup=1)


def test_a_slow_loader_is_the_bound(one_thread):
    slow = profile_mlp_pipeline(TINY, [4], delay_s=DELAY_S, steps=5, warmup=1).rows[0]
    assert slow.data_wait_s >= DELAY_S and slow.bound == "loader"
    assert slow.loader_samples_per_s == pytest.approx(4 / slow.data_wait_s) and slow.loader_samples_per_s <= 4 / DELAY_S
    assert slow.loader_samples_per_s < slow.compute_samples_per_s
    fast = profile_mlp_pipeline(TINY, [4], delay_s=0.0, steps=5, warmup=1).rows[0]
    assert fast.data_wait_s < DELAY_S and fast.bound == "compute"


def test_the_document_is_a_pipeline_profile_and_gives_the_loader_rate(one_thread):
    res = profile_mlp_pipeline(TINY, [1, 4], delay_s=DELAY_S, steps=2, warmup=1)
    doc = check_document(parse_json(json_text(res.to_dict()), "p.json"), PROFILE, "p.json")
    assert doc["kind"] == "pipeline" and [r["bound"] for r in doc["rows"]] == ["loader", "loader"]
    rates = {r["batch"]: r["loader_samples_per_s"] for r in doc["rows"]}
    assert loader_rate(doc, "p.json", 1) == (rates[1], 1)
    assert loader_rate(doc, "p.json", 7) == max((v, k) for k, v in rates.items())  # not measured: the fastest
    assert "loader" in res.table().splitlines()[3]


@pytest.mark.parametrize("doc, said", [
    ("profile_20M_loopback.json", "a 'ddp' profile has no input-pipeline figure"),
    ({"kind": "pipeline", "rows": [{"batch": 4, "loader_samples_per_s": None}]}, "no row has a loader rate"),
    ({"kind": "pipeline", "rows": "x"}, "rows: Input should be a valid list"),
    ({"kind": "pipeline", "rows": [{"batch": 4, "loader_samples_per_s": "fast"}]}, "Input should be a valid number")])
def test_a_profile_without_a_loader_figure_is_refused(doc, said):
    if isinstance(doc, str):
        doc = json.loads((REPO / "tests" / "fixtures" / doc).read_text())
    with pytest.raises(FileFormatError, match=said):
        loader_rate(doc, "p.json")


@pytest.mark.parametrize("kw, said", [({"steps": 0}, "steps must be"), ({"warmup": -1}, "warmup must be"),
                                      ({"batches": [0]}, "batches must be"), ({"batches": [2, 4]}, "one loader")])
def test_bad_arguments_name_the_parameter(kw, said):
    model = torch.nn.Linear(2, 1)
    with pytest.raises(UsageError, match=said):
        profile_pipeline(model, [torch.zeros(2, 2)], lambda m, b: m(b).sum(), None, **kw)
    with pytest.raises(UsageError, match="delay_s must be 0 or more"):
        SyntheticLoader(2, 2, 1, delay_s=-1)


def test_cli_profile_n1_prints_the_split_and_writes_the_document(tmp_path, capsys, one_thread):
    out = tmp_path / "pipe.json"
    argv = ["profile", "-n", "1", "--params", str(TINY), "--batch", "2,8", "--loader-delay-ms", "20",
            "--steps", "3", "--warmup", "1", "--json", str(out)]
    assert main(argv) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].startswith("# input pipeline: mlp") and "20 ms per batch" in lines[0]
    assert [ln.split()[0] for ln in lines[3:5]] == ["2", "8"] and all(ln.endswith("loader") for ln in lines[3:5])
    doc = json.loads(out.read_text())
    assert doc["kind"] == "pipeline" and all(r["data_wait_s"] >= 0.020 for r in doc["rows"])


@pytest.mark.parametrize("args, said", [
    (["-n", "1", "--loader-delay-ms", "-1"], "argument --loader-delay-ms: '-1' must be at least 0"),
    (["-n", "0"], "argument -n/--nprocs: '0' must be at least 1"),
    (["-n", "2", "--loader-delay-ms", "5"], "--loader-delay-ms is for the input-pipeline profile, -n 1"),
    (["-n", "1", "--netns", "1gbit"], "--netns is for the DDP profile"),
    (["-n", "1", "--batch", "0"], "--batch values must be 1 to")])
def test_cli_bad_input_is_one_line_exit_2(args, said, capsys):
    assert main(["profile", "--params", str(TINY), *args]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and err.startswith("pybench: error:") and said in err, err
