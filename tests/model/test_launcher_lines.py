"""Ranks and hosts read from the launcher lines job logs echo (pybench.model.logs.launcher_lines)."""

from __future__ import annotations

import pytest

from pybench.model.logs import load_measurements
from pybench.model.logs.launcher_lines import Launch, read_launch
from pybench.model.logs.nccl_tests import parse_nccl_tests_text
from pybench.model.topology_fit import nodes_of


@pytest.mark.parametrize("line, launch", [
    ("time jsrun -n 8 -a 1 -c 1 -r 1 -l cpu-cpu osu/mpi/collective/osu_allreduce", Launch("jsrun", 8, 8)),
    ("jsrun --nrs 4 --tasks_per_rs 6 --rs_per_host 2 ./osu_allreduce", Launch("jsrun", 24, 2)),
    ("jsrun -p 12 ./osu_allreduce", Launch("jsrun", 12, None)),
    ("+ srun -N2 --ntasks-per-node=4 osu_alltoall", Launch("srun", 8, 2)),
    ("srun --nodes=2-2 --ntasks-per-node 8 ./osu_allgather", Launch("srun", 16, 2)),
    ("srun -n 16 ./osu_allreduce", Launch("srun", 16, None)),
    ("srun -l ./osu_latency -n 4", Launch("srun", None, None)),  # the program's options are not srun's
    ("mpirun --hostfile h --allow-run-as-root -np 8 -map-by ppr:1:node ./osu_bw", Launch("mpirun", 8, 8)),
    ("mpirun -n 144 -N 36 osu_allreduce", Launch("mpirun", 144, 4)),
    ("mpiexec.hydra -n 64 -ppn 32 ./osu_allreduce", Launch("mpiexec", 64, 2)),
    ("aprun -n 64 -N 32 ./osu_allreduce", Launch("aprun", 64, 2)),
    ("# Made in the shape of `mpirun_rsh -np 4 ... osu_allreduce`", Launch("mpirun_rsh", 4, None)),
    ("mpirun -np 6 -ppn 4 ./osu_allreduce", Launch("mpirun", 6, None)),  # 4 per host cannot hold 6 evenly
    ("echo srun_wrapper done", None),
    ("mpirun --mca pml ucx -np 64 osu_allreduce", Launch("mpirun", 64, None)),  # --mca takes two words
    ("mpirun -genv I_MPI_DEBUG 5 -n 64 -ppn 32 ./osu_allreduce", Launch("mpirun", 64, 2)),
    ("mpirun --mca btl ^openib -np 4 -pernode ./osu_allreduce", Launch("mpirun", 4, 4)),
    ("flux run -N2 --tasks-per-node=96 ./osu_allreduce", Launch("flux", 192, 2)),
    ("flux mini run -n 8 -N 2 ./osu_allreduce", Launch("flux", 8, 2)),
    # a count glued to its flag: the program after it is no value of it
    ("srun -n16 ./osu_allreduce", Launch("srun", 16, None)),
    # MPMD app contexts (eunomia-bpf/nccl-eBPF's logs): one job of both contexts' ranks
    ("mpirun -np 1 ./osu_bcast : -np 1 ./osu_bcast", Launch("mpirun", 2, None)),
    # Open MPI without a rank count starts every slot -H lists
    ("mpirun -H node1:8,node2:8 ./osu_allreduce", Launch("mpirun", 16, 2)),
    # with a rank count, Open MPI fills the listed hosts' slots in order (OCI's H100 quick start: -n 16 -H a:8,b:8)
    ("mpirun -n 16 -H node1:8,node2:8 ./osu_allreduce", Launch("mpirun", 16, 2)),
    ("mpirun -n 8 -H node1:8,node2:8 ./osu_allreduce", Launch("mpirun", 8, 1)),
    ("mpirun -n 8 --map-by node -H node1:8,node2:8 ./osu_allreduce", Launch("mpirun", 8, 2)),
    ("mpirun -n 32 -H node1:8,node2:8 ./osu_allreduce", Launch("mpirun", 32, None)),
])
def test_a_launcher_line_gives_its_ranks_and_hosts(line, launch):
    assert read_launch(line) == launch


def test_an_osu_log_takes_its_node_count_from_the_launcher_line(tmp_path):
    """A log launched with srun -N 2 --ntasks-per-node 4 fits as 8 ranks on 2 nodes, with no --nodes."""
    log = tmp_path / "job.out"
    log.write_text("+ srun -N 2 --ntasks-per-node=4 ./osu_allreduce\n\n# OSU MPI Allreduce Latency Test v7.3\n"
                   "# Datatype: MPI_FLOAT.\n# Size       Avg Latency(us)\n4 3.1\n1024 9.5\n1048576 410.2\n")
    (m,) = load_measurements(log)
    assert (m.world_size, nodes_of(m)) == (8, 2)
    assert "8 ranks on 2 host(s) per the srun command line" in m.notes


def test_an_nccl_tests_log_takes_its_ranks_and_hosts_from_the_launcher_line_the_ratio_allows():
    """NVIDIA/nccl-tests#78: `mpirun -n 256 -npernode 16 ... all_reduce_perf ... -g 1` above a table whose
    busbw/algbw (1.992, two decimals) allows 238 to 261 ranks. The log was read as saying no rank count at all;
    `--world 256` was taken with a note that said 249."""
    from conftest import PUBLIC_LOGS

    log = PUBLIC_LOGS / "issue78_256gpu_allreduce_c0_2021format.log"
    (ms,) = load_measurements(log)
    assert ms.world_size == 256 and nodes_of(ms) == 16 and ms.link_class == "inter-node"
    assert any("world size 256 from the mpirun command line" in n for n in ms.notes)
    (given,) = load_measurements(log, world_size=256)
    assert not [n for n in given.notes if n.startswith("world size") and "256" not in n], given.notes
    # a launcher line whose count the ratio does not allow is another job's: not used, and said
    text = log.read_text().replace("-n 256", "-n 64")
    (other,) = parse_nccl_tests_text(text, "<log>")
    assert other.world_size is None and any("do not allow" in n for n in other.notes)


def test_gpus_per_process_multiply_the_ranks_of_an_nccl_tests_launch():
    launch = read_launch("srun -N 2 --ntasks-per-node=1 ./build/all_reduce_perf -b 8 -e 1G -g 8")
    assert launch is not None and (launch.ranks, launch.hosts, launch.devices) == (2, 2, 16)
    launch = read_launch("mpirun -np 4 all_gather_perf -t2 -g 2")
    assert launch is not None and launch.devices == 16
    launch = read_launch("srun -n 8 python train.py -g 4")  # not an nccl-tests binary: its -g is its own
    assert launch is not None and launch.devices == 8


_SENDRECV = ("#       size         count      type   redop    root     time   algbw   busbw #wrong     time   algbw   busbw"
             " #wrong\n"
             "     1048576        262144     float     sum      -1    40.12   26.14   26.14      0    40.02   26.20"
             "   26.20      0\n"
             "     2097152        524288     float     sum      -1    60.33   34.76   34.76      0    60.11   34.89"
             "   34.89      0\n")


def test_a_launcher_line_counts_only_for_the_nccl_tests_program_it_runs():
    """A send/recv's busbw/algbw says nothing of its ranks: an echoed `srun ... hostname`, or the launch of another
    test of the same log, gave it their rank count and link."""
    for above in ("+ srun -N 2 -n 4 hostname\n", "mpirun -np 16 ./all_reduce_perf -b 8 -e 1G\n"):
        (ms,) = parse_nccl_tests_text(above + "# Collective test starting: sendrecv_perf\n" + _SENDRECV, "<log>")
        assert ms.world_size is None and ms.link_class is None, above
    (ms,) = parse_nccl_tests_text("srun -N 2 -n 2 --exact ./sendrecv_perf -g 4\n# Collective test starting: "
                                  "sendrecv_perf\n" + _SENDRECV, "<log>")
    assert (ms.world_size, nodes_of(ms)) == (8, 2)


def test_the_command_of_an_nccl_tests_binary_ends_at_a_shell_separator():
    launch = read_launch("srun -n 2 -- ./all_reduce_perf -g 8")
    assert launch is not None and (launch.program, launch.devices) == ("all_reduce_perf", 16)
    launch = read_launch("mpirun -np 2 --use-hwthread-cpus ./all_reduce_perf_mpi -g 4")
    assert launch is not None and (launch.program, launch.devices) == ("all_reduce_perf", 8)
    launch = read_launch("mpirun -np 2 all_reduce_perf -g 2 && mpirun -np 2 sendrecv_perf -t 4")
    assert launch is not None and launch.devices == 4
    launch = read_launch("srun -n 4 hostname")
    assert launch is not None and launch.program == "" and launch.devices == 4
    launch = read_launch('srun -n 2 bash -c "cd /opt/nccl-tests && ./build/all_gather_perf -b 8 -e 1G -g 4"')
    assert launch is not None and (launch.program, launch.devices) == ("all_gather_perf", 8)  # a wrapper's command
    launch = read_launch("mpirun -np 2 hostname && mpirun -np 4 ./all_reduce_perf")  # another launch's binary
    assert launch is not None and launch.program == ""


def test_a_command_continued_over_lines_is_one_line_and_a_stray_backslash_joins_no_table():
    from pybench.model.logs.launcher_lines import continued_lines
    assert continued_lines(["mpirun --np 8 \\", "  -x NCCL_ALGO=Ring \\", "  ./all_reduce_perf -g 1", "row"]) == [
        "", "", "mpirun --np 8 -x NCCL_ALGO=Ring ./all_reduce_perf -g 1", "row"]
    header = "#       size         count      type   redop    root     time   algbw   busbw #wrong"
    assert continued_lines(["# logs in C:\\", header]) == ["# logs in C:\\", header]
    assert continued_lines(["cd /x \\", "", "row"]) == ["cd /x \\", "", "row"]


def test_an_nccl_tests_binary_run_without_a_launcher_is_one_process_on_one_host():
    """`./build/sendrecv_perf -b 128M -e 1G -f 2 -g 8` atop a log, with no launcher: a send/recv's busbw/algbw says
    nothing of its ranks, and pybench asked for --world. One process drives -t x -g GPUs on its one host. Where its
    ranks' Rank lines follow, or a launcher started it (each rank echoing the binary's line), those say instead."""
    (ms,) = parse_nccl_tests_text("$ ./build/sendrecv_perf -b 128M -e 1G -f 2 -g 8\n" + _SENDRECV, "<log>")
    assert (ms.world_size, ms.link_class) == (8, "intra-node")
    assert any("8 ranks on 1 host(s) per the direct command line" in n for n in ms.notes)
    assert read_launch("Running ./build/all_reduce_perf -g 8") is None  # not a command: a word before the binary
    (ms,) = parse_nccl_tests_text("srun -N 2 -n 16 bash -c 'set -x; ./sendrecv_perf'\n+ ./sendrecv_perf -g 1\n"
                                  + "# Collective test starting: sendrecv_perf\n" + _SENDRECV, "<log>")
    assert (ms.world_size, ms.link_class) == (16, "inter-node")
