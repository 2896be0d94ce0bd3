"""The generated hostile-input corpus (generated.py): every case in its own process, under a
3 GiB address-space limit and a wall-clock limit (fork_driver.py), with files made by the test.

For every case: an exit code from the README's table and from those the case allows; for an
error, exactly one stderr line starting ``pybench: error:``; no traceback, no MemoryError, no
death by a signal, no run past its limit; no file left in its folder beyond its own inputs and
the outputs it is allowed, and never a ``.tmp``.

By default every class runs a representative share of its cases (each ``CORPUS_SHARE``-th, all
classes and readers represented; of ``formats``, each format's valid base and every
``8 * CORPUS_SHARE``-th case); ``CORPUS_SHARE=1`` runs them all (about 1100 cases).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from generated import CLASSES, README_EXIT_CODES, Case  # type: ignore[import-not-found]

HERE = Path(__file__).resolve().parent
SHARE = max(1, int(os.environ.get("CORPUS_SHARE", "5")))


def _run(cases: list[Case], tmp_path: Path) -> dict[str, dict]:
    todo = []
    for case in cases:
        cwd = tmp_path / "cases" / case.id
        cwd.mkdir(parents=True)
        todo.append({"id": case.id, "argv": list(case.argv), "cwd": str(cwd)})
    (tmp_path / "todo.json").write_text(json.dumps(todo))
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PYBENCH_", "OMPI_COMM_", "PMIX_"))}
    subprocess.run([sys.executable, str(HERE / "fork_driver.py"), str(tmp_path / "todo.json"),
                    str(tmp_path / "done.json")], env=env, check=True, timeout=3600, stdin=subprocess.DEVNULL)
    return {r["id"]: r for r in json.loads((tmp_path / "done.json").read_text())}


# Lines that report, not fail: warnings, notes, and fit's account of what it left out.
_NOTES = ("pybench: warning:", "pybench: note:", "pybench: fit:", "warning:")


def _problems(case: Case, result: dict, folder: Path) -> list[str]:
    code, err = result["code"], result["stderr"]
    found = []
    if result["killed"]:
        found.append(f"ran past its limit ({result['wall_s']:.0f} s)")
    if code is None or code < 0:
        found.append(f"killed by signal {-code if code else '?'}")
    if "Traceback" in err or "MemoryError" in err:
        found.append("traceback: " + err[-600:])
    if code not in README_EXIT_CODES or code not in case.codes:
        found.append(f"exit {code}, expected {case.codes}")
    lines = [ln for ln in err.splitlines() if ln.strip() and not ln.startswith(_NOTES)]
    if code and (len(lines) != 1 or not lines[0].startswith("pybench: error:")):
        found.append(f"{len(lines)} stderr lines: {err[-400:]!r}")
    left = sorted(p.name for p in folder.iterdir() if p.name not in case.outputs)
    if left:
        found.append(f"left {left}")
    return found


def _share(cases: list[Case], name: str) -> list[Case]:
    if SHARE == 1:
        return cases
    if name == "formats":
        # ~570 cases of ~1 s each (a fork that reads a file and, for a valid one, draws it): every format's
        # valid base (so a case fails for its hostile value, not a broken base) and a thinner stride.
        return [c for k, c in enumerate(cases) if c.id.endswith("-valid") or k % (8 * SHARE) == 1]
    return cases[::SHARE]


@pytest.mark.parametrize("name", sorted(CLASSES))
def test_generated_cases(name, tmp_path):
    inputs = tmp_path / "inputs"
    inputs.mkdir()
    cases = _share(CLASSES[name](inputs), name)
    results = _run(cases, tmp_path)
    failures = {}
    for case in cases:
        found = _problems(case, results[case.id], tmp_path / "cases" / case.id)
        if found:
            failures[case.id] = "; ".join(found)
    assert not list(inputs.glob("**/*.tmp")) and not list(inputs.glob("**/.*.tmp"))
    assert not failures, f"{len(failures)} of {len(cases)} {name} cases failed:\n" + "\n".join(
        f"  {cid}: {why[:700]}" for cid, why in failures.items())


def test_the_corpus_has_at_least_300_cases(tmp_path):
    total = 0
    for name, make in CLASSES.items():
        (tmp_path / name).mkdir()
        total += len(make(tmp_path / name))
    assert total >= 300, total
