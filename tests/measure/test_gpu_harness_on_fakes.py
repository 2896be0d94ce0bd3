"""The GPU harness's C++ (csrc/cuda) on CPUs: the real nccl_harness.cpp, nccl_api.cpp
and host_latch.hpp compiled with ThreadSanitizer against a fake CUDA runtime and
loaded onto a fake libnccl.so (tests/measure/gpu_fakes). Each scenario runs in its
own process and prints what happened; the review points of issue 27 each have one:
ncclInProgress is an error on the blocking path, a latch launch failing part-way
still lets the launched kernels go, the expired flag is one whole 64-bit cell, an
abort from another thread is not a data race and stops the waiting thread, every
device buffer and event has an owner, and a failing ncclCommGetAsyncError stops the
wait. Plus the host-clock timing mode (no latch kernel, one value per sample)."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
FAKES = Path(__file__).resolve().parent / "gpu_fakes"
CUDA_INCLUDE = Path(os.environ.get("CUDA_HOME", "/usr/local/cuda")) / "include"
HARNESS_SOURCES = ["csrc/cuda/nccl_harness.cpp", "csrc/cuda/nccl_api.cpp", "csrc/cuda/nccl_collectives.cpp",
                   "csrc/cuda/nccl_setup.cpp", "csrc/common/native_error.cpp"]


@pytest.fixture(scope="module")
def driver(tmp_path_factory):
    cxx = shutil.which("g++")
    if cxx is None or not (CUDA_INCLUDE / "cuda_runtime.h").is_file():
        pytest.skip("needs g++ and the CUDA headers (the harness includes cuda_runtime.h)")
    libtsan = subprocess.run([cxx, "-print-file-name=libtsan.so"], capture_output=True, text=True).stdout.strip()
    if not Path(libtsan).is_file():
        pytest.skip("needs g++'s ThreadSanitizer runtime (libtsan)")
    out = tmp_path_factory.mktemp("gpu_fakes")
    lib = out / "libnccl.so.2"
    exe = out / "harness_driver"
    builds = [
        [cxx, "-std=c++17", "-shared", "-fPIC", "-O1", str(FAKES / "fake_nccl.cpp"), "-o", str(lib)],
        [cxx, "-std=c++17", "-O1", "-g", "-fsanitize=thread", f"-I{REPO / 'csrc'}", f"-I{FAKES}", f"-I{CUDA_INCLUDE}",
         str(FAKES / "harness_driver.cpp"), str(FAKES / "fake_cudart.cpp"), *[str(REPO / s) for s in HARNESS_SOURCES],
         "-ldl", "-lpthread", "-o", str(exe)],
    ]
    for cmd in builds:
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=600)
        assert proc.returncode == 0, proc.stderr[-3000:]
    return exe, lib


def run(driver, scenario: str, **env: str | int) -> tuple[dict[str, str], list[str], str]:
    """Runs one scenario; returns its key=value lines, its other lines, and stderr (TSan's reports)."""
    exe, lib = driver
    environ = dict(os.environ, TSAN_OPTIONS="exitcode=66 halt_on_error=0",
                   **{k: str(v) for k, v in env.items()})
    proc = subprocess.run([str(exe), scenario, str(lib)], capture_output=True, text=True, timeout=120, env=environ)
    assert proc.returncode == 0, f"exit {proc.returncode}\n{proc.stdout}\n{proc.stderr[-4000:]}"
    assert "ThreadSanitizer" not in proc.stderr, proc.stderr[-4000:]
    values, lines = {}, []
    for line in proc.stdout.splitlines():
        key, sep, value = line.partition("=")
        if sep and " " not in key:
            values[key] = value
        else:
            lines.append(line)
    return values, lines, proc.stderr


def test_nccl_check_treats_in_progress_as_a_failure(driver):
    # Every NCCL_CHECK'ed call goes to the blocking work communicator: ncclInProgress there
    # means the call did not finish, so it must not pass as success.
    _, lines, _ = run(driver, "check")
    assert "check success=ok" in lines
    assert any(line.startswith("check in-progress=threw") and "(ncclResult 7)" in line for line in lines), lines
    assert any(line.startswith("check system-error=threw") for line in lines), lines


def test_a_latch_launch_failing_part_way_still_releases_the_kernels_launched(driver):
    # Device 1 cannot be made current: device 0's latch kernel is already waiting for target 1.
    values, lines, _ = run(driver, "latch_partial_launch", FAKE_CUDA_BAD_DEVICE=1)
    assert values["hold"] == "threw"
    latches = [line for line in lines if line.startswith("latch ")]
    assert latches == ["latch target=1 published=1"], lines  # published >= target: it runs


def test_the_expired_flag_is_one_whole_64_bit_cell(driver):
    # The kernel stores 1ull through the pointer it is given; the host reads and clears all 64 bits.
    values, _, _ = run(driver, "latch_expired")
    assert values == {"expired_before": "0", "expired_after": "1", "expired_cleared": "0"}


def test_a_failing_ncclcommgetasyncerror_stops_the_wait(driver):
    # No timeout and a stream that finishes after a while: ignoring the return code, the
    # wait would return as if all were well.
    values, _, _ = run(driver, "wait_async_rc", FAKE_NCCL_ASYNC_RC=2, FAKE_CUDA_BUSY_POLLS=3000)
    assert values["wait"].startswith("threw ncclCommGetAsyncError failed during a probe on rank 0"), values
    assert "(ncclResult 2)" in values["wait"]
    assert values["aborts"] == "1"


def test_abort_from_another_thread_is_race_free_and_stops_the_waiting_thread(driver):
    # One thread waits on streams that never finish; another sets the timeout and aborts. ThreadSanitizer
    # (run() fails on any report) sees the shared state only under the world's lock, each
    # communicator is aborted once, and the waiter stops on the abort, not its timeout.
    values, _, _ = run(driver, "abort_race", FAKE_CUDA_BUSY_POLLS=-1)
    assert values["aborts"] == "1,1"
    assert values["wait"].startswith("threw the NCCL communicators were aborted"), values
    assert "made no progress" not in values["wait"]


@pytest.mark.parametrize("failure", [{"FAKE_CUDA_FAIL_MALLOC": 4}, {"FAKE_CUDA_FAIL_EVENT_CREATE": 3}],
                         ids=["second-buffer", "third-event"])
def test_pair_times_frees_what_it_made_when_a_step_fails(driver, failure):
    # World: one scratch buffer per device (cudaMalloc 1-2); pair_times: send (3), receive (4),
    # then 2 x 2 samples of events.
    values, _, _ = run(driver, "pair_times_fails", **failure)
    assert values["pair_times"] == "threw"
    assert values["leaked_device_buffers"] == "0" and values["leaked_events"] == "0"
    assert values["left_after_world"] == "0,0,0"


def test_a_bench_whose_event_creation_fails_leaks_no_event(driver):
    values, _, _ = run(driver, "bench_fails", FAKE_CUDA_FAIL_EVENT_CREATE=2)
    assert values == {"bench": "threw", "leaked_events": "0", "left_after_world": "0,0,0"}


def test_host_timing_uses_no_latch_and_gives_one_value_per_sample(driver):
    _, lines, _ = run(driver, "host_timing")
    assert "host samples=3 positive=3 latches=0" in lines, lines
    assert "host-graph samples=3 positive=3 latches=0" in lines, lines
    assert "batched samples=3 positive=3 latches=6" in lines, lines  # 3 samples x 2 devices, latched
