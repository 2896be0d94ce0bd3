"""Which collective, and how many ranks, an nccl-tests table's busbw/algbw ratio says.

nccl-tests prints busbw = algbw x the collective's bus factor at the rank count: 2(n-1)/n for all-reduce,
(n-1)/n for all-gather, reduce-scatter and all-to-all, 1 for broadcast, reduce and send/recv. With the
redop and root columns the ratio tells the families apart, and, where the factor depends on it, the count.
"""

from __future__ import annotations

import math

import numpy as np

# busbw/algbw of each family of collectives: 2(n-1)/n, (n-1)/n, 1.
_RATIO_RANGES = {"allreduce": (0.98, 2.02), "allgather": (0.45, 1.02), "reducescatter": (0.45, 1.02),
                 "alltoall": (0.45, 1.02), "broadcast": (0.98, 1.02), "reduce": (0.98, 1.02),
                 "sendrecv": (0.98, 1.02), "gather": (0.45, 1.02), "scatter": (0.45, 1.02),
                 # OSU's point-to-point tests print no nccl-tests table: no ratio of one is theirs
                 "p2p_bw": (0.0, 0.0), "p2p_latency": (0.0, 0.0), "p2p_bibw": (0.0, 0.0)}


# Collectives whose bus factor, 2(n-1)/n or (n-1)/n, is 0 on one rank: their busbw prints 0.00.
_ZERO_ON_ONE_RANK = ("allreduce", "allgather", "reducescatter", "alltoall", "gather", "scatter")


def ratio_agrees(collective: str, bus: float) -> bool:
    """Whether busbw/algbw = ``bus`` is possible for ``collective`` (True when it cannot tell)."""
    lo_hi = _RATIO_RANGES.get(collective)
    if collective in _ZERO_ON_ONE_RANK and bus < 0.005:
        return True  # one rank
    return lo_hi is None or not math.isfinite(bus) or lo_hi[0] <= bus < lo_hi[1]


# A bus factor of 1 (broadcast, reduce, send/recv, a 2-rank all-reduce) makes busbw the very number algbw is, printed
# alike: their ratio is 1. Below this it is (n-1)/n, of up to 1000 ranks (0.98 at 50); above 1000 the two print alike.
_ONE_FROM = 0.999


def _collective_from_ratio(bus: float, redops: set[str], roots: set[str]) -> str | None:
    reduces = bool(redops - {"none", "-", ""})
    rooted = any(r not in ("-1", "") for r in roots)
    if bus < 0.005:
        return None  # busbw 0 on one rank, for all-reduce and reduce-scatter alike
    if bus > 1.02:
        return "allreduce"
    if bus < _ONE_FROM:  # (n-1)/n
        return "reducescatter" if reduces else "allgather"
    if rooted:
        return "reduce" if reduces else "broadcast"
    return "allreduce" if reduces else "sendrecv"  # busbw/algbw = 2(n-1)/n = 1 only for n = 2


def infer(collective: str | None, redops: set[str], roots: set[str], ratios_bus: list[float],
          ratio_raw: list[float], old_layout: bool) -> tuple[str | None, int | None, list[str]]:
    """Recover (collective, world, notes) from bandwidth ratios and the redop/root columns.

    ``ratios_bus``: busbw/algbw; ``ratio_raw``: printed algbw / (size/time), ~1 unless the
    old layout pre-scaled algbw by (n-1)/n.
    """
    notes: list[str] = []
    bus = float(np.median(ratios_bus)) if ratios_bus else math.nan
    raw = float(np.median(ratio_raw)) if ratio_raw else math.nan
    if old_layout and math.isfinite(raw) and raw < 0.97:
        # Pre-2020 all_gather/reduce_scatter: algbw = size/time * (n-1)/n.
        old_world = int(round(1.0 / (1.0 - raw)))
        notes.append(f"world size {old_world} from algbw/(size/time) = {raw:.4f} = (n-1)/n (old layout)")
        if collective is None:
            collective = "reducescatter" if bool(redops - {"none", "-", ""}) else "allgather"
            notes.append(f"collective {collective} guessed from pre-scaled algbw")
        return collective, old_world, notes
    if collective is None and math.isfinite(bus):
        collective = _collective_from_ratio(bus, redops, roots)
        twin = {"allgather": "alltoall", "sendrecv": "broadcast"}.get(collective or "")
        if collective == "allreduce" and bus <= 1.02:  # 2(n-1)/n = 1: two ranks, or a send/recv printing redop sum
            twin = "sendrecv"
        if collective is not None:
            notes.append(f"collective {collective} inferred from busbw/algbw = {bus:.3f} "
                         f"and redop/root columns (program name not in the log)"
                         + (f"; {twin} has the same ratio: give --collective {twin} if it was" if twin else "")
                         + ("; so has a reduce-scatter, all-gather or all-to-all over more than 1000 ranks"
                            if collective in ("sendrecv", "allreduce") and _ONE_FROM <= bus < 1.0 else ""))
    world: int | None = None
    if math.isfinite(bus) and collective in _ZERO_ON_ONE_RANK and bus < 0.005:
        world = 1
        notes.append("world size 1: busbw is 0.00 where algbw is not, as only one rank prints it "
                     "(nothing crosses a link; the times are local copies)")
    elif math.isfinite(bus) and collective == "allreduce" and 1.0 - 1e-3 <= bus < 2.0 - 1e-3:
        world = int(round(2.0 / (2.0 - bus)))
    elif math.isfinite(bus) and collective in ("allgather", "reducescatter", "alltoall") \
            and 0.45 <= bus < 1.0 - 1e-3:
        world = int(round(1.0 / (1.0 - bus)))
    if world is not None and world > 1:
        notes.append(f"world size {world} from busbw/algbw = {bus:.4f}")
    return collective, world, notes
