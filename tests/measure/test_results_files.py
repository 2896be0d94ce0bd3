import json
import os

import pytest

from pybench.errors import FileFormatError, UsageError
from pybench.measure.results import (
    SCHEMA,
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
    assert doc["schema"] == SCHEMA and doc["schema_version"] == 1
    back = RunResult.from_dict(doc)
    assert back == r
    assert back.total_wrong() == 1 and back.peak_busbw().size_bytes == 1024


def test_csv_has_one_row_per_size():
    lines = result_csv(_result()).splitlines()
    assert lines[0].startswith("benchmark,backend,world_size,timing,size_bytes")
    assert len(lines) == 3 and lines[2].split(",")[4] == "2048"


def test_load_rejects_other_schemas_and_versions(tmp_path):
    p = tmp_path / "x.json"
    for doc, fragment in (({"schema": "other"}, "not a pybench result"),
                          ({"schema": SCHEMA, "schema_version": 99}, "version 99"),
                          ({"schema": SCHEMA, "schema_version": 1}, "missing")):
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
