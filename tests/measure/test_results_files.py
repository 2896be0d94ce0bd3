import json
import os
import subprocess
import sys

import pytest

from pybench.errors import EnvironmentFault, FileFormatError, UsageError
from pybench.io.formats import RESULT
from pybench.measure.results import (
    OutputFiles,
    RunResult,
    SizeRecord,
    load_result,
    result_csv,
    result_json,
    write_atomic,
)


def _record(size=1024, wrong=0):
    return SizeRecord(size_bytes=size, count=size // 4, dtype="float32", redop="sum", root=-1, time_s=1e-5,
                      time_mean_s=1.1e-5, time_min_s=0.9e-5, time_max_s=2e-5, time_p5_s=0.95e-5, time_p95_s=1.5e-5,
                      time_p99_s=1.9e-5, time_ci_low_s=0.98e-5, time_ci_high_s=1.02e-5, algbw_gbps=0.1024,
                      busbw_gbps=0.1024, wrong=wrong, check_iters=2, iterations=60, ops_per_sample=10,
                      precision_met=True, stop_reason="precision", wall_s=0.01, samples_s=[1e-5] * 6)


def _result():
    return RunResult(benchmark="allreduce", backend="mpi", dtype="float32", redop="sum", timing="batched",
                     world_size=2, hosts={"h": 2}, link_class="intra-node", environment={"pybench_version": "0"},
                     options={"precision": 0.02}, command=["pybench", "allreduce"], started_at="2026-01-01T00:00:00",
                     records=[_record(1024), _record(2048, wrong=1)])


def test_json_round_trip_is_exact():
    r = _result()
    doc = json.loads(result_json(r))
    assert doc["schema"] == RESULT.schema and doc["schema_version"] == 1
    back = RunResult.from_dict(doc)
    assert back == r
    assert back.total_wrong() == 1 and back.peak_busbw().size_bytes == 1024


def test_csv_has_one_row_per_size():
    lines = result_csv(_result()).splitlines()
    assert lines[0].startswith("benchmark,backend,world_size,timing,size_bytes")
    assert len(lines) == 3 and lines[2].split(",")[4] == "2048"


def test_load_rejects_other_schemas_and_versions(tmp_path):
    p = tmp_path / "x.json"
    for doc, fragment in (({"schema": "other"}, "is not 'pybench.result'"),
                          ({"schema": RESULT.schema, "schema_version": 99}, "version 99"),
                          ({"schema": RESULT.schema, "schema_version": 1}, "missing")):
        p.write_text(json.dumps(doc))
        with pytest.raises(FileFormatError, match=fragment):
            load_result(p)
    p.write_text("{not json")
    with pytest.raises(FileFormatError, match="not JSON"):
        load_result(p)
    with pytest.raises(FileFormatError, match="cannot read"):
        load_result(tmp_path / "missing.json")


def test_atomic_write_leaves_no_temporary_files(tmp_path):
    p = tmp_path / "out.json"
    write_atomic(p, "one")
    write_atomic(p, "two")
    assert p.read_text() == "two"
    assert os.listdir(tmp_path) == ["out.json"]


def test_output_files_refuse_to_clobber(tmp_path):
    p = tmp_path / "r.json"
    p.write_text("keep")
    with pytest.raises(UsageError, match="already exists; pass --force"):
        OutputFiles(json_path=p).check_writable(force=False)
    OutputFiles(json_path=p).check_writable(force=True)
    with pytest.raises(UsageError, match="is a folder"):
        OutputFiles(json_path=tmp_path).check_writable(force=True)
    files = OutputFiles(json_path=p, csv_path=tmp_path / "r.csv")
    files.write(_result())
    assert json.loads(p.read_text())["records"][1]["wrong"] == 1
    assert (tmp_path / "r.csv").read_text().count("\n") == 3


# ---- hardening (issue 16): exclusive creation, full disks ------------------------------------

def test_claim_is_exclusive_even_when_the_file_appears_after_the_check(tmp_path, monkeypatch):
    import pybench.measure.results as results
    monkeypatch.setattr(results, "refuse_existing", lambda path, force: None)  # the race window
    files = OutputFiles(json_path=tmp_path / "a.json", csv_path=tmp_path / "a.csv")
    files.claim(force=False)
    (tmp_path / "a.json").write_text("the other run's")
    with pytest.raises(UsageError, match=r"a\.json already exists \(another run writing it\?\)"):
        files.write(_result())
    assert (tmp_path / "a.json").read_text() == "the other run's" and not (tmp_path / "a.csv").exists()


def test_claim_creates_nothing_and_the_first_write_creates_each_file_whole(tmp_path):
    files = OutputFiles(json_path=tmp_path / "a.json", csv_path=tmp_path / "a.csv")
    assert files.claim(force=False) == []
    assert os.listdir(tmp_path) == []  # no empty placeholder: a result file exists only once valid
    files.write(_result())
    assert json.loads((tmp_path / "a.json").read_text())["records"][1]["wrong"] == 1
    second = OutputFiles(json_path=tmp_path / "a.json")
    with pytest.raises(UsageError, match="already exists"):
        second.claim(force=False)  # a second run on the same files
    assert second.claim(force=True) == []
    link = tmp_path / "link.json"
    link.symlink_to(tmp_path / "elsewhere.json")
    with pytest.raises(UsageError):
        OutputFiles(json_path=link).claim(force=False)
    assert not (tmp_path / "elsewhere.json").exists()


@pytest.fixture
def tiny_disk(tmp_path):
    """A 64 KiB tmpfs (root only), unmounted afterwards."""
    if os.geteuid() != 0:
        pytest.skip("mounting a tmpfs needs root")
    d = tmp_path / "tiny"
    d.mkdir()
    r = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=64k", "tmpfs", str(d)], capture_output=True, text=True)
    if r.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {r.stderr.strip()}")
    try:
        yield d
    finally:
        subprocess.run(["umount", "-l", str(d)], capture_output=True)


def test_a_full_disk_is_an_environment_fault_naming_the_file(tiny_disk):
    (tiny_disk / "filler").write_bytes(b"x" * (60 << 10))
    result = _result()
    result.records = [_record()] * 40
    with pytest.raises(EnvironmentFault, match=r"cannot write .*r\.json: No space left on device"):
        OutputFiles(json_path=tiny_disk / "r.json").write(result)
    assert sorted(os.listdir(tiny_disk)) == ["filler"]  # no temporary file left


def test_a_disk_filling_up_mid_run_stops_the_job_in_one_line(tiny_disk, native):
    out = tiny_disk / "r.json"
    # about 30 KB of raw samples per size: the second or third rewrite does not fit in 64 KiB
    proc = subprocess.run([sys.executable, "-m", "pybench", "allreduce", "--sizes", "1K:64K", "--timing", "per-op",
                           "--iters", "1500", "-w", "1", "--backend", "mpi", "--json", str(out)],
                          cwd=tiny_disk.parent, capture_output=True, text=True, timeout=300)
    lines = [ln for ln in proc.stderr.splitlines() if ln.strip() and not ln.startswith("pybench: warning:")]
    assert proc.returncode == 3, proc.stderr
    assert lines[0] == f"pybench: error: cannot write {out}: No space left on device", lines
    assert "fell behind" not in proc.stderr and "Traceback" not in proc.stderr
    doc = json.loads(out.read_text())  # the last complete rewrite is intact
    assert doc["finished"] is False and 1 <= len(doc["records"]) < 7
    # the sizes measured after it were in the run's journal, which the job's end deleted: now it is kept, said
    # in a second line, and recovered once there is space
    assert lines[1:] == [f"pybench: note: {out} and the files written with it may lack sizes measured after their "
                         f"last rewrite (No space left on device); the journal of every size is kept: free space, "
                         f"then `pybench recover {out}`"]
    assert subprocess.run(["mount", "-o", "remount,size=1m", str(tiny_disk)]).returncode == 0
    recovered = subprocess.run([sys.executable, "-m", "pybench", "recover", str(out)], capture_output=True, text=True,
                               timeout=120)
    assert recovered.returncode == 0, recovered.stderr
    sizes = [r["size_bytes"] for r in json.loads(out.read_text())["records"]]
    assert len(doc["records"]) < len(sizes) and sizes == [1 << k for k in range(10, 10 + len(sizes))], sizes


def test_two_runs_on_one_json_file_the_second_fails_in_one_line(tmp_path, native):
    argv = [sys.executable, "-m", "pybench", "allreduce", "--sizes", "1K:4K", "--iters", "20", "--backend", "mpi",
            "--json", "same.json"]
    procs = [subprocess.Popen(argv, cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
             for _ in range(2)]
    outs = [p.communicate(timeout=300) for p in procs]
    codes = sorted(p.returncode for p in procs)
    assert codes == [0, 2], outs
    loser = outs[[p.returncode for p in procs].index(2)][1]
    errors = [ln for ln in loser.splitlines() if ln.strip()]
    assert len(errors) == 1 and "same.json already exists" in errors[0], loser
    assert len(json.loads((tmp_path / "same.json").read_text())["records"]) == 3


def test_a_run_whose_file_appeared_after_the_check_fails_in_one_line(tmp_path, native):
    """Under a user's mpiexec no parent checks the file first: rank 0's exclusive creation does."""
    from pybench.measure.launch import find_launcher
    from pybench.measure.mpi_stderr import START_ATTEMPTS, failed_to_start
    first = subprocess.Popen([sys.executable, "-m", "pybench", "allreduce", "--sizes", "1K,16M", "--iters", "100",
                              "--backend", "mpi", "--json", "same.json"], cwd=tmp_path, stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE, text=True)
    try:
        while first.poll() is None and not (tmp_path / "same.json").exists():
            pass
        launcher = find_launcher()
        for _ in range(START_ATTEMPTS):  # Open MPI's start-up race (mpi_stderr), which pybench's own launch retries
            second = subprocess.run(launcher.command(2, [sys.executable, "-m", "pybench", "allreduce", "--sizes", "1K",
                                                         "--backend", "mpi", "--json", "same.json"]),
                                    cwd=tmp_path, env=launcher.environment(), capture_output=True, text=True,
                                    timeout=120)
            if not failed_to_start(second.stderr):
                break
        first.communicate(timeout=300)
    finally:
        if first.poll() is None:
            first.kill()
            first.communicate()
    assert first.returncode == 0
    errors = [ln for ln in second.stderr.splitlines() if ln.startswith("pybench: error:")]
    assert second.returncode != 0 and len(errors) == 1, second.stderr
    assert "same.json already exists" in errors[0]
    assert json.loads((tmp_path / "same.json").read_text())["finished"] is True


def test_outputs_that_are_not_regular_files_are_refused_before_the_run(tmp_path):
    os.mkfifo(tmp_path / "fifo")
    (tmp_path / "link").symlink_to(tmp_path / "victim")  # a dangling link: "absent" to exists()
    expected = {("fifo", False): "already exists", ("fifo", True): "not a regular file \\(a FIFO\\)",
                ("link", False): "symbolic link", ("link", True): "symbolic link"}
    for (name, force), why in expected.items():
        with pytest.raises(UsageError, match=why):
            OutputFiles(json_path=tmp_path / name).check_writable(force)
        with pytest.raises(UsageError, match=why):
            OutputFiles(csv_path=tmp_path / name).claim(force)
    assert not (tmp_path / "victim").exists()
