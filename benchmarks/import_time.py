"""How long ``import pybench`` takes, from ``python -X importtime``, beside importing the whole API.

Every rank of a job pays the import, so the package loads its API lazily (PEP 562). This
prints, side by side in one run, the median over repeats of the cumulative import time of
``pybench`` alone and of ``pybench`` plus every public name (what the eager package cost),
and their ratio. Run: ``python benchmarks/import_time.py [--repeats 15]``. The target is a
bare import under 0.1 s; this is a measurement, not a test (no test asserts a time).
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys

BARE = "import pybench"
WHOLE_API = "import pybench; [getattr(pybench, n) for n in pybench.__all__]"


def import_time_s(code: str) -> float:
    """Seconds ``python -X importtime`` reports for every top-level pybench import of ``code``.

    Top-level lines (no indent in the name column) are the imports ``code`` made itself; their
    cumulative column includes everything they pulled in (numpy, ...).
    """
    out = subprocess.run([sys.executable, "-X", "importtime", "-c", code], capture_output=True, text=True,
                         check=True, timeout=120).stderr
    total_us = 0
    for line in out.splitlines():
        parts = line.removeprefix("import time:").split("|")
        if len(parts) != 3 or not parts[1].strip().isdigit():
            continue
        name = parts[2].rstrip()
        if name.startswith(" pybench"):  # one space after the bar, no nesting indent
            total_us += int(parts[1])
    return total_us / 1e6


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeats", type=int, default=15)
    n = ap.parse_args().repeats
    bare, whole = [], []
    for _ in range(n):  # interleaved, so load on the machine hits both alike
        bare.append(import_time_s(BARE))
        whole.append(import_time_s(WHOLE_API))
    b, w = statistics.median(bare), statistics.median(whole)
    print(f"import pybench             median {b * 1e3:7.1f} ms  (min {min(bare) * 1e3:.1f}, {n} runs)")
    print(f"import pybench + whole API median {w * 1e3:7.1f} ms  (min {min(whole) * 1e3:.1f}, {n} runs)")
    print(f"ratio bare / whole API: {b / w:.3f}; bare import {'under' if b < 0.1 else 'OVER'} the 0.1 s target")
    return 0


if __name__ == "__main__":
    sys.exit(main())
