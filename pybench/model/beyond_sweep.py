"""Sizes above a measured sweep whose bytes' rate it never measured: there a sweep's curve carried on says
nothing, and the answer is "not determined" with the sizes to measure.

Below a sweep its widening answers instead: a latency is at most the one carried down (the curve there is one
protocol's, which NCCL's choice can only beat), and the planner's latency probes ask there; unless the sweep's
first piece left its latency unresolved (held at 0: its smallest sizes' times were all bytes) and that latency may
take longer than the bytes at the size asked, where the curve carried down says nothing and only the time at its
smallest size bounds the answer.
"""

from __future__ import annotations

from pybench.model.system import GPU_BACKENDS
from pybench.sizes import format_size

BANDWIDTH_PROTOCOL_BYTES = 16 << 20
"""A size every multi-node log here runs in NCCL's bandwidth protocol (Simple), its latency still ruling: a GPU
sweep across nodes that ended below it never measured the rate that protocol reaches."""


def unmeasured_bytes(collective: str, backend: str, link_class: str | None, size_max: float, alpha_s: float,
                     inv_bw_s_per_byte: float, size: float) -> str:
    """Why a sweep ending at ``size_max`` (its last piece ``alpha_s + size * inv_bw_s_per_byte``) cannot answer at
    ``size``, or '': where its own line says the bytes rule ``size`` after it ended while latency ruled, or where a
    GPU sweep across nodes ended before NCCL's bandwidth protocol, whose rate it never saw."""
    if size <= size_max:
        return ""

    def share(x: float) -> float:
        data = x * inv_bw_s_per_byte
        return data / (alpha_s + data) if alpha_s + data > 0 else 0.0

    asked, hi = format_size(int(size)), format_size(int(size_max))
    if share(size_max) < 0.5 <= share(size):
        why = (f"ended at {hi} while latency ruled (its last piece's fixed {alpha_s * 1e6:.4g} us per call took over "
               f"half of its time), so the bytes' rate")
    elif backend in GPU_BACKENDS and link_class == "inter-node" and size_max < BANDWIDTH_PROTOCOL_BYTES <= size:
        why = (f"ended at {hi}, below {format_size(BANDWIDTH_PROTOCOL_BYTES)} where NCCL runs its bandwidth protocol "
               f"(Simple) on every log here, so the rate")
    else:
        return ""
    return (f"not determined by these inputs: the sweep {why} that rules at {asked} is not measured; measure it with "
            f"`pybench {collective} --sizes {hi}:{asked}`")


def unresolved_latency(collective: str, size_min: float, latency_ceiling_s: float, inv_bw_s_per_byte: float,
                       time_at_min_s: float, size: float) -> str:
    """Why a sweep starting at ``size_min``, whose first piece's latency was held at 0 with ``latency_ceiling_s``
    the top of its interval (0 where the latency was fitted), cannot answer at ``size`` below it, or '': where
    that latency may take longer than the bytes there, the curve carried down says nothing of the time."""
    if size >= size_min or latency_ceiling_s <= size * inv_bw_s_per_byte:
        return ""
    low = format_size(int(size_min))
    return (f"not determined by these inputs: the sweep's first sizes left its latency unresolved (held at 0, up to "
            f"{latency_ceiling_s * 1e6:.4g} us), more than the bytes take at {format_size(int(size))}: below {low} "
            f"it says only that the time is at most {time_at_min_s * 1e6:.4g} us (at {low}); measure it with "
            f"`pybench {collective} --sizes {format_size(int(size))}:{low}`")
