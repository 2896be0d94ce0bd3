"""The torch backend's options, typed, and the one place that reads them from a launcher's environment.

The backend takes a :class:`TorchOptions`. Ranks started by another program cannot be handed
a Python object, so :meth:`TorchOptions.from_environ` reads the variables those launchers set
(``pybench.measure.netns`` sets the host name, interface and process group of each namespace's
rank; the fault tests set the wrong-value hook, which the native harnesses read too). The
launcher's own rendezvous variables (RANK, WORLD_SIZE, MASTER_ADDR, MASTER_PORT, LOCAL_RANK)
stay with the launcher: :func:`started_by_torchrun` and the backend's start read them directly.
"""

from __future__ import annotations

import os
import re
import socket
from collections.abc import Mapping
from dataclasses import dataclass

from pybench.errors import UsageError

__all__ = ["PROCESS_GROUPS", "TorchOptions", "hostname", "started_by_torchrun"]

PROCESS_GROUPS = ("gloo", "nccl")
_TORCHRUN_VARS = ("RANK", "WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT")
# Variable a launcher sets -> the option it carries.
ENVIRON_NAMES = {
    "process_group": "PYBENCH_TORCH_BACKEND",
    "gloo_ifname": "PYBENCH_GLOO_IFNAME",
    "master_addr": "PYBENCH_MASTER_ADDR",
    "hostname": "PYBENCH_HOSTNAME",
    "inject_wrong_rank": "PYBENCH_INJECT_WRONG",
}


@dataclass(frozen=True)
class TorchOptions:
    """How the torch backend starts and checks; every field optional (None: decide from the machine).

    Attributes
    ----------
    process_group : {"gloo", "nccl"} or None
        The torch.distributed backend; None: nccl when CUDA is available, else gloo.
    gloo_ifname : str or None
        gloo's network interface; None: gloo's own ``GLOO_SOCKET_IFNAME`` if set, else ``lo``
        when every rank is on one host (loopback is then the link being measured).
    master_addr : str or None
        Rank 0's address for a rendezvous that MPI carries; None: 127.0.0.1 on one host,
        else rank 0's host name.
    hostname : str or None
        The host name this rank reports (network namespaces share the machine's name
        but are separate hosts); None: the machine's.
    inject_wrong_rank : int or None
        Test hook: this rank flips one output bit per check iteration.
    """

    process_group: str | None = None
    gloo_ifname: str | None = None
    master_addr: str | None = None
    hostname: str | None = None
    inject_wrong_rank: int | None = None

    def __post_init__(self) -> None:
        if self.process_group is not None:
            pg = self.process_group.strip().lower()
            if pg not in PROCESS_GROUPS:
                raise UsageError(f"process_group {self.process_group!r} is not one of {', '.join(PROCESS_GROUPS)}")
            object.__setattr__(self, "process_group", pg)

    @classmethod
    def from_environ(cls, environ: Mapping[str, str] | None = None) -> TorchOptions:
        """The options a launcher set in ``environ`` (default ``os.environ``); unset or empty: None."""
        env = os.environ if environ is None else environ

        def get(field: str) -> str | None:
            value = env.get(ENVIRON_NAMES[field], "").strip()
            return value or None
        try:
            return cls(process_group=get("process_group"), gloo_ifname=get("gloo_ifname"),
                       master_addr=get("master_addr"), hostname=get("hostname"),
                       inject_wrong_rank=_rank_or_none(get("inject_wrong_rank")))
        except UsageError as exc:
            raise UsageError(f"{exc} (from the environment: {ENVIRON_NAMES['process_group']})") from None

    def host(self) -> str:
        """The host name this rank reports."""
        return self.hostname or socket.gethostname()


def _rank_or_none(text: str | None) -> int | None:
    # As the native harnesses: anything but a whole number means no injection.
    if text is None or not re.fullmatch(r"-?[0-9]+", text.strip()):  # ASCII only: int() refuses '²'
        return None
    return int(text)


def hostname() -> str:
    """This rank's host name as the launcher set it (``PYBENCH_HOSTNAME``), else the machine's."""
    return os.environ.get(ENVIRON_NAMES["hostname"], "").strip() or socket.gethostname()


def started_by_torchrun(environ: Mapping[str, str] | None = None) -> bool:
    """Whether torchrun's rendezvous variables are all set (the launcher's contract)."""
    env = os.environ if environ is None else environ
    return all(v in env for v in _TORCHRUN_VARS)
