"""Node counts that the fitted ones do not determine: one cost shape that misses its own node counts.

An OSU all-reduce on AWS EKS (hpc7a, 96 CPU ranks per node) at 32 and 64 nodes: the one cost shape misses the
64-node sweep by half, and 128 nodes took twice the 64-node time at 4 B (1843 against 908 us), which the shape
put at 398 us with an interval that missed it. Where the fitted node counts do not follow one shape, other
node counts are not determined by them; where they do (Polaris at 2 and 8 nodes), they are answered.
"""

from __future__ import annotations

import json

import pytest
from conftest import PUBLIC_LOGS, SHARED_DATA, slower_nccl_tests_log

from pybench.cli.main import main as main_for_tests
from pybench.errors import NotDetermined
from pybench.model.model_files import load_model

EKS = [PUBLIC_LOGS / f"osu_awseks_hpc7a_n{n}_ppn96_allreduce.log" for n in (32, 64)]


@pytest.fixture(scope="module")
def eks(tmp_path_factory):
    out = tmp_path_factory.mktemp("eks") / "eks.json"
    assert main_for_tests(["fit", *map(str, EKS), "--world", "3072,6144", "--nodes", "32,64", "-o", str(out)]) == 0
    return out


def test_node_counts_one_shape_cannot_join_do_not_determine_another(eks, capsys, tmp_path):
    capsys.readouterr()
    rows = tmp_path / "rows.json"
    assert main_for_tests(["predict", str(eks), "--sizes", "4,1M", "--world", "12288", "--nodes", "128",
                           "--json", str(rows)]) == 0
    out = capsys.readouterr().out
    assert "not determined by these inputs: one cost shape misses the measured" in out
    assert "6144-rank 64-node sweep by 52%" in out and "`pybench allreduce --np 12288` on 128 nodes" in out
    records = json.loads(rows.read_text())["records"]
    assert all(r["time_s"] is None and not r["determined"] for r in records)
    with pytest.raises(NotDetermined, match="these sweeps do not follow one algorithm on one network"):
        load_model(eks, collective="allreduce", world_size=6144).predict(4.0, world=12288, nodes=128)
    # nor between them: the shape's own times at the fitted node counts are what it missed, so they bound nothing
    with pytest.raises(NotDetermined, match="these sweeps do not follow one algorithm on one network"):
        load_model(eks, collective="allreduce", world_size=6144).predict(4.0, world=4608, nodes=48)
    # the measured layouts still answer from their own sweeps, and MPI's tree is not called NCCL's
    assert main_for_tests(["predict", str(eks), "--sizes", "4", "--world", "6144", "--nodes", "64"]) == 0
    assert "908.30" in capsys.readouterr().out


def test_the_fit_says_why_its_node_counts_do_not_join(tmp_path, capsys):
    assert main_for_tests(["fit", *map(str, EKS), "--world", "3072,6144", "--nodes", "32,64",
                           "-o", str(tmp_path / "m.json")]) == 0
    err = capsys.readouterr()
    text = err.out + err.err
    assert "other node counts are not determined by them" in text
    assert "NVLink" not in text  # CPU ranks across nodes: no GPU fabric to blame


def test_node_counts_that_one_shape_joins_are_answered(tmp_path, capsys):
    logs = [SHARED_DATA / "nccl-tests" / f"polaris_a100_{n}node_4gpu_slingshot_allreduce.txt" for n in (2, 8)]
    model = tmp_path / "polaris.json"
    assert main_for_tests(["fit", *map(str, logs), "-o", str(model)]) == 0
    capsys.readouterr()
    assert main_for_tests(["predict", str(model), "--sizes", "1M", "--world", "1024", "--nodes", "256"]) == 0
    out = capsys.readouterr().out
    assert "not determined" not in out and "another node count" in out


def test_mpi_across_nodes_is_labelled_with_a_tree_not_nccls_double_tree(tmp_path, capsys):
    model = tmp_path / "m32.json"
    assert main_for_tests(["fit", str(EKS[0]), "--world", "3072", "--nodes", "32", "-o", str(model)]) == 0
    capsys.readouterr()
    assert main_for_tests(["predict", str(model), "--sizes", "4", "--world", "6144", "--nodes", "64"]) == 0
    header = capsys.readouterr().out.splitlines()[0]
    assert "across nodes tree" in header and "double-tree" not in header


def test_fewer_ranks_than_nodes_is_said_as_such(eks, capsys):
    capsys.readouterr()
    assert main_for_tests(["predict", str(eks), "--sizes", "4", "--world", "16", "--nodes", "32"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "cannot fill --nodes 32" in err[0]


def test_one_gpu_per_node_has_no_leg_inside_a_node_to_be_undetermined():
    """GPUs per node never measured on a mesh node are not determined across nodes, but one GPU per node has no
    link inside its node at all: it is answered."""
    from pybench.model.system import load_system
    from pybench.model.topology import Observation
    from pybench.model.topology_fit import fit_topology
    sizes = [float(2 ** k) for k in range(16, 28)]
    obs = [Observation(s, 8, 1, 10e-6 + 14 / 8 * s / 100e9) for s in sizes]
    obs += [Observation(s, 16, 2, 30e-6 + 30 / 16 * s / 20e9) for s in sizes]
    mesh = load_system("dgx-1-v100")
    model = fit_topology("allreduce", obs, system=mesh).with_system(mesh)
    assert model.predict(1 << 24, 8, 8).determined
    p = model.predict(1 << 24, 8, 2)  # 4 of a DGX-1's 8 GPUs per node: a subset of the mesh
    assert not p.determined and "4 GPUs per node were never measured" in p.undetermined


def test_a_one_node_fit_asked_for_more_gpus_than_a_node_holds_needs_the_nodes(tmp_path, capsys):
    """A 2..8-GPU A100 node fitted, asked for 64 ranks without --nodes: they were priced inside one 8-GPU NVSwitch
    node (a 3.6x interval), while 64 A100s cross InfiniBand. More GPUs than the fits and every named node hold is
    no one node unless the user says so; with the node's description, its nodes."""
    model = tmp_path / "v.json"
    logs = [str(SHARED_DATA / "vtrain" / f"a100_nvswitch_allreduce_{g}gpu.csv") for g in (2, 4, 8)]
    assert main_for_tests(["fit", *logs, "-o", str(model)]) == 0
    capsys.readouterr()
    assert main_for_tests(["predict", str(model), "--sizes", "1G", "--world", "64"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "give --nodes" in err[0]
    assert main_for_tests(["predict", str(model), "--sizes", "1G", "--world", "64", "--system", "dgx-a100"]) == 0
    assert "64 ranks on 8 node(s)" in capsys.readouterr().out
    assert main_for_tests(["predict", str(model), "--sizes", "1G", "--world", "6"]) == 0  # inside the node


def test_one_node_count_whose_sizes_one_shape_cannot_follow_does_not_determine_another(tmp_path, capsys):
    """LLNL Lassen (Spectrum MPI, 1 rank per node, 20 runs in one job log): the all-reduce switches at 512 KiB to an
    algorithm 3.6x slower for twice the bytes, which no lower envelope of algorithms follows; the one cost shape
    missed the 4-node sweep by a quarter and still priced 16 to 128 nodes (29-51% off). Its own curve answers at
    its layout; other node counts say what to measure. `--collective allreduce` takes the log's all-reduce."""
    log = PUBLIC_LOGS / "osu_lassen_n4_jsrun_20runs_allreduce.log"
    out = tmp_path / "lassen.json"
    assert main_for_tests(["fit", str(log), "--collective", "allreduce", "-o", str(out)]) == 0
    said = capsys.readouterr()
    assert "its 20 allreduce table(s) taken, the 40 other(s) of this log left out" in said.err
    assert "misses its own 4-rank 4-node sweep by" in said.out and "other node counts are not determined" in said.out
    with pytest.raises(NotDetermined, match=r"4-rank 4-node sweep by \d+%.*on 16 nodes"):
        load_model(out).predict(1 << 20, world=16, nodes=16)
    assert load_model(out).predict(1 << 20).time_s == pytest.approx(573.4e-6, rel=0.02)  # the sweep itself
    # a test the log does not hold is named as such, with the tests it does
    assert main_for_tests(["fit", str(log), "--collective", "allgather", "-o", str(tmp_path / "x.json")]) == 2
    err = capsys.readouterr().err
    assert "the log names no allgather test; its tests are allreduce, p2p_latency, p2p_mbw" in err, err


def test_more_gpus_per_node_than_any_node_holds_is_not_determined_without_a_description():
    """A 2-node H100 fit (8 ranks per node) asked for 4096 ranks on 2 nodes priced 1 GiB 5x faster than the 16
    ranks measured on the same nodes, with an interval from 30 ns to 59 hours: 2048 GPUs per node is no node of
    the log, nor of any named system. Not determined, with the input that would tell; a description answers."""
    from pybench.model.system import SystemDescription
    from pybench.model.topology import Observation
    from pybench.model.topology_fit import fit_topology
    model = fit_topology("allreduce", [Observation(float(s), 16, 2, 40e-6 + 1.875 * s / 300e9)
                                       for s in (2 ** k for k in range(20, 31))])
    p = model.predict(1 << 30, 4096, 2)
    assert not p.determined and "2048 GPUs per node, more than any named system's node holds" in p.undetermined
    assert model.predict(1 << 30, 64, 8).determined  # 8 per node: as fitted
    assert not model.predict(1 << 30, 32, 2).determined  # 16 per node: no named node holds them either
    wide = SystemDescription(name="wide", source="test", gpus_per_node=16, intra_fabric="nvswitch",
                             intra_GBps_per_gpu=450, nics_per_node=8, nic_Gbps=400)
    assert "GPUs per node, more than" not in model.with_system(wide).predict(1 << 30, 32, 2).undetermined


AKS_CPU = [PUBLIC_LOGS / f"osu_azaks_cpu_n{n}_ppn96_allreduce.out" for n in (128, 256)]


def test_small_sizes_slower_per_step_than_any_calibrated_network_do_not_determine_other_node_counts(tmp_path, capsys):
    """OSU on Azure AKS CPU nodes (96 ranks each) at 128 and 256 nodes: 10 ms at 4 B, 789 us per step of the
    tree, which one cost shape follows (both sweeps within its own-miss line). Carried to 32 and 64 nodes it
    priced 4 B at 8 ms with an interval from 2 ms, where 32 nodes took 0.17 ms (5% of 38 points covered). No
    system the intervals were calibrated on waits that long per network step: other node counts are not
    determined, with the measurement to make; the fitted layouts answer from their own sweeps."""
    out = tmp_path / "aks.json"
    assert main_for_tests(["fit", *map(str, AKS_CPU), "--world", "12288,24576", "--nodes", "128,256",
                           "-o", str(out)]) == 0
    said = capsys.readouterr().out
    assert "789 us per step across nodes" in said and "other node counts are not determined by them" in said
    rows = tmp_path / "rows.json"
    assert main_for_tests(["predict", str(out), "--sizes", "4,64K", "--world", "3072", "--nodes", "32",
                           "--json", str(rows)]) == 0
    text = capsys.readouterr().out
    assert "not determined by these inputs: the fitted sweeps' small sizes wait 789 us per step" in text
    assert "nothing carries it to 3072 ranks on 32 nodes" in text and "`pybench allreduce --np 3072` on 32 nodes" in text
    assert all(r["time_s"] is None for r in json.loads(rows.read_text())["records"])
    model = load_model(out, collective="allreduce", world_size=24576)
    with pytest.raises(NotDetermined, match="longer than the systems the intervals were calibrated on allow"):
        model.predict(4.0, world=6144, nodes=64)
    own = model.predict(4.0, world=24576, nodes=256)  # a fitted layout: its own sweep answers
    assert 1e-3 < own.time_s < 0.1


def test_the_same_sweeps_with_only_small_sizes_are_refused_too(tmp_path, capsys):
    """The AKS sweeps cut to 4 B..4 KiB fit one regime, whose latency the first rule read only beside another
    regime: 32 nodes were answered (8 ms at 4 B, 0.17 ms measured). Where latency rules the smallest size, its
    step is read all the same."""
    cut = []
    for log in AKS_CPU:
        kept = [line for line in log.read_text().splitlines()
                if not line.split() or not line.split()[0].isdigit() or int(line.split()[0]) <= 4096]
        cut.append(tmp_path / log.name)
        cut[-1].write_text("\n".join(kept) + "\n")
    out = tmp_path / "aks_small.json"
    assert main_for_tests(["fit", *map(str, cut), "--world", "12288,24576", "--nodes", "128,256", "-o", str(out)]) == 0
    capsys.readouterr()
    with pytest.raises(NotDetermined, match=r"small sizes wait \d+ us per step across nodes"):
        load_model(out, collective="allreduce", world_size=24576).predict(4.0, world=3072, nodes=32)


@pytest.mark.parametrize("slower", [1.0, 1.05])
def test_a_system_whose_steps_are_within_the_calibration_still_answers_other_node_counts(tmp_path, capsys, slower):
    """MI300X nodes on 2 nodes wait the longest per step of the calibration's logs (113 us): another node count
    is answered, with its interval, and so it is for the same log run 5% slower (a bound at the slowest log alone
    refused it: the next system may lie beyond the slowest as far as the systems lie from each other)."""
    log = PUBLIC_LOGS / "mi300x_aac10_2node16_allreduce.log"
    if slower != 1.0:
        log = slower_nccl_tests_log(log, slower, tmp_path / "slower.log")
    out = tmp_path / "mi300x.json"
    assert main_for_tests(["fit", str(log), "-o", str(out)]) == 0
    assert "per step across nodes, longer" not in capsys.readouterr().out
    p = load_model(out).predict(1 << 20, world=32, nodes=4)
    assert p.provenance == "another node count" and p.time_low_s < p.time_s < p.time_high_s


def test_a_model_that_prices_no_other_layout_says_what_to_do_instead(tmp_path, capsys):
    """A model with no topology model asked for another world ended its line in "...; or measure at that layout",
    an alternative with no first half; an OSU point-to-point model was told the same. Each says what answers."""
    p2p = tmp_path / "p2p.json"
    assert main_for_tests(["fit", str(SHARED_DATA / "osu" / "osu_bw_cuda_a100_nvlink_eessi716.txt"), "-o",
                           str(p2p)]) == 0
    capsys.readouterr()
    assert main_for_tests(["predict", str(p2p), "--sizes", "1M", "--world", "16", "--nodes", "2"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "answers at --world 2 only, not 16" in err[0] and "or measure at" not in err[0]
    hosts = tmp_path / "gb300.json"  # its Rank lines list the hosts of some ranks only: no node count, no topology
    assert main_for_tests(["fit", str(PUBLIC_LOGS / "gb300_oci_h2_g8_allreduce.log"), "-o", str(hosts)]) == 0
    capsys.readouterr()
    assert main_for_tests(["predict", str(hosts), "--sizes", "1M", "--world", "128", "--nodes", "32"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "give fit --nodes N" in err[0] and "or measure at" not in err[0]
    assert err[0].endswith("predict at its measured world (--world 8), or measure them with "
                           "`pybench allreduce --np 128`")


def test_the_command_to_measure_is_one_pybench_runs_or_nccl_tests_program():
    """The refusals named `pybench reduce --np 4`, a command pybench does not have."""
    from pybench.collectives import measure_command
    assert measure_command("allreduce", 16) == "`pybench allreduce --np 16`"
    assert measure_command("allreduce", 16, " --sizes 1M:1G") == "`pybench allreduce --np 16 --sizes 1M:1G`"
    assert measure_command("reduce", 4) == "`mpirun -np 4 reduce_perf` (nccl-tests; pybench does not run reduce)"
    assert measure_command("p2p_bw", 2).startswith("`pybench p2p`")
