"""OSU logs as jobs leave them: cut inside a row, a test that printed only its header, a collective whose own
launch line is missing below a point-to-point test's, and a CUDA build of OSU run on host buffers."""

from __future__ import annotations

import pytest

from pybench.errors import FileFormatError
from pybench.model.logs import load_measurements
from pybench.model.logs.launcher_lines import Launch, read_launch

TITLE = "# OSU MPI Allreduce Latency Test v7.5\n# Datatype: MPI_INT.\n# Size       Avg Latency(us)\n"
ROWS = "4 11.69\n1024 17.97\n65536 160.17\n262144 923.52\n"


@pytest.mark.parametrize("cut", ["1048576              69", "1048576              6966.", "1048576   "])
def test_a_log_cut_inside_its_last_row_leaves_that_row_out_and_says_so(tmp_path, cut):
    """A killed job's `1048576 69` (6966.12 being written) was read as a 69 us measurement, 100x too fast; a cut
    just after the size refused the whole file."""
    path = tmp_path / "cut.out"
    path.write_text(TITLE + ROWS + cut)
    (m,) = load_measurements(path, world_size=64)
    assert m.size_bytes.tolist() == [4, 1024, 65536, 262144]
    assert any("left out: the log ends inside its row" in n and "a run cut short" in n for n in m.notes), m.notes


def test_a_whole_last_row_without_a_newline_is_kept(tmp_path):
    path = tmp_path / "whole.out"
    path.write_text(TITLE + ROWS + "1048576              6966.12")
    (m,) = load_measurements(path, world_size=64)
    assert m.size_bytes.tolist()[-1] == 1048576 and not any("cut short" in n for n in m.notes)
    path.write_text(TITLE + ROWS + "1048576\n2097152              13900.50\n")
    with pytest.raises(FileFormatError, match="line 8"):  # a row without its value, rows after it: malformed
        load_measurements(path, world_size=64)


def test_a_test_that_printed_only_its_header_is_skipped_beside_tests_that_printed_rows(tmp_path):
    """A segfaulted osu_iallreduce at the end of a job log refused the whole log ("OSU table has no rows")."""
    path = tmp_path / "job.out"
    path.write_text(TITLE + ROWS + "\n# OSU MPI Allgather Latency Test v7.5\n# Datatype: MPI_CHAR.\n"
                    "# Size       Avg Latency(us)\n[node1:12] *** Process received signal ***\n")
    (m,) = load_measurements(path, world_size=64)
    assert m.collective == "allreduce"
    assert any("OSU table has no rows: that test printed nothing" in n for n in m.notes), m.notes
    path.write_text(TITLE)  # one table, no rows: the file says nothing
    with pytest.raises(FileFormatError, match="OSU table has no rows"):
        load_measurements(path, world_size=64)


def test_a_point_to_point_launch_gives_no_collective_its_rank_count(tmp_path):
    """OCI's tutorial: `mpirun -n 2 ... osu_latency`, then an all-reduce whose own launch line was not printed.
    It was read as 2 ranks; 144 ran it. The log does not say: the world is asked for."""
    path = tmp_path / "tutorial.out"
    path.write_text("$ mpirun -n 2 -N 1 -hostfile h osu_latency -m 1:1\n\n# OSU MPI Latency Test v7.5\n"
                    "# Datatype: MPI_CHAR.\n# Size       Avg Latency(us)\n1 1.67\n$\n\n" + TITLE + ROWS)
    latency, allreduce = load_measurements(path)
    assert latency.world_size == 2 and allreduce.world_size is None
    path.write_text(path.read_text().replace("osu_latency -m", "osu_allreduce -m"))  # a collective's launch counts
    assert load_measurements(path)[1].world_size == 2


@pytest.mark.parametrize("buffers, device", [("HOST (H) and Receive Buffer on HOST (H)", False),
                                             ("DEVICE (D) and Receive Buffer on DEVICE (D)", True)])
def test_a_cuda_build_of_osu_on_host_buffers_is_not_labelled_device_memory(tmp_path, buffers, device):
    path = tmp_path / "cuda_build.out"
    path.write_text(f"# OSU MPI-CUDA Allreduce Latency Test v7.5\n# Send Buffer on {buffers}\n"
                    f"# Datatype: MPI_INT.\n# Size       Avg Latency(us)\n" + ROWS)
    (m,) = load_measurements(path, world_size=16)
    assert any("device memory" in n for n in m.notes) == device


@pytest.mark.parametrize("line, launch", [
    ("srun --ntasks=64 --ntasks-per-node=32 ./osu_allreduce", Launch("srun", 64, 2)),
    ("mpiexec -n 16 --ppn 4 --depth 8 ./osu_allreduce", Launch("mpiexec", 16, 4)),  # Cray PALS
    ("ibrun -n 64 ./osu_allreduce", Launch("ibrun", 64, None)),  # TACC
])
def test_launchers_of_hpc_centres_give_their_ranks_and_hosts(line, launch):
    assert read_launch(line) == launch


def test_a_full_table_whose_average_lies_outside_its_min_and_max_is_refused(tmp_path):
    """`-f` columns in another order than OSU's (Avg, Min, Max) were read as OSU's: an average of 7 with a min of 11."""
    header = "# OSU MPI Allreduce Latency Test v7.3\n# Size       Avg Latency(us)   Min Latency(us)   Max Latency(us)  " \
             "Iterations\n"
    path = tmp_path / "f.out"
    path.write_text(header + "4  7.00  11.00  3.00  1000\n8  8.00  12.00  4.00  1000\n")
    with pytest.raises(FileFormatError, match="line 3: size 4: its average 7.00 is not between its min 11.00 and max 3"):
        load_measurements(path, world_size=8)
    path.write_text(header + "4  7.00  7.00  9.10  1000\n8  8.00  7.50  8.00  1000\n")  # (equal, as OSU rounds them)
    assert len(load_measurements(path, world_size=8)[0]) == 2
