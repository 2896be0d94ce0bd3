"""The prediction beside a measured row: :func:`pybench.planning.ccr.ccr` for the same DDP configuration.

Strategy ddp, seq 1, the gradients' bytes per value, DDP's real buckets, overlap in those
buckets with the measured :class:`~pybench.planning.overlap.OverlapProfile`; and the same with
each part of the profile left out, so the table shows what each one changes.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from pybench.planning.overlap import OverlapProfile
from pybench.profile.runner import BatchMeasurement

__all__ = ["FlopsSpec", "StepPredictor"]

# FLOP/s for the predicted compute: per batch size, one figure, or None (calibrated from no_sync).
FlopsSpec = Callable[[int], float] | float | None


@dataclass(frozen=True)
class StepPredictor:
    """Predicts one DDP configuration at any batch size (call :meth:`fill` on every rank)."""

    params: int
    world: int
    link_class: str
    model_set: Any
    bucket_mb: float
    grad_bytes: int
    flops_per_sample: float
    flops_per_s: FlopsSpec = None

    def flops(self, batch: int, compute_s: float) -> tuple[float, str]:
        """(FLOP/s, where it came from) at ``batch``: the slowest rank's, identical on every rank."""
        import torch
        import torch.distributed as dist
        if callable(self.flops_per_s):
            fps, source = float(self.flops_per_s(batch)), "GEMMs at the step's shapes, every rank at once"
        elif self.flops_per_s:
            fps, source = float(self.flops_per_s), "given"
        else:
            fps, source = self.flops_per_sample * batch / compute_s, "calibrated from the no_sync steps"
        t = torch.tensor([fps], dtype=torch.float64)
        dist.all_reduce(t, op=dist.ReduceOp.MIN)  # the slowest rank sets the pace
        return float(t.item()), source

    def row(self, batch: int, fps: float, buckets: list[int], overlap_profile: OverlapProfile | None):
        """The ccr row at ``batch`` with FLOP/s ``fps`` and the given overlap profile."""
        from pybench.planning.ccr import ccr
        return ccr(self.params, seq=1, batch=batch, world=self.world, strategy="ddp", models=self.model_set,
                   flops_per_s=fps * self.flops_per_sample / (6.0 * self.params),
                   gpus_per_node=self.world if self.link_class == "intra-node" else 1, overlap=True,
                   bucket_mb=self.bucket_mb, comm_bytes_per_value=self.grad_bytes // max(self.params, 1),
                   device_memory_gb=1e6, bucket_sizes_bytes=buckets, overlap_profile=overlap_profile).rows[0]

    def fill(self, m: BatchMeasurement) -> None:
        """Put the prediction beside the measurement in ``m.row``.

        Raises
        ------
        UsageError
            When the models cannot predict this configuration (the row keeps its measurement).
        """
        row, ovl = m.row, m.overlap
        # what the probes measured stays in the row whether or not the models predict this configuration
        row.ready_fractions = list(ovl.ready_fractions) if ovl.ready_fractions else None
        row.backward_share, row.compute_slowdown = ovl.backward_share, ovl.compute_slowdown
        row.copy_in_s, row.copy_out_s = ovl.copy_in_s, ovl.copy_out_s
        row.comm_cpu_cores = m.comm_cores
        fps, source = self.flops(row.batch, row.compute_s)

        def exposed(profile: OverlapProfile | None) -> float:
            return self.row(row.batch, fps, row.bucket_bytes, profile).exposed_fraction
        est = self.row(row.batch, fps, row.bucket_bytes, ovl)
        row.pred_exposed_fraction_uniform = exposed(None)
        row.pred_exposed_fraction_readiness = exposed(
            dataclasses.replace(ovl, compute_slowdown=0.0, copy_in_s=0.0, copy_out_s=0.0))
        row.pred_exposed_fraction_contention = exposed(dataclasses.replace(ovl, copy_in_s=0.0, copy_out_s=0.0))
        row.pred_compute_s, row.pred_comm_s, row.pred_exposed_s = est.compute_s, est.comm_s, est.exposed_s
        row.pred_ccr, row.pred_exposed_fraction = est.ccr, est.exposed_fraction
        row.pred_comm_buckets_s = sum(self.model_set.time("allreduce", s, self.world, self.link_class).time_s
                                      for s in row.bucket_bytes)
        row.flops_per_s, row.flops_source = fps, source
