"""Run many ``pybench`` command lines, each in its own process, for the price of one import.

``python fork_driver.py CASES.json RESULTS.json``: CASES is a list of {"id", "argv", "cwd"}.
The driver imports the CLI once, then forks one child per case; the child sets its limits
(address space, CPU, no core files), sends its stdout and stderr to files, runs
``pybench.__main__``'s code path (``main(argv)``, early Ctrl-C included) and leaves with its exit
code. The driver kills a child that runs past the wall-clock limit and records for each case
its exit code (or the signal that ended it), its stderr and whether it was killed.

BLAS threads are turned off before numpy is imported: a child forked from a process whose BLAS
pool is running can hang in it.
"""

from __future__ import annotations

import json
import os
import resource
import signal
import sys
import time

for _var in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ[_var] = "1"

MEMORY_LIMIT = 3 << 30
TIME_LIMIT_S = float(os.environ.get("CORPUS_TIME_LIMIT_S", "60"))


def _child(argv: list[str], cwd: str, out: str, err: str) -> None:
    from pybench.cli.main import main
    try:
        resource.setrlimit(resource.RLIMIT_AS, (MEMORY_LIMIT, MEMORY_LIMIT))
        resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
        os.chdir(cwd)
        for fd, path in ((1, out), (2, err)):
            f = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
            os.dup2(f, fd)
            os.close(f)
        os.setsid()  # its own session: ranks it starts are killed with it
        try:
            code = main(argv)
        except KeyboardInterrupt:
            print("pybench: interrupted", file=sys.stderr)
            code = 130
    except SystemExit as exc:
        code = exc.code if isinstance(exc.code, int) else 1
    except BaseException:  # the case's failure: the traceback goes to its stderr
        import traceback
        traceback.print_exc()
        code = 70
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)


# Imported once, before the forks, so that each case pays only for its own work.
_PRELOAD = ("pybench.cli.main", "pybench.model", "pybench.report.plot", "pybench.report.html", "pybench.report.compare",
            "matplotlib.pyplot", "pybench.io.schemas", "pybench.io.document_schemas", "pybench.io.foreign_schemas",
            "pybench.model.system", "pybench.planning.compute", "pybench.cli.planning", "pybench.report.inputs")


def run_cases(cases: list[dict]) -> list[dict]:
    import importlib
    os.environ.setdefault("MPLBACKEND", "Agg")
    for name in _PRELOAD:
        try:
            importlib.import_module(name)
        except ImportError:
            pass  # an optional extra missing: its cases say so themselves
    results = []
    for case in cases:
        out, err = os.path.join(case["cwd"], ".stdout"), os.path.join(case["cwd"], ".stderr")
        started = time.monotonic()
        pid = os.fork()
        if pid == 0:
            _child(case["argv"], case["cwd"], out, err)
        killed = False
        while True:
            done, status = os.waitpid(pid, os.WNOHANG)
            if done:
                break
            if time.monotonic() - started > TIME_LIMIT_S:
                killed = True
                for target in (-pid, pid):  # its session, then itself
                    try:
                        os.kill(target, signal.SIGKILL)
                    except OSError:
                        pass
                os.waitpid(pid, 0)
                status = -1
                break
            time.sleep(0.01)
        with open(err, errors="replace") as f:
            stderr = f.read()
        os.unlink(out)
        os.unlink(err)
        code = os.waitstatus_to_exitcode(status) if status != -1 else None
        results.append({"id": case["id"], "code": code, "stderr": stderr[-3000:], "killed": killed,
                        "wall_s": time.monotonic() - started})
    return results


if __name__ == "__main__":
    with open(sys.argv[1]) as f:
        todo = json.load(f)
    with open(sys.argv[2], "w") as f:
        json.dump(run_cases(todo), f)
