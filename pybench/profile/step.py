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
them the prediction of :func:`pybench.plan.ccr.ccr` for the same configuration
(strategy ddp, seq 1, fp32 gradients so 4 bytes per value, overlap in buckets of
the DDP bucket cap) from a gloo all-reduce model (a file fitted from
``--backend torch`` runs, or a quick sweep fitted on the spot in the same
process group) and a FLOP/s calibrated from the step's own GEMM shapes timed on
every rank at once; and a bucket-aware figure, the sum of the model's times for
DDP's real buckets (``pred_comm_buckets_s``).

The overlap half of the prediction uses an :class:`pybench.plan.overlap.OverlapProfile`
measured here without reading the synchronised steps (``pybench.profile.probes``):
when each bucket is ready and backward's share of the step (gradient hooks in the
no_sync steps), the host cores the buckets burn when all-reduced alone (which
slow compute while they are in flight), and DDP's copies into and out of its
buckets. Each row also keeps the prediction with each of these left out, so the
table shows what each one changes.

:func:`profile_step` does the same for a user's model and step function.
"""

from __future__ import annotations

import dataclasses
import math
import statistics
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

from pybench.errors import UsageError
from pybench.plan.overlap import OverlapProfile, compute_slowdown
from pybench.profile.probes import (
    GradReadiness,
    HostCpuMeter,
    bucket_ready_fractions,
    cores_available,
    machine_id,
    time_bucket_copies,
)

SCHEMA = "pybench.profile"
SCHEMA_VERSION = 1
COMM_PREFIXES = ("gloo:", "nccl:")
# Ops of the training thread that are not compute: wrappers, and the enqueue of collectives.
_NOT_COMPUTE = ("pybench.", "ProfilerStep", "c10d::", "gloo:", "nccl:", "record_param_comms")
# Up to 64 MiB: a tbf bucket lets small messages beat the link rate, so the sweep must reach the
# bucket sizes DDP sends (25 MiB caps, ~34 MB buckets) rather than extrapolate to them.
QUICK_SWEEP = (1 << 20, 1 << 22, 1 << 24, 1 << 25, 1 << 26)


# ---------------------------------------------------------------------------
# interval arithmetic

def merge(intervals):
    """Union of (start, end) intervals as a sorted list of disjoint intervals."""
    out: list[list[float]] = []
    for s, e in sorted((float(s), float(e)) for s, e in intervals if e > s):
        if out and s <= out[-1][1]:
            out[-1][1] = max(out[-1][1], e)
        else:
            out.append([s, e])
    return [(s, e) for s, e in out]


def total(intervals) -> float:
    return sum(e - s for s, e in merge(intervals))


def clip(intervals, lo: float, hi: float):
    return [(max(s, lo), min(e, hi)) for s, e in intervals if min(e, hi) > max(s, lo)]


def intersection(a, b) -> float:
    """Length of (union a) intersected with (union b)."""
    a, b = merge(a), merge(b)
    i = j = 0
    acc = 0.0
    while i < len(a) and j < len(b):
        lo, hi = max(a[i][0], b[j][0]), min(a[i][1], b[j][1])
        if hi > lo:
            acc += hi - lo
        if a[i][1] < b[j][1]:
            i += 1
        else:
            j += 1
    return acc


@dataclass(frozen=True)
class StepTrace:
    """One step of one rank from the profiler, in seconds."""

    step_s: float
    compute_s: float
    comm_s: float
    exposed_s: float
    overlap_s: float
    idle_s: float


def decompose(window, compute, comm) -> StepTrace:
    """Split a step window into compute, exposed communication and idle (overlap counted once)."""
    lo, hi = window
    c = merge(clip(compute, lo, hi))
    m = merge(clip(comm, lo, hi))
    compute_s, comm_s = total(c), total(m)
    overlap = intersection(c, m)
    exposed = comm_s - overlap
    step = hi - lo
    return StepTrace(step, compute_s, comm_s, exposed, overlap, max(0.0, step - compute_s - exposed))


def trace_steps(events, step_prefix: str = "pybench.step") -> list[StepTrace]:
    """Decompose every ``step_prefix*`` window of a torch.profiler event list (this rank)."""
    steps = [e for e in events if e.name.startswith(step_prefix)]
    if not steps:
        return []
    main = steps[0].thread
    compute, comm = [], []
    for e in events:
        iv = (e.time_range.start / 1e6, e.time_range.end / 1e6)
        if e.name.startswith(COMM_PREFIXES):
            comm.append(iv)
        elif e.thread == main and not e.name.startswith(_NOT_COMPUTE):
            compute.append(iv)
    out = []
    for s in sorted(steps, key=lambda e: e.time_range.start):
        out.append(decompose((s.time_range.start / 1e6, s.time_range.end / 1e6), compute, comm))
    return out


# ---------------------------------------------------------------------------
# results

@dataclass
class ProfileRow:
    batch: int
    steps: int
    buckets: int
    bucket_bytes: list
    grad_bytes: int
    compute_s: float            # median no_sync step, every rank at once
    step_s: float               # median synchronised step
    exposed_s: float            # median(sync step i - no_sync step i): the cross-check
    comm_s: float               # DDP's buckets all-reduced alone
    trace_step_s: float
    trace_compute_s: float
    trace_comm_s: float
    trace_exposed_s: float
    trace_overlap_s: float
    trace_idle_s: float
    ccr: float
    exposed_fraction: float
    pred_compute_s: float | None = None
    pred_comm_s: float | None = None
    pred_comm_buckets_s: float | None = None
    pred_exposed_s: float | None = None
    pred_ccr: float | None = None
    pred_exposed_fraction: float | None = None
    flops_per_s: float | None = None
    flops_source: str = ""
    # the overlap profile the prediction used (pybench.profile.probes), and what each part of it changed
    ready_fractions: list | None = None   # fraction of backward at which each bucket was ready (no_sync steps)
    backward_share: float | None = None   # backward / no_sync step
    comm_cpu_cores: float | None = None   # host cores busy while the buckets were all-reduced alone
    compute_slowdown: float | None = None  # compute throughput lost while a bucket is in flight
    copy_in_s: float | None = None        # DDP's copies into its buckets (and scaling), timed alone
    copy_out_s: float | None = None       # and back into the gradients
    pred_exposed_fraction_uniform: float | None = None    # readiness uniform, backward 2/3, no contention
    pred_exposed_fraction_readiness: float | None = None  # measured readiness and share, no contention
    pred_exposed_fraction_contention: float | None = None  # ... and contention, no bucket copies

    @property
    def trace_mismatch(self) -> float:
        """|trace compute + trace exposed - step| / step (the decomposition check)."""
        return abs(self.trace_compute_s + self.trace_exposed_s - self.step_s) / self.step_s if self.step_s else 0.0

    def to_dict(self) -> dict:
        d = asdict(self)
        d["trace_mismatch"] = self.trace_mismatch
        if self.pred_ccr is not None:
            d["ccr_diff"] = self.pred_ccr - self.ccr
            d["exposed_fraction_diff"] = self.pred_exposed_fraction - self.exposed_fraction
        return d


@dataclass
class ProfileResult:
    params: int
    world_size: int
    hosts: list
    link_class: str
    process_group: str
    torch_version: str
    strategy: str = "ddp"
    model: str = ""
    comm_model: str = ""
    rows: list = field(default_factory=list)
    notes: list = field(default_factory=list)

    def to_dict(self) -> dict:
        d = {k: v for k, v in asdict(self).items() if k != "rows"}
        d["rows"] = [r.to_dict() for r in self.rows]
        return {"schema": SCHEMA, "schema_version": SCHEMA_VERSION, **d}

    def table(self) -> str:
        lines = [f"# profile: {self.model}, {self.strategy}, {self.world_size} ranks ({self.link_class}), "
                 f"process group {self.process_group}, torch {self.torch_version}",
                 f"# comm model: {self.comm_model}",
                 "#  batch  buckets  compute_ms  comm_ms  step_ms  exposed_ms  trace_exp_ms  trace_idle_ms   "
                 "ccr  pred_ccr   diff  exposed  pred_exp   diff"]
        for r in self.rows:
            pc = "-" if r.pred_ccr is None else f"{r.pred_ccr:.3f}"
            pd = "-" if r.pred_ccr is None else f"{r.pred_ccr - r.ccr:+.3f}"
            pe = "-" if r.pred_exposed_fraction is None else f"{r.pred_exposed_fraction:.3f}"
            pde = "-" if r.pred_exposed_fraction is None else f"{r.pred_exposed_fraction - r.exposed_fraction:+.3f}"
            lines.append(f"  {r.batch:6d}  {r.buckets:7d}  {r.compute_s * 1e3:10.1f}  {r.comm_s * 1e3:7.1f}  "
                         f"{r.step_s * 1e3:7.1f}  {r.exposed_s * 1e3:10.1f}  {r.trace_exposed_s * 1e3:12.1f}  "
                         f"{r.trace_idle_s * 1e3:13.1f}  {r.ccr:.3f}  {pc:>8}  {pd:>5}  {r.exposed_fraction:7.3f}  "
                         f"{pe:>8}  {pde:>5}")
        for r in self.rows:
            if r.pred_comm_s is not None:
                lines.append(f"# batch {r.batch}: predicted compute {r.pred_compute_s * 1e3:.1f} ms "
                             f"({r.flops_source}), comm {r.pred_comm_s * 1e3:.1f} ms one call / "
                             f"{r.pred_comm_buckets_s * 1e3:.1f} ms over DDP's {r.buckets} buckets, "
                             f"exposed {r.pred_exposed_s * 1e3:.1f} ms")
            if r.pred_exposed_fraction_uniform is not None:
                ready = ("/".join(f"{f:.2f}" for f in r.ready_fractions) if r.ready_fractions
                         else "uniform (not measured)")
                share = "2/3 assumed" if r.backward_share is None else f"{r.backward_share:.2f} of the step"
                cores = "-" if r.comm_cpu_cores is None else f"{r.comm_cpu_cores:.2f}"
                lines.append(f"#   overlap: buckets ready at {ready} of backward ({share}); comm alone {cores} host "
                             f"cores, compute {r.compute_slowdown or 0:.0%} slower under it; bucket copies "
                             f"{(r.copy_in_s or 0) * 1e3:.1f} + {(r.copy_out_s or 0) * 1e3:.1f} ms; pred_exp uniform "
                             f"{r.pred_exposed_fraction_uniform:.3f} -> measured readiness "
                             f"{r.pred_exposed_fraction_readiness:.3f} -> + contention "
                             f"{r.pred_exposed_fraction_contention:.3f} -> + copies {r.pred_exposed_fraction:.3f}")
        lines += [f"# {n}" for n in self.notes]
        return "\n".join(lines)


# ---------------------------------------------------------------------------
# the synthetic model

def mlp_shape(params: int) -> tuple[int, int]:
    """(width, layers) of a square MLP with about ``params`` parameters (~5-10 layers)."""
    if params < 1000:
        raise UsageError(f"--params {params} is too small for a model; use e.g. 1M or 20M")
    width = 2 ** max(4, min(12, round(math.log2(math.sqrt(params / 6)))))
    layers = max(1, round(params / (width * width + width)))
    return width, layers


def make_mlp(params: int, seed: int = 0):
    """A float32 MLP (Linear + ReLU) with about ``params`` parameters; FLOPs per sample 6 x params."""
    import torch
    from torch import nn
    width, layers = mlp_shape(params)
    torch.manual_seed(seed)
    mods = []
    for i in range(layers):
        mods.append(nn.Linear(width, width))
        if i < layers - 1:
            mods.append(nn.ReLU())
    return nn.Sequential(*mods), width, layers


def mlp_step_fn(lr: float = 1e-3):
    """A step function for :func:`profile_step`: SGD on the mean squared output."""
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


def gemm_flops_per_s(width: int, layers: int, batch: int, repeats: int = 3, barrier=None) -> float:
    """FLOP/s of the step's GEMMs (forward and both backward GEMMs of every layer) at this batch,
    timed on every rank at once (call on all ranks; ``barrier`` aligns the start)."""
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


# ---------------------------------------------------------------------------
# communication model

def fit_quick_model(sizes: Sequence[int] = QUICK_SWEEP, samples: int = 3, link_class: str = "intra-node",
                    backend=None):
    """Fit a gloo all-reduce alpha-beta model from a short sweep in the current process group."""
    import numpy as np
    import torch
    import torch.distributed as dist

    from pybench.model.alpha_beta import fit_model
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
        times.append(float(np.median(x.numpy())))
    ms = MeasurementSet(source="pybench", collective="allreduce", backend="torch", world_size=world,
                        link_class=link_class, dtype="float32", size_bytes=np.array(sizes), time_s=np.array(times),
                        notes=("quick torch gloo all-reduce sweep inside pybench profile",))
    return fit_model(ms)


def _model_set(models, link_class: str):
    from pybench.plan.ccr import ModelSet, load_model_set
    if models is None:
        return None
    if isinstance(models, ModelSet):
        return models
    if isinstance(models, str):
        try:
            return load_model_set(models, backend="torch")
        except UsageError:
            ms = load_model_set(models)
            ms.notes.append(f"{models} has no torch models; using {ms.models[0].backend} "
                            "(fit one from --backend torch runs for a fair prediction)")
            return ms
    return ModelSet(list(models))


# ---------------------------------------------------------------------------
# measuring

def _median(xs):
    return float(statistics.median(xs)) if xs else float("nan")


def _bucket_sizes(ddp, grad_bytes: int) -> list[int]:
    try:
        d = ddp._get_ddp_logging_data()
        text = d.get("rebuilt_bucket_sizes") or d.get("bucket_sizes") or ""
        sizes = [int(x) for x in str(text).replace(",", " ").split()]
        if sizes and sum(sizes) > 0:
            return sizes
    except Exception:
        pass
    cap = int(getattr(ddp, "bucket_bytes_cap", 25 * 2**20))
    n = max(1, math.ceil(grad_bytes / cap))
    return [cap] * (n - 1) + [grad_bytes - cap * (n - 1)]


def _time_buckets(bucket_bytes: list[int], repeats: int, meter=None) -> float:
    """Median time of DDP's buckets all-reduced alone, issued asynchronously in order as DDP does.

    ``meter`` (a HostCpuMeter) measures the host's busy cores over each timed repeat."""
    import contextlib

    import torch
    import torch.distributed as dist
    bufs = [torch.zeros(max(1, b // 4), dtype=torch.float32) for b in bucket_bytes]
    times = []
    for r in range(repeats + 1):
        dist.barrier()
        with (meter if meter is not None and r else contextlib.nullcontext()):
            t0 = time.perf_counter()
            works = [dist.all_reduce(b, async_op=True) for b in bufs]
            for w in works:
                w.wait()
            elapsed = time.perf_counter() - t0
        if r:
            times.append(elapsed)
    x = torch.tensor(times, dtype=torch.float64)
    dist.all_reduce(x, op=dist.ReduceOp.MAX)
    return _median(x.tolist())


def _overlap_profile(hooks, buckets: list[int], meter, on_cpu: bool, threads_on_host: int,
                     copies: tuple[float, float]) -> tuple[OverlapProfile, float | None]:
    """The prediction's OverlapProfile from this batch's no_sync hooks and the comm-alone CPU meter.

    Per rank: medians over steps; then the slowest rank (max over ranks), since a bucket's
    all-reduce starts when every rank has it and the busiest host slows the step."""
    import torch
    import torch.distributed as dist
    per_step = []
    for taken, step_s in hooks:
        got = taken and bucket_ready_fractions(taken[0], taken[1], buckets)
        if got:
            per_step.append((got[0], got[1] / step_s if step_s > 0 else float("nan")))
    n = len(buckets)
    mine = [-1.0] * (n + 2) + list(copies)  # -1: not measured on this rank (MAX over ranks ignores it)
    if per_step:
        mine[:n] = [_median([f[k] for f, _ in per_step]) for k in range(n)]
        mine[n] = min(1.0, _median([s for _, s in per_step]))
    cores = meter.cores
    if cores is not None:
        mine[n + 1] = cores
    x = torch.tensor(mine, dtype=torch.float64)
    dist.all_reduce(x, op=dist.ReduceOp.MAX)
    v = x.tolist()
    fractions = tuple(v[:n]) if min(v[:n + 1]) >= 0 and v[n] > 0 else None
    share = v[n] if fractions else None
    comm_cores = v[n + 1] if v[n + 1] >= 0 else None
    copy_in, copy_out = v[n + 2], v[n + 3]
    slow = compute_slowdown(comm_cores, threads_on_host, cores_available()) if on_cpu and comm_cores else 0.0
    parts = ["bucket readiness and backward share from gradient hooks in the no_sync steps"
             if fractions else "readiness assumed uniform (no gradient hooks fired), backward 2/3"]
    if not on_cpu:
        parts.append("compute on the device: no CPU contention modelled")
    elif comm_cores is None:
        parts.append("no /proc/stat: no CPU contention modelled")
    else:
        parts.append(f"comm alone kept {comm_cores:.2f} host cores busy beside {threads_on_host} compute threads "
                     f"on {cores_available()} cores: compute {slow:.0%} slower while a bucket is in flight")
    parts.append(f"DDP's bucket copies timed as {copy_in * 1e3:.1f} ms in (with the 1/world scaling) and "
                 f"{copy_out * 1e3:.1f} ms out")
    return OverlapProfile(fractions, share, slow, copy_in_s=copy_in, copy_out_s=copy_out,
                          source="; ".join(parts)), comm_cores


def profile_step(model, step_fn: Callable, batch_sizes: Sequence[int], make_batch: Callable[[int], Any], *,
                 steps: int = 5, warmup: int = 2, bucket_mb: float = 25, models=None,
                 flops_per_sample: float | None = None, flops_per_s: Callable[[int], float] | float | None = None,
                 link_class: str | None = None, label: str = "") -> ProfileResult:
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
        Fitted alpha-beta models for the prediction; None fits a quick gloo sweep here.
    flops_per_sample : float, optional
        Training FLOPs per sample (default 6 x parameters).
    flops_per_s : callable or float, optional
        FLOP/s for the predicted compute, per batch size; default: calibrated from the
        no_sync steps (every rank at once), which makes predicted compute equal measured.
    link_class : str, optional
        intra-node or inter-node (default: from the hosts of the ranks).

    Returns
    -------
    ProfileResult (identical on every rank).
    """
    import torch
    import torch.distributed as dist
    from torch.nn.parallel import DistributedDataParallel as DDP
    from torch.profiler import ProfilerActivity, profile, record_function

    from pybench.measure.backends.torch import hostname
    from pybench.plan.ccr import ccr as predict_ccr

    if not dist.is_available() or not dist.is_initialized():
        raise UsageError("profile_step needs an initialised torch.distributed process group "
                         "(run under `python -m pybench profile`, torchrun, or TorchBackend().start())")
    if steps < 1 or warmup < 0:
        raise UsageError(f"steps must be at least 1 and warmup 0 or more, got {steps} and {warmup}")
    batches = [int(b) for b in batch_sizes]
    if not batches or min(batches) < 1:
        raise UsageError(f"batch sizes must be whole numbers >= 1, got {list(batch_sizes)}")
    world = dist.get_world_size()
    if world < 2:
        raise UsageError("profiling synchronisation needs at least 2 ranks; run with -n 2")
    hosts: list = [None] * world
    dist.all_gather_object(hosts, hostname())
    if link_class is None:
        link_class = "intra-node" if len(set(hosts)) == 1 else "inter-node"
    params = sum(p.numel() for p in model.parameters() if p.requires_grad)
    grad_bytes = sum(p.numel() * p.element_size() for p in model.parameters() if p.requires_grad)
    flops_per_sample = flops_per_sample or 6.0 * params
    pg = dist.get_backend()
    result = ProfileResult(params=params, world_size=world, hosts=hosts, link_class=link_class, process_group=pg,
                           torch_version=torch.__version__, model=label or type(model).__name__)

    model_set = _model_set(models, link_class)
    if model_set is None:
        from pybench.plan.ccr import ModelSet
        fitted = fit_quick_model(link_class=link_class)
        model_set = ModelSet([fitted])
        result.comm_model = (f"fitted here: torch {pg} all-reduce, {len(QUICK_SWEEP)} sizes "
                             f"{QUICK_SWEEP[0] >> 10} KiB..{QUICK_SWEEP[-1] >> 20} MiB, {fitted.report().splitlines()[0]}")
        result._fitted = fitted  # type: ignore[attr-defined]
    else:
        result.comm_model = (f"{models if isinstance(models, str) else 'given'}: "
                             + ", ".join(f"{m.collective}/{getattr(m, 'backend', '?')}/{m.link_class}/"
                                         f"{m.world_size} ranks" for m in model_set.models)
                             + (f"; {'; '.join(model_set.notes)}" if model_set.notes else ""))

    ddp = DDP(model, bucket_cap_mb=bucket_mb)
    readiness = GradReadiness(model)
    on_cpu = all(p.device.type == "cpu" for p in model.parameters())
    machines: list = [None] * world  # ranks in network namespaces are separate hosts but share the CPUs
    dist.all_gather_object(machines, machine_id())
    threads_on_host = torch.get_num_threads() * machines.count(machine_id())

    def barrier():
        dist.barrier()

    for b in batches:
        batch = make_batch(b)
        for _ in range(max(warmup, 2)):  # DDP rebuilds its buckets after the first step
            step_fn(ddp, batch)
        # Synchronised and no_sync steps interleaved (sync, no_sync, sync, ...), so that the drift of a
        # shared machine hits both alike; the profiler sees both, the trace reads the synchronised ones.
        sync_t, nosync_t, hooks = [], [], []
        with profile(activities=[ProfilerActivity.CPU]) as prof:
            for i in range(steps):
                barrier()
                t0 = time.perf_counter()
                with record_function(f"pybench.step{i}"):
                    step_fn(ddp, batch)
                sync_t.append(time.perf_counter() - t0)
                barrier()
                readiness.arm()
                t0 = time.perf_counter()
                with record_function(f"pybench.nosync{i}"), ddp.no_sync():
                    step_fn(ddp, batch)
                nosync_t.append(time.perf_counter() - t0)
                hooks.append((readiness.take(), nosync_t[-1]))
        traces = trace_steps(prof.events())
        buckets = _bucket_sizes(ddp, grad_bytes)  # as rebuilt by now (in the order backward makes them ready)
        step_fn(ddp, batch)  # one synchronised step: no_sync left gradients to be synchronised
        meter = HostCpuMeter()
        meter.baseline(barrier)
        comm_alone = _time_buckets(buckets, steps, meter)
        copies = time_bucket_copies(grad_bytes, world, next(model.parameters()).device,
                                    bool(getattr(ddp, "gradient_as_bucket_view", False)), barrier=barrier)
        ovl, comm_cores = _overlap_profile(hooks, buckets, meter, on_cpu, threads_on_host, copies)

        # Each step's time is the slowest rank's (the synchronous cost), identical on every rank;
        # exposed = median of the paired differences (sync i - no_sync i).
        x = torch.tensor(sync_t + nosync_t, dtype=torch.float64)
        dist.all_reduce(x, op=dist.ReduceOp.MAX)
        xs = x.tolist()
        sync_max, nosync_max = xs[:steps], xs[steps:]
        step_s, compute_s = _median(sync_max), _median(nosync_max)
        exposed_s = max(0.0, _median([a - b for a, b in zip(sync_max, nosync_max)]))
        # The trace: each rank's median step (whole, so its parts still add up), then the slowest rank's.
        if traces:
            mid = sorted(traces, key=lambda t: t.step_s)[(len(traces) - 1) // 2]
            mine = [mid.step_s, mid.compute_s, mid.comm_s, mid.exposed_s, mid.overlap_s, mid.idle_s]
        else:
            mine = [0.0] * 6
        gathered = [torch.zeros(6, dtype=torch.float64) for _ in range(world)]
        dist.all_gather(gathered, torch.tensor(mine, dtype=torch.float64))
        t_step, t_comp, t_comm, t_exp, t_ovl, t_idle = max((g.tolist() for g in gathered), key=lambda v: v[0])
        row = ProfileRow(batch=b, steps=steps, buckets=len(buckets), bucket_bytes=buckets, grad_bytes=grad_bytes,
                         compute_s=compute_s, step_s=step_s, exposed_s=exposed_s, comm_s=comm_alone,
                         trace_step_s=t_step, trace_compute_s=t_comp, trace_comm_s=t_comm, trace_exposed_s=t_exp,
                         trace_overlap_s=t_ovl, trace_idle_s=t_idle,
                         ccr=comm_alone / (comm_alone + compute_s), exposed_fraction=exposed_s / step_s)

        # prediction
        if callable(flops_per_s):
            fps, source = float(flops_per_s(b)), "GEMMs at the step's shapes, every rank at once"
        elif flops_per_s:
            fps, source = float(flops_per_s), "given"
        else:
            fps, source = flops_per_sample * b / compute_s, "calibrated from the no_sync steps"
        fps_t = torch.tensor([fps], dtype=torch.float64)
        dist.all_reduce(fps_t, op=dist.ReduceOp.MIN)  # the slowest rank sets the pace
        fps = float(fps_t.item())
        def predict(overlap_profile):
            return predict_ccr(params, seq=1, batch=b, world=world, strategy="ddp", models=model_set,
                               flops_per_s=fps * flops_per_sample / (6.0 * params),
                               gpus_per_node=world if link_class == "intra-node" else 1, overlap=True,
                               bucket_mb=bucket_mb, comm_bytes_per_value=grad_bytes // max(params, 1),
                               device_memory_gb=1e6, bucket_sizes_bytes=buckets,
                               overlap_profile=overlap_profile).rows[0]
        try:
            est = predict(ovl)
            row.pred_exposed_fraction_uniform = predict(None).exposed_fraction
            row.pred_exposed_fraction_readiness = predict(
                dataclasses.replace(ovl, compute_slowdown=0.0, copy_in_s=0.0, copy_out_s=0.0)).exposed_fraction
            row.ready_fractions = list(ovl.ready_fractions) if ovl.ready_fractions else None
            row.backward_share, row.compute_slowdown = ovl.backward_share, ovl.compute_slowdown
            row.copy_in_s, row.copy_out_s = ovl.copy_in_s, ovl.copy_out_s
            row.pred_exposed_fraction_contention = predict(
                dataclasses.replace(ovl, copy_in_s=0.0, copy_out_s=0.0)).exposed_fraction
            row.comm_cpu_cores = comm_cores
            row.pred_compute_s, row.pred_comm_s, row.pred_exposed_s = est.compute_s, est.comm_s, est.exposed_s
            row.pred_ccr, row.pred_exposed_fraction = est.ccr, est.exposed_fraction
            row.pred_comm_buckets_s = sum(model_set.time("allreduce", s, world, link_class).time_s for s in buckets)
            row.flops_per_s, row.flops_source = fps, source
        except UsageError as exc:
            result.notes.append(f"batch {b}: no prediction ({exc})")
        result.rows.append(row)

    result.notes += [
        "ccr = comm / (comm + compute): comm = DDP's buckets all-reduced alone, compute = no_sync step "
        "(every rank at once); exposed fraction = median(synchronised step - no_sync step, interleaved pairs) / "
        "synchronised step",
        "trace: torch.profiler, per rank, compute = ops of the training thread, comm = gloo/nccl ops of the "
        "process group's threads, unions so overlap counts once; medians over steps, max over ranks",
        "prediction: pybench.plan.ccr.ccr(strategy ddp, seq 1, 4 B per gradient value, DDP's real buckets); pred_ccr is "
        "its CCR (no overlap, as measured ccr), pred_exp its exposed fraction with overlap in DDP's real buckets, "
        "each going out when its gradients are ready (timed by hooks in the no_sync steps), slowing compute by "
        "the share of the cores the buckets burn alone, plus DDP's copies into and out of its buckets "
        "(pybench.plan.overlap)",
    ]
    if result.rows and result.rows[-1].pred_exposed_fraction is not None:
        result.notes.append("overlap profile (last batch): " + ovl.source)
    if any(r.pred_exposed_fraction is not None and r.exposed_fraction > r.pred_exposed_fraction + 0.05
           for r in result.rows):
        result.notes.append("overlap hid less than predicted: when communication needs the same CPU cores as "
                            "backward (gloo reduces and copies on the CPU, TCP on the kernel), the overlapped "
                            "part slows compute instead of hiding; compare exposed with ccr (no overlap)")
    readiness.close()
    del ddp
    return result


# ---------------------------------------------------------------------------
# the CLI's rank program

def run_profile_rank(params: int, batches: Sequence[int], steps: int = 5, warmup: int = 2, bucket_mb: float = 25,
                     models: str | None = None, calibrate: str = "gemm", strategy: str = "ddp",
                     save_model: str | None = None) -> ProfileResult:
    """What each rank of ``pybench profile`` does (process group already initialised)."""
    import torch
    import torch.distributed as dist
    if strategy != "ddp":
        raise UsageError(f"profile measures --strategy ddp only (got {strategy!r}); "
                         "other strategies are predicted by `pybench ccr`")
    torch.set_num_threads(1)  # one core per rank: ranks share the machine's cores as the CPU benchmarks do
    model, width, layers = make_mlp(params)
    n_params = sum(p.numel() for p in model.parameters())

    def make_batch(b):
        g = torch.Generator().manual_seed(1000 + dist.get_rank())
        return torch.randn(b, width, generator=g)

    cache: dict[int, float] = {}

    def gemm_fps(b):
        if b not in cache:
            cache[b] = gemm_flops_per_s(width, layers, b, barrier=dist.barrier)
        return cache[b]
    res = profile_step(model, mlp_step_fn(), batches, make_batch, steps=steps, warmup=warmup, bucket_mb=bucket_mb,
                       models=models, flops_per_s=gemm_fps if calibrate == "gemm" else None,
                       label=f"MLP {layers} x Linear({width}, {width}) = {n_params / 1e6:.1f}M params, fp32, SGD")
    fitted = getattr(res, "_fitted", None)
    if save_model and fitted is not None and dist.get_rank() == 0:
        from pybench.model.alpha_beta import save_models
        save_models([fitted], save_model, overwrite=True)
        res.notes.append(f"quick gloo model saved to {save_model}")
    return res
