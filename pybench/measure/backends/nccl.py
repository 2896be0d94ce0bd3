"""The NCCL backend: device buffers, the native GPU harness, CUDA events.

Everything inside a timed region is C++ (csrc/cuda/nccl_harness.cpp): buffers,
warm-up, the on-device check (#wrong counted by a kernel), the event-timed loop
(batched, per-op, or CUDA graph replay) and the max over ranks of the samples, or
nccl-tests' own host-clock timing averaged over ranks (TIMING_DEFINITIONS).
NCCL itself is loaded at run time (pybench.measure.gpu.nccl_lib).

How ranks start, with no home-made rendezvous:
- stand-alone (no launcher): one process drives every visible GPU through
  ncclCommInitAll (``PYBENCH_GPUS=N`` / ``--gpus N`` uses the first N);
- under mpirun / srun (or pybench's own MPI launch): one GPU per process, chosen
  by local rank, or the only visible one when the launcher binds a GPU per rank
  (``srun --gpus-per-task=1``; pybench.measure.backends.selection); rank 0's ncclUniqueId travels in pybench._core's
  ``allreduce_max_ints`` over its 128 byte values (the other ranks contribute
  zeros, so the max is rank 0's id);
- under torchrun: the id travels through torch's TCPStore at MASTER_ADDR:MASTER_PORT
  (the elastic agent's store when TORCHELASTIC_USE_AGENT_STORE is set).
After start-up, cross-rank agreement (agree_max, sample maxima, #wrong sums) runs
over NCCL itself, so all three launch modes share one code path.

Options reach the backend through the environment, so every rank of a launched
job sees the same: ``PYBENCH_NCCL_LIB`` (which libnccl), ``PYBENCH_GPUS``,
``PYBENCH_NCCL_IN_PLACE=1`` (in-place collectives only).

Without it, every size of a collective that has a one-buffer form is measured out of place and then
in place, as nccl-tests measures both blocks of its table.
"""

from __future__ import annotations

import atexit
import os
import socket
import sys
from typing import Any

from pybench.errors import BackendUnavailable, UsageError
from pybench.measure.backends.selection import device_for_rank, world_one_note
from pybench.measure.gpu.nccl_lib import INSTALL_HINT, NcclLibrary, load_nccl

GPUS_ENV = "PYBENCH_GPUS"
IN_PLACE_ENV = "PYBENCH_NCCL_IN_PLACE"
#: The collectives NCCL runs on one buffer too (csrc/cuda/nccl_collectives.cpp: their in-place offsets).
IN_PLACE_FORMS = frozenset({"allreduce", "allgather", "reducescatter", "broadcast", "alltoall", "sendrecv"})
#: Those whose in-place result no order of transfers defines (each rank sends from the buffer it receives
#: into): timed as nccl-tests times them, beside the out-of-place block, with no #wrong (N/A), as nccl-tests.
UNCHECKED_IN_PLACE = frozenset({"alltoall", "sendrecv"})
TIMING_ENV = "PYBENCH_NCCL_TIMING"  # "graph" turns CUDA-graph replay on for batched timing
_MPI_VARS = ("OMPI_COMM_WORLD_SIZE", "PMIX_RANK", "PMI_RANK", "PMI_SIZE", "MPI_LOCALNRANKS", "MV2_COMM_WORLD_SIZE",
             "SLURM_STEP_NUM_TASKS", "PYBENCH_RANK_PROCESS")
_UNIQUE_ID_KEY = "pybench/nccl_unique_id"
INIT_TIMEOUT_S = 120.0  # least time every rank gets to join the communicator (a large job starts slowly)
#: What one sample's time per operation is in each timing mode (csrc/cuda/nccl_harness.cpp), for the file:
#: figures from different modes are different quantities, and only "host" is nccl-tests' own.
TIMING_DEFINITIONS = {
    "batched": "CUDA events on each stream around K operations enqueued back to back (the GPU held by a latch "
               "until all K are enqueued), / K; the slowest device and rank",
    "per-op": "batched with K = 1",
    "graph": "CUDA events around one replay of a CUDA graph of K operations, / K; the slowest device and rank",
    "host": "nccl-tests' definition: the host clock around K operations enqueued back to back and one wait for the "
            "stream(s) (no latch), / K; the mean over ranks (nccl-tests' -a 1, its default)",
    "host-graph": "nccl-tests' -G definition: the host clock around one replay of a CUDA graph of K operations and "
                  "one wait for the stream(s), / K; the mean over ranks",
}
#: What the harness does with buffers (csrc/cuda/nccl_harness.hpp: kRotationBytes), for the header and the file.
ROTATION_TEXT = ("each operation uses the next slot of a >= 256 MiB pool per buffer (rotated as nccl-tests), "
                 "so sizes under the GPU's L2 cache are not timed from it")


def launch_mode(environ: dict[str, str] | None = None) -> str:
    """'single' (one process, every GPU), 'mpi' (mpirun/srun/pybench's launch) or 'torchrun'."""
    env = os.environ if environ is None else environ
    if any(v in env for v in _MPI_VARS):
        return "mpi"
    if "TORCHELASTIC_RUN_ID" in env or all(v in env for v in ("RANK", "WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT")):
        return "torchrun"
    return "single"


def gpu_probe() -> dict[str, Any]:
    """The CUDA module's probe; raises BackendUnavailable when the module is not built."""
    from pybench._native import cuda
    return dict(cuda().probe())


def no_gpu_reason() -> str | None:
    """Why the nccl backend cannot run here (module not built, no driver, no device), or None."""
    try:
        p = gpu_probe()
    except BackendUnavailable as exc:
        return str(exc)
    if p["device_count"] == 0:
        return f"no GPU ({p['no_gpu_reason'] or 'no CUDA device visible'})"
    return None


def requested_gpus(ndev: int, environ: dict[str, str] | None = None) -> list[int]:
    """Devices a stand-alone run drives: the first PYBENCH_GPUS of the ``ndev`` visible ones."""
    env = os.environ if environ is None else environ
    raw = env.get(GPUS_ENV, "").strip()
    if not raw:
        return list(range(ndev))
    try:
        n = int(raw)
    except ValueError:
        raise UsageError(f"--gpus / {GPUS_ENV}={raw!r} is not a whole number") from None
    if not 1 <= n <= ndev:
        raise UsageError(f"--gpus {n}: this node has {ndev} visible GPU(s); use 1..{ndev}")
    return list(range(n))


def share_id_over_mpi(core, rank: int, make_id) -> bytes:
    """Rank 0's ``make_id()`` (128 bytes) on every rank, through pybench._core's MPI.

    A max over ranks where only rank 0 is non-zero is a broadcast of rank 0's
    bytes; _core needs nothing new for it.
    """
    uid = make_id() if rank == 0 else bytes(128)
    if len(uid) != 128:
        raise UsageError(f"an NCCL unique id is 128 bytes, got {len(uid)}")
    return bytes(int(b) for b in core.allreduce_max_ints(list(uid)))


def share_id_over_store(store, rank: int, world: int, run: str, make_id, host: str) -> tuple[bytes, list[str]]:
    """Rank 0's ``make_id()`` and every rank's host name, through a torch TCPStore
    (torchrun's, at MASTER_ADDR:MASTER_PORT). ``store.get`` waits for the key."""
    if rank == 0:
        store.set(f"{_UNIQUE_ID_KEY}/{run}", make_id())
    uid = bytes(store.get(f"{_UNIQUE_ID_KEY}/{run}"))
    store.set(f"pybench/host/{run}/{rank}", host)
    hosts = [bytes(store.get(f"pybench/host/{run}/{r}")).decode() for r in range(world)]
    return uid, hosts


def _format_driver(code: int) -> str:
    return f"{code // 1000}.{(code % 1000) // 10}" if code else "unknown"


class NcclBackend:
    name = "nccl"

    def __init__(self) -> None:
        try:
            self._probe = gpu_probe()
        except BackendUnavailable as exc:
            raise BackendUnavailable(f"the nccl backend needs pybench's CUDA module: {exc}") from None
        if self._probe["device_count"] == 0:
            reason = self._probe["no_gpu_reason"] or "no CUDA device visible"
            raise BackendUnavailable(f"the nccl backend needs a GPU: no GPU ({reason}); on CPUs use --backend mpi")
        self.library: NcclLibrary = load_nccl()
        from pybench._native import cuda
        self._cuda = cuda()
        self._mode = launch_mode()
        self._world: Any = None  # pybench._cuda.NcclWorld once started
        self._core: Any = None  # pybench._core under an MPI launcher
        self._timeout_s = 30.0
        self._setup_timeout_s = INIT_TIMEOUT_S
        self._info: dict[str, Any] = {}
        self._in_place = os.environ.get(IN_PLACE_ENV, "") not in ("", "0")

    # -- start-up -------------------------------------------------------------
    def start(self) -> dict[str, Any]:
        ndev = self._probe["device_count"]
        host = os.environ.get("PYBENCH_HOSTNAME") or socket.gethostname()
        if self._mode == "single":
            devices = requested_gpus(ndev)
            self._world = self._cuda.NcclWorld(devices, self._timeout_s)
            self._info = {"rank": 0, "world_size": len(devices), "local_rank": 0, "local_size": 1, "host": host,
                          "hosts": [host] * len(devices)}
        elif self._mode == "mpi":
            self._info = self._start_mpi(ndev)
        else:
            self._info = self._start_torchrun(ndev, host)
        atexit.register(self.finish)
        return dict(self._info)

    def set_setup_timeout(self, timeout_s: float) -> None:
        """Deadline of communicator set-up from the run's ``timeout_s`` (0: none), never under 2 minutes."""
        self._setup_timeout_s = 0.0 if timeout_s <= 0 else max(timeout_s, INIT_TIMEOUT_S)

    def _device_for(self, local_rank: int, local_size: int, ndev: int) -> int:
        return device_for_rank(local_rank, local_size, ndev)

    def _start_mpi(self, ndev: int) -> dict[str, Any]:
        from pybench._native import core
        self._core = core()
        self._core.mpi_init()
        info = dict(self._core.rank_info())
        device = self._device_for(info["local_rank"], info["local_size"], ndev)
        agreed = share_id_over_mpi(self._core, info["rank"], self._cuda.nccl_unique_id)
        self._world = self._cuda.NcclWorld(info["rank"], info["world_size"], device, agreed, self._setup_timeout_s)
        self._world.timeout_s = self._timeout_s
        return info

    def _start_torchrun(self, ndev: int, host: str) -> dict[str, Any]:
        from datetime import timedelta

        from pybench.measure.backends.torch import import_torch
        _, dist = import_torch()
        rank, world = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
        local_rank = int(os.environ.get("LOCAL_RANK", "0"))
        local_size = int(os.environ.get("LOCAL_WORLD_SIZE", "1"))
        device = self._device_for(local_rank, local_size, ndev)
        # torchrun's agent hosts the store at MASTER_PORT when it says so; else rank 0 does.
        agent_store = os.environ.get("TORCHELASTIC_USE_AGENT_STORE", "").lower() == "true"
        store = dist.TCPStore(os.environ["MASTER_ADDR"], int(os.environ["MASTER_PORT"]), world,
                              is_master=rank == 0 and not agent_store,
                              timeout=timedelta(seconds=max(self._timeout_s, 60)))
        run = os.environ.get("TORCHELASTIC_RUN_ID", "standalone")
        uid, hosts = share_id_over_store(store, rank, world, run, self._cuda.nccl_unique_id, host)
        self._world = self._cuda.NcclWorld(rank, world, device, uid, self._setup_timeout_s)
        self._world.timeout_s = self._timeout_s
        return {"rank": rank, "world_size": world, "local_rank": local_rank, "local_size": local_size, "host": host,
                "hosts": hosts}

    # -- Backend protocol -----------------------------------------------------
    def watch(self, timeout_s: float, on_timeout) -> None:
        # The C++ wait loop polls NCCL's async errors and aborts the communicators
        # after timeout_s without progress; the runner then saves and stops.
        self._timeout_s = timeout_s
        if self._world is not None:
            self._world.timeout_s = timeout_s

    def agree_max(self, values: list[int]) -> list[int]:
        if self._world is None or not self._world.multi_process:
            return [int(v) for v in values]
        return [int(v) for v in self._world.max_over_ranks([int(v) for v in values])]

    def make_bench(self, cfg, size_bytes: int):
        if self._runs_in_place(cfg) and cfg.benchmark in UNCHECKED_IN_PLACE:
            raise UsageError(f"{cfg.benchmark} cannot run in place alone (--in-place, {IN_PLACE_ENV}): each rank would "
                             "send from the buffer it receives into, so no result could be checked; drop it, and the "
                             "in-place block is timed beside the checked out-of-place one, as nccl-tests does")
        return self._bench(cfg, size_bytes, self._runs_in_place(cfg))

    def make_in_place_bench(self, cfg, size_bytes: int):
        """The in-place bench of a size already measured out of place; None where there is no second block
        (the run is in place already, or the collective has no one-buffer form)."""
        if not self._measures_both(cfg):
            return None
        return self._bench(cfg, size_bytes, True)

    def _bench(self, cfg, size_bytes: int, in_place: bool):
        if cfg.is_p2p:
            raise UsageError("the nccl backend has no OSU-style p2p tests; use `pybench p2p --matrix` for GPU pairs, "
                             "or --backend mpi")
        timing = cfg.timing
        if timing == "batched" and os.environ.get(TIMING_ENV, "") == "graph":
            timing = "graph"
        return self._cuda.NcclBench(self._world, cfg.benchmark, cfg.dtype, cfg.op, size_bytes, cfg.root, in_place,
                                    timing)

    def _runs_in_place(self, cfg) -> bool:
        return bool(getattr(cfg, "in_place", self._in_place))

    def _measures_both(self, cfg) -> bool:
        return not self._runs_in_place(cfg) and cfg.benchmark in IN_PLACE_FORMS

    def _buffer_modes(self, cfg) -> str:
        if self._runs_in_place(cfg):
            return "in place"
        if not self._measures_both(cfg):
            return "out of place"
        unchecked = " (not checked: it sends from the buffer it receives into, as nccl-tests')"
        return "out of place, then in place" + (unchecked if cfg.benchmark in UNCHECKED_IN_PLACE else "")

    def describe_buffers(self, cfg) -> str:
        # The runner stores this string in every result: it carries the NCCL actually used.
        algo = os.environ.get("NCCL_ALGO", "default")
        proto = os.environ.get("NCCL_PROTO", "default")
        text = (f"device memory (cudaMalloc, 256-byte aligned), {self._buffer_modes(cfg)}, "
                f"{ROTATION_TEXT}; {self.library}; NCCL_ALGO={algo} NCCL_PROTO={proto}")
        note = self.measured_what(cfg)
        return f"{text}; {note}" if note else text

    def measured_what(self, cfg) -> str | None:
        """At world 1, what the run really measured (a copy, not a collective); None otherwise."""
        if self._info.get("world_size") != 1:
            return None
        note = world_one_note(cfg.benchmark, self._runs_in_place(cfg))
        if note and self._measures_both(cfg):
            note += "; the in-place block moves no data at all"
        return note

    def library_version(self) -> str:
        return f"NCCL {self.library.version}"

    def rank_devices(self) -> list[tuple[int, int]]:
        """(rank, GPU index) of each rank this process drives: every rank stand-alone, its own under a launcher."""
        devices = list(self._world.devices) if self._world is not None else []
        first = 0 if self._mode == "single" else int(self._info.get("rank", 0))
        return [(first + k, d) for k, d in enumerate(devices)]

    def device_name(self, index: int) -> str | None:
        """This host's GPU ``index`` as the CUDA probe names it (e.g. "NVIDIA H100 80GB HBM3")."""
        return next((str(d["name"]) for d in self._probe["devices"] if d.get("index") == index and d.get("name")),
                    None)

    def device_address(self, index: int) -> str | None:
        """This host's GPU ``index``'s PCI address as nccl-tests prints it ("0000:1b:00")."""
        return next((str(d["pci_address"]) for d in self._probe["devices"]
                     if d.get("index") == index and d.get("pci_address")), None)

    def run_metadata(self) -> dict[str, Any]:
        """What every NCCL result should record: NCCL, devices, driver, runtime, links, NCCL settings."""
        devices: list[int] = list(self._world.devices) if self._world is not None else []
        by_index = {d["index"]: d for d in self._probe["devices"]}
        links = self._cuda.link_report(len(devices) if self._mode == "single" else 0)
        return {
            "nccl": self.library.to_dict(),
            "launch_mode": self._mode,
            "hosts": sorted(set(self._info.get("hosts", []))),
            "gpus": [{"index": i, "name": by_index[i]["name"], "total_memory_bytes": by_index[i]["total_memory_bytes"],
                      "compute_capability": by_index[i]["compute_capability"]} for i in devices if i in by_index],
            "driver_version": links["driver_version"] or _format_driver(self._probe["driver_version"]),
            "cuda_runtime_version": _format_driver(self._probe["runtime_version"]),
            "links": [{"a": a, "b": b, "link": link} for a, b, link in links["pairs"]],
            "links_note": links["reason"],
            "nccl_env": {k: v for k, v in sorted(os.environ.items()) if k.startswith("NCCL_")},
            "in_place": self._in_place,
            "buffer_rotation": ROTATION_TEXT,
            "timing_definitions": TIMING_DEFINITIONS,
            "world_size": self._info.get("world_size"),
        }

    def abort(self, code: int) -> None:
        if self._world is not None:
            self._world.abort()
        if self._core is not None:
            self._core.mpi_abort(code)
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(code)

    def finish(self) -> None:
        self._world = None  # destroys the communicators (ncclCommDestroy) once the benches are gone
        if self._core is not None:
            self._core.mpi_finalize()
            self._core = None


__all__ = ["NcclBackend", "launch_mode", "no_gpu_reason", "requested_gpus", "INSTALL_HINT"]
