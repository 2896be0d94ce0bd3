"""Open MPI 5's all-reduce choice and its NIC bytes: the rule table, checked exactly.

What Open MPI runs was checked on the netns testbed (forced algorithms and coll_base_verbose,
see pybench/model/mpi_openmpi.py); these tests pin the table and the byte counts, no timings.
"""

from __future__ import annotations

import pytest

from pybench.errors import UsageError
from pybench.model.mpi_openmpi import (
    HAN_SEGMENT_BYTES,
    han_nic_bytes,
    libnbc_ibcast_algorithm,
    libnbc_ireduce_algorithm,
    openmpi_allreduce_plan,
    tuned_allreduce_algorithm,
    tuned_nic_bytes,
)
from pybench.model.topology import Observation, TopologyModel
from pybench.model.topology_fit import fit_topology

MiB = 1 << 20


@pytest.mark.parametrize(("ranks", "size", "algorithm"), [
    (2, 4, "ring"), (2, 1024, "recursive_doubling"), (2, 4096, "ring"), (2, 8192, "recursive_doubling"),
    (2, 16384, "ring"), (2, 65536, "segmented_ring"), (2, 262143, "segmented_ring"), (2, 262144, "rabenseifner"),
    (3, MiB, "rabenseifner"), (4, 8, "ring"), (4, 8191, "recursive_doubling"), (4, 8192, "rabenseifner"),
    (4, 4 * MiB, "rabenseifner"), (8, 4096, "recursive_doubling"), (8, 16 * MiB, "rabenseifner"),
    (16, 32, "segmented_ring"), (16, 1024, "recursive_doubling"), (100, 200000, "recursive_doubling"),
    (200, 100000, "nonoverlapping"), (5000, 20000, "recursive_doubling"), (5000, MiB, "rabenseifner"),
])
def test_tuned_fixed_decision_for_commutative_allreduce(ranks, size, algorithm):
    assert tuned_allreduce_algorithm(ranks, size) == algorithm


def test_libnbc_choices_between_han_leaders():
    # a 64 KiB float segment between 2 leaders: a chain (no reduce-scatter below 3 ranks)
    assert libnbc_ireduce_algorithm(2, HAN_SEGMENT_BYTES, HAN_SEGMENT_BYTES / 4) == "chain"
    assert libnbc_ireduce_algorithm(2, 4096, 1024) == "binomial"
    assert libnbc_ireduce_algorithm(4, HAN_SEGMENT_BYTES, HAN_SEGMENT_BYTES / 4) == "redscat_gather"
    assert libnbc_ireduce_algorithm(8, 8, 2) == "binomial"  # fewer elements than the power of two below 8
    assert [libnbc_ibcast_algorithm(n) for n in (2, 4, 5, 8)] == ["linear", "linear", "binomial", "binomial"]


def test_bytes_through_the_busiest_nic():
    # one rank per host: flat coll/tuned
    assert tuned_nic_bytes("ring", 4) == (1.5, 6.0)
    assert tuned_nic_bytes("rabenseifner", 4) == (1.5, 4.0)
    assert tuned_nic_bytes("recursive_doubling", 4) == (2.0, 2.0)
    assert tuned_nic_bytes("rabenseifner", 3)[0] == pytest.approx(2.0)  # one rank folded in: +S
    assert tuned_nic_bytes("basic_linear", 5)[0] == 4.0
    with pytest.raises(UsageError, match="no cost"):
        tuned_nic_bytes("bruck", 4)
    # HAN: 2 leaders move one buffer each way; 4 leaders: a linear broadcast sends 3 buffers from
    # the root, after the reduce-scatter's 3/4 buffer out and 3/2 in (they share its connections)
    assert han_nic_bytes(2, 16 * MiB).nic_bytes == 1.0
    four = han_nic_bytes(4, 16 * MiB)
    assert four.name == "han:redscat_gather+linear" and four.nic_bytes == pytest.approx(3.0 + 1.5)
    # where the reduce and the broadcast overlap at the root (not over TCP): 3 + 3/4 buffers out
    assert han_nic_bytes(4, 16 * MiB, overlap=True).nic_bytes == pytest.approx(3.75)
    assert han_nic_bytes(2, 16 * MiB, overlap=True).nic_bytes == 1.0


def test_the_plan_follows_the_layout():
    assert openmpi_allreduce_plan(4 * MiB, 4, 2).name == "han:chain+linear"
    assert openmpi_allreduce_plan(4 * MiB, 8, 4).name == "han:redscat_gather+linear"
    assert openmpi_allreduce_plan(4 * MiB, 4, 4).name == "tuned:rabenseifner"  # HAN steps aside: 1 rank per node
    assert openmpi_allreduce_plan(4096, 4, 4).name == "tuned:recursive_doubling"
    assert openmpi_allreduce_plan(4 * MiB, 2, 2).nic_bytes == 1.0
    with pytest.raises(UsageError, match="nodes >= 2 dividing world"):
        openmpi_allreduce_plan(MiB, 6, 4)
    with pytest.raises(UsageError, match="nodes >= 2"):
        openmpi_allreduce_plan(MiB, 4, 1)


def test_a_fit_on_2x2_prices_each_layout_by_what_open_mpi_runs():
    """A 1 Gbit/s NIC seen through 2 hosts x 2 ranks (HAN: one buffer per NIC) predicts every layout."""
    obs = [Observation(s, 4, 2, s / 125e6) for s in (2.0 ** k for k in range(20, 25))]
    model = fit_topology("allreduce", obs, algorithm="ring", schedule="openmpi")
    assert model.inter is not None and model.inter.busbw_Bps == pytest.approx(125e6, rel=1e-9)
    size = 16 * MiB
    for world, nodes, buffers, name in ((4, 4, 1.5, "tuned:rabenseifner"), (8, 4, 4.5, "han:redscat_gather+linear"),
                                        (2, 2, 1.0, "tuned:rabenseifner")):
        pred = model.predict(size, world, nodes)
        assert pred.time_s == pytest.approx(buffers * size / 125e6, rel=1e-9), (world, nodes)
        assert pred.schedule == f"openmpi {name}"
    # two 2-rank groups through the same NICs: each gets half
    assert model.predict(size, 2, 2, sharing=2).time_s == pytest.approx(2 * size / 125e6, rel=1e-9)
    again = TopologyModel.from_dict(model.to_dict())
    assert again.schedule == "openmpi" and again.predict(size, 8, 4).time_s == pytest.approx(4.5 * size / 125e6)
    with pytest.raises(UsageError, match="allreduce only"):
        fit_topology("allgather", [Observation(s, 4, 2, s / 125e6) for s in (1e6, 2e6, 4e6)], schedule="openmpi")
