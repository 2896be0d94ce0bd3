"""pybench's collective output read by scripts written for nccl-tests, and nccl-tests' flags.

The readers here work the way cluster health checks and benchmark harnesses read
nccl-tests: the table is found by its ``out-of-place`` header line, fields are taken
by position (awk's $8 = out-of-place busbw, $12 = in-place busbw), and the footers
are matched as exact strings.
"""

from __future__ import annotations

import dataclasses
import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from pybench.cli.main import main
from pybench.measure.nccl_tests_document import entry
from pybench.measure.results import load_result
from pybench.model.logs import load_measurements
from pybench.measure.table import footer_lines, header_lines, nccl_number, nccl_tests_row, row_line
from tests.conftest import SHARED_DATA

RUN = Path(__file__).resolve().parents[1] / "fixtures" / "compare_allreduce_a.json"


def health_check_reader(stdout: str) -> dict:
    """A reader as health checks are written: rows after the ``out-of-place`` header, fields by position."""
    lines = stdout.splitlines()
    start = next(k for k, line in enumerate(lines) if "out-of-place" in line and line.startswith("#"))
    rows = []
    for line in lines[start + 1:]:
        if line.startswith("#"):
            if rows:
                break  # the footer
            continue
        f = line.split()
        rows.append({"size": int(f[0]), "type": f[2], "time_us": float(f[5]), "busbw": float(f[7]),
                     "wrong": f[8], "inplace_busbw": f[11] if len(f) > 11 else None, "nf_minus_1": f[-2]})
    oob = [line for line in lines if line.startswith("# Out of bounds values : ")]
    avg = [line for line in lines if line.startswith("# Avg bus bandwidth    : ")]
    return {"rows": rows, "oob": oob, "avg": float(avg[0].split()[5]) if avg else None}


@pytest.mark.mpi
def test_health_check_readers_read_the_table_and_footer_as_pybench_json_says(tmp_path, native):
    out, nt = tmp_path / "r.json", tmp_path / "nt.json"
    cmd = [sys.executable, "-m", "pybench", "allreduce", "-b", "1", "-e", "64K", "-f", "4", "-g", "1", "-n", "5",
           "-w", "2", "-c", "1", "--backend", "mpi", "--json", str(out), "-J", str(nt)]
    env = {"NCCL_TESTS_MIN_BW": "1e-9"}
    import os
    done = subprocess.run(cmd, cwd=tmp_path, capture_output=True, text=True, timeout=300, stdin=subprocess.DEVNULL,
                          env={**os.environ, **env})
    assert done.returncode == 0, done.stderr
    doc = json.loads(out.read_text())
    recs = doc["records"]
    read = health_check_reader(done.stdout)
    # -b 1 is rounded down to whole float elements as nccl-tests counts them: 1 B holds none
    assert [r["size"] for r in read["rows"]] == [r["size_bytes"] for r in recs] == [4, 16, 64, 256, 1024, 4096,
                                                                                   16384, 65536]
    for row, rec in zip(read["rows"], recs):
        assert row["type"] == "float" and row["wrong"] == "0"
        assert row["time_us"] == pytest.approx(rec["time_s"] * 1e6, rel=0.06, abs=0.006)
        assert row["busbw"] == pytest.approx(rec["busbw_gbps"], rel=0.06, abs=0.006)
        # measured in place too, as nccl-tests measures both: $12 and $(NF-1) are the in-place busbw
        assert row["inplace_busbw"] == row["nf_minus_1"]
        assert float(row["inplace_busbw"]) == pytest.approx(rec["in_place_busbw_gbps"], rel=0.06, abs=0.006)
    assert read["oob"] == ["# Out of bounds values : 0 OK"]
    # nccl-tests' average is over both blocks of every size
    mean = sum(r["busbw_gbps"] + r["in_place_busbw_gbps"] for r in recs) / (2 * len(recs))
    assert read["avg"] == pytest.approx(mean, rel=1e-5)
    assert f"# Avg bus bandwidth    : {mean:g} OK" in done.stdout.splitlines()  # the gate was set and passed
    if shutil.which("awk"):
        awk = subprocess.run(["awk", "/out-of-place/{t=1;next} t&&/^#/{if(n)exit;next} t{n++;print $8}"],
                             input=done.stdout, capture_output=True, text=True, timeout=30)
        assert [float(x) for x in awk.stdout.split()] == [row["busbw"] for row in read["rows"]]
    # pybench's own nccl-tests importer (as `fit` reads downloaded logs) reads the same sizes and times
    from pybench.model.logs import load_measurements
    log = tmp_path / "stdout.txt"
    log.write_text(done.stdout)
    (m,) = load_measurements(log)
    assert list(m.size_bytes) == [r["size_bytes"] for r in recs] and m.world_size == 2
    assert list(m.time_s) == pytest.approx([r["time_s"] for r in recs], rel=0.06, abs=6e-9)
    # -J: nccl-tests' own layout with the same figures
    nt_doc = json.loads(nt.read_text())
    assert nt_doc["version"] == 2 and {"config", "results", "out_of_bounds", "average_bus_bandwidth"} <= set(nt_doc)
    assert [r["size"] for r in nt_doc["results"]] == [r["size_bytes"] for r in recs]
    assert all(r["out_of_place"]["bus_bw"] == rec["busbw_gbps"]
               and r["in_place"]["bus_bw"] == rec["in_place_busbw_gbps"]
               and r["in_place"]["time"] == pytest.approx(rec["in_place_time_s"] * 1e6) and r["in_place"]["nwrong"] == 0
               for r, rec in zip(nt_doc["results"], recs))
    assert nt_doc["out_of_bounds"] == {"count": 0, "okay": "true"}
    assert nt_doc["average_bus_bandwidth"]["okay"] == "true"


@pytest.mark.mpi
@pytest.mark.parametrize("collective", ["allreduce", "allgather", "reducescatter", "alltoall", "broadcast",
                                        "sendrecv"])
def test_mpi_runs_measure_both_blocks_as_nccl_tests_does(pybench_cli, collective, tmp_path, native):
    # nccl-tests measures out of place and in place at every size and prints numbers in both blocks;
    # its readers (float() of each field, regexes wanting numbers) fail on N/A there.
    out, nt = tmp_path / "r.json", tmp_path / "nt.json"
    proc = pybench_cli(collective, "--sizes", "1K:64K", "-c", "1", "-n", "5", "--backend", "mpi", "--json", str(out),
                       "-J", str(nt))
    assert proc.returncode == 0, proc.stderr
    rows = health_check_reader(proc.stdout)["rows"]
    recs = json.loads(out.read_text())["records"]
    assert [r["size"] for r in rows] == [r["size_bytes"] for r in recs] == [1024 << k for k in range(7)]
    for line in proc.stdout.splitlines():
        f = line.split()
        if f and f[0].isdigit():
            assert len(f) == 13 and "N/A" not in f, line
            assert [float(x) for x in f[5:8] + f[9:12]] and f[8] == f[12] == "0", line
    assert all(r["wrong"] == r["in_place_wrong"] == 0 and r["in_place_time_s"] > 0 for r in recs)
    for entry, rec in zip(json.loads(nt.read_text())["results"], recs):
        assert entry["out_of_place"]["time"] == pytest.approx(rec["time_s"] * 1e6)
        assert entry["in_place"]["time"] == pytest.approx(rec["in_place_time_s"] * 1e6)
        assert entry["in_place"]["bus_bw"] == rec["in_place_busbw_gbps"] and entry["in_place"]["nwrong"] == 0


@pytest.mark.mpi
def test_pybench_fits_its_own_minus_j_file_as_the_backend_it_ran(pybench_cli, tmp_path, native):
    # The -J file listed one device per host with rank -1, which pybench's own reader refused, and it was
    # read as NCCL's (CPU ranks then got NVSwitch advice); config.ngpus said 1 where the header says 0.
    nt = tmp_path / "nt.json"
    proc = pybench_cli("allreduce", "--sizes", "1K:64K", "-c", "1", "-n", "5", "--backend", "mpi", "-J", str(nt))
    assert proc.returncode == 0, proc.stderr
    config = json.loads(nt.read_text())["config"]
    assert config["ngpus"] == 0 and "nGpus 0" in proc.stdout
    assert [(d["rank"], d["device"]) for d in config["devices"]] == [(0, -1), (1, -1)]
    (ms,) = load_measurements(nt)
    assert (ms.backend, ms.collective, ms.world_size, ms.link_class) == ("mpi", "allreduce", 2, "intra-node")
    assert "2 ranks on 1 host(s) per config.devices" in ms.notes


@pytest.mark.mpi
def test_a_runs_three_files_fit_to_one_model(pybench_cli, tmp_path, native):
    # The -J file named like an nccl-tests program was read as that program's collective, --backend=mpi was
    # not seen, and the --json file left its in-place block out: one run gave three different models.
    nt, js, log = tmp_path / "all_reduce_perf.json", tmp_path / "r.json", tmp_path / "r.log"
    proc = pybench_cli("allgather", "--sizes", "1K:64K", "-c", "1", "-n", "5", "--backend=mpi", "-J", str(nt),
                       "--json", str(js))
    assert proc.returncode == 0, proc.stderr
    log.write_text(proc.stdout)
    sets = [load_measurements(path)[0] for path in (nt, js, log)]
    for ms in sets:
        assert (ms.collective, ms.backend, ms.world_size) == ("allgather", "mpi", 2), ms.path
        assert any(n.startswith("MPI library: Open MPI") for n in ms.notes), ms.notes
        assert ms.time_in_place_s is not None and len(ms.fit_points()[0]) == 2 * len(ms.size_bytes)


def test_numbers_are_formatted_as_in_a_real_nccl_tests_log():
    log = SHARED_DATA / "nccl-tests" / "a100_2node_16gpu_oci_roce_allreduce.txt"
    rows = [line.split() for line in log.read_text().splitlines()
            if line.strip() and line.split()[0].isdigit() and len(line.split()) == 13]
    assert len(rows) == 31
    for f in rows:
        for token in (f[6], f[7], f[10], f[11]):  # algbw, busbw: the same text
            assert nccl_number(float(token), 6) == token.rjust(6), token
        for token in (f[5], f[9]):  # times: this log's older nccl-tests kept 2 decimals only below 100 us
            text = nccl_number(float(token), 7)
            assert len(text) == 7 and float(text) == pytest.approx(float(token), abs=0.051), token
    # today's nccl-tests rule: as many decimals as 7 characters hold, up to 2
    assert [nccl_number(x, 7) for x in (36.47, 100.1, 1542.04, 18289.0, 123456.0)] == [
        "  36.47", " 100.10", "1542.04", "18289.0", " 123456"]


def _stored(**changes):
    r = load_result(RUN)
    r.records[:] = [dataclasses.replace(rec, **changes) for rec in r.records]
    return r


def test_rows_keep_nccl_tests_positions_with_in_place_and_with_pybench_columns():
    r = _stored()
    header_lines(r)
    rec = r.records[0]
    plain = nccl_tests_row(rec).split()
    assert len(plain) == 13 and plain[2] == "float" and plain[4] == "-1" and plain[9:] == ["N/A"] * 4
    in_place = nccl_tests_row(rec, in_place=True)
    assert in_place.split()[5:] == plain[5:9] and in_place.index(plain[5]) > len(nccl_tests_row(rec)) - 40
    stats = nccl_tests_row(rec, stats_columns=True).split()
    assert len(stats) == 17 and stats[9:13] == ["N/A"] * 4 and stats[15] == str(rec.iterations)
    unchecked = nccl_tests_row(dataclasses.replace(rec, check_iters=0)).split()
    assert unchecked[8] == "N/A"
    # a record measured both ways (the mpi backend): numbers in both blocks, formatted alike
    both = dataclasses.replace(rec, in_place_time_s=2 * rec.time_s, in_place_algbw_gbps=rec.algbw_gbps / 2,
                               in_place_busbw_gbps=rec.busbw_gbps / 2, in_place_wrong=0)
    row = nccl_tests_row(both).split()
    assert len(row) == 13 and row[:9] == plain[:9] and row[9:] == [
        nccl_number(2 * rec.time_s * 1e6, 7).strip(), nccl_number(rec.algbw_gbps / 2, 6).strip(),
        nccl_number(rec.busbw_gbps / 2, 6).strip(), "0"]
    assert len(nccl_tests_row(both, stats_columns=True).split()) == 17
    assert nccl_tests_row(dataclasses.replace(both, check_iters=0)).split()[8::4] == ["N/A", "N/A"]
    # an in-place form with no defined result (nccl's all-to-all, send/recv): timed, its #wrong N/A as nccl-tests'
    unchecked_in_place = dataclasses.replace(both, in_place_wrong=None)
    assert nccl_tests_row(unchecked_in_place).split()[8::4] == ["0", "N/A"]
    assert nccl_tests_row(unchecked_in_place).split()[9:12] == row[9:12]
    (checked, unchecked) = (entry(dataclasses.asdict(x), in_place=False) for x in (both, unchecked_in_place))
    assert checked["in_place"]["nwrong"] == 0.0 and unchecked["in_place"]["nwrong"] is None
    assert unchecked["in_place"]["time"] == checked["in_place"]["time"] > 0
    assert unchecked["out_of_place"]["nwrong"] == 0.0


def test_footer_lines_are_nccl_tests_own_then_pybench_and_the_gate_is_the_average():
    r = _stored()
    mean = sum(rec.busbw_gbps for rec in r.records) / len(r.records)
    foot = footer_lines(r)
    assert foot[:3] == ["# Out of bounds values : 0 OK", f"# Avg bus bandwidth    : {mean:g}", "#"]
    peak = max(rec.busbw_gbps for rec in r.records)
    # between the average and the peak: nccl-tests fails it (average), a peak gate would pass it
    r.options["min_busbw_gbps"] = (mean / 0.9 + peak) / 2 if mean / 0.9 < peak else peak
    assert footer_lines(r)[1].endswith(" FAILED")
    r.options["min_busbw_gbps"] = mean / 0.9 * 0.999
    assert footer_lines(r)[1].endswith(" OK")


def test_the_peak_comes_from_sizes_that_met_the_precision():
    r = _stored(precision_met=True, stop_reason="precision")
    best = max(r.records, key=lambda x: x.busbw_gbps)
    r.records[r.records.index(best)] = dataclasses.replace(best, precision_met=False, stop_reason="budget")
    line = next(f for f in footer_lines(r) if f.startswith("# Peak bus bandwidth"))
    assert f"at {best.size_bytes}" not in line.replace(" ", "") and "met the precision" in line
    none = _stored(precision_met=False, stop_reason="budget")
    assert "none of the" in next(f for f in footer_lines(none) if f.startswith("# Peak"))


def test_osu_rows_mark_the_sizes_that_missed_the_precision():
    rec = _stored().records[0]
    assert row_line(dataclasses.replace(rec, precision_met=False, stop_reason="budget"), "p2p_latency").endswith(" *")
    assert not row_line(dataclasses.replace(rec, stop_reason="fixed"), "p2p_bw").endswith("*")


BAD = [
    (["allreduce", "-t", "4"], "--np 4"),
    (["allreduce", "-t", "x"], "not a whole number"),
    (["allreduce", "-g", "2", "--backend", "mpi"], "--np 2"),
    (["allreduce", "-g", "0"], "1 or more"),
    (["allreduce", "-a", "2"], "-a 3"),
    (["allreduce", "-a", "7"], "not one of nccl-tests' values"),
    (["allreduce", "-z", "2"], "-z 1 (--timing per-op)"),
    (["allreduce", "-z", "1", "--timing", "batched"], "give one of them"),
    (["allreduce", "-I", "2"], "not one of nccl-tests' values"),
    (["allreduce", "-p", "1"], "--parallel_init"),
    (["allreduce", "-C", "1"], "--backend mpi"),
    (["allreduce", "-R", "1"], "--huge-pages"),
    (["allreduce", "-N", "3"], "pybench compare"),
    (["allreduce", "-m", "4"], "--timing"),
    (["allreduce", "-u", "1"], "page-aligned"),
    (["allreduce", "-T", "x"], "not a number"),
    (["allreduce", "-J", "/nonexistent/dir/x.json"], "does not exist"),
    (["allreduce", "-d", "bogus"], "unknown dtype"),
    (["p2p", "-z", "P99"], "time_p99_s"),
    (["p2p", "-T", "mpi_int"], "MPI_CHAR"),
    (["p2p", "-M", "1G"], "memory"),
    (["p2p", "-d", "cuda"], "p2p --matrix"),
    (["p2p", "-i", "0"], "must be at least 1"),
    (["p2p", "-x", "-1"], "must be at least 0"),
    (["p2p", "-W", "0"], "must be at least 1"),
    (["p2p", "-m", "8:1K", "--sizes", "1:8"], "give one of them"),
    (["p2p", "-m", "8:zz"], "not a size"),
    (["p2p", "--test", "latency", "--min-busbw", "1"], "--test bw"),
    (["p2p", "--test", "latency", "-W", "8"], "the latency test sends one at a time"),
    (["p2p", "D", "H"], "p2p --matrix"),
    (["p2p", "X", "Y"], "two of H (host)"),
    (["allreduce", "--in-place", "--backend", "mpi"], "does nothing"),
    (["allreduce", "--gpus", "2", "--backend", "mpi"], "does nothing"),
    (["allreduce", "--nccl-lib", "/x", "--backend", "mpi"], "does nothing"),
]


@pytest.mark.parametrize("argv,says", BAD, ids=[" ".join(a) for a, _ in BAD])
def test_bad_input_to_each_new_flag_is_one_line_exit_2(argv, says, capsys, monkeypatch):
    monkeypatch.delenv("NCCL_TESTS_MIN_BW", raising=False)
    for var in ("PYBENCH_NCCL_LIB", "PYBENCH_GPUS", "PYBENCH_NCCL_IN_PLACE"):
        monkeypatch.setenv(var, "")  # recorded, so what the CLI exports for its ranks is undone after the test
        monkeypatch.delenv(var)
    assert main(argv) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("pybench: error:") and says in err[0], err


def test_a_malformed_nccl_tests_min_bw_is_one_line_exit_2(capsys, monkeypatch):
    monkeypatch.setenv("NCCL_TESTS_MIN_BW", "fast")
    assert main(["allreduce", "-b", "8", "-e", "16"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "NCCL_TESTS_MIN_BW='fast'" in err[0]


def _plans(argv, monkeypatch):
    """The plans the CLI would run, without running them."""
    from pybench.cli import main as cli_main
    seen = {}

    def capture(args):
        from pybench.cli import compat_flags
        if args.command == "p2p":
            compat_flags.apply_osu_flags(args)
            seen["plans"] = cli_main._p2p_plans(args)
        else:
            compat_flags.apply_nccl_tests_flags(args, False)
            seen["plans"] = cli_main._collective_plans(args)
        seen["args"] = args
        return 0
    monkeypatch.setattr(cli_main, "_run_measurement", capture)
    parser = cli_main.build_parser()
    for name in ("allreduce", "p2p", "allgather"):
        parser._subparsers._group_actions[0].choices[name].set_defaults(func=capture)
    from pybench.cli.parser import run
    assert run(parser, argv, "") == 0
    return seen


def test_nccl_tests_flags_take_nccl_tests_meanings(monkeypatch, tmp_path):
    monkeypatch.delenv("NCCL_TESTS_MIN_BW", raising=False)
    seen = _plans(["allreduce", "-b", "1", "-e", "8", "-f", "2", "-z", "1", "-I", "1", "-a", "3", "-t", "1",
                   "-g", "1", "-T", "7", "-p", "0"], monkeypatch)
    (plan,) = seen["plans"]
    assert plan.config.sizes == (4, 8) and plan.config.timing == "per-op" and plan.stats_columns
    assert seen["args"].timeout == 7
    seen = _plans(["allgather", "-d", "all", "-J", str(tmp_path / "nt.json"), "--sizes", "64K"], monkeypatch)
    assert [p.config.dtype for p in seen["plans"]] == ["float32", "float64", "float16", "bfloat16", "int32"]
    assert {p.nccl_tests_json for p in seen["plans"]} == {tmp_path / "nt.json"}  # one file, as nccl-tests writes
    monkeypatch.setenv("NCCL_TESTS_MIN_BW", "12.5")
    assert _plans(["allreduce", "--sizes", "1K"], monkeypatch)["plans"][0].min_busbw_gbps == 12.5
    assert _plans(["allreduce", "--sizes", "1K", "--min-busbw", "3"], monkeypatch)["plans"][0].min_busbw_gbps == 3


def test_osu_flags_take_osu_meanings(monkeypatch):
    monkeypatch.delenv("NCCL_TESTS_MIN_BW", raising=False)
    seen = _plans(["p2p", "--test", "bw", "-m", "8:1K", "-i", "100", "-x", "10", "-W", "32", "-f", "-c"],
                  monkeypatch)
    (plan,) = seen["plans"]
    cfg = plan.config
    assert cfg.sizes == (8, 16, 32, 64, 128, 256, 512, 1024) and cfg.stop.fixed_iters == 100
    assert cfg.warmup == 10 and cfg.window == 32 and plan.stats_columns and cfg.check_iters == 2
    assert _plans(["p2p", "-m", "64"], monkeypatch)["plans"][0].config.sizes[:2] == (1, 2)


def test_j_never_overwrites_as_nccl_tests(tmp_path):
    from pybench.measure.nccl_tests_json import claim_path
    first = claim_path(tmp_path / "o.json")
    second = claim_path(tmp_path / "o.json")
    third = claim_path(tmp_path / "o.json")
    assert [first.name, second.name, third.name] == ["o.json", "o.json.0", "o.json.1"]


# Published command lines, each as its source prints it, the tool's name replaced by pybench's command
# (all_reduce_perf -> allreduce, all_gather_perf -> allgather, osu_bw / osu_latency -> p2p --test bw / latency).
# The second field is None where the line runs unchanged, else what the one refusal line must name.
PUBLISHED = [
    # https://github.com/oracle-quickstart/oci-hpc-oke/blob/8da1841c9e4774ff996017b9114ea8c743d6256e/README.md
    # (the log in tests/fixtures/shared_data/nccl-tests/a100_2node_16gpu_oci_roce_allreduce.txt):
    # mpirun ... all_reduce_perf -b 8 -e 8G -f 2 -g 1
    ("allreduce -b 8 -e 8G -f 2 -g 1", None),
    # https://github.com/FlagOpen/FlagPerf/blob/main/base/toolkits/interconnect-MPI_intraserver/denglin/GS40/main.sh:
    # mpirun --allow-run-as-root -np 8 all_reduce_perf -t 1 -g 1 -b 2M -e 32M -d float -o sum
    ("allreduce -t 1 -g 1 -b 2M -e 32M -d float -o sum", None),
    # https://github.com/aws/deep-learning-containers/blob/master/test/sagemaker_tests/healthcheck_tests/nccl_test.sh
    # (a health check): all_reduce_perf -b 8 -e 128M -f 2 -g 8
    ("allreduce -b 8 -e 128M -f 2 -g 8", "--np 8"),
    # https://github.com/NVIDIA/nccl-tests/issues/37 (the log in
    # tests/fixtures/shared_data/nccl-tests/v100_dgx1_8gpu_allgather_4g_issue37_oldformat.txt):
    # all_gather_perf -g 8 -b 4294967296 -e 4294967296 -n 100
    ("allgather -g 8 -b 4294967296 -e 4294967296 -n 100", "--np 8"),
    # https://github.com/EESSI/software-layer/pull/716 (the log in
    # tests/fixtures/shared_data/osu/osu_bw_cuda_a100_nvlink_eessi716.txt): mpirun -np 2 osu_bw -d cuda -m 33554432 D D
    ("p2p --test bw -d cuda -m 33554432 D D", "p2p --matrix"),
    # https://github.com/aws/aws-parallelcluster/blob/develop/tests/integration-tests/tests/networking/
    # test_cluster_networking/test_cluster_in_no_internet_subnet/osu_pt2pt_submit_openmpi.sh:
    # mpirun --map-by ppr:1:node /shared/openmpi/osu-micro-benchmarks-.../mpi/pt2pt/osu_latency
    ("p2p --test latency", None),
]
# What each line that runs must measure: (first size, last size, count, dtype, fixed iterations or None).
RUNS_AS = {
    "allreduce -b 8 -e 8G -f 2 -g 1": (8, 8 << 30, 31, "float32", None),
    "allreduce -t 1 -g 1 -b 2M -e 32M -d float -o sum": (2 << 20, 32 << 20, 31, "float32", None),
    "p2p --test latency": (1, 4 << 20, 23, "float32", None),
}


@pytest.mark.parametrize("line,refused", PUBLISHED, ids=[line for line, _ in PUBLISHED])
def test_published_command_lines_run_unchanged_or_are_refused_naming_the_equivalent(line, refused, monkeypatch,
                                                                                   capsys):
    from pybench.cli.gpu import nccl_unavailable_reason
    monkeypatch.delenv("NCCL_TESTS_MIN_BW", raising=False)
    if refused is None:
        (plan, *_) = _plans(line.split(), monkeypatch)["plans"]
        sizes = plan.config.sizes
        assert (sizes[0], sizes[-1], len(sizes), plan.config.dtype, plan.config.stop.fixed_iters) == RUNS_AS[line]
        return
    if refused == "--np 8" and nccl_unavailable_reason() is None:
        pytest.skip("a GPU is here: -g 8 would run, not be refused")
    assert main(line.split()) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and refused in err[0], err


def test_a_collective_run_on_one_buffer_is_printed_in_the_in_place_block(monkeypatch):
    from pybench.measure.backends.nccl import IN_PLACE_ENV
    from pybench.measure.runner import runs_in_place
    # torch measures out of place (all-reduce: input copied into the output, then reduced) and then in place
    assert not runs_in_place("torch", "allreduce") and not runs_in_place("torch", "allgather")
    assert not runs_in_place("mpi", "allreduce")
    monkeypatch.delenv(IN_PLACE_ENV, raising=False)
    assert not runs_in_place("nccl", "allreduce")
    monkeypatch.setenv(IN_PLACE_ENV, "1")
    assert runs_in_place("nccl", "allreduce")
    r = _stored()
    r.options["in_place"] = True
    header_lines(r)
    fields = row_line(r.records[0]).split()
    # a reader of fields by position finds no out-of-place figure and the in-place ones at $6..$9
    assert len(fields) == 9 and row_line(r.records[0])[52:84].strip() == ""


def test_j_document_carries_nccl_version_step_and_null_blocks_as_nccl_tests():
    import datetime as dt

    from pybench.measure.nccl_tests_json import nccl_tests_document
    r = _stored()
    r.environment["backend"] = {"nccl": {"version_code": 22809, "version": "2.28.9"}}
    r.options["in_place"] = True
    doc = nccl_tests_document(r, dt.datetime(2026, 12, 1, 12), None)
    assert doc["nccl_version"] == 22809 and "end_time" not in doc and doc["start_time"] == "2026-12-01 12:00:00"
    sizes = [rec.size_bytes for rec in r.records]
    step = sizes[1] // sizes[0]
    assert doc["config"].get("step_factor") == step or doc["config"].get("step_bytes") == sizes[1] - sizes[0]
    assert all(row["out_of_place"] is None and row["in_place"]["time"] > 0 for row in doc["results"])
    assert all(row["root"] == "    -1" for row in doc["results"])  # nccl-tests writes root as "%6i"


def test_the_p2p_gate_applies_to_the_bandwidth_tests_only(monkeypatch):
    monkeypatch.setenv("NCCL_TESTS_MIN_BW", "5")  # nccl-tests' variable gates the collectives, not OSU's tests
    plans = _plans(["p2p", "--test", "latency,bw", "--min-busbw", "2"], monkeypatch)["plans"]
    assert [(p.config.benchmark, p.min_busbw_gbps) for p in plans] == [("p2p_latency", None), ("p2p_bw", 2)]
    assert _plans(["p2p", "--test", "bw"], monkeypatch)["plans"][0].min_busbw_gbps is None


def test_pybench_statistics_are_always_in_the_csv():
    from pybench.measure.results import result_csv
    r = _stored()
    header, first = result_csv(r).splitlines()[:2]
    cols = header.split(",")
    for name in ("time_p5_s", "time_p95_s", "iterations", "time_ci_low_s", "time_ci_high_s"):
        assert name in cols, name
    row = dict(zip(cols, first.split(",")))
    assert float(row["time_ci_low_s"]) == r.records[0].time_ci_low_s


@pytest.mark.parametrize("timing,graph", [("batched", 0), ("graph", 1), ("host-graph", 1), ("host", 0)])
def test_j_config_graph_is_what_the_header_line_says(timing, graph):
    # nccl-tests' -G (host-graph here) printed graph: 1 in the header and wrote config.graph 0 to -J
    import datetime as dt

    from pybench.measure.nccl_tests_json import nccl_tests_document
    from pybench.measure.nccl_tests_preamble import config_line
    r = _stored()
    r.timing = timing
    doc = nccl_tests_document(r, dt.datetime(2026, 12, 1, 12), None)
    assert doc["config"]["graph"] == graph and f"graph: {graph}" in config_line(r, [1024, 2048], 0)


@pytest.mark.mpi
def test_every_type_of_a_d_all_run_writes_the_headers_ngpus(pybench_cli, tmp_path, native):
    proc = pybench_cli("allgather", "--sizes", "1K:4K", "-c", "1", "-n", "3", "--backend", "mpi", "-d", "all",
                       "-J", str(tmp_path / "d.json"))
    assert proc.returncode == 0, proc.stderr
    assert sorted(p.name for p in tmp_path.glob("d*.json")) == ["d.json"] and "nGpus 0" in proc.stdout
    assert json.loads((tmp_path / "d.json").read_text())["config"]["ngpus"] == 0  # (one file over every type)


def test_a_host_name_that_would_forge_table_lines_is_refused(pybench_cli):
    # PYBENCH_HOSTNAME reached the world line and every Rank line: a newline there forged an average line.
    import os
    env = dict(os.environ, PYBENCH_HOSTNAME="evil\n# Avg bus bandwidth    : 999")
    proc = pybench_cli("allreduce", "--backend", "torch", "--sizes", "4K:16K", "-n", "3", env=env, timeout=300)
    assert proc.returncode == 2 and "Avg bus bandwidth" not in proc.stdout
    assert "is not one printable word" in proc.stderr.strip().splitlines()[-1]


def test_a_j_file_whose_test_never_began_is_a_valid_document_that_says_so(pybench_cli, tmp_path):
    # -d all claims every type's -J name at the start; a run stopped (Ctrl-C) before a type began left that
    # file empty, which every JSON reader of it fails on. It now holds a document with no rows and why.
    from pybench.measure.nccl_tests_json import NOT_STARTED, NcclTestsJsonWriter
    writer = NcclTestsJsonWriter(tmp_path / "nt.json", ["pybench", "allreduce", "-d", "all"])
    doc = json.loads(writer.path.read_text())
    assert doc["results"] == [] and doc["errors"] == [NOT_STARTED] and doc["args"][1] == "allreduce"
    proc = pybench_cli("fit", str(writer.path), "-o", str(tmp_path / "m.json"))
    assert proc.returncode == 2 and "no rows" in proc.stderr and "stopped before this test began" in proc.stderr
    assert len(proc.stderr.strip().splitlines()) == 1
    writer.release()  # a run that refused to start leaves nothing
    assert not writer.path.exists()


@pytest.mark.mpi
def test_one_set_of_nccl_tests_flags_runs_every_test_as_nccl_tests_takes_it(pybench_cli, native):
    """CloudAI passes `--op sum --root 0` to every nccl-tests binary: pybench took -o for the collectives that
    reduce and -r for broadcast only, and refused the rest, where nccl-tests takes (and ignores) them for all."""
    for collective in ("allgather", "alltoall", "sendrecv"):
        proc = pybench_cli(collective, "--backend", "mpi", "-b", "1K", "-e", "1K", "--op", "sum", "--root", "0",
                           "-n", "5", "-w", "1")
        assert proc.returncode == 0 and "not used" not in proc.stderr, proc.stderr  # (defaults: nothing to say)
    proc = pybench_cli("allgather", "--backend", "mpi", "-b", "1K", "-e", "1K", "-o", "max", "-r", "1", "-n", "5")
    assert proc.returncode == 0, proc.stderr
    assert proc.stderr.count("pybench: note: allgather has no reduction op or root: -o max and -r 1 not used") == 1
    proc = pybench_cli("allgather", "--backend", "mpi", "-b", "1K", "-e", "1K", "-o", "foo")
    assert proc.returncode == 2 and "unknown reduction op 'foo'" in proc.stderr
    # and nccl-tests' default -a 1 (CloudAI passes --average 1): taken, reported as -a 3, and said so once
    proc = pybench_cli("allreduce", "--backend", "mpi", "-b", "1K", "-e", "1K", "--average", "1", "-n", "5")
    assert proc.returncode == 0, proc.stderr
    assert proc.stderr.count("pybench: note: -a 1 (the mean of the ranks' times, nccl-tests' default) is reported "
                             "as -a 3") == 1


@pytest.mark.mpi
def test_minus_d_all_writes_one_minus_j_file_over_every_type_as_nccl_tests(pybench_cli, tmp_path, native):
    """`-d all -J FILE` wrote FILE-stem.float32.json ... and no FILE, which a client opening the path it asked for
    (nccl-tests' tools/analyze_perf_json.py) could not find: nccl-tests writes one file, every type's rows in one
    results list, its average over them all, as its stdout footer."""
    out = tmp_path / "all.json"
    proc = pybench_cli("allreduce", "--backend", "mpi", "-b", "1K", "-e", "4K", "-f", "2", "-n", "5", "-w", "1",
                       "-d", "all", "-J", str(out))
    assert proc.returncode == 0, proc.stderr
    assert sorted(p.name for p in tmp_path.glob("all*")) == ["all.json"]
    assert proc.stdout.count(f"# Writing JSON output to {out}") == 1
    doc = json.loads(out.read_text())
    assert [r["type"] for r in doc["results"]] == [t for t in ("float", "double", "half", "bfloat16", "int32")
                                                   for _ in range(3)]
    footer = next(line for line in proc.stdout.splitlines() if line.startswith("# Avg bus bandwidth"))
    assert float(footer.split(":")[1]) == pytest.approx(doc["average_bus_bandwidth"]["bandwidth"], rel=1e-5)
    assert doc["errors"] == [] and "end_time" in doc


@pytest.mark.mpi
def test_the_notes_of_flags_taken_but_not_used_are_said_under_the_users_own_launcher(tmp_path, native):
    """Under mpirun (CloudAI's way) no pybench process starts the ranks: the -a 1 and -o notes were never said.
    Rank 0 says them, once, as it says the size-rounding note."""
    from pybench.measure.launch import find_launcher
    launcher = find_launcher()
    cmd = launcher.command(2, [sys.executable, "-m", "pybench", "allgather", "--backend", "mpi", "-b", "1K", "-e",
                               "1K", "-n", "5", "-o", "max", "-a", "1"])
    proc = subprocess.run(cmd, cwd=tmp_path, env=launcher.environment(), capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    assert proc.stderr.count("pybench: note: -a 1 (the mean of the ranks' times") == 1
    assert proc.stderr.count("pybench: note: allgather has no reduction op: -o max not used") == 1


def test_a_zero_step_beside_a_factor_is_taken_as_nccl_tests_takes_it(monkeypatch, capsys):
    """NVIDIA CloudAI's shipped configs pass `--stepbytes 0 --stepfactor 2`: nccl-tests never uses the step beside a
    factor, and pybench had refused the 0. Without a factor it never moves past -b: refused in one line."""
    monkeypatch.delenv("NCCL_TESTS_MIN_BW", raising=False)
    (plan,) = _plans(["allreduce", "--minbytes", "1K", "--maxbytes", "8K", "--stepbytes", "0", "--stepfactor", "2"],
                     monkeypatch)["plans"]
    assert plan.config.sizes == (1024, 2048, 4096, 8192)
    assert main(["allreduce", "-b", "1K", "-e", "8K", "-i", "0"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "never moves past -b" in err[0], err


@pytest.mark.parametrize("name, value", [("NCCL_TESTS_SPLIT_MASK", "0x7"), ("NCCL_TESTS_SPLIT", "MOD 2"),
                                         ("NCCL_TESTS_SPLIT_MASK", "0b0")])  # (hexadecimal, as nccl-tests reads it)
def test_split_groups_are_refused_not_measured_as_one_collective(monkeypatch, capsys, name, value):
    """nccl-tests' NCCL_TESTS_SPLIT_MASK / NCCL_TESTS_SPLIT time one collective per group of ranks at once (CloudAI
    sets a mask of 0x7); pybench had timed one over every rank and exited 0. A mask of 0 splits nothing."""
    monkeypatch.delenv("NCCL_TESTS_MIN_BW", raising=False)
    monkeypatch.setenv(name, value)
    assert main(["allreduce", "-b", "1K", "-e", "1K"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and f"{name}={value}" in err[0] and "one collective per group" in err[0], err
    monkeypatch.setenv("NCCL_TESTS_SPLIT_MASK", "0")
    monkeypatch.delenv("NCCL_TESTS_SPLIT", raising=False)
    assert _plans(["allreduce", "-b", "1K", "-e", "1K"], monkeypatch)["plans"]
    monkeypatch.setenv("NCCL_TESTS_SPLIT", "MOD 8")  # nccl-tests reads the split only without a mask
    assert _plans(["allreduce", "-b", "1K", "-e", "1K"], monkeypatch)["plans"]
    monkeypatch.delenv("NCCL_TESTS_SPLIT_MASK")
    for one_group in ("AND 0", "& 0", "AND0", "MOD 1"):  # every rank in group 0
        monkeypatch.setenv("NCCL_TESTS_SPLIT", one_group)
        assert _plans(["allreduce", "-b", "1K", "-e", "1K"], monkeypatch)["plans"]
