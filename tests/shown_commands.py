"""The commands the README and docs/ show, read from their code blocks, and how a test runs them.

A command is a line of a fenced block that starts as a user would type it (``python -m pybench``,
``python benchmarks/...``, ``pytest``, a launcher, an environment assignment), lines continued
with a backslash joined; a ``$ `` prompt is dropped. An untagged block that imports pybench is one
Python program. A block tagged ``python`` is a fragment of the reader's own program (names such as
``model`` are theirs): it is compiled and its imports are resolved, not run.
"""

from __future__ import annotations

import contextlib
import io
import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

from pybench.collectives import COLLECTIVES
from pybench.sizes import parse_size, parse_sizes

REPO = Path(__file__).resolve().parents[1]
_BLOCK = re.compile(r"^```([a-z]*)\n(.*?)^```", flags=re.S | re.M)
_STARTS = ("python -m pybench", "python benchmarks/", "python scripts/", "pytest ", "mpirun ", "srun ",
           "torchrun ", "NCCL_TESTS_MIN_BW=")


def shown_commands(path: Path) -> list[str]:
    """Every command shown in ``path``'s code blocks, in order."""
    commands = []
    for tag, block in _BLOCK.findall(path.read_text()):
        if tag == "python":
            continue  # a fragment: see python_fragments
        if "from pybench import" in block:
            commands.append(f"python - <<'EOF'\n{block}EOF")
            continue
        for line in re.sub(r"\\\n\s*", " ", block).splitlines():
            line = line.removeprefix("$ ")
            if line.startswith(_STARTS):
                commands.append(line)
    return commands


def python_fragments(path: Path) -> list[str]:
    """The ``python``-tagged blocks of ``path``: fragments of the reader's own program."""
    return [block for tag, block in _BLOCK.findall(path.read_text()) if tag == "python"]


def shell_env() -> dict[str, str]:
    """The environment of a reader who activated the virtual environment the tests run in (as root, with
    the two variables Open MPI's own mpirun then asks for; pybench's launcher sets them itself)."""
    env = {k: v for k, v in os.environ.items() if k != "PYBENCH_RANK_PROCESS"}
    env["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{env['PATH']}"
    if os.geteuid() == 0:
        env.update(OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1")
    return env


def run_shown(command: str, cwd: Path, timeout: float = 600) -> subprocess.CompletedProcess:
    """Run one shown command through bash in ``cwd``, as a reader pastes it."""
    return subprocess.run(["bash", "-c", command], cwd=cwd, env=shell_env(), capture_output=True, text=True,
                          timeout=timeout, stdin=subprocess.DEVNULL)


def run_in_process(argv: list[str], cwd: Path) -> subprocess.CompletedProcess:
    """``python -m pybench ARGV`` in ``cwd`` in this process: the same code path less an interpreter start
    (and, for `env`, less importing torch again)."""
    from pybench.cli.main import main
    out, err, before = io.StringIO(), io.StringIO(), Path.cwd()
    os.chdir(cwd)
    try:
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            try:
                code = main(argv)
            except SystemExit as exc:
                code = exc.code if isinstance(exc.code, int) else 2
    finally:
        os.chdir(before)
    return subprocess.CompletedProcess(["pybench", *argv], code, out.getvalue(), err.getvalue())


def pybench_argv(command: str) -> list[str] | None:
    """The pybench arguments of ``[launcher ...] python -m pybench ARGS [| ...]`` (its first stage), comments
    dropped; None for anything else (a script, a heredoc)."""
    if "-m pybench" not in command or "<<" in command:
        return None
    words = shlex.split(command.split("|")[0], comments=True)
    for k in range(len(words) - 1):
        if words[k] == "-m" and words[k + 1] == "pybench":
            return words[k + 2:]
    return None


def fresh_folder(tmp_path: Path) -> Path:
    """A folder as a reader's clone has it, for the paths commands name (tests/fixtures, benchmarks, scripts)."""
    for name in ("tests", "benchmarks", "scripts"):
        (tmp_path / name).symlink_to(REPO / name)
    return tmp_path


MEASURING = {*COLLECTIVES, "p2p"}
CHEAP_SIZES, CHEAP_BUDGET = 3, "0.05"


def needs_gpu(argv: list[str]) -> bool:
    return argv[0] == "copy" or "--matrix" in argv or ("--backend" in argv and argv[argv.index("--backend") + 1]
                                                        == "nccl")


def cheap(argv: list[str]) -> list[str]:
    """``argv`` at its first three sizes and a short time budget a size; every other flag as shown."""
    out = list(argv)
    for flag in ("--sizes", "-s", "-m"):
        if flag in out:
            k = out.index(flag) + 1
            spec = out[k] if flag != "-m" or ":" in out[k] else f"1:{out[k]}"  # OSU's -m MAX starts at 1 here
            sizes = parse_sizes(spec)[:CHEAP_SIZES]
            out[k] = f"{sizes[0]}:{sizes[-1]}" if flag == "-m" else ",".join(map(str, sizes))
    if "-e" in out:
        first = parse_size(out[out.index("-b") + 1]) if "-b" in out else 32 << 20
        out[out.index("-e") + 1] = str(first * 4)
        if "-f" not in out:
            out += ["-f", "2"]
    fixed = {"-n", "--iters", "--time-budget"} | ({"-i"} if argv[0] == "p2p" else set())
    if not fixed & set(out):
        out += ["--time-budget", CHEAP_BUDGET]
    return out


def as_run_here(command: str) -> str | None:
    """The command as this machine runs it (see the module docstring); None when it only parses here."""
    words = shlex.split(command.split("|")[0], comments=True)
    if words[0] == "srun":
        return None
    if words[0] == "python" and words[1].startswith("benchmarks/") and "--rounds" not in words:
        return shlex.join([*words, "--rounds", "1"])
    if words[0] == "mpirun":
        words = ["mpirun", "-n", "2", *words[words.index("python"):]]
    argv = pybench_argv(command)
    if argv is None or argv[0] not in MEASURING or needs_gpu(argv):
        return command
    pipe = command[len(command.split("|")[0]):]
    return shlex.join([*words[:len(words) - len(argv)], *cheap(argv)]) + (f" {pipe}" if pipe else "")


def run_here(command: str, folder) -> subprocess.CompletedProcess:
    """Plain pybench commands that measure nothing run in this process; the rest as a reader pastes them."""
    argv = pybench_argv(command)
    if argv is not None and command.startswith("python -m pybench") and "|" not in command and (
            argv[0] not in MEASURING or needs_gpu(argv)):
        return run_in_process(argv, folder)
    return run_shown(command, folder)
