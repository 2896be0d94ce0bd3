"""What real programs that parse nccl-tests output need from pybench's mpi runs.

The patterns are those of the programs themselves: PerfKitBenchmarker's nccl_benchmark.py
(GoogleCloudPlatform/PerfKitBenchmarker@946ea31: its ``# nThread ...`` regex, its
``(Rank\\s+\\d+) (.*)`` device lines and its exactly-one ``Avg bus bandwidth``) and
cluster-health-scanner's cluster-validation.sh (GoogleCloudPlatform/cluster-health-scanner@81c525d:
``grep -oP ' on \\K[^\\s]+'`` for the hosts of a test).
"""

from __future__ import annotations

import csv
import json
import re
import socket

import pytest

from pybench.measure.nccl_tests_preamble import rank_lines, size_step
from pybench.measure.rank_devices import CPU_DEVICE, RankDevice
from pybench.measure.result_csv import CSV_COLUMNS, IN_PLACE_COLUMNS, csv_chunks
from pybench.measure.results import load_result
from pybench.model.logs import load_measurements
from tests.cli.test_nccl_tests_dropin import RUN

PKB_CONFIG_RE = re.compile(
    r"# nThread (?P<nThread>\d+) nGpus (?P<nGpus>\d+) minBytes (?P<minBytes>\d+) maxBytes (?P<maxBytes>\d+) "
    r"step: (?P<step>\S+) warmup iters: (?P<warmup_iters>\d+) iters: (?P<iters>\d+) "
    r"agg iters: (?P<agg_iters>\d+) validation: (?P<validation>\d+) graph: (?P<graph>\d+)\s*")
PKB_RANK_RE = re.compile(r"(Rank\s+\d+) (.*)")
CHS_HOST_RE = re.compile(r" on (?=\S)(\S+)")  # grep -oP ' on \K[^\s]+'


def _run(pybench_cli, *args):
    proc = pybench_cli(*args, "--backend", "mpi")
    assert proc.returncode == 0, proc.stderr
    return proc.stdout


@pytest.mark.mpi
def test_the_header_carries_nccl_tests_config_and_rank_lines_with_true_values(pybench_cli, native):
    out = _run(pybench_cli, "allreduce", "--sizes", "1K:16K:4", "-n", "6", "-w", "3", "-c", "1")
    config = PKB_CONFIG_RE.search(out)
    assert config is not None, out
    assert config.groupdict() == {"nThread": "1", "nGpus": "0", "minBytes": "1024", "maxBytes": "16384",
                                  "step": "4(factor)", "warmup_iters": "3", "iters": "6", "agg_iters": "1",
                                  "validation": "1", "graph": "0"}
    ranks = dict(PKB_RANK_RE.findall(out))
    assert sorted(ranks) == ["Rank  0", "Rank  1"]
    host = socket.gethostname()
    pids = set()
    for rest in ranks.values():
        m = re.fullmatch(r"Group  0 Pid +(\d+) on +(\S+) device cpu \[host memory\] .+", rest)
        assert m is not None and m.group(2) == host, rest
        pids.add(int(m.group(1)))
    assert len(pids) == 2 and all(p > 0 for p in pids)  # each rank's own process
    lines = out.splitlines()
    # under pybench's title and the line that names the test, as nccl-tests from 2.17 prints it; the line that
    # ends it after the footer (a validator of nccl-tests' output looks for it)
    assert lines[1] == "# Collective test starting: all_reduce_perf" and lines[2].startswith("# nThread 1 nGpus 0")
    footer = lines.index(next(ln for ln in lines if ln.startswith("# Avg bus bandwidth")))
    assert lines[footer + 1:footer + 4] == ["#", "# Collective test concluded: all_reduce_perf", "#"]
    # the adaptive rule has no fixed count: iters 0, as pybench's -J file writes it
    adaptive = PKB_CONFIG_RE.search(_run(pybench_cli, "allreduce", "--sizes", "1K,3K,4K", "--time-budget", "0.05"))
    assert adaptive is not None and adaptive["iters"] == "0" and adaptive["step"] == "0(list)"


def test_size_steps_are_named_as_nccl_tests_names_them():
    assert [size_step(s) for s in ([8, 16, 32], [1024, 2048, 3072], [1024], [1024, 3072, 4096])] == \
        ["2(factor)", "1024(bytes)", "0(bytes)", "0(list)"]


def test_rank_lines_keep_nccl_tests_widths_so_a_host_reader_takes_the_host():
    lines = rank_lines([RankDevice(4242, "a3-megagpu-8g-0001", CPU_DEVICE, "AMD EPYC 7R13"),
                        RankDevice(4243, "a3-megagpu-8g-0002", 3, "NVIDIA H100 80GB HBM3", "0000:1b:00"),
                        RankDevice(4244, "a3-megagpu-8g-0002", 4, "NVIDIA H100 80GB HBM3")])
    assert lines[0] == "# Using devices"
    assert lines[1] == "#  Rank  0 Group  0 Pid   4242 on a3-megagpu-8g-0001 device cpu [host memory] AMD EPYC 7R13"
    # nccl-tests' own layout (common.cu: "[%04x:%02x:%02x]"), and unknown where a rank read no address
    assert lines[2] == "#  Rank  1 Group  0 Pid   4243 on a3-megagpu-8g-0002 device  3 [0000:1b:00] NVIDIA H100 80GB HBM3"
    assert lines[3] == ("#  Rank  2 Group  0 Pid   4244 on a3-megagpu-8g-0002 device  4 [PCI address not read] "
                        "NVIDIA H100 80GB HBM3")
    assert CHS_HOST_RE.findall("\n".join(lines)) == ["a3-megagpu-8g-0001", "a3-megagpu-8g-0002", "a3-megagpu-8g-0002"]


@pytest.mark.mpi
def test_only_nccl_tests_rank_lines_say_on(pybench_cli, native):
    # allgather's size rounding adds a note to the header; every pybench line must keep ' on ' out
    out = _run(pybench_cli, "allgather", "--sizes", "1K,1004", "-n", "6")
    assert "# note: " in out
    said_on = [ln for ln in out.splitlines() if " on " in ln]
    assert said_on and all(ln.startswith("#  Rank ") for ln in said_on), said_on
    assert set(CHS_HOST_RE.findall(out)) <= {socket.gethostname()}
    (m,) = load_measurements(_saved(pybench_cli, out))  # pybench's own reader still reads its header
    assert (m.world_size, m.link_class) == (2, "intra-node")


def _saved(pybench_cli, out: str):
    path = pybench_cli.cwd / "stdout.txt"
    path.write_text(out)
    return path


@pytest.mark.mpi
def test_d_all_prints_one_table_with_one_footer_over_every_type(pybench_cli, native):
    out = _run(pybench_cli, "allreduce", "--sizes", "1K,4K", "-n", "6", "-d", "all", "--json", "r.json")
    lines = out.splitlines()
    assert sum("out-of-place" in ln for ln in lines) == 1 and sum(ln.startswith("# nThread") for ln in lines) == 1
    (avg_line,) = [ln for ln in lines if "Avg bus bandwidth" in ln]
    assert sum(ln.startswith("# Out of bounds values") for ln in lines) == 1
    busbw = []
    dtypes = ("float32", "float64", "float16", "bfloat16", "int32")
    for dtype in dtypes:
        for rec in json.loads((pybench_cli.cwd / f"r.{dtype}.json").read_text())["records"]:
            busbw += [rec["busbw_gbps"], rec["in_place_busbw_gbps"]]
    assert float(avg_line.split(":")[1]) == pytest.approx(sum(busbw) / len(busbw), rel=1e-5)
    assert lines.index(avg_line) > max(k for k, ln in enumerate(lines) if ln and not ln.startswith("#"))
    assert [ln.split(":")[0] for ln in lines if "Peak bus bandwidth" in ln] == [f"# {d}" for d in dtypes]
    assert f"# dtype all ({', '.join(dtypes)})" in out
    # the gate compares the one average, once
    gated = pybench_cli("allreduce", "--sizes", "1K", "-n", "6", "-d", "all", "--backend", "mpi",
                        "--min-busbw", "1000")
    assert gated.returncode == 1 and gated.stdout.count("FAILED") == 1
    assert gated.stderr.count("average bus bandwidth") == 1


@pytest.mark.mpi
def test_the_csv_appends_the_in_place_figures(pybench_cli, native):
    _run(pybench_cli, "allreduce", "--sizes", "1K,4K", "-n", "6", "--csv", "r.csv", "--json", "r.json")
    with (pybench_cli.cwd / "r.csv").open() as f:
        rows = list(csv.DictReader(f))
    assert list(rows[0])[4:] == CSV_COLUMNS + IN_PLACE_COLUMNS  # the older columns first, where they were
    assert IN_PLACE_COLUMNS == ["in_place_time_s", "in_place_algbw_gbps", "in_place_busbw_gbps", "in_place_wrong"]
    records = json.loads((pybench_cli.cwd / "r.json").read_text())["records"]
    for row, rec in zip(rows, records, strict=True):
        for column in IN_PLACE_COLUMNS:
            assert rec[column] is not None and float(row[column]) == pytest.approx(rec[column], rel=1e-12)


def test_csv_in_place_cells_are_empty_when_not_measured_and_the_one_block_of_a_one_buffer_run():
    r = load_result(RUN)  # measured out of place only
    header, *rows = b"".join(csv_chunks(r, (x.to_dict() for x in r.records))).decode().splitlines()
    assert header.split(",")[-4:] == IN_PLACE_COLUMNS and all(row.endswith(",,,,") for row in rows)
    older = [{k: v for k, v in x.to_dict().items() if not k.startswith("in_place")} for x in r.records]
    assert b"".join(csv_chunks(r, older)).decode().splitlines()[1:] == rows  # a journal of an older pybench
    r.options["in_place"] = True
    first = b"".join(csv_chunks(r, (x.to_dict() for x in r.records))).decode().splitlines()[1]
    rec = r.records[0]
    assert first.split(",")[-4:] == [str(rec.time_s), str(rec.algbw_gbps), str(rec.busbw_gbps), str(rec.wrong)]
