"""Every command the README shows runs, in the README's order, in a fresh folder.

The set-up commands (the install lines, which CI runs itself from `.ci/run`) are the only
ones left out. Files one command writes are read by the next, as a reader following the
README would have them; `ar_new.json` ("the same run another day") is a copy of `ar.json`.
Measuring commands run at their first three sizes with a short time budget, as in
tests/test_docs_commands.py (tests/shown_commands.py says how); the rest exactly as shown.
"""

from __future__ import annotations

import re
import shutil

import pytest
from shown_commands import REPO, as_run_here, fresh_folder, pybench_argv, run_here, shown_commands

README = REPO / "README.md"


def readme_commands() -> list[str]:
    return shown_commands(README)


def test_the_readme_is_short_and_names_its_commands():
    assert len(README.read_text().splitlines()) <= 250
    commands = readme_commands()
    assert any("pybench fit" in c for c in commands) and any("pybench report" in c for c in commands)
    for doc in re.findall(r"\]\((docs/[a-z.]+|CHANGELOG\.md|benchmarks/README\.md)\)", README.read_text()):
        assert (REPO / doc).is_file(), doc


@pytest.mark.mpi
@pytest.mark.slow
def test_every_readme_command_runs(tmp_path, native):
    from pybench.cli.main import build_parser
    folder = fresh_folder(tmp_path)
    for command in readme_commands():
        argv = pybench_argv(command)
        if argv is not None:
            build_parser().parse_args(argv)  # the command exactly as shown is accepted
        if "compare ar.json ar_new.json" in command:
            shutil.copy(folder / "ar.json", folder / "ar_new.json")
        here = as_run_here(command)
        assert here is not None, command
        done = run_here(here, folder)
        assert done.returncode == 0, f"{here}\n{done.stderr[-2000:]}"
