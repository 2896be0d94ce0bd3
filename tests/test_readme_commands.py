"""Every command the README shows runs as shown, in the README's order, in a fresh folder.

The set-up commands (the install lines, which CI runs itself from `.ci/run`) are the only
ones left out. Files one command writes are read by the next, as a reader following the
README would have them; `ar_new.json` ("the same run another day") is a copy of `ar.json`.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
README = REPO / "README.md"


def readme_commands() -> list[str]:
    blocks = re.findall(r"^```[a-z]*\n(.*?)^```", README.read_text(), flags=re.S | re.M)
    commands = []
    for block in blocks:
        if "from pybench import" in block:
            commands.append(f"python - <<'EOF'\n{block}EOF")
            continue
        for line in block.splitlines():
            if line.startswith(("python -m pybench", "pytest ", "NCCL_TESTS_MIN_BW=")):
                commands.append(line)
    return commands


def test_the_readme_is_short_and_names_its_commands():
    assert len(README.read_text().splitlines()) <= 250
    commands = readme_commands()
    assert any("pybench fit" in c for c in commands) and any("pybench report" in c for c in commands)
    for doc in re.findall(r"\]\((docs/[a-z.]+|CHANGELOG\.md|benchmarks/README\.md)\)", README.read_text()):
        assert (REPO / doc).is_file(), doc


@pytest.mark.mpi
@pytest.mark.slow
def test_every_readme_command_runs(tmp_path, native):
    for name in ("tests", "benchmarks"):
        (tmp_path / name).symlink_to(REPO / name)
    env = {**os.environ, "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}"}
    for command in readme_commands():
        if "compare ar.json ar_new.json" in command:
            shutil.copy(tmp_path / "ar.json", tmp_path / "ar_new.json")
        done = subprocess.run(["bash", "-c", command.split("   # ")[0]], cwd=tmp_path, env=env, capture_output=True,
                              text=True, timeout=600, stdin=subprocess.DEVNULL)
        assert done.returncode == 0, f"{command}\n{done.stderr[-2000:]}"
