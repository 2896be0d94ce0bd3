"""`pybench plan` loads only what planning needs: its answer must come within two seconds, and the
measuring layer (launchers, runners, stop rules), torch, scipy and matplotlib would be paid at start-up
for nothing. One subprocess runs the command as a user does and lists what it imported."""

from __future__ import annotations

import subprocess
import sys

from conftest import SHARED_DATA
from shared_models import fitted

H100 = SHARED_DATA / "nccl-tests" / "h100_p5_2node_16gpu_efa_allreduce_srunprefix.txt"
# Modules the plan path never uses; each was imported at start-up by some version of the CLI.
NOT_NEEDED = ("pybench.measure.benchmark", "pybench.measure.launch", "pybench.measure.stopping",
              "pybench.measure.runner", "torch", "scipy", "matplotlib")


def test_plan_imports_no_measuring_layer_and_no_heavy_library(tmp_path_factory):
    model = fitted(tmp_path_factory, "h100n", [H100])
    code = ("import runpy, sys\n"
            f"sys.argv = ['pybench', 'plan', '--params', '125M', '--max-world', '8', '--model', {model!r}, "
            "'--tflops', '400']\n"
            "try:\n    runpy.run_module('pybench', run_name='__main__')\n"
            "except SystemExit as exc:\n    assert not exc.code, exc.code\n"
            f"print('imported:', sorted(m for m in {NOT_NEEDED!r} if m in sys.modules))\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=True)
    assert "recommended:" in out.stdout, out.stdout + out.stderr
    assert out.stdout.strip().splitlines()[-1] == "imported: []", out.stdout

