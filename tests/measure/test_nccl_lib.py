"""NCCL found at run time: the search order (with fake folders), one-line errors for
bad explicit paths, a real load from every source where the nvidia-nccl wheel is
installed (no GPU needed), and the declared ABI checked against the wheel's nccl.h."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from pybench._native import build_info
from pybench.measure.gpu.nccl_lib import ENV_PATH, SONAME, NcclNotFound, candidates

REPO = Path(__file__).resolve().parents[2]


def _wheel_lib() -> Path | None:
    for entry in sys.path:
        p = Path(entry) / "nvidia" / "nccl" / "lib" / SONAME
        if p.is_file():
            return p
    return None


WHEEL_LIB = _wheel_lib()
needs_cuda_module = pytest.mark.skipif(build_info().get("cuda_module") != "ON",
                                       reason="pybench was built without the CUDA module (no nvcc at build time)")
needs_wheel = pytest.mark.skipif(WHEEL_LIB is None, reason="the nvidia-nccl wheel is not installed "
                                 "(pip install nvidia-nccl-cu13 to run the real-load tests)")


def _touch(path: Path) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(b"not really a library")
    return path


@pytest.fixture
def fake_tree(tmp_path):
    """A site folder with the nvidia wheel layout and torch's bundled copy, and an NCCL_HOME."""
    site = tmp_path / "site"
    wheel = _touch(site / "nvidia" / "nccl" / "lib" / SONAME)
    (site / "torch").mkdir(parents=True)
    (site / "torch" / "__init__.py").write_text("")
    torch_lib = _touch(site / "torch" / "lib" / SONAME)
    home = tmp_path / "nccl_home"
    home_lib = _touch(home / "lib" / SONAME)
    explicit = _touch(tmp_path / "mine" / SONAME)
    return {"site": site, "wheel": wheel, "torch": torch_lib, "home": home, "home_lib": home_lib,
            "explicit": explicit}


def test_search_order_is_wheel_torch_nccl_home_system(fake_tree):
    t = fake_tree
    found = candidates(environ={"NCCL_HOME": str(t["home"])}, search_path=[str(t["site"])])
    assert [(c.source, c.path) for c in found] == [
        ("wheel", str(t["wheel"])), ("torch", str(t["torch"])), ("nccl_home", str(t["home_lib"])),
        ("system", SONAME)]


def test_each_source_is_skipped_when_absent(fake_tree):
    t = fake_tree
    t["wheel"].unlink()
    found = candidates(environ={"NCCL_HOME": str(t["home"])}, search_path=[str(t["site"])])
    assert [c.source for c in found] == ["torch", "nccl_home", "system"]
    t["torch"].unlink()
    found = candidates(environ={"NCCL_HOME": str(t["home"])}, search_path=[str(t["site"])])
    assert [c.source for c in found] == ["nccl_home", "system"]
    # lib64 is looked at too
    t["home_lib"].rename(_touch(t["home"] / "lib64" / "x").parent / SONAME)
    found = candidates(environ={"NCCL_HOME": str(t["home"])}, search_path=[str(t["site"])])
    assert [(c.source, c.path) for c in found][0] == ("nccl_home", str(t["home"] / "lib64" / SONAME))
    assert [c.source for c in candidates(environ={}, search_path=[str(t["site"])])] == ["system"]


def test_explicit_path_wins_and_is_the_only_candidate(fake_tree):
    t = fake_tree
    env = {"NCCL_HOME": str(t["home"]), ENV_PATH: str(t["home_lib"])}
    assert [(c.source, c.path) for c in candidates(str(t["explicit"]), env, [str(t["site"])])] == [
        ("explicit", str(t["explicit"]))]
    # the environment variable comes next, and a folder means the library inside it
    assert [(c.source, c.path) for c in candidates(None, env, [str(t["site"])])] == [("env", str(t["home_lib"]))]
    assert [(c.source, c.path) for c in candidates(str(t["explicit"].parent), {}, [])] == [
        ("explicit", str(t["explicit"]))]


@pytest.mark.parametrize("how", ["flag", "env", "folder"])
def test_bad_explicit_path_is_a_one_line_error_naming_it(tmp_path, how):
    missing = tmp_path / "nowhere" / SONAME
    empty = tmp_path / "empty"
    empty.mkdir()
    with pytest.raises(NcclNotFound) as info:
        if how == "flag":
            candidates(str(missing), {}, [])
        elif how == "env":
            candidates(None, {ENV_PATH: str(missing)}, [])
        else:
            candidates(str(empty), {}, [])
    msg = str(info.value)
    assert "\n" not in msg
    assert str(missing if how != "folder" else empty) in msg
    assert ("--nccl-lib" if how != "env" else ENV_PATH) in msg


@needs_cuda_module
def test_a_file_that_is_not_a_library_fails_to_load_naming_it(tmp_path):
    from pybench.measure.gpu.nccl_lib import load_nccl
    bogus = _touch(tmp_path / SONAME)
    with pytest.raises(NcclNotFound) as info:
        load_nccl(str(bogus))
    msg = str(info.value)
    assert "\n" not in msg and str(bogus) in msg and "pip install nvidia-nccl-cu13" in msg


_LOAD_SCRIPT = textwrap.dedent("""
    import json, sys
    from pybench.measure.gpu.nccl_lib import load_nccl
    explicit = sys.argv[1] or None
    lib = load_nccl(explicit, search_path=json.loads(sys.argv[2]))
    print(json.dumps(lib.to_dict()))
""")


def _load_in_subprocess(tmp_path, explicit: str, search_path: list[str], env: dict) -> dict:
    import json
    full = {k: v for k, v in os.environ.items() if k not in (ENV_PATH, "NCCL_HOME")}
    full.update(env)
    proc = subprocess.run([sys.executable, "-c", _LOAD_SCRIPT, explicit, json.dumps(search_path)], cwd=tmp_path,
                          capture_output=True, text=True, timeout=60, env=full)
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout.strip().splitlines()[-1])


def _header_version() -> str:
    text = (WHEEL_LIB.parents[1] / "include" / "nccl.h").read_text()
    parts = [re.search(rf"#define NCCL_{k}\s+(\d+)", text).group(1) for k in ("MAJOR", "MINOR", "PATCH")]
    return ".".join(parts)


@needs_cuda_module
@needs_wheel
@pytest.mark.parametrize("source", ["explicit", "env", "wheel", "torch", "nccl_home", "system"])
def test_real_nccl_loads_from_every_source_without_a_gpu(tmp_path, source):
    # The wheel's real library, reached through each kind of place (symlinks in fake folders).
    site = tmp_path / "site"
    site.mkdir()
    env: dict[str, str] = {}
    explicit = ""
    if source == "wheel":
        search = [str(WHEEL_LIB.parents[3])]
    elif source == "system":
        # dlopen("libnccl.so.2") by bare name: found through LD_LIBRARY_PATH, path read back from the process maps
        search = [str(site)]
        (tmp_path / "syslib").mkdir()
        (tmp_path / "syslib" / SONAME).symlink_to(WHEEL_LIB)
        env["LD_LIBRARY_PATH"] = str(tmp_path / "syslib")
    else:
        search = [str(site)]
        if source == "torch":
            (site / "torch" / "lib").mkdir(parents=True)
            (site / "torch" / "__init__.py").write_text("")
            target = site / "torch" / "lib" / SONAME
        else:
            target = tmp_path / source / "lib" / SONAME
            target.parent.mkdir(parents=True)
        target.symlink_to(WHEEL_LIB)
        if source == "explicit":
            explicit = str(target)
        elif source == "env":
            env[ENV_PATH] = str(target.parent)
        elif source == "nccl_home":
            env["NCCL_HOME"] = str(target.parents[1])
    got = _load_in_subprocess(tmp_path, explicit, search, env)
    assert got["source"] == source
    assert got["version"] == _header_version()
    assert got["version_code"] > 0
    if source == "system":
        assert os.path.realpath(got["path"]) == os.path.realpath(WHEEL_LIB)
    elif source != "wheel":
        assert got["path"].startswith(str(tmp_path))


@needs_cuda_module
@needs_wheel
def test_one_process_cannot_switch_nccl(tmp_path):
    other = tmp_path / "other" / SONAME
    other.parent.mkdir()
    shutil.copy(WHEEL_LIB, other)
    script = textwrap.dedent(f"""
        from pybench._native import cuda
        c = cuda()
        c.nccl_load({str(WHEEL_LIB)!r})
        try:
            c.nccl_load({str(other)!r})
        except Exception as exc:
            print(type(exc).__name__, exc)
    """)
    proc = subprocess.run([sys.executable, "-c", script], cwd=tmp_path, capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.startswith("NativeError NCCL is already loaded from " + str(WHEEL_LIB))


@needs_cuda_module
def test_version_codes_of_both_eras():
    from pybench._native import cuda
    assert cuda().nccl_version_string(23203) == "2.32.3"
    assert cuda().nccl_version_string(2708) == "2.7.8"


@needs_wheel
def test_declared_abi_matches_the_wheels_nccl_h(tmp_path):
    # csrc/cuda/nccl_api.hpp declares NCCL's types itself; prove every value and
    # signature equals nccl.h's, so a dlsym'ed pointer is called correctly.
    cuda_include = Path(os.environ.get("CUDA_HOME", "/usr/local/cuda")) / "include"
    cxx = shutil.which("g++") or shutil.which("c++")
    if cxx is None or not (cuda_include / "cuda_runtime.h").is_file():
        pytest.skip("needs a C++ compiler and the CUDA headers (nccl.h includes cuda_runtime.h)")
    src = tmp_path / "abi.cpp"
    pairs = {"GetVersion": "ncclGetVersion", "GetUniqueId": "ncclGetUniqueId", "CommInitRank": "ncclCommInitRank",
             "CommInitAll": "ncclCommInitAll", "CommDestroy": "ncclCommDestroy", "CommAbort": "ncclCommAbort",
             "CommGetAsyncError": "ncclCommGetAsyncError", "GetErrorString": "ncclGetErrorString",
             "GroupStart": "ncclGroupStart", "GroupEnd": "ncclGroupEnd", "AllReduce": "ncclAllReduce",
             "AllGather": "ncclAllGather", "ReduceScatter": "ncclReduceScatter", "Broadcast": "ncclBroadcast",
             "Send": "ncclSend", "Recv": "ncclRecv", "CommInitRankConfig": "ncclCommInitRankConfig",
             "CommSplit": "ncclCommSplit"}
    # Same shape with our types mapped onto NCCL's: compare via layout-identical casts.
    lines = ["#include <nccl.h>", '#include "csrc/cuda/nccl_api.hpp"', "#include <type_traits>",
             "namespace n = pybench::nccl;",
             "template <class T> struct M { using type = T; };",
             "template <> struct M<n::Result> { using type = ncclResult_t; };",
             "template <> struct M<n::DataType> { using type = ncclDataType_t; };",
             "template <> struct M<n::RedOp> { using type = ncclRedOp_t; };",
             "template <> struct M<n::Comm> { using type = ncclComm_t; };",
             "template <> struct M<n::Comm*> { using type = ncclComm_t*; };",
             "template <> struct M<n::UniqueId> { using type = ncclUniqueId; };",
             "template <> struct M<n::UniqueId*> { using type = ncclUniqueId*; };",
             "template <> struct M<n::Result*> { using type = ncclResult_t*; };",
             "template <> struct M<n::Config*> { using type = ncclConfig_t*; };",
             # our ncclConfig_t is NCCL 2.14's prefix: same offsets, magic and undefined value
             "#include <cstddef>",
             "static_assert(offsetof(n::Config, size) == offsetof(ncclConfig_t, size));",
             "static_assert(offsetof(n::Config, magic) == offsetof(ncclConfig_t, magic));",
             "static_assert(offsetof(n::Config, version) == offsetof(ncclConfig_t, version));",
             "static_assert(offsetof(n::Config, blocking) == offsetof(ncclConfig_t, blocking));",
             "static_assert(sizeof(n::Config) <= sizeof(ncclConfig_t));",
             "static_assert(n::kConfigMagic == NCCL_API_MAGIC && n::kConfigUndefInt == NCCL_CONFIG_UNDEF_INT);",
             "static_assert(n::kConfigVersion == NCCL_VERSION(2, 14, 0));",
             "template <class F> struct Map;",
             "template <class R, class... A> struct Map<R (*)(A...)> "
             "{ using type = typename M<R>::type (*)(typename M<A>::type...); };",
             "static_assert(sizeof(n::UniqueId) == sizeof(ncclUniqueId));",
             "static_assert(sizeof(n::Result) == sizeof(ncclResult_t) "
             "&& sizeof(n::DataType) == sizeof(ncclDataType_t));"]
    for ours, theirs in pairs.items():
        lines.append(f"static_assert(std::is_same_v<Map<n::{ours}Fn>::type, decltype(&::{theirs})>, \"{theirs}\");")
    for ours, theirs in {"kSuccess": "ncclSuccess", "kInProgress": "ncclInProgress", "kInt8": "ncclInt8",
                         "kUint8": "ncclUint8", "kInt32": "ncclInt32", "kUint32": "ncclUint32", "kInt64": "ncclInt64",
                         "kUint64": "ncclUint64", "kFloat16": "ncclFloat16", "kFloat32": "ncclFloat32",
                         "kFloat64": "ncclFloat64", "kBfloat16": "ncclBfloat16", "kSum": "ncclSum",
                         "kProd": "ncclProd", "kMax": "ncclMax", "kMin": "ncclMin", "kAvg": "ncclAvg"}.items():
        lines.append(f"static_assert(static_cast<int>(n::{ours}) == static_cast<int>({theirs}), \"{theirs}\");")
    src.write_text("\n".join(lines) + "\n")
    proc = subprocess.run([cxx, "-std=c++17", "-fsyntax-only", f"-I{WHEEL_LIB.parents[1] / 'include'}",
                           f"-I{cuda_include}", f"-I{REPO}", str(src)], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr[-3000:]
