"""A log that forced NCCL's algorithm (NCCL_ALGO) says how its all-reduce crossed the nodes."""

from __future__ import annotations

import pytest
from conftest import PUBLIC_LOGS

from pybench.model.logs import load_measurements
from pybench.model.logs.nccl_env import SOCKETS, forced_algorithm, nccl_settings, network_path
from pybench.model.topology_fit import fit_topology_models


@pytest.mark.parametrize("line, algorithm", [
    ("mpirun -np 16 -N 8 -x NCCL_ALGO=Ring -x NCCL_MIN_CTAS=24 ./build/all_reduce_perf -b 1M", "ring"),
    ("export NCCL_ALGO=Tree", "tree"),
    ("mpiexec -n 16 -genv NCCL_ALGO Ring ./all_reduce_perf", "ring"),
    ("node1:123:123 [0] NCCL INFO NCCL_ALGO set by environment to Ring", "ring"),
    ("srun --export=ALL,NCCL_ALGO=ring,NCCL_PROTO=Simple ./all_reduce_perf", "ring"),
    ("NCCL_ALGO=^NVLS ./all_reduce_perf", ""),          # an exclusion forces no one algorithm
    ("NCCL_ALGO=Ring,Tree ./all_reduce_perf", ""),      # nor does a list
    ("NCCL_ALGO=allreduce:tree;broadcast:ring ./all_reduce_perf", "tree"),  # the all-reduce's own, per collective
    ("mpirun -x NCCL_DEBUG=INFO ./all_reduce_perf", None),
    ("NCCL_ALGORITHM_X=1", None),
    ("#export NCCL_ALGO=Tree", None),                       # a shell comment sets nothing
    ("# NCCL_ALGO=Tree was slower, so we use the default", None),
    ("export NCCL_ALGO=\"Tree\"", "tree"),                  # quoted, as shells take it
    ("h:1:1 [0] NCCL INFO NCCL_ALGO set by environment to allreduce:tree", "tree"),  # NCCL 2.24's per-collective form
    ("NCCL_ALGO=allgather:ring ./all_gather_perf", ""),     # says nothing of the all-reduce
])
def test_the_algorithm_a_line_forces(line, algorithm):
    assert forced_algorithm(line) == algorithm


def test_an_all_reduce_forced_to_the_ring_crosses_nodes_by_the_ring_at_any_node_count():
    """nccl-tests#309: a 2-node H100 all-reduce run with -x NCCL_ALGO=Ring. Read as 'tree or ring (one node count
    cannot tell)', its 8-node prediction lay between the two readings, with that span in the interval."""
    sets = load_measurements(PUBLIC_LOGS / "h100ib_gjaion_2node16_allreduce_ncclalgo_ring.log")
    assert [ms.nccl_algo for ms in sets] == ["ring"]
    assert any("NCCL_ALGO=Ring in the log" in n for n in sets[0].notes)
    (model,), _ = fit_topology_models(sets)
    assert {r.algorithm for r in model.inter.all_regimes()} == {"ring"}
    p = model.predict(1 << 30, 64, 8)
    assert not any("may have crossed by NCCL's tree" in c for c in p.caveats), p.caveats
    # fitted at one node count from 1 MiB up, its latency is neither all per call nor all per step of the ring (all
    # per step put 1 MiB on 8 nodes at 605 us, 5x what NCCL's default runs there took): between the two
    per_call, per_step = model._latency_readings(1 << 20, 64, 8, 1)
    assert per_call < model.predict(1 << 20, 64, 8).time_s < per_step
    # a log that forced nothing keeps both readings
    (plain,), _ = fit_topology_models(load_measurements(PUBLIC_LOGS / "h100ib_gjaion_2node16_allreduce.log"))
    assert any("may have crossed by NCCL's tree" in c for c in plain.predict(1 << 30, 64, 8).caveats)


def test_every_test_of_a_job_run_with_nccl_algo_is_forced_and_another_job_line_ends_it(tmp_path):
    """A second table of the same job (or under an earlier `export`) lost the forced algorithm: the preamble was
    read afresh after each table, keeping only the launcher line."""
    log = (PUBLIC_LOGS / "h100ib_gjaion_2node16_allreduce_ncclalgo_ring.log").read_text().splitlines(keepends=True)
    launch, test = "".join(log[:2]), "".join(log[2:])
    twice = tmp_path / "twice.log"
    twice.write_text(launch + test + test)
    assert [ms.nccl_algo for ms in load_measurements(twice)] == ["ring", "ring"]
    exported = tmp_path / "exported.log"
    exported.write_text("export NCCL_ALGO=Ring\n" + test + test)
    assert [ms.nccl_algo for ms in load_measurements(exported)] == ["ring", "ring"]
    other = tmp_path / "other.log"  # the next job's line sets no algorithm: the first -x was its job's alone
    other.write_text(launch + test + "mpirun -np 16 -N 8 --hostfile h ./build/all_reduce_perf -b 1M -e 8G -f 2 -g 1\n"
                     + test)
    assert [ms.nccl_algo for ms in load_measurements(other)] == ["ring", ""]
    (model,), _ = fit_topology_models(load_measurements(twice))
    assert {r.algorithm for r in model.inter.all_regimes()} == {"ring"}


def _ring_test_under(tmp_path, launch: str):
    """The NCCL_ALGO=Ring 2-node log's test (without its own launcher lines) under ``launch``, read."""
    log = (PUBLIC_LOGS / "h100ib_gjaion_2node16_allreduce_ncclalgo_ring.log").read_text().splitlines(keepends=True)
    path = tmp_path / "launched.log"
    path.write_text(launch + "".join(log[2:]))
    return load_measurements(path)


def test_a_launcher_line_that_is_another_jobs_forces_nothing_on_the_table(tmp_path):
    """A V100 log pastes a "command sample" of another job (`mpirun -np 24 ... -x NCCL_ALGO=RING ... -g 4`: 96
    ranks) above a 4-GPU run started by hand: its rank count was set aside as another job's, yet its NCCL_ALGO
    was taken as the table's ("NCCL ran its ring at every size")."""
    (ms,) = _ring_test_under(tmp_path, "mpirun --oversubscribe -np 24 -H node1,node2,node3 -x NCCL_ALGO=RING "
                                       "-x NCCL_DEBUG=INFO ./build/all_reduce_perf -b 8 -e 128M -f 2 -g 4\n")
    assert ms.world_size == 16 and any("another job's line" in n for n in ms.notes)
    assert ms.nccl_algo == "" and not any("NCCL_ALGO" in n for n in ms.notes)


def test_a_launcher_command_continued_over_lines_is_read_as_one(tmp_path):
    """READMEs and job scripts print `mpirun ... \\` over several lines; only the first was read, so the rank
    count (and NCCL_ALGO) on the later lines was not: OCI's H100 quick start put `-n 16 -H a:8,b:8` there."""
    (ms,) = _ring_test_under(tmp_path, "mpirun --bind-to none \\\n    -n 16 -H inst-a:8,inst-b:8 \\\n"
                                       "    -x NCCL_ALGO=Ring \\\n    ./build/all_reduce_perf -b 1M -e 8G -f 2 -g 1\n")
    assert ms.world_size == 16 and ms.nccl_algo == "ring"
    assert any("world size 16 from the mpirun command line" in n for n in ms.notes), ms.notes


@pytest.mark.parametrize("line, path", [
    ("mpirun -np 2 -x NCCL_IB_DISABLE=1 -x NCCL_SOCKET_IFNAME=net1 ./build/all_reduce_perf -g 1", SOCKETS),
    ("mpirun -np 2 -x NCCL_IB_DISABLE=0 -x NCCL_IB_HCA=mlx5_2 all_reduce_perf -g 2", ""),
    ("export NCCL_NET=Socket", SOCKETS),
    ("srun --export=ALL,NCCL_NET=Socket,NCCL_DEBUG=INFO ./all_reduce_perf", SOCKETS),
    ("NCCL_NET='AWS Libfabric' NCCL_IB_DISABLE=1 ./all_reduce_perf", ""),  # a plugin runs with IB's own off
    ("node1:5:5 [0] NCCL INFO Using network Socket", SOCKETS),
    ("node1:5:5 [0] NCCL INFO Using network IB", ""),
    ("mpiexec -genv NCCL_IB_DISABLE 1 ./all_reduce_perf", SOCKETS),
    ("mpirun -x NCCL_NET_GDR_LEVEL=PHB ./all_reduce_perf", None),  # another variable
    ("# NCCL_IB_DISABLE=1 was slower", None),                        # a shell comment sets nothing
    ("h:1:1 [0] NCCL INFO NCCL_IB_DISABLE set by environment to 1.", SOCKETS),  # NCCL's echo ends a number with "."
])
def test_the_network_path_a_line_sets(line, path):
    assert network_path(line) == path


def test_a_socket_run_is_noted_and_never_fitted_with_an_rdma_one(tmp_path):
    """The same two L40S nodes over TCP sockets (NCCL_IB_DISABLE=1) and over RoCE became one topology model with
    no note: a 2x1 socket sweep and a 2x2 RoCE sweep read as two layouts of one network."""
    from pybench.errors import UsageError
    from pybench.model.build import fit_models
    socket, roce = (PUBLIC_LOGS / f"l40s_rh_2node_{x}_allreduce_{y}.txt" for x, y in (("g1", "socket"),
                                                                                    ("g2", "roce")))
    (s,), (r,) = load_measurements(socket), load_measurements(roce)
    assert any("TCP sockets" in n for n in s.notes) and not any("TCP sockets" in n for n in r.notes)
    with pytest.raises(UsageError, match=r"l40s_rh_2node_g1_allreduce_socket.txt ran by NCCL's TCP sockets, "
                                         r"l40s_rh_2node_g2_allreduce_roce.txt by .*fit each into a file of its own"):
        fit_models([s, r])
    assert fit_models([s])[0].topology is not None  # alone, each fits
    # a second job's launcher line without the variable: its -x was the first job's alone
    twice = tmp_path / "two_jobs.txt"
    text = socket.read_text()
    twice.write_text(text + "\n" + text.replace("-x NCCL_IB_DISABLE=1 ", ""))
    assert [any("TCP sockets" in n for n in ms.notes) for ms in load_measurements(twice)] == [True, False]


def test_a_log_whose_ranks_ran_on_two_gpu_models_says_so():
    """An H100 PCIe and an A100 PCIe node in one 2-rank run: the pair ran at the slower's pace, no node of either."""
    (ms,) = load_measurements(PUBLIC_LOGS / "violet_h100pcie_a100pcie_2node_roce_selectedrows.txt")
    assert any(n.startswith("its Rank lines name 2 GPU models (NVIDIA A100-PCIE-40GB, NVIDIA H100 PCIe)")
               for n in ms.notes)


def test_what_a_job_printed_or_unset_does_not_carry_to_the_next_job(tmp_path):
    """An A/B log: the socket run with NCCL_DEBUG=INFO (NCCL's "Using network Socket"), then the RoCE run as a second
    mpirun: the RoCE table was labelled sockets and both joined in one topology model. NCCL's own output is its job's,
    as a launcher's -x is; `unset NCCL_IB_DISABLE` ends a shell's setting."""
    from pybench.errors import UsageError
    from pybench.model.build import fit_models
    socket, roce = (PUBLIC_LOGS / f"l40s_rh_2node_{x}_allreduce_{y}.txt" for x, y in (("g1", "socket"),
                                                                                    ("g2", "roce")))
    lines = socket.read_text().splitlines()
    said = "nvidiatools-29-workload:14744:14790 [0] NCCL INFO Using network Socket"
    ab = tmp_path / "ab.txt"
    ab.write_text("\n".join([lines[0].replace("-x NCCL_IB_DISABLE=1 ", ""), said, *lines[1:]]) + "\n"
                  + roce.read_text().replace("-x NCCL_IB_DISABLE=0 ", ""))
    unset = tmp_path / "unset.txt"
    unset.write_text("export NCCL_IB_DISABLE=1\n" + socket.read_text().replace("-x NCCL_IB_DISABLE=1 ", "")
                     + "unset NCCL_IB_DISABLE\n" + roce.read_text().replace("-x NCCL_IB_DISABLE=0 ", ""))
    for log in (ab, unset):
        first, second = load_measurements(log)
        assert any("TCP sockets" in n for n in first.notes) and not any("TCP sockets" in n for n in second.notes)
        with pytest.raises(UsageError, match=r"one table of .* ran by NCCL's TCP sockets, another by"):
            fit_models([first, second])


@pytest.mark.parametrize("line, read", [
    ("$ unset OMPI_MCA_btl NCCL_IB_DISABLE", {"NCCL_IB_DISABLE": None}),   # after a prompt, among other names
    ("export NCCL_IB_DISABLE=", {"NCCL_IB_DISABLE": None}),                # empty: NCCL takes it as unset
    ("env -u NCCL_NET -u NCCL_IB_DISABLE ./all_reduce_perf", {"NCCL_NET": None, "NCCL_IB_DISABLE": None}),
    ("echo unset NCCL_IB_DISABLE", {}),                                    # words, not a command
    ("unset -f NCCL_IB_DISABLE", {}),                                      # a function's name
    ("export NCCL_NET=Socket NCCL_IB_DISABLE=1", {"NCCL_NET": "socket", "NCCL_IB_DISABLE": "1"}),
])
def test_what_a_line_sets_or_unsets(line, read):
    from pybench.model.logs.nccl_env import nccl_settings
    assert nccl_settings(line) == read


def test_a_launchers_settings_hold_through_its_binarys_echo_and_a_shells_through_ncclS(tmp_path):
    """`set -x` echoes the binary after the mpirun line: read as a new job, it dropped the launcher's
    -x NCCL_IB_DISABLE=1 and the socket run was joined with a RoCE one. NCCL echoing a shell's export made that
    export its job's alone, and the next job lost it."""
    socket = PUBLIC_LOGS / "l40s_rh_2node_g1_allreduce_socket.txt"
    text = socket.read_text()
    lines = text.splitlines(keepends=True)
    traced = tmp_path / "traced.txt"
    traced.write_text(lines[0] + "+ ./build/all_reduce_perf -b 8 -e 16G -f2 -g 1\n" + "".join(lines[1:]))
    (ms,) = load_measurements(traced)
    assert any("TCP sockets" in n for n in ms.notes)
    bare = text.replace("-x NCCL_IB_DISABLE=1 ", "")
    echoed = tmp_path / "echoed.txt"
    echoed.write_text("export NCCL_IB_DISABLE=1\n" + bare.splitlines(keepends=True)[0]
                      + "h:1:1 [0] NCCL INFO NCCL_IB_DISABLE set by environment to 1.\n"
                      + "".join(bare.splitlines(keepends=True)[1:]) + bare)
    assert [any("TCP sockets" in n for n in m.notes) for m in load_measurements(echoed)] == [True, True]



@pytest.mark.parametrize("line, setting", [
    ("ip-172-31-41-105:3801:3862 [0] NCCL INFO NCCL_TREE_THRESHOLD set by environment to 0.", "ring"),
    ("host:1:2 [0] NCCL INFO NCCL_TREE_THRESHOLD set by environment to 4194304.", ""),  # the tree below it
    ("           -x NCCL_TREE_THRESHOLD=0 \\", None),  # NCCL from 2.5 on ignores it: only its echo counts
])
def test_nccl_2_4s_tree_threshold_echoed_as_0_forces_the_ring(line, setting):
    assert nccl_settings(line).get("NCCL_TREE_THRESHOLD") == setting


def test_a_p3dn_all_reduce_run_with_the_tree_threshold_at_0_crossed_by_the_ring():
    """AWS's p3dn EFA tutorial (NCCL 2.4.8, -x NCCL_TREE_THRESHOLD=0): it read as 'tree or ring (one node count
    cannot tell)', though that NCCL's echo says it kept the all-reduce on its ring."""
    sets = load_measurements(PUBLIC_LOGS / "v100_p3dn_efa_2node16_allreduce.log")
    assert [ms.nccl_algo for ms in sets] == ["ring"]
    assert any("NCCL_TREE_THRESHOLD=0 in the log: NCCL ran its ring at every size" in n for n in sets[0].notes)
    (model,), _ = fit_topology_models(sets)
    assert {r.algorithm for r in model.inter.all_regimes()} == {"ring"}
