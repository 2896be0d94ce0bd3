"""Every command docs/ shows runs, each document's in its order, in a fresh folder (issue 26).

docs/planning.md and docs/model-validation.md are the output of the scripts named in them and are
checked against those scripts by their own tests (tests/planning/test_planning_examples.py,
tests/model/test_validation.py); every other document is read here.

How a command is checked follows from what it needs, never from a list of exceptions:
- a command that needs a GPU (the nccl backend, `copy`, `p2p --matrix`) runs as shown and must end
  with exit 3 and one line on stderr on a machine without one;
- a measuring command runs with its flags as shown, at the first three of its sizes and a time budget
  of 0.05 s a size (unless it fixes the iterations), since the suite has minutes for everything; the
  command exactly as shown must parse;
- `mpirun -n N --hostfile FILE` runs on 2 local ranks; `srun` (no Slurm here) is parsed only;
- a benchmark script that takes `--rounds` runs one round;
- everything else (fit, predict, ccr, plan, compute, env, Python) runs exactly as shown.
"""

from __future__ import annotations

import pytest
from shown_commands import (
    REPO,
    as_run_here,
    fresh_folder,
    needs_gpu,
    pybench_argv,
    python_fragments,
    run_here,
    shown_commands,
)

from pybench.cli.gpu import nccl_unavailable_reason

GENERATED = {"planning.md", "model-validation.md"}
DOCS = sorted(p for p in (REPO / "docs").glob("*.md") if p.name not in GENERATED)
def test_every_document_shows_its_commands_and_each_is_one_we_can_check():
    shown = {doc.name: shown_commands(doc) for doc in DOCS}
    assert shown["running.md"] and shown["ccr.md"] and shown["model.md"]
    for doc, commands in shown.items():
        for command in commands:
            assert "..." not in command and "[" not in command.split("#")[0], f"{doc}: a synopsis, not a command: " \
                                                                             f"{command}"


@pytest.mark.mpi
@pytest.mark.slow
@pytest.mark.parametrize("doc", DOCS, ids=[d.name for d in DOCS])
def test_every_command_in_the_docs_runs(doc, tmp_path, native):
    from pybench.cli.main import build_parser
    for block in python_fragments(doc):  # a fragment of the reader's program: it compiles, its imports exist
        compile(block, doc.name, "exec")
        for line in block.splitlines():
            if line.startswith(("from pybench", "import pybench")):
                exec(line, {})
    folder = fresh_folder(tmp_path)
    gpu_here = nccl_unavailable_reason() is None
    for command in shown_commands(doc):
        argv = pybench_argv(command)
        if argv is not None:
            build_parser().parse_args(argv)  # the command exactly as shown is accepted
        here = as_run_here(command)
        if here is None:
            continue
        if argv is not None and needs_gpu(argv):
            if gpu_here:
                continue  # the GPU check script runs these on a GPU machine
            done = run_here(here, folder)
            err = done.stderr.strip().splitlines()
            assert done.returncode == 3 and len(err) == 1, f"{doc.name}: {command}\n{done.stderr[-2000:]}"
            continue
        done = run_here(here, folder)
        assert done.returncode == 0, f"{doc.name}: {here}\n{done.stderr[-2000:]}"
        if "| awk" in command:
            float(done.stdout.strip())  # the figure a script takes from the footer


def help_examples(command: str) -> list[str]:
    """The examples at the end of ``pybench COMMAND --help``, as shell commands."""
    from pybench.cli.main import build_parser
    sub = build_parser()._subparsers._group_actions[0].choices[command]  # type: ignore[union-attr]
    return [f"python -m {line.strip()}" for line in (sub.epilog or "").splitlines()
            if line.strip().startswith(f"pybench {command}")]


def test_every_command_ends_its_help_with_examples():
    from pybench.cli.main import build_parser
    commands = build_parser()._subparsers._group_actions[0].choices  # type: ignore[union-attr]
    assert {name for name in commands if not help_examples(name)} == set()


@pytest.mark.slow
def test_the_help_examples_of_the_model_and_planning_commands_run(tmp_path, native):
    """In this order each example's input exists: fit writes the h100.json the others read."""
    folder = fresh_folder(tmp_path)
    for name in ("fit", "predict", "ccr", "plan", "compute", "copy"):
        for command in help_examples(name):
            done = run_here(command, folder)
            if name == "copy" and nccl_unavailable_reason() is not None:
                assert done.returncode == 3 and len(done.stderr.strip().splitlines()) == 1, done.stderr
                continue
            assert done.returncode == 0, f"{command}\n{done.stderr[-2000:]}"
