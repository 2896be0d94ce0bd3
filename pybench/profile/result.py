"""The result of profiling a step: one row per batch size, its JSON document and its text table."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field, fields
from typing import Any

from pybench.io.files import null_non_finite
from pybench.io.formats import PROFILE, stamp

__all__ = ["ProfileResult", "ProfileRow"]


@dataclass
class ProfileRow:
    """Measured and predicted figures of one batch size (seconds; the slowest rank's)."""

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

    def to_dict(self) -> dict[str, Any]:
        """The row as JSON values (a figure that could not be measured, nan or inf, as null)."""
        d = asdict(self)
        d["trace_mismatch"] = self.trace_mismatch
        if self.pred_ccr is not None and self.pred_exposed_fraction is not None:
            d["ccr_diff"] = self.pred_ccr - self.ccr
            d["exposed_fraction_diff"] = self.pred_exposed_fraction - self.exposed_fraction
        return {k: null_non_finite(v) for k, v in d.items()}

    def table_line(self) -> str:
        """This row in the table's columns."""
        pc = "-" if self.pred_ccr is None else f"{self.pred_ccr:.3f}"
        pd = "-" if self.pred_ccr is None else f"{self.pred_ccr - self.ccr:+.3f}"
        pef = self.pred_exposed_fraction
        pe = "-" if pef is None else f"{pef:.3f}"
        pde = "-" if pef is None else f"{pef - self.exposed_fraction:+.3f}"
        return (f"  {self.batch:6d}  {self.buckets:7d}  {self.compute_s * 1e3:10.1f}  {self.comm_s * 1e3:7.1f}  "
                f"{self.step_s * 1e3:7.1f}  {self.exposed_s * 1e3:10.1f}  {self.trace_exposed_s * 1e3:12.1f}  "
                f"{self.trace_idle_s * 1e3:13.1f}  {self.ccr:.3f}  {pc:>8}  {pd:>5}  {self.exposed_fraction:7.3f}  "
                f"{pe:>8}  {pde:>5}")

    def prediction_lines(self) -> list[str]:
        """The prediction's parts (comment lines under the table); none when nothing was predicted."""
        lines = []
        if self.pred_comm_s is not None:
            lines.append(f"# batch {self.batch}: predicted compute {(self.pred_compute_s or 0) * 1e3:.1f} ms "
                         f"({self.flops_source}), comm {self.pred_comm_s * 1e3:.1f} ms one call / "
                         f"{(self.pred_comm_buckets_s or 0) * 1e3:.1f} ms over DDP's {self.buckets} buckets, "
                         f"exposed {(self.pred_exposed_s or 0) * 1e3:.1f} ms")
        if self.pred_exposed_fraction_uniform is not None:
            ready = ("/".join(f"{f:.2f}" for f in self.ready_fractions) if self.ready_fractions
                     else "uniform (not measured)")
            share = "2/3 assumed" if self.backward_share is None else f"{self.backward_share:.2f} of the step"
            cores = "-" if self.comm_cpu_cores is None else f"{self.comm_cpu_cores:.2f}"
            lines.append(f"#   overlap: buckets ready at {ready} of backward ({share}); comm alone {cores} host "
                         f"cores, compute {self.compute_slowdown or 0:.0%} slower under it; bucket copies "
                         f"{(self.copy_in_s or 0) * 1e3:.1f} + {(self.copy_out_s or 0) * 1e3:.1f} ms; pred_exp "
                         f"uniform {self.pred_exposed_fraction_uniform:.3f} -> measured readiness "
                         f"{_fmt(self.pred_exposed_fraction_readiness)} -> + contention "
                         f"{_fmt(self.pred_exposed_fraction_contention)} -> + copies "
                         f"{_fmt(self.pred_exposed_fraction)}")
        return lines


def _fmt(x: float | None) -> str:
    return "-" if x is None else f"{x:.3f}"


@dataclass
class ProfileResult:
    """Every batch size of one profiled model (identical on every rank)."""

    params: int
    world_size: int
    hosts: list
    link_class: str
    process_group: str
    torch_version: str
    strategy: str = "ddp"
    model: str = ""
    comm_model: str = ""
    rows: list[ProfileRow] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    trace_files: list[str] = field(default_factory=list)  # saved torch.profiler traces, every rank's
    # The alpha-beta model fitted on the spot (None when models were given); not part of the document.
    fitted: Any = field(default=None, repr=False, compare=False)

    def to_dict(self) -> dict[str, Any]:
        """The ``pybench.profile`` document."""
        body = {f.name: getattr(self, f.name) for f in fields(self) if f.name not in ("rows", "fitted")}
        body = {k: list(v) if isinstance(v, list) else v for k, v in body.items()}
        body["rows"] = [r.to_dict() for r in self.rows]
        return stamp(PROFILE, {"kind": "ddp", **body})  # beside the input-pipeline profile's "pipeline"

    def table(self) -> str:
        """The result as text: a header, one line per batch size, the prediction's parts and the notes."""
        lines = [f"# profile: {self.model}, {self.strategy}, {self.world_size} ranks ({self.link_class}), "
                 f"process group {self.process_group}, torch {self.torch_version}",
                 f"# comm model: {self.comm_model}",
                 "#  batch  buckets  compute_ms  comm_ms  step_ms  exposed_ms  trace_exp_ms  trace_idle_ms   "
                 "ccr  pred_ccr   diff  exposed  pred_exp   diff"]
        lines += [r.table_line() for r in self.rows]
        for r in self.rows:
            lines += r.prediction_lines()
        lines += [f"# {n}" for n in self.notes]
        return "\n".join(lines)
