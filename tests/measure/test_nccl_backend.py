"""The NCCL backend where there is no GPU (these machines): one-line errors, the
CPU fallback note, launch-mode detection, the device check pattern, and the pure
pieces of the copy and p2p-matrix commands (exact, with synthetic timings)."""

from __future__ import annotations

import pytest

from pybench._native import build_info
from pybench.errors import BackendUnavailable, NativeError, UsageError
from pybench.measure.backends import nccl as nccl_backend

needs_cuda_module = pytest.mark.skipif(build_info().get("cuda_module") != "ON",
                                       reason="pybench was built without the CUDA module (no nvcc at build time)")


def _has_gpu() -> bool:
    return nccl_backend.no_gpu_reason() is None


no_gpu_only = pytest.mark.skipif(_has_gpu(), reason="this machine has a GPU; the no-GPU behaviour cannot be seen here")


# ---------------------------------------------------------------- no GPU
@no_gpu_only
def test_backend_without_gpu_is_one_line_naming_the_reason_and_the_cpu_backend():
    from pybench.measure.backends import get_backend
    with pytest.raises(BackendUnavailable) as info:
        get_backend("nccl")
    msg = str(info.value)
    assert "\n" not in msg
    assert "needs a GPU" in msg and "--backend mpi" in msg
    if build_info().get("cuda_module") == "ON":
        # error 35 (no driver) reads as "no GPU", with CUDA's own words
        assert "no GPU" in msg and ("driver" in msg or "device" in msg)


@no_gpu_only
def test_default_backend_falls_back_to_mpi_with_one_note():
    from pybench.cli.gpu import select_backend
    name, note = select_backend(None)
    assert name == "mpi"
    assert note is not None and "\n" not in note and "mpi backend" in note
    assert "no GPU" in note or "CUDA module" in note
    assert select_backend("mpi") == ("mpi", None)
    assert select_backend("torch") == ("torch", None)


@no_gpu_only
def test_explicit_nccl_without_gpu_refuses():
    from pybench.cli.gpu import select_backend
    with pytest.raises(BackendUnavailable, match="--backend nccl needs a GPU: .*use --backend mpi"):
        select_backend("nccl")


def test_fallback_and_refusal_when_nccl_is_missing_but_a_gpu_is_there(monkeypatch):
    from pybench.cli import gpu as cli_gpu
    from pybench.measure.gpu import nccl_lib
    monkeypatch.setattr(nccl_backend, "no_gpu_reason", lambda: None)

    def missing(explicit=None, *a, **k):
        raise nccl_lib.NcclNotFound(f"NCCL not found (tried: system); {nccl_lib.INSTALL_HINT}")

    monkeypatch.setattr(nccl_lib, "load_nccl", missing)
    name, note = cli_gpu.select_backend("auto")
    assert name == "mpi" and note is not None and "pip install nvidia-nccl-cu13" in note
    with pytest.raises(BackendUnavailable, match="--backend nccl cannot run: NCCL not found.*pip install nvidia-nccl"):
        cli_gpu.select_backend("nccl")
    monkeypatch.setattr(nccl_lib, "load_nccl", lambda explicit=None, *a, **k: None)
    assert cli_gpu.select_backend(None) == ("nccl", None)


@no_gpu_only
@pytest.mark.parametrize("command", [["copy"], ["copy", "--kinds", "d2d"], ["p2p", "--matrix"]])
def test_gpu_commands_without_gpu_exit_3_in_one_line(tmp_path, command):
    # "needs a GPU" is the environment's failure (BackendUnavailable): exit 3, not bad input's 2.
    import subprocess
    import sys
    proc = subprocess.run([sys.executable, "-m", "pybench", *command], cwd=tmp_path, capture_output=True,
                          text=True, timeout=60)
    assert proc.returncode == 3
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("pybench: error: ") and "needs a GPU" in lines[0], proc.stderr
    assert proc.stdout == ""


def test_bad_copy_kind_is_a_usage_error(tmp_path):
    import subprocess
    import sys
    proc = subprocess.run([sys.executable, "-m", "pybench", "copy", "--kinds", "d2d,zz"], cwd=tmp_path,
                          capture_output=True, text=True, timeout=60)
    assert proc.returncode == 2 and proc.stderr.strip() == ("pybench: error: unknown copy kind 'zz'; use d2d, h2d, "
                                                            "d2h, p2p or all")


@needs_cuda_module
def test_communicator_without_gpu_is_a_native_error_not_a_crash(tmp_path):
    # ncclCommInitAll with no driver: NCCL's error comes back as one NativeError line.
    import subprocess
    import sys

    from pybench.measure.gpu.nccl_lib import candidates
    if not any(c.source == "wheel" for c in candidates(environ={})):
        pytest.skip("the nvidia-nccl wheel is not installed (pip install nvidia-nccl-cu13)")
    if _has_gpu():
        pytest.skip("this machine has a GPU")
    script = ("from pybench.measure.gpu.nccl_lib import load_nccl; load_nccl()\n"
              "from pybench._native import cuda\n"
              "from pybench.errors import NativeError\n"
              "try:\n    cuda().NcclWorld([0], 5.0)\nexcept NativeError as e:\n    print('NativeError', e)\n")
    import os
    env = {k: v for k, v in os.environ.items() if k != "NCCL_DEBUG"}  # NCCL's own WARN lines go to stdout
    proc = subprocess.run([sys.executable, "-c", script], cwd=tmp_path, capture_output=True, text=True, timeout=60,
                          env=env)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.startswith("NativeError api().CommInitAll") and "failed" in proc.stdout


@needs_cuda_module
def test_cuda_module_errors_are_pybench_native_errors():
    from pybench._native import cuda
    with pytest.raises(NativeError, match="boom"):
        cuda().raise_native_error("boom")


# ---------------------------------------------------------------- launch and options
@pytest.mark.parametrize("env,mode", [
    ({}, "single"),
    ({"OMPI_COMM_WORLD_SIZE": "2"}, "mpi"),
    ({"PMI_RANK": "0"}, "mpi"),
    ({"SLURM_STEP_NUM_TASKS": "4"}, "mpi"),
    ({"PYBENCH_RANK_PROCESS": "1"}, "mpi"),
    ({"RANK": "0", "WORLD_SIZE": "2", "MASTER_ADDR": "h", "MASTER_PORT": "1"}, "torchrun"),
    ({"TORCHELASTIC_RUN_ID": "x", "RANK": "0", "WORLD_SIZE": "2"}, "torchrun"),
    ({"RANK": "0"}, "single"),
])
def test_launch_mode(env, mode):
    assert nccl_backend.launch_mode(env) == mode


def test_requested_gpus():
    assert nccl_backend.requested_gpus(4, {}) == [0, 1, 2, 3]
    assert nccl_backend.requested_gpus(4, {"PYBENCH_GPUS": "2"}) == [0, 1]
    with pytest.raises(UsageError, match="this node has 4 visible GPU"):
        nccl_backend.requested_gpus(4, {"PYBENCH_GPUS": "5"})
    with pytest.raises(UsageError, match="not a whole number"):
        nccl_backend.requested_gpus(4, {"PYBENCH_GPUS": "two"})


def test_gpu_options_travel_in_the_environment(monkeypatch):
    import argparse

    from pybench.cli import gpu as cli_gpu
    for var in ("PYBENCH_NCCL_LIB", "PYBENCH_GPUS", "PYBENCH_NCCL_IN_PLACE"):
        monkeypatch.setenv(var, "")  # recorded, so the variables set below are undone after the test
        monkeypatch.delenv(var)
    p = argparse.ArgumentParser()
    cli_gpu.add_gpu_run_options(p)
    args = p.parse_args(["--nccl-lib", "/x/libnccl.so.2", "--gpus", "2", "--in-place"])
    cli_gpu.apply_gpu_options(args)
    import os
    assert os.environ["PYBENCH_NCCL_LIB"] == "/x/libnccl.so.2"
    assert os.environ["PYBENCH_GPUS"] == "2" and os.environ["PYBENCH_NCCL_IN_PLACE"] == "1"


# ---------------------------------------------------------------- the device check pattern
@needs_cuda_module
@pytest.mark.parametrize("dtype,op,world,period", [
    ("float32", "sum", 8, 13),
    ("float16", "sum", 8, 13),      # 2048 / 8 = 256 > 13
    ("float16", "sum", 300, 6),     # 2048 / 300: the period shrinks so sums stay exact
    ("bfloat16", "sum", 32, 8),     # 256 / 32, as csrc/common/pattern.cpp
    ("bfloat16", "max", 64, 13),    # max never grows: no shrinking
    ("bfloat16", "prod", 8, 2),     # 2^8 = 256 is exact, 3^8 is not
    ("float32", "prod", 2, 13),
    ("int8", "sum", 16, 7),         # 127 / 16
    ("uint8", "sum", 2, 13),
])
def test_period_rule_matches_the_core_pattern(dtype, op, world, period):
    from pybench._native import cuda
    values, got_period, tol = cuda().pattern_table(dtype, op, world, True, -1, 0)
    assert got_period == period and len(values) == period
    assert tol == 0.0


@needs_cuda_module
def test_expected_values_are_the_reduction_of_every_ranks_pattern():
    from pybench._native import cuda
    c = cuda()
    world, m = 4, 13
    value = lambda r, j: 1 + (3 * r + j) % m
    sums, _, _ = c.pattern_table("float32", "sum", world, True, -1, 5)
    assert sums == [sum(value(r, 5 + k) for r in range(world)) for k in range(m)]
    maxes, _, _ = c.pattern_table("int32", "max", world, True, -1, 0)
    assert maxes == [max(value(r, k) for r in range(world)) for k in range(m)]
    avg, _, tol = c.pattern_table("bfloat16", "avg", world, True, -1, 0)
    period = 256 // world if 256 // world < m else m
    assert tol > 0 and avg[0] == sum(1 + (3 * r) % period for r in range(world)) / world
    block, _, _ = c.pattern_table("float64", "sum", world, False, 2, 7)  # one rank's data, e.g. all-gather
    assert block == [value(2, 7 + k) for k in range(m)]


# ---------------------------------------------------------------- copy and p2p matrix (pure parts)
def test_copy_plan_and_records():
    from pybench.measure.gpu.copy_bench import copy_plan, make_record, parse_kinds, run_copies, table_lines
    assert parse_kinds("all") == ("d2d", "h2d", "d2h", "p2p")
    assert parse_kinds("h2d, d2h,h2d") == ("h2d", "d2h")
    assert copy_plan(["d2d", "h2d", "d2h", "p2p"], [0, 1]) == [
        ("d2d", 0, 0), ("d2d", 1, 1), ("h2d", -1, 0), ("h2d", -1, 1), ("d2h", 0, -1), ("d2h", 1, -1),
        ("p2p", 0, 1), ("p2p", 1, 0)]
    r = make_record("h2d", -1, 0, 1 << 30, [0.05, 0.02, 0.04], None)
    assert r.time_s == 0.04 and r.bandwidth_gbps == pytest.approx((1 << 30) / 0.04 / 1e9)
    calls = []

    def fake(kind, src, dst, size, n, ops, engine, bidirectional):
        calls.append((kind, src, dst, size, n, ops, engine, bidirectional))
        return [size / 50e9] * n, True, 0

    recs = run_copies(["p2p", "d2h"], [0, 1], [1 << 20], n_samples=3, ops_per_sample=2, copy_times=fake)
    assert [(c[0], c[1], c[2]) for c in calls] == [("p2p", 0, 1), ("p2p", 1, 0), ("d2h", 0, 0), ("d2h", 1, 0)]
    assert all(x.bandwidth_gbps == pytest.approx(50.0) for x in recs)
    assert recs[0].peer_access is True and recs[2].peer_access is None
    lines = table_lines(recs)
    assert "gpu0" in lines[1] and "50.00" in lines[1] and "peer access" in lines[1] and "host" in lines[3]
    # both engines, both directions: d2d has no reverse, so it runs one way and says so
    calls.clear()
    recs = run_copies(["d2d", "h2d"], [0], [1 << 20], n_samples=2, copy_times=fake, engines=("ce", "sm"),
                      bidirectional=True)
    assert [(c[0], c[6], c[7]) for c in calls] == [("d2d", "ce", False), ("d2d", "sm", False), ("h2d", "ce", True),
                                                   ("h2d", "sm", True)]
    assert [(r.engine, r.bidirectional) for r in recs] == [("ce", False), ("sm", False), ("ce", True), ("sm", True)]
    assert " sm " in table_lines(recs)[2] and " bi " in table_lines(recs)[3]


def test_copy_data_errors_are_counted_and_fail_the_command(fake_gpu, monkeypatch, capsys):
    from pybench.cli.main import main
    from pybench.measure.gpu.copy_bench import parse_engines

    def corrupt(kind, src, dst, size_bytes, n_samples, ops_per_sample, engine="ce", bidirectional=False):
        return [size_bytes / 4e11] * n_samples, False, 7 if kind == "d2h" else 0

    monkeypatch.setattr(_FakeCuda, "copy_times", staticmethod(corrupt))
    assert main(["copy", "--kinds", "d2h,d2d", "--gpus", "1", "--samples", "2"]) == 1
    captured = capsys.readouterr()
    assert "7 copied byte(s) differ" in captured.err  # one GPU: one d2h run, 7 bad bytes
    assert parse_engines("all") == ("ce", "sm") and parse_engines("sm") == ("sm",)
    with pytest.raises(UsageError, match="unknown copy engine 'zz'"):
        parse_engines("zz")


def test_p2p_matrix_flags_the_slow_pair():
    from pybench.measure.gpu.p2p_matrix import flag_pairs, matrix_lines, measure_pairs

    def fake(src, dst, size, n, ops, pingpong):
        assert pingpong == (size == 8)  # latency is a ping-pong, bandwidth a stream of sends
        slow = (src, dst) == (2, 3)
        bw = 20e9 if slow else 100e9
        return [2e-6 + size / bw] * n

    pairs = flag_pairs(measure_pairs(fake, 4, 64 << 20, 8, 5, {(2, 3): "PCIe (same switch)"}), 0.8)
    flagged = [(p.src, p.dst) for p in pairs if p.slow_bandwidth]
    assert flagged == [(2, 3)]
    assert not any(p.slow_latency for p in pairs)
    lines = matrix_lines(pairs, 4)
    assert any(line.startswith("#   gpu2 -> gpu3: bandwidth") and "PCIe (same switch)" in line for line in lines)
    assert lines[4].startswith("gpu2") and lines[4].count("!") == 1  # row gpu2 of the bandwidth grid
    with pytest.raises(UsageError, match="at least 2 GPUs"):
        measure_pairs(fake, 1, 1, 1, 1)
    with pytest.raises(UsageError, match="must be in"):
        flag_pairs(pairs, 1.5)


# ---------------------------------------------------------------- the Python glue, with a fake CUDA module
class _FakeWorld:
    def __init__(self, devices, timeout_s=30.0):
        self.devices, self.timeout_s, self.world, self.multi_process = list(devices), timeout_s, len(devices), False

    def max_over_ranks(self, values):
        raise AssertionError("a single-process world never reduces over ranks")

    def pair_times(self, src, dst, size_bytes, n_samples, ops_per_sample, pingpong=False):
        return [1e-6 + size_bytes / 1e11] * n_samples

    def abort(self):
        pass


class _FakeBench:
    made: list = []

    def __init__(self, world, collective, dtype, op, size_bytes, root=0, in_place=False, timing="batched"):
        assert isinstance(world, _FakeWorld)
        _FakeBench.made.append((collective, dtype, op, size_bytes, root, in_place, timing))
        self.size, self.collective, self.in_place = size_bytes, collective, in_place

    def warmup(self, n):
        pass

    def check(self, iters):
        # as csrc/cuda/nccl_harness.cpp: an in-place form with no defined result is not checked (-1)
        return -1 if self.in_place and self.collective in ("alltoall", "sendrecv") else 0

    def measure(self, n_samples, ops_per_sample):
        return [self.size / 1e11] * n_samples, 1e-3


class _FakeCuda:
    NcclWorld, NcclBench = _FakeWorld, _FakeBench

    @staticmethod
    def probe():
        return {"device_count": 2, "no_gpu_reason": "", "runtime_version": 13000, "driver_version": 13000,
                "devices": [{"index": i, "name": "Fake H200", "total_memory_bytes": 141 << 30,
                             "compute_capability": "9.0", "multiprocessors": 132, "pci_address": f"0000:{i + 27:02x}:00"}
                            for i in range(2)]}

    @staticmethod
    def link_report(devices):
        return {"nvml_available": True, "reason": "", "driver_version": "580.1",
                "pairs": [(0, 1, "NVLink")][: max(devices - 1, 0)]}

    @staticmethod
    def copy_times(kind, src, dst, size_bytes, n_samples, ops_per_sample, engine="ce", bidirectional=False):
        return [size_bytes / 4e11] * n_samples, kind == "p2p", 0


def _param_names(doc_line: str) -> list[str]:
    inside = doc_line[doc_line.index("(") + 1: doc_line.rindex(")")]
    import re
    return [n for n in re.findall(r"(?:^|, )(\w+):", inside) if n != "self"]


@needs_cuda_module
def test_fake_cuda_module_has_the_real_signatures():
    import inspect

    from pybench._native import cuda
    real = cuda()
    first = lambda f: f.__doc__.strip().splitlines()[0]
    assert _param_names(first(real.NcclBench.__init__)) == list(inspect.signature(_FakeBench).parameters)
    assert _param_names(first(real.copy_times)) == list(inspect.signature(_FakeCuda.copy_times).parameters)
    assert _param_names(first(real.NcclWorld.pair_times)) == list(
        inspect.signature(_FakeWorld.pair_times).parameters)[1:]
    world_doc = real.NcclWorld.__init__.__doc__
    line = next(x for x in world_doc.splitlines() if x.startswith("1. "))
    assert _param_names(line) == list(inspect.signature(_FakeWorld).parameters)


@pytest.fixture
def fake_gpu(monkeypatch):
    from pybench import _native
    from pybench.measure.gpu import nccl_lib
    from pybench.measure.gpu.nccl_lib import NcclLibrary
    lib = NcclLibrary(path="/fake/libnccl.so.2", source="wheel", version="2.32.3", version_code=23203)
    monkeypatch.setattr(_native, "cuda", lambda: _FakeCuda)
    monkeypatch.setattr(nccl_backend, "load_nccl", lambda *a, **k: lib)
    monkeypatch.setattr(nccl_lib, "load_nccl", lambda *a, **k: lib)
    nccl_vars = [k for k in __import__("os").environ if k.startswith("NCCL_")]  # e.g. the GPU check's NCCL_DEBUG
    for var in ("OMPI_COMM_WORLD_SIZE", "PMIX_RANK", "PMI_RANK", "PMI_SIZE", "SLURM_STEP_NUM_TASKS",
                "PYBENCH_RANK_PROCESS", "TORCHELASTIC_RUN_ID", "RANK", "PYBENCH_GPUS", "PYBENCH_NCCL_IN_PLACE",
                "PYBENCH_NCCL_TIMING", *nccl_vars):
        monkeypatch.delenv(var, raising=False)
    _FakeBench.made.clear()
    return lib


def test_backend_glue_single_process(fake_gpu, monkeypatch):
    from pybench.measure.benchmark import BenchConfig, measure_size
    from pybench.measure.stopping import StopRule
    monkeypatch.setenv("NCCL_ALGO", "Ring")
    b = nccl_backend.NcclBackend()
    info = b.start()
    assert info == {"rank": 0, "world_size": 2, "local_rank": 0, "local_size": 1, "host": info["host"],
                    "hosts": [info["host"]] * 2}
    b.watch(12.0, None)
    assert b._world.timeout_s == 12.0
    assert b.agree_max([1, 0]) == [1, 0]
    cfg = BenchConfig(benchmark="allgather", sizes=(1 << 20,), dtype="bfloat16",
                      stop=StopRule(precision=None, fixed_iters=4))
    rec = measure_size(cfg, b.make_bench(cfg, 1 << 20), 1 << 20, 2)
    assert _FakeBench.made == [("allgather", "bfloat16", "sum", 1 << 20, 0, False, "batched")]
    assert rec.time_s == pytest.approx((1 << 20) / 1e11) and rec.wrong == 0
    text = b.describe_buffers(cfg)
    assert "out of place" in text and "NCCL 2.32.3 (/fake/libnccl.so.2, from wheel)" in text
    assert "NCCL_ALGO=Ring" in text and "256 MiB pool" in text and "world 1" not in text
    meta = b.run_metadata()
    assert meta["nccl"]["path"] == "/fake/libnccl.so.2" and meta["links"] == [{"a": 0, "b": 1, "link": "NVLink"}]
    assert meta["driver_version"] == "580.1" and meta["cuda_runtime_version"] == "13.0"
    assert meta["nccl_env"] == {"NCCL_ALGO": "Ring"} and meta["gpus"][1]["name"] == "Fake H200"
    p2p = BenchConfig(benchmark="p2p_bw", sizes=(8,))
    with pytest.raises(UsageError, match="p2p --matrix"):
        b.make_bench(p2p, 8)


def test_backend_glue_options_from_the_environment(fake_gpu, monkeypatch):
    from pybench.measure.benchmark import BenchConfig
    monkeypatch.setenv("PYBENCH_GPUS", "1")
    monkeypatch.setenv("PYBENCH_NCCL_IN_PLACE", "1")
    monkeypatch.setenv("PYBENCH_NCCL_TIMING", "graph")
    b = nccl_backend.NcclBackend()
    assert b.start()["world_size"] == 1
    cfg = BenchConfig(benchmark="allreduce", sizes=(64,))
    b.make_bench(cfg, 64)
    assert _FakeBench.made[-1][-2:] == (True, "graph")
    assert "in place" in b.describe_buffers(cfg)


@pytest.mark.parametrize("collective", ["alltoall", "sendrecv"])
def test_an_in_place_form_with_no_defined_result_is_timed_unchecked_as_nccl_tests(fake_gpu, monkeypatch, collective):
    """nccl-tests times all-to-all and send/recv in place too (one buffer sent from and received into) and
    prints no #wrong there; readers of its output (CloudAI's default metric) take the in-place time."""
    from pybench.measure.benchmark import BenchConfig, measure_size, with_in_place
    from pybench.measure.stopping import StopRule
    b = nccl_backend.NcclBackend()
    b.start()
    cfg = BenchConfig(benchmark=collective, sizes=(1 << 20,), stop=StopRule(precision=None, fixed_iters=4))
    rec = measure_size(cfg, b.make_bench(cfg, 1 << 20), 1 << 20, 2)
    rec = with_in_place(cfg, rec, b.make_in_place_bench(cfg, 1 << 20), 2)
    assert _FakeBench.made[-1][0] == collective and _FakeBench.made[-1][-2] is True
    assert rec.wrong == 0 and rec.in_place_time_s > 0 and rec.in_place_wrong is None
    assert "then in place (not checked" in b.describe_buffers(cfg)
    assert b.device_name(1) == "Fake H200" and b.device_name(7) is None
    assert b.device_address(1) == "0000:1c:00" and b.device_address(7) is None
    monkeypatch.setenv("PYBENCH_NCCL_IN_PLACE", "1")  # in place alone: nothing checked at all
    alone = nccl_backend.NcclBackend()
    alone.start()
    with pytest.raises(UsageError, match=f"{collective} cannot run in place alone"):
        alone.make_bench(cfg, 1 << 20)


@pytest.mark.parametrize("collective", ["alltoall", "sendrecv"])
@pytest.mark.parametrize("asked", ["--in-place", "PYBENCH_NCCL_IN_PLACE"])
def test_in_place_alone_of_a_form_nothing_checks_is_refused_before_the_run(fake_gpu, monkeypatch, capsys, tmp_path,
                                                                           collective, asked):
    from pybench.cli.main import main
    argv = [collective, "--backend", "nccl", "--sizes", "1K", "--json", str(tmp_path / "r.json")]
    if asked == "--in-place":
        argv.append("--in-place")
    else:
        monkeypatch.setenv(asked, "1")
    assert main(argv) == 2
    captured = capsys.readouterr()
    assert captured.out == "" and not (tmp_path / "r.json").exists()  # refused before the header and any file
    assert f"{collective} cannot run in place alone ({asked})" in captured.err and captured.err.count("\n") == 1


def test_copy_and_matrix_commands_with_a_fake_gpu(fake_gpu, capsys, tmp_path):
    from pybench.cli.main import main
    assert main(["copy", "--sizes", "1M", "--samples", "3", "--json", str(tmp_path / "c.json")]) == 0
    out = capsys.readouterr().out.splitlines()
    assert len(out) == 1 + 2 + 2 + 2 + 2  # header, d2d x2, h2d x2, d2h x2, p2p x2
    import json
    data = json.loads((tmp_path / "c.json").read_text())
    assert data["schema"] == "pybench.copy" and len(data["records"]) == 8
    assert main(["p2p", "--matrix", "--samples", "3"]) == 0
    out = capsys.readouterr().out
    assert "NCCL 2.32.3" in out and "no pair flagged" in out and "gpu0-gpu1 NVLink" in out


def test_backend_without_the_cuda_module_says_how_to_rebuild(monkeypatch):
    from pybench import _native
    from pybench.cli.gpu import select_backend

    def missing():
        raise BackendUnavailable("pybench was built without its CUDA module (No module named 'pybench._cuda'); "
                                 + _native._REBUILD_CUDA)

    monkeypatch.setattr(_native, "cuda", missing)
    with pytest.raises(BackendUnavailable, match="nccl backend needs pybench's CUDA module: .*PYBENCH_CUDA=ON pip"):
        nccl_backend.NcclBackend()
    with pytest.raises(BackendUnavailable, match="--backend nccl cannot run: pybench was built without its CUDA"):
        select_backend("nccl")
    name, note = select_backend(None)
    assert name == "mpi" and note is not None and "built without its CUDA module" in note and "\n" not in note


# ---------------------------------------------------------------- sizes and worlds on the nccl path (issue 15, item 8)
def _probe_with(n_devices: int, memory_bytes: int):
    def probe():
        return {"device_count": n_devices, "no_gpu_reason": "", "runtime_version": 13000, "driver_version": 13000,
                "devices": [{"index": i, "name": "Fake GPU", "total_memory_bytes": memory_bytes,
                             "compute_capability": "9.0", "multiprocessors": 132} for i in range(n_devices)]}
    return staticmethod(probe)


def test_readme_nccl_sweep_to_8g_is_not_held_to_mpis_count_limit(fake_gpu, capsys, tmp_path):
    # The README's own command: 8 B to 8 GiB of float32 is 2**31 elements at the top, over MPI's int
    # count but a size_t for NCCL. The fake H200s (141 GiB) hold the buffers, so every size runs.
    from pybench.cli.main import main
    from pybench.sizes import parse_sizes
    out = tmp_path / "ar.json"
    code = main(["allreduce", "--backend", "nccl", "--sizes", "8:8G:2", "-n", "2", "-w", "0", "-c", "1",
                 "--json", str(out)])
    captured = capsys.readouterr()
    assert code == 0, captured.err
    assert "count limit" not in captured.err and "pybench: note:" not in captured.err  # allreduce: nothing rounded
    # every size out of place, then in place (as nccl-tests)
    assert [(m[3], m[5]) for m in _FakeBench.made] == [(s, p) for s in parse_sizes("8:8G:2") for p in (False, True)]
    assert _FakeBench.made[-1][3] // 4 == 2**31  # elements: one past MPI's int limit
    import json
    doc = json.loads(out.read_text())
    assert doc["backend"] == "nccl" and doc["records"][-1]["count"] == 2**31
    assert all(r["in_place_time_s"] > 0 and r["in_place_wrong"] == 0 for r in doc["records"])
    assert "size_rounding" not in doc["options"]


def test_nccl_sweep_is_refused_when_the_buffers_do_not_fit_the_gpu(fake_gpu, capsys, monkeypatch):
    from pybench.cli.main import main
    monkeypatch.setattr(_FakeCuda, "probe", _probe_with(2, 8 << 30))  # 8 GiB GPUs: 8 GiB x 2 buffers do not fit
    assert main(["allreduce", "--backend", "nccl", "--sizes", "8:8G:2", "-n", "2"]) == 2
    err = capsys.readouterr().err
    assert "needs 16.0 GiB of device buffers per GPU" in err and "smallest GPU has 8.0 GiB" in err
    assert not _FakeBench.made  # refused before any buffer was allocated


def test_nccl_allgather_on_three_gpus_rounds_power_of_two_sizes(fake_gpu, capsys, monkeypatch, tmp_path):
    from pybench.cli.main import main
    monkeypatch.setattr(_FakeCuda, "probe", _probe_with(3, 141 << 30))
    out = tmp_path / "ag.json"
    assert main(["allgather", "--backend", "nccl", "--sizes", "8:1K", "-n", "2", "--json", str(out)]) == 0
    captured = capsys.readouterr()
    notes = [line for line in captured.err.splitlines() if line.startswith("pybench: note:")]
    assert len(notes) == 1 and "allgather over 3 ranks: 7 size(s) rounded down to a multiple of 12 B" in notes[0]
    assert "1024->1020" in notes[0] and "1 size(s) dropped" in notes[0]
    assert [m[3] for m in _FakeBench.made if not m[5]] == [12, 24, 60, 120, 252, 504, 1020]
    assert captured.out.count("# note: allgather over 3 ranks") == 1
    import json
    rounding = json.loads(out.read_text())["options"]["size_rounding"]
    assert rounding["world"] == 3 and rounding["dropped"] == [8] and [1024, 1020] in rounding["rounded"]


# ---------------------------------------------------------------- --timing host (nccl-tests' definition)
def test_timing_host_reaches_the_harness_and_is_named_in_the_header_and_the_file(fake_gpu, capsys, tmp_path):
    import json

    from pybench.cli.main import main
    out = tmp_path / "ar.json"
    code = main(["allreduce", "--backend", "nccl", "--timing", "host", "--sizes", "8,1M", "-n", "2", "-w", "0",
                 "--json", str(out)])
    captured = capsys.readouterr()
    assert code == 0, captured.err
    assert {m[-1] for m in _FakeBench.made} == {"host"}
    assert any(line.startswith("#") and "timing host" in line for line in captured.out.splitlines())
    # every GPU named as nccl-tests names it: its index, PCI address and model, read by its own rank
    ranks = [line for line in captured.out.splitlines() if line.startswith("#  Rank ")]
    assert [line.split(" device ")[1] for line in ranks] == [" 0 [0000:1b:00] Fake H200", " 1 [0000:1c:00] Fake H200"]
    doc = json.loads(out.read_text())
    assert doc["timing"] == "host"
    definitions = doc["environment"]["backend"]["timing_definitions"]
    assert "nccl-tests" in definitions["host"] and "mean over ranks" in definitions["host"]
    assert "-G" in definitions["host-graph"] and set(definitions) == {"batched", "per-op", "graph", "host", "host-graph"}


@pytest.mark.parametrize("backend", ["mpi", "torch"])
@pytest.mark.parametrize("timing", ["host", "host-graph"])
def test_timing_host_on_another_backend_is_one_line_and_exit_2(backend, timing, capsys):
    from pybench.cli.main import main
    assert main(["allreduce", "--backend", backend, "--timing", timing, "--sizes", "8"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and f"--timing {timing} is" in err[0] and "--backend nccl" in err[0]
