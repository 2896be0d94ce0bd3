"""Hostile and broken files: every loader gives a clean one-line error or a valid
(possibly partial) result, never a crash or a hang, and never runs code from a file."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from conftest import SHARED_DATA, no_hang
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from pybench.errors import PyBenchError
from pybench.measure.results import load_result

FIXTURES = (Path(__file__).resolve().parents[1] / "fixtures")


def _loaders():
    from pybench.model.logs import load_measurements
    from pybench.model.model_files import load_models
    from pybench.planning.compute import load_compute
    return {"result": load_result, "models": load_models, "measurements": load_measurements,
            "compute": load_compute}




def _load_cleanly(loader, path: Path):
    with no_hang():
        try:
            return loader(path)
        except PyBenchError as exc:
            assert "\n" not in str(exc), f"multi-line error: {exc}"
            return None


HOSTILE_JSON = [
    "[" * 100_000 + "]" * 100_000,                          # nested past the recursion limit
    '{"schema": "pybench.result", "schema_version": 1, "records": "x"}',
    '{"schema": "pybench.result", "schema_version": 999}',
    '{"schema": "pybench.model", "schema_version": 999, "models": []}',
    '{"schema": "pybench.model", "schema_version": 1, "models": [{"alpha": NaN}]}',
    '{"schema": "pybench.compute", "schema_version": 1}',
    '{"schema": "pybench.result", "schema_version": 1, "records": [{"size_bytes": 1e400}]}',
    '{"__reduce__": "os.system", "py/object": "subprocess.Popen"}',
    "\x80\x81 not utf-8",
    "",
    "null",
    "1e999999",
]


@pytest.mark.parametrize("text", HOSTILE_JSON, ids=range(len(HOSTILE_JSON)))
@pytest.mark.parametrize("kind", ["result", "models", "measurements", "compute"])
def test_hostile_json_is_a_one_line_error(tmp_path, kind, text):
    p = tmp_path / "hostile.json"
    p.write_bytes(text.encode("utf-8", errors="surrogateescape") if isinstance(text, str) else text)
    _load_cleanly(_loaders()[kind], p)


def test_a_valid_result_with_a_poisoned_record_is_refused(tmp_path):
    doc = json.loads((FIXTURES / "compare_allreduce_a.json").read_text())  # a real saved run
    load_result_ok = tmp_path / "ok.json"
    load_result_ok.write_text(json.dumps(doc))
    first = load_result(load_result_ok).records[0].size_bytes
    assert first == doc["records"][0]["size_bytes"] > 0
    for poison, message in (("fast", "time_s"), (float("nan"), "NaN")):
        doc["records"][0]["time_s"] = poison
        p = tmp_path / "r.json"
        p.write_text(json.dumps(doc))
        with pytest.raises(PyBenchError, match=message):
            load_result(p)


def _real_logs() -> list[Path]:
    if not SHARED_DATA.is_dir():
        return []
    return sorted(p for p in SHARED_DATA.rglob("*.txt"))


@pytest.mark.skipif(not _real_logs(), reason=f"shared logs not found at {SHARED_DATA}")
@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(cut=st.floats(min_value=0.0, max_value=1.0), which=st.integers(min_value=0, max_value=50))
def test_truncated_real_logs_parse_or_fail_cleanly(tmp_path, cut, which):
    logs = _real_logs()
    src = logs[which % len(logs)].read_bytes()
    p = tmp_path / "truncated.txt"
    p.write_bytes(src[: int(len(src) * cut)])
    sets = _load_cleanly(_loaders()["measurements"], p)
    for s in sets or []:
        assert len(s.size_bytes) == len(s.time_s) > 0


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(text=st.text(max_size=400), kind=st.sampled_from(["result", "models", "measurements", "compute"]))
def test_random_text_never_crashes_a_loader(tmp_path, text, kind):
    p = tmp_path / "random.txt"
    p.write_text(text)
    _load_cleanly(_loaders()[kind], p)


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(numbers=st.lists(st.one_of(st.floats(allow_nan=True, allow_infinity=True), st.integers(min_value=-10**30,
                                                                                              max_value=10**30)),
                        min_size=1, max_size=30))
def test_nccl_tests_rows_with_huge_or_nan_numbers(tmp_path, numbers):
    rows = ["#  Rank  0 Group  0 Pid 1 on host device  0 [0x01] NVIDIA A100",
            "#       size         count      type   redop    root     time   algbw   busbw #wrong     time   algbw   busbw #wrong",
            "#        (B)    (elements)                               (us)  (GB/s)  (GB/s)            (us)  (GB/s)  (GB/s)"]
    for i, x in enumerate(numbers):
        rows.append(f"{8 << i:>12} {2 << i:>12} float sum -1 {x} 1.0 1.0 0 {x} 1.0 1.0 0")
    p = tmp_path / "all_reduce_perf.txt"
    p.write_text("\n".join(rows) + "\n")
    sets = _load_cleanly(_loaders()["measurements"], p)
    for s in sets or []:
        import numpy as np
        assert np.all(np.isfinite(s.time_s)) and np.all(s.time_s > 0)


def test_an_output_that_appeared_while_the_command_ran_is_kept_without_force(tmp_path):
    """Two `predict --json r.json` runs at once both checked r.json free, both exited 0, and the file held one
    run's records: the other's were lost. Without --force a command's output is published exclusively: the
    second writer says so in one line (exit 2) and the first's file stays whole; with --force it is replaced."""
    from pybench.errors import UsageError
    from pybench.io.files import write_json, write_output
    out = tmp_path / "r.json"
    write_output(out, "first", force=False)
    with pytest.raises(UsageError, match=r"r.json appeared while this command ran \(another run writing it\?\); pass "
                                         r"--force"):
        write_json(out, {"second": 1}, force=False)
    assert out.read_text() == "first"
    write_json(out, {"third": 1}, force=True)
    assert "third" in out.read_text()
