"""The text report of a fitted alpha-beta model (``pybench fit``'s table): its pieces with intervals, goodness,
notes and anomalies."""

from __future__ import annotations

import math

import numpy as np

# A piece below the largest sizes with this many times their B is a step, not a rate (a protocol or
# algorithm switch that a few sizes make look like a faster link).
STEEP_PIECE_RATIO = 1.5


def _steep_note(model, k: int) -> tuple[str, ...]:
    """Piece k's B when it is well above the largest sizes' piece: the slope across a step of
    the curve (a protocol or algorithm switch), which readers would otherwise take for a link rate."""
    s, last = model.segments[k], model.segments[-1]
    if k == len(model.segments) - 1 or not (math.isfinite(s.bw_Bps) and math.isfinite(last.bw_Bps)):
        return ()
    if s.bw_Bps <= STEEP_PIECE_RATIO * last.bw_Bps:
        return ()
    return (f"B {s.bw_Bps / 1e9:.4g} GB/s is above the largest sizes' {last.bw_Bps / 1e9:.4g} GB/s: the slope "
            f"across a step of the curve (a protocol, algorithm or eager/rendezvous switch), not a rate the link "
            f"sustains",)


def model_report(model) -> str:
    """Multi-line text report of a fitted :class:`~pybench.model.piecewise_model.AlphaBetaModel`: what was
    fitted, each piece with intervals, goodness."""
    world = model.world_size if model.world_size is not None else "?"
    lines = [
        f"alpha-beta model: {model.collective} / {model.backend} / {model.link_class or 'link class unknown'}"
        f" / {world} ranks / {model.dtype}",
        f"  sizes {model.size_min_bytes} .. {model.size_max_bytes} B, {model.n_points} points, "
        f"{len(model.segments)} piece(s) chosen by {model.criterion.upper()}",
        f"  other layouts: {_elsewhere(model)}",
        f"  {'sizes (B)':>25}  {'alpha (us)':>10} {'95% CI':>19}  {'B (GB/s)':>9} {'95% CI':>19}"
        f"  {'R^2':>6} {'medAPE':>6} {'maxAPE':>6}",
    ]
    notes: list[str] = []
    for k, s in enumerate(model.segments):
        a_lo, a_hi = s.alpha_ci_s
        b_lo, b_hi = s.bw_ci_Bps
        piece_notes = (*s.ci_notes(), *_steep_note(model, k))
        mark = f" [{k + 1}]" if piece_notes else ""
        lines.append(
            f"  {s.size_min_bytes:>12}..{s.size_max_bytes:<12} {s.alpha_s * 1e6:>10.3f} "
            f"[{_us(a_lo):>8},{_us(a_hi):>8}]  {_gbps(s.bw_Bps):>9} "
            f"[{_gbps(b_lo):>8},{_gbps(b_hi):>8}]  {s.r2:>6.3f} {s.median_ape:>5.1f}% "
            f"{s.max_ape:>5.1f}%{mark}")
        notes.extend(f"[{k + 1}] {n}" for n in piece_notes)
    lines.append(f"  whole fit: R^2 {model.r2:.4f}, median APE {model.median_ape:.1f}%, "
                 f"max APE {model.max_ape:.1f}%")
    for n in notes:
        lines.append(f"  {n}")
    loo = np.array([abs(err) for s in model.segments for _, err in s.loo_errors])
    if loo.size:
        lines.append(f"  each size left out in turn: median {100 * np.median(loo):.1f}%, max "
                     f"{100 * np.max(loo):.1f}% off (the prediction band holds these errors near each size)")
    if math.isfinite(model.single_line_median_ape):
        lines.append(f"  one line instead: median APE {model.single_line_median_ape:.1f}%, "
                     f"max APE {model.single_line_max_ape:.1f}%")
    for note in model.notes:
        lines.append(f"  note: {note}")
    for a in model.anomalies:
        lines.append(f"  anomaly, left out of the fit: {a.describe()}")
    return "\n".join(lines)

def _elsewhere(model) -> str:
    """Which layouts the file's topology model answers, in words."""
    tm = model.topology
    if tm is None:
        return "none (no topology model: this curve answers at its own layout only)"
    fitted = ", ".join(f"{w} ranks" + ("" if n == 1 else f" on {n} nodes") for w, n in tm.fitted)
    return f"the {model.collective} topology model ({tm.algorithm}, fitted at {fitted})"


def _gbps(bw_Bps: float) -> str:
    # inf: unbounded (said in words below the table); nan: undefined.
    if math.isnan(bw_Bps):
        return "undef"
    # four significant digits: a 200 Mbit/s link (0.025 GB/s) must not print as 0.02
    return "inf" if not math.isfinite(bw_Bps) else f"{bw_Bps / 1e9:.4g}"


def _us(time_s: float) -> str:
    if math.isnan(time_s):
        return "undef"
    return "inf" if not math.isfinite(time_s) else f"{time_s * 1e6:.2f}"
