"""Several "hosts" on one machine: network namespaces joined by shaped veth links.

A known physical limit to measure against (DESIGN.md, "What testing means
here"): N network namespaces, each one a host with one interface (``veth0``)
and an address 10.231.0.(i+1)/24, joined by a veth pair (N = 2) or through a
bridge in a separate switch namespace (N > 2). Every link is shaped in both
directions with a token bucket::

    tc qdisc replace dev veth0 root tbf rate RATE burst BURST latency LATENCY

Usage (root, or CAP_NET_ADMIN + CAP_SYS_ADMIN; ``ip`` and ``tc`` from iproute2)::

    from pybench.measure.netns import NetnsLab
    with NetnsLab(2, rate="1gbit") as lab:
        print(tcp_rate(lab, 0, 1) * 8 / 1e6, "Mbit/s")   # one TCP stream, a link check
        procs = lab.run_ranks(["-m", "pybench", "allreduce", "--backend", "torch", "--sizes", "64M"])
        lab.set_rate("200mbit")

Each rank runs in its own namespace as one process of a torch env:// job
(MASTER_ADDR = the first namespace's address, GLOO_SOCKET_IFNAME = veth0,
PYBENCH_HOSTNAME = the namespace, so pybench records the link as inter-node).
That is the launcher-provided rendezvous of torchrun, with this harness as
the launcher. MPI across namespaces is not provided: Open MPI starts remote
ranks through ssh/prted per host, which these namespaces do not run.

Burst: the shaper needs a bucket of 512 KiB or so at these rates; a 64 KiB
bucket reaches the same rate but kept the kernel busy for 1.7 of 2 cores in a
probe (a timer per small burst), which steals the CPU the ranks need.

Everything the harness creates carries a unique name prefix (``pbn<pid><rand>``)
and is removed on exit from the ``with`` block, on an exception, Ctrl-C or
SIGTERM, and at interpreter exit (atexit): processes it started are killed,
then the namespaces are deleted (which deletes their interfaces and qdiscs).
SIGKILL of the owner cannot run any of that, so a guard process (its own
session, reading a pipe from the owner) removes the namespaces and kills what
runs in them when the pipe closes without a goodbye. Only addresses inside
namespaces this harness made are ever used.
"""

from __future__ import annotations

import atexit
import os
import secrets
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Iterable, Sequence

from pybench.errors import BackendUnavailable, UsageError

SUBNET = "10.231.0"
IFNAME = "veth0"
DEFAULT_BURST = "512kb"
DEFAULT_LATENCY = "50ms"
DEFAULT_PORT = 29500
NAME_PREFIX = "pbn"

_LIVE: dict[int, NetnsLab] = {}


def _ip() -> str:
    return shutil.which("ip") or "/usr/sbin/ip"


def _tc() -> str:
    return shutil.which("tc") or "/usr/sbin/tc"


def _run(argv: Sequence[str], check: bool = True, timeout: float = 30) -> subprocess.CompletedProcess:
    proc = subprocess.run(list(argv), capture_output=True, text=True, timeout=timeout, stdin=subprocess.DEVNULL)
    if check and proc.returncode != 0:
        raise BackendUnavailable(f"`{' '.join(argv)}` failed: {(proc.stderr or proc.stdout).strip()}")
    return proc


def netns_available() -> tuple[bool, str]:
    """(True, "") when this process can create a namespace with a veth pair and a tbf qdisc,
    else (False, why); tries it for real and removes what it made."""
    if not hasattr(os, "geteuid") or os.geteuid() != 0:
        return False, "network namespaces need root (or CAP_NET_ADMIN and CAP_SYS_ADMIN)"
    if not os.path.exists(_ip()) or not os.path.exists(_tc()):
        return False, "`ip` and `tc` (iproute2) are not installed"
    try:
        with NetnsLab(2, rate="1gbit"):
            pass
    except (BackendUnavailable, OSError, subprocess.SubprocessError) as exc:
        return False, f"cannot create network namespaces here: {str(exc).splitlines()[0]}"
    return True, ""


def leftovers(prefix: str = NAME_PREFIX) -> list[str]:
    """Namespaces whose name starts with ``prefix`` (what a crashed harness could leave)."""
    out = _run([_ip(), "netns", "list"], check=False).stdout
    return [line.split()[0] for line in out.splitlines() if line.split() and line.split()[0].startswith(prefix)]


def remove_namespaces(prefix: str) -> None:
    """Kill every process inside, then delete, each namespace named ``prefix``* (and so its links and qdiscs)."""
    for ns in leftovers(prefix + "-"):  # names are PREFIX-h<i> and PREFIX-sw
        for pid in _run([_ip(), "netns", "pids", ns], check=False).stdout.split():
            try:
                os.kill(int(pid), signal.SIGKILL)
            except (OSError, ValueError):
                pass
        for _ in range(3):
            if _run([_ip(), "netns", "delete", ns], check=False).returncode == 0:
                break
            time.sleep(0.2)


def _start_guard(prefix: str) -> subprocess.Popen | None:
    code = "import sys; from pybench.measure.netns import guard_namespaces; guard_namespaces(sys.argv[1])"
    try:
        return subprocess.Popen([sys.executable, "-c", code, prefix], stdin=subprocess.PIPE,
                                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
    except OSError:
        return None  # the with-block, atexit and SIGTERM still clean up


def _stop_guard(guard: subprocess.Popen | None) -> None:
    if guard is None:
        return
    try:
        guard.stdin.write(b"done\n")  # type: ignore[union-attr]
        guard.stdin.close()  # type: ignore[union-attr]
        guard.wait(timeout=10)
    except (OSError, subprocess.TimeoutExpired):
        guard.kill()


def guard_namespaces(prefix: str) -> None:
    """Body of the guard process: on the owner's goodbye do nothing; when its pipe closes
    without one (the owner was SIGKILLed), remove its namespaces."""
    for sig in (signal.SIGINT, signal.SIGHUP, signal.SIGTERM):
        signal.signal(sig, signal.SIG_IGN)
    if "done" not in sys.stdin.read():
        remove_namespaces(prefix)


class NetnsLab:
    """N namespaces ("hosts") joined by tbf-shaped veth links; a context manager.

    Parameters
    ----------
    n : int
        Hosts (2 or more; 2 is a veth pair, more share a bridge).
    rate : str
        tc rate of every link, each direction (``1gbit``, ``200mbit``).
    burst, latency : str
        tbf bucket and queue limit (defaults 512kb, 50ms).
    prefix : str, optional
        Name prefix; default unique per harness (``pbn<pid hex><random>``).
    """

    def __init__(self, n: int = 2, rate: str | None = "1gbit", burst: str = DEFAULT_BURST,
                 latency: str = DEFAULT_LATENCY, prefix: str | None = None):
        if n < 2:
            raise UsageError(f"a network of namespaces needs at least 2 hosts, got {n}")
        if n > 250:
            raise UsageError(f"at most 250 hosts in 10.231.0.0/24, got {n}")
        self.n, self.rate, self.burst, self.latency = n, rate, burst, latency
        self.prefix = prefix or f"{NAME_PREFIX}{os.getpid():x}{secrets.token_hex(2)}"
        self.hosts = [f"{self.prefix}-h{i}" for i in range(n)]
        self.switch = f"{self.prefix}-sw" if n > 2 else None
        self._made: list[str] = []
        self._procs: list[subprocess.Popen] = []
        self._open = False
        self._guard: subprocess.Popen | None = None

    # -- life cycle ------------------------------------------------------------------
    def __enter__(self) -> NetnsLab:
        self.create()
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def create(self) -> None:
        _LIVE[id(self)] = self
        _install_exit_hooks()
        self._open = True
        self._guard = _start_guard(self.prefix)
        try:
            for ns in self.hosts + ([self.switch] if self.switch else []):
                _run([_ip(), "netns", "add", ns])
                self._made.append(ns)
                _run([_ip(), "-n", ns, "link", "set", "lo", "up"])
            if self.switch is None:
                a, b = self.hosts
                _run([_ip(), "-n", a, "link", "add", IFNAME, "type", "veth", "peer", "name", IFNAME, "netns", b])
            else:
                sw = self.switch
                _run([_ip(), "-n", sw, "link", "add", "br0", "type", "bridge"])
                _run([_ip(), "-n", sw, "link", "set", "br0", "up"])
                for i, ns in enumerate(self.hosts):
                    port = f"p{i}"
                    _run([_ip(), "-n", sw, "link", "add", port, "type", "veth", "peer", "name", IFNAME, "netns", ns])
                    _run([_ip(), "-n", sw, "link", "set", port, "master", "br0"])
                    _run([_ip(), "-n", sw, "link", "set", port, "up"])
            for i, ns in enumerate(self.hosts):
                _run([_ip(), "-n", ns, "addr", "add", f"{self.address(i)}/24", "dev", IFNAME])
                _run([_ip(), "-n", ns, "link", "set", IFNAME, "up"])
            if self.rate:
                self.set_rate(self.rate)
        except BaseException:
            self.close()
            raise

    def close(self) -> None:
        """Kill what this harness started, delete its namespaces (and so its links). Idempotent."""
        for p in self._procs:
            if p.poll() is None:
                try:
                    p.kill()
                except OSError:
                    pass
            try:
                p.wait(timeout=10)
            except subprocess.TimeoutExpired:
                pass
            for f in (p.stdin, p.stdout, p.stderr):
                if f is not None:
                    try:
                        f.close()
                    except OSError:
                        pass
        self._procs.clear()
        if self._made:  # anything still inside was started through this harness: end it by pid
            remove_namespaces(self.prefix)
        self._made.clear()
        self._open = False
        _LIVE.pop(id(self), None)
        _stop_guard(self._guard)
        self._guard = None

    # -- facts -----------------------------------------------------------------------
    def address(self, i: int) -> str:
        return f"{SUBNET}.{i + 1}"

    @property
    def ifname(self) -> str:
        return IFNAME

    def _links(self) -> list[tuple[str, str]]:
        """(namespace, device) of every link end: shaping both ends shapes both directions."""
        ends = [(ns, IFNAME) for ns in self.hosts]
        if self.switch:
            ends += [(self.switch, f"p{i}") for i in range(self.n)]
        return ends

    def set_rate(self, rate: str, burst: str | None = None, latency: str | None = None) -> None:
        """Shape (or reshape) every link to ``rate`` with a tbf root qdisc."""
        self.rate = rate
        self.burst = burst or self.burst
        self.latency = latency or self.latency
        for ns, dev in self._links():
            _run([_ip(), "netns", "exec", ns, _tc(), "qdisc", "replace", "dev", dev, "root", "tbf",
                  "rate", rate, "burst", self.burst, "latency", self.latency])

    def unshape(self) -> None:
        for ns, dev in self._links():
            _run([_ip(), "netns", "exec", ns, _tc(), "qdisc", "del", "dev", dev, "root"], check=False)
        self.rate = None

    def qdisc(self, i: int = 0) -> str:
        """``tc qdisc show`` of host i's interface."""
        return _run([_ip(), "netns", "exec", self.hosts[i], _tc(), "qdisc", "show", "dev", IFNAME]).stdout.strip()

    # -- running things inside ---------------------------------------------------------
    def command(self, i: int, argv: Sequence[str]) -> list[str]:
        return [_ip(), "netns", "exec", self.hosts[i], *argv]

    def exec(self, i: int, argv: Sequence[str], timeout: float = 60) -> subprocess.CompletedProcess:
        """Run ``argv`` (a list; no shell) inside host i and wait for it."""
        return subprocess.run(self.command(i, argv), capture_output=True, text=True, timeout=timeout,
                              stdin=subprocess.DEVNULL)

    def popen(self, i: int, argv: Sequence[str], **kw) -> subprocess.Popen:
        """Start ``argv`` inside host i; the harness kills it on close if it still runs."""
        kw.setdefault("stdin", subprocess.DEVNULL)
        p = subprocess.Popen(self.command(i, argv), **kw)
        self._procs.append(p)
        return p

    def rank_env(self, rank: int, port: int = DEFAULT_PORT, base: dict | None = None) -> dict[str, str]:
        """Environment of rank ``rank`` of a torch env:// job with one rank per host."""
        env = dict(os.environ if base is None else base)
        for k in ("PYBENCH_RANK_PROCESS", "PYBENCH_STATUS_FILE", "OMPI_COMM_WORLD_SIZE", "OMPI_COMM_WORLD_RANK",
                  "PMIX_RANK", "TORCHELASTIC_RUN_ID"):
            env.pop(k, None)
        env.update({"RANK": str(rank), "WORLD_SIZE": str(self.n), "LOCAL_RANK": "0", "LOCAL_WORLD_SIZE": "1",
                    "MASTER_ADDR": self.address(0), "MASTER_PORT": str(port), "GLOO_SOCKET_IFNAME": IFNAME,
                    "PYBENCH_GLOO_IFNAME": IFNAME, "PYBENCH_HOSTNAME": self.hosts[rank],
                    "PYBENCH_TORCH_BACKEND": "gloo"})
        return env

    def run_ranks(self, python_args: Sequence[str], timeout: float = 300, port: int = DEFAULT_PORT,
                  env: dict | None = None, cwd: str | None = None, python: str | None = None
                  ) -> list[subprocess.CompletedProcess]:
        """Run ``python PYTHON_ARGS`` once per host as ranks 0..n-1 of a torch env:// job.

        Returns one CompletedProcess per rank (stdout, stderr as text). On a timeout
        every rank is killed and the ones that had not finished get return code -9.
        """
        python = python or sys.executable
        procs = []
        for r in range(self.n):
            procs.append(self.popen(r, [python, *python_args], env=self.rank_env(r, port, env), cwd=cwd,
                                    stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True))
        deadline = time.monotonic() + timeout
        results: list[subprocess.CompletedProcess] = []
        for r, p in enumerate(procs):
            try:
                out, err = p.communicate(timeout=max(0.1, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                for q in procs:
                    if q.poll() is None:
                        q.kill()
                out, err = p.communicate()
                err = (err or "") + f"\npybench.measure.netns: rank {r} killed after {timeout:g} s"
            results.append(subprocess.CompletedProcess(p.args, p.returncode, out, err))
        return results


_TCP_SINK = """
import socket, sys
srv = socket.socket(); srv.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
srv.bind((sys.argv[1], int(sys.argv[2]))); srv.listen(1); print("ready", flush=True)
c, _ = srv.accept(); n = 0
while True:
    b = c.recv(1 << 20)
    if not b: break
    n += len(b)
c.sendall(b"k"); c.close(); print(n, flush=True)
"""
_TCP_SOURCE = """
import socket, sys, time
n = int(sys.argv[3]); buf = bytes(1 << 20)
s = socket.create_connection((sys.argv[1], int(sys.argv[2])), timeout=60)
t0 = time.perf_counter(); left = n
while left > 0:
    k = min(left, len(buf)); s.sendall(buf[:k]); left -= k
s.shutdown(socket.SHUT_WR); s.recv(1)
print(time.perf_counter() - t0, flush=True)
"""


def tcp_rate(lab: NetnsLab, src: int = 0, dst: int = 1, nbytes: int = 32 << 20, port: int = 29400) -> float:
    """Bytes per second of one TCP stream from host ``src`` to host ``dst`` (a link check).

    Includes the connection's slow start and the final acknowledgement, so it
    reads a little under the shaped rate for small ``nbytes``.
    """
    sink = lab.popen(dst, [sys.executable, "-c", _TCP_SINK, lab.address(dst), str(port)],
                     stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        assert sink.stdout is not None and sink.stderr is not None  # both are pipes
        if sink.stdout.readline().strip() != "ready":
            raise BackendUnavailable(f"tcp sink in {lab.hosts[dst]} did not start: {sink.stderr.read().strip()}")
        out = lab.exec(src, [sys.executable, "-c", _TCP_SOURCE, lab.address(dst), str(port), str(nbytes)],
                       timeout=120)
        if out.returncode != 0:
            raise BackendUnavailable(f"tcp source in {lab.hosts[src]} failed: {out.stderr.strip()}")
        return nbytes / float(out.stdout.strip())
    finally:
        if sink.poll() is None:
            sink.kill()
        sink.communicate(timeout=10)  # reaps it and closes its pipes


_HOOKED = False


def _install_exit_hooks() -> None:
    """atexit, and SIGTERM turned into SystemExit (when nobody else handles it) so that
    ``finally`` blocks and atexit run and the namespaces go with the process."""
    global _HOOKED
    if _HOOKED:
        return
    _HOOKED = True
    atexit.register(_close_all)
    import threading
    if threading.current_thread() is threading.main_thread() and signal.getsignal(signal.SIGTERM) == signal.SIG_DFL:
        def _on_term(signum, frame):
            raise SystemExit(128 + signum)
        signal.signal(signal.SIGTERM, _on_term)


def _close_all() -> None:
    for lab in list(_LIVE.values()):
        try:
            lab.close()
        except Exception:
            pass


def main(argv: Iterable[str] | None = None) -> int:
    """``python -m pybench.measure.netns [N] [RATE]``: create, show, one TCP stream, remove (a self-check)."""
    args = list(sys.argv[1:] if argv is None else argv)
    n = int(args[0]) if args else 2
    rate = args[1] if len(args) > 1 else "1gbit"
    ok, why = netns_available()
    if not ok:
        print(f"pybench.measure.netns: {why}", file=sys.stderr)
        return 2
    with NetnsLab(n, rate=rate) as lab:
        print(f"{n} hosts {', '.join(lab.hosts)}; {lab.qdisc(0)}")
        rate_bps = tcp_rate(lab, 0, n - 1)
        print(f"tcp {lab.hosts[0]} -> {lab.hosts[n - 1]}: {rate_bps / 1e9:.3f} GB/s ({rate_bps * 8 / 1e6:.0f} Mbit/s)")
    print(f"removed; leftovers: {leftovers(lab.prefix) or 'none'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
