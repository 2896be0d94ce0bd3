"""What each rank of ``pybench profile`` runs: the synthetic MLP through :func:`profile_step`."""

from __future__ import annotations

import os
from collections.abc import Sequence

from pybench.errors import UsageError
from pybench.profile.mlp import gemm_flops_per_s, make_mlp, mlp_step_fn
from pybench.profile.result import ProfileResult
from pybench.profile.step import profile_step

__all__ = ["CALIBRATIONS", "run_profile_rank"]

CALIBRATIONS = ("gemm", "nosync")


def run_profile_rank(params: int, batches: Sequence[int], steps: int = 5, warmup: int = 2, bucket_mb: float = 25,
                     models: str | None = None, calibrate: str = "gemm", strategy: str = "ddp",
                     save_model: str | os.PathLike | None = None,
                     trace_dir: str | os.PathLike | None = None) -> ProfileResult:
    """Profile an MLP of about ``params`` parameters on every rank (process group already initialised).

    Parameters
    ----------
    params : int
        Parameters of the synthetic MLP.
    batches : sequence of int
        Per-rank batch sizes.
    steps, warmup, bucket_mb, models
        As :func:`pybench.profile.step.profile_step`.
    calibrate : {"gemm", "nosync"}
        FLOP/s of the prediction: the step's GEMMs timed on every rank at once, or the no_sync steps.
    strategy : str
        ``"ddp"``, the only strategy measured.
    save_model : path, optional
        Where rank 0 saves the model fitted on the spot (when no ``models`` were given).
    trace_dir : path, optional
        An existing folder for the torch.profiler traces, as :func:`pybench.profile.step.profile_step`.
    """
    import torch
    import torch.distributed as dist
    if strategy != "ddp":
        raise UsageError(f"strategy must be 'ddp', the only one profiled (got {strategy!r}); "
                         "other strategies are predicted by pybench.planning.ccr")
    if calibrate not in CALIBRATIONS:
        raise UsageError(f"calibrate must be one of {', '.join(CALIBRATIONS)}, got {calibrate!r}")
    torch.set_num_threads(1)  # one core per rank: ranks share the machine's cores as the CPU benchmarks do
    model, width, layers = make_mlp(params)
    n_params = sum(p.numel() for p in model.parameters())

    def make_batch(b):
        g = torch.Generator().manual_seed(1000 + dist.get_rank())
        return torch.randn(b, width, generator=g)

    cache: dict[int, float] = {}

    def gemm_fps(b: int) -> float:
        if b not in cache:
            cache[b] = gemm_flops_per_s(width, layers, b, barrier=dist.barrier)
        return cache[b]
    res = profile_step(model, mlp_step_fn(), batches, make_batch, steps=steps, warmup=warmup, bucket_mb=bucket_mb,
                       models=models, flops_per_s=gemm_fps if calibrate == "gemm" else None,
                       label=f"MLP {layers} x Linear({width}, {width}) = {n_params / 1e6:.1f}M params, fp32, SGD",
                       trace_dir=trace_dir)
    if save_model and res.fitted is not None and dist.get_rank() == 0:
        from pybench.model.model_files import save_models
        save_models([res.fitted], str(save_model), overwrite=True)
        res.notes.append(f"quick all-reduce model saved to {save_model}")
    return res
