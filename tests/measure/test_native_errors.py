"""Native errors with real ranks: a caught error leaves no armed watchdog behind,
the first failing MPI code is the one reported, and huge timeouts never fire."""

import json
from pathlib import Path

import pytest
from conftest import run_under_mpiexec

SCRIPTS = Path(__file__).resolve().parents[1] / "mpi_scripts"
pytestmark = pytest.mark.mpi

WATCHDOG_S = 0.5  # the script then lives 4 x this unarmed after catching the error


def _ranks(out: Path) -> list[dict]:
    return [json.loads((out / f"rank{r}.json").read_text()) for r in range(2)]


def test_a_caught_timed_loop_error_does_not_kill_the_rank_later(tmp_path, native, monkeypatch):
    monkeypatch.setenv("PYBENCH_INJECT_MPI_ERROR", "all")
    proc = run_under_mpiexec(SCRIPTS / "caught_error.py", [str(tmp_path), str(WATCHDOG_S)], cwd=tmp_path)
    assert "made no progress" not in proc.stderr, proc.stderr[-3000:]
    assert proc.returncode == 0, proc.stderr[-3000:]
    for rank in _ranks(tmp_path):
        assert rank["survived"] and rank["wrong"] == 0  # the check ran on the real datatype
        msg = rank["message"]
        assert msg is not None, "the injected MPI error was not raised"
        # The first failure stops the loop: sample 1, operation 1, with MPI's own words.
        assert "timed loop of allreduce of 1024 B (sample 1 of 5, operation 1 of 4)" in msg
        assert "MPI_ERR_" in msg and "MPI error code" in msg


def test_huge_timeouts_saturate_instead_of_firing_at_once(tmp_path, native):
    proc = run_under_mpiexec(SCRIPTS / "huge_timeouts.py", [str(tmp_path)], cwd=tmp_path)
    assert "made no progress" not in proc.stderr, proc.stderr[-3000:]
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert [r["passed"] for r in _ranks(tmp_path)] == [["1000000000000.0", "inf"]] * 2
