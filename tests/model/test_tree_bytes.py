"""An all-reduce across nodes by NCCL's tree or its ring: the bytes through a node's NICs, and what decides.

NCCL's double binary tree sends S out of each of two nodes, towards 2S on many; a ring sends 2(p-1)/p S
whatever the node count. A fit at one node count cannot tell them apart (same time there); several node
counts, or a description of the NICs (no ring carries more than its NICs), can.
"""

from __future__ import annotations

import dataclasses
import math

import numpy as np
import pytest
from conftest import PUBLIC_LOGS, SHARED_DATA

from pybench.model.calibration import load_calibration
from pybench.model.crossing import as_double_tree, unknown_tree_bytes
from pybench.model.described_crossing import described_crossing
from pybench.model.system import SystemDescription, load_system
from pybench.model.topology import Observation
from pybench.model.topology_fit import fit_topology
from pybench.model.topology_schedules import crossing_algorithms, crossing_bytes
from pybench.model.validation_cases import system_cases

SIZES = [float(2 ** k) for k in range(20, 31)]


def _sweep(world: int, nodes: int, data: float, nic_Bps: float, latency: float = 30e-6) -> list[Observation]:
    """A multi-node all-reduce whose NICs carry ``data`` x S at ``nic_Bps`` per node."""
    return [Observation(s, world, nodes, latency + data * s / nic_Bps) for s in SIZES]


def test_the_tree_sends_s_on_two_nodes_and_towards_2s_on_many():
    assert crossing_bytes("allreduce", "double-tree", 16, 2) == 1.0
    assert crossing_bytes("allreduce", "double-tree", 64, 8) == pytest.approx(1.75)
    assert crossing_bytes("allreduce", "tree", 16, 2) == pytest.approx(2 * 15 / 16)  # the ring's bytes
    assert crossing_bytes("allgather", "ring", 16, 2) == pytest.approx(15 / 16)
    assert crossing_algorithms("ring", "allreduce") == ("tree", "double-tree")
    assert crossing_algorithms("ring", "allgather") == ("ring",)
    with pytest.raises(Exception, match="no tree"):
        crossing_bytes("allgather", "double-tree", 16, 2)


@pytest.mark.parametrize("algorithm", ["tree", "double-tree"])
def test_two_node_counts_tell_the_tree_from_the_ring(algorithm):
    """Data made by one reading at 2 and 8 nodes: the fit takes that reading, and 32 nodes follow it."""
    truth = lambda w, n: crossing_bytes("allreduce", algorithm, w, n)
    obs = _sweep(16, 2, truth(16, 2), 100e9) + _sweep(64, 8, truth(64, 8), 100e9)
    model = fit_topology("allreduce", obs)
    assert model.inter is not None and model.inter.algorithm == algorithm
    for s in SIZES[-3:]:
        p = model.predict(int(s), 256, 32)
        assert p.time_s == pytest.approx(30e-6 + truth(256, 32) * s / 100e9, rel=0.02)
        assert p.low_s < p.time_s < p.high_s
        assert "may have crossed by NCCL's tree" not in p.links


def test_one_node_count_cannot_tell_them_apart_and_the_interval_spans_both():
    obs = _sweep(16, 2, 1.0, 100e9)  # a tree on two nodes: S through each node's NICs
    model = fit_topology("allreduce", obs)
    assert {r.algorithm for r in model.inter.all_regimes()} == {"tree"}  # a tie goes to the first
    assert unknown_tree_bytes(model, 16, 2) is None  # at the fitted layout both readings are one time
    size = 1 << 30
    ring = model._time(size, 128, 16)[0]
    tree = dataclasses.replace(model, inter=unknown_tree_bytes(model, 128, 16))._time(size, 128, 16)[0]
    grows = crossing_bytes("allreduce", "double-tree", 128, 16) / crossing_bytes("allreduce", "double-tree", 16, 2)
    stays = crossing_bytes("allreduce", "tree", 128, 16) / crossing_bytes("allreduce", "tree", 16, 2)
    assert tree / ring == pytest.approx(grows / stays, rel=0.05)
    p = model.predict(size, 128, 16)
    assert p.time_s == pytest.approx(math.sqrt(ring * tree), rel=0.02)
    assert p.low_s < ring < tree < p.high_s
    assert "may have crossed by NCCL's tree" in p.links and "--system" in p.links
    assert p.spread is not None and p.spread.span >= abs(math.log(tree / ring)) / 2 - 1e-9


def test_a_description_of_the_nics_decides_where_no_ring_could_carry_it():
    """Above the NICs' rate in the ring's bytes: only the tree carries it; below, either could: the
    prediction stays between the two."""
    system = load_system("dgx-h100")  # 8 x 400 Gb/s: 400 GB/s per node
    nics = system.nic_Bps_per_node
    fast = fit_topology("allreduce", _sweep(16, 2, 1.0, 0.7 * nics)).with_system(system)
    assert {r.algorithm for r in fast.inter.all_regimes()} == {"double-tree"}
    assert any("crossed by a tree" in n for n in fast.notes)
    slow = fit_topology("allreduce", _sweep(16, 2, 2 * 15 / 16, 0.7 * nics)).with_system(system)
    assert {r.algorithm for r in slow.inter.all_regimes()} == {"tree"}
    assert not any("crossed by NCCL's tree" in n for n in slow.notes)
    size = 1 << 30
    assert "may have crossed" not in fast.predict(size, 128, 16).links
    assert "may have crossed" in slow.predict(size, 128, 16).links
    assert fast.predict(size, 128, 16).time_s > 1.6 * fast.predict(size, 16, 2).time_s  # bytes 1 -> 1.875


def test_the_conversion_keeps_the_fitted_time():
    model = fit_topology("allreduce", _sweep(16, 2, 1.0, 100e9))
    tree = as_double_tree(model.inter, 16, 2)
    converted = dataclasses.replace(model, inter=tree)
    for s in SIZES:
        assert converted._time(s, 16, 2)[0] == pytest.approx(model._time(s, 16, 2)[0], rel=1e-12)


def test_a_fit_across_nodes_has_no_pipeline_fill():
    """Over a few node counts a fill is free to bend the bandwidth; across nodes the fit holds it at zero."""
    obs = _sweep(32, 8, 31 / 32, 50e9) + _sweep(1024, 256, 1023 / 1024, 50e9)
    model = fit_topology("allgather", obs)
    assert all(r.extra_steps == 0.0 for r in model.inter.all_regimes())


@pytest.mark.parametrize("system, shared", [("aws-p4d", True), ("alcf-polaris", True), ("aws-p5", False),
                                            ("dgx-h100", False)])
def test_a_described_all_reduce_on_gpus_that_share_nics_lies_between_the_tree_and_the_ring(system, shared):
    """Nodes whose switches reduce, with a NIC per GPU (or more), ran NCCL's tree in the logs (more than the ring's
    bytes went through their NICs); where GPUs share NICs the logs ran either (Polaris's the ring, AWS p3dn's the
    tree by default): the prediction is the geometric mean of the tree's bytes (at the all-reduce's efficiency) and
    the ring's (at the other collectives' rings'), its interval holds both and reaches up to the ring's steps."""
    described = load_system(system)
    per_node = min(described.gpus_per_node, 8)
    node = fit_topology("allreduce", [Observation(s, per_node, 1, 20e-6 + 2 * (per_node - 1) / per_node * s / 200e9)
                                      for s in SIZES])
    model = node.with_system(described)
    assert (model.inter is not None and model.intra is not None and model.system is not None)
    calibration = load_calibration()
    tree, ring, steps = (dataclasses.replace(model, system=None, inter=described_crossing(
        "allreduce", "ring", model.intra, model.system, calibration, reading=reading))
        for reading in ("tree", "ring-bytes", "steps"))
    assert tree.inter.nic_efficiency == calibration.efficiency("allreduce")
    assert ring.inter.nic_efficiency == (calibration.nic_efficiency["ring"] if shared
                                         else calibration.efficiency("allreduce"))
    for nodes in (2, 16):
        world = nodes * per_node
        p = model.predict(1 << 30, world, nodes)
        by_tree, by_ring = tree.predict(1 << 30, world, nodes).time_s, ring.predict(1 << 30, world, nodes).time_s
        assert ("ranks share the described NICs" in p.links) == shared
        if shared:
            assert p.time_s == pytest.approx(math.sqrt(by_tree * by_ring), rel=1e-9)
            assert p.low_s < min(by_tree, by_ring) and p.high_s > max(by_tree, by_ring)
            if nodes == 2:  # S through each node's NICs for the tree, 2(p-1)/p S for the ring
                assert by_ring > 1.2 * by_tree
            # NCCL's ring waits on the network twice per node it passes (Polaris's 2-node all-reduce ran the ring),
            # where the tree waits at its levels: in the middle sizes slower than either; the interval reaches it, the
            # answer does not move. Not every one of its 2(p-1) steps (until session 37: 268 ms at the upper end
            # of ABCI's 16 x 8 all-reduce of 1 MiB, which took 200 us)
            mid = model.predict(1 << 20, world, nodes)
            by_steps = steps.predict(1 << 20, world, nodes).time_s
            assert by_steps > 1.5 * mid.time_s and mid.high_s >= by_steps * (1 - 1e-9)
            assert steps.inter.node_step_s == pytest.approx(2 * calibration.bandwidth_step_latency_s)  # a measured node
            assert mid.time_s == pytest.approx(math.sqrt(tree.predict(1 << 20, world, nodes).time_s
                                                         * ring.predict(1 << 20, world, nodes).time_s), rel=1e-9)
        else:
            assert p.time_s == pytest.approx(by_tree, rel=1e-9)


def test_a_ring_that_fills_its_nics_within_the_fits_scatter_stays_undecided():
    """A ring at its NICs' rate is fitted at that rate give or take its scatter: a fitted rate 1% above
    the NICs with a few % of scatter does not rule the ring out; the same rate fitted clean does."""
    system = load_system("dgx-h100")
    nics = system.nic_Bps_per_node
    clean = _sweep(16, 2, 2 * 15 / 16, 1.01 * nics)
    scatter = [dataclasses.replace(o, time_s=o.time_s * (1.03 if k % 2 else 0.97)) for k, o in enumerate(clean)]
    assert any("crossed by a tree" in n for n in fit_topology("allreduce", clean).with_system(system).notes)
    noisy = fit_topology("allreduce", scatter)
    assert noisy.inter.busbw_Bps > nics  # the fitted rate is above the NICs' ...
    described = noisy.with_system(system)
    assert not any("crossed by a tree" in n for n in described.notes)  # ... but not beyond the scatter
    assert "may have crossed" in described.predict(1 << 30, 64, 8).links


def test_a_tree_fitted_at_one_node_count_takes_its_latency_neither_per_call_nor_per_step():
    """The latency of a tree across two nodes holds the chain inside each node and the launch (per call)
    and its two levels between nodes (per step): neither reading is favoured at more nodes. A ring's
    every step waits on the network: it takes the per-step reading."""
    size, world, nodes = 1 << 20, 64, 8
    tree = fit_topology("allreduce", _sweep(16, 2, 1.0, 100e9, latency=100e-6))
    per_call, per_step = tree._latency_readings(size, world, nodes, 1)
    assert per_step > 2 * per_call
    p = tree.predict(size, world, nodes)
    assert per_call < p.time_s < per_step and p.low_s < per_call and per_step < p.high_s
    ring = fit_topology("allgather", [Observation(s, 16, 2, 100e-6 + 15 / 16 * s / 100e9) for s in SIZES])
    readings = ring._latency_readings(size, world, nodes, 1)
    assert readings is not None and ring.predict(size, world, nodes).time_s == pytest.approx(readings[1], rel=1e-9)


def test_more_ranks_per_node_reach_a_longer_chain_inside_each_node():
    """NCCL's tree pays a step per rank of the chain inside a node: a fit at 2 ranks per node cannot say how much
    of its latency that chain was, so 8 ranks per node reach (r - 1 + levels) = 4x it, in the interval only."""
    from pybench.model.crossing import chain_latency
    two_per_node = fit_topology("allreduce", _sweep(4, 2, 1.0, 100e9, latency=100e-6))
    size = 1 << 20
    longer = chain_latency(two_per_node, 16, 2)
    assert longer is not None and chain_latency(two_per_node, 4, 2) is None  # the fitted count: no other reading
    reach = dataclasses.replace(two_per_node, inter=longer)._time(size, 16, 2)[0]
    p = two_per_node.predict(size, 16, 2)
    assert reach > 2 * p.time_s and p.high_s >= reach * 0.999  # reached by the interval, not taken as the answer
    ring = fit_topology("allgather", [Observation(s, 4, 2, 100e-6 + 3 / 4 * s / 100e9) for s in SIZES])
    assert chain_latency(ring, 16, 2) is None  # a ring's steps are counted by its own frame


def _described(system) -> tuple:
    """An 8-GPU node at 230 GB/s of bus bandwidth under ``system``, and its crossing's tree and ring-bytes readings."""
    node = fit_topology("allreduce", [Observation(s, 8, 1, 20e-6 + 1.75 * s / 230e9) for s in SIZES])
    model = node.with_system(system)
    assert model.intra is not None
    tree, ring = (dataclasses.replace(model, system=None, inter=described_crossing(
        "allreduce", "ring", model.intra, system, load_calibration(), reading=reading)) for reading in ("tree",
                                                                                                      "ring-bytes"))
    return model, tree, ring


def _busbw(model, size: float = 1 << 30) -> float:
    return 2 * 15 / 16 * size / model.predict(int(size), 16, 2).time_s


@pytest.mark.parametrize("fabric, reduces, crosses", [("nvswitch", True, "tree"), ("nvswitch", False, "between"),
                                                      ("infinity-fabric-all-to-all", False, "ring")])
def test_a_described_all_reduce_crosses_as_the_logs_of_its_kind_of_node_did(fabric, reduces, crosses):
    """NICs of their own under every GPU, 8 x 100 Gb/s (slower than the node's links): switches that reduce
    (NVIDIA's NVLS) crossed by NCCL's tree in every such log, above the NICs' rate in bus bandwidth; AMD's RCCL by
    its ring, below it; NVIDIA's switches that do not reduce by either (OCI's A100 nodes the tree, ALCF Sophia's the
    ring): between the two, with the span in the interval and the reason in the row."""
    system = SystemDescription(name="n", source="test", gpus_per_node=8, intra_fabric=fabric, intra_GBps_per_gpu=300,
                               nics_per_node=8, nic_Gbps=100, in_switch_reduction=reduces)
    model, tree, ring = _described(system)
    nics = 8 * 12.5e9 * load_calibration().efficiency("allreduce")
    p = model.predict(1 << 30, 16, 2)
    by_tree, by_ring = tree.predict(1 << 30, 16, 2).time_s, ring.predict(1 << 30, 16, 2).time_s
    assert _busbw(ring) == pytest.approx(nics, rel=0.02) and _busbw(tree) == pytest.approx(nics * 1.875, rel=0.02)
    expected = {"tree": by_tree, "ring": by_ring, "between": math.sqrt(by_tree * by_ring)}[crosses]
    assert p.time_s == pytest.approx(expected, rel=1e-9)
    assert ("reduces (NVLink SHARP): the all-reduce may cross by NCCL's tree or its ring" in p.links) == (
        crosses == "between")
    if crosses == "between":
        assert p.low_s < by_tree < by_ring < p.high_s


def test_the_nic_efficiency_is_read_where_the_nics_bound_the_largest_sizes():
    """A log whose node's own links bound its largest sizes (a 2-node bus bandwidth at about the node's one-node
    one) says only that its NICs carry more: it chooses no efficiency. Those the NICs bound agree closely, in the
    tree's bytes (GCP A3 Mega, GKE's B200) and the ring's (AMD's MI355X)."""
    cases = {c.dataset: c for c in system_cases(SHARED_DATA, PUBLIC_LOGS)}
    for bound_by_the_node in ("h100-p5-2x8", "h100-ib-nx8", "a100-oci-2x8"):
        assert math.isnan(cases[bound_by_the_node].efficiency), bound_by_the_node
    efficiencies = [cases[d].efficiency for d in ("h100-a3mega-2x8", "b200-a4-gke-2x8", "mi355x-aac14-2x8")]
    assert 0.85 < min(efficiencies) and max(efficiencies) < 0.97 and max(efficiencies) / min(efficiencies) < 1.05
    assert load_calibration().efficiency("allreduce") == pytest.approx(math.exp(np.mean(np.log(efficiencies))))


def test_amd_nodes_whose_gpus_share_nics_lie_between_rccls_ring_and_the_tree():
    """RCCL's ring is the reading of an AMD node; where its GPUs share NICs the tree is the other one (NCCL ran the
    tree on some such NVIDIA nodes), neither favoured: the row that says so holds both."""
    system = SystemDescription(name="amd-4nic", source="test", gpus_per_node=8, intra_fabric="infinity-fabric-all-to-all",
                               intra_GBps_per_gpu=300, nics_per_node=4, nic_Gbps=200)
    model, tree, ring = _described(system)
    p = model.predict(1 << 30, 16, 2)
    by_tree, by_ring = tree.predict(1 << 30, 16, 2).time_s, ring.predict(1 << 30, 16, 2).time_s
    assert "ranks share the described NICs" in p.links
    assert p.time_s == pytest.approx(math.sqrt(by_tree * by_ring), rel=1e-9) and p.low_s < by_tree < by_ring < p.high_s
