"""What Open MPI 5 runs for an all-reduce, and the bytes that puts through the busiest NIC.

The topology model prices an MPI all-reduce by the algorithm the library really picks, as it
prices NCCL by NCCL's: the same frame (per-call latency, per-hop latency, bytes over the NIC
bandwidth) with the algorithm chosen by (ranks, nodes, message size). The rules below restate
Open MPI 5.0's default decisions (read in v5.0.10; 5.0.11 runs the same, checked on the netns
testbed with forced algorithms and ``coll_base_verbose``/``coll_han_verbose``):

* ``coll/han`` (priority 35) takes a communicator that spans nodes. Its default all-reduce
  (``coll_han_allreduce.c``, "intra") cuts the buffer into 64 KiB segments and pipelines four
  tasks per segment: reduce inside the node, ``ireduce`` between node leaders, ``ibcast``
  between leaders, broadcast inside the node. The leader-level ``ireduce``/``ibcast`` come
  from ``coll/libnbc`` (``nbc_ireduce.c``, ``nbc_ibcast.c``).
* HAN turns itself off when every node holds one rank (``coll_han_subcomms.c``: "HAN is not
  yet optimized for a single process per node case"), and a one-node communicator never takes
  it: then ``coll/tuned``'s fixed decision (``coll_tuned_decision_fixed.c``) picks the
  algorithm from the communicator size and the message size (:data:`TUNED_ALLREDUCE_RULES`).

Only commutative reductions (sum, max, min: what pybench measures) are covered. Costs are the
bytes through the busiest NIC in one direction, in units of the message size S: concurrent
transfers share a NIC, and the pipelined segments of HAN overlap its reduce and broadcast, so
the busiest direction bounds the time.

Not priced: Open MPI's TCP transport with its default fragment size (one RDMA-emulation
fragment per message, up to 2 GiB) stalls a pairwise exchange of large messages (Rabenseifner,
recursive doubling, a 2-rank ring): each rendezvous needs a control message from the peer, and
that message waits behind the peer's own bulk data in the one TCP stream between them, so the
two directions run one after the other. With 128 KiB fragments
(``btl_tcp_rdma_pipeline_frag_size``, the transport's own send unit) they overlap, and the netns
testbed runs so (:data:`pybench.measure.netns_mpi.TCP_FULL_DUPLEX`), as RDMA fabrics pipeline
(measured side by side in docs/netns.md). The model prices the bytes: over a default TCP
transport it is fast for these algorithms.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from pybench.errors import UsageError

# coll/tuned's algorithm numbers (coll_tuned_allreduce_algorithm) and the names used here.
TUNED_ALGORITHMS = {1: "basic_linear", 2: "nonoverlapping", 3: "recursive_doubling", 4: "ring",
                    5: "segmented_ring", 6: "rabenseifner"}

# Open MPI 5.0 coll/tuned fixed all-reduce decision for commutative operations
# (ompi/mca/coll/tuned/coll_tuned_decision_fixed.c): one row per communicator-size band
# (ranks below the bound), each a list of (message bytes below, algorithm number); the last
# entry of a row has no bound (None). Averaged by the Open MPI developers over their clusters.
TUNED_ALLREDUCE_RULES: tuple[tuple[int | None, tuple[tuple[int | None, int], ...]], ...] = (
    (4, ((8, 4), (4096, 3), (8192, 4), (16384, 3), (65536, 4), (262144, 5), (None, 6))),
    (8, ((16, 4), (8192, 3), (None, 6))),
    (16, ((8192, 3), (None, 6))),
    (32, ((64, 5), (4096, 3), (None, 6))),
    (64, ((128, 5), (None, 6))),
    (128, ((262144, 3), (None, 6))),
    (256, ((131072, 2), (262144, 3), (None, 6))),
    (512, ((4096, 2), (None, 6))),
    (2048, ((2048, 2), (16384, 3), (None, 6))),
    (4096, ((2048, 2), (4096, 5), (16384, 3), (None, 6))),
    (None, ((2048, 2), (16384, 5), (32768, 3), (None, 6))),
)

HAN_SEGMENT_BYTES = 65536  # coll_han_allreduce_segsize


def ceil_log2(p: int) -> float:
    """log2 p rounded up (the rounds of a tree or of recursive doubling); 0 for one rank."""
    return float(math.ceil(math.log2(p))) if p > 1 else 0.0


def tuned_allreduce_algorithm(ranks: int, size_bytes: float) -> str:
    """The algorithm coll/tuned's fixed decision runs for a commutative all-reduce.

    Parameters
    ----------
    ranks : int
        Communicator size.
    size_bytes : float
        Message size in bytes (count x type size).

    Returns
    -------
    str
        A name from :data:`TUNED_ALGORITHMS`.
    """
    if ranks < 1:
        raise UsageError(f"ranks must be at least 1, got {ranks}")
    for rank_bound, row in TUNED_ALLREDUCE_RULES:
        if rank_bound is None or ranks < rank_bound:
            for size_bound, algorithm in row:
                if size_bound is None or size_bytes < size_bound:
                    return TUNED_ALGORITHMS[algorithm]
    raise AssertionError("the last row and entry have no bound")  # pragma: no cover


def libnbc_ireduce_algorithm(ranks: int, size_bytes: float, elements: float) -> str:
    """libnbc's ireduce choice for a commutative operation (``nbc_ireduce.c``)."""
    if ranks > 2 and elements >= _pof2_below(ranks):
        return "redscat_gather"
    if ranks > 4 or size_bytes < 65536:
        return "binomial"
    return "chain"


def libnbc_ibcast_algorithm(ranks: int) -> str:
    """libnbc's ibcast choice (``nbc_ibcast.c``, with its default ``ibcast_skip_dt_decision``)."""
    return "linear" if ranks <= 4 else "binomial"


def _pof2_below(p: int) -> int:
    """The largest power of two not above ``p``."""
    return 1 << (p.bit_length() - 1)


@dataclass(frozen=True)
class MpiPlan:
    """What Open MPI runs across nodes for one all-reduce, and what it costs there.

    Attributes
    ----------
    name : str
        ``tuned:<algorithm>`` over every rank, or ``han:<ireduce>+<ibcast>`` between node leaders.
    nic_bytes : float
        Bytes through the busiest NIC direction, in units of the message size.
    hops : float
        Message latencies on the critical path (the frame's per-step latency counts).
    ranks : int
        Ranks that talk across nodes (every rank for tuned, one leader per node for HAN).
    """

    name: str
    nic_bytes: float
    hops: float
    ranks: int


def tuned_nic_bytes(algorithm: str, p: int) -> tuple[float, float]:
    """(busiest-NIC bytes in units of S, hops) of a flat coll/tuned all-reduce, one rank per node.

    Non-powers of two fold the extra ranks first (a whole buffer in, the result back out),
    as Open MPI's recursive doubling and Rabenseifner do.
    """
    q = _pof2_below(p)
    fold = 1.0 if q != p else 0.0
    if algorithm in ("ring", "segmented_ring"):
        return 2.0 * (p - 1) / p, 2.0 * (p - 1)
    if algorithm == "rabenseifner":
        return fold + 2.0 * (q - 1) / q, 2.0 * ceil_log2(q) + 2.0 * fold
    if algorithm == "recursive_doubling":
        return fold + ceil_log2(q), ceil_log2(q) + 2.0 * fold
    if algorithm == "nonoverlapping":  # tuned reduce then tuned bcast: binomial trees
        return ceil_log2(p), 2.0 * ceil_log2(p)
    if algorithm == "basic_linear":  # every rank to the root, then the root to every rank
        return float(p - 1), 2.0
    raise UsageError(f"no cost for Open MPI's all-reduce algorithm {algorithm!r}")


def han_nic_bytes(nodes: int, size_bytes: float, element_bytes: int = 4, overlap: bool = False) -> MpiPlan:
    """HAN's default all-reduce between ``nodes`` leaders: libnbc ireduce + ibcast per 64 KiB segment.

    The root leader carries the most: what it receives in the reduce and sends in the broadcast
    (a linear broadcast sends every segment once per other leader), in bytes per direction.
    ``overlap`` says whether the leaders' reduce and broadcast overlap at the root when both send
    from it; with Open MPI's default TCP transport they do not (see below).
    """
    segment = min(float(size_bytes), float(HAN_SEGMENT_BYTES))
    reduce = libnbc_ireduce_algorithm(nodes, segment, segment / element_bytes)
    bcast = libnbc_ibcast_algorithm(nodes)
    n = nodes
    q = _pof2_below(n)
    # (root egress, root ingress, other leaders' largest egress, largest ingress) of the reduce, in S
    if reduce == "chain":  # a line of leaders towards the root: each passes one buffer on
        red = (0.0, 1.0, 1.0, 1.0 if n > 2 else 0.0)
        red_hops = float(n - 1)
    elif reduce == "binomial":
        red = (0.0, ceil_log2(n), 1.0, ceil_log2(n) - 1.0)
        red_hops = ceil_log2(n)
    else:  # recursive-halving reduce-scatter, then a binomial gather of the blocks to the root
        fold = 1.0 if q != n else 0.0
        share = (q - 1) / q
        red = (share, fold + 2.0 * share, fold + share + 0.5, share + 0.5 - 1.0 / q)
        red_hops = 2.0 * ceil_log2(q) + fold
    if bcast == "linear":  # the root sends every segment to each other leader
        root_out, other_out, bcast_hops = float(n - 1), 0.0, 1.0
    else:
        root_out, other_out, bcast_hops = ceil_log2(n), ceil_log2(n) - 1.0, ceil_log2(n)
    # HAN issues the ireduce of segment k+1 with the ibcast of segment k. A 64 KiB segment is just
    # over the TCP BTL's eager limit, so each message waits for a control message from its
    # receiver, and over TCP (one stream per peer) that message queues behind the receiver's own
    # bulk sends. At the root the two overlap when the reduce only receives (a chain); when it also
    # sends (the reduce-scatter exchanges) they run one after the other, unless ``overlap`` (a
    # transport whose control messages do not wait behind data): on the netns testbed Open MPI's
    # default TCP BTL runs them one after the other, and overlaps them with its put protocol off
    # (btl_tcp_flags=send,inplace,need-ack,need-csum), as measured side by side there.
    if red[0] > 0 and not overlap:
        root = root_out + max(red[0], red[1])
    else:
        root = max(root_out + red[0], red[1])
    busiest = max(root, red[2] + other_out, red[3] + 1.0)
    return MpiPlan(f"han:{reduce}+{bcast}", busiest, red_hops + bcast_hops, n)


def openmpi_allreduce_plan(size_bytes: float, world: int, nodes: int) -> MpiPlan:
    """What Open MPI 5 runs for a commutative all-reduce of ``size_bytes`` on ``world`` ranks over ``nodes`` nodes.

    Ranks are placed evenly, ``world // nodes`` per node. Several ranks per node on several
    nodes: HAN. One rank per node: HAN steps aside and coll/tuned decides over every rank.
    """
    if nodes < 2 or world < nodes or world % nodes:
        raise UsageError(f"an Open MPI plan across nodes needs nodes >= 2 dividing world, got world {world}, "
                         f"nodes {nodes}")
    if world > nodes:
        return han_nic_bytes(nodes, size_bytes)
    algorithm = tuned_allreduce_algorithm(world, size_bytes)
    nic, hops = tuned_nic_bytes(algorithm, world)
    return MpiPlan(f"tuned:{algorithm}", nic, hops, world)
