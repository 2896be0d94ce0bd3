"""The input-pipeline profile of one device: one row per batch size, its document and table, and its loader rate.

The document is a ``pybench.profile`` file (the registry's PROFILE format) with ``"kind": "pipeline"``;
``pybench plan --profile`` reads the loader rate back with :func:`loader_rate`.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field
from typing import Any

from pybench.errors import FileFormatError
from pybench.io.formats import PROFILE, stamp

__all__ = ["PIPELINE_KIND", "PART_NAMES", "PipelineResult", "PipelineRow", "loader_rate"]

PIPELINE_KIND = "pipeline"
# The parts of one step, in the order they run.
PART_NAMES = ("data_wait", "h2d", "forward", "backward", "optimizer")


@dataclass
class PipelineRow:
    """Median seconds of each part of one device's step at one batch size, and what bounds the step."""

    batch: int
    steps: int
    data_wait_s: float      # blocked in next(loader)
    h2d_s: float            # the batch copied to the device
    forward_s: float        # the loss computed
    backward_s: float
    optimizer_s: float      # optimizer step and zero_grad
    step_s: float           # the whole step, timed around it (perf_counter)
    trace_step_s: float     # the whole step, as the profiler's range saw it

    @property
    def parts_s(self) -> float:
        """The sum of the parts' medians (about :attr:`step_s`: the split's check)."""
        return self.data_wait_s + self.h2d_s + self.forward_s + self.backward_s + self.optimizer_s

    @property
    def compute_s(self) -> float:
        """Everything but the data wait: copy, forward, backward and optimizer."""
        return self.h2d_s + self.forward_s + self.backward_s + self.optimizer_s

    @property
    def loader_samples_per_s(self) -> float | None:
        """Samples/s the loader delivered while the step waited on it (batch / data wait); None if it never waited."""
        return self.batch / self.data_wait_s if self.data_wait_s > 0 else None

    @property
    def compute_samples_per_s(self) -> float | None:
        """Samples/s the device trains on when the data is ready (batch / compute)."""
        return self.batch / self.compute_s if self.compute_s > 0 else None

    @property
    def bound(self) -> str:
        """``loader`` when the data wait is longer than the compute, else ``compute``."""
        return "loader" if self.data_wait_s > self.compute_s else "compute"

    def to_dict(self) -> dict[str, Any]:
        """The row as JSON values, the derived figures included (a figure that could not be measured as null)."""
        d = asdict(self)
        d.update(parts_s=self.parts_s, compute_s=self.compute_s, loader_samples_per_s=self.loader_samples_per_s,
                 compute_samples_per_s=self.compute_samples_per_s, bound=self.bound)
        return {k: None if isinstance(v, float) and not math.isfinite(v) else v for k, v in d.items()}

    def table_line(self) -> str:
        """This row in the table's columns (milliseconds and samples/s)."""
        ms = [x * 1e3 for x in (self.data_wait_s, self.h2d_s, self.forward_s, self.backward_s, self.optimizer_s,
                                self.parts_s, self.step_s)]
        rates = [_rate(self.loader_samples_per_s), _rate(self.compute_samples_per_s)]
        return (f"  {self.batch:6d}  " + "  ".join(f"{x:9.2f}" for x in ms) + "  "
                + "  ".join(f"{r:>11}" for r in rates) + f"  {self.bound}")


def _rate(x: float | None) -> str:
    return "-" if x is None else f"{x:.4g}"


@dataclass
class PipelineResult:
    """Every batch size of one device's profiled step."""

    model: str
    device: str
    loader: str
    torch_version: str
    warmup: int
    rows: list[PipelineRow] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        """The ``pybench.profile`` document with ``"kind": "pipeline"``."""
        return stamp(PROFILE, {"kind": PIPELINE_KIND, "model": self.model, "device": self.device,
                               "loader": self.loader, "torch_version": self.torch_version, "warmup": self.warmup,
                               "rows": [r.to_dict() for r in self.rows], "notes": list(self.notes)})

    def table(self) -> str:
        """The result as text: a header, one line per batch size, the notes."""
        lines = [f"# input pipeline: {self.model} on {self.device}, loader {self.loader}, torch {self.torch_version}",
                 "# parts are medians over the measured steps (ms); loader = batch / data wait, "
                 "compute = batch / (h2d + forward + backward + optimizer)",
                 "#  batch  data_wait        h2d    forward   backward  optimizer      parts       step"
                 "  loader_sps  compute_sps  bound"]
        lines += [r.table_line() for r in self.rows]
        lines += [f"# {n}" for n in self.notes]
        return "\n".join(lines)


def loader_rate(doc: dict[str, Any], source: str, batch: int | None = None) -> tuple[float, int]:
    """(samples/s, batch size) the loader sustained in a pipeline profile document.

    The row of ``batch`` when the profile measured it, else the row with the fastest loader
    (the best the loader reached at any batch size measured). ``doc`` is checked against the
    PROFILE schema; a bad field, another kind of profile, or one with no loader figure raises
    FileFormatError naming ``source``.
    """
    kind = doc.get("kind", "ddp")
    if kind != PIPELINE_KIND:
        raise FileFormatError(f"{source}: a {kind!r} profile has no input-pipeline figure; "
                              f"make one with `pybench profile -n 1 --json FILE`")
    from pybench.io.document_schemas import ProfileSchema
    from pybench.io.schemas import validate_body
    validate_body(doc, ProfileSchema, source)  # the rows typed: Python callers may pass any dict
    measured = [(float(r["loader_samples_per_s"]), int(r["batch"])) for r in doc["rows"]
                if r.get("loader_samples_per_s") and r.get("batch") is not None]
    if not measured:
        raise FileFormatError(f"{source}: no row has a loader rate (loader_samples_per_s); "
                              f"make the profile with `pybench profile -n 1 --json FILE`")
    same = [m for m in measured if m[1] == batch]
    return max(same or measured)
