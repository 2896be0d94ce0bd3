"""The report's opening paragraph: peak busbw, the fitted alpha and B, the worst size, a verdict.

The figures come from the inputs only; the paragraph says which input each one is from,
so a reader can check it against the tables below it.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from pybench.collectives import busbw_factor
from pybench.measure.results import RunResult, SizeRecord
from pybench.measure.table import busy_warning
from pybench.report.inputs import failed_check, imported_from
from pybench.sizes import format_size


@dataclass(frozen=True)
class Summary:
    """What the first paragraph says, as plain text pieces (escaped by the HTML writer)."""

    peak: str
    model: str
    worst: str
    verdict: str
    verdict_kind: str  # "ok", "warn" or "bad": how the verdict is shown

    def text(self) -> str:
        return " ".join(part for part in (self.peak, self.model, self.worst) if part)


def sweep_anomalies(result: RunResult) -> tuple:
    """The sizes ``pybench fit`` names as anomalies in ``result``'s sweep and leaves out of its model: its own rule
    (:func:`pybench.model.anomalies.find_anomalies`) on the points it fits, a log's printed times (nccl-tests'
    out-of-place and in-place), a pybench result's medians (and in-place medians)."""
    from pybench.model.anomalies import find_anomalies

    from_log = imported_from(result) not in (None, "pytest-benchmark")  # its samples are the log's own times
    size, time = [], []
    for r in result.records:
        times = r.samples_s if from_log else [r.time_s, r.in_place_time_s]
        for t in times:
            if t is not None and math.isfinite(t) and t > 0 and r.size_bytes > 0:
                size.append(float(r.size_bytes))
                time.append(float(t))
    return find_anomalies(size, time) if size else ()


def headline_peak(result: RunResult) -> tuple[SizeRecord | None, str]:
    """The highest bus bandwidth of the sizes the fit keeps, and a note naming the faster sizes left out as
    anomalies ('' where none is). An anomaly is one size "rerun to check" (another algorithm at that size alone,
    or a disturbed run): quoted as the peak it would stand for a bandwidth the sweep does not sustain."""
    records = [r for r in result.records if math.isfinite(r.busbw_gbps)]
    off = {a.size_bytes: a for a in sweep_anomalies(result)} if records else {}
    kept = [r for r in records if r.size_bytes not in off]
    peak = max(kept or records, key=lambda r: r.busbw_gbps, default=None)
    if peak is None or not kept:
        return peak, ""
    above = sorted((r for r in records if r.size_bytes in off and r.busbw_gbps > peak.busbw_gbps),
                   key=lambda r: -r.busbw_gbps)
    if not above:
        return peak, ""
    named = "; ".join(f"{format_size(r.size_bytes)} at {r.busbw_gbps:.2f} GB/s, {off[r.size_bytes].how_far} "
                      f"than its neighbours' trend" for r in above)
    return peak, (f"not counting {'an anomaly' if len(above) == 1 else 'anomalies'} `pybench fit` leaves out: "
                  f"{named}; rerun to check")


def peak_phrase(result: RunResult, source: str = "") -> str:
    """'Peak bus bandwidth X GB/s at SIZE' for ``result`` (naming ``source`` and the anomalies it leaves out), or on
    one rank, where busbw is 0 by definition (nothing crosses a link), its peak algorithm bandwidth; '' where no
    size was measured."""
    peak, note = headline_peak(result)
    if peak is None:
        return ""
    n = result.world_size
    which = f"{result.benchmark}, {result.backend}, {n} rank{'' if n == 1 else 's'}, {source}" if source else ""
    if _zero_busbw(result):  # (a broadcast's or send/recv's busbw is its algbw on one rank too)
        rec = max((r for r in result.records if math.isfinite(r.algbw_gbps)), key=lambda r: r.algbw_gbps, default=peak)
        return (f"Peak algorithm bandwidth {rec.algbw_gbps:.2f} GB/s at {format_size(rec.size_bytes)} ("
                + (f"{which}; " if which else "") + "bus bandwidth is 0 on one rank: nothing crosses a link)")
    return (f"Peak bus bandwidth {peak.busbw_gbps:.2f} GB/s at {format_size(peak.size_bytes)}"
            + (f" ({which})" if which else "") + (f", {note}" if note else ""))


def _zero_busbw(result: RunResult) -> bool:
    """One rank of a collective whose bus factor is 0 there (nothing crosses a link): its busbw says nothing."""
    return result.world_size == 1 and busbw_factor(result.benchmark, 1, 1.0) == 0


def _peak(results: Sequence[tuple[RunResult, str]]) -> str:
    best = [(rec, r, src) for r, src in results for rec, _ in (headline_peak(r),) if rec is not None]
    if not best:
        return "No size was measured."
    several = [b for b in best if not _zero_busbw(b[1])] or best  # a one-rank busbw (0) is no peak beside others
    _, r, src = max(several, key=lambda b: b[0].algbw_gbps if _zero_busbw(b[1]) else b[0].busbw_gbps)
    return peak_phrase(r, src) + "."


def model_for(result: RunResult, models: Sequence):
    """The model of ``result``'s own collective, backend, rank count and element type, else None: another's figures
    are not its."""
    return next((m for m in models if (m.collective, m.backend, m.world_size, m.dtype) ==
                 (result.benchmark, result.backend, result.world_size, result.dtype)), None)


def _model_text(models: Sequence, results: Sequence[tuple[RunResult, str]]) -> str:
    if not models:
        return "No model was given (fit one with `pybench fit RESULT.json -o MODEL.json`)."
    m = next((m for r, _ in results if (m := model_for(r, models)) is not None), None)
    if m is None:
        theirs = ", ".join(dict.fromkeys(f"{r.benchmark}/{r.backend}/{r.world_size} ranks/{r.dtype}"
                                         for r, _ in results))
        given = ", ".join(dict.fromkeys(f"{m.collective}/{m.backend}/{m.world_size or '?'} ranks/{m.dtype}"
                                        for m in models))
        return (f"The model given ({given}) describes none of these inputs ({theirs}): no figure here is compared "
                f"with it (fit one of theirs with `pybench fit`).")
    first, last = m.segments[0], m.segments[-1]
    bw = 1.0 / last.inv_bw_s_per_byte / 1e9 if last.inv_bw_s_per_byte > 0 else math.inf
    return (f"Fitted model ({m.collective}, {m.backend}, {m.world_size or '?'} ranks, {len(m.segments)} "
            f"piece(s)): alpha {first.alpha_s * 1e6:.3g} us on the smallest sizes, B {bw:.3g} GB/s on the "
            f"largest.")


def _worst_against_model(result: RunResult, models: Sequence) -> str | None:
    m = model_for(result, models)
    recs = [r for r in result.records if r.time_s > 0 and m is not None
            and m.size_min_bytes <= r.size_bytes <= m.size_max_bytes]
    if m is None or not recs:
        return None
    pred = np.asarray(m.predict(np.array([r.size_bytes for r in recs], dtype=float)).time_s, dtype=float)
    miss = np.array([r.time_s for r in recs]) / pred - 1.0
    k = int(np.nanargmax(np.abs(miss)))
    return (f"Worst size {format_size(recs[k].size_bytes)}: measured {100 * miss[k]:+.0f}% against the model.")


def _worst(results, models, comparison) -> str:
    if comparison is not None and comparison.sizes:
        s = max(comparison.sizes, key=lambda c: c.time_ratio if math.isfinite(c.time_ratio) else -math.inf)
        interval = (f"95% interval {s.ratio_ci_low:.2f}..{s.ratio_ci_high:.2f}" if math.isfinite(s.ratio_ci_low)
                    else "one time on a side: no interval")
        return (f"Worst size {format_size(s.size_bytes)}: time x{s.time_ratio:.2f} against the baseline "
                f"({interval}, {s.verdict}).")
    first = results[0][0]
    text = _worst_against_model(first, models)
    if text:
        return text
    recs = [r for r in first.records if r.time_s > 0]
    if not recs or imported_from(first):  # another tool's times carry no precision of pybench's
        return ""
    r = max(recs, key=lambda r: r.ci_rel)
    return f"Least precise size {format_size(r.size_bytes)}: median known to ±{100 * r.ci_rel:.1f}%."


def _verdict(results, comparison) -> tuple[str, str]:
    wrong = sum(r.total_wrong() for r, _ in results)
    if wrong:
        return f"Verdict: FAILED, {wrong} wrong value(s) in the correctness check.", "bad"
    if comparison is not None:
        slower = comparison.slower
        if slower:
            worst = comparison.worst_slowdown()
            return (f"Verdict: regression, {len(slower)} of {len(comparison.sizes)} size(s) significantly slower "
                    f"than the baseline (worst {format_size(worst.size_bytes)} x{worst.time_ratio:.2f}).", "bad")
        return (f"Verdict: no significant slowdown against the baseline at {len(comparison.sizes)} size(s) "
                f"(noise band ±{100 * comparison.noise:g}%).", "ok")
    failed = [(r, note) for r, _ in results if (note := failed_check(r))]
    if failed:
        r, note = failed[0]
        return (f"Verdict: FAILED, the {imported_from(r)} log's own check: {r.benchmark} x{r.world_size}: {note}.",
                "bad")
    imported = sorted({source for source in (imported_from(r) for r, _ in results) if source})
    if imported:
        return (f"Verdict: read from {', '.join(imported)} output: pybench ran neither the correctness check nor "
                f"its precision control on these times; see that tool's own footer.", "warn")
    warnings = [w for w in (busy_warning(r) for r, _ in results) if w]
    if warnings:
        return "Verdict: noisy, " + warnings[0].split(": ", 2)[-1], "warn"
    return "Verdict: clean, every value exact and every size within its precision on a quiet machine.", "ok"


def summarise(results: Sequence[tuple[RunResult, str]], models: Sequence = (), comparison=None) -> Summary:
    """The opening paragraph of a report on ``results`` (with their fitted ``models`` and a comparison)."""
    verdict, kind = _verdict(results, comparison)
    return Summary(peak=_peak(results), model=_model_text(models, results), worst=_worst(results, models, comparison),
                   verdict=verdict, verdict_kind=kind)
