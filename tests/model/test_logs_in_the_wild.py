"""Log shapes met in public issues, CI fixtures and docs, each written here in that shape (rows
are ours): an srun-labelled 32-rank all-gather whose 2-decimal busbw/algbw reads 31 ranks, an
old all_to_all_perf that leaves its redop cell blank, OSU tests (size 0 first, several in one
log, osu_mbw_mr, vector and one-sided tests, launcher labels), a rounded ratio that cannot tell
hundreds of ranks apart, values printed with fewer decimals, a run killed mid-row, a 1-GPU
sweep, NCCL INFO lines inside a row and MPICH rank labels, NCCL 1.x's test programs, rccl-tests'
JSON lines, and two processes each running their own test."""

from __future__ import annotations

import json

import numpy as np
import pytest
from conftest import PUBLIC_LOGS, broadcast_g8_json

from pybench.cli.main import main as main_for_tests
from pybench.errors import FileFormatError
from pybench.model.logs import load_measurements, sniff_format

NEW_HEADER = ("#       size         count      type   redop    root     time   algbw   busbw #wrong"
              "     time   algbw   busbw #wrong\n"
              "#        (B)    (elements)                               (us)  (GB/s)  (GB/s)"
              "            (us)  (GB/s)  (GB/s)\n")


def test_the_per_rank_count_gives_the_exact_world_where_busbw_is_rounded(tmp_path):
    # 32 ranks: busbw/algbw = 31/32 = 0.969, printed 0.59/0.61 = 0.967 -> 30.6 -> "31 ranks".
    # size = count x ranks x 4 B says 32 exactly (every era of all-gather, reduce-scatter, all-to-all).
    rows = "".join(f" 0: {s:>12} {s // 128:>12}     float    none      -1   {t:8.1f}    {a:5.2f}    {b:5.2f}      0"
                   f"   {t:8.1f}    {a:5.2f}    {b:5.2f}      0\n"
                   for s, t, a, b in ((65536, 107.5, 0.61, 0.59), (131072, 210.0, 0.62, 0.60),
                                      (262144, 211.1, 1.24, 1.20), (524288, 692.3, 0.76, 0.73)))
    path = tmp_path / "ag32.log"
    path.write_text("".join(f" 0: {ln}\n" for ln in NEW_HEADER.splitlines()) + rows)
    (m,) = load_measurements(path)
    assert (m.collective, m.world_size) == ("allgather", 32)
    assert any("size = count x ranks x type size" in n for n in m.notes)
    # all-reduce's count is the whole buffer: no world from it, the ratio stands
    ar = NEW_HEADER + "".join(f"{s:>12} {s // 4:>12} float sum -1 {t} {s / t / 1e3:.2f} {s / t / 1e3 * 1.75:.2f} 0 "
                              f"{t} {s / t / 1e3:.2f} {s / t / 1e3 * 1.75:.2f} 0\n"
                              for s, t in ((1 << 20, 40.0), (4 << 20, 80.0), (16 << 20, 200.0)))
    path.write_text(ar)
    assert load_measurements(path)[0].world_size == 8


def test_old_all_to_all_with_a_blank_redop_cell(tmp_path):
    text = ("# nThread 1 nGpus 8 minBytes 1 maxBytes 1048576 step: 2(factor) warmup iters: 5 iters: 20 validation: 0\n"
            "#       size         count    type   redop     time   algbw   busbw  error"
            "     time   algbw   busbw  error\n"
            "#        (B)    (elements)                     (us)  (GB/s)  (GB/s)"
            "            (us)  (GB/s)  (GB/s)\n"
            "           0             0   float             1.63    0.00    0.00    N/A"
            "     1.38    0.00    0.00    N/A\n")
    for size, t in ((262144, 40.0), (524288, 60.0), (1048576, 100.0)):
        alg = size / t / 1e3
        text += (f"{size:>12} {size // 32:>13}   float   {t:14.2f}  {alg:6.2f}  {alg * 7 / 8:6.2f}    N/A "
                 f"{t:8.2f}  {alg:6.2f}  {alg * 7 / 8:6.2f}    N/A\n")
    path = tmp_path / "a2a_old.log"
    path.write_text(text)
    (m,) = load_measurements(path, collective="alltoall")
    assert (m.collective, m.world_size, m.size_bytes.tolist()) == ("alltoall", 8, [262144, 524288, 1048576])
    assert m.time_s[0] == pytest.approx(40e-6)
    # unnamed, the blank redop cells say all-to-all: all_gather_perf of that era printed no redop column
    (guess,) = load_measurements(path)
    assert (guess.collective, guess.world_size) == ("alltoall", 8)
    assert any("redop column printed blank" in n for n in guess.notes)
    # the same rows under a header without redop, as old all_gather_perf printed them, stay all-gather
    ag = text.replace("   redop  ", "  ").replace("   float             ", "   float   ")
    path.write_text(ag)
    (m,) = load_measurements(path)
    assert (m.collective, m.world_size) == ("allgather", 8), m.notes
    # a row one cell short elsewhere (its out-of-place busbw lost) is still an error naming the line
    lines = text.splitlines()
    cells = lines[4].split()
    lines[4] = " ".join(cells[:5] + cells[6:])
    path.write_text("\n".join(lines) + "\n")
    with pytest.raises(FileFormatError, match=r"a2a_old.log: line 5: expected 12 columns as in the header, got 10"):
        load_measurements(path, collective="alltoall")
    # in a table with a redop column in use, a short row is not taken for a blank redop
    short = NEW_HEADER + ("     1048576        262144     float     sum      -1    40.00   26.21   45.88      0"
                          "    40.00   26.21\n")
    path.write_text(short)
    with pytest.raises(FileFormatError, match=r"line 3: expected 13 columns as in the header, got 11"):
        load_measurements(path)


OSU_LATENCY = """# OSU MPI Latency Test v7.0
# Size          Latency (us)
0                       0.22
1                       0.25
2                       0.25
4                       0.26
8                       0.27
16                      0.30
"""


def test_osu_latency_starting_at_size_zero_is_fitted_without_it(tmp_path, capsys):
    path = tmp_path / "lat.txt"
    path.write_text(OSU_LATENCY)
    (m,) = load_measurements(path)
    assert m.size_bytes.tolist() == [1, 2, 4, 8, 16] and any("line 3: size 0 skipped" in n for n in m.notes)
    assert main_for_tests(["fit", str(path), "-o", str(tmp_path / "m.json")]) == 0
    assert "nan" not in capsys.readouterr().err
    path.write_text(OSU_LATENCY.split("1   ")[0])  # nothing but size 0
    with pytest.raises(FileFormatError, match="has no rows other than size 0"):
        load_measurements(path)


def test_every_osu_table_in_one_log_is_read(tmp_path):
    bw = "# OSU MPI Bandwidth Test v7.5\n# Datatype: MPI_CHAR.\n# Size      Bandwidth (MB/s)\n"
    bibw = "# OSU MPI Bi-Directional Bandwidth Test v7.5\n# Size      Bandwidth (MB/s)\n"
    rows = "".join(f"{s:<10} {s * 0.5:12.2f}\n" for s in (1, 2, 4, 8))
    path = tmp_path / "two.txt"
    path.write_text("=== pair 0,1 ===\n" + bw + rows + "=== pair 0,2 ===\n" + bw + rows[:-8] + bibw + rows)
    sets = load_measurements(path)
    assert [(s.collective, len(s)) for s in sets] == [("p2p_bw", 4), ("p2p_bw", 3), ("p2p_bibw", 4)]
    assert [n for n in sets[1].notes if n.startswith("table")] == ["table 2 of 3 (line 12)"]


def test_osu_mbw_mr_is_refused_naming_the_file(tmp_path, capsys):
    path = tmp_path / "mbw.txt"
    path.write_text("# OSU MPI Multiple Bandwidth / Message Rate Test v7.4\n# [ pairs: 48 ] [ window size: 64 ]\n"
                    "# Size                  MB/s        Messages/s\n"
                    + "".join(f"{s:<10} {s * 40.0:12.2f} {40e6:14.2f}\n" for s in (1, 2, 4, 8)))
    assert main_for_tests(["fit", str(path), "-o", str(tmp_path / "m.json")]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith(f"pybench: error: {path}: pybench has no model for 'p2p_mbw'") and "\n" not in err
    assert not (tmp_path / "m.json").exists()


def test_the_json_layout_takes_the_world_from_the_count_too(tmp_path):
    rows = [{"size": s, "count": s // 128, "type": "float", "redop": "none", "root": -1,
             "out_of_place": {"time": t, "alg_bw": a, "bus_bw": b, "nwrong": 0}}
            for s, t, a, b in ((65536, 107.5, 0.61, 0.59), (131072, 210.0, 0.62, 0.60), (262144, 211.1, 1.24, 1.20))]
    path = tmp_path / "ag.json"
    path.write_text(json.dumps({"args": ["./all_gather_perf", "-b", "64K"], "results": rows}))
    (m,) = load_measurements(path)
    assert (m.collective, m.world_size) == ("allgather", 32)
    rows[1]["count"] = 2048  # rows that disagree: no exact world, the ratio stands
    path.write_text(json.dumps({"args": ["./all_gather_perf"], "results": rows}))
    assert load_measurements(path)[0].world_size == 31


def test_unnamed_small_sweeps_take_the_collective_from_the_per_rank_count(tmp_path):
    # `-b 8 -e 128` without the program line: busbw/algbw is 0.00/0.00, but size = count x 8 x 4 B
    # says the count is per rank (reduce-scatter with a reduction, all-gather without one)
    for redop, name in (("sum", "reducescatter"), ("none", "allgather")):
        rows = "".join(f"{s:>12} {s // 32:>12}     float {redop:>7}      -1     5.58    0.00    0.00      0"
                       f"     5.57    0.00    0.00      0\n" for s in (0, 32, 64, 128))
        path = tmp_path / f"{name}.log"
        path.write_text(NEW_HEADER + rows)
        (m,) = load_measurements(path)
        assert (m.collective, m.world_size, m.size_bytes.tolist()) == (name, 8, [32, 64, 128])
    # count = size / 4 B (all-reduce, send/recv, broadcast alike): still refused, in one line
    path.write_text(NEW_HEADER + "".join(f"{s:>12} {s // 4:>12} float sum -1 5.58 0.00 0.00 0 5.57 0.00 0.00 0\n"
                                         for s in (32, 64, 128)))
    with pytest.raises(FileFormatError, match="cannot tell which collective.*give --collective"):
        load_measurements(path)


def test_an_osu_row_starting_with_a_non_ascii_digit_is_not_a_row(tmp_path):
    # str.isdigit() says yes to '²' and int() then raised a ValueError traceback
    path = tmp_path / "sup.txt"
    path.write_text("# OSU MPI Latency Test v7.0\n# Size          Latency (us)\n² 0.3\n1 0.25\n2 0.25\n4 0.26\n")
    (m,) = load_measurements(path)
    assert m.size_bytes.tolist() == [1, 2, 4]


def test_the_count_rule_knows_every_nccl_tests_type_width(tmp_path):
    # `-d int8`, `-d double` and `-d f8e4m3` all-gathers on 16 ranks, sizes too small for busbw/algbw
    # to carry 3 digits: only size = count x 16 x width says the world
    for dtype, width in (("int8", 1), ("double", 8), ("f8e4m3", 1)):
        rows = "".join(f"{s:>12} {s // (16 * width):>12} {dtype:>9}    none      -1    50.0    0.02    0.02      0"
                       f"    50.0    0.02    0.02      0\n" for s in (1 << 10, 4 << 10, 16 << 10))
        path = tmp_path / f"{dtype}.log"
        path.write_text("# Collective test starting: all_gather_perf\n" + NEW_HEADER + rows)
        (m,) = load_measurements(path)
        assert (m.collective, m.world_size) == ("allgather", 16), m.notes
        assert any("world size 16 from size = count x ranks x type size" in n for n in m.notes)
        assert m.dtype == {"double": "float64", "f8e4m3": "float8_e4m3"}.get(dtype, dtype)


def test_8_bit_floats_are_named_once_and_asked_for_by_any_spelling(tmp_path, capsys):
    """`--datatype all` logs print f8e4m3 and f8e5m2 (rccl-tests fp8_e4m3): half became float16, but those kept
    nccl-tests' spelling and `predict --dtype float8_e5m2` found no model. One name each, any spelling asked."""
    from pybench.cli.main import main
    rows = "".join(f"{s:>12} {s:>12} {dtype:>9}     sum      -1   {20 + s / 2e4:7.1f}    0.02    0.04      0"
                   f"   {20 + s / 2e4:7.1f}    0.02    0.04      0\n"
                   for dtype in ("half", "f8e5m2") for s in (1 << 20, 4 << 20, 16 << 20, 64 << 20))
    log = tmp_path / "dall.log"
    log.write_text("# Collective test starting: all_reduce_perf\n" + NEW_HEADER + rows)
    assert sorted(m.dtype for m in load_measurements(log, world_size=8)) == ["float16", "float8_e5m2"]
    model = tmp_path / "m.json"
    assert main(["fit", str(log), "--world", "8", "-o", str(model)]) == 0
    for asked in ("float8_e5m2", "f8e5m2", "fp8_e5m2", "E5M2"):
        capsys.readouterr()
        assert main(["predict", str(model), "--dtype", asked, "--sizes", "4M"]) == 0, asked
        assert "float8_e5m2" in capsys.readouterr().out


def test_an_unnamed_tiny_sweep_whose_busbw_prints_above_algbw_is_an_all_reduce(tmp_path):
    # `-b 8 -e 256` with no program line: 0.00 against 0.01 is enough, as only all-reduce's
    # busbw/algbw exceeds 1; rows that print the same number twice tell nothing
    rows = "".join(f"{s:>12} {s // 4:>12}     float     sum      -1    {t:5.2f}    {a}    {b}      0"
                   f"    {t:5.2f}    {a}    {b}      0\n"
                   for s, t, a, b in ((64, 55.6, "0.00", "0.00"), (128, 56.3, "0.00", "0.00"),
                                      (256, 57.1, "0.00", "0.01")))
    path = tmp_path / "ar.log"
    path.write_text(NEW_HEADER + rows)
    (m,) = load_measurements(path)
    assert m.collective == "allreduce" and any("busbw printed above algbw" in n for n in m.notes)


def _ar_rows(world: int, rows: tuple[tuple[int, float], ...]) -> str:
    """All-reduce rows of ``world`` ranks, bandwidths printed to 0.01 GB/s as nccl-tests does."""
    factor = 2 * (world - 1) / world
    return "".join(f"{s:>12} {s // 4:>12}     float     sum      -1  {t:8.1f}  {s / t / 1e3:6.2f}  "
                   f"{s / t / 1e3 * factor:6.2f}      0  {t:8.1f}  {s / t / 1e3:6.2f}  {s / t / 1e3 * factor:6.2f}      0\n"
                   for s, t in rows)


def test_a_rounded_ratio_that_allows_several_worlds_gives_none_of_them(tmp_path, capsys):
    # 96 ranks on a slow fabric: 2 x 95/96 = 1.979, but printed to 0.01 GB/s the rows allow
    # every count from about 80 to 110. Without Rank lines no world is read; the note says the range.
    rows = _ar_rows(96, ((1 << 28, 80000.0), (1 << 29, 160500.0)))
    path = tmp_path / "ar96.log"
    path.write_text(NEW_HEADER + rows)
    (m,) = load_measurements(path)
    assert m.world_size is None
    (note,) = [n for n in m.notes if n.startswith("world size not determined")]
    lo, hi = (int(w) for w in note.split("allows ")[1].split(" ranks")[0].split(" to "))
    assert lo < 96 < hi and "give --world N" in note
    assert load_measurements(path, world_size=96)[0].world_size == 96
    # compare says the rank count is not known, not "0 ranks", nor what pybench records of its own runs
    assert main_for_tests(["compare", str(path), str(path)]) == 0
    head = capsys.readouterr().out.splitlines()[0]
    assert "/ ? ranks /" in head and "a nccl-tests file" in head and "huge pages" not in head
    # and fit refuses it in one line (a model of unknown ranks could not be read back), naming --world
    assert main_for_tests(["fit", str(path), "-o", str(tmp_path / "m.json")]) == 2
    err = capsys.readouterr().err.strip()
    assert "does not say how many ranks ran its allreduce" in err and "give --world N" in err and "\n" not in err
    assert main_for_tests(["fit", str(path), "-o", str(tmp_path / "m.json"), "--world", "96"]) == 0
    # whole Rank lines inside the range pick the world; a partial list (8 of them) does not
    ranks = "".join(f"#  Rank {r:3d} Group  0 Pid {r:5d} on node{r // 8:02d} device  {r % 8} [0x1b] NVIDIA A100\n"
                    for r in range(96))
    path.write_text(ranks + NEW_HEADER + rows)
    (m,) = load_measurements(path)
    assert (m.world_size, m.link_class) == (96, "inter-node")
    path.write_text("".join(ranks.splitlines(keepends=True)[:8]) + NEW_HEADER + rows)
    (m,) = load_measurements(path)
    assert m.world_size is None and any("Rank lines list 8" in n for n in m.notes)
    # a fast 16-rank sweep pins its count exactly, as before
    path.write_text(NEW_HEADER + _ar_rows(16, ((1 << 30, 4600.0), (1 << 31, 9100.0))))
    assert load_measurements(path)[0].world_size == 16


def test_a_run_killed_mid_row_keeps_the_rows_it_printed(tmp_path):
    # A job killed by its time limit (or a rank's "Test NCCL failure") leaves a block-buffered
    # stdout cut mid-row; the rows above it were measured in full.
    full = _ar_rows(8, ((1 << 20, 30.0), (1 << 21, 45.0), (1 << 22, 70.0)))
    path = tmp_path / "killed.log"
    for cut in ("     8388608", "     8388608       2097152     float     sum      -1    120.0   69.91"):
        path.write_text("# Collective test starting: all_reduce_perf\n" + NEW_HEADER + full + cut)
        (m,) = load_measurements(path)
        assert (m.collective, m.world_size, m.size_bytes.tolist()) == ("allreduce", 8, [1 << 20, 1 << 21, 1 << 22])
        assert any(n.startswith("line 7: last row cut short") for n in m.notes), m.notes
    # a short row with rows after it, or before the footer of a finished run, is malformed: refused
    lines = full.splitlines(keepends=True)
    path.write_text(NEW_HEADER + lines[0] + "     2097152        524288     float\n" + lines[2])
    with pytest.raises(FileFormatError, match="line 4: expected 13 columns as in the header, got 3"):
        load_measurements(path)
    path.write_text(NEW_HEADER + full + "     8388608       2097152\n# Out of bounds values : 0 OK\n")
    with pytest.raises(FileFormatError, match="line 6: expected 13 columns as in the header, got 2"):
        load_measurements(path)


def test_osu_tests_that_are_not_send_recv_keep_their_own_names(tmp_path):
    # Any title with "Latency" used to read as point-to-point latency on 2 ranks: a 384-rank
    # osu_alltoallv (OSU 7.5's P50/P90/P99 columns), osu_scatterv, a one-sided put.
    lat = "".join(f"{s:<10} {20 + s * 0.01:10.2f} {19 + s * 0.01:10.2f} {21 + s * 0.01:10.2f}  1000\n"
                  for s in (64, 256, 1024))
    full = "# Size       Avg Latency(us)   Min Latency(us)   Max Latency(us)  Iterations\n"
    cases = {
        "mpiexec --np 384 --ppn 12 ./osu_alltoallv -f\n# OSU MPI All-to-Allv Personalized Exchange Latency Test v7.5\n"
        "# Datatype: MPI_CHAR.\n# Size       Avg Latency(us)   Min Latency(us)   Max Latency(us)  Iterations"
        "  P50 Tail Lat(us)  P90 Tail Lat(us)  P99 Tail Lat(us)\n"
        + "".join(ln.rstrip("\n") + "    20.01    20.50    21.00\n" for ln in lat.splitlines(keepends=True)):
        ("alltoallv", 384),
        "# OSU MPI Scatterv Latency Test v7.2\n" + full + lat: ("scatterv", None),
        "# OSU MPI Reduce_scatter_block Latency Test v7.2\n" + full + lat: ("reducescatter", None),
        "# OSU MPI_Put Latency Test v7.2\n# Size          Latency (us)\n1 0.9\n2 0.9\n": ("one-sided put", None),
        "# OSU MPI Multi-threaded Latency Test v7.2\n# Size          Latency (us)\n1 0.9\n2 0.9\n": ("p2p_latency_mt", 2),
        "# OSU MPI Latency Test v7.2\n# Size          Latency (us)\n1 0.9\n2 0.9\n": ("p2p_latency", 2),
    }
    path = tmp_path / "osu.txt"
    for text, want in cases.items():
        path.write_text(text)
        (m,) = load_measurements(path)
        assert (m.collective, m.world_size) == want, text.splitlines()[0]
    # osu_mbw_mr's pairs say its rank count
    path.write_text("# OSU MPI Multiple Bandwidth / Message Rate Test v7.4\n# [ pairs: 48 ] [ window size: 64 ]\n"
                    "# Size                  MB/s        Messages/s\n1 40.0 40000000.0\n2 80.0 40000000.0\n")
    assert (load_measurements(path)[0].collective, load_measurements(path)[0].world_size) == ("p2p_mbw", 96)


def test_osu_multi_threaded_latency_is_not_pooled_with_one_threads(tmp_path, capsys):
    # a GKE job's log ran osu_latency then osu_latency_mt: both were fitted as one p2p_latency curve
    def table(base_us: float) -> str:
        return "# Size          Latency (us)\n" + "".join(f"{s} {base_us + s / 1e4:.2f}\n" for s in (1, 4, 16, 64, 256))
    path = tmp_path / "osu.txt"
    path.write_text("# OSU MPI Latency Test v7.2\n" + table(1.5)
                    + "# OSU MPI Multi-threaded Latency Test v7.2\n" + table(4.0))
    assert [(m.collective, m.world_size) for m in load_measurements(path)] == [("p2p_latency", 2),
                                                                               ("p2p_latency_mt", 2)]
    assert main_for_tests(["fit", str(path), "-o", str(tmp_path / "m.json")]) == 0
    assert "pybench has no model for 'p2p_latency_mt'" in capsys.readouterr().err


@pytest.mark.parametrize("launch, link", [("srun --mpi=pmix -N2 ./pt2pt/osu_latency D D", "inter-node"),
                                          ("srun --mpi=pmix -N1 -n2 ./pt2pt/osu_latency D D", "intra-node"),
                                          ("mpirun -np 2 ./osu_latency", None)])
def test_osu_point_to_point_takes_its_link_class_from_the_hosts_its_launcher_line_names(tmp_path, launch, link):
    # eth-cscs/cray-network-stack's OSU 7.5 logs on GH200: "link class unknown" under `srun -N2`
    path = tmp_path / "osu.txt"
    path.write_text(f"[santis][user@santis-ln002 ~]$ {launch}\n\n# OSU MPI-CUDA Latency Test v7.5\n"
                    "# Datatype: MPI_CHAR.\n# Size       Avg Latency(us)\n1 2.5\n4 2.5\n16 2.6\n64 2.7\n")
    (m,) = load_measurements(path)
    assert (m.collective, m.world_size, m.link_class) == ("p2p_latency", 2, link)


def test_osu_under_a_launcher_label_and_its_datatype_below_the_header(tmp_path):
    # mpirun --tag-output prefixes every line; OSU 7.2 prints "# Datatype:" under the header
    body = "# OSU MPI Allreduce Latency Test v7.2\n# Size       Avg Latency(us)\n# Datatype: MPI_FLOAT.\n" + \
        "".join(f"{s:<10} {5 + s * 0.002:10.2f}\n" for s in (4, 16, 64, 256))
    path = tmp_path / "tagged.txt"
    path.write_text("".join(f"[1,0]<stdout>: {ln}\n" for ln in body.splitlines()))
    (m,) = load_measurements(path)
    assert (m.collective, m.dtype, m.size_bytes.tolist()) == ("allreduce", "float32", [4, 16, 64, 256])
    assert m.time_s[0] == pytest.approx(5.01e-6)


def test_rccl_tests_json_lines_are_read(tmp_path, capsys):
    # rccl-tests --output_format json: one object per line and per timing, bandwidths unrounded
    def line(size: int, in_place: int, t_us: float, name: str = "AllReduce", factor: float = 1.75) -> str:
        alg = size / t_us / 1e3
        return json.dumps({"#wrong": "0", "algBw": alg, "busBw": alg * factor, "gpus": 8, "inPlace": in_place,
                           "name": name, "redop": "sum", "size": size, "time": t_us, "type": "float"}) + "\n"
    text = "".join(line(s, ip, 20.0 + s * 1e-5 + ip) for s in (1 << 16, 1 << 18, 1 << 20, 1 << 22) for ip in (0, 1))
    path = tmp_path / "rccl.json"
    path.write_text(text)
    (m,) = load_measurements(path)
    assert (m.source, m.collective, m.world_size, m.dtype, m.redop) == ("rccl-tests", "allreduce", 8, "float32", "sum")
    assert m.size_bytes.tolist() == [1 << 16, 1 << 18, 1 << 20, 1 << 22]
    assert m.time_s[0] == pytest.approx((20.0 + 0.65536) * 1e-6)
    assert m.time_in_place_s[0] == pytest.approx((21.0 + 0.65536) * 1e-6)
    assert main_for_tests(["fit", str(path), "-o", str(tmp_path / "m.json")]) == 0
    capsys.readouterr()
    # compare reads them as fit does (they start with "{" but are no one JSON document)
    assert main_for_tests(["compare", str(path), str(path)]) == 0
    out = capsys.readouterr().out
    assert "allreduce / nccl / float32 sum / 8 ranks" in out and "a rccl-tests file" in out
    # a broadcast's ratio is 1 whatever the count: the gpus field says it
    path.write_text("".join(line(s, 0, 30.0 + s * 1e-5, "Broadcast", 1.0) for s in (1 << 16, 1 << 18)))
    assert (load_measurements(path)[0].collective, load_measurements(path)[0].world_size) == ("broadcast", 8)
    # a line that is not a row is refused in one line naming it
    path.write_text(text + '{"name": "AllReduce", "size": 64}\n')
    with pytest.raises(FileFormatError, match=r"rccl.json: line 9: .*time"):
        load_measurements(path)


def test_a_bandwidth_printed_with_fewer_decimals_is_bounded_by_its_own_last_digit(tmp_path):
    # nccl-tests keeps each value in its 6-character column: busbw 1199.3 has one decimal, so it
    # may be 0.05 off, not 0.005. 1440 ranks (Rank lines 0..1439): the row's ratio alone reads
    # 1539, and with a 0.005 bound it even ruled 1440 out, leaving "1440 of 1539 ranks".
    ranks = "".join(f"#  Rank {r:4d} Group  0 Pid {r:5d} on tray{r // 4:03d} device  {r % 4} [0x10] NVIDIA GB200\n"
                    for r in range(1440))
    row = "  1073741824   268435456     float     sum      -1   1789.5  600.04  1199.3      0   1789.5  600.04  1199.3      0\n"
    path = tmp_path / "nvl72x20.log"
    path.write_text("# Collective test starting: all_reduce_perf\n" + ranks + NEW_HEADER + row)
    (m,) = load_measurements(path)
    assert (m.world_size, m.link_class) == (1440, "inter-node"), m.notes


def test_a_one_gpu_sweep_is_a_one_rank_collective_not_a_reduce_scatter(tmp_path):
    # all_reduce_perf -g 1 (a common smoke test): busbw = algbw x 2(n-1)/n prints 0.00 on one rank.
    # The ratio 0 used to overrule the program name and read as a reduce-scatter.
    rows = "".join(f"{s:>12} {s // 4:>12}     float     sum      -1  {t:7.2f}  {s / t / 1e3:6.2f}    0.00      0"
                   f"  {t / 4:7.2f}  {4 * s / t / 1e3:6.1f}    0.00    N/A\n"
                   for s, t in ((1 << 20, 9.5), (1 << 21, 15.0), (1 << 22, 26.0)))
    one_rank = "#  Rank  0 Group  0 Pid  4242 on     box01 device  0 [0000:01:00] NVIDIA L4\n"
    path = tmp_path / "one.log"
    path.write_text("# Collective test starting: all_reduce_perf\n" + one_rank + NEW_HEADER + rows)
    (m,) = load_measurements(path)
    assert (m.collective, m.world_size) == ("allreduce", 1), m.notes
    assert any(n.startswith("world size 1: busbw is 0.00") for n in m.notes)
    # unnamed, the zero ratio fits all-reduce and reduce-scatter alike: refused in one line
    path.write_text(one_rank + NEW_HEADER + rows)
    with pytest.raises(FileFormatError, match="cannot tell which collective.*busbw 0.00 on one rank"):
        load_measurements(path)
    assert load_measurements(path, collective="allreduce")[0].world_size == 1


def _row_parts(size: int, t_us: float, world: int = 16) -> tuple[str, str]:
    """(start, rest) of an nccl-tests row as it prints them: size ... root, then the times."""
    alg = size / t_us / 1e3
    bus = alg * 2 * (world - 1) / world
    return (f"{size:>12}  {size // 4:>12}  {'float':>8}  {'sum':>6}  {-1:>6}",
            f"  {t_us:7.1f}  {alg:6.2f}  {bus:6.2f}  {0:6g}  {t_us:7.1f}  {alg:6.2f}  {bus:6.2f}  {0:6g}")


HEADER_NOW = ("#       size         count      type   redop    root     time   algbw   busbw  #wrong"
              "     time   algbw   busbw  #wrong\n"
              "#        (B)    (elements)                               (us)  (GB/s)  (GB/s)"
              "             (us)  (GB/s)  (GB/s)\n")


def test_nccl_info_lines_inside_a_row_and_mpich_rank_labels(tmp_path):
    # NCCL connects lazily at a size's first call and prints its INFO lines right after
    # nccl-tests printed the row's size ... root; the times follow on a later line.
    sizes = ((1 << 20, 40.0), (1 << 21, 60.0), (1 << 22, 95.0), (1 << 23, 170.0))
    parts = [_row_parts(s, t) for s, t in sizes]
    info = ("gpu-a:4101:4180 [0] NCCL INFO Channel 00/0 : 8[0] -> 0[0] [receive] via NET/IB/0/GDRDMA\n"
            "gpu-a:4101:4180 [0] NCCL INFO Connected all trees\n")
    plain = ("# Collective test starting: all_reduce_perf\n" + HEADER_NOW
             + parts[0][0] + parts[0][1] + "\n" + parts[1][0] + parts[1][1] + "\n"
             + parts[2][0] + info + parts[2][1] + "\n"
             + parts[3][0] + parts[3][1] + "\n# Out of bounds values : 0 OK\n")
    path = tmp_path / "lazy.log"
    path.write_text(plain)
    (m,) = load_measurements(path)
    assert (m.collective, m.world_size) == ("allreduce", 16), m.notes
    assert m.size_bytes.tolist() == [s for s, _ in sizes]
    assert m.time_s.tolist() == pytest.approx([t * 1e-6 for _, t in sizes])
    # MPICH's mpiexec -prepend-rank labels every write "[0] ", glued after the previous write
    labelled = "".join("[0] " + ln + "\n" for ln in HEADER_NOW.splitlines())
    for (start, rest), (s, _) in zip(parts, sizes):
        if s == 1 << 22:
            labelled += "[0] " + start + "[0] " + info.splitlines()[0] + "\n[0] " + info.splitlines()[1] + "\n"
            labelled += "[0] " + rest.replace("  0  ", "  0[0]   ", 1).lstrip() + "\n"
        else:
            labelled += "[0] " + start + "[0] " + rest[1:] + "\n"
    path.write_text("[0] # Collective test starting: all_reduce_perf\n" + labelled)
    (m,) = load_measurements(path)
    assert m.size_bytes.tolist() == [s for s, _ in sizes], m.notes
    assert m.time_s.tolist() == pytest.approx([t * 1e-6 for _, t in sizes])
    # a run that failed during a row keeps the rows above it, and says which row it lost
    path.write_text("# Collective test starting: all_reduce_perf\n" + HEADER_NOW + parts[0][0] + parts[0][1] + "\n"
                    + parts[1][0] + parts[1][1] + "\n" + parts[2][0]
                    + "gpu-a:4101:4180 [0] transport/net_ib.cc:1696 NCCL WARN NET/IB : Got completion with error 12\n"
                    + "gpu-a: Test NCCL failure common.cu:1279 'remote process exited or there was a network error'\n")
    (m,) = load_measurements(path)
    assert m.size_bytes.tolist() == [1 << 20, 1 << 21]
    assert any("the row of size 4194304 has no times" in n for n in m.notes)


def test_nccl_1_test_programs_bytes_n_op_res_header(tmp_path):
    # NCCL 1.x's all_reduce_test printed "bytes N type op ... res", times in ms, one size per op
    text = ("$ ./build/test/single/broadcast_test 8000000\n"
            "#                                                 out-of-place                    in-place\n"
            "#      bytes             N    type      op     time  algbw  busbw      res     time  algbw  busbw      res\n"
            "     8000000       8000000    char     sum    0.800  10.00  10.00    0e+00    0.810   9.88   9.88    0e+00\n"
            "     8000000       2000000     int     sum    0.790  10.13  10.13    0e+00    0.800  10.00  10.00    0e+00\n")
    path = tmp_path / "nccl1.log"
    path.write_text(text)
    sets = load_measurements(path)
    assert [(m.collective, m.dtype, m.size_bytes.tolist()) for m in sets] == [
        ("broadcast", "int8", [8000000]), ("broadcast", "int32", [8000000])]
    assert sets[0].time_s[0] == pytest.approx(0.8e-3) and sets[0].time_in_place_s[0] == pytest.approx(0.81e-3)


def test_two_processes_each_running_their_own_test_under_mpirun(tmp_path):
    # nccl-tests built without MPI=1 and started by `mpirun -np 2`: each process is a 1-rank
    # test; both print "Rank 0" (on their own host) and their headers before any row.
    pre = "".join(f"#   Rank  0 Pid  {p} on {h} device  0 [0x00] Tesla V100-SXM2-16GB\n"
                  for p, h in ((1111, "node-a"), (2222, "node-b")))
    head = ("#       size         count      type   redop     time   algbw   busbw  error     time   algbw   busbw  error\n"
            "#        (B)    (elements)                       (us)  (GB/s)  (GB/s)            (us)  (GB/s)  (GB/s)\n")
    rows = "".join(f"{s:>12} {s // 4:>12}     float     sum  {t:7.1f}  {s / t / 1e3:6.2f}    0.00  0e+00"
                   f"  {t:7.1f}  {s / t / 1e3:6.2f}    0.00  0e+00\n"
                   for s, t in ((1 << 20, 10.0), (1 << 20, 10.4), (1 << 22, 30.0), (1 << 22, 31.0)))
    path = tmp_path / "twice.log"
    path.write_text("mpirun -np 2 ./all_reduce_perf -b 1M -e 4M -f 4\n" + pre + "#\n" + head + "#\n" + head + rows)
    (m,) = load_measurements(path)
    assert (m.collective, m.world_size, m.link_class) == ("allreduce", 1, None), m.notes
    assert m.size_bytes.tolist() == [1 << 20, 1 << 20, 1 << 22, 1 << 22]
    assert any(n.startswith("Rank 0 is listed by 2 processes (node-a") and "node-b" in n for n in m.notes)


@pytest.mark.parametrize("redop, collective", [("none", "allgather"), ("sum", "reducescatter")])
def test_an_unnamed_sweep_over_hundreds_of_ranks_takes_its_collective_from_the_per_rank_count(tmp_path, redop,
                                                                                             collective):
    # busbw/algbw = 1023/1024 prints as 1.00: send/recv's ratio without a redop, a 2-rank all-reduce's with
    # one. The per-rank count (size = count x 1024 x 4 B) is exact (ALCF's Polaris all-gather at 256 nodes).
    rows = "".join(f"{s:>12} {s // 4096:>12}     float {redop:>7}      -1   {t:8.1f}   {s / t / 1e3:5.2f}   "
                   f"{s / t / 1e3 * 1023 / 1024:5.2f}      0   {t:8.1f}   {s / t / 1e3:5.2f}   "
                   f"{s / t / 1e3 * 1023 / 1024:5.2f}      0\n"
                   for s, t in ((64 << 20, 29744.0), (128 << 20, 29460.0), (256 << 20, 45143.0),
                                (512 << 20, 44203.0), (1 << 30, 45853.0)))
    path = tmp_path / "wide.log"
    path.write_text(NEW_HEADER + rows)
    (m,) = load_measurements(path)
    assert (m.collective, m.world_size) == (collective, 1024)
    worlds = [n for n in m.notes if n.startswith("world size")]
    assert worlds == ["world size 1024 from size = count x ranks x type size (busbw/algbw said "
                      f"{worlds[0].split('said ')[1]}"], m.notes  # no note names another world as the one used


def test_the_shared_polaris_all_gather_over_1024_ranks_is_an_all_gather():
    from conftest import SHARED_DATA  # the repo's copies of ../shared/data

    (m,) = load_measurements(SHARED_DATA / "nccl-tests" / "polaris_a100_256node_4gpu_slingshot_allgather.txt")
    assert (m.collective, m.world_size) == ("allgather", 1024)


def _osu(title: str, rows: str, header: str = "# Size       Avg Latency(us)\n") -> str:
    return f"# OSU MPI {title} Latency Test v7.3\n# Datatype: MPI_CHAR.\n{header}{rows}"


@pytest.mark.parametrize("title, collective", [("Allgather", "allgather"), ("All-to-All", "alltoall")])
def test_osu_all_gather_and_all_to_all_sizes_are_each_ranks_block(tmp_path, title, collective):
    # OSU calls MPI_Allgather(sendbuf, size, ...): its size is one rank's block; pybench's is the whole buffer.
    path = tmp_path / "osu.txt"
    path.write_text(_osu(title, "".join(f"{s:<10} {30 + s * 16 / 1e4:10.2f}\n" for s in (1 << 10, 1 << 16, 1 << 20))))
    (m,) = load_measurements(path, world_size=16)
    assert m.collective == collective and m.size_bytes.tolist() == [16 << 10, 16 << 16, 16 << 20]
    assert any("OSU prints each rank's block" in n for n in m.notes)
    (ar,) = load_measurements(path, collective="allreduce", world_size=16)  # a whole-buffer collective
    assert ar.size_bytes.tolist() == [1 << 10, 1 << 16, 1 << 20]


def test_osu_rows_that_failed_validation_are_left_out_and_said(tmp_path):
    path = tmp_path / "checked.txt"
    path.write_text(_osu("Allreduce", "4   3.1   Pass\n16   3.2   Fail\n64   3.4   Pass\n256   3.9   Pass\n",
                         "# Size       Avg Latency(us)        Validation\n"))
    (m,) = load_measurements(path, world_size=4)
    assert m.size_bytes.tolist() == [4, 64, 256]
    assert any("size 16 left out: it failed OSU's validation" in n for n in m.notes)


def test_osu_neighbourhood_collectives_and_logs_without_a_world_are_refused_in_one_line(tmp_path, capsys):
    rows = "".join(f"{s:<10} {5 + s / 1e3:10.2f}\n" for s in (1, 64, 4096, 65536))
    for title, argv, said in (("Neighborhood Allgather", ["--world", "16"], "no model for 'OSU Neighborhood"),
                              ("Allreduce", [], "does not say how many ranks ran its allreduce")):
        path = tmp_path / "osu.txt"
        path.write_text(_osu(title, rows))
        assert main_for_tests(["fit", str(path), "-o", str(tmp_path / "m.json"), *argv]) == 2
        err = capsys.readouterr().err.strip()
        assert said in err and "\n" not in err and err.startswith("pybench: error: ")
        assert not (tmp_path / "m.json").exists()


def _rows(world: int, per_rank: bool, ratio: float, redop: str = "sum") -> str:
    out = ""
    for k, s in enumerate(1 << e for e in range(20, 31)):
        t = 30.0 + s / 70e3
        alg = s / t / 1e3
        out += (f"{s:>12} {s // 4 // (world if per_rank else 1):>12}     float {redop:>7}      -1 {t:9.2f} {alg:7.2f} "
                f"{alg * ratio:7.2f}      0 {t:9.2f} {alg:7.2f} {alg * ratio:7.2f}      0\n")
    return out


def test_a_per_rank_count_pins_the_world_even_where_the_rounded_ratio_agrees_with_it(tmp_path):
    # 512 ranks: the median ratio says 512, but the rows' rounding alone allows 500-524; the counts are exact
    rows = "".join(f"{s:>12} {s // 2048:>12}     float     sum      -1 {t:9.2f} {a:7.2f} {b:7.2f}      0 {t:9.2f} "
                   f"{a:7.2f} {b:7.2f}      0\n"
                   for s, t, a, b in ((1 << 20, 30.49, 34.40, 34.33), (1 << 21, 40.97, 51.19, 51.09),
                                      (1 << 22, 61.94, 67.71, 67.58), (1 << 23, 103.89, 80.75, 80.59),
                                      (1 << 24, 187.77, 89.35, 89.17), (1 << 25, 355.54, 94.37, 94.19),
                                      (1 << 26, 691.09, 97.11, 96.92), (1 << 27, 1362.2, 98.53, 98.34),
                                      (1 << 28, 2704.4, 99.26, 99.07), (1 << 29, 5388.7, 99.63, 99.43),
                                      (1 << 30, 10757.0, 99.81, 99.62)))
    path = tmp_path / "rs512.log"
    path.write_text("# Collective test starting: reduce_scatter_perf\n" + NEW_HEADER + rows)
    (m,) = load_measurements(path)
    assert (m.collective, m.world_size) == ("reducescatter", 512)
    assert not any(n.startswith("world size not determined") for n in m.notes)


def test_an_unnamed_send_recv_over_more_ranks_than_two_is_not_a_two_rank_all_reduce(tmp_path):
    # sendrecv_perf prints redop sum (nccl-tests issue 214): busbw/algbw = 1 reads as a 2-rank all-reduce,
    # which the Rank lines' 8 ranks rule out; without them the note names the twin
    ranks = "".join(f"#  Rank {r:3d} Group  0 Pid {r:5d} on node{r // 4} device  {r % 4} [0x1b] NVIDIA A100\n"
                    for r in range(8))
    path = tmp_path / "sr8.log"
    path.write_text(ranks + NEW_HEADER + _rows(8, False, 1.0))
    (m,) = load_measurements(path)
    assert (m.collective, m.world_size) == ("sendrecv", 8)
    assert not any("world size 2" in n for n in m.notes)
    path.write_text(NEW_HEADER + _rows(8, False, 1.0))
    (m,) = load_measurements(path)
    assert m.collective == "allreduce" and any("give --collective sendrecv" in n for n in m.notes)


def test_json_lists_one_device_per_process_and_each_drives_nthreads_x_ngpus_ranks(tmp_path):
    # nccl-tests -J writes each process's first Rank line only: 2 processes with -g 8 are 16 ranks, not 9
    path = broadcast_g8_json(tmp_path)
    (m,) = load_measurements(path)
    assert (m.collective, m.world_size, m.link_class) == ("broadcast", 16, "inter-node")
    assert any(n.startswith("16 ranks on 2 host(s)") for n in m.notes)


def test_a_table_megabytes_into_a_log_is_found(tmp_path):
    # NCCL_DEBUG=INFO over thousands of ranks puts the first table far past any fixed head of the file
    info = "".join(f"node{r // 4:04d}:{1000 + r}:{2000 + r} [{r % 4}] NCCL INFO Channel 00/32 : {r} -> {r + 1} "
                   f"via NET/AWS Libfabric/0/GDRDMA\n" for r in range(8192))
    path = tmp_path / "verbose.log"
    path.write_text("# Collective test starting: all_reduce_perf\n" + info + NEW_HEADER + _ar_rows(16, (
        (1 << 28, 4000.0), (1 << 29, 8000.0), (1 << 30, 16000.0))))
    assert len(info) > 500_000
    (m,) = load_measurements(path)
    assert (m.collective, m.world_size, len(m)) == ("allreduce", 16, 3)
    from pybench.model.logs import sniff_format
    assert sniff_format(path.read_text()) == "nccl-tests"


def test_a_pybench_header_claiming_zero_ranks_is_refused_unless_the_world_is_given(tmp_path):
    from conftest import REPO

    text = (REPO / "tests" / "fixtures" / "log_pybench_stdout_mpi2_allreduce.txt").read_text()
    path = tmp_path / "zero.txt"
    path.write_text(text.replace("# world 2 ranks", "# world 0 ranks", 1))
    with pytest.raises(FileFormatError, match="says world 0 ranks.*give --world N"):
        load_measurements(path)
    assert load_measurements(path, world_size=2)[0].world_size == 2


def test_a_row_whose_busbw_is_beyond_any_rank_count_does_not_break_the_world_reading(tmp_path):
    # one garbled busbw (62.26 for an algbw of 1.20: above 2x, which no all-reduce prints) among good rows
    rows = _ar_rows(16, ((1 << 17, 108.9), (1 << 20, 200.0), (1 << 24, 1500.0), (1 << 28, 20000.0)))
    first = rows.splitlines(keepends=True)[0].split()
    first[7] = "62.26"
    path = tmp_path / "garbled.log"
    path.write_text(NEW_HEADER + " ".join(first) + "\n" + "".join(rows.splitlines(keepends=True)[1:]))
    (m,) = load_measurements(path)
    assert (m.collective, m.world_size) == ("allreduce", 16)


def test_nccl_tests_json_under_kubectl_timestamps_is_read(tmp_path):
    """``kubectl logs --timestamps`` of a job that printed its nccl-tests -J file."""
    from conftest import REPO
    src = (REPO / "tests" / "fixtures" / "nccl_tests_allreduce_8xa100.json").read_text()
    labelled = tmp_path / "job.log"
    labelled.write_text("".join(f"2024-05-01T12:00:00.123456789Z {line}\n" for line in src.splitlines()))
    assert sniff_format(labelled.read_text()) == "nccl-tests-json"
    (ms,) = load_measurements(labelled)
    (plain,) = load_measurements(REPO / "tests" / "fixtures" / "nccl_tests_allreduce_8xa100.json")
    assert ms.size_bytes.tolist() == plain.size_bytes.tolist() and ms.world_size == plain.world_size
    # its first line unlabelled (the document's "{" written before the collector stamped lines)
    lines = src.splitlines()
    labelled.write_text(lines[0] + "\n" + "".join(f"2024-05-01T12:00:00.123456789Z {ln}\n" for ln in lines[1:]))
    (first,) = load_measurements(labelled)
    assert first.size_bytes.tolist() == plain.size_bytes.tolist()


def test_a_table_named_only_by_its_footer_or_by_an_mpi_build_takes_that_name(tmp_path):
    """OCI's MI355X logs name each test only in "# Collective test concluded: alltoall_perf" after it; NGC's
    and CloudAI's MPI builds are all_reduce_perf_mpi, ...: each names its table's collective."""
    ratio = 15 / 16  # all-gather and all-to-all alike: only the name tells them apart
    path = tmp_path / "footer.log"
    path.write_text(NEW_HEADER + _rows(16, False, 2 * ratio) + "# Avg bus bandwidth    : 1.0\n#\n"
                    "# Collective test concluded: all_reduce_perf\n\n"
                    + NEW_HEADER + _rows(16, False, ratio) + "# Avg bus bandwidth    : 1.0\n#\n"
                    "# Collective test concluded: alltoall_perf\n")
    assert [m.collective for m in load_measurements(path)] == ["allreduce", "alltoall"]
    path.write_text("mpirun -np 16 ./build/alltoall_perf_mpi -b 1M -e 1G -f 2\n" + NEW_HEADER
                    + _rows(16, False, ratio))
    (m,) = load_measurements(path)
    assert m.collective == "alltoall" and not any("program name not in the log" in n for n in m.notes)


def test_collective_override_refuses_a_log_of_several_named_tests(tmp_path):
    path = tmp_path / "two.log"
    path.write_text("# Collective test starting: all_reduce_perf\n" + NEW_HEADER + _rows(16, False, 30 / 16)
                    + "# Collective test starting: alltoall_perf\n" + NEW_HEADER + _rows(16, False, 15 / 16))
    with pytest.raises(FileFormatError, match="would name all the tests of this log alike"):
        load_measurements(path, collective="allreduce")
    assert [m.collective for m in load_measurements(path)] == ["allreduce", "alltoall"]


def test_a_job_log_of_point_to_point_and_collective_tests_fits_each_at_its_own_layout(tmp_path, capsys):
    """converged-computing's job logs hold osu_latency (2 ranks, 1 per node) beside osu_allreduce (96 per node):
    --world 192 --nodes 2 is the all-reduce's; the latency stays 2 ranks, and its 2 nodes answer predict."""
    from pybench import load_model

    log = tmp_path / "job.out"
    log.write_text("+ mpirun -np 2 -map-by ppr:1:node ./osu_latency\n# OSU MPI Latency Test v5.8\n"
                   "# Size          Latency (us)\n1 1.50\n1024 2.90\n65536 12.00\n"
                   "+ mpirun -np 192 -map-by ppr:96:node ./osu_allreduce\n# OSU MPI Allreduce Latency Test v5.8\n"
                   "# Size       Avg Latency(us)\n4 10.36\n1024 20.00\n1048576 900.00\n", encoding="utf-8")
    model = tmp_path / "m.json"
    assert main_for_tests(["fit", str(log), "--world", "192", "--nodes", "2", "-o", str(model)]) == 0
    out = capsys.readouterr().out
    assert "p2p_latency / mpi / inter-node / 2 ranks" in out and "--world 192 not applied to this table" in out
    assert main_for_tests(["predict", str(model), "--collective", "p2p_latency", "--world", "2", "--nodes", "2",
                           "--sizes", "1K"]) == 0
    assert "measured" in capsys.readouterr().out
    assert load_model(model, collective="p2p_latency").predict(1024, world=2, nodes=2).provenance == "measured"
    # the all-reduce on 32 nodes: --nodes 32 is not the 2-rank latency test's (it was refused for it)
    log.write_text(log.read_text().replace("-np 192 -map-by ppr:96:node", "-np 3072 -map-by ppr:96:node"))
    assert main_for_tests(["fit", str(log), "--world", "3072", "--nodes", "32", "-o", str(model), "--force"]) == 0
    assert "--nodes 32 not applied to this table" in capsys.readouterr().out


def test_a_link_slower_than_1_gb_per_s_still_tells_the_collective(tmp_path):
    # A public 2-node all-reduce over TCP sockets (1 V100-PCIe per node) peaked at 0.99 GB/s: no row had the
    # three digits busbw/algbw was read from, and the log was refused as "bandwidths too small".
    rows = [(8 << k, 17e-6 + (8 << k) / 0.97e9) for k in range(0, 25, 2)]
    body = "\n".join(f"{s:>12d}  {s // 4:>12d}     float     sum      -1  {t * 1e6:7.1f}  {s / t / 1e9:6.2f}  "
                     f"{s / t / 1e9:6.2f}      0  {t * 1e6:7.1f}  {s / t / 1e9:6.2f}  {s / t / 1e9:6.2f}      0"
                     for s, t in rows)
    path = tmp_path / "sockets.log"
    path.write_text("# nThread 1 nGpus 1 minBytes 8 maxBytes 134217728 step: 4(factor) warmup iters: 5 iters: 20\n"
                    "#\n# Using devices\n"
                    "#  Rank  0 Group  0 Pid  58680 on       sw53 device  0 [0xb1] Tesla V100-PCIE-32GB\n"
                    "#  Rank  1 Group  0 Pid 928295 on       sw54 device  0 [0xb1] Tesla V100-PCIE-32GB\n"
                    "#\n#                                                              out-of-place"
                    "                       in-place\n"
                    "#       size         count      type   redop    root     time   algbw   busbw #wrong     time "
                    "  algbw   busbw #wrong\n"
                    "#        (B)    (elements)                               (us)  (GB/s)  (GB/s)             (us)"
                    "  (GB/s)  (GB/s)\n" + body + "\n# Out of bounds values : 0 OK\n")
    assert max(s / t / 1e9 for s, t in rows) < 0.99
    (m,) = load_measurements(path)
    assert (m.collective, m.world_size, m.link_class) == ("allreduce", 2, "inter-node")


def test_an_rccl_tests_log_says_descriptions_rest_on_no_rccl_data(tmp_path):
    # rccl-tests prints nccl-tests' table under its own banner; the named systems and described crossings come
    # from NVIDIA systems (a public MI300X node + its description missed 2 nodes by 55%, 4 of 11 covered).
    rows = [(1 << k, 14e-6 + (1 << k) / 300e9) for k in range(16, 31, 2)]
    body = "\n".join(f"{s:>12d}  {s // 4:>12d}     float     sum      -1  {t * 1e6:8.2f}  {s / t / 1e9:6.2f}  "
                     f"{1.75 * s / t / 1e9:6.2f}      0  {t * 1e6:8.2f}  {s / t / 1e9:6.2f}  {1.75 * s / t / 1e9:6.2f}"
                     f"      0" for s, t in rows)
    path = tmp_path / "mi300x.log"
    path.write_text("# nThread 1 nGpus 1 minBytes 8 maxBytes 8589934592 step: 2(factor) warmup iters: 5 iters: 20\n"
                    "#\nrccl-tests: Version develop:a7809b3\n# Using devices\n"
                    + "".join(f"#  Rank  {r} Group  0 Pid   {7085 + r} on node1 device  {r} [0000:05:00] AMD Instinct "
                              f"MI300X\n" for r in range(8))
                    + "#\n#       size         count      type   redop    root     time   algbw   busbw #wrong     "
                      "time   algbw   busbw #wrong\n"
                      "#        (B)    (elements)                               (us)  (GB/s)  (GB/s)            (us)"
                      "  (GB/s)  (GB/s)\n" + body + "\n")
    (m,) = load_measurements(path)
    assert (m.collective, m.world_size) == ("allreduce", 8)
    assert any(n.startswith("an rccl-tests log (AMD's RCCL)") for n in m.notes)
    plain = tmp_path / "h100.log"
    plain.write_text(path.read_text().replace("rccl-tests: Version develop:a7809b3\n", ""))
    assert not any("rccl" in n for n in load_measurements(plain)[0].notes)


def test_pybench_stdout_across_hosts_gives_its_node_count(tmp_path):
    # pybench's header names its hosts; a multi-host stdout log was refused for want of the node count.
    from pathlib import Path

    from pybench.model.topology_fit import nodes_of
    fixture = Path(__file__).parents[1] / "fixtures" / "log_pybench_stdout_mpi2_allreduce.txt"
    text = fixture.read_text().replace("# world 2 ranks on 1 host(s) [vm: 2], link intra-node",
                                       "# world 2 ranks, 2 host(s) [nodeA: 1, nodeB: 1], link inter-node")
    path = tmp_path / "two_hosts.log"
    path.write_text(text)
    (m,) = load_measurements(path)
    assert (m.world_size, m.link_class, nodes_of(m)) == (2, "inter-node", 2)
    assert nodes_of(load_measurements(fixture)[0]) == 1


def test_one_rank_listed_by_several_processes_of_one_host_is_said(tmp_path):
    """nccl-tests built without MPI=1 and started 8 times on one host: 8 "Rank 0" lines with 8 Pids, read as one
    1-rank run without a word. Each process ran a test of its own, which the notes now say."""
    head = "# nThread 1 nGpus 1 minBytes 1048576 maxBytes 4194304 step: 2(factor) warmup iters: 1 iters: 20\n"
    ranks = "".join(f"#  Rank  0 Group  0 Pid {700 + k} on    host1 device  {k} [0000:{k:02x}:00] NVIDIA A100\n"
                    for k in range(3))
    table = ("#       size         count      type   redop    root     time   algbw   busbw #wrong     time   algbw"
             "   busbw #wrong\n"
             + "".join(f"{s:>12} {s // 4:>13}     float     sum      -1    {10 + s / 1e4:.2f}  {s / (10 + s / 1e4) / 1e3:6.2f}"
                       f"    0.00      0    {10 + s / 1e4:.2f}  {s / (10 + s / 1e4) / 1e3:6.2f}    0.00      0\n"
                       for s in (1048576, 2097152, 4194304)))
    log = tmp_path / "nonmpi.log"
    log.write_text("# Collective test starting: all_reduce_perf\n" + head + "# Using devices\n" + ranks + table)
    (m, *_) = load_measurements(log)
    assert any(n.startswith("Rank 0 is listed by 3 processes (host1 (Pid 700)") and "MPI=1" in n for n in m.notes)


def test_processes_that_each_ran_every_rank_of_their_test_ran_inside_their_host(tmp_path, capsys):
    """together-nccl-tests: a 2-node launch ran `-g 8` once per host, two tests of 8 ranks each, their lines
    interleaved. The table is one host's NVLink; it was read as 'link class unknown', and `--nodes 2` then fitted
    NVLink's 365 GB/s as the network between nodes."""
    from conftest import PUBLIC_LOGS
    log = PUBLIC_LOGS / "together_h100_two_independent_g8_allreduce.log"
    (ms,) = load_measurements(log)
    assert (ms.world_size, ms.link_class) == (8, "intra-node")
    assert any("each with all 8 ranks" in n for n in ms.notes)
    assert main_for_tests(["fit", str(log), "--nodes", "2", "-o", str(tmp_path / "m.json")]) == 2
    assert "ran on 1 node(s) by its own record" in capsys.readouterr().err


def test_a_sendrecv_over_elided_rank_lines_is_said_over_the_ranks_they_name(tmp_path):
    """together-nccl-tests' 64-node sendrecv log printed as an excerpt (Rank 0-3 and 508-511): the note reasoned
    over '8 ranks the Rank lines list' while the model said 512."""
    ranks = "".join(f"#  Rank {r:3d} Group  0 Pid {1000 + r} on {'a' if r < 8 else 'b'} device {r % 8} [0x1b] "
                    f"NVIDIA B200\n" for r in (*range(4), *range(508, 512)))
    head = ("#       size         count      type   redop    root     time   algbw   busbw  #wrong     time   algbw"
            "   busbw  #wrong\n")
    rows = "".join(f"{s:>12} {s // 4:>12}     float     sum      -1  {t:7.2f}  {s / t / 1e3:6.2f}  {s / t / 1e3:6.2f}"
                   f"       0  {t:7.2f}  {s / t / 1e3:6.2f}  {s / t / 1e3:6.2f}       0\n"
                   for s, t in ((1 << 20, 60.0), (1 << 22, 150.0), (1 << 24, 500.0)))
    path = tmp_path / "sr.log"
    path.write_text(ranks + "#\n" + head + rows)
    (ms,) = load_measurements(path)
    assert (ms.collective, ms.world_size) == ("sendrecv", 512)
    assert any("over the 512 ranks the Rank lines name" in n for n in ms.notes), ms.notes


def test_a_rank_line_that_every_rows_ratio_rules_out_is_not_the_tables(tmp_path, capsys):
    """coreweave/nccl-tests' README prints a 2-rack GB200 run as one Rank line, 'Rank 143', copied from the
    1-rack run's 'Rank 71' (same Pid and host), above rows whose busbw/algbw = 1.98437 (2 x 127/128) on every one:
    144 ranks would print 1.98611. It was read as 144 ranks without --nodes and refused --world 128."""
    line = "#  Rank 143 Group  0 Pid  14840 on slurm-gb200-207-171 device  3 [0x01] NVIDIA Graphics Device\n"
    head = ("#       size         count      type   redop    root     time   algbw   busbw #wrong     time   algbw"
            "   busbw #wrong\n")
    rows = ("   536870912     134217728     float     sum      -1   2156.8  248.92  493.94      0   2093.7  256.42  "
            "508.83      0\n  8589934592    2147483648     float     sum      -1    21493  399.65  793.06      0    "
            "21525  399.06  791.88      0\n 17179869184    4294967296     float     sum      -1    42067  408.40  "
            "810.41      0    41557  413.41  820.36      0\n")
    path = tmp_path / "gb200.log"
    path.write_text(line + "#\n" + head + rows)
    (ms,) = load_measurements(path)
    assert ms.world_size == 128 and ms.link_class is None
    assert any("those lines are another run's" in n for n in ms.notes), ms.notes
    (given,) = load_measurements(path, world_size=128)
    assert given.world_size == 128
    out = tmp_path / "m.json"
    assert main_for_tests(["fit", str(path), "--nodes", "32", "-o", str(out)]) == 0  # 4 ranks per host, as run


def test_a_row_printed_as_nan_or_inf_is_read_from_its_other_half_or_skipped(tmp_path):
    """nccl-tests prints -nan or inf where a time rounds to 0 or a bus factor is undefined (hypercube_perf): one
    such cell refused the whole log. The row's in-place half stands for it where its numbers are finite; a row with
    none is skipped, and the others are read, each with its note."""
    rows = _rows(8, False, 1.75).splitlines(keepends=True)
    cells = rows[3].split()
    cells[7] = "-nan"  # out-of-place busbw
    rows[3] = "  ".join(cells) + "\n"
    cells = rows[5].split()
    cells[5:8], cells[9:12] = ["0.00", "inf", "inf"], ["nan", "inf", "inf"]  # both halves
    rows[5] = "  ".join(cells) + "\n"
    path = tmp_path / "nan.log"
    path.write_text("# Collective test starting: all_reduce_perf\n" + NEW_HEADER + "".join(rows))
    (m,) = load_measurements(path, world_size=8)
    assert m.size_bytes.tolist() == [1 << e for e in range(20, 31) if e != 25]
    assert any("size 8388608 read from its in-place half (out of place: -nan)" in n for n in m.notes)
    assert any("size 33554432 skipped (its time or bandwidth printed as inf inf" in n for n in m.notes)
    every = tmp_path / "every.log"
    every.write_text("# Collective test starting: all_reduce_perf\n" + NEW_HEADER + rows[5])
    with pytest.raises(FileFormatError, match="no data rows .1 row.s. skipped: line 4: size 33554432 skipped"):
        load_measurements(every, world_size=8)


def test_pooled_tables_and_sizes_that_start_again_are_said(tmp_path):
    """A log pasted twice (two tables of one curve) and a table with another run's rows above its own (its sizes
    start again) were pooled as replicates with no word: the fit says so."""
    from pybench.model.build import fit_model
    table = "# Collective test starting: all_reduce_perf\n" + NEW_HEADER + _rows(8, False, 1.75)
    twice = tmp_path / "twice.log"
    twice.write_text(table + "# Avg bus bandwidth    : 1.0\n\n" + table)
    sets = load_measurements(twice, world_size=8)
    assert len(sets) == 2 and "2 tables pooled as replicates of one curve" in fit_model(sets).notes
    rows = _rows(8, False, 1.75).splitlines(keepends=True)
    again = tmp_path / "again.log"
    again.write_text("# Collective test starting: all_reduce_perf\n" + NEW_HEADER + "".join(rows[2:4] + rows))
    (one,) = load_measurements(again, world_size=8)
    assert any("again.log: its sizes start again at 1M after 8M (another run's rows in the same table" in n
               for n in fit_model(one).notes)
    assert not any("start again" in n or "tables pooled" in n for n in fit_model(load_measurements(
        twice, world_size=8)[0]).notes)


def test_osu_tables_with_host_and_device_buffers_are_not_pooled(tmp_path):
    """CSCS's OSU 7.5 pages: `osu_bw` and `osu_bw D D` on the same 2 nodes were fitted as one curve of 46 points. The
    MPI-CUDA title says where the buffers lay; the two are refused together in one line, each fits alone."""
    rows = "".join(f"{1 << k:<10} {min(2.0 ** k, 20000.0):>14.2f}              Pass\n" for k in range(0, 23))
    head = "# Datatype: MPI_CHAR.\n# Size      Bandwidth (MB/s)        Validation\n"
    host, device = tmp_path / "hh.txt", tmp_path / "dd.txt"
    host.write_text("$ srun -N2 ./pt2pt/osu_bw --validation\n# OSU MPI Bandwidth Test v7.5\n" + head + rows)
    device.write_text("$ srun -N2 ./pt2pt/osu_bw --validation D D\n# OSU MPI-CUDA Bandwidth Test v7.5\n" + head + rows)
    (d,) = load_measurements(device)
    assert "buffers in cuda device memory (OSU MPI-CUDA)" in d.notes
    assert not any("device memory" in n for n in load_measurements(host)[0].notes)
    assert main_for_tests(["fit", str(host), str(device), "-o", str(tmp_path / "m.json")]) == 2
    assert main_for_tests(["fit", str(device), "-o", str(tmp_path / "d.json")]) == 0


def test_two_files_of_one_name_are_told_apart_by_their_folders(tmp_path, capsys):
    """Two runs saved as osu.txt in two folders, one with host buffers and one with GPU buffers, were refused as
    "one table of osu.txt ..., another", as if both were one file's."""
    rows = "".join(f"{1 << k:<10} {1.5 + k:>14.2f}\n" for k in range(0, 12))
    for folder, title in (("a", "MPI"), ("b", "MPI-CUDA")):
        (tmp_path / folder).mkdir()
        (tmp_path / folder / "osu.txt").write_text(f"# OSU {title} Latency Test v7.5\n# Size   Avg Latency(us)\n{rows}")
    assert main_for_tests(["fit", str(tmp_path / "a" / "osu.txt"), str(tmp_path / "b" / "osu.txt"), "-o",
                           str(tmp_path / "m.json")]) == 2
    err = capsys.readouterr().err
    assert f"{tmp_path / 'a' / 'osu.txt'} ran by" in err and f"{tmp_path / 'b' / 'osu.txt'} by buffers" in err


def test_one_osu_log_with_host_and_device_tables_says_at_which_lines_they_start(tmp_path, capsys):
    """A CSCS page's log held `osu_latency` and `osu_latency D D` one after the other: the refusal said to fit each
    into a file of its own, but not where either began, in a file that has to be cut by hand."""
    rows = "".join(f"{1 << k:<10} {1.5 + k:>14.2f}\n" for k in range(0, 12))
    both = tmp_path / "both.md"
    both.write_text("# OSU MPI Latency Test v7.5\n# Size       Avg Latency(us)\n" + rows
                    + "\n# OSU MPI-CUDA Latency Test v7.5\n# Size       Avg Latency(us)\n" + rows)
    assert main_for_tests(["fit", str(both), "-o", str(tmp_path / "m.json")]) == 2
    err = capsys.readouterr().err
    assert "one table of both.md (line 2) ran by its tool's usual path" in err
    assert "another (line 17) by buffers in cuda device memory" in err and err.count("\n") == 1


def test_two_processes_output_interleaved_in_one_log_is_read_as_their_tables(tmp_path):
    """nccl-tests#306: two nodes' independent 8-GPU tests printed into one log. DIV 8 split one node's sweep at a
    repeated header (1G and 2G became a 'link class unknown' model answering 1 GiB as beyond its sizes) and dropped
    the other node's 12 rows, which had no header; MOD 8 listed the other process's Rank lines inside the first table
    and gave its 1000x slower table a second 'measured' answer of the same layout."""
    div = PUBLIC_LOGS / "h20_issue306_split_div8_two_g8_interleaved.txt"
    sets = load_measurements(div)
    assert [(ms.world_size, ms.link_class, ms.size_bytes.size) for ms in sets] == [(8, "intra-node", 12)] * 2
    assert any("line 37: a header repeated inside a table" in n for n in sets[0].notes)
    assert any("line 47: rows with no header of their own" in n for n in sets[1].notes)
    from conftest import SHARED_DATA
    after = tmp_path / "then_another.txt"  # another test's table after them carries none of their notes
    after.write_text(div.read_text() + (SHARED_DATA / "nccl-tests" / "a100_2node_16gpu_oci_roce_allreduce.txt").read_text())
    assert not any("interleaved" in n for n in load_measurements(after)[-1].notes)
    # NCCL's own lines between the rows and the header printed again (interleaved processes print them) do not
    # part the sweep
    info = tmp_path / "with_info.txt"
    lines = div.read_text().splitlines(keepends=True)
    info.write_text("".join(lines[:36] + ["node2:1:1 [0] NCCL INFO Using network IB\n"] + lines[36:]))
    assert [ms.size_bytes.size for ms in load_measurements(info)] == [12, 12]
    from pybench.model.build import fit_model
    model = fit_model(sets)
    assert model.provenance_at(float(1 << 30)) == "measured" and model.n_points == 48
    mod = PUBLIC_LOGS / "h20_issue306_split_mod8_two_g8_interleaved.txt"
    first, second = load_measurements(mod)
    assert second.link_class == first.link_class == "intra-node"  # its Rank lines were printed inside the first
    assert any("listed by 2 processes" in n for n in first.notes)
    assert main_for_tests(["fit", str(mod), "-o", str(tmp_path / "m.json")]) == 2


def test_what_follows_a_table_is_read_as_its_rows_only_where_it_is_nccl_tests_rows(tmp_path):
    """After the interleaved-output reading: `nvidia-smi dmon` numbers after a footer were read as headerless rows
    (the log then failed: "zero or negative time"), and a table cut short with no footer was joined across the next
    test's banner and Rank lines with that test's table, which started at a larger size."""
    from conftest import SHARED_DATA
    log = SHARED_DATA / "nccl-tests" / "a100_2node_16gpu_oci_roce_allreduce.txt"
    lines = log.read_text().splitlines(keepends=True)
    dmon = tmp_path / "dmon.txt"
    dmon.write_text("".join(lines) + "# gpu    pwr  gtemp  mtemp     sm    mem    enc    dec    jpg    ofa   mclk   pclk\n"
                    "# Idx      W      C      C      %      %      %      %      %      %    MHz    MHz\n"
                    "    0     61     33      -      0      0      0      0      0      0   1593    210\n")
    (ms,) = load_measurements(dmon)
    assert ms.size_bytes.tolist() == load_measurements(log)[0].size_bytes.tolist()
    head = next(i for i, ln in enumerate(lines) if "#       size" in ln)
    rows = [i for i, ln in enumerate(lines) if ln.strip()[:1].isdigit()]
    half = rows[len(rows) // 2]
    banner = ["# nThread 1 nGpus 1 minBytes 1048576 maxBytes 8589934592 step: 2(factor)\n", "#\n", "# Using devices\n",
              *(ln for ln in lines if "Rank" in ln), "#\n"]
    other = tmp_path / "two_tests.txt"
    other.write_text("".join(lines[:half] + banner + lines[head - 2:head + 2] + lines[half:]))
    first, second = load_measurements(other)
    assert first.size_bytes[-1] < second.size_bytes[0]  # two tables, the second from a larger size
    assert not any("header repeated" in n for n in first.notes + second.notes)


def test_sizes_one_pooled_table_alone_measured_are_its_own_replicates_not_the_tables():
    """Two sweeps of one A100 PCIe node (1 B-1 MiB in 1 KiB steps, 1 MiB-1 GiB in 10 MiB steps) meet at 1 MiB only:
    the 57 sizes whose times differ are the small sweep's out-of-place against its in-place, yet the note blamed
    the two tables' settings and told the user to fit each apart."""
    from pybench.model.build import fit_model
    sets = [m for name in ("small", "medium")
            for m in load_measurements(PUBLIC_LOGS / f"a100pcie_n013_1node2_allreduce_{name}.txt")]
    (note,) = [n for n in fit_model(sets).notes if "differ between their replicates" in n]
    assert "(out-of-place and in-place)" in note and "fit each table apart" not in note, note


def test_processes_that_each_ran_alone_are_told_to_launch_the_ranks_together(tmp_path, capsys):
    """Three all_reduce_perf processes started side by side without MPI: three 1-rank tables (each "Rank 0", busbw 0)
    disagreeing 9-52x. The refusal said to fit each table from a log of its own, which would model a 1-rank
    "all-reduce" of nothing; it says what the log is and how to measure ranks together."""
    from pybench.cli.main import main
    log = PUBLIC_LOGS / "cs244c_a100_3x1rank_side_by_side_allreduce.out"
    assert main(["fit", str(log), "-o", str(tmp_path / "m.json")]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "3 tables of allreduce at 1 rank each" in err[0]
    assert "a collective over 1 rank moves nothing between ranks" in err[0] and "fit each table" not in err[0]
    assert "built with MPI=1 under mpirun -np N, or -g N" in err[0] and "without MPI=1" in err[0]


def test_a_row_cut_short_is_said_of_its_own_element_types_sweep(tmp_path, capsys):
    """A `-d all` run killed in its last type's row: the note went to every type's sweep (each model said the
    float sweep lost a row it never had), and a sweep left with one size was skipped without naming its type."""
    from pybench.cli.main import main

    def rows(dtype: str, sizes) -> str:
        return "".join(f"{s:>12} {s // 4:>12} {dtype:>9}     sum      -1   {20 + s / 2e4:7.1f}    0.02    0.04      0"
                       f"   {20 + s / 2e4:7.1f}    0.02    0.04      0\n" for s in sizes)

    sizes = (1 << 20, 4 << 20, 16 << 20, 64 << 20)
    cut = f"{1 << 22:>12} {1 << 20:>12}     int32     sum      -1   229.7    0.02\n"  # killed mid-row
    log = tmp_path / "dall_cut.log"
    log.write_text("# Collective test starting: all_reduce_perf\n" + NEW_HEADER + rows("float", sizes)
                   + rows("int32", sizes[:3]) + cut)
    by_type = {m.dtype: m.notes for m in load_measurements(log, world_size=8)}
    assert any("last row cut short" in n for n in by_type["int32"])
    assert not any("last row cut short" in n for n in by_type["float32"])
    short = tmp_path / "dall_short.log"  # the cut type left with one size: the warning names it and its cut row
    short.write_text("# Collective test starting: all_reduce_perf\n" + NEW_HEADER + rows("float", sizes)
                     + rows("int32", sizes[:1]) + cut)
    assert main(["fit", str(short), "--world", "8", "-o", str(tmp_path / "m.json")]) == 0
    err = capsys.readouterr().err
    assert "int32 has 1 size(s); skipped" in err and "last row cut short" in err


def test_an_osu_table_whose_hashes_a_readme_lost_reads_as_the_table_osu_printed(tmp_path):
    """A Kubernetes README's `osu_bcast -f` output lost its '#' to Markdown ("OSU MPI Broadcast Latency Test v5.9",
    "  Size       Avg Latency(us) ..."): it was "not a recognised benchmark log". The title and a header naming its
    unit still start their lines; a line that merely starts with "Size" is no header."""
    rows = "".join(f"{1 << k:<10} {7.0 + k:>14.2f} {6.0 + k:>14.2f} {8.0 + k:>14.2f}        1000\n" for k in range(12))
    header = "  Size       Avg Latency(us)   Min Latency(us)   Max Latency(us)  Iterations\n"
    kept, lost = tmp_path / "kept.txt", tmp_path / "lost.txt"
    kept.write_text("# OSU MPI Broadcast Latency Test v5.9\n#" + header[1:] + rows)
    lost.write_text("Size of the job: 2 nodes\nOSU MPI Broadcast Latency Test v5.9\n" + header + rows)
    (a,), (b,) = load_measurements(kept, world_size=2), load_measurements(lost, world_size=2)
    assert a.collective == b.collective == "broadcast" and a.size_bytes.size == b.size_bytes.size == 12
    assert np.array_equal(a.time_s, b.time_s) and np.array_equal(a.time_low_s, b.time_low_s)
    # only under an OSU title: another tool's table whose header merely names a latency and a rate (its latencies
    # were read as MB/s by a first version), and prose after a real table (which it cut to no rows), are not OSU's
    pingpong = tmp_path / "pingpong.txt"
    pingpong.write_text("My ping-pong benchmark, 2 ranks\nSize (B)    Latency(us)   Bandwidth(MB/s)\n"
                        + "".join(f"{1 << k:<10} {1.5 + k:>8.2f} {k + 0.5:>10.2f}\n" for k in range(12)))
    with pytest.raises(FileFormatError, match="not a recognised benchmark log"):
        load_measurements(pingpong, world_size=2)
    prose = tmp_path / "prose.txt"
    prose.write_text(kept.read_text() + "Size of the job: 2 nodes; Latency above is the average\n")
    (c,) = load_measurements(prose, world_size=2)
    assert np.array_equal(c.time_s, a.time_s)


@pytest.mark.parametrize("world, redop", [(64, "none"), (64, "sum"), (200, "none")])
def test_a_headerless_table_over_fifty_ranks_and_more_is_not_read_as_a_bus_factor_of_one(tmp_path, world, redop):
    """OCI's GB200 README tables (no program name, no Rank lines): an all-to-all over 64 ranks prints busbw/algbw =
    63/64 = 0.984, which was read as send/recv's 1 (and a reduce-scatter as a 2-rank all-reduce). A bus factor of 1
    prints busbw as the very number algbw is. (Their count column is the buffer's, as here: no per-rank count tells.)"""
    factor = (world - 1) / world
    rows = "".join(f"{s:>12} {s // 4:>12}     float    {redop:>4}      -1  {t:8.1f}  {s / t / 1e3:6.2f}  "
                   f"{s / t / 1e3 * factor:6.2f}      0  {t:8.1f}  {s / t / 1e3:6.2f}  {s / t / 1e3 * factor:6.2f}      0\n"
                   for s, t in ((1 << 32, 7465.7), (1 << 33, 14800.0), (1 << 34, 29500.0)))
    path = tmp_path / "table.txt"
    path.write_text(NEW_HEADER + rows)
    (m,) = load_measurements(path)
    assert m.collective == ("reducescatter" if redop == "sum" else "allgather"), m.notes
    assert m.world_size in (world, None)  # (the rounded ratio may allow neighbouring counts: then none is read)
    ones = "".join(f"{s:>12} {s // 4:>12}     float    none      -1  {t:8.1f}  {s / t / 1e3:6.2f}  {s / t / 1e3:6.2f}"
                   f"      0  {t:8.1f}  {s / t / 1e3:6.2f}  {s / t / 1e3:6.2f}      0\n"
                   for s, t in ((1 << 32, 7465.7), (1 << 33, 14800.0)))
    path.write_text(NEW_HEADER + ones)
    assert load_measurements(path)[0].collective == "sendrecv"  # a bus factor of 1: busbw prints as algbw


def test_a_test_that_failed_before_its_table_says_so(tmp_path):
    """ALCF's Sophia all-to-all: its Rank lines, then `Test NCCL failure ... 'unhandled system error'` and no header.
    It read "not a recognised benchmark log", sending the user to the file's format instead of the run."""
    path = tmp_path / "failed.dat"
    path.write_text("# nThread 1 nGpus 1 minBytes 8 maxBytes 8589934592 step: 2(factor)\n#\n# Using devices\n"
                    "#  Rank  0 Group  0 Pid  1234 on sophia-gpu-13 device  0 [0x07] NVIDIA A100-SXM4-40GB\n"
                    "sophia-gpu-13: Test NCCL failure common.cu:1012 'unhandled system error'\n"
                    " .. sophia-gpu-13 pid 1234: Test failure common.cu:1036\n")
    with pytest.raises(FileFormatError, match="line 5: sophia-gpu-13: Test NCCL failure common.cu:1012") as caught:
        load_measurements(path)
    assert "the test failed before it printed any row" in str(caught.value)
    for text in (">", "a\rb", "x\r\n"):  # (a first version counted lines by newlines: IndexError on '>')
        path.write_text(text)
        with pytest.raises(FileFormatError, match="not a recognised benchmark log"):
            load_measurements(path)
