"""One job of local ranks: its private folder, its processes and its guard.

Everything a job leaves on disk (the status file, the ranks' pids, Open MPI's session
folder and shared-memory segments) lives in one private folder removed on every exit path;
the launcher and ranks run in their own session, so the whole job can be ended at once;
and a guard process ends the job when the pybench parent dies without cleaning up.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Sequence
from pathlib import Path

from pybench.errors import PyBenchError
from pybench.io.files import read_json, write_json
from pybench.measure.result_journal import JOB_PREFIX

# The native watchdog's heartbeat tables (/dev/shm/pybench-hb-<pid of local rank 0>-<rank>-<attempt>).
_HEARTBEATS = Path("/dev/shm")
_TERM_GRACE_S = 2.0  # SIGTERM to SIGKILL when a job is killed


class JobFolder:
    """A private folder (mkdtemp: 0700, unpredictable name) holding the status file, the pids
    of the ranks and Open MPI's session folder and segments; removed on every exit path."""

    def __init__(self, path: str | None = None) -> None:
        self.path = Path(path) if path else Path(tempfile.mkdtemp(prefix=JOB_PREFIX))
        if path is None:
            (self.path / "ranks").mkdir(mode=0o700)

    @property
    def status(self) -> Path:
        return self.path / "status"

    def read_status(self) -> int | None:
        try:
            return int(self.status.read_text().strip())
        except (OSError, ValueError):
            return None

    def rank_pids(self) -> list[int]:
        try:
            return [int(n) for n in os.listdir(self.path / "ranks") if n.isdigit()]
        except OSError:
            return []

    @property
    def nccl_tests_claims(self) -> Path:
        """The -J files rank 0 claimed, one path per line (:func:`record_nccl_tests_claim`): the parent marks
        them when the run is cut short, since their names (``path.0`` ...) are rank 0's choice."""
        return self.path / "nccl-tests-json"

    def remove(self) -> None:
        """Delete the folder and the heartbeat tables a killed rank could not remove."""
        for pid in self.rank_pids():
            for table in _HEARTBEATS.glob(f"pybench-hb-{pid}-*"):
                _unlink(table)
        shutil.rmtree(self.path, ignore_errors=True)


def _unlink(path: str | os.PathLike) -> None:
    try:
        os.unlink(path)
    except OSError:
        pass


def create_exclusive(path: str | os.PathLike, data: bytes) -> None:
    """Create ``path`` (never an existing file, never through a link) holding ``data``."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0), 0o600)
    with os.fdopen(fd, "wb") as f:
        f.write(data)


def set_parent_death_signal(sig: int) -> None:
    """Ask Linux to send ``sig`` to this process when its parent dies (prctl PR_SET_PDEATHSIG)."""
    import ctypes
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(1, int(sig), 0, 0, 0)  # PR_SET_PDEATHSIG = 1
    except (OSError, AttributeError):
        return  # not Linux: the job guard still ends the job


_CLONE_NEWUSER = 0x10000000
_CLONE_NEWNET = 0x40000000


def loopback_only_network() -> bool:
    """Move this process into a new network namespace whose only interface is loopback, up.

    Open MPI's launcher listens on every address (no setting of PRRTE 3 binds it to loopback);
    in such a namespace nothing it opens can be reached from another machine. Root gets the
    namespace directly (CAP_SYS_ADMIN). Any other user gets it inside a new user namespace
    that maps only its own uid and gid onto themselves, so the processes keep their identity
    (Open MPI still sees a non-root user) and hold CAP_NET_ADMIN over that namespace alone,
    enough to bring loopback up. Returns False, changing nothing, where the kernel refuses
    (user namespaces disabled, seccomp). Call it single-threaded: between fork and exec.
    """
    import ctypes
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        if os.geteuid() == 0:
            if libc.unshare(_CLONE_NEWNET) != 0:
                return False
        else:
            uid, gid = os.geteuid(), os.getegid()
            if not os.path.exists("/proc/self/setgroups"):
                return False  # a kernel before 3.19 could not map us afterwards: stay as we are
            if libc.unshare(_CLONE_NEWUSER | _CLONE_NEWNET) != 0:
                return False
            # An unprivileged process may map only itself, and only after giving up setgroups.
            for name, text in (("setgroups", "deny"), ("uid_map", f"{uid} {uid} 1"), ("gid_map", f"{gid} {gid} 1")):
                with open(f"/proc/self/{name}", "w") as f:
                    f.write(text)
        _loopback_up()
    except (OSError, AttributeError):
        return False
    return True


def _loopback_up() -> None:
    import fcntl
    import socket
    import struct
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        req = struct.pack("16sH14x", b"lo", 0)
        flags = struct.unpack("16sH14x", fcntl.ioctl(s, 0x8913, req))[1]  # SIOCGIFFLAGS
        fcntl.ioctl(s, 0x8914, struct.pack("16sH14x", b"lo", flags | 0x1))  # SIOCSIFFLAGS, IFF_UP


def isolate_local() -> bool:
    """Whether a single-host job gets its own loopback-only network (Linux; PYBENCH_LOCAL_NETNS=0 opts out)."""
    return sys.platform == "linux" and os.environ.get("PYBENCH_LOCAL_NETNS", "1") != "0"


def die_with(parent: int, isolate: bool = False):
    """preexec_fn of the launcher: the parent-death signal, and the loopback-only network."""
    def preexec() -> None:  # runs in the child between fork and exec
        set_parent_death_signal(signal.SIGKILL)
        if os.getppid() != parent:  # the parent died before prctl took effect
            os.kill(os.getpid(), signal.SIGKILL)
        if isolate:
            loopback_only_network()
    return preexec


def session_members(sid: int) -> list[int]:
    """Pids of the processes in session ``sid`` (the launcher's session holds every rank)."""
    pids = []
    for d in Path("/proc").iterdir():
        if d.name.isdigit():
            try:
                fields = (d / "stat").read_text().rsplit(")", 1)[1].split()
            except (OSError, IndexError):
                continue
            if len(fields) > 3 and int(fields[3]) == sid:
                pids.append(int(d.name))
    return pids


def kill_session(sid: int, grace_s: float = _TERM_GRACE_S) -> None:
    """SIGTERM (with SIGCONT, so stopped processes act on it), then SIGKILL, every process of ``sid``."""
    for sig in (signal.SIGTERM, signal.SIGCONT):
        for pid in session_members(sid):
            _signal(pid, sig)
    deadline = time.monotonic() + grace_s
    while session_members(sid) and time.monotonic() < deadline:
        time.sleep(0.05)
    for pid in session_members(sid):
        _signal(pid, signal.SIGKILL)


def _signal(pid: int, sig: int) -> None:
    try:
        os.kill(pid, sig)
    except OSError:
        pass


def process_state(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return "?"


class Terminated(BaseException):
    """The pybench parent received SIGTERM or SIGHUP."""

    def __init__(self, signum: int) -> None:
        super().__init__(signum)
        self.signum = signum


class EndOnSignals:
    """While a job runs, SIGTERM and SIGHUP of the parent end the job too (raise Terminated), and Ctrl-C interrupts
    it once: presses after the first wait until the job has wound down and its files are marked (a second one
    escaping the clean-up left them "in progress", or read as a dead parent)."""

    def __enter__(self):
        self.saved = {}
        if threading.current_thread() is threading.main_thread():
            for sig in (signal.SIGTERM, signal.SIGHUP):
                self.saved[sig] = signal.signal(sig, self._raise)
            if signal.getsignal(signal.SIGINT) is signal.default_int_handler:  # (not where Ctrl-C is ignored)
                self.saved[signal.SIGINT] = signal.signal(signal.SIGINT, self._interrupt_once)
        return self

    @staticmethod
    def _raise(signum, frame):
        raise Terminated(signum)

    @staticmethod
    def _interrupt_once(signum, frame):
        signal.signal(signal.SIGINT, signal.SIG_IGN)
        raise KeyboardInterrupt

    def __exit__(self, *exc) -> None:
        for sig, handler in self.saved.items():
            signal.signal(sig, handler)


RANK0_MARK = "rank0:"  # the guard's first argument for a rank 0 that guards its own result


class Guard:
    """A small process in its own session that ends the job and removes its files when the
    pybench parent dies without saying goodbye (SIGKILL): its stdin pipe closes.

    ``rank0``: the process guarded is rank 0 under a launcher of the user's (or none), whose journal
    nobody else would turn into the result file; the guard's reason then names rank 0."""

    def __init__(self, job: JobFolder, result_files: Sequence[Path], rank0: bool = False) -> None:
        code = "import sys; from pybench.measure.job import guard_job; guard_job(sys.argv[1:])"
        who = f"{RANK0_MARK}{os.getpid()}" if rank0 else str(os.getpid())
        self.proc = subprocess.Popen([sys.executable, "-c", code, who, str(job.path),
                                      *map(str, result_files)], stdin=subprocess.PIPE,
                                     stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)

    def watch(self, leader: int) -> None:
        self._send(f"leader {leader}\n")

    def stop(self, clean: bool = True) -> None:
        """End the guard: with ``clean`` it just leaves; without, it ends the job as if we had died.

        Any way out of a run that is not a handled one (an exception escaping mid-run) must not
        leave the launcher and ranks running on with nobody to stop them.
        """
        if clean:
            self._send("done\n")
        try:
            self.proc.stdin.close()  # type: ignore[union-attr]
            # clean: it only has files to remove, and a loaded machine must not hold Ctrl-C up;
            # not clean: it is killing the job (SIGTERM, a grace, SIGKILL) and marking the results
            self.proc.wait(timeout=3 if clean else 15)
        except (OSError, subprocess.TimeoutExpired):
            self.proc.kill()

    def _send(self, line: str) -> None:
        try:
            self.proc.stdin.write(line.encode())  # type: ignore[union-attr]
            self.proc.stdin.flush()  # type: ignore[union-attr]
        except OSError:
            pass


def guard_job(argv: list[str]) -> None:
    """Body of the guard process: wait for the parent's goodbye; without one, end the job."""
    for sig in (signal.SIGINT, signal.SIGHUP, signal.SIGTERM):
        signal.signal(sig, signal.SIG_IGN)
    parent, job_dir, files = argv[0], argv[1], argv[2:]
    leader = None
    for line in sys.stdin:
        if line.startswith("done"):
            return
        if line.startswith("leader "):
            leader = int(line.split()[1])
    if leader is not None:
        kill_session(leader)
    if parent.startswith(RANK0_MARK):
        reason = f"rank 0 (pid {parent[len(RANK0_MARK):]}) died before the run finished"
    else:
        reason = f"the pybench parent process (pid {parent}) died; the job was killed"
    mark_cut_short([Path(f) for f in files], reason, job_dir)
    JobFolder(job_dir).remove()


def mark_cut_short(paths: Sequence[Path], reason: str, job_dir: str | os.PathLike | None = None) -> list[str]:
    """Record in each unfinished result file why the run stopped; return the files that hold results.

    Where rank 0 left a journal in ``job_dir`` (it died between two rewrites of the file), the
    file is rebuilt from it first, so it holds every size measured, not only those of the last
    rewrite; a file still saying the run is in progress is marked with ``reason``.
    """
    from pybench.measure.result_journal import IN_PROGRESS, journal_path, read_header, write_from_journal
    kept = []
    for path in paths:
        journal = journal_path(path, job_dir) if job_dir is not None else None
        doc = read_header(journal) if journal is not None else None
        rebuilt = doc is not None
        if doc is not None and not _holds_run_or_nothing(path, doc):
            continue  # another run's file (it took the name first): never rebuilt from this run's journal
        if doc is None:
            try:
                doc = read_json(path)
            except PyBenchError:
                continue
        kept.append(str(path))
        if not isinstance(doc, dict) or doc.get("finished"):
            continue
        said = doc.get("cut_short")
        in_progress = isinstance(said, str) and said.startswith(IN_PROGRESS)
        if said and not in_progress and not rebuilt:
            continue  # rank 0 said why itself
        if not said or in_progress:
            doc["cut_short"] = reason
        try:
            if rebuilt:
                assert journal is not None
                # streamed from the journal: the records are never all in memory
                write_from_journal(path, doc, journal)
            else:
                write_json(path, doc)
        except (OSError, PyBenchError) as exc:
            # the file still holds every size of its last rewrite; the reason went to stderr
            if rebuilt and journal is not None:
                _keep_journal(path, journal, exc)
    if job_dir is not None:
        _mark_nccl_tests_json(JobFolder(str(job_dir)).nccl_tests_claims, reason)
    return kept


def _holds_run_or_nothing(path: Path, head: dict) -> bool:
    """Whether ``path`` is absent or holds the run whose journal's first line is ``head`` (its start time)."""
    try:
        current = read_json(path)
    except (OSError, PyBenchError):
        return True  # none, or a rewrite that never finished: this run's own
    return not isinstance(current, dict) or current.get("started_at") == head.get("started_at")


def _keep_journal(path: Path, journal: Path, error: Exception) -> None:
    """A result file that could not be rebuilt from its journal (a full disk): the journal moves out of the job
    folder, which goes with the job, into one of its own beside it, where `pybench recover` finds it later."""
    why = getattr(error, "strerror", None) or error
    try:
        keep = Path(tempfile.mkdtemp(prefix=JOB_PREFIX, dir=journal.parent.parent))
        os.replace(journal, keep / journal.name)  # (a rename: it needs no space)
    except OSError as exc:
        print(f"pybench: error: cannot write {path} ({why}) nor keep the journal of its sizes ({exc.strerror or exc})",
              file=sys.stderr, flush=True)
        return
    # (which of the run's files failed, its JSON, CSV or -J, the error line above says)
    print(f"pybench: note: {path} and the files written with it may lack sizes measured after their last rewrite "
          f"({why}); the journal of every size is kept: free space, then `pybench recover {path}`",
          file=sys.stderr, flush=True)


def record_nccl_tests_claim(path: Path) -> None:
    """Rank 0 under pybench's launcher: remember a claimed -J file in the job folder (see
    :attr:`JobFolder.nccl_tests_claims`); elsewhere nothing (no parent to mark it)."""
    from pybench.measure.result_journal import JOB_DIR
    folder = os.environ.get(JOB_DIR)
    if not folder:
        return
    try:
        with open(JobFolder(folder).nccl_tests_claims, "a", encoding="utf-8") as f:
            f.write(f"{Path(path).absolute()}\n")
    except OSError:
        pass  # the file is still written whole at each rewrite; only a cut-short mark would be missing


def _mark_nccl_tests_json(claims: Path, reason: str) -> None:
    """Say ``reason`` in the ``errors`` of each claimed -J file that holds sizes of a run that did not end
    (no ``end_time``, no error of its own); a file of a test never begun already says so."""
    try:
        paths = claims.read_text(encoding="utf-8").splitlines()
    except OSError:
        return
    for line in paths:
        try:
            doc = read_json(Path(line))
            if not isinstance(doc, dict) or "end_time" in doc or doc.get("errors") or not doc.get("results"):
                continue
            doc["errors"] = [reason]
            write_json(Path(line), doc)
        except (OSError, PyBenchError):
            pass
