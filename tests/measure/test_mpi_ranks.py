"""Real multi-rank runs over MPI (2 ranks on this machine) of the native harness."""

import json
from pathlib import Path

import pytest
from conftest import assert_every_case_exact, rank_results, run_under_mpiexec

SCRIPTS = (Path(__file__).resolve().parents[1] / "mpi_scripts")
pytestmark = pytest.mark.mpi


@pytest.fixture(scope="module")
def sweep(tmp_path_factory, native):
    out = tmp_path_factory.mktemp("sweep")
    return rank_results(SCRIPTS / "sweep_all.py", out)


def test_every_collective_dtype_and_op_is_exact(sweep):
    assert_every_case_exact(sweep[0]["results"])


def test_p2p_tests_ran_and_verified(sweep):
    p2p = [r for r in sweep[0]["results"] if r["collective"].startswith("p2p_")]
    assert {r["collective"] for r in p2p} == {"p2p_latency", "p2p_bw", "p2p_bibw"}
    assert all(r["wrong"] == 0 for r in p2p)


def test_samples_are_the_slowest_rank_and_identical_everywhere(sweep):
    a, b = sweep[0]["results"], sweep[1]["results"]
    assert len(a) == len(b)
    for ra, rb in zip(a, b):
        assert ra["samples"] == rb["samples"]  # max-reduced in C++: every rank decides alike
        assert len(ra["samples"]) == 3
        assert all(0 < s < 1 for s in ra["samples"])
        assert ra["wall"] >= max(ra["samples"]) > 0


def test_rank_info_names_hosts(sweep):
    info = sweep[0]["info"]
    assert info["world_size"] == 2 and info["local_size"] == 2
    assert info["hosts"] == [info["host"], info["host"]]
    assert {s["info"]["rank"] for s in sweep} == {0, 1}


def test_mpi_runs_at_least_thread_funneled(sweep):
    # The watchdog thread runs beside the main thread; mpi_init asks for FUNNELED and checks it.
    levels = {s["thread_level"] for s in sweep}
    assert levels and levels <= {"MPI_THREAD_FUNNELED", "MPI_THREAD_SERIALIZED", "MPI_THREAD_MULTIPLE"}


def test_invalid_native_requests_raise_native_error(tmp_path, native):
    proc = run_under_mpiexec(SCRIPTS / "native_errors.py", [str(tmp_path)], cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr[-3000:]
    msgs = json.loads((tmp_path / "rank0.json").read_text())
    assert "multiple of ranks x element size" in msgs["not_divisible"]
    assert "not a multiple of the element size" in msgs["bad_element"]
    assert "root 5 is not a rank" in msgs["bad_root"]
    assert "unknown collective 'allfoo'" in msgs["unknown"]
    assert "unknown dtype 'float8'" in msgs["bad_dtype"]
    assert "32-bit count limit" in msgs["too_many_elements"]
    assert "unknown point-to-point test 'pong'" in msgs["bad_p2p"]
