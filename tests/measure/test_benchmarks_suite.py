"""The pytest-benchmark suite in benchmarks/: native samples become pytest-benchmark's statistics,
the suite runs on real ranks, saves JSON that --benchmark-compare reads back, and a
--benchmark-compare-fail regression ends pytest with a non-zero exit code."""

from __future__ import annotations

import importlib.util
import json
import os
import shutil
import statistics
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
BENCH_CONFTEST = REPO / "benchmarks" / "conftest.py"
# The pytest script of this environment (not `python -m pytest`, which would import the source tree).
PYTEST = Path(sys.executable).parent / "pytest"
if not PYTEST.exists():
    PYTEST = Path(shutil.which("pytest") or PYTEST)


def _bench_conftest():
    spec = importlib.util.spec_from_file_location("pybench_benchmarks_conftest", BENCH_CONFTEST)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def _pytest(args: list[str], cwd: Path, timeout: float = 180) -> subprocess.CompletedProcess:
    env = dict(os.environ)
    env.pop("PYBENCH_RANK_PROCESS", None)
    env.pop("PYTEST_ADDOPTS", None)
    return subprocess.run([str(PYTEST), "-p", "no:cacheprovider", *args], cwd=cwd, capture_output=True, text=True,
                          timeout=timeout, env=env, stdin=subprocess.DEVNULL)


def test_native_sample_clock_replays_each_sample_as_one_round():
    clock = _bench_conftest().NativeSampleClock([1e-6, 3e-6, 2e-6])
    durations = []
    for _ in range(clock.rounds):
        start = clock()
        clock.tick()
        durations.append(clock() - start)
    assert durations == pytest.approx([1e-6, 3e-6, 2e-6], rel=1e-12)
    assert clock.replayed == 3
    with pytest.raises(ValueError):
        _bench_conftest().NativeSampleClock([1e-6, float("nan")])


def test_pytest_benchmark_statistics_are_the_native_samples(tmp_path):
    """In a real pytest-benchmark session, the saved stats are exactly those of the replayed samples."""
    samples = [5e-6, 4e-6, 7e-6, 4.5e-6, 30e-6, 5.5e-6, 4.2e-6]
    (tmp_path / "test_replay.py").write_text(textwrap.dedent(f"""
        import importlib.util
        spec = importlib.util.spec_from_file_location("bc", {str(BENCH_CONFTEST)!r})
        bc = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(bc)

        def test_replay(benchmark):
            bc.record_native_samples(benchmark, {samples!r})
    """))
    out = tmp_path / "out.json"
    done = _pytest(["-W", "error", f"--rootdir={tmp_path}", "--benchmark-only", f"--benchmark-json={out}",
                    "test_replay.py"], cwd=tmp_path)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    bench = json.loads(out.read_text())["benchmarks"][0]
    stats = bench["stats"]
    assert stats["rounds"] == len(samples) and stats["iterations"] == 1
    assert stats["min"] == pytest.approx(min(samples), rel=1e-9)
    assert stats["max"] == pytest.approx(max(samples), rel=1e-9)
    assert stats["median"] == pytest.approx(statistics.median(samples), rel=1e-9)
    assert stats["mean"] == pytest.approx(statistics.mean(samples), rel=1e-9)
    assert bench["options"]["timer"] == "pybench_native_samples"


@pytest.mark.mpi
def test_bench_server_measures_checks_and_refuses_bad_requests(native):
    bc = _bench_conftest()
    server = bc.BenchServer(2)
    try:
        assert server.world_size == 2
        # A malformed line reaches rank 0 only; every rank must survive it and go on serving.
        server.conn.sendall(b"this is not json\n")
        answer = json.loads(server._reader.readline())
        assert answer["ok"] is False and "malformed request" in answer["error"]
        rec = server.measure("allreduce", 4096, dtype="bfloat16", budget_s=0.05)
        assert rec["wrong"] == 0 and rec["check_iters"] == 2 and rec["size_bytes"] == 4096
        assert rec["dtype"] == "bfloat16" and len(rec["samples_s"]) >= 6 and min(rec["samples_s"]) > 0
        assert rec["busbw_gbps"] > 0 and rec["buffer_allocation"]
        from pybench.errors import SizeError
        with pytest.raises(SizeError):  # validated before it is sent
            server.measure("allgather", 4098)
    finally:
        server.close()
    assert server.proc.returncode == 0


@pytest.mark.mpi
@pytest.mark.slow
def test_suite_runs_saves_and_compare_reads_it_back_and_compare_fail_exits_nonzero(native, tmp_path):
    storage = tmp_path / "storage"
    select = ["benchmarks/", "-k", "test_allreduce and 64K or test_broadcast and 64K"]
    common = ["--benchmark-only", f"--benchmark-storage=file://{storage}"]

    first = _pytest([*select, *common, "--benchmark-autosave"], cwd=REPO)
    assert first.returncode == 0, first.stdout[-3000:] + first.stderr[-3000:]
    assert "2 passed" in first.stdout
    saved = sorted(storage.rglob("0001_*.json"))
    assert len(saved) == 1
    doc = json.loads(saved[0].read_text())
    by_name = {b["name"]: b for b in doc["benchmarks"]}
    assert set(by_name) == {"test_allreduce[64K]", "test_broadcast[64K]"}
    ar = by_name["test_allreduce[64K]"]
    assert ar["group"] == "allreduce" and ar["options"]["timer"] == "pybench_native_samples"
    assert ar["extra_info"]["wrong"] == 0 and ar["extra_info"]["busbw_gbps"] > 0
    assert ar["extra_info"]["size_bytes"] == 65536 and ar["stats"]["rounds"] >= 6
    assert ar["stats"]["median"] * 1e6 == pytest.approx(ar["extra_info"]["time_median_us"], rel=1e-9)

    # A baseline ten times faster than anything measurable: the comparison must fail.
    fast = json.loads(saved[0].read_text())
    for b in fast["benchmarks"]:
        for k in ("min", "max", "mean", "median", "q1", "q3", "iqr", "stddev", "ld15iqr", "hd15iqr", "total"):
            b["stats"][k] *= 0.1
    (saved[0].parent / "0002_fast.json").write_text(json.dumps(fast))

    again = _pytest([*select, *common, "--benchmark-compare=0001", "--benchmark-compare-fail=median:1000%"], cwd=REPO)
    assert again.returncode == 0, again.stdout[-3000:] + again.stderr[-3000:]
    text = again.stdout + again.stderr
    assert "Comparing against benchmarks from" in text and "0001_" in text
    assert "test_allreduce[64K] (NOW)" in again.stdout and "test_allreduce[64K] (0001_" in again.stdout

    worse = _pytest([*select, *common, "--benchmark-compare=0002", "--benchmark-compare-fail=median:25%"], cwd=REPO)
    assert worse.returncode != 0
    text = worse.stdout + worse.stderr
    assert "Performance has regressed" in text and "Field 'median' has failed PercentageRegressionCheck" in text


@pytest.mark.mpi
def test_suite_as_plain_tests_with_benchmarks_disabled(native):
    done = _pytest(["benchmarks/", "--benchmark-disable", "-k", "16bit or sendrecv and 64K"], cwd=REPO)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    assert "3 passed" in done.stdout
