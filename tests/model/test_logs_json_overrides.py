"""nccl-tests ``-J`` and rccl-tests ``-Z json`` files read as strictly as their text logs: a --world or
--collective the file contradicts is refused in one line, a -J file cut short by a killed run keeps its
complete records, and an rccl-tests file of several nodes is inter-node and says it is RCCL's.

The crafted files under tests/fixtures/logs_json are described in its SOURCES.md."""

from __future__ import annotations

import json

import pytest
from conftest import REPO, broadcast_g8_json

from pybench.cli.main import main as main_for_tests
from pybench.errors import FileFormatError
from pybench.model.logs import load_measurements
from pybench.model.logs.nccl_tests_json import parse_cut_nccl_tests_json

FIXTURES = REPO / "tests" / "fixtures"
P5_JSON = FIXTURES / "logs_json" / "c_json_2p_g8.json"          # all_reduce_perf -g 8, 2 processes: 16 ranks
KILLED = FIXTURES / "logs_json" / "c_json_killed_midrun.json"   # the same, cut inside its 30th record
RCCL = FIXTURES / "logs_json" / "c_rccl_json_1cycle.json"       # rccl-tests MPI build, nodes 2, ranks 16
A100_JSON = FIXTURES / "nccl_tests_allreduce_8xa100.json"       # all_reduce_perf, 8 ranks on one host


# --- --world against busbw/algbw and config.devices ---------------------------------------------

@pytest.mark.parametrize("world", [3, 8, 32])
def test_a_world_the_json_bandwidth_ratio_rules_out_is_refused(world):
    with pytest.raises(FileFormatError, match=rf"c_json_2p_g8.json: --world {world} disagrees with this JSON's "
                                              r"bus_bw/alg_bw = 1\.8750, which, rounded as written, says 16 ranks"):
        load_measurements(P5_JSON, world_size=world)
    with pytest.raises(FileFormatError, match=r"--world 3 disagrees .* says 8 ranks for allreduce"):
        load_measurements(A100_JSON, world_size=3)


def test_the_world_the_json_says_is_accepted():
    (m,) = load_measurements(P5_JSON, world_size=16)
    assert (m.world_size, m.link_class) == (16, "inter-node")
    assert not any("as given" in n for n in m.notes)   # nothing superseded


def test_a_world_below_the_ranks_config_devices_lists_is_refused(tmp_path):
    path = broadcast_g8_json(tmp_path)
    with pytest.raises(FileFormatError, match=r"bcast.json: --world 8 is fewer than the 16 ranks config.devices "
                                              r"lists \(2 processes x 8 ranks each, -t x -g\); leave --world out"):
        load_measurements(path, world_size=8)
    # more than listed: the ratio cannot tell for a broadcast, and the note names --world as the source
    (m,) = load_measurements(path, world_size=32)
    assert m.world_size == 32 and "world size 32 as given (--world)" in m.notes


def test_fit_refuses_a_contradicted_json_world_in_one_line(tmp_path, capsys):
    assert main_for_tests(["fit", str(P5_JSON), "--world", "3", "-o", str(tmp_path / "m.json")]) == 2
    err = capsys.readouterr().err
    assert "--world 3 disagrees" in err and "Traceback" not in err and len(err.strip().splitlines()) == 1
    assert not (tmp_path / "m.json").exists()


# --- --collective against the program name and the ratio ----------------------------------------

@pytest.mark.parametrize("coll", ["reducescatter", "broadcast", "allgather"])
def test_a_collective_the_json_program_contradicts_is_refused(coll, tmp_path, capsys):
    with pytest.raises(FileFormatError, match=rf"--collective {coll} disagrees with this JSON's args, which name "
                                              r"its program all_reduce_perf \(allreduce\)"):
        load_measurements(P5_JSON, collective=coll)
    assert main_for_tests(["fit", str(P5_JSON), "--collective", coll, "-o", str(tmp_path / "m.json")]) == 2
    assert "Traceback" not in capsys.readouterr().err
    assert load_measurements(P5_JSON, collective="allreduce")[0].collective == "allreduce"


def test_without_a_program_name_the_collective_is_checked_against_the_ratio(tmp_path):
    data = json.loads(A100_JSON.read_text())
    del data["args"]
    path = tmp_path / "noargs.json"
    path.write_text(json.dumps(data))
    with pytest.raises(FileFormatError, match=r"--collective reducescatter disagrees with this JSON's "
                                              r"bus_bw/alg_bw = 1\.750, which no reducescatter gives"):
        load_measurements(path, collective="reducescatter")
    assert load_measurements(path, collective="allreduce")[0].world_size == 8


# --- a -J file cut short by a killed run --------------------------------------------------------

def test_a_killed_runs_json_keeps_its_complete_records():
    sets = parse_cut_nccl_tests_json(KILLED.read_text(), KILLED)
    assert sets is not None
    (m,) = sets
    whole = load_measurements(P5_JSON)[0]
    assert (m.collective, m.world_size, m.link_class) == ("allreduce", 16, "inter-node")
    assert m.size_bytes.tolist() == whole.size_bytes.tolist()[:29]
    assert m.time_s.tolist() == whole.time_s.tolist()[:29]
    assert "the JSON ends mid-document (run killed?): read the 29 complete result record(s) before the cut" \
        in m.notes
    with pytest.raises(FileFormatError, match=r"--world 8 disagrees"):  # checked as a whole file is
        parse_cut_nccl_tests_json(KILLED.read_text(), KILLED, world_size=8)


def test_every_cut_of_a_json_reads_its_complete_records_or_says_none_is():
    text = json.dumps(json.loads(A100_JSON.read_text()), indent=1)
    sizes = load_measurements(A100_JSON)[0].size_bytes.tolist()
    seen = set()
    for end in range(text.index('"results"') + 9, len(text.rstrip()) - 1, 3):
        try:
            sets = parse_cut_nccl_tests_json(text[:end], "cut.json")
        except FileFormatError as exc:
            assert "ends mid-document (run killed?) before any complete result record" in str(exc)
            seen.add(0)
            continue
        assert sets is not None, text[end - 40:end]
        (m,) = sets
        assert m.size_bytes.tolist() == sizes[:len(m)] and any("ends mid-document" in n for n in m.notes)
        seen.add(len(m))
    assert seen == set(range(len(sizes) + 1))


def test_json_that_is_not_a_cut_nccl_tests_file_is_left_to_the_parser():
    text = A100_JSON.read_text()
    assert parse_cut_nccl_tests_json(text, "whole.json") is None                        # whole (parse_json's)
    assert parse_cut_nccl_tests_json(text + "junk", "extra.json") is None               # whole, then junk
    middle = text.index('"time"', len(text) // 2)
    assert parse_cut_nccl_tests_json(text[:middle] + "@" + text[middle:], "bad.json") is None   # corrupt
    assert parse_cut_nccl_tests_json('{"schema": "pybench.result", "results": [{"a": 1}, {"b', "p.json") is None
    assert parse_cut_nccl_tests_json('{"a": [1, 2', "other.json") is None


def test_fit_reads_a_killed_runs_json_with_a_note(tmp_path, capsys):
    assert main_for_tests(["fit", str(KILLED), "-o", str(tmp_path / "m.json")]) == 0
    assert "the JSON ends mid-document (run killed?)" in capsys.readouterr().out


# --- rccl-tests' JSON ---------------------------------------------------------------------------

def test_rccl_json_of_two_nodes_is_inter_node_and_says_it_is_rccl():
    (m,) = load_measurements(RCCL)
    assert (m.source, m.collective, m.world_size, m.link_class) == ("rccl-tests", "allreduce", 16, "inter-node")
    text_log = load_measurements(FIXTURES / "public_logs" / "mi300x_aac10_2node16_allreduce.log")[0]
    rccl_note = next(n for n in text_log.notes if n.startswith("an rccl-tests log (AMD's RCCL)"))
    assert rccl_note in m.notes   # the same note the text reader gives


def test_rccl_json_of_one_node_is_intra_node(tmp_path):
    rows = [json.loads(ln.rstrip(",")) for ln in RCCL.read_text().splitlines() if ln.startswith("{")]
    for r in rows:
        r.update(nodes=1, ranks=8, ranksPerNode=8)
        r["busBw"] = r["algBw"] * 2 * 7 / 8
    path = tmp_path / "rccl_1node.json"
    path.write_text("[\n" + ",\n".join(json.dumps(r) for r in rows) + "\n]\n")
    (m,) = load_measurements(path)
    assert (m.world_size, m.link_class) == (8, "intra-node")


def test_a_short_cut_json_takes_its_rank_count_from_the_devices_it_lists(tmp_path):
    """Cut before its large sizes, a -J file's rounded bandwidths allowed 20 ranks, and that was taken although
    config.devices lists 16 (2 processes x -g 8): where the rounding allows the listed count, the list decides."""
    short = tmp_path / "cut.json"
    short.write_text(P5_JSON.read_text()[:5000])
    cut = load_measurements(short)
    assert [m.world_size for m in cut] == [16]
    assert not any(n.startswith("world size 20") for m in cut for n in m.notes)
