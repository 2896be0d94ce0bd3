"""Every command that reads a file, given a corpus of hostile files, answers in one line with exit 2.

The corpus covers what issue 12 and issue 16 found: deep nesting with a "schema" or "results" key
(which once reached a recursive walker and printed a RecursionError traceback), NaN and Infinity
tokens, numbers that overflow a double, huge integers, FIFOs and devices as paths, symlinks to
/dev/zero, folders, binary junk, other pybench formats in the wrong place. Each case runs the real
entry point (``pybench.cli.main.main``) in this process under a SIGALRM guard, so a hang fails.
"""

from __future__ import annotations

import ast
import json
import os
from pathlib import Path

import pytest
from conftest import no_hang

from pybench.cli.main import main
from pybench.errors import FileFormatError, UsageError
from pybench.io.files import parse_json, read_document, read_json, write_atomic
from pybench.io.formats import FORMATS, MODEL, RESULT, check_document, stamp

DEEP = 50_000


def _nested(key: str) -> str:
    return '{"%s": %s1%s}' % (key, "[" * DEEP, "]" * DEEP)


# name -> file text (None: made specially in the fixture)
CORPUS: dict[str, str | None] = {
    "nested-schema": _nested("schema"),
    "nested-results": _nested("results"),
    "nested-shallow-schema": '{"schema": "pybench.result", "schema_version": 1, "records": %s0%s}' % ("[" * 80,
                                                                                                   "]" * 80),
    "nan-token": '{"schema": "pybench.result", "schema_version": 1, "records": [{"size_bytes": NaN}]}',
    "infinity-token": '{"schema": "pybench.model", "schema_version": 1, "models": [{"alpha_s": Infinity}]}',
    "overflowing-float": '{"schema": "pybench.compute", "schema_version": 1, "gemms": [{"flops": 1e999}]}',
    "huge-int": '{"schema": "pybench.result", "schema_version": 1, "world_size": %s}' % ("9" * 5000),
    "wrong-format": '{"schema": "pybench.comparison", "schema_version": 1}',
    "future-version": '{"schema": "pybench.model", "schema_version": 99, "models": []}',
    "not-an-object": "[1, 2, 3]",
    "binary": None,
    "empty": "",
    "fifo": None,
    "symlink-to-dev-zero": None,
    "folder": None,
}

# Every command that reads a pybench or log file, with where the hostile path goes.
READERS = {
    "fit": lambda p, out: ["fit", p, "-o", str(out / "m.json")],
    "predict": lambda p, out: ["predict", p, "--sizes", "1M"],
    "compare": lambda p, out: ["compare", p, p],
    "report-ccr": lambda p, out: ["report", "--ccr", p, "-o", str(out / "r.html")],
    "plot": lambda p, out: ["plot", p, "-o", str(out / "p.png")],
}




def _make(tmp_path: Path, name: str) -> Path:
    path = tmp_path / f"{name}.json"
    text = CORPUS[name]
    if text is not None:
        path.write_text(text)
    elif name == "binary":
        path.write_bytes(b"\x00\xff\xfe" * 100)
    elif name == "fifo":
        os.mkfifo(path)
    elif name == "symlink-to-dev-zero":
        path.symlink_to("/dev/zero")
    elif name == "folder":
        path.mkdir()
    return path


@pytest.mark.parametrize("reader", sorted(READERS))
@pytest.mark.parametrize("case", sorted(CORPUS))
def test_every_reader_answers_a_hostile_file_in_one_line(tmp_path, capsys, reader, case):
    path = _make(tmp_path, case)
    argv = READERS[reader](str(path), tmp_path)
    with no_hang():
        code = main(argv)
    captured = capsys.readouterr()
    lines = captured.err.strip().splitlines()
    if reader == "plot" and "matplotlib" in captured.err:
        pytest.skip("plot needs matplotlib")
    assert code == 2, (code, captured.err)
    assert len(lines) == 1 and lines[0].startswith("pybench: error: "), captured.err
    assert "Traceback" not in captured.err


def test_the_reader_refuses_non_finite_and_deep_documents():
    for text in ('{"a": NaN}', '{"a": -Infinity}', "[1e400]", "[" * 65 + "]" * 65):
        with pytest.raises(FileFormatError):
            parse_json(text, "t")
    assert parse_json("[" * 64 + "]" * 64, "t") is not None  # 64 levels are allowed


def test_a_fifo_is_refused_without_blocking(tmp_path):
    fifo = tmp_path / "f"
    os.mkfifo(fifo)
    with no_hang(5), pytest.raises(FileFormatError, match="FIFO"):
        read_json(fifo)


def test_the_read_stops_at_the_limit(tmp_path):
    big = tmp_path / "big.json"
    big.write_text("[" + "1," * 1000 + "1]")
    with pytest.raises(FileFormatError, match="larger than any pybench file"):
        read_json(big, limit_bytes=100)


def test_documents_are_checked_against_the_registry(tmp_path):
    fixture = Path(__file__).resolve().parents[1] / "fixtures" / "model_v1_allreduce.json"
    doc = stamp(MODEL, {"models": json.loads(fixture.read_text())["models"]})
    assert list(doc)[:2] == ["schema", "schema_version"] and doc["schema"] == "pybench.model"
    assert check_document(doc, MODEL, "m") is doc
    with pytest.raises(FileFormatError, match="it is a fitted model file"):
        check_document(doc, RESULT, "m")
    with pytest.raises(FileFormatError, match="newer than"):
        check_document({**doc, "schema_version": 2}, MODEL, "m")
    with pytest.raises(FileFormatError, match="not a positive integer"):
        check_document({**doc, "schema_version": True}, MODEL, "m")
    path = tmp_path / "m.json"
    path.write_text(json.dumps(doc))
    assert read_document(path, MODEL)["models"] == doc["models"]
    path.write_text('{"schema": "pybench.model", "schema_version": 1, "models": []}')
    with pytest.raises(FileFormatError, match="models: List should have at least 1 item"):
        read_document(path, MODEL)


def test_every_schema_is_declared_once():
    """No module but the registry spells a schema name as a string constant."""
    package = Path(__file__).resolve().parents[2] / "pybench"
    offenders = []
    for path in package.rglob("*.py"):
        if path.name == "formats.py":
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Constant) and node.value in FORMATS:
                offenders.append(f"{path.relative_to(package.parent)}:{node.lineno}: {node.value!r}")
    assert not offenders, "schema names declared outside pybench/io/formats.py:\n" + "\n".join(offenders)


@pytest.mark.parametrize("kind", ["symlink", "fifo", "device"])
def test_writes_never_replace_links_or_special_files(tmp_path, kind):
    target = tmp_path / "out.json"
    if kind == "symlink":
        real = tmp_path / "real.json"
        real.write_text("keep")
        target.symlink_to(real)
    elif kind == "fifo":
        os.mkfifo(target)
    else:
        target = Path("/dev/null")
    with pytest.raises(UsageError):
        write_atomic(target, "x")
    if kind == "symlink":
        assert (tmp_path / "real.json").read_text() == "keep" and target.is_symlink()
    if kind == "device":
        assert Path("/dev/null").is_char_device()


def test_figures_that_could_not_be_measured_are_written_as_null():
    import dataclasses
    import json as _json
    import math

    from pybench.io.files import null_non_finite
    from pybench.measure.results import load_result, result_json
    assert null_non_finite({"a": [1.0, math.nan, {"b": math.inf}], "c": (2, -math.inf)}) == \
        {"a": [1.0, None, {"b": None}], "c": [2, None]}
    run = load_result(Path(__file__).resolve().parents[1] / "fixtures" / "compare_allreduce_a.json")
    poisoned = dataclasses.replace(run.records[0], time_ci_low_s=math.nan)
    text = result_json(dataclasses.replace(run, records=[poisoned, *run.records[1:]]))
    assert "NaN" not in text and _json.loads(text)["records"][0]["time_ci_low_s"] is None
