"""nccl-tests and OSU users feel at home: their options, their footer line, their p2p layout;
every result says how busy the machine was; help texts carry only what a command uses."""

import json
import subprocess
import sys

import pytest
from conftest import run_pybench

from pybench.cli.main import build_parser
from pybench.collectives import COLLECTIVES

MY_COMMANDS = [*COLLECTIVES, "p2p", "env", "compare", "plot", "report"]


def _subparsers() -> dict:
    parser = build_parser()
    action = next(a for a in parser._actions if a.dest == "command")
    assert isinstance(action.choices, dict)
    return dict(action.choices)


@pytest.mark.mpi
def test_nccl_tests_command_line_runs_as_nccl_tests_reads_it_and_grep_finds_the_average(tmp_path, native):
    out = tmp_path / "ar.json"
    # As a nccl-tests script would: the output piped to grep/awk, field 6 of the line is the value.
    cmd = (f"{sys.executable} -m pybench allreduce -b 8 -e 1M -f 2 -n 20 -w 5 -c 1 --json {out} --backend mpi "
           "| grep 'Avg bus bandwidth' | awk '{print $6}'")
    done = subprocess.run(["bash", "-o", "pipefail", "-c", cmd], cwd=tmp_path, capture_output=True, text=True,
                          timeout=300, stdin=subprocess.DEVNULL)
    assert done.returncode == 0, done.stderr
    doc = json.loads(out.read_text())
    recs = doc["records"]
    assert [r["size_bytes"] for r in recs] == [8 << k for k in range(18)]  # 8 B .. 1 MiB, factor 2
    assert all(r["iterations"] == 20 and r["stop_reason"] == "fixed" and r["wrong"] == r["in_place_wrong"] == 0
               for r in recs)
    assert doc["options"]["warmup"] == 5 and doc["options"]["check"] == 1 and doc["world_size"] == 2
    # as nccl-tests averages: the busbw of both blocks (out of place and in place) of every size
    mean = sum(r["busbw_gbps"] + r["in_place_busbw_gbps"] for r in recs) / (2 * len(recs))
    assert float(done.stdout.strip()) == pytest.approx(mean, rel=1e-5)


@pytest.mark.mpi
def test_every_result_records_the_machine_load_threads_and_governor(pybench_cli, tmp_path, native):
    out = tmp_path / "r.json"
    proc = pybench_cli("allreduce", "--sizes", "1K", "-n", "6", "--backend", "mpi", "--json", str(out),
                       env={"OMP_NUM_THREADS": "1"})
    assert proc.returncode == 0, proc.stderr
    machine = json.loads(out.read_text())["environment"]["machine"]
    assert machine["cores"] >= 1
    assert len(machine["load_average_start"]) == 3 and len(machine["load_average_end"]) == 3
    assert machine["threads"]["variables"]["OMP_NUM_THREADS"] == "1"
    assert "cpu_governor" in machine
    head = [line for line in proc.stdout.splitlines() if line.startswith("# machine: load")]
    assert len(head) == 2 and "at start" in head[0] and "at end" in head[1]
    threads = machine["threads"]
    if threads["source"] == "threadpoolctl":  # the pools as loaded, each held to the variable's 1 thread
        assert threads["pools"] and all(p["threads"] == 1 for p in threads["pools"]), threads
        assert all(f"{p['library']} 1" in head[0] for p in threads["pools"]), head[0]
    else:
        assert "OMP_NUM_THREADS=1" in head[0]


@pytest.mark.mpi
def test_ranks_beyond_the_cores_are_announced(pybench_cli, native):
    from pybench.measure.envinfo import usable_cores
    ranks = usable_cores() + 1
    proc = pybench_cli("allreduce", "--sizes", "1K", "-n", "6", "--backend", "mpi", "--np", str(ranks))
    assert proc.returncode == 0, proc.stderr
    warned = [line for line in proc.stderr.splitlines() if f"{ranks} ranks on {ranks - 1} core(s)" in line]
    assert len(warned) == 1 and f"--np {ranks - 1}" in warned[0]
    assert f"world {ranks} ranks" in proc.stdout


@pytest.mark.mpi
def test_p2p_tables_are_osu_tables_that_the_osu_importer_reads(pybench_cli, tmp_path, native):
    from pybench.model.logs import load_measurements
    proc = pybench_cli("p2p", "--test", "latency,bw", "--sizes", "1,4K", "-n", "10", "--json", str(tmp_path / "p.json"))
    assert proc.returncode == 0, proc.stderr
    assert "# Size          Latency (us)" in proc.stdout and "# Size      Bandwidth (MB/s)" in proc.stdout
    rows = [line.split() for line in proc.stdout.splitlines() if line.strip() and not line.startswith("#")]
    assert [len(r) for r in rows] == [2, 2, 2, 2] and [r[0] for r in rows] == ["1", "4096", "1", "4096"]
    bw = json.loads((tmp_path / "p.bw.json").read_text())["records"][1]
    assert float(rows[3][1]) == pytest.approx(bw["algbw_gbps"] * 1e3, abs=0.006)  # MB/s = 1e6 B/s
    # pybench's own OSU importer reads the latency table back as OSU output
    latency = proc.stdout.split("# OSU MPI Bandwidth")[0]
    log = tmp_path / "lat.txt"
    log.write_text(latency[latency.index("# OSU MPI Latency"):])
    (m,) = load_measurements(log)
    assert m.collective == "p2p_latency" and list(m.size_bytes) == [1, 4096]


def test_p2p_full_columns_are_osus_and_read_back(pybench_cli, tmp_path, native):
    # OSU's -f (pybench's --stats-columns): average, least, most and the iterations; it was silently ignored
    from pybench.model.logs import load_measurements
    proc = pybench_cli("p2p", "--test", "latency", "--sizes", "1,4K", "-n", "10", "-f")
    assert proc.returncode == 0, proc.stderr
    assert "Avg Latency(us)" in proc.stdout and "Min Latency(us)" in proc.stdout and "Iterations" in proc.stdout
    rows = [line.split() for line in proc.stdout.splitlines() if line.strip() and not line.startswith("#")]
    assert [len(r) for r in rows] == [5, 5] and all(float(r[2]) <= float(r[1]) <= float(r[3]) for r in rows)
    log = tmp_path / "lat.txt"
    log.write_text(proc.stdout[proc.stdout.index("# OSU MPI Latency"):])
    (m,) = load_measurements(log)
    assert m.collective == "p2p_latency" and m.time_low_s is not None and list(m.size_bytes) == [1, 4096]


@pytest.mark.parametrize("command", MY_COMMANDS)
def test_help_lists_each_option_with_its_default_and_examples(command):
    p = _subparsers()[command]
    text = p.format_help()
    assert "%%" not in text and "examples:" in (p.epilog or "")
    # the GPU groups come from pybench.cli.gpu, another module's options
    own = [a for g in p._action_groups if not g.title.startswith("GPU") for a in g._group_actions]
    for action in own:
        if action.help is None or action.dest in ("help",) or action.option_strings == []:
            continue
        assert "default" in action.help or action.required, f"{command} {action.option_strings}: no default"


def test_op_only_for_reductions_and_root_only_for_broadcast():
    subs = _subparsers()
    for name, coll in COLLECTIVES.items():
        opts = {o for a in subs[name]._actions for o in a.option_strings}
        dests = {o: a.dest for a in subs[name]._actions for o in a.option_strings}
        # every test takes nccl-tests' -o and -r (as its binaries do); only those with a reduction or a root use them
        assert dests["--op"] == ("op" if coll.reduces else "unused_op"), name
        assert dests["--root"] == ("root" if name == "broadcast" else "unused_root"), name
        assert {"-b", "-e", "-f", "-i", "-n", "-w", "-c", "-G", "-J", "--np"} <= opts
        # nccl-tests' long names too
        assert {"--minbytes", "--maxbytes", "--stepbytes", "--stepfactor", "--iters", "--warmup_iters", "--check",
                "--cudagraph", "--output_file", "--datatype"} <= opts


def test_no_help_of_these_commands_shows_a_doubled_percent_sign():
    subs = _subparsers()
    for name in MY_COMMANDS:
        assert "%%" not in subs[name].format_help(), name


def test_dash_n_is_still_the_rank_count_of_profile():
    from pybench.cli import profile
    assert profile is not None
    p = _subparsers()["profile"]
    n = next(a for a in p._actions if "-n" in a.option_strings)
    assert n.dest == "nprocs"


def test_bad_alias_values_are_one_line_exit_2(tmp_path):
    proc = run_pybench(["allreduce", "-b", "1M", "-e", "1M", "--sizes", "1M"], tmp_path, timeout=30)
    assert proc.returncode == 2 and len(proc.stderr.strip().splitlines()) == 1 and proc.stdout == ""


def test_an_option_of_one_value_given_twice_with_two_values_is_refused(tmp_path, capsys):
    """`fit A B --world 32 --world 64` fitted both logs at 64 ranks (argparse keeps the last value): the 4-node run's
    all-reduce was pooled into the 8-node one's and lost. The same value twice is harmless and taken."""
    from pybench.cli.main import main

    log = tmp_path / "a.out"
    log.write_text("# OSU MPI Allreduce Latency Test v7.3\n# Size       Avg Latency(us)\n4 3.1\n1024 9.5\n65536 90.0\n")
    assert main(["fit", str(log), "--world", "32", "--world", "64", "-o", str(tmp_path / "m.json")]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "--world: given twice (32 and 64)" in err and "--world 32,64" in err
    assert main(["fit", str(log), "--world", "32", "--world", "32", "-o", str(tmp_path / "m.json")]) == 0
    assert "32 ranks" in capsys.readouterr().out
    assert main(["predict", str(tmp_path / "m.json"), "--sizes", "1K", "--sizes", "4K"]) == 2
    assert "--sizes: given twice (1K and 4K): give it once" in capsys.readouterr().err


def test_nccl_tests_flags_given_twice_keep_the_last_as_getopt_does():
    """A harness that appends a user's `-e 8G` to its own `-e 128M` runs nccl-tests at 8G (getopt); so does pybench."""
    args = build_parser().parse_args(["allreduce", "-b", "8", "-e", "128M", "-f", "2", "-e", "8G", "-n", "5", "-n", "20"])
    assert (args.maxbytes, args.iters) == ("8G", 20)
