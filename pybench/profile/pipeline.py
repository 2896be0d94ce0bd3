"""One device's training step split into data wait, host-to-device copy, forward, backward and optimizer.

:func:`profile_pipeline` runs a user's model on a user's data loader under torch.profiler,
each part of every step inside its own ``record_function`` range (``pybench.pipeline.<part>``),
and reads the parts' durations back from the profiler's events. On a CUDA device the
host waits for the device at the end of each part, so that a range covers the device's
work and not only its launch: the split is of a serialised step, and its parts add up
to the step.

The data wait is the time blocked in ``next(loader)``. For a loader that works inside
``next`` (no worker processes), batch / data wait is the rate the loader sustains. A
loader that prefetches in workers is waited on only for what the compute did not hide,
so batch / data wait overstates its rate; the loader bounds the step all the same when
the wait is longer than the compute.
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from typing import Any

from pybench.errors import UsageError
from pybench.profile.pipeline_result import PART_NAMES, PipelineResult, PipelineRow
from pybench.profile.trace_files import silence_kineto

__all__ = ["default_to_device", "profile_pipeline"]

RANGE_PREFIX = "pybench.pipeline."
STEP_RANGE = RANGE_PREFIX + "step"

LoaderSource = Iterable[Any] | Callable[[int], Iterable[Any]]


def default_to_device(batch: Any, device: Any) -> Any:
    """``batch`` with every tensor in it (nested in tuples, lists and dicts) moved to ``device``.

    A tensor in pinned memory is copied without blocking the host (the part's end waits for it).
    """
    import torch
    if isinstance(batch, torch.Tensor):
        return batch.to(device, non_blocking=batch.is_pinned())
    if isinstance(batch, dict):
        return {k: default_to_device(v, device) for k, v in batch.items()}
    if isinstance(batch, (list, tuple)):
        return type(batch)(default_to_device(v, device) for v in batch)
    return batch


def _batch_len(batch: Any) -> int | None:
    """The first dimension of the first tensor in ``batch`` (its sample count), None if it holds no tensor."""
    import torch
    if isinstance(batch, torch.Tensor):
        return int(batch.shape[0]) if batch.dim() else None
    items = batch.values() if isinstance(batch, dict) else batch if isinstance(batch, (list, tuple)) else ()
    for v in items:
        n = _batch_len(v)
        if n is not None:
            return n
    return None


def _syncer(device: Any) -> Callable[[], None]:
    import torch
    if device.type == "cuda":
        return lambda: torch.cuda.synchronize(device)
    return lambda: None


def _run_steps(model: Any, batches: Iterator[Any], loss_fn: Callable[[Any, Any], Any], optimizer: Any,
               to_device: Callable[[Any, Any], Any], device: Any, count: int,
               done: int = 0) -> tuple[list[float], list[Any]]:
    """(seconds of each whole step, each step's batch as loaded); every part inside its own range.

    ``done``: batches taken from ``batches`` before (to say how many a loader that ran out gave).
    """
    from torch.profiler import record_function
    sync = _syncer(device)
    step_s, loaded = [], []
    for i in range(count):
        t0 = time.perf_counter()
        with record_function(STEP_RANGE):
            with record_function(RANGE_PREFIX + "data_wait"):
                try:
                    batch = next(batches)
                except StopIteration:
                    raise UsageError(f"the loader ran out after {done + i} batches; steps and warmup need "
                                     f"{done + count}") from None
            loaded.append(batch)
            with record_function(RANGE_PREFIX + "h2d"):
                on_device = to_device(batch, device)
                sync()
            with record_function(RANGE_PREFIX + "forward"):
                loss = loss_fn(model, on_device)
                sync()
            with record_function(RANGE_PREFIX + "backward"):
                loss.backward()
                sync()
            with record_function(RANGE_PREFIX + "optimizer"):
                optimizer.step()
                optimizer.zero_grad(set_to_none=True)
                sync()
        step_s.append(time.perf_counter() - t0)
    return step_s, loaded


def _part_medians(events: Sequence[Any]) -> dict[str, float]:
    """Median seconds of each part's ranges and of the step's, from the profiler's events."""
    durations: dict[str, list[float]] = {name: [] for name in (*PART_NAMES, "step")}
    for e in events:
        if e.name.startswith(RANGE_PREFIX):
            part = e.name[len(RANGE_PREFIX):]
            if part in durations:
                durations[part].append((e.time_range.end - e.time_range.start) / 1e6)
    return {k: float(statistics.median(v)) if v else float("nan") for k, v in durations.items()}


def _measure_one(model: Any, loader: Iterable[Any], batch_size: int | None, loss_fn: Callable[[Any, Any], Any],
                 optimizer: Any, to_device: Callable[[Any, Any], Any], device: Any, steps: int,
                 warmup: int) -> PipelineRow:
    """Warm up, then ``steps`` profiled steps on one loader: the row of its batch size."""
    from torch.profiler import ProfilerActivity, profile
    batches = iter(loader)
    _run_steps(model, batches, loss_fn, optimizer, to_device, device, warmup)
    with profile(activities=[ProfilerActivity.CPU]) as prof:
        step_s, loaded = _run_steps(model, batches, loss_fn, optimizer, to_device, device, steps, warmup)
    size = batch_size if batch_size is not None else _batch_len(loaded[0])
    if size is None:
        raise UsageError("batches hold no tensor to count samples by; give batches=[SIZE]")
    p = _part_medians(prof.events())
    return PipelineRow(batch=size, steps=steps, data_wait_s=p["data_wait"], h2d_s=p["h2d"], forward_s=p["forward"],
                       backward_s=p["backward"], optimizer_s=p["optimizer"],
                       step_s=float(statistics.median(step_s)), trace_step_s=p["step"])


def _check_args(loader: LoaderSource, batches: Sequence[int] | None, steps: int, warmup: int) -> list[int | None]:
    """The batch sizes to measure (None: one loader, its batch size read from its batches)."""
    if isinstance(steps, bool) or not isinstance(steps, int) or steps < 1:
        raise UsageError(f"steps must be a whole number of at least 1, got {steps!r}")
    if isinstance(warmup, bool) or not isinstance(warmup, int) or warmup < 0:
        raise UsageError(f"warmup must be a whole number of at least 0, got {warmup!r}")
    if batches is not None:
        bad = [b for b in batches if isinstance(b, bool) or not isinstance(b, int) or b < 1]
        if bad or not batches:
            raise UsageError(f"batches must be whole numbers of at least 1, got {list(batches)!r}")
    if callable(loader):
        if batches is None:
            raise UsageError("a loader factory (batch size -> loader) needs batches=[...]")
        return list(batches)
    if batches is not None and len(batches) != 1:
        raise UsageError("one loader has one batch size: give batches=[SIZE] or a factory (batch size -> loader)")
    return [batches[0] if batches else None]


def profile_pipeline(model: Any, loader: LoaderSource, loss_fn: Callable[[Any, Any], Any], optimizer: Any, *,
                     batches: Sequence[int] | None = None, steps: int = 5, warmup: int = 2, device: Any = None,
                     to_device: Callable[[Any, Any], Any] = default_to_device, name: str = "",
                     loader_name: str = "") -> PipelineResult:
    """Split one device's training step into data wait, copy, forward, backward and optimizer, per batch size.

    Parameters
    ----------
    model : torch.nn.Module
        The model, already on ``device``.
    loader : iterable or callable
        The data loader (any iterable of batches, e.g. a ``torch.utils.data.DataLoader``), or a
        factory ``batch_size -> loader`` to measure each size in ``batches``.
    loss_fn : callable
        ``loss_fn(model, batch_on_device) -> loss``: the forward pass, returning a scalar tensor.
    optimizer : torch.optim.Optimizer
        Stepped and zeroed after each backward.
    batches : sequence of int, optional
        Batch sizes (with a factory); with one loader, at most its own size (read from the
        first tensor of its batches when not given).
    steps, warmup : int
        Profiled steps per batch size (medians are reported) and untimed steps before them;
        the loader must yield ``warmup + steps`` batches.
    device : torch.device or str, optional
        Where the step runs (default: the device of the model's first parameter).
    to_device : callable
        ``to_device(batch, device) -> batch``, the host-to-device copy (default: every tensor moved).
    name, loader_name : str
        How the result names the model and the loader.

    Returns
    -------
    PipelineResult
        One row per batch size: each part's median seconds, loader and compute samples/s, the bound.
    """
    import torch
    sizes = _check_args(loader, batches, steps, warmup)
    silence_kineto()
    dev = torch.device(device) if device is not None else next(model.parameters()).device
    rows = []
    for b in sizes:
        source: Iterable[Any] = loader(b) if callable(loader) and b is not None else loader  # type: ignore[assignment]
        rows.append(_measure_one(model, source, b, loss_fn, optimizer, to_device, dev, steps, warmup))
    return PipelineResult(model=name or type(model).__name__, device=str(dev),
                          loader=loader_name or type(loader).__name__, torch_version=torch.__version__,
                          warmup=warmup, rows=rows)
