"""The communication model a profile predicts with: a fitted file, given models, or a quick sweep here."""

from __future__ import annotations

import statistics
import time
from collections.abc import Sequence
from typing import Any

from pybench.errors import UsageError

__all__ = ["QUICK_SWEEP", "describe_models", "describe_quick_model", "fit_quick_model", "model_set_for"]

# Up to 64 MiB: a tbf bucket lets small messages beat the link rate, so the sweep must reach the
# bucket sizes DDP sends (25 MiB caps, ~34 MB buckets) rather than extrapolate to them; from 64 KiB: a
# smaller --bucket-mb sends buckets below 1 MiB, where a sweep that starts above them may leave its latency
# unresolved and say nothing of their time.
QUICK_SWEEP = (1 << 16, 1 << 18, 1 << 20, 1 << 22, 1 << 24, 1 << 25, 1 << 26)


def fit_quick_model(sizes: Sequence[int] = QUICK_SWEEP, samples: int = 3, link_class: str = "intra-node"):
    """Fit an all-reduce alpha-beta model from a short sweep in the current process group.

    Call on every rank; every rank returns the same model (times max-reduced over ranks).
    """
    import numpy as np
    import torch
    import torch.distributed as dist

    from pybench.model.build import fit_model
    from pybench.model.logs.measurements import MeasurementSet
    world = dist.get_world_size()
    times = []
    for size in sizes:
        t = torch.ones(size // 4, dtype=torch.float32)
        dist.all_reduce(t)
        per = []
        for _ in range(samples):
            dist.barrier()
            t0 = time.perf_counter()
            dist.all_reduce(t)
            per.append(time.perf_counter() - t0)
        x = torch.tensor(per, dtype=torch.float64)
        dist.all_reduce(x, op=dist.ReduceOp.MAX)
        times.append(float(statistics.median(x.tolist())))
    ms = MeasurementSet(source="pybench", collective="allreduce", backend="torch", world_size=world,
                        link_class=link_class, dtype="float32", size_bytes=np.array(sizes), time_s=np.array(times),
                        notes=("quick torch gloo all-reduce sweep inside pybench profile",))
    return fit_model(ms)


def model_set_for(models: Any):
    """A :class:`pybench.planning.ccr.ModelSet` from ``models``, or None (fit a quick sweep).

    ``models``: None, a ModelSet, a model file's path (its torch models preferred) or a list of models.
    """
    from pybench.planning.ccr import ModelSet, load_model_set
    if models is None:
        return None
    if isinstance(models, ModelSet):
        return models
    if isinstance(models, str):
        try:
            return load_model_set(models, backend="torch")
        except UsageError:
            ms = load_model_set(models)
            ms.notes.append(f"{models} has no torch models; using {getattr(ms.models[0], 'backend', '?')} "
                            "(fit one from torch backend runs for a fair prediction)")
            return ms
    return ModelSet(list(models))


def describe_models(models: Any, model_set) -> str:
    """One line saying which models the prediction uses."""
    name = models if isinstance(models, str) else "given"
    used = ", ".join(f"{m.collective}/{getattr(m, 'backend', '?')}/{m.link_class}/{m.world_size} ranks"
                     for m in model_set.models)
    notes = f"; {'; '.join(model_set.notes)}" if model_set.notes else ""
    return f"{name}: {used}{notes}"


def describe_quick_model(fitted, process_group: str) -> str:
    """One line saying how the on-the-spot model was fitted."""
    return (f"fitted here: torch {process_group} all-reduce, {len(QUICK_SWEEP)} sizes "
            f"{QUICK_SWEEP[0] >> 10} KiB..{QUICK_SWEEP[-1] >> 20} MiB, {fitted.report().splitlines()[0]}")
