"""What ``pybench profile -n 1`` measures: the synthetic MLP fed by a loader with a set delay per batch.

The delay is slept inside ``next()``, as a loader that reads and decodes in the training
process would block, so the data wait it causes is real on any device.
"""

from __future__ import annotations

import time
from collections.abc import Iterator, Sequence
from typing import Any

from pybench.errors import UsageError
from pybench.profile.pipeline import profile_pipeline
from pybench.profile.pipeline_result import PipelineResult

__all__ = ["SyntheticLoader", "profile_mlp_pipeline"]


class SyntheticLoader:
    """``count`` random float32 batches of ``batch`` x ``width``, each after ``delay_s`` seconds.

    The batches are made on the host (pinned when the step runs on CUDA), as a real loader's are.
    """

    def __init__(self, batch: int, width: int, count: int, delay_s: float = 0.0, pin: bool = False) -> None:
        if delay_s < 0:
            raise UsageError(f"delay_s must be 0 or more, got {delay_s}")
        if batch < 1 or count < 1:
            raise UsageError(f"batch and count must be at least 1, got {batch} and {count}")
        self.batch, self.width, self.count, self.delay_s, self.pin = batch, width, count, delay_s, pin

    def __iter__(self) -> Iterator[Any]:
        import torch
        gen = torch.Generator().manual_seed(0)
        for _ in range(self.count):
            if self.delay_s:
                time.sleep(self.delay_s)
            x = torch.randn(self.batch, self.width, generator=gen)
            yield x.pin_memory() if self.pin else x

    def __len__(self) -> int:
        return self.count


def _mse_of_output(model: Any, batch: Any) -> Any:
    return model(batch).square().mean()


def profile_mlp_pipeline(params: int, batches: Sequence[int], delay_s: float = 0.0, steps: int = 5,
                         warmup: int = 2, device: str = "auto") -> PipelineResult:
    """The input-pipeline profile of the synthetic MLP of about ``params`` parameters, SGD on its mean squared output.

    ``delay_s`` is the loader's delay per batch; ``device`` is ``cpu``, ``cuda`` or ``auto`` (CUDA when present).
    """
    import torch

    from pybench.profile.mlp import make_mlp
    if delay_s < 0:
        raise UsageError(f"delay_s must be 0 or more, got {delay_s}")
    if device == "auto":
        device = "cuda" if torch.cuda.is_available() else "cpu"
    model, width, layers = make_mlp(params)
    model = model.to(device)
    opt = torch.optim.SGD(model.parameters(), lr=1e-3)
    pin = torch.device(device).type == "cuda"

    def loader_for(batch: int) -> SyntheticLoader:
        return SyntheticLoader(batch, width, warmup + steps, delay_s, pin)

    res = profile_pipeline(model, loader_for, _mse_of_output, opt, batches=list(batches), steps=steps,
                           warmup=warmup, device=device, name=f"mlp {params:.3g} params ({layers} x {width})",
                           loader_name=f"synthetic, {delay_s * 1e3:g} ms per batch")
    return res
