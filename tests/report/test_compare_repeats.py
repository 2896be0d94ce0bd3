"""`compare` on logs that measure a size more than once, or hold several runs.

nccl-tests' ``-N`` run cycles and ``-r all`` roots print every size again in one table, and a log of several
runs holds several tables: the second copy of a size was dropped without a word (a candidate whose second cycle
ran twice as slow passed a 10% regression gate), and a second table of other ranks was never compared.
"""

from __future__ import annotations

import json
import re

from conftest import PUBLIC_LOGS, SHARED_DATA

from pybench.cli.main import main

P5 = SHARED_DATA / "nccl-tests" / "h100_p5_2node_16gpu_efa_allreduce_srunprefix.txt"
ROW = re.compile(r"^\d+:\s+\d+\s+\d+\s+\w+\s+\w+\s+-?\d+\s")


def _slower(line: str, factor: float) -> str:
    """A table row (``0: size count type redop root`` and two halves of time, algbw, busbw, #wrong) with both
    halves ``factor`` times as long."""
    cells = line.split()
    for half in (6, 10):
        cells[half] = f"{float(cells[half]) * factor:.2f}"
        cells[half + 1] = f"{float(cells[half + 1]) / factor:.4f}"
        cells[half + 2] = f"{float(cells[half + 2]) / factor:.4f}"
    return " ".join(cells)


def test_a_size_measured_twice_pools_its_measurements(tmp_path, capsys):
    lines = P5.read_text().splitlines()
    rows = [i for i, line in enumerate(lines) if ROW.match(line)]
    cycles = tmp_path / "cycles.log"  # -N 2: the table again, the second cycle twice as slow
    cycles.write_text("\n".join([*lines[:rows[-1] + 1], *(_slower(lines[i], 2.0) for i in rows),
                                 *lines[rows[-1] + 1:]]) + "\n")
    assert main(["compare", str(P5), str(cycles), "--json", str(tmp_path / "c.json")]) == 0
    out = capsys.readouterr()
    assert "B measured" in out.out + out.err and "more than once" in out.out + out.err
    ratios = [float(x) for x in re.findall(r'"time_ratio": ([\d.]+)', (tmp_path / "c.json").read_text())]
    # the candidate's median at a size is that of both cycles: between once and twice the time, never 1.0
    assert ratios and min(ratios) > 1.2


def test_a_file_of_several_runs_pairs_by_rank_count_and_names_the_rest(tmp_path, capsys):
    eight = PUBLIC_LOGS / "xr01_h100_N1_G8_002.log"
    both = tmp_path / "both.log"
    both.write_text(P5.read_text() + eight.read_text())
    assert main(["compare", str(P5), str(both)]) == 0
    out = capsys.readouterr()
    assert "at 8 ranks has none to pair in the other file: not compared" in out.err
    again = tmp_path / "again.log"  # a rerun appended: which of the two to compare is the user's choice
    again.write_text(P5.read_text() + P5.read_text())
    assert main(["compare", str(P5), str(again)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "holds 2 sweeps of allreduce" in err[0] and "split it" in err[0]


def test_compare_reads_what_fit_reads_and_names_what_it_cannot(tmp_path, capsys):
    import gzip
    text = P5.read_text()
    utf16 = tmp_path / "u16.log"  # Windows PowerShell 5's `>` writes UTF-16 with a byte-order mark
    utf16.write_bytes(b"\xff\xfe" + text.encode("utf-16-le"))
    assert main(["compare", str(P5), str(utf16)]) == 0
    packed = tmp_path / "p5.log.gz"
    packed.write_bytes(gzip.compress(text.encode()))
    capsys.readouterr()
    assert main(["compare", str(P5), str(packed)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "gzip-compressed: gunzip it first" in err[0]


def test_a_gate_over_logs_of_two_samples_per_size_judges_the_sweep_as_a_whole(capsys):
    """A 63x slowdown of a whole sweep (an A100 node alone, then under heavy contention) passed a 10% gate: no
    size's two halves against two can be significant alone. Every size slower beyond the noise band is, by a sign
    test over the sizes."""
    alone = PUBLIC_LOGS / "modal_a100_g8_allreduce.log"
    contended = PUBLIC_LOGS / "modal_a100_g8_allreduce_contended_high.log"
    assert main(["compare", str(alone), str(contended), "--fail-on-regression", "10"]) == 1
    captured = capsys.readouterr()
    assert "the sweep is slower as a whole: 25 of 25 sizes" in captured.err
    assert "across sizes 25 slower and 0 faster" in captured.out
    assert main(["compare", str(alone), str(alone), "--fail-on-regression", "10"]) == 0
    assert main(["compare", str(contended), str(alone), "--fail-on-regression", "10"]) == 0  # faster passes


def test_gather_busbw_is_nccl_tests_own_not_the_algbw():
    """nccl-tests' gather moves (n-1)/n of the data through each rank: a 2-rank gather's report had shown its
    algbw as busbw, twice what the log says (20.19 and 22.34 GB/s at 128 MiB)."""
    from pybench.report.inputs import load_results
    (run,) = load_results(PUBLIC_LOGS / "issue350_a100pcie_2node_gather_linstep.log")
    (row,) = [r for r in run.records if r.size_bytes == 134217728]
    assert run.world_size == 2 and 20.19 <= row.busbw_gbps <= 22.34


def test_a_report_of_another_tools_log_claims_no_check_and_no_interval(tmp_path):
    """An OSU or nccl-tests log read into a report had said "#wrong: 0 OK" and "ci 0.0%" (two samples 21x apart
    included): the check and the interval are not the other tool's to give."""
    import html as html_lib
    out = tmp_path / "r.html"
    assert main(["report", str(P5), "-o", str(out)]) == 0
    text = html_lib.unescape(out.read_text())
    assert "#wrong: no check recorded." in text and "#wrong: 0 OK." not in text
    assert "<td>n/a</td>" in text.replace(" ", "")  # the ci column


def test_one_time_per_size_has_no_interval_and_the_sign_test_judges_the_sweep(tmp_path, capsys):
    """OSU prints one time per size: the bootstrap "95% CI" of two single times was the ratio itself ([1.694,1.694])
    beside "not significant", as if measured exactly. Those sizes show no interval (n/a, null in JSON) and a note
    says why, and a sweep 1.5x as slow throughout is still caught by the sign test across sizes."""
    log = SHARED_DATA / "osu" / "osu_bw_cuda_a100_nvlink_eessi716.txt"
    lines = log.read_text().splitlines()
    slow = [" ".join([c[0], f"{float(c[1]) / 1.5:.2f}"]) if len(c := line.split()) == 2 and c[0].isdigit()
            else line for line in lines]
    candidate = tmp_path / "slow.txt"
    candidate.write_text("\n".join(slow) + "\n")
    out_json = tmp_path / "c.json"
    assert main(["compare", str(log), str(candidate), "--json", str(out_json), "--fail-on-regression", "10"]) == 1
    out = capsys.readouterr().out
    assert "A and B hold one time at some sizes" in out and "the sign test across sizes" in out
    rows = [line for line in out.splitlines() if line.strip() and not line.startswith("#")]
    assert rows and all(" n/a " in line for line in rows)
    sizes = json.loads(out_json.read_text())["sizes"]
    assert all(s["ratio_ci"] == [None, None] for s in sizes)
