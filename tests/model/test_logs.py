"""Importers: the real logs in shared/data parse with the right values; fixtures; errors."""

from __future__ import annotations

import dataclasses
import re
from pathlib import Path

import numpy as np
import pytest

from pybench.errors import FileFormatError, SeveralTestsNamed
from pybench.model.logs import MeasurementSet, load_measurements, sniff_format

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"
# CI clones the repo into a folder beside shared/, so shared data is two levels up.
from conftest import PUBLIC_LOGS, SHARED_DATA  # noqa: E402  (the repo's copies of ../shared/data)

# The two header lines of a current nccl-tests table (out-of-place and in-place columns).
NCCL_HEADER = ("#       size         count      type   redop    root     time   algbw   busbw #wrong"
               "     time   algbw   busbw #wrong\n")
NCCL_UNITS = ("#        (B)    (elements)                               (us)  (GB/s)  (GB/s)"
              "            (us)  (GB/s)  (GB/s)\n")

needs_shared = pytest.mark.skipif(not SHARED_DATA.is_dir(),
                                  reason=f"shared measurement logs not found at {SHARED_DATA}")


def _one(path, **kw) -> MeasurementSet:
    sets = load_measurements(path, **kw)
    assert len(sets) == 1
    return sets[0]


# -- real logs --------------------------------------------------------------------------

@needs_shared
def test_a100_allreduce_with_shell_noise():
    m = _one(SHARED_DATA / "nccl-tests" / "a100_2node_16gpu_oci_roce_allreduce.txt")
    assert (m.source, m.collective, m.backend, m.dtype) == ("nccl-tests", "allreduce", "nccl", "float32")
    assert m.world_size == 16
    assert m.link_class == "inter-node"  # Rank lines name two hosts
    assert len(m) == 31
    assert m.size_bytes[0] == 8 and m.size_bytes[-1] == 8589934592
    assert m.time_s[0] == pytest.approx(36.47e-6)       # out-of-place, not in-place 34.74
    assert m.time_s[-1] == pytest.approx(67689e-6)
    assert m.time_s[list(m.size_bytes).index(1048576)] == pytest.approx(85.58e-6)
    # The in-place column is a second measurement of the same operation, kept beside it.
    assert m.time_in_place_s[0] == pytest.approx(34.74e-6)
    assert m.time_in_place_s[list(m.size_bytes).index(1048576)] == pytest.approx(84.50e-6)
    size, time = m.fit_points()
    assert size.size == time.size == 62
    assert sorted(time[size == 8]) == pytest.approx([34.74e-6, 36.47e-6])


@needs_shared
def test_h100_srun_prefix_and_world_from_busbw():
    m = _one(SHARED_DATA / "nccl-tests" / "h100_p5_2node_16gpu_efa_allreduce_srunprefix.txt")
    assert m.collective == "allreduce"
    assert m.world_size == 16            # busbw/algbw = 1.875 = 2 * 15/16; no Rank lines
    assert m.link_class is None          # no Rank lines: unknown, not guessed
    assert len(m) == 32
    assert m.size_bytes[0] == 8 and m.size_bytes[-1] == 17179869184
    assert m.time_s[0] == pytest.approx(69.12e-6)
    assert m.time_s[-1] == pytest.approx(66132e-6)
    assert any("busbw/algbw" in n for n in m.notes)


@needs_shared
def test_b200_allgather():
    m = _one(SHARED_DATA / "nccl-tests" / "b200_2node_16gpu_gke_a4_allgather.txt")
    assert m.collective == "allgather"
    assert m.world_size == 16 and m.link_class == "inter-node"
    assert len(m) == 24
    assert m.size_bytes[0] == 1024 and m.size_bytes[-1] == 8589934592
    assert m.time_s[0] == pytest.approx(280.4e-6)
    assert m.time_s[5] == pytest.approx(246.2e-6)     # 32 KiB
    assert m.time_s[-1] == pytest.approx(30970e-6)


@needs_shared
def test_v100_old_layout_prescaled_algbw():
    m = _one(SHARED_DATA / "nccl-tests" / "v100_dgx1_8gpu_allgather_4g_issue37_oldformat.txt")
    assert m.collective == "allgather"
    # algbw 129.05 = size/time (147.5 GB/s) x 7/8: the old layout's pre-scaled algbw gives n = 8.
    assert m.world_size == 8
    assert list(m.size_bytes) == [4294967296]
    assert m.time_s[0] == pytest.approx(29122e-6)


@needs_shared
def test_osu_bw_cuda():
    m = _one(SHARED_DATA / "osu" / "osu_bw_cuda_a100_nvlink_eessi716.txt")
    assert (m.source, m.collective, m.backend, m.world_size) == ("osu", "p2p_bw", "mpi", 2)
    assert len(m) == 26
    assert m.size_bytes[0] == 1 and m.size_bytes[-1] == 33554432
    # MB/s is 1e6 B/s: 1 B at 1.01 MB/s -> 0.990 us; 32 MiB at 93130.52 MB/s -> 360.3 us.
    assert m.time_s[0] == pytest.approx(1 / 1.01e6)
    assert m.time_s[-1] == pytest.approx(33554432 / 93130.52e6)


@needs_shared
def test_every_shared_log_parses():
    # Every real log as it is, the vTrain CSV tables included (issue 13: they failed to import).
    files = sorted(p for d in ("nccl-tests", "osu", "vtrain") for p in (SHARED_DATA / d).rglob("*") if p.is_file())
    assert len(files) >= 12
    for path in files:
        sets = load_measurements(path)
        assert sets and all(len(m) >= 1 and np.all(m.time_s > 0) for m in sets), path


# -- hand-written fixtures --------------------------------------------------------------

def test_nccl_tests_json_fixture():
    m = _one(FIXTURES / "nccl_tests_allreduce_8xa100.json")
    assert (m.collective, m.world_size, m.link_class, m.dtype) == ("allreduce", 8, "intra-node", "float32")
    assert m.size_bytes[0] == 1024 and m.size_bytes[-1] == 1 << 30
    assert m.time_s[0] == pytest.approx(12.10e-6)
    assert m.time_s[-1] == pytest.approx(8803.0e-6)
    assert m.time_in_place_s is not None and np.all(m.time_in_place_s > 0)
    assert m.fit_points()[0].size == 2 * len(m)


@pytest.mark.parametrize("name, collective", [("cpu_mpi2_allreduce.json", "allreduce"),
                                              ("cpu_mpi2_allgather.json", "allgather")])
def test_real_cpu_runs(name, collective):
    # Real pybench runs on the development VM (tests/fixtures/README.md).
    m = _one(FIXTURES / name)
    assert (m.source, m.backend, m.collective, m.world_size, m.link_class) == \
        ("pybench", "mpi", collective, 2, "intra-node")
    assert list(m.size_bytes) == [2 ** k for k in range(16, 29)]
    assert np.all(m.time_low_s <= m.time_s) and np.all(m.time_s <= m.time_high_s)
    assert m.time_in_place_s is None and m.fit_points()[0].size == 13


def test_pybench_result_fixture():
    m = _one(FIXTURES / "pybench_result_allreduce_mpi2.json")
    assert (m.source, m.backend, m.collective, m.world_size, m.link_class) == \
        ("pybench", "mpi", "allreduce", 2, "intra-node")
    assert len(m) == 11
    assert m.time_s[0] == pytest.approx(30e-6 + 1024 / 5e9)
    assert m.time_high_s[0] == pytest.approx(m.time_s[0] * 1.06)
    assert m.time_statistic == "median"


def test_osu_latency_with_f_columns():
    m = _one(FIXTURES / "osu_latency_f.txt")
    assert (m.collective, m.world_size) == ("p2p_latency", 2)
    assert m.size_bytes[0] == 1 and m.size_bytes[-1] == 4194304
    assert m.time_s[0] == pytest.approx(1.62e-6)
    assert m.time_low_s[0] == pytest.approx(1.55e-6)
    assert m.time_high_s[-1] == pytest.approx(1420.66e-6)


def test_osu_collective():
    m = _one(FIXTURES / "osu_allreduce.txt")
    assert (m.collective, m.world_size, m.backend) == ("allreduce", 4, "mpi")
    assert m.time_s[-1] == pytest.approx(2301.75e-6)
    assert m.time_low_s is None


def test_old_millisecond_layout_and_no_program_name(tmp_path):
    # 2018-style table: no '#', time in ms, no redop/root, no program name anywhere.
    text = (
        "                                             out-of-place                       in-place\n"
        "       size         count    type     time   algbw   busbw  error     time   algbw   busbw  error\n"
        "        (B)    (elements)             (ms)  (GB/s)  (GB/s)            (ms)  (GB/s)  (GB/s)\n"
        "     1048576        262144   float    0.105    9.99   17.48  0e+00    0.104   10.08   17.64  0e+00\n"
        "     4194304       1048576   float    0.240   17.48   30.58  0e+00    0.238   17.62   30.84  0e+00\n"
        "    16777216       4194304   float    0.790   21.24   37.16  0e+00    0.788   21.29   37.26  0e+00\n"
    )
    path = tmp_path / "old.log"
    path.write_text(text)
    m = _one(path, collective="allreduce")
    assert m.time_s[0] == pytest.approx(0.105e-3)
    assert m.time_in_place_s[0] == pytest.approx(0.104e-3)   # same unit as out-of-place
    assert m.world_size == 8   # busbw/algbw = 1.75 = 2 * 7/8
    # Without the unit line the unit is recovered from algbw = size/time.
    path.write_text("\n".join(ln for ln in text.splitlines() if "(B)" not in ln) + "\n")
    assert _one(path, collective="allreduce").time_s[1] == pytest.approx(0.240e-3)


def test_collective_inferred_from_ratio_when_unnamed(tmp_path):
    text = NCCL_HEADER + NCCL_UNITS + (
        "     1048576         32768     float    none      -1    40.00   26.21   22.94      0"
        "    40.00   26.21   22.94      0\n"
        "     4194304        131072     float    none      -1    80.00   52.43   45.88      0"
        "    80.00   52.43   45.88      0\n"
    )
    path = tmp_path / "ag.log"
    path.write_text(text)
    m = _one(path)
    assert (m.collective, m.world_size) == ("allgather", 8)  # ratio 0.875 = 7/8, redop none
    assert m.link_class is None


def test_several_tables_in_one_log(tmp_path):
    src = (SHARED_DATA / "nccl-tests" / "a100_2node_16gpu_oci_roce_allreduce.txt")
    if not src.exists():
        pytest.skip(f"shared data not found at {SHARED_DATA}")
    text = src.read_text()
    path = tmp_path / "two.log"
    path.write_text(text + "\n$ next run\n" + text)
    sets = load_measurements(path)
    assert len(sets) == 2 and all(len(m) == 31 for m in sets)


# -- errors -------------------------------------------------------------------------------

@pytest.mark.parametrize("content, fragment", [
    ("hello world\nnothing here\n", "not a recognised benchmark log"),
    ('{"schema": "other.thing", "schema_version": 1}', "is not 'pybench.result'"),
    ('{"schema": "pybench.result", "schema_version": 2, "records": []}', "newer"),
    ('{"schema": "pybench.result", "schema_version": 1, "collective": "allreduce", '
     '"backend": "mpi", "records": [{"size_bytes": 8}]}', "records[0]"),
    ('{"results": "x"}', "no 'results' list"),
    ("{ not json", "JSON"),
    ("# Size      Bandwidth (MB/s)\n8   abc\n", "line 2"),
    ("#  size  count  type  redop  root  time  algbw  busbw  #wrong  time  algbw  busbw  #wrong\n"
     "#  (B)  (elements)  (us)\n   8   2  float  sum  -1  1.0  0.00\n", "expected 13 columns"),
])
def test_malformed_files_give_one_line_file_format_error(tmp_path, content, fragment):
    path = tmp_path / "bad.txt"
    path.write_text(content)
    with pytest.raises(FileFormatError) as info:
        load_measurements(path)
    msg = str(info.value)
    assert "\n" not in msg and str(path) in msg and fragment in msg


def test_binary_and_missing_files(tmp_path):
    path = tmp_path / "blob.bin"
    path.write_bytes(b"\x00\x01\x02" * 100)
    with pytest.raises(FileFormatError, match="binary"):
        load_measurements(path)
    with pytest.raises(FileFormatError, match="cannot read"):
        load_measurements(tmp_path / "missing.txt")


def test_sniff_format():
    assert sniff_format('{"schema": "pybench.result"}') == "pybench-json"
    assert sniff_format('{"version": 2, "results": []}') == "nccl-tests-json"
    assert sniff_format("# OSU MPI Latency Test v7.3\n# Size  Latency (us)\n1 1.0\n") == "osu"
    assert sniff_format("random") == "unknown"
    assert sniff_format("size(B),count,type,time(ns),busbw(GB/s),time(ns),busbw(GB/s)\n1048576,1,float,1,1,1,1\n") \
        == "vtrain-csv"
    assert sniff_format('{"schema": ' + "[" * 100 + "]" * 100 + "}") == "unknown"   # too deep: not ours


def test_measurement_set_is_frozen():
    m = MeasurementSet("x", "allreduce", "mpi", 2, None, "float32", [1, 2], [1e-6, 2e-6])
    with pytest.raises(ValueError, match="read-only"):
        m.time_s[0] = 5.0
    with pytest.raises(dataclasses.FrozenInstanceError):
        m.collective = "other"  # type: ignore[misc]
    with pytest.raises(ValueError):
        MeasurementSet("x", "allreduce", "mpi", 2, "moon", "float32", [1], [1e-6])


def test_all_types_and_ops_split_into_sets(tmp_path):
    # `all_reduce_perf -d all -o all` prints each size once per (type, op).
    text = "# Collective test starting: all_reduce_perf\n" + NCCL_HEADER + NCCL_UNITS
    rows = []
    for size in (1 << 20, 1 << 22):
        for typ, op, t in (("float", "sum", 50.0), ("float", "max", 52.0), ("half", "sum", 48.0)):
            alg = size / t / 1e3
            rows.append(f"{size:>12} {size // 4:>12} {typ:>8} {op:>6} {-1:>6} {t:>8.2f} {alg:>7.2f} "
                        f"{alg * 1.75:>7.2f} 0 {t:>8.2f} {alg:>7.2f} {alg * 1.75:>7.2f} 0")
    path = tmp_path / "all.log"
    path.write_text(text + "\n".join(rows) + "\n")
    sets = load_measurements(path)
    assert [(m.dtype, len(m)) for m in sets] == [("float32", 2), ("float32", 2), ("float16", 2)]
    assert sets[1].time_s[0] == pytest.approx(52e-6) and "redop max" in sets[1].notes[-1]
    assert all(m.collective == "allreduce" and m.world_size == 8 for m in sets)


# -- real log variants (issue 13), each a fixture written in that shape ----------------------

@pytest.mark.parametrize("gpus", [2, 8])
def test_vtrain_csv_tables_import_as_they_are(gpus):
    m = _one(SHARED_DATA / "vtrain" / f"a100_nvswitch_allreduce_{gpus}gpu.csv")
    assert (m.source, m.collective, m.backend, m.world_size, m.link_class, m.dtype) == \
        ("vtrain", "allreduce", "nccl", gpus, "intra-node", "float32")
    assert len(m) == 1024 and m.size_bytes[0] == 1 << 20 and m.size_bytes[-1] == 1 << 30
    assert np.all(np.diff(m.size_bytes) == 1 << 20)
    if gpus == 2:   # first row: 1048576,262144,float,44210,23.72,45100,23.25 (ns)
        assert m.time_s[0] == pytest.approx(44210e-9) and m.time_in_place_s[0] == pytest.approx(45100e-9)
    assert any("file name" in n for n in m.notes)


def test_vtrain_errors_name_file_and_line(tmp_path):
    text = (SHARED_DATA / "vtrain" / "a100_nvswitch_allreduce_2gpu.csv").read_text().splitlines()
    bad = tmp_path / "a100_allreduce_2gpu.csv"
    bad.write_text("\n".join(text[:3] + ["3145728,786432,float,abc,55.90,54160,58.08"] + text[4:6]) + "\n")
    with pytest.raises(FileFormatError, match=rf"{bad}: line 4: expected size,count"):
        load_measurements(bad)
    nameless = tmp_path / "table.csv"
    nameless.write_text("\n".join(text[:5]) + "\n")
    with pytest.raises(FileFormatError, match="does not say which collective"):
        load_measurements(nameless)
    assert _one(nameless, collective="allreduce", world_size=2).world_size == 2
    # The name says 8 GPUs, busbw says 2: refused rather than mislabelled.
    liar = tmp_path / "a100_allreduce_8gpu.csv"
    liar.write_text("\n".join(text[:5]) + "\n")
    with pytest.raises(FileFormatError, match="contradicts 8 ranks"):
        load_measurements(liar)


def test_open_mpi_tag_output_prefixes():
    m = _one(FIXTURES / "log_nccl_tests_ompi_tag_output_allreduce.txt")
    assert (m.collective, m.world_size, m.link_class) == ("allreduce", 8, "inter-node")
    # Every row kept, although other ranks' NCCL lines sit inside the table.
    assert len(m) == 25 and m.size_bytes[0] == 8 and m.size_bytes[-1] == 1 << 27


def test_all_gather_rows_of_size_zero_are_skipped_with_a_note(tmp_path):
    src = FIXTURES / "log_nccl_tests_allgather_b8_size0.txt"
    m = _one(src)
    assert (m.collective, m.world_size, m.link_class) == ("allgather", 16, "inter-node")
    assert m.size_bytes[0] == 64 and len(m) == 21 and np.all(m.size_bytes > 0)
    assert sum("size 0 skipped" in n for n in m.notes) == 3
    assert [n.split(":")[0] for n in m.notes if "size 0" in n] == ["line 25", "line 26", "line 27"]
    # A table of nothing but size-0 rows: the error names the file and the header's line.
    lines = src.read_text().splitlines()
    only_zero = tmp_path / "all_gather_perf.txt"
    only_zero.write_text("\n".join(lines[:27]) + "\n")
    with pytest.raises(FileFormatError, match=rf"{only_zero}: line 23: .*no data rows \(3 row\(s\) skipped: line 25: size 0 skipped"):
        load_measurements(only_zero)


def test_two_tests_in_one_log_are_two_sets_not_pooled(tmp_path):
    from pybench.model.build import fit_models

    sets = load_measurements(FIXTURES / "log_nccl_tests_two_tests_allreduce_alltoall.txt")
    assert [(m.collective, m.world_size, m.link_class, len(m)) for m in sets] == \
        [("allreduce", 8, "intra-node", 18), ("alltoall", 8, "intra-node", 18)]
    assert sorted(m.collective for m in fit_models(sets)) == ["allreduce", "alltoall"]


def test_only_some_rank_lines_world_from_busbw(tmp_path):
    m = _one(FIXTURES / "log_nccl_tests_partial_rank_lines_allreduce.txt")
    # 8 Rank lines on one host, busbw/algbw = 1.875: 16 ranks, and the link class is not guessed.
    assert (m.collective, m.world_size, m.link_class) == ("allreduce", 16, None)
    assert "Rank lines list 8 of 16 ranks (world size from busbw/algbw)" in m.notes
    # where the launcher's line gave the count, the note says so (it said busbw/algbw beside "from the mpirun
    # command line" on a 1024-rank log that printed 100 Rank lines)
    text = (FIXTURES / "log_nccl_tests_partial_rank_lines_allreduce.txt").read_text()
    log = tmp_path / "launched.log"
    log.write_text("mpirun -np 16 ./build/all_reduce_perf -b 8 -e 128M -f 2\n" + text)
    launched = _one(log)
    assert "Rank lines list 8 of 16 ranks (world size from the command line)" in launched.notes, launched.notes


def test_osu_with_mvapich_warnings_keeps_all_19_sizes():
    m = _one(FIXTURES / "log_osu_allreduce_mvapich_warnings.txt")
    assert (m.collective, m.backend, m.world_size) == ("allreduce", "mpi", 4)
    assert len(m) == 19 and m.size_bytes[0] == 4 and m.size_bytes[-1] == 1 << 20


def test_osu_bad_row_names_file_and_line(tmp_path):
    path = tmp_path / "osu.txt"
    path.write_text("# OSU MPI Allreduce Latency Test v5.9\n# Size  Avg Latency(us)\n4  3.2\nWARNING: x\n8  abc\n")
    with pytest.raises(FileFormatError, match=rf"{path}: line 5: expected size and latency"):
        load_measurements(path)
    # text that starts with a number between rows (a UCX message cut by a write, a program's output) is not a row
    path.write_text("# OSU MPI Allreduce Latency Test v5.9\n# Size  Avg Latency(us)\n4  3.2\n"
                    "238  UCX  ERROR   shm_open(file_name=/ucx_shm_posix) failed\n8  3.3\n"
                    "8 by 4 by 6 MPI processor grid\n", encoding="utf-8")
    (m,) = load_measurements(path, world_size=192)
    assert m.size_bytes.tolist() == [4, 8] and "line 4: not a row of the table" in " ".join(m.notes)


def test_pybench_own_stdout_table():
    # Rendered by pybench.measure.table from the real run in cpu_mpi2_allreduce.json.
    m = _one(FIXTURES / "log_pybench_stdout_mpi2_allreduce.txt")
    ref = _one(FIXTURES / "cpu_mpi2_allreduce.json")
    assert (m.source, m.backend, m.collective, m.world_size, m.link_class, m.time_statistic) == \
        ("pybench", "mpi", "allreduce", 2, "intra-node", "median")
    np.testing.assert_array_equal(m.size_bytes, ref.size_bytes)
    np.testing.assert_allclose(m.time_s, ref.time_s, rtol=1e-3)     # printed to 0.01 us
    np.testing.assert_allclose(m.time_high_s, ref.time_high_s, rtol=1e-3)


def test_nccl_tests_errors_name_file_and_line(tmp_path):
    path = tmp_path / "all_reduce_perf.txt"
    path.write_text(NCCL_HEADER + NCCL_UNITS + "  1048576  262144  float  sum  -1  40.0  26.21  45.87  0  40  26.21\n")
    with pytest.raises(FileFormatError, match=rf"{path}: line 3: expected 13 columns"):
        load_measurements(path)
    row = "  1048576  262144  float  sum  -1  0  26.21  45.87  0  40.0  26.21  45.87  0\n"
    path.write_text(NCCL_HEADER + NCCL_UNITS + row)
    with pytest.raises(FileFormatError, match=rf"{path}: line 3: zero or negative time"):
        load_measurements(path)


def test_complete_rank_lines_win_over_an_imprecise_ratio_at_many_ranks(tmp_path):
    # 1440 ranks: busbw/algbw = 2 * 1439/1440 = 1.998611; algbw 399.994 and busbw 799.432 GB/s
    # printed to 0.01 read 1.998625, which alone gives 1455 ranks. Rank lines 0..1439 are the whole list.
    ranks = "".join(f"#  Rank {r:4d} Group  0 Pid {r:5d} on tray{r // 4:03d} device  {r % 4} [0x10] NVIDIA GB200\n"
                    for r in range(1440))
    row = "   1073741824   268435456  float  sum  -1  2684.37  399.99  799.43  0  2684.37  399.99  799.43  0\n"
    path = tmp_path / "all_reduce_perf.txt"
    path.write_text(ranks + NCCL_HEADER + NCCL_UNITS + row)
    m = _one(path)
    assert (m.world_size, m.link_class) == (1440, "inter-node")
    assert any("world size 1440 from the Rank lines 0..1439, within the" in n for n in m.notes)
    # the Rank lines elided down to the last one (CoreWeave's 20-rack log): the smallest count both allow
    path.write_text(ranks.splitlines(keepends=True)[-1] + NCCL_HEADER + NCCL_UNITS + row)
    m = _one(path)
    assert m.world_size == 1440 and any("the smallest count both the Rank lines" in n for n in m.notes)


# -- newer nccl-tests tables: per-iteration columns (-I 1), timestamps, "cputime" ------------------------------
# Column layout as nccl-tests 2.17 prints it (util.cu: writeResultHeader / writeBenchmarkLineBody /
# writePerIterReport): each of out-of-place and in-place gains i_min, i_max, i_p99 and i_cv% with -I 1;
# with timestamps a date and time close the row; the footer ends "# Collective test concluded: ...".
_NEW_PREAMBLE = ("# Collective test starting: all_reduce_perf\n"
                 "#  Rank  0 Group  0 Pid  12345 on     node01 device  0 [0000:18:00] NVIDIA H100 80GB HBM3\n"
                 "#  Rank  1 Group  0 Pid  12346 on     node01 device  1 [0000:2a:00] NVIDIA H100 80GB HBM3\n"
                 "#  Rank  2 Group  0 Pid  12347 on     node01 device  2 [0000:3a:00] NVIDIA H100 80GB HBM3\n"
                 "#  Rank  3 Group  0 Pid  12348 on     node01 device  3 [0000:5d:00] NVIDIA H100 80GB HBM3\n#\n")
_NEW_FOOTER = ("# Out of bounds values : 0 OK\n# Avg bus bandwidth    : 100.5 \n#\n"
               "# Collective test concluded: all_reduce_perf\n")
_SIZES = [1 << 20, 4 << 20, 16 << 20, 64 << 20]


def _us(size: int, oop: bool) -> float:
    return (15.0 + size * 7.5e-6) * (1.0 if oop else 1.01)  # alpha 15 us, 133 GB/s; in-place 1% slower


def _body(size: int, oop: bool, per_iter: bool) -> str:
    us = _us(size, oop)
    alg = size / us / 1e3
    text = f"  {us:7.2f}  {alg:6.2f}  {alg * 1.5:6.2f}  {0:6g}"
    if per_iter:
        text += f"  {us * 0.97:7.2f}  {us * 1.2:7.2f}  {us * 1.15:7.2f}  {3.2:7.2f}"
    return text


@pytest.mark.parametrize("shape", ["per-iteration", "timestamps", "cputime"])
def test_newer_nccl_tests_columns_import_with_the_right_times(tmp_path, shape):
    per_iter = shape == "per-iteration"
    time_label = "cputime" if shape == "cputime" else "time"
    if per_iter:
        cols = f"{time_label}   algbw   busbw  #wrong    i_min    i_max    i_p99    i_cv%"
        header = f"#       size         count      type   redop    root  {cols}  {cols} \n"
    else:
        cols = f"{time_label}   algbw   busbw  #wrong"
        header = (f"#       size         count      type   redop    root  {cols}  {cols}"
                  + ("           timestamp" if shape == "timestamps" else "") + "\n")
    rows = []
    for i, s in enumerate(_SIZES):
        row = f"{s:12d}  {s // 4:12d}  {'float':>8s}  {'sum':>6s}  {-1:6d}"
        row += _body(s, True, per_iter) + _body(s, False, per_iter)
        if shape == "timestamps":
            row += f" 2026-12-01 02:10:{i:02d}"
        rows.append(row + "\n")
    log = tmp_path / f"{shape}.txt"
    log.write_text(_NEW_PREAMBLE + header + "".join(rows) + _NEW_FOOTER)
    m = _one(log)
    assert m.collective == "allreduce" and m.world_size == 4
    assert list(m.size_bytes) == _SIZES
    assert np.allclose(m.time_s * 1e6, [round(_us(s, True), 2) for s in _SIZES])
    assert np.allclose(m.time_in_place_s * 1e6, [round(_us(s, False), 2) for s in _SIZES])


def _repeated_table_log(tmp_path, name: str, blocks) -> Path:
    """A table repeating every size once per (type, redop, speed factor), as -d all / -o all print it."""
    cols = "time   algbw   busbw  #wrong"
    header = f"#       size         count      type   redop    root  {cols}  {cols}\n"
    rows = []
    for ty, op, scale in blocks:
        for s in _SIZES:
            us = (15.0 + s * 7.5e-6) * scale
            alg = s / us / 1e3
            body = f"  {us:7.2f}  {alg:6.2f}  {alg * 1.5:6.2f}  {0:6g}"
            rows.append(f"{s:12d}  {s // 4:12d}  {ty:>8s}  {op:>6s}  {-1:6d}" + body + body + "\n")
    log = tmp_path / name
    log.write_text(_NEW_PREAMBLE + header + "".join(rows) + _NEW_FOOTER)
    return log


def _d_all_log(tmp_path):
    """A nccl-tests -d all table: the same sizes once per element type (each its own speed)."""
    return _repeated_table_log(tmp_path, "all_reduce_d_all.txt",
                               [("float", "sum", 1.0), ("half", "sum", 0.6), ("double", "sum", 1.8)])


def test_a_d_all_log_gives_one_model_per_element_type_never_pooled(tmp_path):
    from pybench.cli.main import main
    from pybench.model.build import fit_models
    from pybench.model.model_files import load_model
    from pybench.model.topology_fit import fit_topology_models
    sets = load_measurements(_d_all_log(tmp_path))
    assert sorted(m.dtype for m in sets) == ["float16", "float32", "float64"]
    models = fit_models(sets)
    assert sorted(m.dtype for m in models) == ["float16", "float32", "float64"]
    for m in models:  # each type's own line: 15 us and 133 GB/s scaled by its factor, not a blend of three
        scale = {"float32": 1.0, "float16": 0.6, "float64": 1.8}[m.dtype]
        assert m.predict(4 << 20).time_s == pytest.approx((15e-6 + (4 << 20) * 7.5e-12) * scale, rel=0.01)
    topo, skipped = fit_topology_models(sets)
    assert len(topo) == 1 and sum("uses the float32 sweeps" in s for s in skipped) == 2
    out = tmp_path / "m.json"
    assert main(["fit", str(tmp_path / "all_reduce_d_all.txt"), "-o", str(out)]) == 0
    assert load_model(out, dtype="float16").dtype == "float16"
    with pytest.raises(Exception, match="dtype="):
        load_model(out, collective="allreduce")  # three match: the message says how to choose
    assert main(["predict", str(out), "--sizes", "4M", "--dtype", "int8"]) == 2


def test_an_o_all_log_fits_the_sum_rows_and_says_which_it_left_out(tmp_path):
    from pybench.model.build import fit_models
    from pybench.model.topology_fit import fit_topology_models
    log = _repeated_table_log(tmp_path, "all_reduce_o_all.txt",
                              [("float", "sum", 1.0), ("float", "prod", 0.6), ("float", "max", 1.8)])
    sets = load_measurements(log)
    assert [m.redop for m in sets] == ["sum", "prod", "max"]
    (model,) = fit_models(sets)  # one model, on the sum rows alone: 15 us + S / 133 GB/s
    assert model.predict(4 << 20).time_s == pytest.approx(15e-6 + (4 << 20) * 7.5e-12, rel=0.01)
    assert any("fitted on redop sum; left out: prod, max" in n for n in model.notes)
    (topo,), _ = fit_topology_models(sets)
    assert topo.predict(4 << 20, 4, 1).time_s == pytest.approx(15e-6 + (4 << 20) * 7.5e-12, rel=0.02)


def test_osu_7_datatype_line_sets_the_element_type(tmp_path):
    log = tmp_path / "osu_allreduce.txt"
    log.write_text("# OSU MPI Allreduce Latency Test v7.3\n# Datatype: MPI_FLOAT.\n"
                   "# Size       Avg Latency(us)   Min Latency(us)   Max Latency(us)  Iterations\n"
                   "4                       2.13              1.98              2.31        1000\n"
                   "1024                    4.10              3.90              4.30        1000\n"
                   "1048576               610.00            600.00            620.00         100\n")
    m = _one(log)
    assert (m.collective, m.dtype) == ("allreduce", "float32")
    assert m.time_low_s[1] == pytest.approx(3.90e-6) and m.time_high_s[2] == pytest.approx(620e-6)
    log.write_text(log.read_text().replace("MPI_FLOAT", "MPI_DOUBLE"))
    assert _one(log).dtype == "float64"
    log.write_text(log.read_text().replace("# Datatype: MPI_DOUBLE.\n", ""))  # OSU 5/6 reduce MPI_FLOAT
    assert _one(log).dtype == "float32"
    bcast = log.read_text().replace("Allreduce", "Broadcast")  # and move bytes elsewhere (MPI_CHAR)
    log.write_text(bcast)
    assert _one(log).dtype == "byte"


_OSU_AR = ("# OSU MPI Allreduce Latency Test v5.6.3\n# Size       Avg Latency(us)\n"
           "4                       2.13\n1024                    4.10\n1048576               610.00\n")
_OSU_LAT = ("# OSU MPI Latency Test v5.6.3\n# Size          Latency (us)\n"
            "0                       1.10\n8                       1.12\n1024                    2.40\n")


def test_osu_collective_override_refuses_a_log_of_several_tests(tmp_path):
    """--collective renames a log's test; on a log of several tests it would pool them all as one."""
    log = tmp_path / "job.out"
    log.write_text("+ srun -n 2 ./osu_latency\n" + _OSU_LAT + "+ srun -n 16 ./osu_allreduce\n" + _OSU_AR)
    with pytest.raises(FileFormatError, match="would name all 2 tests of this log alike"):
        load_measurements(log, collective="allreduce")
    lat, ar = load_measurements(log)
    assert (lat.collective, ar.collective, ar.world_size) == ("p2p_latency", "allreduce", 16)


def test_osu_rank_count_comes_from_the_tables_own_launcher_line(tmp_path):
    """A launcher line of its own without a count says nothing: the earlier test's count is not this one's."""
    log = tmp_path / "job.out"
    log.write_text("+ srun -n 2 ./osu_latency\n" + _OSU_LAT + "+ srun ./osu_allreduce\n" + _OSU_AR)
    _, ar = load_measurements(log)
    assert ar.world_size is None
    log.write_text("mpirun -np 16 --map-by node\n" + _OSU_AR.replace("Allreduce", "Broadcast") + _OSU_AR)
    assert [m.world_size for m in load_measurements(log)] == [16, 16]  # one count for the whole log


def test_osu_output_indented_by_a_collector_is_read(tmp_path):
    log = tmp_path / "indented.txt"
    log.write_text("".join(f"    {line}\n" for line in _OSU_AR.splitlines()))
    (m,) = load_measurements(log, world_size=8)
    assert (m.collective, m.size_bytes.tolist()) == ("allreduce", [4, 1024, 1048576])


def test_a_job_log_with_an_unmodelled_test_beside_a_modelled_one_fits_the_modelled_one(tmp_path, capsys):
    """osu_mbw_mr beside osu_allreduce in one job's output: the all-reduce is fitted, the other said and skipped."""
    from pybench.cli.main import main as main_for_tests

    mbw = ("# OSU MPI Multiple Bandwidth / Message Rate Test v5.6.3\n# [ pairs: 2 ] [ window size: 64 ]\n"
           "# Size                  MB/s        Messages/s\n1                       2.10        2100000.00\n"
           "1024                 1500.00        1464843.75\n65536               9000.00         137329.10\n")
    log = tmp_path / "job.out"
    log.write_text("+ srun -n 4 ./osu_mbw_mr\n" + mbw + "+ srun -n 16 ./osu_allreduce\n" + _OSU_AR)
    assert main_for_tests(["fit", str(log), "-o", str(tmp_path / "m.json")]) == 0
    captured = capsys.readouterr()
    assert "no model for 'p2p_mbw'" in captured.err and "that table skipped" in captured.err
    assert "allreduce" in captured.out


_OSU_IALLREDUCE = """# OSU MPI Non-blocking Allreduce Latency Test v7.3
# Overall = Coll. Init + Compute + MPI_Test + MPI_Wait

# Datatype: MPI_FLOAT.
# Size           Overall(us)       Compute(us)    Pure Comm.(us)        Overlap(%)
4                      21.44             14.81              9.27             28.47
1024                   44.01             29.72             28.28             49.18
1048576              1817.44            904.89            903.95              0.00
"""
_NBC_FULL_NAMES = ("Overall(us)", "Compute(us)", "Coll. Init(us)", "MPI_Test(us)", "MPI_Wait(us)", "Pure Comm.(us)",
                   "Overlap(%)")
_OSU_IALLREDUCE_FULL = ("# OSU MPI Non-blocking Allreduce Latency Test v7.3\n"  # as OSU pads it: 18 wide
                        + "# Size" + "".join(f"{n:>18}" for n in _NBC_FULL_NAMES) + "\n"
                        + "4" + "".join(f"{v:>18}" for v in (21.44, 14.81, 1.1, 0.2, 5.33, 9.27, 28.47)) + "\n"
                        + "1024" + "".join(f"{v:>18}" for v in (44.01, 29.72, 1.3, 0.1, 12.89, 28.28, 49.18)) + "\n")


def test_osu_non_blocking_tables_read_their_pure_communication_column(tmp_path):
    """osu_iallreduce's 'Overall' adds the compute it overlaps; 'Pure Comm.' is the operation's own latency."""
    log = tmp_path / "nbc.out"
    log.write_text("mpirun -np 8 ./osu_iallreduce\n" + _OSU_IALLREDUCE)
    (m,) = load_measurements(log)
    assert (m.collective, m.world_size, m.dtype) == ("allreduce", 8, "float32")
    assert m.time_s.tolist() == pytest.approx([9.27e-6, 28.28e-6, 903.95e-6])
    assert any("Pure Comm." in n for n in m.notes)
    log.write_text("mpirun -np 8 ./osu_iallreduce -f\n" + _OSU_IALLREDUCE_FULL)
    (m,) = load_measurements(log)
    assert m.time_s.tolist() == pytest.approx([9.27e-6, 28.28e-6])
    log.write_text(re.sub(" +", " ", _OSU_IALLREDUCE_FULL))  # names one space apart
    assert "Init(us) MPI_Test(us)" in log.read_text()
    (m,) = load_measurements(log, world_size=8)
    assert m.time_s.tolist() == pytest.approx([9.27e-6, 28.28e-6])
    log.write_text(_OSU_IALLREDUCE.replace("Pure Comm.(us)", "Pure Comm.(us)  Pure Comm.(us)"))
    with pytest.raises(FileFormatError, match="line 5: cannot find the one 'Pure Comm.\\(us\\)' column"):
        load_measurements(log, world_size=8)


def test_world_and_collective_overrides_that_the_table_contradicts_are_refused(capsys):
    """--world 12 on a log whose busbw/algbw (1.875) says 16 ranks relabelled the sweep; so did --collective allgather
    (an all-gather's busbw/algbw is below 1). Overrides are for what a log does not say."""
    log = SHARED_DATA / "nccl-tests" / "h100_p5_2node_16gpu_efa_allreduce_srunprefix.txt"
    with pytest.raises(FileFormatError, match="--world 12 disagrees with the table's busbw/algbw = 1.8750, which, "
                                              "rounded as printed, says 16 ranks"):
        load_measurements(log, world_size=12)
    with pytest.raises(FileFormatError, match=r"--collective allgather: the log names this test all_reduce_perf "
                                              r"\(allreduce\); leave --collective out"):
        load_measurements(log, collective="allgather")
    assert load_measurements(log, world_size=16)[0].world_size == 16
    # gather, scatter and OSU's point-to-point tests have a ratio too (none had: they relabelled any log unnamed)
    unnamed = PUBLIC_LOGS / "h100ib_gjaion_2node16_allreduce.log"
    for other in ("gather", "scatter", "p2p_bw"):
        with pytest.raises(FileFormatError, match=f"--collective {other} disagrees with the table's busbw/algbw = "
                                                  f"1.875, which no {other} prints"):
            load_measurements(unnamed, collective=other)


def test_a_sweep_of_more_ranks_than_cores_prices_no_other_rank_count(tmp_path, capsys):
    """pybench's own alltoall at 3 and 4 ranks on a 2-core VM (ranks taking turns on the cores) priced 2 ranks
    with a 95% interval that missed all 26 measured sizes. The result records its host's cores: such a sweep
    answers at its own layout and is left out of the topology model, saying why."""
    import json

    from pybench.cli.main import main
    doc = json.loads((Path(__file__).resolve().parents[1] / "fixtures" / "cpu_mpi2_allreduce.json").read_text())
    doc["environment"]["machine"] = {"cores": 1}  # as runs since the load was recorded write it
    crowded = tmp_path / "crowded.json"
    crowded.write_text(json.dumps(doc))
    (ms,) = load_measurements(crowded)
    assert any(n.startswith("oversubscribed: 2 ranks on a host of 1 cores") for n in ms.notes)
    out = tmp_path / "m.json"
    assert main(["fit", str(crowded), "-o", str(out)]) == 0
    assert "not in the topology model: oversubscribed" in capsys.readouterr().err
    assert main(["predict", str(out), "--sizes", "1M"]) == 0  # its own layout answers
    capsys.readouterr()
    assert main(["predict", str(out), "--world", "4", "--sizes", "1M"]) == 2
    assert "oversubscribed" in capsys.readouterr().err


def test_one_rank_in_place_is_left_out_as_it_moves_nothing():
    """A public RTX 3090 note ("1 GPU 1 NIC / NO INC"; rows verbatim): on one rank the in-place all-reduce took
    0.22 us at every size, a launch alone; pooled with the 1280 us out of place it made 512M "measured" at 320 us."""
    from pybench.model.logs.nccl_tests import parse_nccl_tests_text
    text = """#  Rank  0 Group  0 Pid  30487 on    worker1 device  0 [0x31] NVIDIA GeForce RTX 3090
#       size         count      type   redop    root     time   algbw   busbw #wrong     time   algbw   busbw #wrong
#        (B)    (elements)                               (us)  (GB/s)  (GB/s)            (us)  (GB/s)  (GB/s)
   134217728      33554432     float     sum      -1    322.0  416.79    0.00      0     0.22  610080.58    0.00      0
   268435456      67108864     float     sum      -1    640.5  419.09    0.00      0     0.22  1195171.22    0.00      0
   536870912     134217728     float     sum      -1   1279.7  419.53    0.00      0     0.23  2375009.56    0.00      0
"""
    (ms,) = parse_nccl_tests_text(text, "<log>", collective="allreduce")
    assert ms.world_size == 1 and ms.time_in_place_s is None
    assert any("in-place block left out" in n for n in ms.notes)
    assert ms.time_s[-1] == pytest.approx(1279.7e-6)


def test_a_row_split_into_its_head_and_two_halves_by_info_lines_is_joined():
    """NVIDIA/nccl#1453 (MPICH -prepend-rank, NCCL_DEBUG=INFO tuning lines): NCCL printed an INFO line after the row's
    head and another between its out-of-place and in-place halves; the row was refused as having no times."""
    from pybench.model.logs.nccl_tests import parse_nccl_tests_text
    header = ("#       size         count      type   redop    root     time   algbw   busbw #wrong     time   algbw"
              "   busbw #wrong\n#        (B)    (elements)                               (us)  (GB/s)  (GB/s)      "
              "      (us)  (GB/s)  (GB/s)\n")
    info = "[0] h100clust-worker-1:497888:497888 [0] NCCL INFO {} Bytes -> Algo 0 proto 0 time 25.874907\n"
    rows = ((4096, 1024, "75.38    0.05    0.10      0", "74.90    0.05    0.11      0"),
            (8192, 2048, "76.02    0.11    0.20      0", "75.81    0.11    0.20      0"),
            (16384, 4096, "77.40    0.21    0.40      0", "77.02    0.21    0.40      0"))
    split = joined = header
    for size, count, out, inp in rows:
        head = f"[0] {size:12d} {count:13d}     float     sum      -1"
        split += head + info.format(size) + info.format(size) + f"[0]     {out}\n" + info.format(size) + f"[0]  {inp}\n"
        joined += f"{head}    {out}    {inp}\n"
    a, b = parse_nccl_tests_text(split, "<split>", world_size=16)[0], parse_nccl_tests_text(joined, "<one line>",
                                                                                           world_size=16)[0]
    assert list(a.size_bytes) == [4096, 8192, 16384] and list(a.time_s) == list(b.time_s)
    assert a.time_in_place_s is not None and list(a.time_in_place_s) == list(b.time_in_place_s)


def test_a_table_run_with_several_gpus_per_process_says_so():
    """nccl-tests `-g 8` (one process, eight GPUs: `# nThread 1 nGpus 8`) launches every GPU's kernels from one
    thread: a DGX H100 log took 1.6 ms at 64 KiB so. The fit had no word of it."""
    from pybench.model.logs.nccl_tests import parse_nccl_tests_text
    table = ("#       size         count      type   redop    root     time   algbw   busbw #wrong     time   algbw"
             "   busbw #wrong\n"
             "     1048576        262144     float     sum      -1    40.12   26.14   45.74      0    40.02   26.20"
             "   45.85      0\n"
             "     2097152        524288     float     sum      -1    60.33   34.76   60.83      0    60.11   34.89"
             "   61.05      0\n")
    many = "# nThread 1 nGpus 8 minBytes 1048576 maxBytes 2097152 step: 2(factor) warmup iters: 5 iters: 20\n"
    one = many.replace("nGpus 8", "nGpus 1")
    (ms,) = parse_nccl_tests_text(many + table, "<g8>")
    assert ms.world_size == 8 and any("each process drove 8 GPUs" in n for n in ms.notes)
    (ms,) = parse_nccl_tests_text(one + table, "<g1>")
    assert not any("each process drove" in n for n in ms.notes)
    (ms,) = parse_nccl_tests_text(one.replace("nThread 1", "nThread 8") + table, "<t8>")  # threads, one GPU each
    assert any("threads of one process" in n for n in ms.notes) and not any("kernels" in n for n in ms.notes)


_HEADER = ("#       size         count      type   redop    root     time   algbw   busbw  #wrong     time   algbw   busbw"
           "  #wrong\n")


def test_a_split_row_takes_whole_halves_only():
    """A stray number between a split row's halves (an echoed exit code) became the in-place time, and the in-place
    busbw its #wrong: the row's in-place time was dropped with a note of wrong values that no check counted."""
    from pybench.model.logs.nccl_tests import parse_nccl_tests_text
    info = "node1:123:456 [0] NCCL INFO Channel 00/0 : 0[0] -> 1[1] via P2P/IPC\n"
    rows = ("     1048576        262144     float     sum      -1    100.0   10.49   15.73       0    100.0   10.49"
            "   15.73       0\n     2097152        524288     float     sum      -1\n" + info
            + "    180.0   11.65   17.48       0\n" + info + "    181.0   11.59   17.38       0\n"
            "     4194304       1048576     float     sum      -1    350.0   11.98   17.98       0    350.0   11.98"
            "   17.98       0\n")
    (ms,) = parse_nccl_tests_text(_HEADER + rows, "<log>")
    assert ms.time_in_place_s is not None and list(ms.time_in_place_s * 1e6) == pytest.approx([100.0, 181.0, 350.0])
    with pytest.raises(FileFormatError, match="no times after them"):
        parse_nccl_tests_text(_HEADER + rows.replace(info + "    181.0", "0\n    181.0", 1), "<log>")
    (ms,) = parse_nccl_tests_text(_HEADER + rows.split("    181.0")[0], "<log>")  # the run ended between halves
    assert list(ms.size_bytes) == [1048576] and any("out-of-place half alone" in n for n in ms.notes)


def test_world_overrides_are_checked_against_every_rows_rounding():
    """The rows' rounding allows 15 ranks only while their median ratio reads 17: `--world 17` was taken and
    `--world 16` refused as "says 17"."""
    from pybench.model.logs.nccl_tests import parse_nccl_tests_text

    def row(size, alg, bus):
        t = size / alg / 1e3
        return f"{size:12d} {size // 4:12d}     float    sum     -1 {t:8.1f} {alg:7.2f} {bus:7.2f}       0 " \
               f"{t:8.1f} {alg:7.2f} {bus:7.2f}       0\n"

    text = "# Collective test starting: all_reduce_perf\n" + _HEADER + "".join(
        row(2 ** k, 1.00, 1.88) for k in range(20, 25)) + row(2 ** 30, 400.00, 746.67)
    (ms,) = parse_nccl_tests_text(text, "<log>")
    assert ms.world_size == 15
    for world in (16, 17):
        with pytest.raises(FileFormatError, match=f"--world {world} disagrees .* says 15 ranks"):
            parse_nccl_tests_text(text, "<log>", world_size=world)


def test_an_all_to_all_without_its_program_name_is_told_from_an_all_gather_by_its_unchecked_in_place_half():
    """argonne-lcf/alcf-nccl-tests @385be33, results_sophia/n2.g8/.../alltoall_output.dat.1 (rows verbatim): no
    program name, per-rank counts and redop none read as an all-gather. all_to_all_perf reports no in-place check
    (N/A on every row) where all_gather_perf does; with -c 0 neither half reports and nothing tells them apart."""
    from pybench.model.logs.nccl_tests import parse_nccl_tests_text
    header = ("#       size         count      type   redop    root     time   algbw   busbw #wrong     time   algbw"
              "   busbw #wrong\n")
    rows = ("     1048576         16384     float    none      -1    127.2    8.25    7.73      0    125.3    8.37"
            "    7.85    N/A\n"
            "     2097152         32768     float    none      -1    176.6   11.88   11.13      0    173.5   12.09"
            "   11.33    N/A\n"
            "     4194304         65536     float    none      -1    209.8   19.99   18.74      0    207.3   20.24"
            "   18.97    N/A\n")
    (ms,) = parse_nccl_tests_text(header + rows, "<log>")
    assert ms.collective == "alltoall" and any("reports no in-place check" in n for n in ms.notes)
    checked = rows.replace("    N/A\n", "      0\n")
    assert parse_nccl_tests_text(header + checked, "<log>")[0].collective == "allgather"
    unchecked = rows.replace("      0    ", "    N/A    ")  # -c 0: neither half reports
    assert parse_nccl_tests_text(header + unchecked, "<log>")[0].collective == "allgather"
    # a run killed after a row's out-of-place half: that row printed no in-place #wrong, and proves nothing
    cut = rows + "     8388608        131072     float    none      -1    309.8   27.08   25.38      0\n"
    assert parse_nccl_tests_text(header + cut, "<log>")[0].collective == "alltoall"
    # an out-of-place check that found wrong values: the unchecked in-place half cannot vouch for the row
    (ms,) = parse_nccl_tests_text(header + rows.replace("18.74      0", "18.74     12"), "<log>")
    assert list(ms.size_bytes) == [1048576, 2097152] and any("1 row(s) with no timing left" in n for n in ms.notes)


def test_an_osu_header_without_its_title_is_not_the_previous_test_of_another_kind(tmp_path):
    """An MI300A README (public, modelled here) printed a latency and a bandwidth test per affinity mode, the
    titles only above the first pair: the later latency tables were taken as bandwidth tests (the last title) and
    their microseconds fitted as inverse throughput. A header repeated without its title belongs to the same test
    only where it is that test's kind of header."""
    latency = "# Size       Avg Latency(us)\n1   0.34\n4   0.31\n64   0.35\n256   0.36\n512   8.43\n"
    bandwidth = "# Size      Bandwidth (MB/s)\n256   1394.81\n512   85.16\n4096   694.49\n65536   9441.79\n"
    text = ("# OSU MPI-ROCM Latency Test v7.5\n" + latency + "\n# OSU MPI-ROCM Bandwidth Test v7.5\n" + bandwidth
            + "\n" + latency + "\n" + bandwidth)
    log = tmp_path / "modes.txt"
    log.write_text(text)
    assert [m.collective for m in load_measurements(log)] == ["p2p_latency", "p2p_bw", "p2p_latency", "p2p_bw"]


def test_a_sendrecv_log_without_its_name_is_told_from_a_two_rank_allreduce_by_its_checks():
    """nccl-tests#331's sendrecv_perf -t 2 log names no program; busbw/algbw = 1 fits a 2-rank all-reduce too,
    which it had been saved as. sendrecv_perf reports no in-place check (#wrong N/A on every row) while
    all_reduce_perf does."""
    from conftest import PUBLIC_LOGS
    (m,) = load_measurements(PUBLIC_LOGS / "issue331_leonardo_a100_t2_sendrecv_noname.log")
    assert (m.collective, m.world_size) == ("sendrecv", 2)
    assert any("sendrecv_perf prints it" in n for n in m.notes)


def test_an_unmodelled_test_repeated_run_after_run_is_said_once_with_its_count(tmp_path, capsys):
    """A job log of 20 runs (LLNL Lassen, converged-computing/metrics-operator-experiments) printed one
    "no model for 'p2p_mbw'" warning per run: 20 identical lines."""
    from pybench.cli.main import main as main_for_tests

    mbw = ("# OSU MPI Multiple Bandwidth / Message Rate Test v5.8\n# [ pairs: 2 ] [ window size: 64 ]\n"
           "# Size                  MB/s        Messages/s\n1                       2.10        2100000.00\n"
           "1024                 1500.00        1464843.75\n65536               9000.00         137329.10\n")
    log = tmp_path / "job.out"
    log.write_text("".join(f"Start run {k} of 3\n+ srun -n 4 ./osu_mbw_mr\n{mbw}+ srun -n 16 ./osu_allreduce\n"
                           f"{_OSU_AR}" for k in range(1, 4)))
    assert main_for_tests(["fit", str(log), "-o", str(tmp_path / "m.json")]) == 0
    err = capsys.readouterr().err
    assert err.count("no model for 'p2p_mbw'") == 1 and "its 3 tables skipped" in err, err


def test_a_test_run_again_and_again_in_one_log_is_noted_once_not_per_run(tmp_path):
    """The same Lassen job log: the fitted model listed "table 3 of 60 (line 77)", "table 6 of 60 (line 177)", ...
    and "line 139: size 0 skipped" once per run: 40 note lines for one fact each."""
    from pybench.model.build import fit_models

    runs = "".join(f"Start run {k}\n+ srun -n 16 ./osu_allreduce\n{_OSU_AR}" for k in range(1, 7))
    log = tmp_path / "job.out"
    log.write_text(runs)
    (model,) = fit_models(load_measurements(log, world_size=16))
    tables = [n for n in model.notes if "of 6" in n]
    assert tables == ["tables 1, 2, 3, ..., 6 of 6 (lines 4 to 39): 6 runs of this test, pooled"], model.notes
    assert not any(n.startswith("table ") for n in model.notes)


def test_collective_picks_its_tables_from_a_log_whose_ratios_tell_its_tests_apart(tmp_path, capsys):
    """An OCI MI355X page of rccl-tests output: an all-reduce named only by its footer, then an all-to-all named by
    nothing, each a table at 8 ranks. `fit --collective allreduce` refused ("disagrees with the table's
    busbw/algbw = 0.875") while the log without it told the two apart."""
    from pybench.cli.main import main as main_for_tests

    log = tmp_path / "page.md"
    log.write_text("### All Reduce\n" + _unnamed_table(1.75, "sum", 1) + "# Collective test concluded: "
                   "all_reduce_perf\n### All 2 All\n" + _unnamed_table(0.875, "none", 1))
    out = tmp_path / "m.json"
    assert main_for_tests(["fit", str(log), "--collective", "allreduce", "--world", "8", "-o", str(out)]) == 0
    err = capsys.readouterr().err
    assert "its 1 allreduce table(s) taken, the 1 other(s) of this log left out" in err, err
    # a ratio several collectives print names none of them: the all-to-all table is not taken as an all-gather
    assert main_for_tests(["fit", str(log), "--collective", "allgather", "--world", "8", "-o", str(out),
                           "--force"]) == 2
    assert "taken" not in capsys.readouterr().err


def _unnamed_table(ratio, redop, ranks_in_count, slower=1.0):
    """An nccl-tests table with no program name: busbw = ratio x algbw, count = size / (ranks_in_count x 4); its
    times ``slower`` times those of a 200 GB/s link."""
    head = ("#       size         count      type   redop    root     time   algbw   busbw #wrong     time   algbw   "
            "busbw #wrong\n")
    rows = ""
    for s, t in ((1 << 20, 40.0 * slower), (1 << 24, 120.0 * slower), (1 << 28, 1400.0 * slower),
                 (1 << 30, 5400.0 * slower)):
        algbw = s / t / 1e3
        rows += (f"{s:>12} {s // (4 * ranks_in_count):>12}     float {redop:>7}      -1 {t:8.1f} {algbw:7.2f} "
                 f"{algbw * ratio:7.2f}      0 {t:8.1f} {algbw:7.2f} {algbw * ratio:7.2f}      0\n")
    return head + rows


def test_a_collective_whose_count_column_the_table_contradicts_is_refused(tmp_path, capsys):
    """An RTX 4090 log of two unnamed tests on 2 GPUs (an all-reduce, busbw/algbw 1.00, then an all-gather, 0.50):
    `fit --collective allgather` took the all-reduce's table as an all-gather too (an all-gather over many ranks
    prints nearly 1.00) and pooled it with the real one. nccl-tests prints an all-gather's count per rank and an
    all-reduce's for the whole buffer: the count column tells them apart. (Which tables of an unnamed log the user
    meant, the log cannot say: it is refused, and read without --collective, says what each table measured.)"""
    from pybench.cli.main import main as main_for_tests

    log = tmp_path / "two_tests.log"
    log.write_text("#  Rank  0 Group  0 Pid 1 on host device  0 [0x01] NVIDIA GeForce RTX 4090\n"
                   "#  Rank  1 Group  0 Pid 1 on host device  1 [0x81] NVIDIA GeForce RTX 4090\n"
                   + _unnamed_table(1.0, "sum", 1) + "\n" + _unnamed_table(0.5, "none", 2))
    assert [(m.collective, m.world_size) for m in load_measurements(log)] == [("allreduce", 2), ("allgather", 2)]
    out = tmp_path / "m.json"
    assert main_for_tests(["fit", str(log), "--collective", "allgather", "-o", str(out)]) == 2
    err = capsys.readouterr().err
    assert "--collective allgather disagrees with the table's count column" in err and err.count("\n") == 1, err
    # a reduce-scatter over 1024 ranks prints busbw/algbw 1.00 too, and a count per rank: no all-reduce's
    wide = tmp_path / "wide.log"
    wide.write_text(_unnamed_table(1023 / 1024, "sum", 1024))
    with pytest.raises(FileFormatError, match="count column"):
        load_measurements(wide, collective="allreduce")
    assert load_measurements(wide)[0].collective == "reducescatter"


def test_collective_picks_a_later_test_of_a_log_that_names_its_tests(tmp_path):
    """An H100 node's log of five named tests (all_reduce_perf first): `--collective alltoall` was refused by the
    first table's busbw/algbw before the log's names were read; the all-to-all table is taken."""
    log = FIXTURES / "public_logs" / "xr01_h100_N1_G4_002.log"
    with pytest.raises(SeveralTestsNamed):
        load_measurements(log, collective="alltoall")  # several named tests: picking is the caller's (fit's)
    from pybench.cli.fit_inputs import load_named
    (taken,) = load_named(str(log), "alltoall", None)
    assert taken.collective == "alltoall" and taken.world_size == 4
    # a test named only in the log's text, no table of its own, leaves the tables of the one asked for as they were
    lines = (FIXTURES / "log_nccl_tests_two_tests_allreduce_alltoall.txt").read_text().splitlines(keepends=True)
    first = "".join(lines[1:lines.index(next(ln for ln in lines if "alltoall_perf" in ln and "$" in ln))])
    twice = tmp_path / "two_runs.log"
    twice.write_text("# (the job also ran sendrecv_perf, whose output is elsewhere)\n" + first + first)
    assert [m.collective for m in load_named(str(twice), "allreduce", None)] == ["allreduce", "allreduce"]


def test_a_flux_jobs_ranks_and_nodes_come_from_its_jobspec_after_the_table(tmp_path):
    """OSU logs of a public performance study ran under Flux: no launcher line, and the job's record after the table
    ({"resources": [{"type": "node", "count": 4, "with": [{"type": "slot", "count": 8 ...}]}], tasks per slot 1).
    pybench asked for --world; the record says 32 ranks on 4 nodes."""
    log = FIXTURES / "public_logs" / "osu_gkegpu_flux_n4_ppn8_allreduce.out"
    m = _one(log)
    assert (m.collective, m.world_size, m.link_class) == ("allreduce", 32, "inter-node")  # (4 hosts: not unknown)
    assert "32 ranks on 4 host(s) per the Flux jobspec" in m.notes
    from pybench.model.topology_fit import observations_from
    assert {(o.world, o.nodes) for o in observations_from([m])} == {(32, 4)}
    # a damaged record says nothing: the count is asked for again
    text = log.read_text().replace('"count": 8,', '"count": -8,')
    bad = tmp_path / "bad.out"
    bad.write_text(text)
    assert _one(bad).world_size is None
    deep = tmp_path / "deep.out"
    deep.write_text(log.read_text().split("START OF JOBSPEC")[0] + "START OF JOBSPEC\n" + "[" * 100000 + "\n")
    assert _one(deep).world_size is None


def test_an_all_reduce_over_many_ranks_on_a_slow_link_may_print_busbw_twice_algbw(tmp_path):
    """2(n-1)/n rounds to 2.00 where busbw and algbw print two decimals under 1 GB/s: `--collective allreduce` refused
    such a table ("which no allreduce prints") that the log itself named all_reduce_perf."""
    log = tmp_path / "slow.log"
    log.write_text("# Collective test starting: all_reduce_perf\n" + _unnamed_table(2.0, "sum", 1, slower=400))
    (m,) = load_measurements(log, collective="allreduce", world_size=64)
    assert (m.collective, m.world_size) == ("allreduce", 64)


def test_a_system_no_topology_model_records_is_said_unused(tmp_path, capsys):
    """`fit --system gb200-nvl72` on a GB300 log of two sizes per table printed exactly what it printed without it:
    no topology model was fitted, so nothing recorded the description."""
    from pybench.cli.main import main as main_for_tests

    log = tmp_path / "two_sizes.log"
    log.write_text("# Collective test starting: all_reduce_perf\n" + "".join(_unnamed_table(1.75, "sum", 1)
                                                                             .splitlines(keepends=True)[:3]))
    assert main_for_tests(["fit", str(log), "--world", "8", "--system", "dgx-h100", "-o", str(tmp_path / "m.json")]) == 0
    assert "--system dgx-h100 not used: no topology model was fitted" in capsys.readouterr().err
