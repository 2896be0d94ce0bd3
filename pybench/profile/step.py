"""Reality check: the measured CCR of a real training step beside pybench's prediction.

Each rank runs K real training steps of a model under torch
DistributedDataParallel (gloo on CPU) and measures, per batch size:

- ``compute_s``: the median step with gradient synchronisation switched off
  (``DDP.no_sync()``), every rank running at once (on shared cores that is what
  the synchronised step competes with; one rank alone reads 1.0-1.6x faster);
- ``step_s``: the median synchronised step (max over ranks, as every figure here);
- ``exposed_s``: what synchronisation adds (the cross-check): the median of the
  paired differences synchronised step i - no_sync step i, the two kinds run
  interleaved so that a shared machine's drift hits both alike;
- from torch.profiler traces of the synchronised steps, per rank: compute
  intervals (the ops of the training thread) and communication intervals (the
  ``gloo:all_reduce`` / ``nccl:`` ops on the process group's threads), each
  merged so that overlap is counted once; ``trace_comm_s`` = their union,
  ``trace_exposed_s`` = communication not under compute, ``trace_idle_s`` =
  step time under neither. compute + exposed + idle = step by construction;
  the check is that trace compute + trace exposed agrees with the timed step
  (``trace_mismatch``); the trace figures are the slowest rank's median step;
- ``comm_s``: the gradient exchange alone: DDP's own buckets (read from the
  reducer after it rebuilds them) all-reduced back to back, as DDP issues them,
  with no compute running.

Measured ``ccr = comm_s / (comm_s + compute_s)`` (the DESIGN definition: the
step without overlap) and ``exposed_fraction = exposed_s / step_s``. Beside
them the prediction of :func:`pybench.planning.ccr.ccr` for the same configuration
(strategy ddp, seq 1, fp32 gradients so 4 bytes per value, overlap in buckets of
the DDP bucket cap) from a gloo all-reduce model (a file fitted from
``--backend torch`` runs, or a quick sweep fitted on the spot in the same
process group) and a FLOP/s calibrated from the step's own GEMM shapes timed on
every rank at once; and a bucket-aware figure, the sum of the model's times for
DDP's real buckets (``pred_comm_buckets_s``).

The overlap half of the prediction uses an :class:`pybench.planning.overlap.OverlapProfile`
measured here without reading the synchronised steps (``pybench.profile.probes``):
when each bucket is ready and backward's share of the step (gradient hooks in the
no_sync steps), the host cores the buckets burn when all-reduced alone (which
slow compute while they are in flight), and DDP's copies into and out of its
buckets. Each row also keeps the prediction with each of these left out, so the
table shows what each one changes.

:func:`profile_step` does the same for a user's model and step function. The parts live
beside it: ``runner`` (one batch size measured), ``trace`` (the trace decomposition),
``overlap_profile`` (the probes agreed over ranks), ``predict`` (the prediction beside a
row), ``comm`` (the communication model), ``result`` (rows, document, table), ``trace_files``
(the traces saved for Perfetto), ``mlp`` (the synthetic model) and ``rank`` (what each rank of
``pybench profile`` runs).
"""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from typing import Any

from pybench.errors import UsageError
from pybench.profile.comm import describe_models, describe_quick_model, fit_quick_model, model_set_for
from pybench.profile.predict import FlopsSpec, StepPredictor
from pybench.profile.probes import GradReadiness, machine_id
from pybench.profile.result import ProfileResult
from pybench.profile.runner import StepRunner
from pybench.profile.trace_files import ChromeTraceSink, silence_kineto, trace_dir_path, trace_file_names

__all__ = ["profile_step"]

_METHOD_NOTES = [
    "ccr = comm / (comm + compute): comm = DDP's buckets all-reduced alone, compute = no_sync step "
    "(every rank at once); exposed fraction = median(synchronised step - no_sync step, interleaved pairs) / "
    "synchronised step",
    "trace: torch.profiler, per rank, compute = ops of the training thread, comm = gloo/nccl ops of the "
    "process group's threads, unions so overlap counts once; medians over steps, max over ranks",
    "prediction: pybench.ccr(strategy ddp, seq 1, 4 B per gradient value, DDP's real buckets); pred_ccr is "
    "its CCR (no overlap, as measured ccr), pred_exp its exposed fraction with overlap in DDP's real buckets, "
    "each going out when its gradients are ready (timed by hooks in the no_sync steps), slowing compute by "
    "the share of the cores the buckets burn alone, plus DDP's copies into and out of its buckets "
    "(pybench.planning.overlap)",
]
_HID_LESS = ("overlap hid less than predicted: when communication needs the same CPU cores as "
             "backward (gloo reduces and copies on the CPU, TCP on the kernel), the overlapped "
             "part slows compute instead of hiding; compare exposed with ccr (no overlap)")


def profile_step(model, step_fn: Callable, batch_sizes: Sequence[int], make_batch: Callable[[int], Any], *,
                 steps: int = 5, warmup: int = 2, bucket_mb: float = 25, models=None,
                 flops_per_sample: float | None = None, flops_per_s: FlopsSpec = None,
                 link_class: str | None = None, label: str = "",
                 trace_dir: str | os.PathLike | None = None) -> ProfileResult:
    """Measure compute, communication and exposed communication of a DDP step; predict beside it.

    Call on every rank of an initialised torch.distributed process group (the
    ``pybench profile`` command, torchrun, or ``pybench.measure.backends.torch.TorchBackend().start()``).

    Parameters
    ----------
    model : torch.nn.Module
        The model (not yet wrapped); it is wrapped in DistributedDataParallel here.
    step_fn : callable
        ``step_fn(ddp_model, batch)``: one training step (forward, backward, optimizer step).
    batch_sizes : sequence of int
        Per-rank batch sizes to measure.
    make_batch : callable
        ``make_batch(batch_size)`` -> the batch ``step_fn`` takes.
    steps, warmup : int
        Measured steps per mode (synchronised, no_sync, comm alone) and untimed steps first.
    bucket_mb : float
        DDP's bucket cap (MiB).
    models : str, ModelSet or list of models, optional
        Fitted alpha-beta models for the prediction; None fits a quick all-reduce sweep here.
    flops_per_sample : float, optional
        Training FLOPs per sample (default 6 x parameters).
    flops_per_s : callable or float, optional
        FLOP/s for the predicted compute, per batch size; default: calibrated from the
        no_sync steps (every rank at once), which makes predicted compute equal measured.
    link_class : str, optional
        intra-node or inter-node (default: from the hosts of the ranks).
    label : str, optional
        The model's name in the result (default: its class name).
    trace_dir : path, optional
        An existing folder: each rank saves there the torch.profiler trace of each batch
        size (Chrome trace JSON, ``profile_batch{B}_rank{R}.json``; open in Perfetto).

    kineto's own log lines are silenced unless ``KINETO_LOG_LEVEL`` is set.

    Returns
    -------
    ProfileResult
        Identical on every rank.

    Raises
    ------
    UsageError
        Without an initialised process group of at least 2 ranks, or for a bad parameter.
    """
    dist = _process_group()
    batches = _checked(steps, warmup, bucket_mb, batch_sizes)
    sink = ChromeTraceSink(trace_dir, dist.get_rank()) if trace_dir is not None else None
    silence_kineto()
    result = _new_result(model, link_class, label)
    predictor = _predictor(model, result, models, bucket_mb, flops_per_sample, flops_per_s)
    runner = _step_runner(model, step_fn, predictor.grad_bytes, steps, warmup, bucket_mb)
    runner.trace_sink = sink
    source = ""
    try:
        for b in batches:
            m = runner.measure(b, make_batch(b))
            try:
                predictor.fill(m)
                source = m.overlap.source
            except UsageError as exc:
                result.notes.append(f"batch {b}: no prediction ({exc})")
            result.rows.append(m.row)
    finally:
        runner.readiness.close()
    result.notes += _closing_notes(result, source)
    if trace_dir is not None:
        result.trace_files = trace_file_names(trace_dir_path(trace_dir), batches, result.world_size)
        result.notes.append(f"torch.profiler traces (Chrome trace JSON; open in https://ui.perfetto.dev): "
                            f"{trace_dir}/profile_batch<B>_rank<R>.json, {len(result.trace_files)} files")
    del runner  # and DDP with it
    return result


def _step_runner(model, step_fn: Callable, grad_bytes: int, steps: int, warmup: int, bucket_mb: float) -> StepRunner:
    """The model wrapped in DDP, with gradient hooks, and what the host's CPUs are shared with."""
    import torch
    import torch.distributed as dist
    from torch.nn.parallel import DistributedDataParallel as DDP
    ddp = DDP(model, bucket_cap_mb=bucket_mb)
    readiness = GradReadiness(model)
    machines: list = [None] * dist.get_world_size()  # ranks in network namespaces are separate hosts, one CPU
    dist.all_gather_object(machines, machine_id())
    return StepRunner(ddp, model, step_fn, readiness, grad_bytes, steps, warmup,
                      on_cpu=all(p.device.type == "cpu" for p in model.parameters()),
                      threads_on_host=torch.get_num_threads() * machines.count(machine_id()))


def _process_group():
    """torch.distributed, initialised, or a one-line UsageError."""
    import torch.distributed as dist
    if not dist.is_available() or not dist.is_initialized():
        raise UsageError("profile_step needs an initialised torch.distributed process group "
                         "(run under `python -m pybench profile`, torchrun, or TorchBackend().start())")
    if dist.get_world_size() < 2:
        raise UsageError(f"profiling synchronisation needs at least 2 ranks, the process group has "
                         f"{dist.get_world_size()}")
    return dist


def _checked(steps: int, warmup: int, bucket_mb: float, batch_sizes: Sequence[int]) -> list[int]:
    """The batch sizes as ints, after checking every count parameter."""
    if steps < 1 or warmup < 0:
        raise UsageError(f"steps must be at least 1 and warmup 0 or more, got {steps} and {warmup}")
    if not bucket_mb > 0:
        raise UsageError(f"bucket_mb must be positive, got {bucket_mb}")
    batches = [int(b) for b in batch_sizes]
    if not batches or min(batches) < 1:
        raise UsageError(f"batch_sizes must be whole numbers >= 1, got {list(batch_sizes)}")
    return batches


def _new_result(model, link_class: str | None, label: str) -> ProfileResult:
    """An empty result with the group's facts (host names gathered from every rank)."""
    import torch
    import torch.distributed as dist

    from pybench.measure.backends.torch_options import hostname
    world = dist.get_world_size()
    hosts: list = [None] * world
    dist.all_gather_object(hosts, hostname())
    if link_class is None:
        link_class = "intra-node" if len(set(hosts)) == 1 else "inter-node"
    params = sum(p.numel() for p in model.parameters() if p.requires_grad)
    return ProfileResult(params=params, world_size=world, hosts=hosts, link_class=link_class,
                         process_group=str(dist.get_backend()), torch_version=torch.__version__,
                         model=label or type(model).__name__)


def _predictor(model, result: ProfileResult, models, bucket_mb: float, flops_per_sample: float | None,
               flops_per_s: FlopsSpec) -> StepPredictor:
    """The predictor, with the models given or a quick sweep fitted here (recorded in ``result``)."""
    from pybench.planning.ccr import ModelSet
    model_set = model_set_for(models)
    if model_set is None:
        result.fitted = fit_quick_model(link_class=result.link_class)
        model_set = ModelSet([result.fitted])
        result.comm_model = describe_quick_model(result.fitted, result.process_group)
    else:
        result.comm_model = describe_models(models, model_set)
    grad_bytes = sum(p.numel() * p.element_size() for p in model.parameters() if p.requires_grad)
    return StepPredictor(result.params, result.world_size, result.link_class, model_set, bucket_mb, grad_bytes,
                         flops_per_sample or 6.0 * result.params, flops_per_s)


def _closing_notes(result: ProfileResult, overlap_source: str) -> list[str]:
    notes = list(_METHOD_NOTES)
    if result.rows and result.rows[-1].pred_exposed_fraction is not None and overlap_source:
        notes.append("overlap profile (last batch): " + overlap_source)
    if any(r.pred_exposed_fraction is not None and r.exposed_fraction > r.pred_exposed_fraction + 0.05
           for r in result.rows):
        notes.append(_HID_LESS)
    return notes
