import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest
from conftest import processes_with

from pybench.errors import UsageError
from pybench.measure import job as jobmod
from pybench.measure.launch import (
    RANK_MARKER,
    STATUS_FILE,
    Launcher,
    check_rank_count,
    find_launcher,
    report_status,
    under_launcher,
)


def test_launcher_environment_detection():
    assert not under_launcher({})
    assert under_launcher({"OMPI_COMM_WORLD_SIZE": "4"})
    assert under_launcher({"PMI_RANK": "0"})
    assert under_launcher({"SLURM_STEP_NUM_TASKS": "8"})
    assert under_launcher({RANK_MARKER: "1"})
    # a Slurm allocation alone (sbatch/salloc shell) is not a launched rank
    assert not under_launcher({"SLURM_JOB_ID": "12", "SLURM_NTASKS": "8"})


def test_open_mpi_command_oversubscribes_only_past_the_cores():
    launcher = Launcher("/x/mpiexec", "openmpi")
    assert launcher.command(2, ["prog"], cpus=2) == ["/x/mpiexec", "-n", "2", "prog"]
    assert launcher.command(4, ["prog", "a b"], cpus=2) == ["/x/mpiexec", "-n", "4", "--oversubscribe",
                                                             "--bind-to", "none", "prog", "a b"]
    assert Launcher("/x/mpiexec", "mpich").command(4, ["prog"], cpus=2) == ["/x/mpiexec", "-n", "4", "prog"]


def test_environment_marks_ranks_and_allows_root_for_open_mpi():
    env = Launcher("/x/mpiexec", "openmpi").environment({})
    assert env[RANK_MARKER] == "1"
    if os.geteuid() == 0:
        assert env["OMPI_ALLOW_RUN_AS_ROOT"] == "1" and env["OMPI_ALLOW_RUN_AS_ROOT_CONFIRM"] == "1"
    assert "OMPI_ALLOW_RUN_AS_ROOT" not in Launcher("/x/mpiexec", "mpich").environment({})


def test_the_embedded_launcher_is_found(native):
    launcher = find_launcher()
    assert launcher.flavour == "openmpi" and os.access(launcher.path, os.X_OK)


def test_torchrun_workers_count_as_launched():
    assert under_launcher({"TORCHELASTIC_RUN_ID": "x"})
    assert under_launcher({"RANK": "0", "WORLD_SIZE": "2", "MASTER_ADDR": "127.0.0.1"})
    assert not under_launcher({"RANK": "0"})  # a stray RANK alone is not a launched job


def test_backends_are_looked_up_by_name():
    from pybench.errors import BackendUnavailable
    from pybench.measure.backends import get_backend
    with pytest.raises(UsageError, match="unknown backend 'gloo'; known: mpi"):
        get_backend("gloo")
    from pybench._native import cuda
    if cuda().probe()["device_count"] == 0:
        with pytest.raises(BackendUnavailable, match="nccl backend needs a GPU"):
            get_backend("nccl").start()


# ---- hardening (issue 16) -------------------------------------------------------------------



def test_the_job_folder_is_private_and_removed(tmp_path):
    job = jobmod.JobFolder()
    try:
        assert job.path.stat().st_mode & 0o777 == 0o700 and job.path.name.startswith("pybench-job-")
        (job.path / "ranks" / "123").write_text("")
        assert job.rank_pids() == [123] and job.read_status() is None
    finally:
        job.remove()
    assert not job.path.exists()


def test_the_status_file_is_never_written_through_a_link(tmp_path, monkeypatch):
    victim = tmp_path / "victim"
    victim.write_text("precious")
    planted = tmp_path / "status"
    planted.symlink_to(victim)
    monkeypatch.setenv(STATUS_FILE, str(planted))
    assert report_status(2, is_root=True) == 2  # could not hand it over: the rank exits with it itself
    assert victim.read_text() == "precious"
    monkeypatch.setenv(STATUS_FILE, str(tmp_path / "fresh"))
    assert report_status(2, is_root=True) == 0 and (tmp_path / "fresh").read_text() == "2"
    assert report_status(5, is_root=True) == 5  # never overwrites an existing status either


def test_rank_counts_above_the_cores_need_oversubscription():
    check_rank_count(2, oversubscribe=False, cpus=2, available=1 << 40)
    with pytest.raises(UsageError, match="3 ranks exceed the 2 cores of this host; allow oversubscription"):
        check_rank_count(3, oversubscribe=False, cpus=2, available=1 << 40)
    check_rank_count(3, oversubscribe=True, cpus=2, available=1 << 40)
    check_rank_count(16, oversubscribe=None, cpus=2, available=1 << 40)  # what -n 4 on 2 cores always did
    with pytest.raises(UsageError, match="1000 ranks on 2 cores is more than 8 per core"):
        check_rank_count(1000, oversubscribe=None, cpus=2, available=1 << 40)
    with pytest.raises(UsageError, match="1000 ranks need about 125.0 GiB"):
        check_rank_count(1000, oversubscribe=True, cpus=2, available=64 << 30)


def test_1000_ranks_are_one_error_line_before_any_process_starts(pybench_cli, native):
    proc = pybench_cli("allreduce", "--sizes", "1K", "--np", "1000", "--backend", "mpi", timeout=60)
    errors = [ln for ln in proc.stderr.splitlines() if ln.startswith("pybench: error:")]
    assert proc.returncode == 2 and "Traceback" not in proc.stderr
    assert len(errors) == 1 and errors[0].startswith("pybench: error: 1000 ranks on")


def _socket_inodes(pid: int) -> set[str]:
    inodes = set()
    for fd in Path(f"/proc/{pid}/fd").iterdir():
        try:
            target = os.readlink(fd)
        except OSError:
            continue
        if target.startswith("socket:["):
            inodes.add(target[8:-1])
    return inodes


def _listeners(pid: int) -> list[tuple[str, bool]]:
    """(local address in /proc/net hex, reachable from another machine) of pid's listening TCP sockets."""
    try:
        inodes = _socket_inodes(pid)
        ifaces = [ln.split(":")[0].strip() for ln in Path(f"/proc/{pid}/net/dev").read_text().splitlines()[2:]]
        tables = [Path(f"/proc/{pid}/net/{t}").read_text() for t in ("tcp", "tcp6")]
    except OSError:
        return []
    found = []
    for table in tables:
        for line in table.splitlines()[1:]:
            f = line.split()
            if f[3] == "0A" and f[9] in inodes:  # LISTEN, and this process's socket
                ip = f[1].split(":")[0]
                loopback = ip in ("0100007F", "00000000000000000000000001000000")
                found.append((f[1], not loopback and ifaces != ["lo"]))
    return found


def test_no_listener_of_a_local_run_is_reachable_from_outside(tmp_path, native):
    out = tmp_path / "listen.json"
    p = subprocess.Popen([sys.executable, "-m", "pybench", "allreduce", "--sizes", "1K,16M", "--iters", "100",
                          "--backend", "mpi", "--json", str(out)], cwd=tmp_path, stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, text=True)
    seen: dict[int, list] = {}
    try:
        while p.poll() is None and not _first_record(out):
            time.sleep(0.05)
        for pid in processes_with(str(out)):
            seen[pid] = _listeners(pid)
        p.communicate(timeout=300)
    finally:
        if p.poll() is None:
            p.kill()
            p.communicate()
    assert p.returncode == 0
    assert any(seen.values()), "the launcher's listeners were not found: this test would see nothing"
    assert [(pid, a) for pid, ls in seen.items() for a, outside in ls if outside] == []


def _first_record(out: Path) -> bool:
    try:
        return bool(json.loads(out.read_text())["records"])
    except (OSError, ValueError, KeyError):
        return False


def test_watchdog_timeouts_saturate_to_never():
    from pybench.measure.runner import NEVER_S, watchdog_seconds
    assert watchdog_seconds(30.0) == 30.0 and watchdog_seconds(NEVER_S / 2) == NEVER_S / 2
    # 9.3e9 s overflowed the native int64-nanosecond deadline and fired at once, naming a false culprit
    for never in (float("inf"), 1e10, NEVER_S, float("nan"), 0.0, -1.0):
        assert watchdog_seconds(never) == 0.0


# ---------------------------------------------------------------- not root: a private network in a user namespace
REPO = Path(__file__).resolve().parents[2]


@pytest.fixture
def nobody_dir():
    """A folder the user nobody can read and write (pytest's tmp_path is root's alone)."""
    import shutil
    import tempfile
    d = Path(tempfile.mkdtemp(prefix="pybench-nobody-"))
    d.chmod(0o777)
    yield d
    shutil.rmtree(d, ignore_errors=True)


def _as_nobody_python() -> list[str]:
    """A python3 the unprivileged user `nobody` can run (this venv may live under /root), or skip."""
    if not hasattr(os, "geteuid") or os.geteuid() != 0:
        pytest.skip("needs root to start a process as the unprivileged user nobody")
    import pwd
    import shutil
    try:
        pwd.getpwnam("nobody")
    except KeyError:
        pytest.skip("no user nobody on this machine")
    su, py = shutil.which("su"), shutil.which("python3", path="/usr/local/bin:/usr/bin:/bin")
    if su is None or py is None:
        pytest.skip("needs su and a system python3 to run as nobody")
    probe = subprocess.run([su, "nobody", "-s", "/bin/sh", "-c", f"{py} -c 'print(1)'"], capture_output=True,
                           text=True, timeout=60)
    if probe.stdout.strip() != "1":
        pytest.skip(f"nobody cannot run {py}: {probe.stderr.strip()[:200]}")
    return [su, "nobody", "-s", "/bin/sh", "-c"]


def _needs_user_namespaces(su: list[str]) -> None:
    """Skip where the kernel refuses unprivileged user namespaces (then pybench changes nothing)."""
    import shutil
    unshare = shutil.which("unshare")
    if unshare is None:
        pytest.skip("no unshare(1) to probe for unprivileged user namespaces")
    probe = subprocess.run(su + [f"{unshare} --user --net true"], capture_output=True, text=True, timeout=30)
    if probe.returncode != 0:
        pytest.skip("this kernel refuses unprivileged user namespaces: " + probe.stderr.strip()[:200])


def test_a_non_root_launcher_gets_a_loopback_only_network_and_keeps_its_uid(nobody_dir):
    su = _as_nobody_python()
    script = nobody_dir / "probe.py"
    script.write_text("import sys; sys.path.insert(0, %r)\n"
                      "import os, socket\n"
                      "from pybench.measure.job import loopback_only_network\n"
                      "ok = loopback_only_network()\n"
                      "s = socket.socket(); s.bind(('127.0.0.1', 0)); s.listen()\n"  # loopback is up
                      "print(ok, os.getuid(), ','.join(n for _, n in socket.if_nameindex()))\n" % str(REPO))
    _needs_user_namespaces(su)
    proc = subprocess.run(su + [f"python3 {script}"], capture_output=True, text=True, timeout=60, cwd="/tmp")
    nobody = __import__("pwd").getpwnam("nobody").pw_uid
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert proc.stdout.split() == ["True", str(nobody), "lo"]


def test_a_non_root_open_mpi_job_runs_in_its_own_network_namespace(nobody_dir):
    su = _as_nobody_python()
    from pybench.measure.launch import find_launcher
    try:
        mpiexec = find_launcher().path
    except Exception as exc:  # noqa: BLE001 - no launcher: nothing to check
        pytest.skip(str(exc))
    out = nobody_dir / "ns.txt"
    # The launcher, started as pybench starts it (die_with(..., isolate)), as nobody: prterun and the ranks
    # must live in another network namespace than this test, and the ranks keep nobody's uid.
    script = nobody_dir / "job.py"
    script.write_text("import sys, os, subprocess; sys.path.insert(0, %r)\n"
                      "from pybench.measure.job import die_with\n"
                      "env = dict(os.environ, OMPI_MCA_btl='self,sm', TMPDIR='/tmp')\n"
                      "cmd = [%r, '-n', '2', 'sh', '-c', 'echo $(id -u) $(readlink /proc/$PPID/ns/net) >> %s']\n"
                      "sys.exit(subprocess.run(cmd, env=env, preexec_fn=die_with(os.getpid(), True)).returncode)\n"
                      % (str(REPO), mpiexec, str(out)))
    _needs_user_namespaces(su)
    proc = subprocess.run(su + [f"python3 {script}"], capture_output=True, text=True, timeout=120, cwd="/tmp")
    assert proc.returncode == 0, proc.stderr[-2000:]
    lines = out.read_text().split("\n")[:-1]
    nobody = __import__("pwd").getpwnam("nobody").pw_uid
    ours = os.readlink("/proc/self/ns/net")
    assert len(lines) == 2 and all(ln.split()[0] == str(nobody) for ln in lines)
    assert all(ln.split()[1] != ours for ln in lines), (lines, ours)  # the launcher's network is not the host's


def test_a_run_cut_short_says_so_in_the_j_files_rank_0_claimed(tmp_path, monkeypatch):
    """-J alone (nccl-tests' way) had no mark when the run was interrupted: its file kept the sizes of its last
    rewrite with no error and no end time. Rank 0 records the names it claimed (path.0 when path exists) in the
    job folder, and the parent marks each: sizes kept and the reason; a test never begun keeps its own words;
    a finished one is left as it is."""
    from pybench.measure.nccl_tests_json import NOT_STARTED, NcclTestsJsonWriter
    from pybench.measure.result_journal import JOB_DIR
    job = jobmod.JobFolder()
    try:
        monkeypatch.setenv(JOB_DIR, str(job.path))
        (tmp_path / "nt.json").write_text("{}")  # a user's file: the claim takes nt.json.0
        partial, never, done = (NcclTestsJsonWriter(tmp_path / n, ["pybench"]) for n in ("nt.json", "b.json", "c.json"))
        assert partial.path.name == "nt.json.0"
        row = {"size": 1024, "count": 256, "type": "float", "redop": "sum", "root": "    -1"}
        partial.path.write_text(json.dumps({"version": 2, "results": [row], "errors": []}))
        done.path.write_text(json.dumps({"version": 2, "results": [row], "errors": [], "end_time": "x"}))
        jobmod.mark_cut_short([], "interrupted (SIGINT)", job.path)
        assert json.loads(partial.path.read_text())["errors"] == ["interrupted (SIGINT)"]
        assert json.loads(never.path.read_text())["errors"] == [NOT_STARTED]
        assert json.loads(done.path.read_text())["errors"] == []
        assert json.loads((tmp_path / "nt.json").read_text()) == {}  # the user's file is not rank 0's claim
    finally:
        job.remove()
