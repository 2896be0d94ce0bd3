"""Model files fitted once per test session from the shared logs, for the planning tests that need them.

Fitting the vTrain A100 logs takes seconds of CPU; two test modules fitted the same files each.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import pytest

from pybench.cli.main import main


def fitted(tmp_path_factory: pytest.TempPathFactory, name: str, logs: Sequence[Path]) -> str:
    """The model file ``name`` fitted from ``logs`` as a user would (`pybench fit`), once per session."""
    missing = [str(p) for p in logs if not Path(p).exists()]
    if missing:
        pytest.skip(f"shared logs not found: {', '.join(missing)}")
    path = tmp_path_factory.getbasetemp() / "planning-models" / f"{name}.json"
    if not path.exists():
        path.parent.mkdir(exist_ok=True)
        assert main(["fit", *map(str, logs), "-o", str(path)]) == 0
    return str(path)
