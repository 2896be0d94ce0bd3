"""docs/planning.md is what scripts/planning_examples.py prints (issue 25: examples are produced, not typed)."""

from __future__ import annotations

import importlib.util
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
SCRIPT = REPO / "scripts" / "planning_examples.py"


def _script():
    spec = importlib.util.spec_from_file_location("planning_examples", SCRIPT)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_committed_planning_examples_are_what_the_script_prints():
    examples = _script()
    text = examples.render()
    assert examples.DOC.read_text() == text, "docs/planning.md is stale: run python scripts/planning_examples.py"
    # every example ran and printed its answer, and the one that cannot use its preset says so on stderr
    assert text.count("$ python -m pybench") == len(examples.EXAMPLES) and "(exit " not in text
    assert text.count("recommended: ") == sum(1 for *_, c in examples.EXAMPLES if c.startswith("plan"))
    assert "warning: link preset eth-25g is not used" in text
