"""The synthetic model ``pybench profile`` trains: a square float32 MLP, its step and its GEMM speed."""

from __future__ import annotations

import math
import statistics
import time
from collections.abc import Callable
from typing import Any

from pybench.errors import UsageError

__all__ = ["gemm_flops_per_s", "make_mlp", "mlp_shape", "mlp_step_fn"]


def mlp_shape(params: int) -> tuple[int, int]:
    """(width, layers) of a square MLP with about ``params`` parameters (~5-10 layers)."""
    if params < 1000:
        raise UsageError(f"params {params} is too small for a model; use e.g. 1M or 20M")
    width = 2 ** max(4, min(12, round(math.log2(math.sqrt(params / 6)))))
    layers = max(1, round(params / (width * width + width)))
    return width, layers


def make_mlp(params: int, seed: int = 0):
    """(model, width, layers): a float32 MLP (Linear + ReLU) of about ``params`` parameters.

    Its training FLOPs per sample are 6 x parameters.
    """
    import torch
    from torch import nn
    width, layers = mlp_shape(params)
    torch.manual_seed(seed)
    mods: list[nn.Module] = []
    for i in range(layers):
        mods.append(nn.Linear(width, width))
        if i < layers - 1:
            mods.append(nn.ReLU())
    return nn.Sequential(*mods), width, layers


def mlp_step_fn(lr: float = 1e-3) -> Callable[[Any, Any], None]:
    """A step function for :func:`pybench.profile.step.profile_step`: SGD on the mean squared output."""
    import torch
    state: dict[int, Any] = {}

    def step(model, batch):
        opt = state.get(id(model))
        if opt is None:
            opt = state[id(model)] = torch.optim.SGD(model.parameters(), lr=lr)
        opt.zero_grad(set_to_none=True)
        model(batch).square().mean().backward()
        opt.step()
    return step


def gemm_flops_per_s(width: int, layers: int, batch: int, repeats: int = 3,
                     barrier: Callable[[], Any] | None = None) -> float:
    """FLOP/s of the step's GEMMs (forward and both backward GEMMs of every layer) at this batch.

    Timed on every rank at once: call on all ranks; ``barrier`` aligns the start.
    """
    import torch
    a = torch.randn(batch, width)
    w = torch.randn(width, width)
    g = torch.randn(batch, width)
    flops = 6.0 * batch * width * width * layers
    times = []
    for r in range(repeats + 1):
        if barrier:
            barrier()
        t0 = time.perf_counter()
        for _ in range(layers):
            torch.mm(a, w)      # forward
            torch.mm(g, w.t())  # grad of input
            torch.mm(g.t(), a)  # grad of weight
        if r:
            times.append(time.perf_counter() - t0)
    return flops / statistics.median(times)
