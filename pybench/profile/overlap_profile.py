"""The prediction's :class:`~pybench.planning.overlap.OverlapProfile` of one batch, from the probes of every rank.

Per rank: medians over steps of the no_sync hooks (bucket readiness, backward's share of the
step), the host cores the buckets burnt when all-reduced alone, and the timed bucket copies;
then the slowest rank (max over ranks), since a bucket's all-reduce starts when every rank has
it and the busiest host slows the step.
"""

from __future__ import annotations

import statistics
from collections.abc import Sequence
from typing import Any

from pybench.planning.overlap import OverlapProfile, compute_slowdown
from pybench.profile.probes import bucket_ready_fractions, cores_available

__all__ = ["measured_overlap_profile"]


def _median(xs: Sequence[float]) -> float:
    return float(statistics.median(xs)) if xs else float("nan")


def _per_rank(hooks: Sequence[tuple[Any, float]], buckets: Sequence[int], comm_cores: float | None,
              copies: tuple[float, float]) -> list[float]:
    """This rank's figures: n bucket fractions, backward share, comm cores, copy in, copy out.

    -1 marks what this rank did not measure (the max over ranks then ignores it).
    """
    per_step = []
    for taken, step_s in hooks:
        got = taken and bucket_ready_fractions(taken[0], taken[1], buckets)
        if got:
            per_step.append((got[0], got[1] / step_s if step_s > 0 else float("nan")))
    n = len(buckets)
    mine = [-1.0] * (n + 2) + list(copies)
    if per_step:
        mine[:n] = [_median([f[k] for f, _ in per_step]) for k in range(n)]
        mine[n] = min(1.0, _median([s for _, s in per_step]))
    if comm_cores is not None:
        mine[n + 1] = comm_cores
    return mine


def measured_overlap_profile(hooks: Sequence[tuple[Any, float]], buckets: Sequence[int], comm_cores: float | None,
                             on_cpu: bool, threads_on_host: int,
                             copies: tuple[float, float]) -> tuple[OverlapProfile, float | None]:
    """(the OverlapProfile, the slowest host's comm-alone cores) from this batch's probes; call on every rank.

    Parameters
    ----------
    hooks : sequence of ((backward start, [(time, bytes), ...]) or None, no_sync step seconds)
        What :class:`pybench.profile.probes.GradReadiness` took in each no_sync step.
    buckets : sequence of int
        DDP's bucket sizes in reduction order.
    comm_cores : float or None
        Host cores busy while the buckets were all-reduced alone (None: not measurable here).
    on_cpu : bool
        Compute runs on the host's cores (else no contention is modelled).
    threads_on_host : int
        Compute threads of every rank on this machine.
    copies : (float, float)
        Seconds of DDP's copies into and out of its buckets.
    """
    import torch
    import torch.distributed as dist
    n = len(buckets)
    x = torch.tensor(_per_rank(hooks, buckets, comm_cores, copies), dtype=torch.float64)
    dist.all_reduce(x, op=dist.ReduceOp.MAX)
    v = x.tolist()
    fractions = tuple(v[:n]) if min(v[:n + 1]) >= 0 and v[n] > 0 else None
    share = v[n] if fractions else None
    cores = v[n + 1] if v[n + 1] >= 0 else None
    copy_in, copy_out = v[n + 2], v[n + 3]
    slow = compute_slowdown(cores, threads_on_host, cores_available()) if on_cpu and cores else 0.0
    parts = ["bucket readiness and backward share from gradient hooks in the no_sync steps"
             if fractions else "readiness assumed uniform (no gradient hooks fired), backward 2/3"]
    if not on_cpu:
        parts.append("compute on the device: no CPU contention modelled")
    elif cores is None:
        parts.append("no /proc/stat: no CPU contention modelled")
    else:
        parts.append(f"comm alone kept {cores:.2f} host cores busy beside {threads_on_host} compute threads "
                     f"on {cores_available()} cores: compute {slow:.0%} slower while a bucket is in flight")
    parts.append(f"DDP's bucket copies timed as {copy_in * 1e3:.1f} ms in (with the 1/world scaling) and "
                 f"{copy_out * 1e3:.1f} ms out")
    profile = OverlapProfile(fractions, share, slow, copy_in_s=copy_in, copy_out_s=copy_out, source="; ".join(parts))
    return profile, cores
