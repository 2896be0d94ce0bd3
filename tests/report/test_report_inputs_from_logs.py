"""`pybench report` of other tools' logs: the rank and node counts a log does not say (``--world``/``--nodes``, as
`fit` takes them), a headline peak that is no anomaly of the fit, and what the log says of its machine."""

from __future__ import annotations

import dataclasses
import html
import re
from pathlib import Path

import pytest

from pybench.cli.main import main
from tests.conftest import SHARED_DATA

pytest.importorskip("matplotlib", reason="reports need matplotlib (pip install matplotlib)")

# EPCC Cirrus docs, Apptainer section ("output similar to the following in your slurm-*.out"), verbatim: 2 nodes x
# 288 ranks, said by the sbatch line above the output, not in the log.
CIRRUS_ALLREDUCE = """Lmod is automatically replacing "cray-mpich/8.1.32" with
"cray-mpich-abi/8.1.32".


# OSU MPI Allreduce Latency Test v7.5
# Datatype: MPI_INT.
# Size       Avg Latency(us)
""" + "".join(f"{size:<12}{t:>16.2f}\n" for size, t in (
    (4, 10.05), (8, 10.84), (16, 11.19), (32, 11.49), (64, 13.08), (128, 17.09), (256, 22.97), (512, 22.23),
    (1024, 23.24), (2048, 26.16), (4096, 60.79), (8192, 75.56), (16384, 80.11), (32768, 120.08), (65536, 214.08),
    (131072, 378.17), (262144, 764.93), (524288, 515.50), (1048576, 1064.92))) + "\n"

# oracle-japan ocitutorials, "OSU Micro-Benchmarks (BM.Optimized3.36)", section 3-1, verbatim: 1 node x 36 ranks.
OCI_ALLTOALL = """$ module load openmpi omb
$ mpirun -n 36 osu_alltoall -x 10 -i 10 -m 1:67108864
# OSU MPI All-to-All Personalized Exchange Latency Test v7.5
# Datatype: MPI_CHAR.
# Size       Avg Latency(us)
""" + "".join(f"{1 << k:<12}{t:>16.2f}\n" for k, t in enumerate((
    10.29, 10.56, 15.24, 36.18, 26.05, 31.65, 114.09, 88.31, 151.46, 200.72, 321.50, 584.21, 57.71, 55.33, 83.89,
    191.30, 713.32, 1644.93, 3760.77, 7431.27, 14171.51, 26630.68, 50215.80, 96730.71, 189185.05, 375799.96,
    747888.64))) + "$\n"

NCCL_LOG = SHARED_DATA / "nccl-tests" / "a100_2node_16gpu_oci_roce_allreduce.txt"


def _log(tmp_path: Path, name: str, text: str) -> Path:
    path = tmp_path / name
    path.write_text(text)
    return path


def _text(path: Path) -> str:
    """The report's words, without markup."""
    return html.unescape(re.sub(r"<[^>]+>", " ", path.read_text(encoding="utf-8")))


def test_report_takes_the_rank_and_node_counts_an_osu_log_does_not_say_as_fit_does(tmp_path, capsys):
    """A report of an OSU log without its launcher line told the user to edit the published log; `fit` takes
    --world/--nodes for it, and now so does `report` (with the model fitted so)."""
    log = _log(tmp_path, "cirrus.txt", CIRRUS_ALLREDUCE)
    out = tmp_path / "r.html"
    assert main(["report", str(log), "-o", str(out)]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "does not say how many ranks ran its allreduce" in err
    assert "--world N" in err and "--nodes N" in err and "launcher line" not in err and not out.exists()
    model = tmp_path / "m.json"
    assert main(["fit", str(log), "--world", "576", "--nodes", "2", "-o", str(model)]) == 0
    capsys.readouterr()
    assert main(["report", str(log), "--world", "576", "--nodes", "2", "--model", str(model), "-o", str(out)]) == 0
    text = _text(out)
    assert "576 ranks" in text and "576 ranks on 2 host(s) per --nodes" in text
    link = re.search(r"link class\s+(\S+)", text)
    assert link is not None and link.group(1) == "inter-node"


@pytest.mark.parametrize("flags", [["--nodes", "2"], ["--world", "576", "--nodes", "7"], ["--world", "576,2"],
                                   ["--world", "0"], ["--nodes", "x"], ["--world", "576", "--nodes", "2,2"]])
def test_report_refuses_a_rank_or_node_count_as_fit_does_in_its_words(tmp_path, capsys, flags):
    log = _log(tmp_path, "cirrus.txt", CIRRUS_ALLREDUCE)
    assert main(["fit", str(log), *flags, "-o", str(tmp_path / "m.json")]) == 2
    fit_err = capsys.readouterr().err.strip()
    assert main(["report", str(log), *flags, "-o", str(tmp_path / "r.html")]) == 2
    report_err = capsys.readouterr().err.strip()
    assert len(report_err.splitlines()) == 1 and "Traceback" not in report_err
    assert report_err == fit_err.replace("pybench fit --help", "pybench report --help")
    assert not (tmp_path / "r.html").exists()


def test_the_headline_peak_is_not_a_size_the_fit_leaves_out_as_an_anomaly(tmp_path, capsys):
    """OCI's OSU all-to-all ran 576K 3x faster than its neighbours' trend by the fit of the time (fit: "rerun to
    check"); the report's headline quoted it as the peak. The headline is the peak of the sizes the fit keeps, the
    anomaly named beside it."""
    spiked = _log(tmp_path, "spike.txt", "$ mpirun -n 4 osu_allreduce\n# OSU MPI Allreduce Latency Test v7.5\n"
                  "# Size       Avg Latency(us)\n" + "".join(
                      f"{1 << k:<12}{(14.0 if k == 16 else 10.0 + (1 << k) / 2000.0):>16.2f}\n" for k in range(2, 21)))
    out = tmp_path / "r.html"
    assert main(["report", str(spiked), "-o", str(out)]) == 0
    text = _text(out)
    headline = re.search(r"Peak bus bandwidth ([\d.]+) GB/s at (\S+) \(allreduce", text)
    assert headline is not None and headline.group(2) != "64K"
    assert re.search(r"64K at [\d.]+ GB/s, 3\.\d\dx faster than its neighbours' trend", text)
    assert "pybench fit` leaves out" in text

    from pybench.model.model_files import load_models
    from pybench.report.inputs import load_results
    from pybench.report.summary import headline_peak, sweep_anomalies

    for log in (spiked, _log(tmp_path, "oci_alltoall.txt", OCI_ALLTOALL)):  # the fit's own sizes, whichever they are
        model = tmp_path / f"{log.stem}.json"
        assert main(["fit", str(log), "-o", str(model)]) == 0
        (fitted,) = load_models(model)
        (run,) = load_results(log)
        named = [a.size_bytes for a in fitted.anomalies]
        assert [a.size_bytes for a in sweep_anomalies(run)] == named
        peak, _ = headline_peak(run)
        assert peak is not None and peak.size_bytes not in named
    assert 64 << 10 in [a.size_bytes for a in load_models(tmp_path / "spike.json")[0].anomalies]


def test_a_report_of_a_clean_sweep_quotes_its_own_peak_and_no_anomaly(tmp_path):
    from pybench.report.inputs import load_results
    from pybench.report.summary import headline_peak

    (run,) = load_results(NCCL_LOG)
    assert headline_peak(run) == (run.peak_busbw(), "")


def test_the_system_row_of_another_tools_log_says_it_is_one_and_what_it_names(tmp_path):
    """The report said "not recorded (a result of an older pybench)" of nccl-tests and OSU logs."""
    osu = _log(tmp_path, "oci_alltoall.txt", OCI_ALLTOALL)
    out = tmp_path / "r.html"
    assert main(["report", str(NCCL_LOG), str(osu), "-o", str(out)]) == 0
    text = _text(out)
    assert "older pybench" not in text
    row = re.search(r" system\s+(not recorded.*?)\s+build ", text)
    assert row is not None
    nccl, osu_says = re.split(r"\s{2,}", row.group(1))
    assert nccl == ("not recorded: another tool's file (nccl-tests), which records no system description; the GPUs "
                    "its ranks ran on, as it names them: NVIDIA A100-SXM4-40GB")
    assert osu_says == "not recorded: another tool's file (osu), which records no system description"


def test_a_world_that_contradicts_a_pybench_results_own_record_is_refused(tmp_path, capsys):
    """`report --world 4` (and `fit --world 4`) of a 2-rank pybench result was accepted and ignored."""
    from tests.conftest import refused_in_one_line
    result = Path(__file__).parents[1] / "fixtures" / "cpu_mpi2_allreduce.json"
    for argv in (["report", str(result), "--world", "4", "-o", str(tmp_path / "r.html")],
                 ["fit", str(result), "--world", "4", "-o", str(tmp_path / "m.json")]):
        err = refused_in_one_line(capsys, argv)
        assert "--world 4: " in err and "is a pybench result of 2 ranks by its own record" in err
    assert main(["report", str(result), "--world", "2", "-o", str(tmp_path / "r.html")]) == 0


def _one_rank_log(tmp_path: Path, factor: int = 0, name: str = "one_rank.log") -> Path:
    """An nccl-tests all-reduce table of one GPU in that tool's layout (no GPU here to run one): busbw 0.00 at
    every size, and no program name, so nothing in it says which collective ran (``factor`` 1: a broadcast's,
    whose busbw is its algbw)."""
    rows = []
    for k in range(3, 28):
        size = 1 << k
        t = 2.0 + size / 1.5e6
        block = f"{t:8.2f} {size / t / 1e3:7.2f} {factor * size / t / 1e3:7.2f}      0"
        rows.append(f"{size:>12} {size // 4:>12}     float     sum      -1 {block} {block}")
    return _log(tmp_path, name, "\n".join([
        "# nThread 1 nGpus 1 minBytes 8 maxBytes 134217728 step: 2(factor) warmup iters: 5 iters: 20",
        "#", "# Using devices", "#  Rank  0 Group  0 Pid  1234 on   host0 device  0 [0x07] NVIDIA H100 80GB HBM3", "#",
        "#                                                              out-of-place                       in-place",
        "#       size         count      type   redop    root     time   algbw   busbw #wrong     time   algbw   busbw "
        "#wrong",
        "#        (B)    (elements)                               (us)  (GB/s)  (GB/s)            (us)  (GB/s)  (GB/s)",
        *rows, "# Out of bounds values : 0 OK", "# Avg bus bandwidth    : 0 ", ""]))


def test_report_takes_the_collective_a_one_rank_log_does_not_say_and_quotes_its_algorithm_bandwidth(tmp_path, capsys):
    """A one-rank table (busbw 0.00) says no collective: `report` told the user to give --collective, which only
    `fit` took; and its headline was a peak bus bandwidth of 0.00 GB/s."""
    log = _one_rank_log(tmp_path)
    assert main(["report", str(log), "-o", str(tmp_path / "refused.html")]) == 2
    assert "give --collective" in capsys.readouterr().err
    out = tmp_path / "r.html"
    assert main(["report", str(log), "--collective", "allreduce", "-o", str(out)]) == 0
    text = " ".join(_text(out).split())
    assert "Peak algorithm bandwidth 1467.18 GB/s at 128M (allreduce, nccl, 1 rank, one_rank.log; bus bandwidth is 0" \
           in text
    assert "Peak bus bandwidth" not in text


def test_a_collective_no_log_can_be_named_is_refused_in_one_line(tmp_path, capsys):
    from tests.conftest import refused_in_one_line
    err = refused_in_one_line(capsys, ["report", str(_one_rank_log(tmp_path)), "--collective", "allredu", "-o",
                                       str(tmp_path / "r.html")])
    assert "collective 'allredu': a log can be named one of allreduce" in err


def test_a_model_of_none_of_the_inputs_is_said_to_be_so_not_headlined_as_theirs(tmp_path, capsys):
    """A 16-rank NCCL all-reduce model given with a 2-rank MPI all-reduce result was headlined as the result's
    fitted model, and its worst size measured against it."""
    model = tmp_path / "m.json"
    assert main(["fit", str(NCCL_LOG), "-o", str(model)]) == 0
    result = Path(__file__).resolve().parents[1] / "fixtures" / "cpu_mpi2_allreduce.json"
    out = tmp_path / "r.html"
    assert main(["report", str(result), "--model", str(model), "-o", str(out)]) == 0
    text = " ".join(_text(out).split())
    assert ("The model given (allreduce/nccl/16 ranks/float32) describes none of these inputs (allreduce/mpi/2 "
            "ranks/float32)" in text), text[:2000]
    assert "Fitted model (" not in text and "against the model" not in text


def test_a_one_rank_broadcast_headline_is_its_bus_bandwidth_which_is_its_algbw(tmp_path):
    """The one-rank rule said 'bus bandwidth is 0 on one rank' of a broadcast too, whose table shows busbw = algbw."""
    out = tmp_path / "b.html"
    assert main(["report", str(_one_rank_log(tmp_path, 1, "bcast.log")), "--collective", "broadcast", "-o",
                 str(out)]) == 0
    text = " ".join(_text(out).split())
    assert "Peak bus bandwidth 1467.18 GB/s at 128M (broadcast, nccl, 1 rank, bcast.log)" in text
    assert "bus bandwidth is 0" not in text


def test_a_result_is_summarised_against_the_model_of_its_own_element_type(tmp_path):
    """A -d all run's float64 result was summarised with the float32 model's alpha and B (the first of the file)."""
    from pybench.measure.results import load_result
    from pybench.model.model_files import load_models
    from pybench.report.summary import model_for
    result = load_result(Path(__file__).resolve().parents[1] / "fixtures" / "cpu_mpi2_allreduce.json")
    as64 = dataclasses.replace(result, dtype="float64")
    model = tmp_path / "m.json"
    assert main(["fit", str(Path(__file__).resolve().parents[1] / "fixtures" / "cpu_mpi2_allreduce.json"), "-o",
                 str(model)]) == 0
    models = load_models(model)
    assert model_for(result, models) is models[0] and model_for(as64, models) is None
