"""GEMM timing: FLOP/s arithmetic with a fake clock, scaling, dtype fallback,
JSON round trip, a real tiny numpy timing and the CLI glue."""

import argparse
import json
import math
import os
import sys

import pytest

from pybench.cli import planning as cli_planning
from pybench.errors import BackendUnavailable, FileFormatError, UsageError
from pybench.planning.compute import (
    DEFAULT_CPU_MAX_GEMM_FLOPS,
    ComputeProfile,
    GemmTiming,
    get_engine,
    load_compute,
    profile_compute,
    time_gemm,
    timed_tokens_for,
)
from pybench.planning.transformer import TransformerShape, shape_for_params, shape_from_dims, step_gemms

FIXTURES = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "fixtures")
TINY = TransformerShape("tiny", 8, 2, 2, 32, 10)


class FakeEngine:
    """Does no arithmetic; records the shapes it was asked to multiply."""

    name = "fake"
    device_name = "fake device"

    def __init__(self, dtypes=("fp32",)):
        self.dtypes = dtypes
        self.shapes = []
        self.calls = 0

    def supports(self, dtype):
        return dtype in self.dtypes

    def operands(self, m, k, n, dtype):
        self.shapes.append((m, k, n, dtype))
        return None

    def matmul(self, ops):
        self.calls += 1

    def synchronize(self):
        pass


class FakeClock:
    """Advances by ``step_s`` on every read; a binary fraction keeps the arithmetic exact."""

    def __init__(self, step_s=0.5):
        self.now = 0.0
        self.step_s = step_s

    def __call__(self):
        self.now += self.step_s
        return self.now


def test_time_gemm_with_fake_clock_is_exact():
    eng = FakeEngine()
    samples = time_gemm(eng, 4, 5, 6, "fp32", repeats=3, warmup=2, clock=FakeClock(0.25))
    assert samples == (0.25, 0.25, 0.25)
    assert eng.calls == 5  # 2 warm-up (untimed) + 3 timed
    with pytest.raises(UsageError):
        time_gemm(eng, 4, 5, 6, "fp32", repeats=0)


def test_gemm_timing_flops_per_s_exact():
    t = GemmTiming("qkv", "forward", 100, 8, 24, 10, 8, 24, (0.5, 0.25, 1.0))
    assert t.flops == 2 * 100 * 8 * 24
    assert t.timed_flops == 2 * 10 * 8 * 24
    assert t.median_s == 0.5
    assert t.flops_per_s == 2 * 10 * 8 * 24 / 0.5
    assert t.est_time_s == pytest.approx(2 * 100 * 8 * 24 / (2 * 10 * 8 * 24 / 0.5))
    assert t.scaled
    assert "qkv.forward" in repr(t) and "timed at 10x8x24" in repr(t)


def test_profile_with_fake_clock_flops_arithmetic():
    eng = FakeEngine()
    prof = profile_compute(TINY, seq=4, micro_batch=2, engine=eng, repeats=3, clock=FakeClock(0.5))
    assert [g.name for g in prof.gemms] == [g.name for g in step_gemms(TINY, 8)]
    for g in prof.gemms:
        assert g.samples_s == (0.5, 0.5, 0.5)
        assert g.flops_per_s == g.flops / 0.5
    # Every GEMM took 0.5 s: step FLOP/s is total FLOPs over 12 x 0.5 s.
    assert prof.flops_per_s == pytest.approx(6 * TINY.layer_params * 8 / 6.0, rel=1e-15)
    assert prof.layer_time_s == 6.0
    assert prof.dtype == "fp32" and prof.dtype_requested == "fp32" and prof.warnings == ()
    assert not prof.scaled and prof.tokens == 8


def test_unsupported_dtype_falls_back_with_warning():
    prof = profile_compute(TINY, seq=4, dtype="bf16", engine=FakeEngine(), repeats=1, clock=FakeClock())
    assert prof.dtype == "fp32" and prof.dtype_requested == "bf16"
    assert len(prof.warnings) == 1 and "bf16" in prof.warnings[0] and "fp32" in prof.warnings[0]
    with pytest.raises(UsageError):
        profile_compute(TINY, dtype="fp8", engine=FakeEngine(), clock=FakeClock())


def test_numpy_bf16_says_numpy_has_no_bf16():
    prof = profile_compute(shape_from_dims(64, 1), seq=16, dtype="bf16", engine="numpy", repeats=1)
    assert prof.dtype == "fp32"
    assert "numpy has no bfloat16" in prof.warnings[0]


@pytest.mark.parametrize("dtype", ["fp32", "bf16"])
def test_torch_engine_times_real_gemms(dtype):
    pytest.importorskip("torch", reason="torch is optional; CI installs it")
    prof = profile_compute(shape_from_dims(64, 1), seq=16, dtype=dtype, engine="torch", repeats=2)
    assert prof.engine == "torch" and prof.dtype == dtype  # torch has bfloat16: no fallback
    assert len(prof.gemms) == 12
    assert all(g.flops_per_s > 0 and math.isfinite(g.flops_per_s) for g in prof.gemms)


def test_token_scaling_is_recorded_and_wgrad_scales_k():
    shape = shape_for_params(7 * 10**9)
    eng = FakeEngine()
    prof = profile_compute(shape, seq=2048, engine=eng, repeats=1, clock=FakeClock(),
                           max_gemm_flops=DEFAULT_CPU_MAX_GEMM_FLOPS)
    assert prof.scaled and prof.timed_tokens < 2048 and prof.timed_tokens % 64 == 0
    assert any("timed with M" in w for w in prof.warnings)
    up_w = next(g for g in prof.gemms if g.name == "mlp_up.wgrad")
    assert (up_w.m, up_w.k, up_w.n) == (4096, 2048, 22016)
    assert (up_w.timed_m, up_w.timed_k, up_w.timed_n) == (4096, prof.timed_tokens, 22016)
    up_f = next(g for g in prof.gemms if g.name == "mlp_up.forward")
    assert up_f.timed_flops <= max(DEFAULT_CPU_MAX_GEMM_FLOPS, 2 * 64 * 4096 * 22016)
    # Explicit timed tokens win; no cap means the full shape.
    assert profile_compute(TINY, seq=64, engine=FakeEngine(), repeats=1, clock=FakeClock(),
                           timed_tokens=16).timed_tokens == 16
    assert profile_compute(TINY, seq=64, engine=FakeEngine(), repeats=1, clock=FakeClock(),
                           max_gemm_flops=None).timed_tokens == 64


def test_timed_tokens_for():
    gemms = step_gemms(TINY, 1000)
    widest = 2 * 8 * 32  # FLOPs per token of the widest forward GEMM (mlp_up / mlp_down)
    assert timed_tokens_for(gemms, 1000, None) == 1000
    assert timed_tokens_for(gemms, 1000, widest * 1000) == 1000
    assert timed_tokens_for(gemms, 1000, widest * 300) == 256
    assert timed_tokens_for(gemms, 1000, widest * 3) == 64  # never below 64


def test_bad_profile_inputs():
    for kwargs in ({"seq": 0}, {"micro_batch": 0}, {"repeats": 0}, {"warmup": -1}, {"timed_tokens": 0}):
        with pytest.raises(UsageError):
            profile_compute(TINY, engine=FakeEngine(), clock=FakeClock(), **kwargs)
    with pytest.raises(UsageError):
        get_engine("tpu")


def test_zero_time_clock_is_an_error():
    with pytest.raises(UsageError):
        profile_compute(TINY, seq=4, engine=FakeEngine(), clock=lambda: 1.0)


def test_real_numpy_timing_tiny_shape():
    shape = shape_from_dims(64, 1)
    prof = profile_compute(shape, seq=32, micro_batch=1, engine="numpy", repeats=2)
    assert prof.engine == "numpy" and prof.dtype == "fp32"
    assert [(g.m, g.k, g.n) for g in prof.gemms] == [(g.m, g.k, g.n) for g in step_gemms(shape, 32)]
    for g in prof.gemms:
        assert len(g.samples_s) == 2
        assert math.isfinite(g.flops_per_s) and g.flops_per_s > 0
    assert math.isfinite(prof.flops_per_s) and prof.flops_per_s > 0


def test_missing_engines_say_how_to_install(monkeypatch):
    monkeypatch.setitem(sys.modules, "torch", None)  # import torch -> ImportError
    monkeypatch.setitem(sys.modules, "cupy", None)
    with pytest.raises(BackendUnavailable, match="pip install torch"):
        get_engine("torch")
    with pytest.raises(BackendUnavailable, match="pip install cupy-cuda13x"):
        get_engine("cupy")
    assert get_engine("auto").name == "numpy"


def test_json_round_trip_and_no_overwrite(tmp_path):
    prof = profile_compute(TINY, seq=4, engine=FakeEngine(), repeats=2, clock=FakeClock(0.125))
    path = tmp_path / "c.json"
    prof.save(path)
    data = json.loads(path.read_text())
    assert data["schema"] == "pybench.compute" and data["schema_version"] == 1
    back = load_compute(path)
    assert back == prof
    assert back.flops_per_s == prof.flops_per_s
    with pytest.raises(UsageError, match="exists"):
        prof.save(path)
    prof.save(path, force=True)
    assert [p.name for p in tmp_path.iterdir()] == ["c.json"]  # no temp file left behind
    umask = os.umask(0)
    os.umask(umask)
    assert os.stat(path).st_mode & 0o777 == 0o666 & ~umask  # not mkstemp's 0600


def test_load_bad_files(tmp_path):
    with pytest.raises(FileFormatError, match="does not exist"):
        load_compute(tmp_path / "missing.json")
    bad = tmp_path / "bad.json"
    bad.write_text("{not json")
    with pytest.raises(FileFormatError):
        load_compute(bad)
    bad.write_text(json.dumps({"schema": "pybench.measure.results"}))
    with pytest.raises(FileFormatError, match="is not 'pybench.compute' \\(a pybench compute profile\\)"):
        load_compute(bad)
    bad.write_text(json.dumps({"schema": "pybench.compute", "schema_version": 99}))
    with pytest.raises(FileFormatError, match="pybench.compute version 99 is newer"):
        load_compute(bad)
    bad.write_text(json.dumps({"schema": "pybench.compute", "schema_version": 1}))
    with pytest.raises(FileFormatError, match="missing"):
        load_compute(bad)


def test_fixture_v1_still_loads():
    prof = load_compute(os.path.join(FIXTURES, "compute_profile_v1.json"))
    assert isinstance(prof, ComputeProfile)
    assert prof.shape.hidden == 256 and len(prof.gemms) == 12
    assert prof.flops_per_s == pytest.approx(1.0066e11, rel=1e-3)
    assert "GFLOP/s achieved" in prof.table()


def _parser():
    ap = argparse.ArgumentParser(prog="pybench")
    sub = ap.add_subparsers(dest="command", required=True)
    cli_planning.add_parsers(sub)
    return ap


def test_cli_compute_numpy(tmp_path, capsys):
    out = tmp_path / "c.json"
    args = _parser().parse_args(["compute", "--hidden", "64", "--layers", "1", "--seq", "32", "--engine", "numpy",
                                 "--repeats", "1", "--dtype", "bf16", "--json", str(out)])
    assert args.func(args) == 0
    captured = capsys.readouterr()
    assert "qkv.forward" in captured.out and "GFLOP/s achieved" in captured.out
    assert "numpy has no bfloat16" in captured.err
    assert load_compute(out).dtype == "fp32"


def test_cli_compute_shape_errors():
    ap = _parser()
    args = ap.parse_args(["compute", "--hidden", "64"])
    with pytest.raises(UsageError, match="together"):
        args.func(args)
    args = ap.parse_args(["compute", "--params", "seven"])
    with pytest.raises(UsageError):
        args.func(args)


def test_sigterm_while_timing_ends_compute_with_one_line_and_143(monkeypatch, tmp_path, capsys):
    """A job's time limit (SIGTERM) during `compute` had ended it in silence; it now says so, writes nothing."""
    import signal

    import pybench.planning.compute as compute_module
    from pybench.cli.main import main

    def killed(*args, **kwargs):
        os.kill(os.getpid(), signal.SIGTERM)  # the real signal, delivered to this process while it times
        raise AssertionError("SIGTERM did not stop the timing")
    monkeypatch.setattr(compute_module, "profile_compute", killed)
    before = signal.getsignal(signal.SIGTERM)
    out = tmp_path / "c.json"
    assert main(["compute", "--params", "125M", "--engine", "numpy", "--json", str(out)]) == 143
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "terminated (SIGTERM)" in err[0] and not out.exists()
    assert signal.getsignal(signal.SIGTERM) == before  # the handler is the command's only
