"""What the CCR grid returns (:class:`CcrResult`, :class:`Breakeven`) and its two renderings:
the table ``pybench ccr`` prints and the ``pybench.ccr`` JSON document.

Rendering only: every figure comes from the rows :mod:`pybench.planning.grid` computed; nothing here decides.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from pybench.io.formats import CCR, stamp
from pybench.planning.config import CcrConfig
from pybench.planning.step import StepEstimate
from pybench.planning.transformer import format_param_count

__all__ = ["Breakeven", "CcrResult", "ccr_table", "ccr_document", "fmt_bytes", "fmt_seconds", "fmt_gb"]


@dataclass(frozen=True)
class Breakeven:
    """Scale-out (several nodes) against one reference node, per strategy and batch.

    Only layouts that fit the device's memory take part. ``faster_from_world``:
    smallest world size whose samples/s beats the reference; ``cheaper_up_to_world``:
    largest world size whose samples per dollar is within ``tolerance`` (a share)
    of the reference's or better (None when none is). The reference is one node
    of this cluster unless a big node (its GPUs and price) is given.
    """

    strategy: str
    batch: int
    reference: str
    reference_samples_per_s: float
    reference_samples_per_dollar: float
    faster_from_world: int | None
    cheaper_up_to_world: int | None
    tolerance: float = 0.0

    def to_dict(self) -> dict[str, Any]:
        return dict(self.__dict__)


@dataclass(frozen=True)
class CcrResult:
    """Rows of the CCR table plus breakevens and notes (derived models, assumptions)."""

    config: CcrConfig
    rows: tuple[StepEstimate, ...]
    breakevens: tuple[Breakeven, ...] = ()
    notes: tuple[str, ...] = ()
    warnings: tuple[str, ...] = field(default=())
    not_priced: tuple[tuple[str, int, str], ...] = ()
    """(strategy, world, why) of each combination asked for that these models do not price (the notes say it too)."""

    def to_dict(self) -> dict[str, Any]:
        """The ``pybench.ccr`` JSON document (:func:`ccr_document`)."""
        return ccr_document(self)

    def table(self) -> str:
        """The CCR table for stdout (:func:`ccr_table`)."""
        return ccr_table(self)

    def __repr__(self) -> str:
        return f"CcrResult({len(self.rows)} rows, {len(self.breakevens)} breakevens, {len(self.notes)} notes)"



def fmt_bytes(n: float) -> str:
    """Bytes with a binary unit: 2048 -> '2.0KiB'."""
    for suffix, scale in (("TiB", 2**40), ("GiB", 2**30), ("MiB", 2**20), ("KiB", 2**10)):
        if n >= scale:
            return f"{n / scale:.1f}{suffix}"
    return f"{n:.0f}B"


def fmt_seconds(t: float) -> str:
    """Seconds with a readable unit: 0.1634 -> '163.4 ms'."""
    for unit, scale in (("s", 1.0), ("ms", 1e-3), ("us", 1e-6)):
        if abs(t) >= scale:
            return f"{t / scale:.4g} {unit}"
    return f"{t / 1e-9:.4g} ns" if t else "0"


def fmt_gb(x: float) -> str:
    """Bytes in GB (1e9 B): 80e9 -> '80.0 GB'."""
    return f"{x / 1e9:.1f} GB"


def _short_links(links: str) -> str:
    return links.replace("intra-node", "intra").replace("inter-node", "inter")


def ccr_document(result: CcrResult) -> dict[str, Any]:
    """The ``pybench.ccr`` document of a CCR result (see :data:`pybench.io.formats.CCR`)."""
    return stamp(CCR, {"config": result.config.to_dict(), "rows": [r.to_dict() for r in result.rows],
                       "breakevens": [b.to_dict() for b in result.breakevens], "notes": list(result.notes),
                       "warnings": list(result.warnings),
                       "not_priced": [{"strategy": s, "world": w, "reason": why} for s, w, why in result.not_priced]})


def _columns(overlap: bool, priced: bool) -> str:
    cols = (f"{'strategy':<8}{'world':>6}{'batch':>6}{'layout':>14}{'comm/rank':>11}{'links':>12}"
            f"{'compute':>11}{'comm':>11}{'latency':>11}{'bandwidth':>11}{'sync':>11}{'CCR':>7}{'band':>11}")
    if overlap:
        cols += f"{'exposed':>8}{'band':>11}"
    cols += f"{'step':>11}{'samples/s':>11}{'eff_1dev':>9}{'eff_node':>9}{'mem_GB':>8}  {'memory':<24}"
    if priced:
        cols += f"{'samples/$':>11}"
    return cols


def _cell(text: str, width: int) -> str:
    """``text`` right-aligned in ``width`` columns with at least one space before it: an absurd figure
    (1e+04 s) widens its column rather than running into the next."""
    return " " + text.rjust(width - 1)


def _row_line(r: StepEstimate, overlap: bool, priced: bool) -> str:
    cells = [(str(r.world), 6), (str(r.batch), 6), (str(r.layout), 14), (fmt_bytes(r.bytes_per_rank), 11),
             (_short_links(r.links), 12), *((fmt_seconds(t), 11) for t in (r.compute_s, r.comm_s, r.latency_s,
                                                                          r.bandwidth_s, r.sync_s)),
             (f"{r.ccr:.3f}", 7), (r.band, 11)]
    if overlap:
        cells += [(f"{r.exposed_fraction:.3f}", 8), (r.band_exposed, 11)]
    eff_node = "-" if r.efficiency_vs_node is None else f"{r.efficiency_vs_node:.3f}"
    cells += [(fmt_seconds(r.step_s), 11), (f"{r.samples_per_s:.4g}", 11), (f"{r.efficiency_vs_device:.3f}", 9),
              (eff_node, 9), (f"{r.memory.needed_bytes / 1e9:.1f}", 8)]
    line = f"{r.strategy:<8}" + "".join(_cell(t, w) for t, w in cells) + f"  {r.memory.fits:<24}"
    if priced and r.samples_per_dollar is not None:
        line += _cell(f"{r.samples_per_dollar:.4g}", 11)
    return line


def _breakeven_line(b: Breakeven) -> str:
    faster = "never in this grid" if b.faster_from_world is None else f"from world {b.faster_from_world}"
    cheaper = "at no multi-node size" if b.cheaper_up_to_world is None else f"up to world {b.cheaper_up_to_world}"
    return (f"breakeven {b.strategy} batch {b.batch} vs {b.reference} ({b.reference_samples_per_s:.2f} samples/s, "
            f"{b.reference_samples_per_dollar:.0f} samples/$): faster {faster}; as cheap per sample "
            f"(within {b.tolerance:.0%}) {cheaper}; only layouts that fit in memory are compared")


def ccr_table(result: CcrResult) -> str:
    """The CCR table for stdout: a header, one line per row, breakevens and notes."""
    c = result.config
    priced = c.priced
    # the parameters given price weights, gradients and FLOPs; the shape sets activations and the layer split
    head = (f"# ccr: {format_param_count(c.params)} params as given (activations from the shape {c.shape}), "
            f"seq {c.seq}, {c.gpus_per_node} GPUs/node, compute {c.flops_per_s / 1e12:.2f} TFLOP/s ({c.flops_source}), "
            f"overlap {'on, ' + format(c.bucket_bytes / 2**20, 'g') + ' MiB buckets' if c.overlap else 'off'}")
    lines = [head, _columns(c.overlap, priced)]
    lines += [_row_line(r, c.overlap, priced) for r in result.rows]
    lines += [_breakeven_line(b) for b in result.breakevens]
    lines += [f"note: {n}" for n in result.notes]
    return "\n".join(lines)
