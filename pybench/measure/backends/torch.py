"""The torch backend: collectives through torch.distributed, timed from Python.

It measures what a training loop sees, framework overhead included (DESIGN.md:
the one deliberate exception to "no Python inside a timed region"). Process
group: gloo on CPU, nccl when CUDA is available (``TorchOptions.process_group``
chooses). Same harness semantics as the native backends
(:mod:`pybench.measure.backends.torch_bench`):

- warmup(n): n untimed operations, then a barrier.
- check(iters): the native check pattern, every element compared exactly, the
  count of wrong elements summed over ranks.
- measure(n, k): per sample a barrier, then k operations back to back timed with
  ``time.perf_counter`` (CUDA events on GPU); per-op time = batch time / k. The
  samples and the wall time are max-reduced over ranks with a torch all_reduce
  (MAX), so every rank holds identical samples (the stop rule relies on it).

All-reduce uses ``all_reduce``, all-gather ``all_gather_single``
(``all_gather_into_tensor`` before torch 2.13), reduce-scatter
``reduce_scatter_single`` (``reduce_scatter_tensor``), broadcast ``broadcast``,
all-to-all ``all_to_all_single`` (gloo in torch 2.13 has all of them on CPU, for
every pybench dtype and op), send/recv an isend/irecv ring. As nccl-tests, every
size is measured out of place (the table's first block: separate input and output
tensors; all-reduce, which torch.distributed offers in place only, reduces the output
tensor, the input copied into it before each checked operation, not in the timed ones)
and then in place (the second block: all-reduce on one tensor, all-gather's input and
reduce-scatter's output the rank's own block of the other tensor, broadcast from the
root's output tensor; all-to-all and send/recv from the tensor they receive into,
timed and not checked, as nccl-tests: :mod:`pybench.measure.backends.torch_bench`).

How ranks start (no home-made rendezvous):
- under torchrun (RANK, WORLD_SIZE, MASTER_ADDR, MASTER_PORT set): ``env://``;
- under pybench's own stand-alone launch or a user's mpirun: MPI (pybench's
  core) carries the rendezvous: rank 0 opens a TCPStore on a free port, the port
  travels in an MPI all-reduce, every rank joins the store at rank 0's host
  (``TorchOptions.master_addr`` overrides rank 0's address).
``TorchOptions.gloo_ifname`` (or gloo's own ``GLOO_SOCKET_IFNAME``) picks gloo's
network interface; with every rank on one host and none given, gloo uses ``lo``.
Options come as a :class:`~pybench.measure.backends.torch_options.TorchOptions`;
without one, from the variables a launcher set (``TorchOptions.from_environ``).
"""

from __future__ import annotations

import atexit
import gc
import os
import sys
from typing import Any

from pybench.errors import BackendUnavailable, UsageError
from pybench.measure.backends.torch_bench import UNCHECKED_IN_PLACE, TorchCollectiveBench, pattern_period
from pybench.measure.backends.torch_options import TorchOptions, hostname, started_by_torchrun
from pybench.measure.backends.torch_watchdog import TorchWatchdog

__all__ = ["INSTALL_HINT", "TorchBackend", "TorchCollectiveBench", "TorchOptions", "check_config", "hostname",
           "import_torch", "pattern_period", "process_group_backend", "started_by_torchrun"]

INSTALL_HINT = "`pip install torch` (the CPU build brings gloo; a CUDA build brings nccl)"
_DTYPES = ("float32", "float64", "float16", "bfloat16", "int32")


def import_torch():
    """(torch, torch.distributed), or a one-line BackendUnavailable saying how to get them."""
    try:
        import torch
        import torch.distributed as dist
    except ImportError as exc:
        raise BackendUnavailable(f"the torch backend needs PyTorch, which cannot be imported ({exc}); "
                                 f"install it with {INSTALL_HINT}") from None
    if not dist.is_available():
        raise BackendUnavailable(f"this PyTorch ({torch.__version__}) was built without torch.distributed; "
                                 f"install a standard build with {INSTALL_HINT}")
    return torch, dist


def process_group_backend(torch=None, options: TorchOptions | None = None) -> str:
    """gloo or nccl: what this process would use (``options.process_group`` decides when set)."""
    options = TorchOptions.from_environ() if options is None else options
    if options.process_group:
        return options.process_group
    if torch is None:
        torch, _ = import_torch()
    return "nccl" if torch.cuda.is_available() else "gloo"


def check_config(cfg) -> None:
    """Raise a one-line error for a benchmark this backend cannot run (call before ranks start)."""
    if cfg.is_p2p:
        raise UsageError(f"the torch backend runs collectives only, not benchmark {cfg.benchmark!r}; for "
                         "point-to-point use the mpi backend (`p2p --backend mpi`), or the sendrecv "
                         "collective (an isend/irecv ring)")
    if cfg.dtype not in _DTYPES:
        raise UsageError(f"the torch backend does not know dtype {cfg.dtype!r}; known: {', '.join(_DTYPES)}")


class TorchBackend:
    """torch.distributed as a pybench backend (see the module docstring).

    Parameters
    ----------
    options : TorchOptions, optional
        Process group, interface, rendezvous address, host name and test hooks; default:
        what the launcher set in the environment (``TorchOptions.from_environ()``).
    """

    name = "torch"

    def __init__(self, options: TorchOptions | None = None) -> None:
        self.options = TorchOptions.from_environ() if options is None else options
        self.torch, self.dist = import_torch()
        self.pg_backend = process_group_backend(self.torch, self.options)
        self.device: Any = None
        self.info: dict[str, Any] = {}
        self._mpi: Any = None  # pybench's core when MPI carried the rendezvous
        self.ctrl_group: Any = None  # a gloo group for control traffic (agreement, sample reduction)
        self._finished = False
        self.watchdog = TorchWatchdog(lambda: self.info, self.abort)

    # -- start -------------------------------------------------------------------------
    def start(self) -> dict[str, Any]:
        """Join the process group (torchrun's env:// or an MPI-carried store); return the rank facts."""
        dist = self.dist
        if started_by_torchrun():
            rank, world, local_rank = self._torchrun_group()
        else:
            rank, world, local_rank = self._mpi_group()
        atexit.register(self.finish)
        self.ctrl_group = dist.new_group(backend="gloo") if self.pg_backend != "gloo" else None
        hosts: list = [None] * world
        dist.all_gather_object(hosts, self.options.host(), group=self.ctrl_group)
        me = hosts[rank]
        self.info = {"rank": rank, "world_size": world, "local_rank": local_rank,
                     "local_size": sum(1 for h in hosts if h == me), "host": me, "hosts": list(hosts)}
        return dict(self.info)

    def _torchrun_group(self) -> tuple[int, int, int]:
        env = os.environ  # torchrun's own contract
        rank, world = int(env["RANK"]), int(env["WORLD_SIZE"])
        local_rank = int(env.get("LOCAL_RANK", "0"))
        one_host = env.get("LOCAL_WORLD_SIZE") == env["WORLD_SIZE"] and env["MASTER_ADDR"] in ("localhost",
                                                                                              "127.0.0.1")
        self._set_gloo_ifname(one_host)
        self._set_device(local_rank)
        self.dist.init_process_group(self.pg_backend, init_method="env://", rank=rank, world_size=world,
                                     **self._device_kw())
        return rank, world, local_rank

    def _mpi_group(self) -> tuple[int, int, int]:
        store, rank, world, local_rank, hosts = self._mpi_rendezvous()
        self._set_gloo_ifname(len(set(hosts)) == 1 and not self.options.master_addr)
        self._set_device(local_rank)
        self.dist.init_process_group(self.pg_backend, store=store, rank=rank, world_size=world,
                                     **self._device_kw())
        return rank, world, local_rank

    def _set_gloo_ifname(self, one_host: bool) -> None:
        # gloo reads its interface from its own variable only, so the choice is handed over there.
        ifname = self.options.gloo_ifname or os.environ.get("GLOO_SOCKET_IFNAME")
        if not ifname and one_host:
            ifname = "lo"  # one host: loopback is the link being measured
        if ifname:
            os.environ["GLOO_SOCKET_IFNAME"] = ifname

    def _mpi_rendezvous(self):
        from pybench import _native
        c = _native.core()
        c.mpi_init()
        self._mpi = c
        info = dict(c.rank_info())
        rank, world = int(info["rank"]), int(info["world_size"])
        hosts = list(info["hosts"])
        master = self.options.master_addr or ("127.0.0.1" if len(set(hosts)) == 1 else hosts[0])
        store = None
        port = 0
        if rank == 0:
            store = self._open_store(master, world)
            port = int(store.port)
        port = int(c.allreduce_max_ints([port])[0])
        if rank != 0:
            store = self.dist.TCPStore(master, port, world, is_master=False)
        # Open MPI's own variable (the launcher's contract) when it set one
        local_rank = int(os.environ.get("OMPI_COMM_WORLD_LOCAL_RANK") or info.get("local_rank", 0))
        return store, rank, world, local_rank, hosts

    def _open_store(self, master: str, world: int):
        """Rank 0's TCPStore on a free port (the OS picks it: no race between probing and binding).

        On one host the store listens on loopback only: torch binds every address otherwise, and
        the store is unauthenticated. The socket is made here and handed over (master_listen_fd).
        """
        if master in ("127.0.0.1", "localhost"):
            import socket
            listener = socket.create_server(("127.0.0.1", 0))
            port = listener.getsockname()[1]
            store = self.dist.TCPStore(master, port, world, is_master=True, wait_for_workers=False,
                                       master_listen_fd=listener.fileno())
            listener.detach()  # the store owns the descriptor now and closes it with itself
            return store
        return self.dist.TCPStore(master, 0, world, is_master=True, wait_for_workers=False)

    def _set_device(self, local_rank: int) -> None:
        if self.pg_backend == "nccl":
            n = self.torch.cuda.device_count()
            self.device = self.torch.device("cuda", local_rank % max(n, 1))
            self.torch.cuda.set_device(self.device)
        else:
            self.device = self.torch.device("cpu")

    def _device_kw(self) -> dict:
        return {"device_id": self.device} if self.pg_backend == "nccl" else {}

    def watch(self, timeout_s: float, on_timeout) -> None:
        """Abort this rank when one operation makes no progress for ``timeout_s`` (<= 0: off);
        ``on_timeout(message)`` runs first (rank 0 saves what was measured)."""
        self.watchdog.configure(timeout_s, on_timeout)

    # -- agreement -------------------------------------------------------------------
    def agree_max(self, values: list[int]) -> list[int]:
        if not values:
            return []
        t = self.torch.tensor([int(v) for v in values], dtype=self.torch.int64, device=self.ctrl_device())
        self.dist.all_reduce(t, op=self.dist.ReduceOp.MAX, group=self.ctrl_group)
        return [int(v) for v in t.tolist()]

    def ctrl_device(self):
        return self.torch.device("cpu") if self.ctrl_group is not None or self.device is None else self.device

    def barrier(self) -> None:
        with self.watchdog.armed("barrier"):
            if self.pg_backend == "nccl":
                self.dist.barrier(device_ids=[self.device.index])
            else:
                self.dist.barrier()

    # -- benches ---------------------------------------------------------------------
    def make_bench(self, cfg, size_bytes: int):
        """The out-of-place bench of one size (all-reduce: the input copied into the output, then reduced)."""
        check_config(cfg)
        return TorchCollectiveBench(self, cfg.benchmark, cfg.dtype, cfg.op, size_bytes, cfg.root)

    def make_in_place_bench(self, cfg, size_bytes: int):
        """The same collective on one tensor, measured after the out-of-place one as nccl-tests measures
        both (all-to-all and send/recv not checked: :data:`UNCHECKED_IN_PLACE`)."""
        check_config(cfg)
        return TorchCollectiveBench(self, cfg.benchmark, cfg.dtype, cfg.op, size_bytes, cfg.root, in_place=True)

    def describe_buffers(self, cfg) -> str:
        where = "CUDA device memory" if self.pg_backend == "nccl" else "host memory"
        clock = "CUDA events" if self.pg_backend == "nccl" else "time.perf_counter"
        modes = "out of place, then in place"
        if cfg.benchmark == "allreduce":
            modes += (" (out of place: all_reduce on the output tensor, the input copied into it before each "
                      "checked operation only)")
        elif cfg.benchmark in UNCHECKED_IN_PLACE:
            modes += " (in place not checked: it sends from the tensor it receives into, as nccl-tests')"
        return (f"torch.empty tensors in {where} (torch's allocator), every element written before timing; "
                f"{modes}; {self.library_version()}; clock {clock}")

    def library_version(self) -> str:
        v = f"torch {self.torch.__version__}, process group {self.pg_backend}"
        if self.pg_backend == "nccl":
            try:
                v += " " + ".".join(str(x) for x in self.torch.cuda.nccl.version())
            except Exception:
                pass
        return v

    def rank_devices(self) -> list[tuple[int, int]]:
        """(rank, GPU index) of this process; -1 when it runs on the CPU (gloo)."""
        cuda = self.device is not None and self.device.type == "cuda"
        return [(int(self.info["rank"]), int(self.device.index or 0) if cuda else -1)]

    def device_name(self, index: int) -> str | None:
        """This host's CUDA device ``index`` as torch names it (the Rank lines); None on the CPU (gloo)."""
        cuda = self.device is not None and self.device.type == "cuda"
        return str(self.torch.cuda.get_device_name(index)) if cuda else None

    def device_address(self, index: int) -> str | None:
        """A CUDA device's PCI address as nccl-tests prints it, where this torch reports it; None on the CPU."""
        if self.device is None or self.device.type != "cuda":
            return None
        props = self.torch.cuda.get_device_properties(index)
        domain, bus, device = (getattr(props, f"pci_{part}_id", None) for part in ("domain", "bus", "device"))
        if not all(isinstance(x, int) for x in (domain, bus, device)):
            return None
        return f"{domain:04x}:{bus:02x}:{device:02x}"

    def run_metadata(self) -> dict[str, Any]:
        """What every torch result records (the runner puts it under environment.backend)."""
        return {"torch": self.torch.__version__, "process_group": self.pg_backend,
                "rendezvous": "mpi (TCPStore port over MPI)" if self._mpi is not None else "env:// (torchrun)",
                "gloo_socket_ifname": os.environ.get("GLOO_SOCKET_IFNAME"),
                "device": str(self.device), "torch_threads": self.torch.get_num_threads()}

    # -- stop ------------------------------------------------------------------------
    def abort(self, code: int) -> None:
        sys.stdout.flush()
        sys.stderr.flush()
        if self._mpi is not None:
            self._mpi.mpi_abort(code)  # kills every rank of the MPI job
        # torchrun (or a lone process): the other ranks may sit inside a collective, so a
        # group teardown could hang; exit now and let the launcher stop the rest.
        os._exit(code)

    def finish(self) -> None:
        if self._finished:
            return
        self._finished = True
        try:
            if self.dist.is_initialized():
                self.dist.destroy_process_group()
        except Exception:
            pass
        # Collect now, while Python still runs: after torch.profiler, cycles keep the gloo process
        # group alive until interpreter shutdown, where its worker thread, needing the GIL, is made
        # to exit through C++ frames and the rank aborts ("terminate called without an active
        # exception"; 6 of 24 torchrun runs of a profiled all-reduce here, 0 of 24 with this).
        gc.collect()
        if self._mpi is not None:
            self._mpi.mpi_finalize()
