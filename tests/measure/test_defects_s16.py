"""Three defects, each reproduced as a user meets it: a stdout that fails (a full disk, a closed
pipe) exiting 0; `-t 0` advising `--np 0`, which is refused; all-zero timing samples read as a
measurement."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest
from conftest import REPO as REPO_ROOT
from conftest import processes_with

from pybench.cli.main import main

FIXTURE_A = Path(__file__).resolve().parents[1] / "fixtures" / "compare_allreduce_a.json"
FIXTURE_B = FIXTURE_A.with_name("compare_allreduce_b.json")
SMALL_RUN = ["allreduce", "--backend", "mpi", "--iters", "20"]


def _env() -> dict[str, str]:
    # As a user runs it: stdout block-buffered (PYTHONUNBUFFERED hides the flush at exit).
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONUNBUFFERED", "PYBENCH_RANK_PROCESS")}
    return env


def _pybench(args: list[str], cwd: Path, stdout, timeout: float = 120) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "pybench", *args], cwd=cwd, stdout=stdout, stderr=subprocess.PIPE,
                          text=True, timeout=timeout, env=_env(), stdin=subprocess.DEVNULL)


def _closed_pipe() -> int:
    """The write end of a pipe nobody reads: the first write fails with EPIPE."""
    r, w = os.pipe()
    os.close(r)
    return w


def _errors(stderr: str) -> list[str]:
    return [line for line in stderr.splitlines() if not line.startswith(("pybench: warning:", "pybench: note:"))]


# --- 1. a stdout that fails is an error ---------------------------------------------------------

# --help of a subcommand is longer than stdout's buffer: argparse itself dropped the error.
@pytest.mark.parametrize("args", [["system", "dgx-h100"], ["--version"], ["allreduce", "--help"],
                                  ["compare", str(FIXTURE_A), str(FIXTURE_B)]], ids=" ".join)
def test_a_full_stdout_is_one_line_and_exit_3(args, tmp_path):
    with open("/dev/full", "w") as full:
        r = _pybench(args, tmp_path, full)
    err = r.stderr.strip().splitlines()
    assert r.returncode == 3 and len(err) == 1, (r.returncode, r.stderr)
    assert err[0].startswith("pybench: error: cannot write the output to stdout: No space left on device"), err


@pytest.mark.parametrize("args", [["system", "dgx-h100"], ["--version"], ["allreduce", "--help"]], ids=" ".join)
def test_a_closed_stdout_pipe_is_exit_141_quietly(args, tmp_path):
    w = _closed_pipe()
    try:
        r = _pybench(args, tmp_path, w)
    finally:
        os.close(w)
    assert r.returncode == 141 and r.stderr == "", (r.returncode, r.stderr)


@pytest.mark.mpi
def test_a_run_into_a_full_stdout_keeps_its_results_and_exits_3(tmp_path, native):
    out = tmp_path / "full.json"
    with open("/dev/full", "w") as full:
        r = _pybench([*SMALL_RUN, "--sizes", "1K:4K", "--json", str(out)], tmp_path, full)
    err = _errors(r.stderr)
    assert r.returncode == 3 and len(err) == 1, (r.returncode, r.stderr)
    assert "cannot write the table to stdout: No space left on device" in err[0] and str(out) in err[0], err
    doc = json.loads(out.read_text())  # written whole before the run failed
    assert doc["finished"] is True and [x["size_bytes"] for x in doc["records"]] == [1024, 2048, 4096]


@pytest.mark.mpi
def test_a_run_whose_reader_goes_away_ends_141_and_keeps_what_it_measured(tmp_path, native):
    out = tmp_path / "pipe.json"
    with open(tmp_path / "stderr.txt", "w") as err_file:
        proc = subprocess.Popen([sys.executable, "-m", "pybench", *SMALL_RUN, "--sizes", "1K:1M", "--json", str(out)],
                                cwd=tmp_path, stdout=subprocess.PIPE, stderr=err_file, env=_env(),
                                stdin=subprocess.DEVNULL)
        assert proc.stdout is not None
        for line in proc.stdout:  # as `| head` does: read up to the first row, then leave
            if not line.startswith(b"#"):
                break
        proc.stdout.close()
        rc = proc.wait(timeout=120)
    stderr = (tmp_path / "stderr.txt").read_text()
    assert rc == 141 and _errors(stderr) == [], (rc, stderr)
    doc = json.loads(out.read_text())
    assert doc["records"] and doc["records"][0]["size_bytes"] == 1024
    assert doc["finished"] or "closed pipe" in doc["cut_short"], doc["cut_short"]
    deadline = time.monotonic() + 10
    while processes_with(str(out)) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert processes_with(str(out)) == [], "a rank outlived the run"


# --- 2. advice that is itself accepted ----------------------------------------------------------

@pytest.mark.mpi
@pytest.mark.parametrize("value", ["0", "-1"])
def test_t_below_1_advises_what_is_accepted(value, capsys, monkeypatch, native):
    monkeypatch.delenv("NCCL_TESTS_MIN_BW", raising=False)
    run = ["allreduce", "--backend", "mpi", "--sizes", "1K", "--iters", "5"]
    assert main([*run, "-t", value]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    # the old advice, `--np 0`, is itself refused ("must be at least 1")
    assert len(err) == 1 and "--np" not in err[0] and "pass -t 1" in err[0], err
    assert main([*run, "-t", "1"]) == 0  # the advice followed runs


@pytest.mark.parametrize("flag,value,taken", [("-a", "7", "-a 3"), ("-z", "9", "-z 1"), ("-I", "4", "-I 1")])
def test_an_unknown_nccl_tests_value_names_one_pybench_takes(flag, value, taken, capsys, monkeypatch):
    monkeypatch.delenv("NCCL_TESTS_MIN_BW", raising=False)
    assert main(["allreduce", "--backend", "mpi", "--sizes", "1K", flag, value]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and taken in err[0], err


# --- 3. impossible timing samples ---------------------------------------------------------------

def _result_with_samples(tmp_path: Path, sample: float) -> Path:
    doc = json.loads(FIXTURE_A.read_text())
    for rec in doc["records"]:
        rec["samples_s"] = [sample] * len(rec["samples_s"])
    path = tmp_path / "zero_samples.json"
    path.write_text(json.dumps(doc))
    return path


@pytest.mark.parametrize("command", ["compare", "report", "plot"])
def test_all_zero_samples_are_refused_in_one_line(command, tmp_path, capsys):
    path = _result_with_samples(tmp_path, 0.0)
    argv = {"compare": ["compare", str(path), str(FIXTURE_B)],
            "report": ["report", str(path), "-o", str(tmp_path / "r.html")],
            "plot": ["plot", str(path), "-o", str(tmp_path / "p.png")]}[command]
    assert main(argv) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and str(path) in err[0] and "samples_s[0] is 0.0" in err[0], err
    assert "above 0 s" in err[0] and "measure this size again" in err[0]


def test_load_result_refuses_a_zero_sample_among_good_ones(tmp_path):
    from pybench.errors import FileFormatError
    from pybench.measure.results import load_result
    doc = json.loads(FIXTURE_A.read_text())
    doc["records"][1]["samples_s"][3] = 0
    path = tmp_path / "one_zero.json"
    path.write_text(json.dumps(doc))
    with pytest.raises(FileFormatError, match=r"samples_s\[3\] is 0"):
        load_result(path)
    assert load_result(FIXTURE_A).records  # a real file still loads


@pytest.mark.parametrize("unbuffered", ["", "1"])
def test_a_large_output_into_a_full_stdout_says_stdout(tmp_path, unbuffered):
    """A table larger than stdout's buffer (or any table, unbuffered) fails inside the command's print,
    not at the final flush: the line still names stdout, not "a file"."""
    model = tmp_path / "node.json"
    node = REPO_ROOT / "tests" / "fixtures" / "shared_data" / "vtrain" / "a100_nvswitch_allreduce_8gpu.csv"
    assert main(["fit", str(node), "-o", str(model)]) == 0
    env = {k: v for k, v in os.environ.items() if k != "PYTHONUNBUFFERED"}
    if unbuffered:
        env["PYTHONUNBUFFERED"] = "1"
    with open("/dev/full", "w") as full:
        p = subprocess.run([sys.executable, "-m", "pybench", "predict", str(model), "--sizes", "1K:1G:+1M"],
                           stdout=full, stderr=subprocess.PIPE, text=True, env=env, timeout=120)
    assert p.returncode == 3 and p.stderr.strip().splitlines() == [
        "pybench: error: cannot write the output to stdout: No space left on device; free space on its disk or "
        "send it elsewhere"], p.stderr
