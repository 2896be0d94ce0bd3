"""What the lines above an nccl-tests table say about it: the program that ran, its Rank lines (hosts, processes,
GPU names), nccl-tests' ``nThread``/``nGpus`` line, the launcher line, NCCL's environment, pybench's own header."""

from __future__ import annotations

import dataclasses
import re
from dataclasses import dataclass, field

from pybench.collectives import NCCL_TESTS_PROGRAMS
from pybench.model.logs.launcher_lines import DIRECT, Launch, read_launch
from pybench.model.logs.nccl_env import TREE_THRESHOLD, nccl_settings, network_of

# Program name -> pybench collective name: nccl-tests', and NCCL 1.x's own test programs (nccl/build/test/single,
# 2016-2017)
PROGRAMS = {**{program: name for name, program in NCCL_TESTS_PROGRAMS.items()},
            "all_reduce_test": "allreduce", "all_gather_test": "allgather", "reduce_scatter_test": "reducescatter",
            "broadcast_test": "broadcast", "reduce_test": "reduce"}
# NGC containers and CloudAI build the MPI flavour as all_reduce_perf_mpi, ...: the same program
PROGRAM_RE = re.compile(r"\b(" + "|".join(sorted(PROGRAMS, key=len, reverse=True)) + r")(?:_mpi)?\b")
_NGPUS_RE = re.compile(r"^#\s*nThread\s+(\d+)\s+nGpus\s+(\d+)\b")
_RANK_RE = re.compile(r"^#?\s*Rank\s+(\d+)\b.*?\bon\s+(\S+)\s+device\b")
# "... device  0 [0000:1b:00] NVIDIA H100 80GB HBM3": the GPU's name after its bus id (none after a bare bus id)
_DEVICE_NAME_RE = re.compile(r"\bdevice\s+\d+\s+(?:\[[^\]]*\]\s*)?([^\s\[].*?)\s*$")
_PID_RE = re.compile(r"\bPid\s+(\d+)")
_PYBENCH_RE = re.compile(r"^#\s*pybench\s+\S+:\s*([\w-]+),\s*backend\s+([\w-]+)(?:\s*\(([^()]{1,160})\))?")
# "# world N ranks, H host(s) [...]"; older pybench wrote "N ranks on H host(s)"
_PYBENCH_WORLD_RE = re.compile(r"^#\s*world\s+(\d+)\s+ranks(?:,|\s+on)\s+(\d+)\s+host\(s\).*,\s*link\s+([\w-]+)")


@dataclass
class Preamble:
    """What the lines above a table say about it: Rank lines, program name, pybench's own header."""

    ranks: dict[int, str] = field(default_factory=dict)
    program: str | None = None
    pybench: dict[str, str] = field(default_factory=dict)
    repeated: dict[int, set[str]] = field(default_factory=dict)
    """Ranks listed again by another process (another host or Pid): several processes each ran a test of their own."""
    pids: dict[int, str] = field(default_factory=dict)
    rccl: bool = False
    """rccl-tests' banner or RCCL's version line: AMD's port of NCCL ran it."""
    launch: Launch | None = None
    """The last launcher command line above the table that names a rank count (``mpirun -n 16 ...``)."""
    gpus_per_process: int = 0
    """nccl-tests' ``# nThread T nGpus G`` line: each process drove T x G GPUs (``-t``, ``-g``); 0 unread."""
    gpus_per_thread: int = 0
    """Its G: the GPUs whose kernels one thread launches."""
    devices: dict[int, str] = field(default_factory=dict)
    """rank -> the GPU name its Rank line prints."""
    nccl: dict[str, str] = field(default_factory=dict)
    """What NCCL's environment set above the table, by variable (:func:`pybench.model.logs.nccl_env.nccl_settings`)."""
    on_launch: set[str] = field(default_factory=set)
    """Those of them set for one job alone (a launcher's -x, NCCL's own output), not in the shell (for what follows)."""

    @property
    def nccl_algo(self) -> str:
        """The algorithm NCCL_ALGO (else NCCL 2.4's tree threshold) forced, "" where none."""
        return self.nccl.get("NCCL_ALGO") or self.nccl.get(TREE_THRESHOLD, "")

    @property
    def nccl_algo_setting(self) -> str:
        """The setting that forced :attr:`nccl_algo`, as the log gave it."""
        if self.nccl.get("NCCL_ALGO"):
            return f"NCCL_ALGO={self.nccl['NCCL_ALGO'].capitalize()}"
        return f"{TREE_THRESHOLD}=0" if self.nccl.get(TREE_THRESHOLD) else ""

    @property
    def network(self) -> str:
        """:data:`~pybench.model.logs.nccl_env.SOCKETS` where NCCL crossed the nodes by TCP sockets, else ""."""
        return network_of(self.nccl)

    def for_next_test(self) -> Preamble:
        """What the next test of the log inherits: one job's launcher line, and NCCL's settings, run its tests
        alike."""
        return Preamble(launch=self.launch, nccl=dict(self.nccl), on_launch=set(self.on_launch))

    def without_launch_settings(self) -> Preamble:
        """This preamble without what a launcher line set: that line ran another job."""
        return dataclasses.replace(self, nccl={k: v for k, v in self.nccl.items() if k not in self.on_launch},
                                   on_launch=set())

    def see(self, line: str) -> None:
        """Take what ``line`` says, if anything."""
        stripped = line.strip()
        settings = nccl_settings(stripped)
        launch = read_launch(stripped)
        job = launch is not None and bool(launch.ranks) and launch.program in PROGRAMS
        # the binary's own line after a launcher's (a shell's trace, each rank's echo) is that launcher's job
        echoed = launch is not None and launch.launcher == DIRECT and self.launch is not None
        if job and not echoed:  # another job's line: an earlier line's -x was that job's alone
            for key in self.on_launch - settings.keys():
                self.nccl.pop(key, None)
            self.on_launch &= settings.keys()
        info = "NCCL INFO" in stripped
        for key, value in settings.items():
            if value is None:  # unset
                self.nccl.pop(key, None)
                self.on_launch.discard(key)
            elif not (info and self.nccl.get(key) == value):  # (NCCL echoing a setting leaves it where it was set)
                self.nccl[key] = value
                # a launcher line's -x, and what NCCL's own output says, hold for that job alone
                (self.on_launch.add if launch is not None or info else self.on_launch.discard)(key)
        if job and launch is not None and not (launch.launcher == DIRECT and self.launch is not None):
            self.launch = launch  # (a launcher's own line rules over the binary's line each of its ranks echoed)
        m = _NGPUS_RE.match(stripped)
        if m:
            self.gpus_per_process, self.gpus_per_thread = int(m.group(1)) * int(m.group(2)), int(m.group(2))
        self.rccl = self.rccl or stripped.startswith(("rccl-tests:", "RCCL version"))
        m = _RANK_RE.match(stripped)
        if m:
            rank, host = int(m.group(1)), m.group(2)
            pid = _PID_RE.search(stripped)
            where, before = f"{host} (Pid {pid.group(1)})" if pid else host, self.pids.get(rank)
            if self.ranks.get(rank, host) != host or (before is not None and before != where):
                self.repeated.setdefault(rank, {before or self.ranks[rank]}).add(where)
            self.ranks[rank], self.pids[rank] = host, where
            named = _DEVICE_NAME_RE.search(stripped)
            if named:
                self.devices[rank] = named.group(1)[:120]
        pm = PROGRAM_RE.search(stripped)
        # "Collective test concluded: X" closes the previous test; it does not name the next.
        if pm and "concluded" not in stripped:
            self.program = pm.group(1)
        m = _PYBENCH_RE.match(stripped)
        if m:
            self.pybench.update(benchmark=m.group(1), backend=m.group(2), library=m.group(3) or "")
        m = _PYBENCH_WORLD_RE.match(stripped)
        if m:
            self.pybench.update(world=m.group(1), hosts=m.group(2), link=m.group(3))


def rank_line(line: str) -> bool:
    """Whether ``line`` is one of nccl-tests' Rank lines (``#  Rank  0 Group  0 Pid 123 on host device 0 ...``)."""
    return _RANK_RE.match(line.strip()) is not None

