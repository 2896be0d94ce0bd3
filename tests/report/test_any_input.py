"""`compare` and `report` read what `fit` and `plot` read: nccl-tests and OSU logs, and
pytest-benchmark saves of pybench's suites."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from pybench.cli.main import main
from pybench.report.inputs import load_results, paired_results
from tests.conftest import SHARED_DATA

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"
NCCL_LOG = SHARED_DATA / "nccl-tests" / "a100_2node_16gpu_oci_roce_allreduce.txt"
OSU_LOG = SHARED_DATA / "osu" / "osu_bw_cuda_a100_nvlink_eessi716.txt"


def _save(path: Path, slow: float = 1.0) -> Path:
    """A pytest-benchmark save as pybench's suites write it (raw data kept), two groups."""
    def bench(group, dtype, size, base):
        data = [base * slow * (1 + 0.01 * k) for k in range(20)]
        return {"group": group, "name": f"test_{group}[{size}]", "fullname": "x", "params": {"size": size},
                "param": str(size), "options": {},
                "extra_info": {"collective": group, "backend": "mpi", "world_size": 2, "size_bytes": size,
                               "dtype": dtype, "redop": "sum" if group == "allreduce" else ""},
                "stats": {"min": min(data), "max": max(data), "median": sorted(data)[10], "rounds": 20,
                          "data": data}}
    doc = {"machine_info": {"node": "vm"}, "commit_info": {}, "datetime": "2026-12-01T00:00:00", "version": "5.1.0",
           "benchmarks": [bench("allreduce", "float32", 1024, 2e-6), bench("allreduce", "float32", 65536, 4e-5),
                          bench("allgather", "float32", 65536, 3e-5)]}
    path.write_text(json.dumps(doc))
    return path


def test_a_nccl_tests_log_is_one_result_with_both_columns_as_samples():
    (run,) = load_results(NCCL_LOG)
    assert run.benchmark == "allreduce" and run.world_size == 16 and len(run.records) == 31
    big = run.records[-1]
    assert big.size_bytes == 8589934592 and sorted(big.samples_s) == pytest.approx([67689e-6, 67811e-6])
    assert big.busbw_gbps == pytest.approx(big.algbw_gbps * 2 * 15 / 16)


def test_compare_reads_a_downloaded_nccl_tests_log(capsys):
    assert main(["compare", str(NCCL_LOG), str(NCCL_LOG)]) == 0
    out = capsys.readouterr().out
    assert "0 of 31 size(s) slower" in out


def test_compare_pairs_the_sweeps_of_two_pytest_benchmark_saves_and_gates(tmp_path, capsys):
    base, new = _save(tmp_path / "0001_a.json"), _save(tmp_path / "0002_b.json", slow=1.5)
    assert [(a.benchmark, len(a.records)) for a, _ in paired_results(base, new)[0]] == [("allreduce", 2),
                                                                                     ("allgather", 1)]
    assert main(["compare", str(base), str(new), "--fail-on-regression", "20"]) == 1
    captured = capsys.readouterr()
    assert "# allreduce float32 sum" in captured.out and "# allgather float32" in captured.out
    assert "3 size(s) significantly slower" in captured.err
    assert main(["compare", str(base), str(base), "--fail-on-regression", "20"]) == 0


def test_a_file_that_is_neither_is_one_line_exit_2(tmp_path, capsys):
    bogus = tmp_path / "bogus.json"
    bogus.write_text(json.dumps({"benchmarks": [{"stats": {}}], "machine_info": {}}))
    assert main(["compare", str(bogus), str(NCCL_LOG)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "not one of pybench's" in err[0]


def test_report_reads_logs_and_saves(tmp_path):
    pytest.importorskip("matplotlib", reason="reports need matplotlib (pip install matplotlib)")
    save = _save(tmp_path / "0001_a.json")
    out = tmp_path / "r.html"
    assert main(["report", str(NCCL_LOG), str(OSU_LOG), str(save), "-o", str(out)]) == 0
    html = out.read_text()
    assert "allreduce" in html and "allgather" in html and "None" not in html.replace("none", "")


def test_the_latency_test_is_plotted_as_latency_not_bandwidth():
    pytest.importorskip("matplotlib", reason="plots need matplotlib (pip install matplotlib)")
    from pybench.report.plot import load_series, measurement_figure
    latency = load_series([FIXTURES / "osu_latency_f.txt"])
    assert [s.collective for s in latency] == ["p2p_latency"]
    fig = measurement_figure(latency)
    (ax,) = fig.axes
    assert ax.get_ylabel().startswith("latency (us") and ax.get_title() == "latency against size"
    both = measurement_figure(load_series([FIXTURES / "osu_latency_f.txt", OSU_LOG]))
    busbw_axis = both.axes[0]
    assert [line.get_label() for line in busbw_axis.get_lines()] == [load_series([OSU_LOG])[0].label]


def test_a_log_without_its_rank_count_is_refused_not_reported_at_half_its_bus_bandwidth(tmp_path, capsys):
    """NVIDIA/nccl-tests#78's 256-rank log with its launcher line changed to a count busbw/algbw rules out: the
    report said "0 ranks" and printed busbw = algbw (half the log's), where fit refused it."""
    from tests.conftest import PUBLIC_LOGS
    log = tmp_path / "ar.log"
    log.write_text((PUBLIC_LOGS / "issue78_256gpu_allreduce_c0_2021format.log").read_text().replace("-n 256", "-n 64"))
    assert main(["report", str(log), "-o", str(tmp_path / "r.html")]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "does not say how many ranks" in err and "give --world N" in err
    assert not (tmp_path / "r.html").exists()


def test_a_report_of_another_tools_log_claims_no_check_and_no_precision(tmp_path):
    """A report of an nccl-tests log said `check=0`, "median known to ±0.0%" and "every value exact ... on a quiet
    machine": pybench ran neither its check nor its precision control on those times."""
    from tests.conftest import PUBLIC_LOGS
    out = tmp_path / "r.html"
    assert main(["report", str(PUBLIC_LOGS / "issue78_256gpu_allreduce_c0_2021format.log"), "-o", str(out)]) == 0
    html = out.read_text()
    assert "read from nccl-tests output" in html and "256 ranks" in html
    assert "check=0" not in html and "known to" not in html and "every value exact" not in html


def test_a_report_of_a_log_whose_own_check_failed_says_so_and_what_it_left_out(tmp_path):
    """An nccl-tests 2.17 log counted wrong values at 2M-64M (LL128 corruption): the report dropped those sizes
    silently, said "#wrong: no check recorded", and filled p5/p95 and iters from the log's two replicates. The
    verdict now fails with the sizes left out, the reading's notes are listed, and no percentile is made up."""
    from tests.model.test_logs_in_the_wild import NEW_HEADER, _rows
    rows = _rows(8, False, 1.75).splitlines(keepends=True)
    rows[2] = rows[2][:rows[2].rindex("0")] + "4093\n"  # the in-place half of 4M counted wrong values
    cells = rows[3].split()
    cells[8] = "951005"  # 8M: the out-of-place half too
    cells[12] = "17"
    rows[3] = "  ".join(cells) + "\n"
    log = tmp_path / "wrong.log"
    log.write_text("# Collective test starting: all_reduce_perf\n" + NEW_HEADER + "".join(rows))
    out = tmp_path / "r.html"
    assert main(["report", str(log), "-o", str(out)]) == 0
    html = out.read_text().replace("&#39;", "'")
    assert "Verdict: FAILED, the nccl-tests log's own check: allreduce x8" in html
    assert "8388608 B" in html and "#wrong column counted wrong values" in html and "no check recorded" not in html
    assert "<td>n/a</td><td>n/a</td>" in html.replace(" ", "")  # p5 / p95: the log prints none
