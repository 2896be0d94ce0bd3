"""Shared helpers for the test suite.

Subprocesses run with cwd set to a temporary folder so that ``python -m pybench``
imports the installed package (with its native modules), never the source tree.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from contextlib import contextmanager
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
# Verbatim copies of the real logs of the shared measurement folder, in its layout
# (nccl-tests/, osu/, vtrain/), kept in the repository so no test depends on a folder beside
# it; tests/fixtures/SHARED_SOURCES.md lists where each came from.
SHARED_DATA = REPO / "tests" / "fixtures" / "shared_data"
PUBLIC_LOGS = REPO / "tests" / "fixtures" / "public_logs"  # logs other projects published (SOURCES.md)


def _core_available() -> str | None:
    try:
        import pybench._core  # noqa: F401
    except ImportError as exc:
        return str(exc)
    return None


@pytest.fixture(scope="session")
def native():
    """The native core; the suite needs it, so its absence is an error, not a skip."""
    problem = _core_available()
    if problem:
        pytest.fail(f"pybench._core cannot be imported ({problem}); install with `pip install .[test]` and run "
                    "pytest from the repository root (not `python -m pytest`, which would import the source tree)")
    import pybench._core as core
    return core


def run_pybench(args: list[str], cwd: Path, timeout: float = 120, env: dict | None = None
                ) -> subprocess.CompletedProcess:
    """Run ``python -m pybench ARGS`` as a user would; never through a shell."""
    full_env = dict(os.environ)
    full_env.pop("PYBENCH_RANK_PROCESS", None)
    if env:
        full_env.update(env)
    return subprocess.run([sys.executable, "-m", "pybench", *args], cwd=cwd, capture_output=True, text=True,
                          timeout=timeout, env=full_env, stdin=subprocess.DEVNULL)


@pytest.fixture
def pybench_cli(tmp_path):
    """``pybench_cli(*args)`` runs ``python -m pybench ARGS`` in ``pybench_cli.cwd`` (the test's tmp_path)."""
    def run(*args: str, timeout: float = 120, env: dict | None = None) -> subprocess.CompletedProcess:
        return run_pybench(list(args), tmp_path, timeout=timeout, env=env)
    run.cwd = tmp_path  # type: ignore[attr-defined]  # where relative output names land
    return run


def run_under_mpiexec(script: Path, args: list[str], cwd: Path, nprocs: int = 2, timeout: float = 300
                      ) -> subprocess.CompletedProcess:
    """Start ``nprocs`` ranks of a Python script through pybench's own launcher logic
    (including its second try when Open MPI fails to start before any rank ran)."""
    from pybench.measure.launch import find_launcher
    from pybench.measure.mpi_stderr import START_ATTEMPTS, failed_to_start
    launcher = find_launcher()
    cmd = launcher.command(nprocs, [sys.executable, str(script), *args])
    for _ in range(START_ATTEMPTS):
        proc = subprocess.run(cmd, cwd=cwd, env=launcher.environment(), capture_output=True, text=True,
                              timeout=timeout, stdin=subprocess.DEVNULL)
        if proc.returncode == 0 or not failed_to_start(proc.stderr):
            break
    return proc


def slower_nccl_tests_log(log: Path, factor: float, out: Path) -> Path:
    """``log`` (an nccl-tests table of 13 columns: size count type redop root, then two halves of time, algbw,
    busbw, #wrong) written to ``out`` with every time ``factor`` times as long and its bandwidths to match."""
    rows = []
    for line in log.read_text().splitlines():
        cells = line.split()
        if len(cells) == 13 and cells[0].isdigit():
            for k in (5, 9):
                cells[k] = f"{float(cells[k]) * factor:.2f}"
                cells[k + 1] = f"{float(cells[k + 1]) / factor:.4f}"
                cells[k + 2] = f"{float(cells[k + 2]) / factor:.4f}"
            line = " ".join(cells)
        rows.append(line)
    out.write_text("\n".join(rows) + "\n")
    return out


def rank_results(script: Path, out: Path, timeout: float = 300) -> list[dict]:
    """Run ``script OUT`` on 2 ranks (:func:`run_under_mpiexec`) and return each rank's ``OUT/rank{r}.json``; the
    test fails with the ranks' stderr where they did not all succeed."""
    proc = run_under_mpiexec(script, [str(out)], cwd=out, timeout=timeout)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return [json.loads((out / f"rank{r}.json").read_text()) for r in range(2)]


def start_ranks(cmd: list[str], ready, wait_s: float, **popen_kwargs) -> subprocess.Popen:
    """Popen ``cmd`` (ranks under a user's mpiexec, stderr piped) and wait until ``ready()``, its end or ``wait_s``;
    launched again where Open MPI failed to start before any rank ran (the start-up race pybench's own launch
    retries, :func:`pybench.measure.mpi_stderr.failed_to_start`). A job that ends otherwise before it is ready
    fails the test with its stderr."""
    import time

    from pybench.measure.mpi_stderr import START_ATTEMPTS, failed_to_start
    for attempt in range(START_ATTEMPTS):
        proc = subprocess.Popen(cmd, **popen_kwargs)
        deadline = time.monotonic() + wait_s
        while time.monotonic() < deadline and proc.poll() is None and not ready():
            time.sleep(0.05)
        if proc.poll() is None or ready():
            return proc
        _, stderr = proc.communicate()
        if not failed_to_start(stderr or "") or attempt == START_ATTEMPTS - 1:
            pytest.fail(f"the ranks ended before they were ready (exit {proc.returncode}): {stderr}")
    raise AssertionError("unreachable")


def assert_every_case_exact(results: list[dict]) -> None:
    """Every collective x dtype x op appears in a rank script's results, and none had a wrong value."""
    from pybench.collectives import COLLECTIVES, DTYPES, OPS
    seen = {(r["collective"], r["dtype"], r["op"]) for r in results}
    for name, coll in COLLECTIVES.items():
        for dtype in DTYPES:
            for op in (OPS if coll.reduces else ("sum",)):
                assert (name, dtype, op) in seen
    assert [(r["collective"], r["dtype"], r["op"], r["size"], r.get("in_place"), r["wrong"])
            for r in results if r["wrong"]] == []


@contextmanager
def no_hang(seconds: int = 5):
    """Fail the test (AssertionError) when the block runs longer than ``seconds``: a hang becomes a failure."""
    def fail(*_):
        raise AssertionError(f"ran for more than {seconds} s")
    old = signal.signal(signal.SIGALRM, fail)
    signal.alarm(seconds)
    try:
        yield
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, old)


def fitted_model_file(tmp_path_factory, log: Path, *fit_args: str) -> Path:
    """``log`` fitted to a model file by ``pybench fit LOG [fit_args] -o FILE``, as a user fits one."""
    from pybench.cli.main import main
    path = tmp_path_factory.mktemp("model") / "model.json"
    assert main(["fit", str(log), *fit_args, "-o", str(path)]) == 0
    return path


def gpu_with_nccl():
    """(pybench._cuda, its device probe, the loaded NCCL) on a machine with a GPU, else pytest.skip with why."""
    from pybench._native import build_info
    if build_info().get("cuda_module") != "ON":
        pytest.skip("pybench was built without the CUDA module (no nvcc at build time)")
    from pybench.measure.backends.nccl import gpu_probe, no_gpu_reason
    reason = no_gpu_reason()
    if reason is not None:
        pytest.skip(reason)
    from pybench.errors import BackendUnavailable
    from pybench.measure.gpu.nccl_lib import load_nccl
    try:
        lib = load_nccl()
    except BackendUnavailable as exc:
        pytest.skip(str(exc))
    from pybench._native import cuda
    return cuda(), gpu_probe(), lib


def processes_with(marker: str) -> list[int]:
    """The pids of this machine's processes whose command line holds ``marker`` (what a run left running)."""
    pids = []
    for d in Path("/proc").iterdir():
        try:
            if d.name.isdigit() and marker in (d / "cmdline").read_bytes().decode(errors="replace"):
                pids.append(int(d.name))
        except OSError:
            continue
    return pids


def broadcast_g8_json(tmp_path: Path) -> Path:
    """An nccl-tests -J file of broadcast_perf -g 8 on 2 processes (one device entry per process, as nccl-tests
    writes them): busbw/algbw = 1 says nothing of the ranks; config.devices says 16 on 2 hosts."""
    import json
    rows = [{"size": s, "count": s // 4, "type": "float", "redop": "none", "root": 0,
             "out_of_place": {"time": t, "alg_bw": round(s / t / 1e3, 2), "bus_bw": round(s / t / 1e3, 2),
                              "nwrong": 0}}
            for s, t in ((1 << 20, 20.0), (1 << 24, 120.0), (1 << 28, 1800.0))]
    devices = [{"rank": 8 * p, "group": 0, "pid": 100 + p, "hostname": f"dgx{p}", "device": 0,
                "device_hex": "0000:07:00", "device_info": "NVIDIA H100 80GB HBM3"} for p in range(2)]
    path = tmp_path / "bcast.json"
    path.write_text(json.dumps({"args": ["./broadcast_perf", "-g", "8"], "results": rows,
                                "config": {"nthreads": 1, "ngpus": 8, "devices": devices}}))
    return path


def refused_in_one_line(capsys, argv: list[str]) -> str:
    """The CLI's stderr for ``argv``, which must exit 2 with one line and no traceback."""
    from pybench.cli.main import main
    capsys.readouterr()
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert len(err.strip().splitlines()) == 1 and "Traceback" not in err, err
    return err

