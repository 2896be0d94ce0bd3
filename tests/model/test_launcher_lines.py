"""Ranks and hosts read from the launcher lines job logs echo (pybench.model.logs.launcher_lines)."""

from __future__ import annotations

import pytest

from pybench.model.logs import load_measurements
from pybench.model.logs.launcher_lines import Launch, read_launch
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
