"""nccl-tests text logs in shapes met in the wild: times printed in e-notation (two significant digits), a test
that failed before its first row with a good test after it, line prefixes of Open MPI 5 / PRRTE, kubectl,
docker compose, pdsh, stern and ANSI colour, a --world below the listed ranks, UTF-16 / gzip / empty files,
and rccl-tests' CSV. Fixtures and their origins: tests/fixtures/logs_text/SOURCES.md."""

from __future__ import annotations

import gzip
from pathlib import Path

import numpy as np
import pytest

from pybench.cli.main import main as main_for_tests
from pybench.errors import FileFormatError
from pybench.model.logs import load_measurements
from pybench.model.logs.log_bytes import decode_log
from pybench.model.logs.nccl_tests_precision import sharpest_time

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "logs_text"
EXPONENT = FIXTURES / "xxrjun_N2_G4_sendrecv_exponent_time.log"
FAILED_FIRST = FIXTURES / "xxrjun_N2_G4_alltoall_failed_then_sendrecv.log"
CLEAN = FIXTURES / "c_p5_full_clean.log"


def _sendrecv(sets):
    (m,) = [m for m in sets if m.collective == "sendrecv"]
    return m


# --- A: e-notation times ---------------------------------------------------------------------------------

def test_an_e_notation_time_is_read_to_the_precision_its_bandwidths_give():
    # "17179869184 ... 1.9e+07 0.93 0.93 0 1.9e+07 0.90 0.90": 1.9e+07 us allows 18.5 to 19.5 s; algbw 0.93
    # allows 18.37 to 18.57 s; both come from one measured time, so it lies in 18.50 .. 18.57 s.
    m = _sendrecv(load_measurements(EXPONENT))
    big = m.size_bytes == 17179869184
    assert 18.50 <= m.time_s[big][0] <= 18.58
    assert 18.98 <= m.time_in_place_s[big][0] <= 19.19   # 0.90 GB/s: 18.98 .. 19.19 s
    assert any("e-notation" in n and "1.9e+07" in n for n in m.notes)
    # rows with 3+ significant digits stand as printed
    assert m.time_s[m.size_bytes == 33554432][0] == pytest.approx(3852.19e-6)


def test_a_time_with_three_digits_or_cells_that_disagree_stand_as_printed():
    assert sharpest_time(1048576, ("0.105", "9.99", "17.48"), 1e-3, 1.75) is None
    assert sharpest_time(17179869184, ("1.9e+07", "0.70", "0.70"), 1e-6, 1.0) is None   # 24.5 s: no overlap
    assert sharpest_time(17179869184, ("1.9e+07", "0.00", "0.00"), 1e-6, 1.0) is None   # bounds nothing
    # busbw alone narrows it alike: 1.86 GB/s at factor 2 allows 18.42 .. 18.52 s
    assert sharpest_time(17179869184, ("1.9e+07", "N/A", "1.86"), 1e-6, 2.0) == pytest.approx(18.511, abs=0.001)


# --- B: a failed test before a good one ------------------------------------------------------------------

def test_a_test_that_failed_before_its_first_row_leaves_the_next_test_read_with_a_note():
    (m,) = load_measurements(FAILED_FIRST)
    assert (m.collective, m.world_size, m.link_class, len(m)) == ("sendrecv", 8, "inter-node", 10)
    note = next(n for n in m.notes if "failed before its first row" in n)
    assert "alltoall_perf" in note and "line 18: cnode2-002: Test NCCL failure common.cu:401" in note


def test_a_log_of_one_failed_test_is_refused_quoting_the_failure(tmp_path, capsys):
    path = tmp_path / "failed.log"
    path.write_text("".join(FAILED_FIRST.read_text().splitlines(keepends=True)[:25]))
    assert main_for_tests(["fit", str(path), "-o", str(tmp_path / "m.json")]) == 2
    err = capsys.readouterr().err.strip()
    assert "\n" not in err and "line 16: nccl-tests table has no data rows" in err
    assert "the test failed (line 18: cnode2-002: Test NCCL failure common.cu:401" in err


def test_a_test_that_failed_on_its_first_row_is_a_failed_test_too(tmp_path, capsys):
    # nccl-tests printed the row's size and type, then the failure on the same line (NVIDIA/nccl-tests#355): it was
    # "a row's size and type with no times after them", and the test after it was never read
    lines = FAILED_FIRST.read_text().splitlines(keepends=True)
    lines[17] = ("     2097152         32768     float    none      -1 cnode2-002: Test CUDA failure common.cu:389 "
                 "'an illegal memory access was encountered'\n")
    path = tmp_path / "failed_row.log"
    path.write_text("".join(lines))
    (m,) = load_measurements(path)
    assert (m.collective, m.world_size, len(m)) == ("sendrecv", 8, 10)
    assert any("failed before its first row" in n and "illegal memory access" in n for n in m.notes)
    path.write_text("".join(lines[:25]))
    assert main_for_tests(["fit", str(path), "-o", str(tmp_path / "m.json")]) == 2
    err = capsys.readouterr().err.strip()
    assert "\n" not in err and "line 18: the row of size 2097152 has no times; the test failed (line 18: 2097152 " \
        "32768 float none -1 cnode2-002: Test CUDA failure common.cu:389" in err


def test_a_test_that_failed_after_some_rows_keeps_them_and_says_the_run_ended_there(tmp_path):
    """An MI355X 2-node run broke off after 1 MiB of the 16 GiB asked (NCCL WARN NET/IB ... status=12, Test NCCL
    failure, Open MPI's abort): its rows were fitted with no word that the run had failed."""
    lines = CLEAN.read_text().splitlines(keepends=True)
    rows = [k for k, ln in enumerate(lines) if ln.split() and ln.split()[0].isdigit() and len(ln.split()) > 10]
    cut = lines[:rows[len(rows) // 2] + 1] + [
        "node1:3318:3390 [3] NCCL WARN NET/IB : Got completion from peer 10.0.0.2<37011> with status=12 opcode=0\n",
        "node1: Test NCCL failure common.cu:1174 'remote process exited or there was a network error / '\n",
        "Primary job  terminated normally, but 1 process returned\n"]
    path = tmp_path / "broke_off.log"
    path.write_text("".join(cut))
    (m,) = load_measurements(path)
    assert len(np.unique(m.size_bytes)) == len(rows) // 2 + 1
    note = next(n for n in m.notes if "failed after its last row" in n)
    assert f"line {len(cut) - 1}: node1: Test NCCL failure common.cu:1174" in note and "never ran" in note
    (whole,) = load_measurements(CLEAN)
    assert not any("failed after" in n for n in whole.notes)


# --- C: line prefixes ------------------------------------------------------------------------------------

PREFIXES = {
    "ompi5 tag-detailed": "[1,0][f5n18:100629]<stdout>: ",
    "prrte namespace tag": "[prterun-f5n18-100629@1,0]<stdout>: ",
    "prrte output rank": "[0]<stdout>: ",
    "kubectl --prefix": "[pod/nccl-tests-launcher-x7k2p/mpi-launcher] ",
    "kubectl --prefix --timestamps": "[pod/nccl-tests-launcher-x7k2p/mpi-launcher] 2025-03-01T10:00:23.123456789Z ",
    "docker compose": "nccl-1  | ",
    "pdsh": "node001: ",
    "stern": "nccl-tests-worker-0 worker ",
}


def _same(a, b):
    assert (a.collective, a.world_size, a.link_class, a.dtype) == (b.collective, b.world_size, b.link_class, b.dtype)
    np.testing.assert_array_equal(a.size_bytes, b.size_bytes)
    np.testing.assert_array_equal(a.time_s, b.time_s)
    np.testing.assert_array_equal(a.time_in_place_s, b.time_in_place_s)


@pytest.mark.parametrize("prefix", list(PREFIXES.values()), ids=list(PREFIXES))
def test_a_constant_line_prefix_is_stripped(tmp_path, prefix):
    path = tmp_path / "prefixed.log"
    path.write_text("".join(prefix + ln for ln in CLEAN.read_text().splitlines(keepends=True)))
    (want,) = load_measurements(CLEAN)
    (got,) = load_measurements(path)
    _same(got, want)
    assert got.world_size == 16 and got.link_class == "inter-node"


@pytest.mark.parametrize("tag", ["[1,0]<stdout>:", "[1,0][f5n18:100629]<stdout>:"])
def test_open_mpi_tags_glued_inside_a_row_are_stripped(tmp_path, tag):
    """Open MPI's --tag-output tags each write, and nccl-tests prints a row in three: an AWS p5 log's rows read
    "... sum -1[1,0]<stdout>:    459.2 ...      0[1,0]<stdout>:    434.2 ...". The glued "0[1,0]<stdout>:" was
    taken for a non-zero #wrong, and every out-of-place time was left out as a wrong result."""
    out = []
    for ln in CLEAN.read_text().splitlines():
        toks = ln.split()
        if len(toks) == 13 and toks[0].isdigit():  # size count type redop root | time algbw busbw wrong | ...
            ln = (f"{tag}{' '.join(toks[:5])}{tag}    {' '.join(toks[5:9])}{tag}    {' '.join(toks[9:])}")
        else:
            ln = tag + ln
        out.append(ln + "\n")
    path = tmp_path / "tagged.log"
    path.write_text("".join(out))
    (got,) = load_measurements(path)
    _same(got, load_measurements(CLEAN)[0])
    assert not any("#wrong" in n for n in got.notes)


@pytest.mark.parametrize("wrap", [("\x1b[0;32m0: \x1b[0m", ""), ("\x1b[36m", "\x1b[0m")], ids=["srun-label", "plain"])
def test_ansi_colour_codes_are_dropped(tmp_path, wrap):
    path = tmp_path / "colour.log"
    path.write_text("".join(f"{wrap[0]}{ln}{wrap[1]}\n" for ln in CLEAN.read_text().splitlines()))
    _same(load_measurements(path)[0], load_measurements(CLEAN)[0])


def test_a_prefix_on_the_header_only_is_not_taken_for_a_label(tmp_path):
    # text before the header that no row carries: a note, not a label (the header then is no header)
    lines = CLEAN.read_text().splitlines(keepends=True)
    k = next(i for i, ln in enumerate(lines) if "size         count" in ln)
    lines[k] = "note: " + lines[k]
    path = tmp_path / "one.log"
    path.write_text("".join(lines))
    with pytest.raises(FileFormatError):
        load_measurements(path)


# --- E: --world below the listed ranks -------------------------------------------------------------------

def test_a_world_below_the_listed_ranks_is_refused_where_busbw_cannot_tell(tmp_path, capsys):
    # sendrecv's busbw/algbw is 1 at any rank count; the Rank lines list ranks 0..7
    with pytest.raises(FileFormatError, match=r"--world 4 is fewer ranks than the Rank lines .* \(up to Rank 7\)"):
        load_measurements(EXPONENT, world_size=4)
    assert main_for_tests(["fit", str(EXPONENT), "--world", "4", "-o", str(tmp_path / "m.json")]) == 2
    assert "\n" not in capsys.readouterr().err.strip()


def test_a_world_given_is_named_as_the_source_of_the_world(tmp_path):
    path = tmp_path / "sendrecv.log"  # the sendrecv test alone (the alltoall before it says 8 ranks)
    path.write_text("".join(EXPONENT.read_text().splitlines(keepends=True)[32:]))
    m = _sendrecv(load_measurements(path, world_size=16))
    assert m.world_size == 16
    assert "Rank lines list 8 of 16 ranks (world size from --world)" in m.notes
    assert not any("from busbw/algbw" in n for n in m.notes)


# --- D: encodings, compression, empty files --------------------------------------------------------------

def test_utf16_with_a_byte_order_mark_is_decoded_and_the_rest_named():
    text = CLEAN.read_text()
    assert decode_log(text.encode("utf-16"), "x.log") == text
    assert decode_log(b"\xef\xbb\xbf" + text.encode(), "x.log").lstrip("\ufeff") == text
    for raw, said in ((gzip.compress(text.encode()), "x.log: gzip-compressed: gunzip it first"),
                      (b"", "x.log: empty file"),
                      (text.encode("utf-16-le"), "x.log: UTF-16 text without a byte-order mark: save it as UTF-8"),
                      (b"\x7fELF\x00\x01" * 10, "x.log: binary file")):
        with pytest.raises(FileFormatError, match="^" + said.replace(".", r"\.")):
            decode_log(raw, "x.log")


def test_load_measurements_reads_utf16_and_names_gzip_and_empty(tmp_path):
    path = tmp_path / "utf16.log"
    path.write_bytes(CLEAN.read_text().encode("utf-16"))
    _same(load_measurements(path)[0], load_measurements(CLEAN)[0])
    (tmp_path / "x.log.gz").write_bytes(gzip.compress(CLEAN.read_bytes()))
    with pytest.raises(FileFormatError, match="gzip-compressed: gunzip it first"):
        load_measurements(tmp_path / "x.log.gz")
    (tmp_path / "empty.log").write_bytes(b"")
    with pytest.raises(FileFormatError, match="empty file"):
        load_measurements(tmp_path / "empty.log")


# --- F: rccl-tests CSV -----------------------------------------------------------------------------------

def test_rccl_tests_csv_is_refused_by_name(tmp_path, capsys):
    path = FIXTURES / "c_rccl_csv.csv"
    with pytest.raises(FileFormatError, match=r"rccl-tests CSV \(-Z csv\).*rerun with -Z json, or give the text"):
        load_measurements(path)
    assert main_for_tests(["fit", str(path), "-o", str(tmp_path / "m.json")]) == 2
    assert "\n" not in capsys.readouterr().err.strip()


def test_a_time_stamp_that_changes_is_no_constant_prefix(tmp_path):
    """moreutils `ts` stamps every line with its second: the header's stamp, taken as a constant prefix, cut the
    table at the first row of the next second (4 of 31 rows read, no rank count, no note)."""
    lines = CLEAN.read_text().splitlines()
    stamped = tmp_path / "ts.log"
    stamped.write_text("\n".join(f"Dec 06 11:39:{i // 8:02d} {ln}" for i, ln in enumerate(lines)) + "\n")
    sets = load_measurements(stamped)  # stripped as a time stamp: every row read
    clean = load_measurements(CLEAN)
    assert [len(m.size_bytes) for m in sets] == [len(m.size_bytes) for m in clean]


def test_a_log_printed_in_a_jupyter_notebook_is_read_from_its_cells(tmp_path):
    """A notebook whose cell ran nccl-tests was refused as "not JSON pybench reads": its output strings looked like
    lines under a constant prefix and were stripped as labels, breaking the JSON."""
    import json
    log = CLEAN.read_text()
    notebook = {"nbformat": 4, "nbformat_minor": 5, "metadata": {}, "cells": [
        {"cell_type": "code", "source": ["!mpirun -np 16 ./all_reduce_perf -b 8 -e 8G"], "metadata": {},
         "execution_count": 1, "outputs": [{"output_type": "stream", "name": "stdout",
                                            "text": log.splitlines(keepends=True)}]}]}
    path = tmp_path / "run.ipynb"
    path.write_text(json.dumps(notebook, indent=1))
    read, plain = load_measurements(path), load_measurements(CLEAN)
    assert [(m.collective, m.world_size, len(m.size_bytes)) for m in read] == \
        [(m.collective, m.world_size, len(m.size_bytes)) for m in plain]
    other = tmp_path / "other.json"
    other.write_text('{"cells": [], "nbformat": 4}')
    with pytest.raises(FileFormatError, match="nor a Jupyter notebook whose cells printed a log"):
        load_measurements(other)


def test_one_process_that_drove_every_rank_ran_on_one_host(tmp_path):
    """GKE's B200 README prints a `-g 8` run whose Rank lines name a Pid and no host: the node count was unknown, so
    no topology model was fitted and `--system` went unused. One process runs on one host."""
    rows = "".join(f"{s:>12} {s // 4:>13}     float     sum      -1  {t:>7.1f} {s / t / 1e3:7.2f} "
                   f"{s / t / 1e3 * 1.75:7.2f}      0\n" for s, t in ((8 << 20, 80.3), (16 << 20, 110.5),
                                                                     (32 << 20, 172.6), (64 << 20, 280.0)))
    ranks = "".join(f"#  Rank {r:2d} Group  0 Pid 221599 device  {r} [0000:8f:00] NVIDIA B200\n" for r in range(8))
    head = ("#       size         count      type   redop    root     time   algbw   busbw #wrong\n"
            "#        (B)    (elements)                               (us)  (GB/s)  (GB/s)\n")
    path = tmp_path / "g8.log"
    path.write_text("# nThread 1 nGpus 8 minBytes 8388608 maxBytes 67108864 step: 2(factor)\n#\n# Using devices\n"
                    + ranks + "#\n" + head + rows)
    (m,) = load_measurements(path)
    assert (m.world_size, m.link_class) == (8, "intra-node")
    assert any(n.startswith("8 ranks on 1 host(s): one process drove them all") for n in m.notes)
    path.write_text("# nThread 1 nGpus 1 minBytes 8388608 maxBytes 67108864 step: 2(factor)\n#\n# Using devices\n"
                    + ranks + "#\n" + head + rows)  # one GPU per process: the processes may be on any hosts
    (m,) = load_measurements(path)
    assert m.link_class is None and not any("ranks on 1 host(s)" in n for n in m.notes)


def test_the_real_tagged_p5_log_keeps_every_out_of_place_time():
    """KeitaW/p5-nccl-test's EKS log (`mpirun --tag-output`): every row carries Open MPI's tag three times."""
    (m,) = load_measurements(FIXTURES.parents[0] / "public_logs" / "aws_p5_eks_2node16_allreduce_tagoutput.log")
    assert (m.collective, m.world_size, m.link_class, len(m)) == ("allreduce", 16, "inter-node", 32)
    assert np.all(np.isfinite(m.time_s)) and np.all(np.isfinite(m.time_in_place_s))
    assert not any("#wrong" in n for n in m.notes)
    assert any("16 ranks on 2 host(s)" in n for n in m.notes)
