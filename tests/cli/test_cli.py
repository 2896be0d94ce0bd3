"""The CLI end to end, as a user runs it: real ranks started by pybench itself."""

import csv
import importlib.metadata
import importlib.util
import json

import pytest
from conftest import SHARED_DATA

from pybench.io.formats import RESULT
from pybench.measure.results import load_result

pytestmark = pytest.mark.mpi


def _but_busy_warning(stderr: str) -> list[str]:
    """stderr's lines less the warning of a busy machine (tests run beside other work)."""
    return [line for line in stderr.strip().splitlines() if not line.startswith("pybench: warning: the machine")
            and "missed the precision" not in line]


def _table_rows(stdout: str) -> list[list[str]]:
    return [line.split() for line in stdout.splitlines() if line.strip() and not line.startswith("#")]


def test_allreduce_prints_a_nccl_tests_table_and_writes_complete_files(pybench_cli, tmp_path, native):
    out, csv_path = tmp_path / "ar.json", tmp_path / "ar.csv"
    proc = pybench_cli("allreduce", "--sizes", "8,64K,1M", "--json", str(out), "--csv", str(csv_path))
    assert proc.returncode == 0, proc.stderr
    header = [line for line in proc.stdout.splitlines() if line.startswith("#")]
    assert any("world 2 ranks" in h and "intra-node" in h for h in header)
    assert any(h.split()[1:9] == ["size", "count", "type", "redop", "root", "time", "algbw", "busbw"] for h in header)
    assert any(h.startswith("# Peak bus bandwidth:") for h in header)
    assert "# Out of bounds values : 0 OK" in proc.stdout
    rows = _table_rows(proc.stdout)
    assert [int(r[0]) for r in rows] == [8, 65536, 1048576]
    assert [int(r[1]) for r in rows] == [2, 16384, 262144]
    assert all(r[2] == "float" and r[3] == "sum" and r[8] == "0" for r in rows)

    doc = json.loads(out.read_text())
    assert doc["schema"] == RESULT.schema == "pybench.result" and doc["schema_version"] == RESULT.version
    assert doc["finished"] is True and doc["cut_short"] is None
    assert doc["world_size"] == 2 and sum(doc["hosts"].values()) == 2
    assert doc["environment"]["mpi"]["library"].startswith("Open MPI")
    assert doc["environment"]["cpu_model"]
    # the node as detected, each figure with its source (sysfs, NVML, /proc, os.cpu_count)
    system = doc["environment"]["system"]
    assert system["fields"]["cpu_cores"] >= 1 and set(system["from"]) == set(system["fields"])
    assert doc["command"][:2] == ["pybench", "allreduce"]
    for rec in doc["records"]:
        assert rec["wrong"] == 0 and rec["iterations"] >= 5
        assert len(rec["samples_s"]) * rec["ops_per_sample"] == rec["iterations"]
        assert rec["time_p5_s"] <= rec["time_s"] <= rec["time_p95_s"]
        # 2 ranks: busbw factor 2(n-1)/n = 1
        assert rec["busbw_gbps"] == pytest.approx(rec["algbw_gbps"])
        assert rec["algbw_gbps"] == pytest.approx(rec["size_bytes"] / rec["time_s"] / 1e9)
    result = load_result(out)
    assert [r.size_bytes for r in result.records] == [8, 65536, 1048576]

    with csv_path.open() as f:
        csv_rows = list(csv.DictReader(f))
    assert [int(r["size_bytes"]) for r in csv_rows] == [8, 65536, 1048576]


@pytest.mark.parametrize("collective", ["allgather", "reducescatter", "broadcast", "alltoall", "sendrecv"])
def test_each_collective_runs_from_the_cli(pybench_cli, collective, tmp_path, native):
    out = tmp_path / "r.json"
    proc = pybench_cli(collective, "--sizes", "1K,256K", "--iters", "12", "-d", "bf16", "--json", str(out))
    assert proc.returncode == 0, proc.stderr
    doc = json.loads(out.read_text())
    assert doc["benchmark"] == collective and doc["dtype"] == "bfloat16"
    assert [r["iterations"] for r in doc["records"]] == [12, 12]
    assert all(r["wrong"] == 0 and r["stop_reason"] == "fixed" for r in doc["records"])


def test_per_op_timing_gives_a_distribution(pybench_cli, tmp_path, native):
    out = tmp_path / "r.json"
    proc = pybench_cli("allreduce", "--sizes", "4K", "--timing", "per-op", "--precision", "5%", "--json", str(out))
    assert proc.returncode == 0, proc.stderr
    rec = json.loads(out.read_text())["records"][0]
    assert rec["ops_per_sample"] == 1 and len(rec["samples_s"]) == rec["iterations"]
    assert rec["time_p5_s"] <= rec["time_s"] <= rec["time_p95_s"] <= rec["time_p99_s"] <= rec["time_max_s"]


def test_p2p_writes_one_file_per_test(pybench_cli, tmp_path, native):
    out = tmp_path / "p.json"
    proc = pybench_cli("p2p", "--sizes", "1,64K", "--json", str(out))
    assert proc.returncode == 0, proc.stderr
    for test in ("latency", "bw", "bibw"):
        doc = json.loads((tmp_path / f"p.{test}.json").read_text())
        assert doc["benchmark"] == f"p2p_{test}" and doc["finished"]
        assert [r["size_bytes"] for r in doc["records"]] == [1, 65536]
    bw = json.loads((tmp_path / "p.bw.json").read_text())["records"][1]
    bibw = json.loads((tmp_path / "p.bibw.json").read_text())["records"][1]
    assert bw["algbw_gbps"] == pytest.approx(65536 / bw["time_s"] / 1e9)
    assert bibw["algbw_gbps"] == pytest.approx(2 * 65536 / bibw["time_s"] / 1e9)  # both directions


def test_wrong_results_set_the_exit_code(pybench_cli, tmp_path, native):
    out = tmp_path / "r.json"
    proc = pybench_cli("allreduce", "--sizes", "1K", "--iters", "6", "--json", str(out),
                       env={"PYBENCH_INJECT_WRONG": "1"})
    assert proc.returncode == 1
    rows = _table_rows(proc.stdout)
    assert int(rows[0][8]) > 0
    assert "FAILED" in proc.stdout
    assert json.loads(out.read_text())["records"][0]["wrong"] > 0


def test_existing_files_are_not_overwritten_without_force(pybench_cli, tmp_path, native):
    out = tmp_path / "r.json"
    out.write_text("precious")
    proc = pybench_cli("allreduce", "--sizes", "1K", "--json", str(out))
    assert proc.returncode == 2 and "already exists" in proc.stderr
    assert out.read_text() == "precious"
    proc = pybench_cli("allreduce", "--sizes", "1K", "--iters", "6", "--json", str(out), "--force")
    assert proc.returncode == 0 and json.loads(out.read_text())["finished"]


def test_two_outputs_of_one_run_may_not_name_one_file(pybench_cli, tmp_path):
    # --json X --csv X destroyed the JSON with exit 0; -J X failed after starting and left an empty X;
    # --json - wrote a file named '-'; a test listed twice failed after measuring the first
    same = str(tmp_path / "same.json")
    for argv, said in ((["allreduce", "--sizes", "1K", "--json", same, "--csv", same], "--csv"),
                       (["allreduce", "--sizes", "1K", "--json", same, "-J", same], "-J"),
                       (["allreduce", "--sizes", "1K", "--json", "-"], "give a file name"),
                       (["p2p", "-m", "1:8", "--test", "latency,latency", "--json", same], "list each test once"),
                       (["allreduce", "--sizes", "1K", "-J", "/dev/null"], "not a regular file")):  # no /dev/null.0
        proc = pybench_cli(*argv)
        assert proc.returncode == 2 and said in proc.stderr and proc.stderr.count("\n") == 1, proc.stderr
        assert list(tmp_path.iterdir()) == [] and proc.stdout == ""


BAD_INPUTS = [
    (["allreduce", "--sizes", "1G:1M"], "goes down"),
    (["allreduce", "--sizes", "abc"], "not a size"),
    (["allreduce", "--sizes", "0"], "at least 1 byte"),
    (["allreduce", "--sizes", "-1M"], "negative"),
    (["allreduce", "--sizes", "1X"], "not a size"),
    (["allfoo"], "invalid choice: 'allfoo'"),
    (["allreduce", "--dtype", "float8"], "unknown dtype 'float8'"),
    (["allreduce", "--op", "prod"], "unknown reduction op"),
    (["allreduce", "--np", "1"], "needs at least 2 ranks"),
    (["allreduce", "--np", "0"], "must be at least 1"),
    (["allgather", "-r", "x"], "not a whole number"),  # (-r is taken as nccl-tests takes it, and checked)
    (["p2p", "--np", "1"], "need 2 ranks"),
    (["p2p", "--test", "latency,bw,latency"], "latency is listed twice; list each test once"),
    (["allreduce", "--sizes", "1K", "-b", "8", "-e", "1M"], "--sizes and -b/-e both give the sizes"),
    (["allreduce", "-b", "1M", "-e", "8"], "is below -b 1M"),
    (["allreduce", "-b", "abc"], "not a size"),
    (["allreduce", "-b", "8", "-e", "1G", "-i", "1"], "more than 4096 sizes"),
    (["allreduce", "-f", "0"], "must be at least 1"),
    (["allreduce", "-n", "0"], "must be at least 1"),
    (["allreduce", "-n", "5", "--precision", "1%"], "exclusive"),
    (["allreduce", "-w", "-1"], "must be at least 0"),
    (["allreduce", "-c", "x"], "not a whole number"),
    (["allreduce", "-G", "1"], "captures CUDA graphs"),
    (["allreduce", "-G", "2", "--timing", "per-op"], "-G 2 asks for CUDA graph timing"),
    (["allreduce", "--json", "/nonexistent/dir/x.json"], "does not exist"),
    (["allreduce", "-J", "/nonexistent/dir/x.json"], "does not exist"),
    (["allgather", "--op", "foo"], "unknown reduction op 'foo'"),  # (taken, as nccl-tests does, and checked)
    (["allreduce", "--root", "-1"], "must be at least 0"),
    (["env", "--json"], "expected one argument"),
    # 24 B of float64 on 2 ranks now runs as 16 B (nccl-tests' rounding); below one element per rank is refused
    (["allgather", "--sizes", "8", "-d", "float64"], "multiple of ranks x element size"),
    (["allreduce", "--sizes", "6"], "not a whole number of float32 elements"),
    (["allreduce", "--sizes", "8G", "-d", "float64"], "is available"),
    (["allreduce", "--sizes", "64G"], "32-bit count limit"),
    (["allreduce", "--iters", "0"], "must be at least 1"),
    (["allreduce", "--precision", "150%"], "below 1 (100%)"),
    (["allreduce", "--iters", "5", "--precision", "1%"], "exclusive"),
    (["allreduce", "--timing", "graph"], "captures CUDA graphs"),
    (["allreduce", "--backend", "gloo"], "unknown backend"),
    (["allreduce", "--json", "/nonexistent/dir/x.json"], "does not exist"),
    (["broadcast", "--root", "7"], "not a rank"),
    ([], "no command given"),
]


@pytest.mark.parametrize("args,fragment", BAD_INPUTS, ids=[" ".join(a) or "empty" for a, _ in BAD_INPUTS])
def test_bad_input_is_one_line_exit_2(pybench_cli, args, fragment):
    proc = pybench_cli(*args, timeout=30)
    assert proc.returncode == 2
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1, proc.stderr
    assert lines[0].startswith("pybench: error: ")
    assert fragment in lines[0]
    assert "Traceback" not in proc.stderr and proc.stdout == ""


def test_asking_for_nccl_without_a_gpu_is_one_line_exit_3(pybench_cli, native):
    from pybench._native import cuda
    if cuda().probe()["device_count"]:
        pytest.skip("this machine has a GPU")
    proc = pybench_cli("allreduce", "--backend", "nccl", timeout=30)
    # the machine lacks what was asked for: an environment fault (exit 3), not bad input
    assert proc.returncode == 3 and proc.stdout == ""
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and "--backend nccl needs a GPU" in lines[0]


def test_without_a_gpu_the_default_falls_back_to_mpi_in_one_line(pybench_cli, native):
    from pybench._native import cuda
    if cuda().probe()["device_count"]:
        pytest.skip("this machine has a GPU: the default backend is nccl here")
    proc = pybench_cli("allreduce", "--sizes", "1K", "--iters", "6")
    assert proc.returncode == 0
    lines = _but_busy_warning(proc.stderr)
    assert len(lines) == 1 and "running on CPUs with the mpi backend" in lines[0] and "no GPU" in lines[0]
    assert "backend mpi" in proc.stdout.splitlines()[0]
    quiet = pybench_cli("allreduce", "--sizes", "1K", "--iters", "6", "--backend", "mpi")
    assert quiet.returncode == 0 and _but_busy_warning(quiet.stderr) == []


def test_version_and_env(pybench_cli, native):
    proc = pybench_cli("--version")
    assert proc.returncode == 0 and proc.stdout.startswith("pybench 0.")
    proc = pybench_cli("env", "--json", "-", env={"PYTHONPROFILEIMPORTTIME": "1"})
    assert proc.returncode == 0, proc.stderr
    env = json.loads(proc.stdout)
    # torch's version comes from its metadata: importing torch to ask took seconds
    assert not [line for line in proc.stderr.splitlines() if line.endswith("| torch")]
    torch = importlib.metadata.version("torch") if importlib.util.find_spec("torch") else None
    assert env["torch_version"] == torch and env["backends"]["torch"] == (torch is not None)
    assert pybench_cli("env", "--json", "env.json").stdout == ""  # a FILE, as every other --json
    assert json.loads((pybench_cli.cwd / "env.json").read_text())["backends"] == env["backends"]
    assert pybench_cli("env", "--json", "env.json").returncode == 2  # no overwrite without --force
    assert env["machine"]["cores"] >= 1 and len(env["machine"]["load_average_start"]) == 3
    assert env["mpi"]["available"] and env["backends"]["mpi"]
    assert env["launcher"]["flavour"] == "openmpi"
    if env["gpu"]["device_count"] == 0:
        assert env["gpu"]["no_gpu_reason"]
    text = pybench_cli("env").stdout
    assert "mpi:" in text and "gpu" in text and (torch is None or f"torch yes {torch}" in text)
    assert "machine:  load" in text and "core(s)" in text and "BLAS/OpenMP threads" in text


def test_under_a_users_mpiexec_each_process_is_one_rank(tmp_path, native):
    import subprocess
    import sys

    from pybench.measure.launch import find_launcher
    launcher = find_launcher()
    out = tmp_path / "r.json"
    env = launcher.environment()
    env.pop("PYBENCH_RANK_PROCESS")  # as a user's mpirun would start it: only the launcher's own variables
    cmd = launcher.command(2, [sys.executable, "-m", "pybench", "allgather", "--sizes", "4K", "--iters", "6",
                               "--json", str(out), "--np", "7"])
    from pybench.measure.mpi_stderr import START_ATTEMPTS, failed_to_start
    for _ in range(START_ATTEMPTS):  # Open MPI's start-up race, which pybench's own launch retries
        proc = subprocess.run(cmd, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120,
                              stdin=subprocess.DEVNULL)
        if not failed_to_start(proc.stderr):
            break
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.count("# Out of bounds values : 0 OK") == 1  # rank 0 prints, once
    assert json.loads(out.read_text())["world_size"] == 2  # the job's size, not -n


def test_an_interrupted_sweep_keeps_every_completed_size(tmp_path, native):
    import os
    import signal
    import subprocess
    import sys
    import time

    out = tmp_path / "r.json"
    # 1 KiB finishes at once; 256 MiB with many fixed iterations takes far longer than the wait below.
    proc = subprocess.Popen([sys.executable, "-m", "pybench", "allreduce", "--sizes", "1K,256M", "--iters", "400",
                             "--json", str(out)], cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True, start_new_session=True)
    try:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            if out.exists() and json.loads(out.read_text())["records"]:
                break
            time.sleep(0.2)
        os.killpg(proc.pid, signal.SIGKILL)  # the parent, mpiexec and both ranks
    finally:
        proc.communicate(timeout=30)
    doc = json.loads(out.read_text())
    assert doc["finished"] is False
    assert [r["size_bytes"] for r in doc["records"]] == [1024]
    assert doc["records"][0]["wrong"] == 0


def test_progress_only_on_a_terminal(pybench_cli, tmp_path, native):
    import shutil
    import subprocess
    import sys

    from pybench.measure.output_relay import PROGRESS_MARK
    plain = pybench_cli("allreduce", "--sizes", "1K,64K", "--iters", "6")
    assert plain.returncode == 0
    assert PROGRESS_MARK not in plain.stdout and "measuring" not in plain.stderr
    if shutil.which("script") is None:
        pytest.skip("util-linux `script` is not installed; cannot give the run a terminal")
    cmd = f"{sys.executable} -m pybench allreduce --sizes 1K,64K --iters 6"
    tty = subprocess.run(["script", "-qec", cmd, "/dev/null"], cwd=tmp_path, capture_output=True, text=True,
                         timeout=120, stdin=subprocess.DEVNULL)
    assert tty.returncode == 0, tty.stdout
    assert "allreduce: [2/2] measuring 64K ..." in tty.stdout
    assert PROGRESS_MARK not in tty.stdout  # the parent drew it; the marker itself never shows
    # text mode turned every "\r" into a line break; the erase-line codes remain
    rows = [ln for ln in tty.stdout.replace("\x1b[K", "").splitlines() if ln.strip().startswith("65536")]
    assert len(rows) == 1


def test_min_busbw_gates_the_exit_code(pybench_cli, tmp_path, native):
    out = tmp_path / "r.json"
    low = pybench_cli("allreduce", "--sizes", "64K", "--iters", "6", "--min-busbw", "0.001", "--json", str(out))
    assert low.returncode == 0, low.stderr
    high = pybench_cli("allreduce", "--sizes", "64K", "--iters", "6", "--min-busbw", "1e6", "--backend", "mpi")
    assert high.returncode == 1
    lines = _but_busy_warning(high.stderr)
    assert len(lines) == 1 and "below 0.9 x the minimum 1e+06 GB/s" in lines[0]
    assert json.loads(out.read_text())["options"]["min_busbw_gbps"] == 0.001


def test_huge_page_backing_is_recorded(pybench_cli, tmp_path, native):
    fractions = {}
    for setting in ("on", "off"):
        out = tmp_path / f"hp-{setting}.json"
        proc = pybench_cli("allreduce", "--sizes", "4M", "--iters", "6", "--huge-pages", setting, "--json", str(out))
        assert proc.returncode == 0, proc.stderr
        doc = json.loads(out.read_text())
        assert doc["options"]["huge_pages"] is (setting == "on")
        fractions[setting] = doc["records"][0]["huge_page_fraction"]
    assert fractions["off"] == 0.0  # never asked for: never granted
    assert 0.0 <= fractions["on"] <= 1.0  # asking is not getting; the kernel decides, and the file says which


def test_hostile_file_names_and_sizes_run_nothing(pybench_cli, tmp_path, native):
    # Arguments reach the ranks as a list, never through a shell.
    name = "r;touch pwned;$(touch pwned2).json"
    proc = pybench_cli("allreduce", "--sizes", "1K", "--iters", "6", "--backend", "mpi", "--json", name)
    assert proc.returncode == 0, proc.stderr
    assert (tmp_path / name).exists()
    assert not (tmp_path / "pwned").exists() and not (tmp_path / "pwned2").exists()
    proc = pybench_cli("allreduce", "--sizes", "1K;touch pwned3", "--backend", "mpi")
    assert proc.returncode == 2 and not (tmp_path / "pwned3").exists()


def test_an_output_that_is_one_of_the_commands_inputs_is_refused_even_with_force(tmp_path, capsys):
    """`fit LOG -o LOG --force` replaced the log with the model; `predict M --json M --force` the model."""
    from pybench.cli.main import main

    log = tmp_path / "log.txt"
    log.write_bytes((SHARED_DATA / "nccl-tests" / "h100_p5_2node_16gpu_efa_allreduce_srunprefix.txt").read_bytes())
    before = log.read_bytes()
    assert main(["fit", str(log), "--nodes", "2", "-o", str(log), "--force"]) == 2
    assert "is one of this command's inputs" in capsys.readouterr().err and log.read_bytes() == before
    model = tmp_path / "m.json"
    assert main(["fit", str(log), "--nodes", "2", "-o", str(model)]) == 0
    kept = model.read_bytes()
    assert main(["predict", str(model), "--sizes", "1M", "--json", str(model), "--force"]) == 2
    assert "is one of this command's inputs" in capsys.readouterr().err and model.read_bytes() == kept


def test_an_output_folder_that_takes_no_file_is_refused_before_any_output(tmp_path, capsys):
    """/proc answers access(W_OK) yes to root and takes no file: predict printed its table, then failed."""
    from pybench.cli.main import main

    model = tmp_path / "m.json"
    log = SHARED_DATA / "nccl-tests" / "h100_p5_2node_16gpu_efa_allreduce_srunprefix.txt"
    assert main(["fit", str(log), "--nodes", "2", "-o", str(model)]) == 0
    capsys.readouterr()
    assert main(["predict", str(model), "--sizes", "1M", "--json", "/proc/pybench-test.json"]) == 2
    out, err = capsys.readouterr()
    assert out == "" and "cannot write /proc/pybench-test.json" in err


def test_one_run_given_twice_is_refused_by_fit_and_report(tmp_path, capsys):
    """`fit LOG LOG` pooled the log with itself as a second run: twice the points, more pieces, a narrower band,
    and no word; an identical copy under another name did the same."""
    from conftest import refused_in_one_line
    log = SHARED_DATA / "nccl-tests" / "h100_p5_2node_16gpu_efa_allreduce_srunprefix.txt"
    copy = tmp_path / "copy.txt"
    copy.write_bytes(log.read_bytes())
    err = refused_in_one_line(capsys, ["fit", str(log), str(log), "--nodes", "2", "-o", str(tmp_path / "m.json")])
    assert f"{log} is given twice: one run given twice would count as two" in err
    err = refused_in_one_line(capsys, ["fit", str(log), str(copy), "--nodes", "2", "-o", str(tmp_path / "m.json")])
    assert f"{log} and {copy} hold the same bytes" in err
    err = refused_in_one_line(capsys, ["report", str(log), str(copy), "--nodes", "2", "-o", str(tmp_path / "r.html")])
    assert "hold the same bytes" in err and not (tmp_path / "m.json").exists()


def test_predict_at_one_collectives_measured_layout_names_the_others_it_leaves_out(tmp_path, capsys):
    """One H100 cluster's all-to-all and send/recv on 2 x 8 GPUs and five collectives on 4 GPUs of one node: at 16
    ranks on 2 nodes the two measured sweeps answer, and each collective not in the table is named (they were
    dropped in silence)."""
    from conftest import PUBLIC_LOGS

    from pybench.cli.main import main
    out = tmp_path / "two.json"
    assert main(["fit", str(PUBLIC_LOGS / "xr01_h100_N2_G8_002_003.log"), str(PUBLIC_LOGS / "xr01_h100_N1_G4_002.log"),
                 "-o", str(out)]) == 0
    capsys.readouterr()
    assert main(["predict", str(out), "--sizes", "4G", "--world", "16", "--nodes", "2"]) == 0
    captured = capsys.readouterr()
    assert {line.split(" / ")[0] for line in captured.out.splitlines() if " / " in line} == {"# alltoall",
                                                                                          "# sendrecv"}
    for collective in ("allreduce", "allgather", "reducescatter"):
        assert (f"{collective} (float64) was not measured at 16 ranks on 2 node(s) and is not in the table: "
                f"`--collective {collective}` predicts it there") in captured.err
    assert "alltoall (float64) was not" not in captured.err


def test_fit_names_each_fitted_layout_whole(tmp_path, capsys):
    """A one-node and a two-node sweep: "fitted at 8 ranks on one node, 16 ranks on 2 nodes" (it said "fitted at 8,
    16 ranks on 2 nodes", both on 2 nodes as it read)."""
    from conftest import PUBLIC_LOGS

    from pybench.cli.main import main
    logs = [str(PUBLIC_LOGS / name) for name in ("xr01_h100_N1_G8_002.log", "xr01_h100_N2_G8_002_003.log")]
    assert main(["fit", *logs, "-o", str(tmp_path / "m.json")]) == 0
    out = capsys.readouterr().out
    assert "across nodes pairwise, fitted at 8 ranks on one node, 16 ranks on 2 nodes\n" in out
    assert "topology model: allreduce / nccl / algorithm ring, fitted at 8 ranks\n" in out
