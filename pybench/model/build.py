"""Fitted models built from measurement sets: one per collective / backend / link class / world size."""

from __future__ import annotations

import dataclasses
import re
from collections import Counter
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from pybench.errors import UsageError
from pybench.model.anomalies import ANOMALY_RATIO, disturbed_sizes, find_anomalies, without
from pybench.model.logs.measurements import MeasurementSet, crossing_path, one_reduction
from pybench.model.piecewise import fit_alpha_beta, fit_single_line
from pybench.model.piecewise_model import NO_TOPOLOGY, AlphaBetaModel
from pybench.model.segment import DEFAULT_CONFIDENCE, DEFAULT_MIN_POINTS, DEFAULT_NOISE_FLOOR
from pybench.model.sweeps_joined import attach_topology
from pybench.model.system import SystemDescription
from pybench.model.topology import TopologyModel
from pybench.model.topology_fit import fit_topology_models
from pybench.sizes import format_size


def fit_model(measurements: MeasurementSet | Sequence[MeasurementSet], *, min_points: int = DEFAULT_MIN_POINTS,
              criterion: str = "bic", noise_floor: float = DEFAULT_NOISE_FLOOR,
              confidence: float = DEFAULT_CONFIDENCE,
              anomaly_ratio: float | None = ANOMALY_RATIO) -> AlphaBetaModel:
    """Fit one :class:`AlphaBetaModel` to sweeps of the same collective and world size.

    Parameters
    ----------
    measurements : MeasurementSet or sequence of them
        Must agree on collective, backend, link class, world size and dtype (repeated runs
        are pooled).
    min_points, criterion, noise_floor, confidence
        See :func:`pybench.model.piecewise.fit_alpha_beta`.
    anomaly_ratio : float or None
        Sizes this many times off their neighbours' trend are named in the model's
        ``anomalies`` and left out of the fit (:mod:`pybench.model.anomalies`); None keeps all.

    Returns
    -------
    AlphaBetaModel
        The measured curve of this layout; other layouts are the topology model's
        (:func:`fit_model_file` attaches it).
    """
    sets = [measurements] if isinstance(measurements, MeasurementSet) else list(measurements)
    if not sets:
        raise UsageError("no measurements to fit")
    keys = {(m.collective, m.backend, m.link_class, m.world_size, m.dtype) for m in sets}
    if len(keys) > 1:
        raise UsageError("fit_model needs sweeps of one collective/backend/link class/world size/dtype; "
                         f"got {len(keys)} different ones (use fit_models to fit each group)")
    first = sets[0]
    # Every measurement each set holds (nccl-tests: out-of-place and in-place times).
    points = [m.fit_points() for m in sets]
    size = np.concatenate([p[0] for p in points])
    time = np.concatenate([p[1] for p in points])
    if np.unique(size).size < 2:
        raise UsageError(f"{first.path or first.label}: {np.unique(size).size} distinct size(s); "
                         f"a model needs at least 2 (sweep more sizes, e.g. --sizes 1M:1G)")
    if size.size < 3:  # two points fit a line exactly: nothing says how far off it is
        raise UsageError(f"{first.path or first.label}: {size.size} measured times; a model needs at least 3 "
                         f"(sweep more sizes, e.g. --sizes 1M:1G)")
    _refuse_tables_apart(sets, size, time)
    disturbed = _disagreeing_replicates(size, time, sets)  # whether or not such a size is also off the trend
    disturbed += [n for m in sets for n in _in_place_apart(m)][:1]
    anomalies = find_anomalies(size, time, anomaly_ratio) if anomaly_ratio else ()
    size, time = without(size, time, anomalies)
    fit = fit_alpha_beta(size, time, min_points=min_points, criterion=criterion,
                         noise_floor=noise_floor, confidence=confidence)
    line = fit_single_line(size, time, confidence=confidence)
    by_file: dict[str, list[str]] = {}  # each log's tables pooled apart: their numbers and lines are that log's
    for m in sets:
        by_file.setdefault(m.path or "", []).extend(m.notes)
    notes = [n if len(by_file) == 1 or n in these else f"{Path(path).name}: {n}"
             for path, these in by_file.items() for n in _tables_pooled(these)] + _pooled(sets) + disturbed
    return AlphaBetaModel(
        collective=first.collective, backend=first.backend, link_class=first.link_class,
        world_size=first.world_size, dtype=first.dtype, segments=fit.segments,
        criterion=criterion,
        n_points=fit.n_points, r2=fit.r2, median_ape=fit.median_ape, max_ape=fit.max_ape,
        single_line_median_ape=line.median_ape, single_line_max_ape=line.max_ape,
        sources=tuple(sorted({m.path for m in sets if m.path})),
        notes=tuple(dict.fromkeys(notes)), anomalies=anomalies)


_TABLE_NOTE = re.compile(r"table (\d+) of (\d+) \(line (\d+)\)")
_LINE_NOTE = re.compile(r"line (\d+): (.*)")


def _few(numbers: list[int]) -> str:
    """'2, 5, 8' or '2, 5, 8, ..., 59': a list of line or table numbers, short."""
    shown = numbers if len(numbers) <= 4 else [*numbers[:3], "...", numbers[-1]]
    return ", ".join(str(n) for n in shown)


def _tables_pooled(notes: list[str]) -> list[str]:
    """The notes with what the tables of one log pooled say alike said once, in place of the first (a job log
    that repeats its test run after run had one "table N of M" line per run, and as many of each skipped row)."""
    tables = [(int(x[1]), int(x[2]), int(x[3])) for n in notes if (x := _TABLE_NOTE.fullmatch(n))]
    by_text: dict[str, list[int]] = {}
    for n in notes:
        if x := _LINE_NOTE.fullmatch(n):
            by_text.setdefault(x[2], []).append(int(x[1]))
    out: list[str] = []
    for n in notes:
        if (x := _TABLE_NOTE.fullmatch(n)) and len(tables) > 2:
            if int(x[3]) == tables[0][2]:
                out.append(f"tables {_few([t for t, _, _ in tables])} of {tables[0][1]} (lines {tables[0][2]} to "
                           f"{tables[-1][2]}): {len(tables)} runs of this test, pooled")
        elif (x := _LINE_NOTE.fullmatch(n)) and len(lines := by_text[x[2]]) > 2:
            if int(x[1]) == lines[0]:
                out.append(f"lines {_few(lines)}: {x[2]}")
        else:
            out.append(n)
    return out


def fit_models(measurements: Sequence[MeasurementSet], **kwargs: Any) -> list[AlphaBetaModel]:
    """One model per (collective, backend, link class, world size, dtype) group, each carrying the
    topology model of its collective that answers for other layouts (see :func:`fit_model_file`)."""
    return fit_model_file(measurements, **kwargs)[0]


def fit_model_file(measurements: Sequence[MeasurementSet], *, system: SystemDescription | None = None,
                   **kwargs: Any) -> tuple[list[AlphaBetaModel], list[TopologyModel], list[str]]:
    """Everything a model file holds: (per-sweep models, topology models, why sweeps were left out of those).

    Element types are never pooled: a nccl-tests ``-d all`` log holds one table per type,
    and a half-precision sweep is not a float sweep measured twice. Each per-sweep model is the
    measured curve of its layout; the topology model of its collective and backend (fitted over
    every layout, on ``system`` when given) is attached to it for every other layout.

    Returns
    -------
    (list of AlphaBetaModel, list of TopologyModel, list of str)
        Models in order of first appearance.
    """
    _refuse_several_devices(measurements)
    _refuse_mixed_paths(measurements)
    groups: dict[tuple[str, str, str | None, str], dict[int | None, list[MeasurementSet]]] = {}
    for m in one_reduction(measurements):
        key = (m.collective, m.backend, m.link_class, m.dtype)
        groups.setdefault(key, {}).setdefault(m.world_size, []).append(m)
    models = [fit_model(sets, **kwargs) for by_world in groups.values() for sets in by_world.values()]
    topology, skipped = fit_topology_models(measurements, system)
    if system is not None:
        topology = [tm.with_system(system) for tm in topology]
    return [_with_topology_note(m, skipped) for m in attach_topology(models, topology)], topology, skipped


def _device_key(name: str) -> str:
    """A GPU name as drivers of other ages print it alike ("Tesla V100-SXM2-32GB", "NVIDIA ...")."""
    return " ".join(w for w in name.lower().split() if w not in ("nvidia", "tesla"))


def _refuse_several_devices(measurements: Sequence[MeasurementSet]) -> None:
    """UsageError where the logs name different GPUs: their tables would be pooled as replicates of one
    system, or read as its other layouts."""
    first: dict[str, MeasurementSet] = {}
    for m in measurements:
        if m.device:
            first.setdefault(_device_key(m.device), m)
    if len(first) > 1:
        named = " and ".join(f"{m.device!r} ({Path(m.path).name or m.label})" for m in list(first.values())[:2])
        raise UsageError(f"the logs name different GPUs: {named}; a model file describes one system: fit each "
                         f"system's logs into a file of its own")


def _refuse_mixed_paths(measurements: Sequence[MeasurementSet]) -> None:
    """UsageError where tables of one collective took different paths (:func:`crossing_path`: OSU's host and
    MPI-CUDA buffers, NCCL over sockets or RDMA): pooled, two paths would read as replicates of one, and joined,
    as layouts of one system. Tables inside a node are compared apart from those across nodes (sockets join
    only nodes)."""
    paths: dict[tuple, dict[str, MeasurementSet]] = {}
    for m in measurements:
        key = (m.collective, m.backend, m.link_class == "intra-node")
        paths.setdefault(key, {}).setdefault(crossing_path(m), m)
    for by_path in paths.values():
        if len(by_path) > 1:
            (a, x), (b, y) = list(by_path.items())[:2]
            one, other = (Path(m.path).name or m.label for m in (x, y))
            if x.path and x.path == y.path:
                one, other = f"one table of {one}{_table_line(x)}", f"another{_table_line(y)}"
            elif one == other:  # two files of one name in other folders
                one, other = str(x.path) or x.label, str(y.path) or y.label
            raise UsageError(f"{one} ran by {_path_words(a)}, {other} by {_path_words(b)}: another path, not "
                             f"replicates or layouts of one; fit each into a file of its own (a table whose node "
                             f"count the log does not say: --nodes)")


def _table_line(m: MeasurementSet) -> str:
    """' (line N)': where a reader that names its tables (OSU's) found ``m``'s header, else ''."""
    return next((f" (line {x[3]})" for n in m.notes if (x := _TABLE_NOTE.fullmatch(n))), "")


def _path_words(path: str) -> str:
    return {"": "its tool's usual path (host buffers for OSU; RDMA or the default network for NCCL)",
            "sockets": "NCCL's TCP sockets"}.get(path, f"buffers in {path} device memory")


def _with_topology_note(model: AlphaBetaModel, skipped: list[str]) -> AlphaBetaModel:
    if model.topology is not None:
        return model
    tag = f"{model.collective}: "
    mine = dict.fromkeys(s.split(tag, 1)[1] for s in skipped if s.startswith(tag) or f": {tag}" in s)
    why = "; ".join(mine) or "the fit found no sweep it could use for one"
    return dataclasses.replace(model, notes=(*model.notes, NO_TOPOLOGY + why))


def _pooled(sets: list[MeasurementSet]) -> list[str]:
    """What pooling said nowhere else: several tables of one curve (two runs in one log, a log pasted twice: OSU's
    reader names its tables), a table whose sizes start again (another run's rows above this one's, or nccl-tests'
    -N cycles): each size's times are replicates of one measurement."""
    out = [f"{len(sets)} tables pooled as replicates of one curve"] if len(sets) > 1 and not any(
        _TABLE_NOTE.fullmatch(n) for m in sets for n in m.notes) else []
    for m in (m for m in sets if m.source != "pybench"):  # (pybench's own results keep the asked order)
        if (back := np.flatnonzero(np.diff(m.size_bytes) <= 0)).size:
            out.append(f"{Path(m.path).name + ': ' if m.path else ''}its sizes start again at "
                       f"{format_size(int(m.size_bytes[back[0] + 1]))} after {format_size(int(m.size_bytes[back[0]]))} "
                       f"(another run's rows in the same table, or -N cycles): pooled with the earlier rows as "
                       f"replicates")
    return out


def _refuse_tables_apart(sets: list[MeasurementSet], size: np.ndarray, time: np.ndarray) -> None:
    """UsageError where tables of one layout pooled as replicates disagree at most of their sizes: two systems or
    settings, or one run disturbed throughout (two processes' tests interleaved in one log, one of them on a
    broken node), of which a curve through both would be neither."""
    if len(sets) < 2:
        return
    shared = _held_by_several(sets)
    mine = np.isin(size, list(shared))
    far, sizes = disturbed_sizes(size[mine], time[mine]), len(shared)
    if len(far) >= max(3, sizes / 2):
        ratios = [r for _, r in far]
        names = ", ".join(dict.fromkeys(Path(m.path).name or m.label for m in sets))
        if sets[0].world_size == 1:  # processes started side by side, each its own 1-rank test
            raise UsageError(f"{names}: {len(sets)} tables of {sets[0].collective} at 1 rank each differ "
                             f"{min(ratios):.3g}x-{max(ratios):.3g}x at {len(far)} of their {sizes} sizes: "
                             f"processes that each ran the test alone, sharing the GPUs (started side by side, or "
                             f"under mpirun with nccl-tests built without MPI=1); a collective over 1 rank moves "
                             f"nothing between ranks, so nothing here models one: run the ranks as one job "
                             f"(nccl-tests built with MPI=1 under mpirun -np N, or -g N) and fit that log")
        raise UsageError(f"{names}: {len(sets)} tables of {sets[0].collective} at {sets[0].world_size or '?'} ranks "
                         f"differ {min(ratios):.3g}x-{max(ratios):.3g}x at {len(far)} of their {sizes} sizes: not "
                         f"replicates of one system (other settings or nodes, or a run disturbed throughout); fit "
                         f"each table from a log of its own")


def _held_by_several(sets: list[MeasurementSet]) -> set[int]:
    """The sizes two or more of ``sets`` measured: where tables pooled as replicates meet."""
    seen: Counter[int] = Counter(int(u) for m in sets for u in np.unique(m.size_bytes))
    return {u for u, n in seen.items() if n > 1}


def _disagreeing_replicates(size: np.ndarray, time: np.ndarray, sets: list[MeasurementSet]) -> list[str]:
    """One note naming the sizes whose replicates differ by more than
    :data:`~pybench.model.anomalies.REPLICATE_RATIO`; where several of ``sets`` measured such a size, it may be
    their settings that differ, not a disturbance (elsewhere the replicates are one table's own)."""
    far = disturbed_sizes(size, time)
    if not far:
        return []
    shared = _held_by_several(sets)
    sweeps = len(sets) if any(int(u) in shared for u, _ in far) else 1
    shown = ", ".join(f"{format_size(int(u))} ({ratio:.0f}x)" for u, ratio in far[:6])
    why = ("the run was disturbed there, or the tables ran with other settings (NCCL_PROTO, GPUDirect, placement, "
           "another build): fit each table apart if they did" if sweeps > 1 else
           "the run was disturbed there")
    pooled = f"{sweeps} tables pooled as replicates" if sweeps > 1 else "out-of-place and in-place"
    return [f"the times measured at {len(far)} size(s) differ between their replicates ({pooled}): {shown}"
            f"{' ...' if len(far) > 6 else ''}: {why}, and the curve through them is no measurement (the topology "
            f"model leaves them out); rerun"]


def _in_place_apart(m: MeasurementSet) -> list[str]:
    """One note where the in-place times run :data:`~pybench.model.anomalies.ANOMALY_RATIO` or more off the
    out-of-place ones, the same way, at as many consecutive sizes as a piece's fewest points (RCCL's in-place
    all-to-all on an MI355X node): another code path, not a disturbance; pooled as replicates, the band holds
    both."""
    if m.time_in_place_s is None:
        return []
    with np.errstate(invalid="ignore", divide="ignore"):
        log_ratio = np.log(m.time_in_place_s / m.time_s)
    side = np.where(np.isfinite(log_ratio) & (np.abs(log_ratio) >= np.log(ANOMALY_RATIO)), np.sign(log_ratio), 0)
    run, first, k = 0, 0, 0
    while k < side.size:
        end = k + 1
        while side[k] and end < side.size and side[end] == side[k]:
            end += 1
        if side[k] and end - k > run:
            run, first = end - k, k
        k = end
    if run < DEFAULT_MIN_POINTS:
        return []
    how = float(np.exp(np.median(log_ratio[first:first + run])))
    return [f"in-place times are {how:.2g}x the out-of-place ones at {run} consecutive sizes "
            f"({format_size(int(m.size_bytes[first]))} to {format_size(int(m.size_bytes[first + run - 1]))}): "
            f"the two run different code paths there, pooled as replicates of one size, so the band holds both"]
