"""Run the hostile-input corpus (cases.py): each case in its own ``python -m pybench`` with a
time limit and an address-space limit, so a regression fails here instead of hanging CI or
waking the kernel's OOM killer.

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
import resource
import signal
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
MEMORY_LIMIT = 3 << 30  # address space: Python, numpy, matplotlib and Open MPI fit; a blow-up does not


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


@pytest.fixture
def special(tmp_path) -> dict[str, str]:
    return make_special(tmp_path)


def make_special(tmp_path: Path) -> dict[str, str]:
    """The run-time special files and placeholders (see cases.py) in a fresh folder."""
    d = tmp_path / "special"
    d.mkdir()
    paths = {"tmp": str(tmp_path / "out"), "fix": str(FIXTURES), "corpus": str(HERE / "corpus")}
    (tmp_path / "out").mkdir()
    os.mkfifo(d / "fifo")
    (d / "zero").symlink_to("/dev/zero")
    (d / "folder").mkdir()
    with open(d / "sparse", "wb") as f:
        f.truncate(2 << 30)
    (d / "deep").write_text("[" * 1_000_000 + "]" * 1_000_000)
    (d / "victim").write_text("precious\n")
    (d / "link").symlink_to(d / "victim")
    (d / "stdout").symlink_to("/proc/self/fd/1")
    paths.update({k: str(d / k) for k in ("fifo", "zero", "folder", "sparse", "deep", "victim", "link", "stdout")})
    if os.geteuid() == 0:
        os.mknod(d / "chardev", 0o666 | stat.S_IFCHR, os.makedev(1, 3))  # a copy of /dev/null
    paths["chardev"] = str(d / "chardev")
    return paths


def _limits() -> None:
    resource.setrlimit(resource.RLIMIT_AS, (MEMORY_LIMIT, MEMORY_LIMIT))
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))


def run_case(argv: list[str], cwd: Path) -> tuple[int | None, str]:
    """(exit code, or None on a hang; stderr) of ``python -m pybench ARGV`` under the limits."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PYBENCH_", "OMPI_COMM_", "PMIX_"))}
    p = subprocess.Popen([sys.executable, "-m", "pybench", *argv], cwd=cwd, env=env, stdin=subprocess.DEVNULL,
                         stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, preexec_fn=_limits,
                         start_new_session=True)
    try:
        _, err = p.communicate(timeout=TIME_LIMIT_S)
    except subprocess.TimeoutExpired:
        os.killpg(p.pid, signal.SIGKILL)
        _, err = p.communicate()
        return None, err
    return p.returncode, err


@pytest.mark.parametrize("argv, codes", _cases())
def test_hostile_input(argv, codes, special, tmp_path):
    if "{chardev}" in argv and os.geteuid() != 0:
        pytest.skip("a device node needs root to make")
    argv = [a.format(**special) for a in argv]
    code, err = run_case(argv, tmp_path)
    assert code is not None, f"hang: no exit within {TIME_LIMIT_S} s"
    assert "Traceback" not in err and "MemoryError" not in err, err[-3000:]
    assert code in codes, f"exit {code}, expected {codes}: {err[-2000:]}"
    lines = [ln for ln in err.splitlines() if ln.strip()]
    if code != 0:
        assert len(lines) == 1 and lines[0].startswith("pybench: error:"), err[-2000:]
    else:
        assert not any(ln.startswith("pybench: error:") for ln in lines), err[-2000:]
    _outputs_untouched(special)
    _no_non_finite_json(Path(special["tmp"]))


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
