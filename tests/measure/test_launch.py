import os

from pybench.measure.launch import RANK_MARKER, Launcher, find_launcher, under_launcher


def test_launcher_environment_detection():
    assert not under_launcher({})
    assert under_launcher({"OMPI_COMM_WORLD_SIZE": "4"})
    assert under_launcher({"PMI_RANK": "0"})
    assert under_launcher({"SLURM_STEP_NUM_TASKS": "8"})
    assert under_launcher({RANK_MARKER: "1"})
    # a Slurm allocation alone (sbatch/salloc shell) is not a launched rank
    assert not under_launcher({"SLURM_JOB_ID": "12", "SLURM_NTASKS": "8"})


def test_open_mpi_command_oversubscribes_only_past_the_cores():
    l = Launcher("/x/mpiexec", "openmpi")
    assert l.command(2, ["prog"], cpus=2) == ["/x/mpiexec", "-n", "2", "prog"]
    assert l.command(4, ["prog", "a b"], cpus=2) == ["/x/mpiexec", "-n", "4", "--oversubscribe", "--bind-to", "none",
                                                      "prog", "a b"]
    assert Launcher("/x/mpiexec", "mpich").command(4, ["prog"], cpus=2) == ["/x/mpiexec", "-n", "4", "prog"]


def test_environment_marks_ranks_and_allows_root_for_open_mpi():
    env = Launcher("/x/mpiexec", "openmpi").environment({})
    assert env[RANK_MARKER] == "1"
    if os.geteuid() == 0:
        assert env["OMPI_ALLOW_RUN_AS_ROOT"] == "1" and env["OMPI_ALLOW_RUN_AS_ROOT_CONFIRM"] == "1"
    assert "OMPI_ALLOW_RUN_AS_ROOT" not in Launcher("/x/mpiexec", "mpich").environment({})


def test_the_embedded_launcher_is_found(native):
    launcher = find_launcher()
    assert launcher.flavour == "openmpi" and os.access(launcher.path, os.X_OK)


def test_torchrun_workers_count_as_launched():
    assert under_launcher({"TORCHELASTIC_RUN_ID": "x"})
    assert under_launcher({"RANK": "0", "WORLD_SIZE": "2", "MASTER_ADDR": "127.0.0.1"})
    assert not under_launcher({"RANK": "0"})  # a stray RANK alone is not a launched job


def test_backends_are_looked_up_by_name():
    import pytest

    from pybench.errors import BackendUnavailable, UsageError
    from pybench.measure.backends import get_backend
    with pytest.raises(UsageError, match="unknown backend 'gloo'; known: mpi"):
        get_backend("gloo")
    from pybench._native import cuda
    if cuda().probe()["device_count"] == 0:
        with pytest.raises(BackendUnavailable, match="nccl backend needs a GPU"):
            get_backend("nccl").start()
