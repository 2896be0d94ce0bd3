"""Rows whose result the benchmark's own check (-c 1) found wrong, and rccl-tests' JSON under the
labels launchers and log collectors put before each line.

A wrong result timed a broken collective, so that half (out-of-place or in-place) of the row is no
measurement: it is left out, with a note; ``N/A`` (no check ran) keeps the row. The nccl-tests text
is a real log (tests/fixtures/shared_data) with some #wrong cells changed; the JSON rows follow
nccl-tests' -J layout and rccl-tests' Reporter (``"wrong":"0"`` quoted, 6-decimal numbers)."""

from __future__ import annotations

import json
import re

import numpy as np
import pytest
from conftest import SHARED_DATA

from pybench.errors import FileFormatError
from pybench.model.logs import load_measurements, sniff_format
from pybench.model.logs.nccl_tests_table import is_wrong

A100 = SHARED_DATA / "nccl-tests" / "a100_2node_16gpu_oci_roce_allreduce.txt"
OOP_WRONG, IP_WRONG = 8, 12   # token index of the out-of-place and in-place #wrong cells


def _set_cells(text: str, size: int, cells: dict[int, str]) -> str:
    """``text`` with the row of ``size`` holding ``cells`` (token index -> value), right-aligned in place."""
    def edit(line: str) -> str:
        spans = [m.span() for m in re.finditer(r"\S+", line)]
        for k in sorted(cells, reverse=True):
            a, b = spans[k]
            line = line[:a] + cells[k].rjust(b - a) + line[b:]
        return line
    return "\n".join(edit(ln) if ln.split()[:1] == [str(size)] else ln for ln in text.splitlines()) + "\n"


def test_nccl_tests_text_drops_the_wrong_half_of_a_row_and_says_so(tmp_path):
    text = A100.read_text()
    text = _set_cells(text, 1048576, {OOP_WRONG: "12"})              # out-of-place wrong: in-place stands in
    text = _set_cells(text, 4194304, {IP_WRONG: "3"})                # in-place wrong: out-of-place kept alone
    text = _set_cells(text, 16777216, {OOP_WRONG: "1e+06", IP_WRONG: "7"})  # both wrong: size gone
    text = _set_cells(text, 65536, {OOP_WRONG: "N/A", IP_WRONG: "N/A"})     # no check ran: kept whole
    path = tmp_path / "ar_c1.txt"
    path.write_text(text)
    (m,) = load_measurements(path)
    sizes = m.size_bytes.tolist()
    assert len(m) == 30 and 16777216 not in sizes
    k = sizes.index(1048576)
    assert m.time_s[k] == pytest.approx(84.50e-6) and np.isnan(m.time_in_place_s[k])
    k = sizes.index(4194304)
    assert m.time_s[k] == pytest.approx(127.0e-6) and np.isnan(m.time_in_place_s[k])
    k = sizes.index(65536)
    assert (m.time_s[k], m.time_in_place_s[k]) == pytest.approx((51.69e-6, 50.09e-6))
    assert m.world_size == 16 and m.collective == "allreduce"
    note = next(n for n in m.notes if "wrong values" in n)
    assert note.startswith("2 out-of-place timing(s) and 2 in-place timing(s) left out at 3 size(s) "
                           "(1048576, 4194304, 16777216 B; 1 row(s) with no timing left)"), note
    assert "#wrong" in note


def test_pybench_own_table_drops_a_wrong_row(tmp_path):
    # one timing per row (pybench's stdout table): a wrong row leaves nothing of its size
    text = _set_cells((SHARED_DATA.parent / "log_pybench_stdout_mpi2_allreduce.txt").read_text(), 131072, {8: "4"})
    path = tmp_path / "pybench.txt"
    path.write_text(text)
    (m,) = load_measurements(path)
    assert 131072 not in m.size_bytes.tolist() and len(m) == 12
    assert any(n.startswith("1 timing(s) left out at 1 size(s) (131072 B; 1 row(s)") for n in m.notes), m.notes


def test_nccl_tests_text_with_every_row_wrong_is_one_line_error(tmp_path):
    lines = A100.read_text().splitlines()
    text = "\n".join(lines) + "\n"
    for ln in lines:
        toks = ln.split()
        if len(toks) == 13 and toks[0].isdigit():
            text = _set_cells(text, int(toks[0]), {OOP_WRONG: "5", IP_WRONG: "5"})
    path = tmp_path / "all_wrong.txt"
    path.write_text(text)
    with pytest.raises(FileFormatError, match=r"all_wrong.txt: line \d+: every row .* wrong results") as err:
        load_measurements(path)
    assert "\n" not in str(err.value)


def _nccl_json(nwrong: list[tuple[object, object]]) -> dict:
    rows = []
    for k, (w_out, w_in) in enumerate(nwrong):
        s = 1 << (16 + 2 * k)
        t = 20.0 + s / 1e5
        rows.append({"size": s, "count": s // 4, "type": "float", "redop": "sum", "root": -1,
                     "out_of_place": {"time": t, "alg_bw": s / t / 1e3, "bus_bw": 1.75 * s / t / 1e3, "nwrong": w_out},
                     "in_place": {"time": t + 1, "alg_bw": s / (t + 1) / 1e3, "bus_bw": 1.75 * s / (t + 1) / 1e3,
                                  "nwrong": w_in}})
    return {"version": 2, "args": ["./build/all_reduce_perf", "-c", "1", "-J", "ar.json"], "results": rows}


def test_nccl_tests_json_drops_blocks_with_nwrong(tmp_path):
    path = tmp_path / "ar.json"
    path.write_text(json.dumps(_nccl_json([(0, 0), (9, 0), (0, 2), (4, 4), ("N/A", "N/A")])))
    (m,) = load_measurements(path)
    assert m.size_bytes.tolist() == [1 << 16, 1 << 18, 1 << 20, 1 << 24]
    t = [20.0 + s / 1e5 for s in m.size_bytes.tolist()]
    assert m.time_s * 1e6 == pytest.approx([t[0], t[1] + 1, t[2], t[3]])      # in-place stands in at 256K
    assert np.isnan(m.time_in_place_s[1:3]).all() and m.time_in_place_s[3] * 1e6 == pytest.approx(t[3] + 1)
    assert any(n.startswith("2 out-of-place timing(s) and 2 in-place timing(s) left out at 3 size(s)")
               and "nwrong" in n for n in m.notes), m.notes
    path.write_text(json.dumps(_nccl_json([(1, 1), (3, 2)])))
    with pytest.raises(FileFormatError, match=r"ar.json: every row .* wrong results"):
        load_measurements(path)


# --- rccl-tests' JSON ---------------------------------------------------------------------------

SIZES = [1 << k for k in range(10, 25, 2)]


def _rccl(size: int, in_place: int, wrong: str = "0") -> str:
    """One row as rccl-tests' Reporter writes it (MPI build, 8 ranks)."""
    t = 20.0 + size / 1e5 + in_place
    alg = size / t / 1e3
    return (f'{{"numCycle":0, "name":"AllReduce", "nodes":1, "ranks":8, "ranksPerNode":8, "gpusPerRank":1, '
            f'"size":{size}, "type":"float", "redop":"sum", "inPlace":{in_place}, "time":{t:f}, '
            f'"algBw":{alg:f}, "busBw":{alg * 1.75:f}, "wrong":"{wrong}"}}')


def _array(objs: list[str]) -> list[str]:
    return ["["] + [o + "," for o in objs[:-1]] + [objs[-1], "]"]


LABELS = {
    "kubectl --timestamps": lambda k: f"2024-05-01T12:00:{k % 60:02d}.123456789Z ",
    "docker logs -t": lambda k: f"2024-05-01T12:00:{k % 60:02d}.123456789+02:00 ",
    "Open MPI --tag-output": lambda k: "[1,0]<stdout>:",
    "srun -l": lambda k: "0: ",
}


@pytest.mark.parametrize("label", list(LABELS))
@pytest.mark.parametrize("layout", ["array", "lines"])
def test_rccl_tests_json_under_launcher_labels_is_read(tmp_path, label, layout):
    objs = [_rccl(s, ip) for s in SIZES for ip in (0, 1)]
    lines = _array(objs) if layout == "array" else objs
    text = "".join(LABELS[label](k) + ln + "\n" for k, ln in enumerate(lines))
    assert sniff_format(text) == "rccl-tests-jsonl"
    path = tmp_path / "rccl.json"
    path.write_text(text)
    (m,) = load_measurements(path)
    assert (m.source, m.collective, m.world_size, m.size_bytes.tolist()) == ("rccl-tests", "allreduce", 8, SIZES)
    assert m.time_in_place_s[0] * 1e6 == pytest.approx(21.0 + SIZES[0] / 1e5, abs=1e-6)
    # a bad row is still named by its line in the file
    array = layout == "array"
    bad = lines[:3] + ['{"name":"AllReduce", "size":64}' + ("," if array else "")] + (["]"] if array else [])
    path.write_text("".join(LABELS[label](k) + ln + "\n" for k, ln in enumerate(bad)))
    with pytest.raises(FileFormatError, match=r"rccl.json: line 4: .*time"):
        load_measurements(path)


def test_rccl_tests_json_drops_rows_with_wrong_values(tmp_path):
    wrong = {(SIZES[1], 0): "12", (SIZES[2], 1): "3", (SIZES[3], 0): "1", (SIZES[3], 1): "1"}
    objs = [_rccl(s, ip, wrong.get((s, ip), "N/A" if s == SIZES[4] else "0")) for s in SIZES for ip in (0, 1)]
    path = tmp_path / "rccl.json"
    path.write_text("\n".join(_array(objs)) + "\n")
    (m,) = load_measurements(path)
    assert m.size_bytes.tolist() == [s for s in SIZES if s != SIZES[3]]
    t = {s: 20.0 + s / 1e5 for s in SIZES}
    assert m.time_s[1] * 1e6 == pytest.approx(t[SIZES[1]] + 1, abs=1e-6)     # in-place stands in
    assert np.isnan(m.time_in_place_s[1:3]).all()
    assert m.time_in_place_s[3] * 1e6 == pytest.approx(t[SIZES[4]] + 1, abs=1e-6)   # "N/A": kept
    assert m.world_size == 8
    assert any(n.startswith("2 out-of-place timing(s) and 2 in-place timing(s) left out at 3 size(s)")
               and "'wrong'" in n for n in m.notes), m.notes
    path.write_text("\n".join(_array([_rccl(s, ip, "2") for s in SIZES for ip in (0, 1)])) + "\n")
    with pytest.raises(FileFormatError, match=r"rccl.json: every row .* wrong results") as err:
        load_measurements(path)
    assert "\n" not in str(err.value)


@pytest.mark.parametrize("value, wrong", [("0", False), (0, False), ("N/A", False), (None, False), ("", False),
                                          ("3", True), (2, True), ("12abc", True), ("nan", True)])
def test_a_wrong_count_that_is_no_count_cannot_vouch_for_its_row(value, wrong):
    assert is_wrong(value) is wrong
