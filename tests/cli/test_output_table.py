"""What the table says about the machine and how it ends, from stored results (no timing)."""

import dataclasses
from pathlib import Path

from pybench.measure.envinfo import MachineLoad, machine_load, thread_settings
from pybench.measure.results import load_result
from pybench.measure.table import busy_warning, footer_lines, header_lines, row_line, threads_text

RUN = Path(__file__).resolve().parents[1] / "fixtures" / "compare_allreduce_a.json"


def _result(load_start, load_end, cores=2, missed=0, backend="mpi"):
    r = load_result(RUN)
    r.environment["machine"] = {"cores": cores, "load_average_start": load_start, "load_average_end": load_end,
                                "threads": {"source": "environment", "variables": {"OMP_NUM_THREADS": "1"}},
                                "cpu_governor": None}
    r.records[:] = [dataclasses.replace(rec, precision_met=k >= missed, stop_reason="budget")
                    for k, rec in enumerate(r.records)]
    r.backend = backend
    return r


def test_a_quiet_run_has_no_warning_and_its_header_says_load_threads_and_governor(capsys):
    r = _result([0.5, 0.4, 0.3], [0.6, 0.4, 0.3])
    assert busy_warning(r) is None
    head = header_lines(r)
    line = next(h for h in head if h.startswith("# machine:"))
    assert "load 0.50 0.40 0.30" in line and "at start, 2 core(s)" in line and "OMP_NUM_THREADS=1" in line
    assert "governor not readable" in line
    foot = footer_lines(r)
    assert capsys.readouterr().err == ""
    assert "# machine: load 0.60 0.40 0.30 (1/5/15 min) at end" in foot


def test_load_above_the_cores_or_most_sizes_missing_the_precision_is_one_stderr_line(capsys):
    busy = busy_warning(_result([3.5, 2, 1], [0.5, 0.5, 0.5])) or ""
    assert "busy (load 3.50 with 2 core(s))" in busy and "uptime" in busy
    noisy = busy_warning(_result([0.1, 0.1, 0.1], [0.1, 0.1, 0.1], missed=4)) or ""
    assert "4 of 5 sizes missed the precision" in noisy and "--time-budget" in noisy
    assert busy_warning(_result([0.1, 0.1, 0.1], [0.1, 0.1, 0.1], missed=2)) is None  # 2 of 5 is not most
    both = _result([0.1, 0.1, 0.1], [5.0, 1, 1], missed=5)
    footer_lines(both)
    err = capsys.readouterr().err.splitlines()
    assert len(err) == 1 and "busy (load 5.00" in err[0] and "5 of 5 sizes" in err[0]


def test_the_footer_ends_with_nccl_tests_average_line():
    r = _result([0.1] * 3, [0.1] * 3)
    avg = sum(rec.busbw_gbps for rec in r.records) / len(r.records)
    line = next(f for f in footer_lines(r) if "Avg bus bandwidth" in f)
    assert line.split()[:5] == ["#", "Avg", "bus", "bandwidth", ":"] and float(line.split()[5]) == float(f"{avg:g}")


def test_only_the_mpi_backend_names_the_mpi_library():
    assert "(Open MPI" in header_lines(_result([0.1] * 3, [0.1] * 3))[0]
    assert "(Open MPI" not in header_lines(_result([0.1] * 3, [0.1] * 3, backend="torch"))[0]


def test_osu_rows_for_p2p_results():
    r = _result([0.1] * 3, [0.1] * 3)
    rec = r.records[0]
    assert row_line(rec, "p2p_latency").split() == [str(rec.size_bytes), f"{rec.time_s * 1e6:.2f}"]
    assert row_line(rec, "p2p_bw").split() == [str(rec.size_bytes), f"{rec.algbw_gbps * 1e3:.2f}"]
    assert row_line(rec, "allreduce").split()[9:] == ["N/A"] * 4  # the in-place block, not measured


def test_threads_are_read_from_the_environment_variables_without_threadpoolctl():
    got = thread_settings({"OMP_NUM_THREADS": "3", "MKL_NUM_THREADS": "2", "PATH": "/bin"})
    assert got["variables"] == {"OMP_NUM_THREADS": "3", "MKL_NUM_THREADS": "2"}
    assert threads_text({"source": "threadpoolctl", "pools": [{"library": "openblas", "threads": 4}]}) == "openblas 4"
    assert threads_text({"source": "environment", "variables": {}}).startswith("library defaults")


def test_the_end_load_is_taken_when_the_result_is_written():
    import json
    m = machine_load()
    assert isinstance(m, MachineLoad) and len(m["load_average_start"]) == 3
    m["load_average_end"] = None
    written = json.loads(json.dumps({"environment": {"machine": m}}, indent=1))
    assert len(written["environment"]["machine"]["load_average_end"]) == 3
