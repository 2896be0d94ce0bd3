"""One check-pattern rule for every backend.

csrc/common/pattern.hpp is the definition (pybench._core.check_pattern exposes it):
rank r's input element j is 1 + (3r + j) mod M, M = 13 or smaller so that a sum
over every rank stays an exact integer in the dtype. The torch backend computes
its copy in Python and the CUDA module its tables in C++; both must give the same
values for every dtype, op and world.
"""

from __future__ import annotations

import itertools
import types

import pytest

from pybench.collectives import DTYPES, OPS

WORLDS = (1, 2, 3, 4, 8, 13, 64, 256)  # up to the bfloat16 limit: beyond it no sum is exact
FIRSTS = (0, 1000)
COUNT = 2 * 13 + 3  # more than two periods at the largest M
GRID = list(itertools.product(DTYPES, OPS, WORLDS, (True, False)))


def _sources(world: int, reduces: bool) -> list[int]:
    """-1 (the reduction over every rank) where the collective reduces, and a few ranks."""
    ranks = sorted({0, world // 2, world - 1})
    return ([-1] if reduces else []) + ranks


def _period(native, dtype: str, op: str, world: int, reduces: bool) -> int:
    # value(0, j) = 1 + j mod M, so the largest of rank 0's first 13 values is M.
    return int(max(native.check_pattern(dtype, op, world, 0, 13, reduces=reduces)))


@pytest.fixture(scope="module")
def torch_pattern():
    """The torch backend's own pattern code, run on the CPU without a process group.

    Returns f(dtype, op, world, reduces, source, first, n) -> values as stored in the dtype.
    """
    torch = pytest.importorskip("torch")
    from pybench.measure.backends.torch import TorchCollectiveBench, pattern_period

    def values(dtype: str, op: str, world: int, reduces: bool, source: int, first: int, n: int) -> list[float]:
        # The methods read only these attributes; a started backend would add nothing to them.
        bench = TorchCollectiveBench.__new__(TorchCollectiveBench)
        bench.torch, bench.tdtype, bench.world, bench.op_name = torch, getattr(torch, dtype), world, op
        bench.period = pattern_period(dtype, op, world, reduces)
        bench.b = types.SimpleNamespace(device="cpu")
        out = bench._reduced(first, n) if source == -1 else bench._pattern(source, first, n)
        return out.double().tolist()

    values.period = pattern_period  # type: ignore[attr-defined]
    return values


@pytest.mark.parametrize("dtype, op, world, reduces", GRID)
def test_torch_backend_agrees_with_the_core_rule(native, torch_pattern, dtype, op, world, reduces):
    assert torch_pattern.period(dtype, op, world, reduces) == _period(native, dtype, op, world, reduces)
    for source, first in itertools.product(_sources(world, reduces), FIRSTS):
        want = native.check_pattern(dtype, op, world, source, COUNT, first=first, reduces=reduces)
        assert torch_pattern(dtype, op, world, reduces, source, first, COUNT) == want, (source, first)


@pytest.fixture(scope="module")
def cuda_module():
    from pybench._native import cuda
    from pybench.errors import BackendUnavailable
    try:
        return cuda()
    except BackendUnavailable as exc:
        pytest.skip(f"pybench was built without its CUDA module: {exc}")


@pytest.mark.parametrize("dtype, op, world, reduces", GRID)
def test_cuda_tables_agree_with_the_core_rule(native, cuda_module, dtype, op, world, reduces):
    period = _period(native, dtype, op, world, reduces)
    for source, first in itertools.product(_sources(world, reduces), FIRSTS):
        values, cuda_period, tolerance = cuda_module.pattern_table(dtype, op, world, reduces, source, first)
        assert (cuda_period, tolerance) == (period, 0.0)
        assert values == native.check_pattern(dtype, op, world, source, period, first=first, reduces=reduces)


def test_the_rule_keeps_every_reduction_exact(native):
    """What the shrinking M is for: each reduced value is the exact integer, stored without rounding."""
    for dtype, world in itertools.product(DTYPES, (2, 64, 256)):
        m = _period(native, dtype, "sum", world, True)
        exact = [sum(1 + (3 * r + j) % m for r in range(world)) for j in range(COUNT)]
        assert native.check_pattern(dtype, "sum", world, -1, COUNT) == exact, (dtype, world)
