"""docs/validation.md holds no hand-typed table: each is the output of the script named above it (issue 26)."""

from __future__ import annotations

import importlib.util
import re
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
SCRIPT = REPO / "scripts" / "validation_tables.py"


def _script():
    spec = importlib.util.spec_from_file_location("validation_tables", SCRIPT)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.mark.slow
def test_every_validation_table_is_what_the_script_named_above_it_prints_now():
    tables = _script()
    text = tables.DOC.read_text()
    blocks = tables.BLOCK.findall(text)
    assert [command for _, command, _, _ in blocks] == ["python benchmarks/model_cross_validation.py",
                                                       "python benchmarks/topology_extrapolation.py",
                                                       "python benchmarks/topology_regimes.py"]
    assert not re.search(r"^\|.*\|$", tables.BLOCK.sub("", text), flags=re.M), "a table typed outside the markers"
    assert tables.render(text) == text, "docs/validation.md is stale: run python scripts/validation_tables.py"
