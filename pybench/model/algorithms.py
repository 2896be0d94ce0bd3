"""Classic cost formulas of collective algorithms, from per-link alpha and B.

Every single-link formula here has the form

    T(p, n) = a(p) * alpha + b(p) * n / B

with n the message size in pybench's convention (all-gather: the total output;
reduce-scatter: the whole input) and p the number of ranks. A fitted piece
``T = alpha_fit + n / B_fit`` measured at p0 ranks therefore gives the per-link
parameters exactly: ``alpha = alpha_fit / a(p0)`` and ``B = B_fit * b(p0)``, and from
them the prediction at any p. That is how :meth:`pybench.model.alpha_beta.AlphaBetaModel.predict`
extrapolates in world size.

Forms used (log2 p rounded up for non-powers of two, as the algorithms pad):

==========================  ======================  ==============================
algorithm                   a(p) (latency terms)    b(p) (bandwidth terms)
==========================  ======================  ==============================
ring all-reduce             2 (p-1)                 2 (p-1)/p
ring all-gather             p-1                     (p-1)/p
ring reduce-scatter         p-1                     (p-1)/p
tree all-reduce             2 log2 p                2    (pipelined reduce up + broadcast
                                                         down a binary tree; NCCL's double
                                                         tree keeps the 2 n/B bandwidth term)
recursive doubling AR       log2 p                  log2 p   (whole vector each step)
Rabenseifner AR             2 log2 p                2 (p-1)/p (recursive halving RS + doubling AG)
recursive doubling AG       log2 p                  (p-1)/p
recursive halving RS        log2 p                  (p-1)/p
ring / pipeline broadcast   p-1                     1
binomial tree broadcast     log2 p                  log2 p
pairwise all-to-all         p-1                     (p-1)/p
point-to-point              1                       1    (independent of p)
==========================  ======================  ==============================

Two-level hierarchical all-reduce (:func:`hierarchical_allreduce_time`) is not a
single-link formula: intra-node reduce-scatter over g GPUs, inter-node all-reduce of
n/g over N = p/g nodes, intra-node all-gather.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from pybench.errors import UsageError


def ceil_log2(p: int) -> float:
    """log2 p rounded up (the rounds of a tree or of recursive doubling); 0 for one rank."""
    return float(math.ceil(math.log2(p))) if p > 1 else 0.0


@dataclass(frozen=True)
class Algorithm:
    """A collective algorithm's cost shape ``T = a(p) alpha + b(p) n / B``.

    Attributes
    ----------
    name : str
        Key in :data:`ALGORITHMS`, e.g. ``ring_allreduce``.
    collective : str
        pybench collective it implements.
    latency_coef : callable
        p -> a(p).
    bandwidth_coef : callable
        p -> b(p).
    description : str
    """

    name: str
    collective: str
    latency_coef: Callable[[int], float]
    bandwidth_coef: Callable[[int], float]
    description: str = ""

    def time_s(self, size_bytes, world: int, alpha_s: float, bw_Bps: float):
        """Predicted time in seconds from per-link ``alpha_s`` and ``bw_Bps``."""
        _check_world(world)
        s = np.asarray(size_bytes, dtype=float)
        return self.latency_coef(world) * alpha_s + self.bandwidth_coef(world) * s / bw_Bps

    def per_link(self, alpha_fit_s: float, inv_bw_fit: float, world: int):
        """Map a fitted (alpha, 1/B) at ``world`` ranks to per-link (alpha, 1/B).

        A coefficient of zero (p = 1) cannot be inverted and raises UsageError.
        """
        _check_world(world)
        a, b = self.latency_coef(world), self.bandwidth_coef(world)
        if a <= 0 or b <= 0:
            raise UsageError(f"{self.name}: cannot infer per-link parameters from a fit at "
                             f"world size {world} (the formula has no term to invert)")
        return alpha_fit_s / a, inv_bw_fit / b

    def scale(self, from_world: int, to_world: int):
        """Factors (ka, kb) with alpha_to = ka alpha_from and (1/B)_to = kb (1/B)_from."""
        _check_world(from_world)
        _check_world(to_world)
        a0, b0 = self.latency_coef(from_world), self.bandwidth_coef(from_world)
        if a0 <= 0 or b0 <= 0:
            raise UsageError(f"{self.name}: a fit at world size {from_world} cannot be "
                             f"extrapolated (the formula vanishes there)")
        return self.latency_coef(to_world) / a0, self.bandwidth_coef(to_world) / b0


def _check_world(world) -> None:
    if not isinstance(world, (int, np.integer)) or isinstance(world, bool) or world < 1:
        raise UsageError(f"world size {world!r} must be a positive whole number of ranks")


ALGORITHMS: dict = {a.name: a for a in (
    Algorithm("ring_allreduce", "allreduce", lambda p: 2.0 * (p - 1), lambda p: 2.0 * (p - 1) / p,
              "ring reduce-scatter then ring all-gather"),
    Algorithm("tree_allreduce", "allreduce", lambda p: 2.0 * ceil_log2(p), lambda p: 2.0 if p > 1 else 0.0,
              "pipelined reduce up and broadcast down a binary tree (NCCL double tree)"),
    Algorithm("recursive_doubling_allreduce", "allreduce", ceil_log2, ceil_log2,
              "exchange whole vectors with partners at distance 1, 2, 4, ..."),
    Algorithm("rabenseifner_allreduce", "allreduce", lambda p: 2.0 * ceil_log2(p),
              lambda p: 2.0 * (p - 1) / p, "recursive-halving reduce-scatter + recursive-doubling all-gather"),
    Algorithm("ring_allgather", "allgather", lambda p: float(p - 1), lambda p: (p - 1) / p,
              "ring all-gather"),
    Algorithm("recursive_doubling_allgather", "allgather", ceil_log2, lambda p: (p - 1) / p,
              "recursive doubling all-gather"),
    Algorithm("ring_reducescatter", "reducescatter", lambda p: float(p - 1), lambda p: (p - 1) / p,
              "ring reduce-scatter"),
    Algorithm("recursive_halving_reducescatter", "reducescatter", ceil_log2, lambda p: (p - 1) / p,
              "recursive halving reduce-scatter"),
    Algorithm("ring_broadcast", "broadcast", lambda p: float(p - 1), lambda p: 1.0 if p > 1 else 0.0,
              "pipelined chain broadcast"),
    Algorithm("binomial_broadcast", "broadcast", ceil_log2, ceil_log2, "binomial tree broadcast"),
    Algorithm("pairwise_alltoall", "alltoall", lambda p: float(p - 1), lambda p: (p - 1) / p,
              "p-1 pairwise exchange steps"),
    Algorithm("point_to_point", "p2p", lambda p: 1.0, lambda p: 1.0,
              "one message; cost independent of the world size"),
)}

# Which algorithm to assume when the data cannot tell (one world size): ring-like is what
# NCCL uses for large messages and what busbw is defined against.
DEFAULT_ALGORITHM = {
    "allreduce": "ring_allreduce",
    "allgather": "ring_allgather",
    "reducescatter": "ring_reducescatter",
    "broadcast": "ring_broadcast",
    "reduce": "ring_broadcast",
    "alltoall": "pairwise_alltoall",
    "sendrecv": "point_to_point",
    "p2p_bw": "point_to_point",
    "p2p_latency": "point_to_point",
    "p2p_bibw": "point_to_point",
}


def candidates_for(collective: str) -> list:
    """Algorithms that implement ``collective`` (reduce uses the broadcast shapes)."""
    key = {"reduce": "broadcast", "sendrecv": "p2p", "p2p_bw": "p2p", "p2p_latency": "p2p",
           "p2p_bibw": "p2p"}.get(collective, collective)
    return [a for a in ALGORITHMS.values() if a.collective == key]


def default_algorithm(collective: str) -> str:
    """Name of the algorithm assumed for ``collective`` when the data cannot discriminate."""
    try:
        return DEFAULT_ALGORITHM[collective]
    except KeyError:
        raise UsageError(f"no algorithm formula known for collective {collective!r}; "
                         f"known: {', '.join(DEFAULT_ALGORITHM)}") from None


def get_algorithm(name: str) -> Algorithm:
    """Look up an algorithm by name, with a one-line error listing the known ones."""
    try:
        return ALGORITHMS[name]
    except KeyError:
        raise UsageError(f"unknown algorithm {name!r}; known: {', '.join(ALGORITHMS)}") from None


def ring_allreduce_time(size_bytes, world: int, alpha_s: float, bw_Bps: float):
    """2(p-1) alpha + 2(p-1)/p n/B."""
    return ALGORITHMS["ring_allreduce"].time_s(size_bytes, world, alpha_s, bw_Bps)


def ring_allgather_time(size_bytes, world: int, alpha_s: float, bw_Bps: float):
    """(p-1) alpha + (p-1)/p n/B (n = total gathered bytes); reduce-scatter is the same."""
    return ALGORITHMS["ring_allgather"].time_s(size_bytes, world, alpha_s, bw_Bps)


def tree_allreduce_time(size_bytes, world: int, alpha_s: float, bw_Bps: float):
    """2 log2(p) alpha + 2 n/B (pipelined double binary tree)."""
    return ALGORITHMS["tree_allreduce"].time_s(size_bytes, world, alpha_s, bw_Bps)


def hierarchical_allreduce_time(size_bytes, world: int, gpus_per_node: int,
                                intra_alpha_s: float, intra_bw_Bps: float,
                                inter_alpha_s: float, inter_bw_Bps: float):
    """Two-level all-reduce: intra-node ring reduce-scatter, inter-node ring all-reduce of
    the 1/g shard, intra-node ring all-gather.

    T = 2 [(g-1) a_i + (g-1)/g n/B_i] + 2 (N-1) a_e + 2 (N-1)/N (n/g)/B_e, N = p/g.

    Parameters
    ----------
    size_bytes : array_like
    world : int
        Total ranks p, a multiple of ``gpus_per_node``.
    gpus_per_node : int
        g.
    intra_alpha_s, intra_bw_Bps, inter_alpha_s, inter_bw_Bps : float
        Per-link parameters inside a node and between nodes.
    """
    _check_world(world)
    _check_world(gpus_per_node)
    if world % gpus_per_node:
        raise UsageError(f"world size {world} is not a multiple of gpus_per_node {gpus_per_node}")
    g, nodes = gpus_per_node, world // gpus_per_node
    s = np.asarray(size_bytes, dtype=float)
    intra = 2.0 * ((g - 1) * intra_alpha_s + (g - 1) / g * s / intra_bw_Bps)
    inter = 2.0 * (nodes - 1) * inter_alpha_s + 2.0 * (nodes - 1) / nodes * (s / g) / inter_bw_Bps
    return intra + inter
