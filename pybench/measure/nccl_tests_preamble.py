"""nccl-tests' lines above its table, in its exact format, with pybench's true values.

Scripts that read nccl-tests (PerfKitBenchmarker, cluster health checks) take the run's settings from
``# nThread N nGpus N minBytes ... graph: N unalign: N`` and the devices from the
``#  Rank  0 Group  0 Pid ... on HOST device ...`` lines, and stop when either is missing.

The values are pybench's own: one thread per process; ``nGpus`` the GPUs a process drives (0 on the
CPU backends); the sizes planned; ``step`` the factor or the increment between them, and ``0(list)``
for a list that has neither; ``iters`` the fixed count of ``-n``, and 0 when each size stops by the
adaptive rule (pybench's next header line gives its bounds), as pybench's ``-J`` file writes it;
``agg iters`` 1 and ``unalign`` 0 (pybench offers neither); ``validation`` the check iterations;
``graph`` 1 when the timing replays CUDA graphs. A rank on a CPU backend prints ``device cpu``
and its buffers' place, never an invented GPU index or PCI address.
"""

from __future__ import annotations

from collections.abc import Sequence

from pybench.measure.rank_devices import CPU_DEVICE, RankDevice
from pybench.measure.results import RunResult


def size_step(sizes: Sequence[int]) -> str:
    """nccl-tests' ``step: N(factor)`` or ``N(bytes)`` for ``sizes``; ``0(list)`` when neither fits."""
    if len(sizes) < 2:
        return "0(bytes)"  # one size: nothing steps
    a, b = sizes[0], sizes[1]
    if a > 0 and b % a == 0 and b // a > 1 and all(y == x * (b // a) for x, y in zip(sizes, sizes[1:])):
        return f"{b // a}(factor)"
    if b > a and all(y - x == b - a for x, y in zip(sizes, sizes[1:])):
        return f"{b - a}(bytes)"
    return "0(list)"


def config_line(result: RunResult, sizes: Sequence[int], gpus_per_process: int) -> str:
    """``# nThread 1 nGpus G minBytes A maxBytes B step: S warmup iters: W iters: I agg iters: 1
    validation: V graph: X unalign: 0`` as nccl-tests prints it."""
    opts = result.options
    graph = 1 if result.timing in ("graph", "host-graph") else 0
    return (f"# nThread 1 nGpus {gpus_per_process} minBytes {min(sizes)} maxBytes {max(sizes)} "
            f"step: {size_step(sizes)} warmup iters: {opts['warmup']} iters: {opts.get('iters') or 0} "
            f"agg iters: 1 validation: {opts['check']} graph: {graph} unalign: 0")


def rank_lines(ranks: Sequence[RankDevice]) -> list[str]:
    """``# Using devices`` and one ``#  Rank`` line per rank, each device named by its own rank, a GPU with the
    PCI address its rank read (said unknown where it read none)."""
    lines = ["# Using devices"]
    for rank, (pid, host, device, name, address) in enumerate(ranks):
        where = (f"cpu [host memory] {name}" if device == CPU_DEVICE
                 else f"{device:2d} [{address or 'PCI address not read'}] {name}")
        lines.append(f"#  Rank {rank:2d} Group {0:2d} Pid {pid:6d} on {host:>10} device {where}")
    return lines


def device_entries(ranks: Sequence[RankDevice]) -> list[dict]:
    """The same ranks as nccl-tests' -J ``config.devices`` entries (device -1: a CPU rank)."""
    return [{"rank": rank, "group": 0, "pid": pid, "hostname": host, "device": device, "device_hex": address,
             "device_info": name} for rank, (pid, host, device, name, address) in enumerate(ranks)]
