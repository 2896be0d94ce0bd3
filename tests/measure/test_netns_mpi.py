"""Native MPI ranks on namespace hosts: pybench sees separate hosts and measures the shaped link.

Skips cleanly without root, `ip netns` or `unshare` (checked by trying). Issue 13's testbed:
Open MPI launches through an `ip netns exec` agent instead of ssh.
"""

from __future__ import annotations

import contextlib
import re
import shutil
import sys

import pytest

from pybench.errors import UsageError
from pybench.measure import netns
from pybench.measure.envinfo import cpu_model
from pybench.measure.netns_mpi import NetnsMpi, oversubscription


@pytest.fixture(scope="module")
def lab():
    ok, why = netns.netns_available()
    if not ok:
        pytest.skip(why)
    if shutil.which("unshare") is None:
        pytest.skip("unshare (util-linux) not found")
    with netns.NetnsLab(2, rate="1gbit") as made:
        yield made


def _pybench(mpi: NetnsMpi, hosts: int, per_host: int, *args: str) -> str:
    crowded = oversubscription(hosts, per_host)  # 4 ranks on a 2-core machine: a warning, and still exact
    with pytest.warns(RuntimeWarning, match="share") if crowded else contextlib.nullcontext():
        proc = mpi.run(hosts, per_host, [sys.executable, "-m", "pybench", *args], timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return proc.stdout


def test_ranks_on_two_namespace_hosts_are_inter_node_and_exact(lab):
    with NetnsMpi(lab) as mpi:
        out = _pybench(mpi, 2, 2, "allreduce", "--backend", "mpi", "--sizes", "64K", "--iters", "3")
    assert re.search(r"world 4 ranks, 2 host\(s\) \[\S+-h0: 2, \S+-h1: 2\], link inter-node", out), out
    row = next(line for line in out.splitlines() if line.strip().startswith("65536"))
    assert row.split()[8] == "0"  # #wrong
    # each rank names its own device (readers of nccl-tests count ranks by it), on the other host too
    rank_lines = [line for line in out.splitlines() if line.startswith("#  Rank ")]
    assert len(rank_lines) == 4 and all(line.endswith(f"device cpu [host memory] {cpu_model()}")
                                        for line in rank_lines), rank_lines


def test_point_to_point_bandwidth_between_hosts_is_the_link_rate(lab):
    """Measured here: 119.2 MB/s on a 125 MB/s (1 Gbit/s) link, 0.954 of the rate."""
    with NetnsMpi(lab) as mpi:
        out = _pybench(mpi, 2, 1, "p2p", "--backend", "mpi", "--test", "bw", "--sizes", "4M", "--iters", "5")
    mbps = float(next(line for line in out.splitlines() if line.startswith("4194304")).split()[-1])
    # Far from the rate only when the link is not shaped or the ranks talk on loopback; a busy
    # machine slows this by a few percent, not by half.
    assert 60 < mbps <= 126, out


def test_layout_errors_are_one_line(lab):
    with NetnsMpi(lab) as mpi:
        with pytest.raises(UsageError, match="hosts must be 1..2 from host 0"):
            mpi.command(3, 1, ["true"])
        with pytest.raises(UsageError, match="ranks_per_host"):
            mpi.command(2, 0, ["true"])
    with pytest.raises(UsageError, match="not open"):
        NetnsMpi(lab).command(2, 1, ["true"])


def test_more_ranks_than_cores_is_named():
    """The namespace hosts share one machine's cores: 8 ranks on 2 cores is said, 2 on 2 is not."""
    assert oversubscription(4, 1, cores=4) is None
    why = oversubscription(4, 2, cores=2)
    assert why is not None and "8 ranks (4 hosts x 2) share 2 core(s)" in why


def test_the_tcp_transport_sends_in_fragments_and_a_caller_can_say_otherwise(lab):
    """Open MPI's default (one fragment per message, up to 2 GiB) makes a pairwise exchange run its
    two directions in turn; the testbed's links carry both at once (netns_mpi.TCP_FULL_DUPLEX)."""
    from pybench.measure.netns_mpi import TCP_FULL_DUPLEX

    def mca(cmd: list[str]) -> dict[str, str]:
        inner = cmd[-1].split()
        return {inner[k + 1]: inner[k + 2] for k, a in enumerate(inner) if a == "--mca"}

    with NetnsMpi(lab) as mpi:
        assert mca(mpi.command(2, 1, ["true"]))["btl_tcp_rdma_pipeline_frag_size"] == "131072"
        assert TCP_FULL_DUPLEX == {"btl_tcp_rdma_pipeline_frag_size": "131072"}
        mine = mca(mpi.command(2, 1, ["true"], mca={"btl_tcp_rdma_pipeline_frag_size": "2147482624"}))
        assert mine["btl_tcp_rdma_pipeline_frag_size"] == "2147482624"
