"""The rows ``pybench predict`` prints and writes: one record per (model, size), and the
nccl-tests-like text table of them."""

from __future__ import annotations

import math

from pybench.collectives import busbw_factor
from pybench.model.calibration import BEYOND_SIZES
from pybench.sizes import format_size


def prediction_records(models, sizes, band: str | None = None) -> list:
    """One dict per (model, size) at the model's own fitted layout: collective, backend, link_class,
    size_bytes, world, time_s, time_low_s, time_high_s, algbw_gbps, busbw_gbps (GB/s = 1e9 B/s), provenance."""
    records = []
    for m in models:
        w = m.world_size
        why = {s: m.undetermined_at(float(s)) for s in sizes}  # a part of the time its sweep never measured
        known = [s for s in sizes if not why[s]]
        pred = m.predict([float(s) for s in known], band=band) if known else None
        factor = busbw_factor(m.collective, w) if w else math.nan
        anomalies = {a.size_bytes: a for a in m.anomalies}
        nodes = m._fitted_nodes()
        # a file from before prediction bands answers with its confidence band, as Python's predict says
        predates = band is None and not all(math.isfinite(seg.rel_sigma) for seg in m.segments)
        used = "confidence" if predates else band or "prediction"
        old = " (confidence band: the file predates prediction bands; refit it)" if predates else ""
        answered = dict(zip(known, zip(pred.time_s, pred.time_low_s, pred.time_high_s))) if pred else {}
        topology = f"{m.topology.algorithm} (topology model)" if m.topology is not None else ""
        for s in sizes:
            # (beyond what the sweep determines, at sizes other layouts measured, the topology model answers)
            answers = topology and m._beyond_own_sweep(float(s)) and m._topology_reaches(float(s))
            algorithm = topology if answers else "fitted sweep"
            if why[s]:
                records.append({
                    "collective": m.collective, "backend": m.backend, "link_class": m.link_class, "dtype": m.dtype,
                    "size_bytes": int(s), "world": w, "time_s": None, "time_low_s": None, "time_high_s": None,
                    "band": used, "algbw_gbps": None, "busbw_gbps": None, "algorithm": algorithm,
                    "size_notes": [], "determined": False, "undetermined": why[s],
                    **({"nodes": nodes} if nodes else {}),
                    "provenance": m.provenance_at(float(s)), "extrapolated_world": False, "extrapolated_size": True,
                    "band_reaches_zero": False, "measured_anomaly_ratio": None})
                continue
            t, lo, hi = answered[s]
            # Fitted pieces are physical (alpha >= 0, B > 0), so t > 0; the guard only
            # keeps a nonsense bandwidth out of the output should that ever break.
            algbw = s / t / 1e9 if t > 0 else None
            records.append({
                "collective": m.collective, "backend": m.backend, "link_class": m.link_class,
                "dtype": m.dtype, "size_bytes": int(s), "world": w, "time_s": float(t), "time_low_s": float(lo),
                "time_high_s": float(hi), "band": used,
                "algbw_gbps": None if algbw is None else float(algbw),
                "busbw_gbps": float(algbw * factor) if algbw is not None and math.isfinite(factor) else None,
                "algorithm": algorithm, "size_notes": [], "determined": True,
                **({"nodes": nodes} if nodes else {}),  # as every other layout's record, where the sweep says
                "provenance": m.provenance_at(float(s)) + old,
                "extrapolated_world": False,
                "extrapolated_size": not (m.size_min_bytes <= s <= m.size_max_bytes),
                # The band is wider than the time itself, so its low end is clipped at 0:
                # the data do not pin the latency down at this size / world size.
                "band_reaches_zero": bool(lo <= 0.0),
                # A size the fit left out as an anomaly: the prediction is the trend, the
                # measurement (at the fitted world) was this many times it.
                "measured_anomaly_ratio": float(anomalies[int(s)].ratio) if int(s) in anomalies else None,
            })
    return records


def format_prediction_table(records) -> str:
    """nccl-tests-like text table of prediction records."""
    lines = []
    last = None
    algorithms: dict[tuple, dict[str, None]] = {}  # each table's, in order: a sweep's and the topology model's
    for r in records:
        key = (r["collective"], r["backend"], r["link_class"], r["world"], r.get("dtype"))
        algorithms.setdefault(key, {})[r["algorithm"]] = None
    for r in records:
        key = (r["collective"], r["backend"], r["link_class"], r["world"], r.get("dtype"))
        if key != last:
            if last is not None:
                lines.append("")
            nodes = f" on {r['nodes']} node(s)" if "nodes" in r else ""
            dtype = f" / {r['dtype']}" if r.get("dtype") else ""
            lines.append(f"# {r['collective']} / {r['backend']} / {r['link_class'] or 'link class unknown'}"
                         f" / {r['world'] or '?'} ranks{nodes}{dtype} / algorithm {'; '.join(algorithms[key])}"
                         + (" (world extrapolated)" if r["extrapolated_world"] else ""))
            lines.append(f"# {'size':>10} {'time(us)':>11} {'low(us)':>11} {'high(us)':>11} "
                         f"{'algbw':>8} {'busbw':>8}  note")
            last = key
        bus = "n/a" if r["busbw_gbps"] is None else f"{r['busbw_gbps']:.2f}"
        alg = "n/a" if r["algbw_gbps"] is None else f"{r['algbw_gbps']:.2f}"
        if r.get("undetermined"):
            lines.append(f"  {format_size(r['size_bytes']):>10} {'n/a':>11} {'n/a':>11} {'n/a':>11} "
                         f"{alg:>8} {bus:>8}  {r['undetermined']}")
            continue
        ratio = r.get("measured_anomaly_ratio")
        anomaly = f"anomaly, left out of the fit: measured {ratio:.2f}x the trend at the fitted world" if ratio else ""
        note = "; ".join(n for n, on in ((r.get("provenance", ""), "provenance" in r),
                                         (f"regime {r.get('regime')}", bool(r.get("regime"))),
                                         *((n, True) for n in r.get("size_notes", ())),
                                         ("outside measured sizes", r["extrapolated_size"]
                                          and BEYOND_SIZES not in r.get("provenance", "")),
                                         ("band reaches 0: latency not resolved",
                                          r.get("band_reaches_zero", False)),
                                         (anomaly, bool(ratio))) if on)
        lines.append(f"  {format_size(r['size_bytes']):>10} {r['time_s'] * 1e6:>11.2f} "
                     f"{r['time_low_s'] * 1e6:>11.2f} {r['time_high_s'] * 1e6:>11.2f} "
                     f"{alg:>8} {bus:>8}  {note}")
    return "\n".join(lines)


def topology_records(models, sizes, world: int, nodes: int) -> list:
    """Prediction records (as :func:`prediction_records`) from topology models: one table per collective.

    A layout that no input determines gets its row all the same, with null times and the reason.
    """
    records = []
    for m in models:
        factor = busbw_factor(m.collective, world)
        for s in sizes:
            p = m.predict(int(s), world, nodes)
            known = p.determined
            across = f"; across nodes {schedule_label(m.backend, p.schedule)}"
            records.append({
                "collective": m.collective, "backend": m.backend or "?", "link_class": p.links, "size_bytes": int(s),
                "world": world, "nodes": nodes, "time_s": p.time_s if known else None,
                "time_low_s": p.low_s if known else None, "time_high_s": p.high_s if known else None,
                "band": "prediction", "algbw_gbps": s / p.time_s / 1e9 if known else None,
                "busbw_gbps": s / p.time_s / 1e9 * factor if known else None,
                "algorithm": f"{m.algorithm}{across if nodes > 1 else ''} (topology model)",
                "regime": p.regime, "provenance": p.provenance, "size_notes": list(p.size_notes),
                "determined": known,
                "undetermined": p.undetermined or None,
                "extrapolated_world": p.provenance.startswith(("another", "system", "preset")),
                "extrapolated_size": BEYOND_SIZES in p.provenance,
                "band_reaches_zero": False, "measured_anomaly_ratio": None})
    return records


def schedule_label(backend: str | None, schedule: str) -> str:
    """What crossed the nodes, in the library's words: NCCL's double binary tree is priced for MPI's trees too."""
    return "tree" if backend == "mpi" and schedule == "double-tree" else schedule
