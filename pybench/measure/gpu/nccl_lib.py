"""Finding and loading NCCL at run time.

pybench never links NCCL: the CUDA module opens it with ``dlopen`` and resolves
the entry points it uses (csrc/cuda/nccl_api.cpp), so the build needs no
``nccl.h`` and ``import pybench`` works where NCCL is absent. Where it comes
from, first found wins:

1. an explicit path: ``--nccl-lib PATH`` or ``PYBENCH_NCCL_LIB`` (a file, or a
   folder holding ``libnccl.so.2``); a bad explicit path is an error, never
   silently replaced by another NCCL;
2. the ``nvidia-nccl-cu13`` / ``nvidia-nccl-cu12`` wheel in this environment
   (``nvidia/nccl/lib/libnccl.so.2``, found through importlib on ``sys.path``);
3. torch's copy (``torch/lib/libnccl.so.2`` in older wheels; newer torch depends
   on the nvidia wheel of step 2);
4. ``$NCCL_HOME/lib`` (or ``lib64``);
5. the system library path (``dlopen("libnccl.so.2")``: LD_LIBRARY_PATH, ldconfig).

The version NCCL reports and the path used are recorded in every result.
Loading needs no GPU (``ncclGetVersion`` runs without one).
"""

from __future__ import annotations

import importlib.machinery
import os
import sys
from collections.abc import Iterable, Mapping
from dataclasses import asdict, dataclass
from pathlib import Path

from pybench.errors import BackendUnavailable

SONAME = "libnccl.so.2"
ENV_PATH = "PYBENCH_NCCL_LIB"
INSTALL_HINT = ("install NCCL with `pip install nvidia-nccl-cu13` (CUDA 13 drivers; nvidia-nccl-cu12 for CUDA 12), "
                f"or point --nccl-lib / {ENV_PATH} at a libnccl.so.2")
SOURCES = ("explicit", "env", "wheel", "torch", "nccl_home", "system")


class NcclNotFound(BackendUnavailable):
    """NCCL could not be found or loaded; the message names what was tried and how to get it."""


@dataclass(frozen=True)
class NcclCandidate:
    """One place NCCL may be: ``source`` is one of SOURCES; ``path`` a file, or the bare
    soname for the system search."""

    source: str
    path: str


@dataclass(frozen=True)
class NcclLibrary:
    """The NCCL this process loaded."""

    path: str
    source: str
    version: str
    version_code: int

    def to_dict(self) -> dict:
        return asdict(self)

    def __str__(self) -> str:
        return f"NCCL {self.version} ({self.path}, from {self.source})"


def _lib_in_folder(folder: Path) -> Path | None:
    for name in (SONAME, "libnccl.so"):
        if (folder / name).is_file():
            return folder / name
    return None


def _explicit(source: str, given: str) -> NcclCandidate:
    label = "--nccl-lib" if source == "explicit" else ENV_PATH
    p = Path(given).expanduser()
    if p.is_dir():
        found = _lib_in_folder(p)
        if found is None:
            raise NcclNotFound(f"{label} {given}: folder has no {SONAME}; give the library file or its folder")
        return NcclCandidate(source, str(found))
    if not p.is_file():
        raise NcclNotFound(f"{label} {given}: no such file; give the path of {SONAME} or of its folder")
    return NcclCandidate(source, str(p))


def _wheel_candidates(search_path: list[str]) -> list[NcclCandidate]:
    # nvidia-* wheels install the namespace package "nvidia"; its locations span every
    # site folder on the path, which is exactly what importlib's PathFinder walks.
    spec = importlib.machinery.PathFinder.find_spec("nvidia", search_path)
    out = []
    for loc in (spec.submodule_search_locations or []) if spec else []:
        found = _lib_in_folder(Path(loc) / "nccl" / "lib")
        if found is not None:
            out.append(NcclCandidate("wheel", str(found)))
    return out


def _torch_candidates(search_path: list[str]) -> list[NcclCandidate]:
    # find_spec only: importing torch to look at a folder would cost seconds.
    spec = importlib.machinery.PathFinder.find_spec("torch", search_path)
    if spec is None or not spec.submodule_search_locations:
        return []
    out = []
    for loc in spec.submodule_search_locations:
        found = _lib_in_folder(Path(loc) / "lib")
        if found is not None:
            out.append(NcclCandidate("torch", str(found)))
    return out


def candidates(explicit: str | None = None, environ: Mapping[str, str] | None = None,
               search_path: Iterable[str] | None = None) -> list[NcclCandidate]:
    """Every place NCCL may be loaded from, in search order (files that exist, then the system soname).

    An explicit path (``explicit``, else ``PYBENCH_NCCL_LIB``) is the only candidate:
    asking for one NCCL and silently getting another would mislabel results. Raises
    NcclNotFound with one line naming the path when it does not exist.
    """
    env = os.environ if environ is None else environ
    if explicit:
        return [_explicit("explicit", explicit)]
    if env.get(ENV_PATH):
        return [_explicit("env", env[ENV_PATH])]
    path = list(sys.path if search_path is None else search_path)
    out = _wheel_candidates(path) + _torch_candidates(path)
    home = env.get("NCCL_HOME")
    if home:
        for sub in ("lib", "lib64"):
            found = _lib_in_folder(Path(home) / sub)
            if found is not None:
                out.append(NcclCandidate("nccl_home", str(found)))
                break
    out.append(NcclCandidate("system", SONAME))
    seen: set[str] = set()
    unique = []
    for c in out:  # the same file reachable twice (torch depending on the wheel) is tried once
        key = c.path if c.source == "system" else os.path.realpath(c.path)
        if key not in seen:
            seen.add(key)
            unique.append(c)
    return unique


def _resolved_path(soname: str) -> str:
    """Where the dynamic loader found a library loaded by bare name (from /proc/self/maps)."""
    try:
        with open("/proc/self/maps") as f:
            for line in f:
                parts = line.split()
                if len(parts) >= 6 and os.path.basename(parts[5]).startswith("libnccl.so"):
                    return parts[5]
    except OSError:
        pass
    return soname


_loaded: NcclLibrary | None = None


def load_nccl(explicit: str | None = None, environ: Mapping[str, str] | None = None,
              search_path: Iterable[str] | None = None) -> NcclLibrary:
    """Find and load NCCL (once per process) and return what was loaded.

    Raises NcclNotFound (a BackendUnavailable: one line, exit 2 in the CLI) when no
    candidate loads, naming what was tried and how to install NCCL.
    """
    global _loaded
    from pybench._native import cuda
    mod = cuda()
    already = mod.nccl_loaded()
    if already is not None and _loaded is not None:
        return _loaded
    tried = []
    for cand in candidates(explicit, environ, search_path):
        try:
            info = mod.nccl_load(cand.path)
        except Exception as exc:  # NativeError from dlopen/dlsym, one line
            msg = str(exc).split(" [", 1)[0]
            if cand.source in ("explicit", "env"):
                raise NcclNotFound(f"{msg}; {INSTALL_HINT}") from None
            tried.append(f"{cand.source} ({msg})" if cand.source != "system" else f"system ({SONAME} not on the "
                         "library path)")
            continue
        path = _resolved_path(cand.path) if cand.source == "system" else info["path"]
        _loaded = NcclLibrary(path=path, source=cand.source, version=info["version"],
                              version_code=int(info["version_code"]))
        return _loaded
    raise NcclNotFound(f"NCCL not found (tried: {'; '.join(tried)}); {INSTALL_HINT}")


def loaded_nccl() -> NcclLibrary | None:
    """What load_nccl loaded in this process, or None."""
    return _loaded
