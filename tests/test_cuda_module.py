"""The CUDA module: built in CI with nvcc, reports "no GPU" cleanly without a driver,
and runs its kernels where a GPU exists."""

import pytest

from pybench._native import build_info
from pybench.errors import BackendUnavailable


def _cuda_or_skip():
    if build_info().get("cuda_module") != "ON":
        pytest.skip("pybench was built without the CUDA module (no nvcc at build time)")
    from pybench._native import cuda
    return cuda()


def test_cuda_module_imports_and_probes_without_crashing():
    cuda = _cuda_or_skip()
    p = cuda.probe()
    assert p["runtime_version"] >= 12000
    assert p["device_count"] == len(p["devices"])
    if p["device_count"] == 0:
        # error 35 (no driver) or 100 (no device) must read as "no GPU", with the reason
        assert p["no_gpu_reason"]
        assert any(k in p["no_gpu_reason"] for k in ("driver", "device"))
    assert cuda.compiled_architectures() == build_info()["cuda_architectures"].split(",")


def test_missing_cuda_module_says_how_to_rebuild(monkeypatch):
    import sys

    import pybench
    from pybench import _native
    _native.cuda.cache_clear()
    # as if the module had never been built: not importable, not an attribute of the package
    monkeypatch.setitem(sys.modules, "pybench._cuda", None)
    monkeypatch.delattr(pybench, "_cuda", raising=False)
    try:
        with pytest.raises(BackendUnavailable, match="PYBENCH_CUDA=ON pip install"):
            _native.cuda()
    finally:
        _native.cuda.cache_clear()


@pytest.mark.gpu
def test_kernels_run_on_a_gpu():
    cuda = _cuda_or_skip()
    if cuda.probe()["device_count"] == 0:
        pytest.skip(f"no GPU: {cuda.probe()['no_gpu_reason']}")
    assert cuda.kernel_selftest(0, 1 << 22) == 0
