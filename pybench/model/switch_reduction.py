"""Inside a node whose switches reduce (NVLink SHARP, which NCCL's NVLS all-reduce runs on): the reading a
GPU count never measured there leaves open.

NCCL runs an all-reduce over NVLS where the switches can reduce and its tuning finds that faster, over a ring
elsewhere. Whether it does at a given GPU count is NCCL's choice there (its version, the fabric manager, a
virtual machine's share of the switches), which no description gives. NVLS moves each byte through a GPU's
links once each way, so its algorithm bandwidth is at most the per-GPU link rate; a ring's bus bandwidth is.
A fit carried to another GPU count is one reading; the other algorithm at its bound is the other, and the
interval reaches it. The answer stays the fitted one: nothing says which algorithm NCCL takes there.
"""

from __future__ import annotations

from pybench.collectives import busbw_factor
from pybench.model.crossing import ModelLinks
from pybench.model.system import GPU_BACKENDS


def switch_reduction_reach(model: ModelLinks, size: float, world: int, across: bool, time_s: float,
                           bytes_share: float) -> tuple[float, ...]:
    """The other algorithm's times at ``world`` GPUs in one node of a described switch that reduces, where the
    inputs leave it open: NVLS at the link rate where it is faster than ``time_s``, a ring at the link rate
    where that is slower (the fit runs faster than any ring: it used the switch's reduction); none elsewhere.
    ``bytes_share``: the share of ``time_s`` the bytes take."""
    system, intra = model.system, model.intra
    if (across or system is None or not system.in_switch_reduction or model.collective != "allreduce"
            or model.backend not in GPU_BACKENDS or intra is None or intra.is_described or intra.is_preset
            or any(w == world and n == 1 for w, n in model.fitted)):
        return ()
    rest, rate = time_s * (1.0 - bytes_share), system.intra_Bps_per_gpu
    nvls, ring = rest + size / rate, rest + size * busbw_factor("allreduce", world) / rate
    return tuple(t for t, faster in ((nvls, True), (ring, False)) if (t < time_s) == faster)
