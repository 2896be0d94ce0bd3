"""The public Python API: every name resolves lazily, and `import pybench` stays cheap.

`import pybench` runs on every rank of every job, so it loads no numpy and none of the layers;
each public name loads its module on first access (PEP 562). The planning layer is a
subpackage called `planning`, not `plan`, so that `pybench.plan` is always the function.
"""

from __future__ import annotations

import subprocess
import sys

import pybench


def test_every_public_name_resolves():
    for name in pybench.__all__:
        assert getattr(pybench, name) is not None, name
    assert callable(pybench.ccr) and callable(pybench.plan) and callable(pybench.load_model)
    assert set(pybench.__all__) <= set(dir(pybench))


def test_import_loads_no_numpy_and_no_layer():
    code = ("import sys, pybench; "
            "print(sorted(m for m in sys.modules if m == 'numpy' or m.startswith('pybench.')))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=True)
    assert out.stdout.strip() == "[]", out.stdout


def test_plan_stays_the_function_whatever_was_imported_first():
    code = ("import pybench.planning.compute, pybench.planning.advice; "
            "from pybench import plan, ccr; import pybench; "
            "print(callable(plan), callable(pybench.plan), plan.__module__, callable(ccr))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=True)
    assert out.stdout.split() == ["True", "True", "pybench.planning.advice", "True"], out.stdout


def test_an_unknown_name_is_an_attribute_error():
    try:
        pybench.no_such_thing  # noqa: B018
    except AttributeError as exc:
        assert "no_such_thing" in str(exc)
    else:
        raise AssertionError("pybench.no_such_thing resolved")
