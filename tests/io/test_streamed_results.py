"""Results streamed (issue 28): a journal per result in the job folder, the file written whole
at growing intervals and only once valid, rebuilt from the journal when rank 0 dies."""

from __future__ import annotations

import dataclasses
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from pybench.measure.job import mark_cut_short
from pybench.measure.result_journal import journal_path
from pybench.measure.result_journal import IN_PROGRESS
from pybench.measure.results import OutputFiles, RunResult, SizeRecord


def _record(size: int) -> SizeRecord:
    t = 1e-5
    return SizeRecord(size_bytes=size, count=size // 4, dtype="float32", redop="sum", root=-1, time_s=t, time_mean_s=t,
                      time_min_s=t, time_max_s=t, time_p5_s=t, time_p95_s=t, time_p99_s=t, time_ci_low_s=t,
                      time_ci_high_s=t, algbw_gbps=1.0, busbw_gbps=1.0, wrong=0, check_iters=0, iterations=5,
                      ops_per_sample=1, precision_met=True, stop_reason="fixed", wall_s=0.01, samples_s=[t] * 3)


def _result() -> RunResult:
    return RunResult(benchmark="allreduce", backend="mpi", dtype="float32", redop="sum", timing="batched",
                     world_size=2, hosts={"h": 2}, link_class="intra-node", environment={}, options={},
                     command=["pybench"], started_at="2026-01-01T00:00:00+00:00")


def test_a_writer_killed_mid_write_leaves_no_temporary_and_the_old_file_intact(tmp_path):
    out = tmp_path / "r.json"
    out.write_text("old\n")
    code = ("import os, signal, sys; from pybench.io import files; "
            "os.fsync = lambda fd: os.kill(os.getpid(), signal.SIGKILL); "
            "files.write_atomic(sys.argv[1], 'x' * (8 << 20))")
    p = subprocess.run([sys.executable, "-c", code, str(out)], capture_output=True, timeout=60)
    assert p.returncode == -signal.SIGKILL
    assert os.listdir(tmp_path) == ["r.json"] and out.read_text() == "old\n"


def test_rank_0_dying_between_rewrites_loses_no_size(tmp_path, monkeypatch):
    job = tmp_path / "job"
    job.mkdir()
    monkeypatch.setenv("PYBENCH_JOB_DIR", str(job))
    out = tmp_path / "out" / "r.json"
    out.parent.mkdir()
    files, result = OutputFiles(json_path=out), _result()
    files.claim(force=False)
    files.write(result)
    for k in range(10):
        result.records.append(_record(1024 << k))
        files.write(result)
    on_disk = json.loads(out.read_text())
    assert len(on_disk["records"]) == 8 and on_disk["cut_short"].startswith(IN_PROGRESS)  # rewritten at 1, 2, 4, 8
    # rank 0 is SIGKILLed here; the parent rebuilds the file from the journal
    assert mark_cut_short([out], "rank 0 was killed by signal 9", job) == [str(out)]
    doc = json.loads(out.read_text())
    assert [r["size_bytes"] for r in doc["records"]] == [1024 << k for k in range(10)]
    assert doc["cut_short"] == "rank 0 was killed by signal 9" and doc["finished"] is False
    assert os.listdir(out.parent) == ["r.json"]


def test_the_final_write_removes_the_journal(tmp_path, monkeypatch):
    monkeypatch.setenv("PYBENCH_JOB_DIR", str(tmp_path))
    out = tmp_path / "r.json"
    files, result = OutputFiles(json_path=out), _result()
    result.records.append(_record(8))
    files.write(result)
    journal = journal_path(out)
    assert journal is not None and journal.exists()
    result.finished = True
    files.write(result)
    assert not journal.exists() and json.loads(out.read_text())["cut_short"] is None


def test_saving_a_size_does_not_reserialise_the_sizes_before_it(tmp_path, monkeypatch):
    monkeypatch.setenv("PYBENCH_JOB_DIR", str(tmp_path))
    calls = []
    original = SizeRecord.to_dict
    monkeypatch.setattr(SizeRecord, "to_dict", lambda self: calls.append(1) or original(self))
    files, result = OutputFiles(json_path=tmp_path / "r.json"), _result()
    n = 2000
    for k in range(n):
        result.records.append(_record(8 * (k + 1)))
        files.write(result)
    result.finished = True
    files.write(result)
    # each size is encoded once, for the journal and every rewrite of the file alike (was n^2 / 2, then 3n)
    assert len(calls) == n
    doc = json.loads((tmp_path / "r.json").read_text())
    assert [r["size_bytes"] for r in doc["records"]] == [8 * (k + 1) for k in range(n)]


@pytest.mark.mpi
def test_sigkill_of_rank_0_mid_run_leaves_every_size_marked_and_nothing_else(tmp_path, native):
    out = tmp_path / "out" / "r.json"
    out.parent.mkdir()
    p = subprocess.Popen([sys.executable, "-m", "pybench", "allreduce", "--sizes", "1K:1M", "--timing", "per-op",
                          "--iters", "4000", "-w", "1", "--backend", "mpi", "--json", str(out)], cwd=tmp_path,
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True)
    try:
        rank0, job, deadline = None, None, time.monotonic() + 120
        while time.monotonic() < deadline and not (job and list(Path(job).glob("journal-*.jsonl"))
                                                   and _journaled(job) >= 3):
            rank0, job = _rank0_and_job(str(out))
            time.sleep(0.05)
        assert rank0 and job, "rank 0 never journaled three sizes"
        os.kill(rank0, signal.SIGKILL)
        _, stderr = p.communicate(timeout=120)
    finally:
        if p.poll() is None:
            os.killpg(p.pid, signal.SIGKILL)
            p.communicate()
    assert p.returncode not in (0, None) and "Traceback" not in stderr
    doc = json.loads(out.read_text())
    assert doc["finished"] is False and "rank 0" in doc["cut_short"] and not doc["cut_short"].startswith(IN_PROGRESS)
    assert len(doc["records"]) >= 3
    assert os.listdir(out.parent) == ["r.json"] and not Path(job).exists()


def _journaled(job: str) -> int:
    return sum(f.read_bytes().count(b"\n") - 1 for f in Path(job).glob("journal-*.jsonl"))


def _rank0_and_job(marker: str) -> tuple[int | None, str | None]:
    for d in Path("/proc").iterdir():
        if not d.name.isdigit():
            continue
        try:
            if marker not in (d / "cmdline").read_bytes().decode(errors="replace"):
                continue
            env = (d / "environ").read_bytes().split(b"\0")
        except OSError:
            continue
        if b"OMPI_COMM_WORLD_RANK=0" in env:
            job = next((e.split(b"=", 1)[1].decode() for e in env if e.startswith(b"PYBENCH_JOB_DIR=")), None)
            return int(d.name), job
    return None, None


def test_a_journal_is_rebuilt_into_the_file_by_streaming_not_by_holding_every_record(tmp_path, monkeypatch):
    import tracemalloc

    from pybench.measure.result_journal import Journal
    from pybench.measure.results import record_json
    out = tmp_path / "r.json"
    journal = Journal(journal_path(out, tmp_path))
    line = record_json(dataclasses.replace(_record(8), samples_s=[1e-5] * 60))
    n = 2000  # about 3 MB of records
    journal.append(lambda: dataclasses.replace(_result(), records=[]).to_dict(), [line] * n)
    tracemalloc.start()
    try:
        assert mark_cut_short([out], "rank 0 was killed by signal 9", tmp_path) == [str(out)]
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 2 << 20, peak  # chunks of 256 KiB, never the whole document
    doc = json.loads(out.read_text())
    assert len(doc["records"]) == n and doc["cut_short"] == "rank 0 was killed by signal 9"


def test_files_no_journal_can_rebuild_hold_every_size_their_rewrite_cost_allows(tmp_path, monkeypatch):
    """-J (or --csv) without --json: no journal names the run, so nothing rebuilds those files when rank 0 is
    killed (Ctrl-C under mpiexec). They were rewritten at 1, 2, 4, 8 ... sizes, and a run stopped at the
    fifth size kept four; they are now rewritten at every size whose rewrite takes under 1/50 of the time
    since the last. A file a journal rebuilds keeps the doubling schedule."""
    from pybench.measure.nccl_tests_json import NcclTestsJsonWriter
    monkeypatch.setenv("PYBENCH_JOB_DIR", str(tmp_path))
    clock = [0.0]
    monkeypatch.setattr(time, "monotonic", lambda: clock[0])
    alone, result = OutputFiles(csv_path=tmp_path / "r.csv"), _result()
    alone.claim(force=False)
    writer = NcclTestsJsonWriter(tmp_path / "nt.json", ["pybench"])
    alone.also_write(writer)
    journaled, twin = OutputFiles(json_path=tmp_path / "r.json"), _result()
    journaled.claim(force=False)
    for k in range(6):
        clock[0] += 1.0  # a size measured in a second; the rewrites cost nothing on this clock
        result.records.append(_record(1024 << k))
        twin.records.append(_record(1024 << k))
        alone.write(result)
        journaled.write(twin)
        assert len(json.loads(writer.path.read_text())["results"]) == k + 1
        assert len((tmp_path / "r.csv").read_text().splitlines()) == k + 2  # the header and every size
    assert len(json.loads((tmp_path / "r.json").read_text())["records"]) == 4  # rewritten at 1, 2, 4


def test_a_run_cut_short_says_in_its_nccl_tests_json_how_far_it_meant_to_go(tmp_path):
    """nccl-tests' config holds -b and -e: the sweep asked for. A pybench run stopped after two of its sizes
    wrote the last measured size as maximum_bytes, so a reader could not tell it from a run asked for less."""
    from pybench.measure.nccl_tests_json import NcclTestsJsonWriter
    result = _result()
    result.options["requested_bytes"] = [1024, 1 << 30]
    result.records += [_record(1024), _record(2048)]
    writer = NcclTestsJsonWriter(tmp_path / "nt.json", ["pybench"])
    writer.write(result)
    config = json.loads(writer.path.read_text())["config"]
    assert (config["minimum_bytes"], config["maximum_bytes"]) == (1024, 1 << 30)
    del result.options["requested_bytes"]  # a result from before the request was recorded: the sizes measured
    writer.write(result)
    config = json.loads(writer.path.read_text())["config"]
    assert (config["minimum_bytes"], config["maximum_bytes"]) == (1024, 2048)


def test_a_journal_is_never_rebuilt_into_a_file_that_holds_another_run(tmp_path):
    """A run whose first write found its --json taken by another run (exit 2 or 3) still journaled a size: the
    file is the other run's, and rebuilding it from this run's journal would replace that run's sizes."""
    from pybench.measure.result_journal import Journal
    from pybench.measure.results import record_json
    out = tmp_path / "r.json"
    theirs = dataclasses.replace(_result(), started_at="2026-01-01T00:00:00", records=[_record(8)] * 3,
                                 cut_short="in progress: 3 size(s) measured when this was written")
    out.write_text(json.dumps(theirs.to_dict()))
    before = out.read_bytes()
    journal = Journal(journal_path(out, tmp_path))
    mine = dataclasses.replace(_result(), started_at="2026-01-01T00:00:05", records=[])
    journal.append(lambda: mine.to_dict(), [record_json(_record(8))])
    mark_cut_short([out], "the run stopped at a fault of its environment", tmp_path)
    assert out.read_bytes() == before


def test_a_minus_j_file_over_several_tests_is_rebuilt_with_the_earlier_tests_rows(tmp_path, monkeypatch):
    """-d all writes one -J file over every type: a run killed in its second type is rebuilt from that test's
    journal, whose first line keeps the rows of the tests before it (they were only in rank 0's memory)."""
    from pybench.measure.nccl_tests_json import NcclTestsJsonWriter
    from pybench.measure.results import record_json
    monkeypatch.setenv("PYBENCH_JOB_DIR", str(tmp_path))
    writer = NcclTestsJsonWriter(tmp_path / "nt.json", ["pybench"])
    writer.tests = 2
    first = dataclasses.replace(_result(), records=[_record(8), _record(16)], finished=True)
    second = dataclasses.replace(_result(), dtype="float64", records=[])
    for k, (result, sizes) in enumerate(((first, (8, 16)), (second, (8,)))):
        files = OutputFiles(json_path=tmp_path / f"r{k}.json")
        files.claim(force=False)
        files.also_write(writer)
        files.write(dataclasses.replace(result, records=[_record(s) for s in sizes]))
    journal = journal_path(tmp_path / "r1.json", tmp_path)  # the second test's: a size after its last rewrite
    with open(journal, "a", encoding="utf-8") as f:
        f.write(record_json(_record(32)) + "\n")
    mark_cut_short([tmp_path / "r1.json"], "rank 0 was killed by signal 9", tmp_path)
    doc = json.loads(writer.path.read_text())
    assert [r["size"] for r in doc["results"]] == [8, 16, 8, 32] and "end_time" not in doc
    assert doc["errors"] == ["rank 0 was killed by signal 9"]
