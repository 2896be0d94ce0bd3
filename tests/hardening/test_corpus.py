"""Run the hostile-input corpus (cases.py): each case in its own process (forked by
fork_driver.py after one import of pybench) with a time limit and an address-space limit, so a
regression fails here instead of hanging CI or waking the kernel's OOM killer.

Every case must end with an allowed exit code and, for an error, exactly one stderr line
starting ``pybench: error:``; never a traceback, never a hang, never a memory blow-up; no
JSON it wrote may hold NaN or Infinity; a device, FIFO or link it was given as output is
left as it was.

``CORPUS_IGNORE_KNOWN=1`` runs the cases listed in cases.KNOWN as plain cases, to see which
of them still fail.
"""

from __future__ import annotations

import json
import os
import stat
import subprocess
import sys
from pathlib import Path

import pytest
from cases import (  # type: ignore[import-not-found]
    ARGV_CASES,
    BAD_DOCUMENTS,
    BAD_INPUTS,
    BAD_OUTPUTS,
    KNOWN,
    READERS,
    WRITERS,
)

HERE = Path(__file__).resolve().parent
FIXTURES = HERE.parent / "fixtures"
TIME_LIMIT_S = 120  # a case that runs ranks takes a few seconds; a hang is killed here


def _cases() -> list:
    cases = []
    for reader, argv in READERS.items():
        for bad in BAD_INPUTS:
            name = Path(bad).name.strip("{}")
            cases.append((f"read-{reader}-{name}", [bad if a == "F" else a for a in argv], (2,)))
    for reader, name in BAD_DOCUMENTS:
        path = "{corpus}/" + name
        cases.append((f"read-{reader}-{Path(name).stem}", [path if a == "F" else a for a in READERS[reader]], (2,)))
    for writer, argv in WRITERS.items():
        for bad in BAD_OUTPUTS:
            cases.append((f"write-{writer}-{bad.strip('{}')}", [bad if a == "O" else a for a in argv], (2,)))
    cases += ARGV_CASES
    known = {} if os.environ.get("CORPUS_IGNORE_KNOWN") else KNOWN
    return [pytest.param(argv, codes, id=cid, marks=[pytest.mark.xfail(strict=True, reason=known[cid])]
                         if cid in known else []) for cid, argv, codes in cases]


def make_special(folder: Path, shared: dict[str, str]) -> dict[str, str]:
    """A case's special files (see cases.py) in ``folder``: fresh ones for everything a case might write
    to or through, the read-only ones (``shared``: zero, sparse, deep) made once for all."""
    d = folder / "special"
    d.mkdir(parents=True)
    paths = {"tmp": str(folder / "out"), "fix": str(FIXTURES), "corpus": str(HERE / "corpus"), **shared}
    (folder / "out").mkdir()
    os.mkfifo(d / "fifo")
    (d / "folder").mkdir()
    (d / "victim").write_text("precious\n")
    (d / "link").symlink_to(d / "victim")
    (d / "stdout").symlink_to("/proc/self/fd/1")
    paths.update({k: str(d / k) for k in ("fifo", "folder", "victim", "link", "stdout")})
    if os.geteuid() == 0:
        os.mknod(d / "chardev", 0o666 | stat.S_IFCHR, os.makedev(1, 3))  # a copy of /dev/null
    paths["chardev"] = str(d / "chardev")
    return paths


def _read_only_specials(folder: Path) -> dict[str, str]:
    folder.mkdir()
    (folder / "zero").symlink_to("/dev/zero")
    with open(folder / "sparse", "wb") as f:
        f.truncate(2 << 30)
    (folder / "deep").write_text("[" * 1_000_000 + "]" * 1_000_000)
    return {k: str(folder / k) for k in ("zero", "sparse", "deep")}


@pytest.fixture(scope="module")
def outcomes(request, tmp_path_factory) -> dict[str, dict]:
    """Every selected case, each in its own forked process under the time and address-space limits of
    fork_driver.py (one import for all of them), the cases split over the machine's cores."""
    root = tmp_path_factory.mktemp("corpus")
    shared = _read_only_specials(root / "shared")
    todo, specials = [], {}
    for item in request.session.items:
        if getattr(item, "originalname", "") != "test_hostile_input":
            continue
        cid, argv = item.callspec.id, item.callspec.params["argv"]
        if "{chardev}" in argv and os.geteuid() != 0:
            continue
        specials[cid] = make_special(root / "cases" / cid, shared)
        todo.append({"id": cid, "argv": [a.format(**specials[cid]) for a in argv], "cwd": str(root / "cases" / cid)})
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PYBENCH_", "OMPI_COMM_", "PMIX_"))}
    env["CORPUS_TIME_LIMIT_S"] = str(TIME_LIMIT_S)
    shares = max(1, min(os.cpu_count() or 1, 4))
    drivers = []
    for k in range(shares):
        (root / f"todo{k}.json").write_text(json.dumps(todo[k::shares]))
        drivers.append(subprocess.Popen([sys.executable, str(HERE / "fork_driver.py"), str(root / f"todo{k}.json"),
                                         str(root / f"done{k}.json")], env=env, stdin=subprocess.DEVNULL))
    for driver in drivers:
        assert driver.wait(timeout=3600) == 0
    done = {r["id"]: r for k in range(shares) for r in json.loads((root / f"done{k}.json").read_text())}
    return {cid: {**done[cid], "special": specials[cid]} for cid in specials}


@pytest.mark.parametrize("argv, codes", _cases())
def test_hostile_input(argv, codes, outcomes, request):
    if "{chardev}" in argv and os.geteuid() != 0:
        pytest.skip("a device node needs root to make")
    result = outcomes[request.node.callspec.id]
    code, err = result["code"], result["stderr"]
    assert not result["killed"], f"hang: no exit within {TIME_LIMIT_S} s"
    assert "Traceback" not in err and "MemoryError" not in err, err[-3000:]
    assert code in codes, f"exit {code}, expected {codes}: {err[-2000:]}"
    lines = [ln for ln in err.splitlines() if ln.strip()]
    if code != 0:
        assert len(lines) == 1 and lines[0].startswith("pybench: error:"), err[-2000:]
    else:
        assert not any(ln.startswith("pybench: error:") for ln in lines), err[-2000:]
    _outputs_untouched(result["special"])
    _no_non_finite_json(Path(result["special"]["tmp"]))


def _outputs_untouched(special: dict[str, str]) -> None:
    assert Path(special["victim"]).read_text() == "precious\n"
    assert Path(special["link"]).is_symlink() and Path(special["stdout"]).is_symlink()
    assert stat.S_ISFIFO(os.lstat(special["fifo"]).st_mode)
    if os.path.lexists(special["chardev"]):
        assert stat.S_ISCHR(os.lstat(special["chardev"]).st_mode)


def _refuse(name: str) -> float:
    raise ValueError(f"{name} in a JSON file pybench wrote")


def _no_non_finite_json(folder: Path) -> None:
    for f in folder.glob("*.json"):
        if f.stat().st_size:
            json.loads(f.read_text(), parse_constant=_refuse)


def test_the_valid_part_of_every_writer_case_is_valid(tmp_path):
    """A writer case is hostile in its output alone: given a plain output file it succeeds, so its exit 2
    comes from the output (the result it read once lacked fields and every write case failed on it)."""
    todo = []
    for writer, argv in WRITERS.items():
        cwd = tmp_path / writer
        cwd.mkdir()
        paths = {"tmp": str(cwd), "fix": str(FIXTURES), "corpus": str(HERE / "corpus")}
        out = str(cwd / ("out.html" if writer == "report" else "out.png" if writer == "plot" else "out.json"))
        todo.append({"id": writer, "argv": [out if a == "O" else a.format(**paths) for a in argv], "cwd": str(cwd)})
    (tmp_path / "todo.json").write_text(json.dumps(todo))
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PYBENCH_", "OMPI_COMM_", "PMIX_"))}
    subprocess.run([sys.executable, str(HERE / "fork_driver.py"), str(tmp_path / "todo.json"),
                    str(tmp_path / "done.json")], env=env, check=True, timeout=600, stdin=subprocess.DEVNULL)
    failed = {r["id"]: r["stderr"][-500:] for r in json.loads((tmp_path / "done.json").read_text()) if r["code"] != 0}
    assert not failed, failed
