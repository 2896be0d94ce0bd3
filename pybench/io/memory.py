"""Memory budgets, checked before anything large is allocated.

What a process may still allocate is the smallest of three limits, any of which may be the
one that bites: the host's free memory (``MemAvailable``), the process's own address-space
limit (``RLIMIT_AS`` less what is already mapped: a ``ulimit -v`` makes numpy raise
MemoryError and native code segfault long before the host runs short), and the cgroup's
``memory.max`` less its ``memory.current`` (a container's limit, where the OOM killer ends
the process with no message). A request over the budget is refused in one line naming the
option to change, before a byte of it exists.

It lives in ``io``, the lowest layer every other layer imports, because every layer
allocates: rank buffers (measure), fits and log imports (model), GEMM operands (planning).
"""

from __future__ import annotations

import resource
from pathlib import Path

from pybench.errors import SizeError

# Share of the budget one request may take: the interpreter, numpy's temporaries and the MPI
# library's own buffers need the rest.
BUDGET_SHARE = 0.8
_GIB = 1 << 30


def _meminfo_available() -> int | None:
    try:
        with open("/proc/meminfo") as f:
            for line in f:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        return None
    return None


def _mapped_bytes() -> int:
    """This process's address space in use (VmSize), 0 where it cannot be read."""
    try:
        with open("/proc/self/status") as f:
            for line in f:
                if line.startswith("VmSize:"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    return 0


def address_space_left() -> int | None:
    """What RLIMIT_AS still lets this process map, or None when it sets no limit."""
    soft, _ = resource.getrlimit(resource.RLIMIT_AS)
    if soft == resource.RLIM_INFINITY:
        return None
    return max(0, soft - _mapped_bytes())


def _cgroup_file(name: str) -> Path | None:
    """``name`` in this process's cgroup v2 folder, where there is one."""
    try:
        for line in Path("/proc/self/cgroup").read_text().splitlines():
            if line.startswith("0::"):
                path = Path("/sys/fs/cgroup") / line[3:].lstrip("/") / name
                return path if path.exists() else None
    except OSError:
        return None
    return None


def cgroup_memory_left() -> int | None:
    """``memory.max`` less ``memory.current`` of this process's cgroup, or None without a limit."""
    limit_file, used_file = _cgroup_file("memory.max"), _cgroup_file("memory.current")
    if limit_file is None:
        return None
    try:
        text = limit_file.read_text().strip()
        if text == "max":
            return None
        used = int(used_file.read_text().strip()) if used_file is not None else 0
        return max(0, int(text) - used)
    except (OSError, ValueError):
        return None


def host_memory_left() -> int | None:
    """Free host memory for new allocations by any process (MemAvailable and the cgroup's limit)."""
    known = [v for v in (_meminfo_available(), cgroup_memory_left()) if v is not None]
    return min(known) if known else None


def memory_left() -> int | None:
    """What this process may still allocate: the smallest of free RAM, the address-space limit
    and the cgroup's limit; None when none of them can be read."""
    known = [v for v in (host_memory_left(), address_space_left()) if v is not None]
    return min(known) if known else None


def check_budget(need_bytes: float, what: str, remedy: str, available: int | None = None) -> None:
    """Refuse, in one line, a request for ``need_bytes`` beyond BUDGET_SHARE of :func:`memory_left`.

    ``what`` names the allocation ("64 KiB x window 65536 in flight"), ``remedy`` the option to change.
    """
    left = memory_left() if available is None else available
    if left is None or need_bytes <= BUDGET_SHARE * left:
        return
    raise SizeError(f"{what} needs {need_bytes / _GIB:.2f} GiB, but {left / _GIB:.2f} GiB is available (the least "
                    f"of free memory, ulimit -v and the cgroup's memory.max) and one request may take "
                    f"{BUDGET_SHARE:.0%} of it; {remedy}")
