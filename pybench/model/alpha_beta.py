"""Fitted alpha-beta models: typed, predictable, reportable, saved as versioned JSON.

A model file is JSON, never pickle::

    {"schema": "pybench.model", "schema_version": 1, "models": [ {...}, ... ]}

One file may hold several models (one per collective / backend / link class / world
size). :func:`load_models` returns all of them; :func:`load_model` returns one, chosen
by optional filters, and refuses to guess when several match.

Uncertainty: ``predict`` returns the 95% confidence band of the fitted line (from the
parameter covariance and Student's t), i.e. where the *mean* time lies, not where one
noisy run will land. At a world size other than the fitted one, each piece is mapped to
per-link (alpha, B) through the algorithm formula (see :mod:`pybench.model.algorithms`) and
back out at the new world; the band is scaled the same way. The sizes where pieces
change are kept as measured (a protocol switch point at another world size is unknown).

Every piece has alpha >= 0 and B > 0 (the fit is constrained, see :mod:`pybench.model.fit`)
and the world-size factors are positive, so every predicted time is positive. Files
from before that constraint that hold a negative latency are refused on load, with the
remedy (refit).
"""

from __future__ import annotations

import dataclasses
import json
import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from pybench.errors import FileFormatError, UsageError
from pybench.io.files import read_json, refuse_existing, write_atomic
from pybench.model.algorithms import default_algorithm, get_algorithm
from pybench.model.fit import (
    DEFAULT_CONFIDENCE,
    DEFAULT_MIN_POINTS,
    DEFAULT_NOISE_FLOOR,
    SegmentFit,
    fit_alpha_beta,
    fit_single_line,
    predict_segments,
    select_algorithm,
)

MODEL_SCHEMA = "pybench.model"
MODEL_SCHEMA_VERSION = 1


@dataclass(frozen=True, eq=False)
class Prediction:
    """Predicted time per operation with its confidence band.

    Attributes are floats for a scalar size, arrays for an array of sizes.
    ``time_low_s`` is clipped at zero.
    """

    size_bytes: object
    world: int
    time_s: object
    time_low_s: object
    time_high_s: object


@dataclass(frozen=True)
class AlphaBetaModel:
    """A piecewise alpha-beta model of one collective on one set of ranks.

    Attributes
    ----------
    collective, backend : str
    link_class : str or None
        ``intra-node``, ``inter-node`` or None (unknown).
    world_size : int or None
        Ranks the data was measured on; None prevents extrapolation in world size.
    dtype : str
    segments : tuple of SegmentFit
        Ordered by size; fitted parameters at ``world_size``.
    algorithm : str
        Formula used to extrapolate to other world sizes.
    algorithm_basis : str
        Why that formula (``assumed ...`` with one world size).
    criterion : str
        Information criterion that chose the number of pieces.
    n_points : int
    r2, median_ape, max_ape : float
        Goodness of the whole fit on its own points (APE in %).
    single_line_median_ape, single_line_max_ape : float
        The same for a one-line fit, for comparison.
    sources : tuple of str
        Files the data came from.
    notes : tuple of str
    """

    collective: str
    backend: str
    link_class: str | None
    world_size: int | None
    dtype: str
    segments: tuple
    algorithm: str
    algorithm_basis: str = ""
    criterion: str = "bic"
    n_points: int = 0
    r2: float = math.nan
    median_ape: float = math.nan
    max_ape: float = math.nan
    single_line_median_ape: float = math.nan
    single_line_max_ape: float = math.nan
    sources: tuple = ()
    notes: tuple = field(default_factory=tuple)

    # -- geometry --------------------------------------------------------------------
    @property
    def size_min_bytes(self) -> int:
        """Smallest measured size covered."""
        return int(self.segments[0].size_min_bytes)

    @property
    def size_max_bytes(self) -> int:
        """Largest measured size covered."""
        return int(self.segments[-1].size_max_bytes)

    def segments_at(self, world: int | None = None) -> tuple:
        """Pieces at ``world`` ranks (the fitted ones when world is None or the fitted world)."""
        if world is None or world == self.world_size:
            return self.segments
        if self.world_size is None:
            raise UsageError(f"model of {self.collective} has no recorded world size, so it "
                             f"cannot be extrapolated to {world} ranks; refit with world_size set")
        algo = get_algorithm(self.algorithm)
        ka, kb = algo.scale(self.world_size, int(world))
        out = []
        for s in self.segments:
            cov = (s.cov[0] * ka * ka, s.cov[1] * ka * kb, s.cov[2] * kb * kb)
            # ka, kb > 0, so alpha >= 0 and 1/B >= 0 survive the mapping: predictions at
            # any world size stay positive.
            held_high = s.held_ci_high * (ka if s.held == "alpha" else kb) if s.held else s.held_ci_high
            out.append(dataclasses.replace(s, alpha_s=s.alpha_s * ka,
                                           inv_bw_s_per_byte=s.inv_bw_s_per_byte * kb, cov=cov,
                                           held_ci_high=held_high))
        return tuple(out)

    # -- prediction ------------------------------------------------------------------
    def predict(self, size_bytes, world: int | None = None,
                band: str = "confidence") -> Prediction:
        """Time per operation at ``size_bytes`` (scalar or array) on ``world`` ranks.

        Parameters
        ----------
        size_bytes : int, float or array_like
            Message size(s) in bytes (pybench convention).
        world : int, optional
            Ranks; default the fitted world size. Other values extrapolate through
            ``self.algorithm``.
        band : {'confidence', 'prediction'}
            ``confidence`` (default): 95% band of the mean time, from the parameter
            covariance. ``prediction``: where one new measurement should land (adds the
            fit's relative residual scatter); wider, and what a single run is compared to.

        Returns
        -------
        Prediction
            ``time_s`` (always > 0) with the band ``[time_low_s, time_high_s]``, which
            contains it; the low end is clipped at 0 where the band is wider than the
            time itself. The band is nan only for a piece fitted without residual
            degrees of freedom (2 points), where it is undefined.
        """
        s = np.asarray(size_bytes, dtype=float)
        if np.any(~np.isfinite(s)) or np.any(s <= 0):
            raise UsageError("sizes to predict must be positive numbers of bytes")
        segs = self.segments_at(world)
        t, half = predict_segments(segs, size_bytes if s.ndim else float(s), band)
        t_arr, h_arr = np.asarray(t, dtype=float), np.asarray(half, dtype=float)
        low = np.maximum(t_arr - h_arr, 0.0)
        high = t_arr + h_arr
        w = self.world_size if world is None else int(world)
        if s.ndim == 0:
            return Prediction(float(s), w, float(t_arr), float(low), float(high))
        return Prediction(s, w, t_arr, low, high)

    # -- text ------------------------------------------------------------------------
    def report(self) -> str:
        """Multi-line text report: what was fitted, each piece with intervals, goodness."""
        world = self.world_size if self.world_size is not None else "?"
        lines = [
            f"alpha-beta model: {self.collective} / {self.backend} / {self.link_class or 'link class unknown'}"
            f" / {world} ranks / {self.dtype}",
            f"  sizes {self.size_min_bytes} .. {self.size_max_bytes} B, {self.n_points} points, "
            f"{len(self.segments)} piece(s) chosen by {self.criterion.upper()}",
            f"  algorithm for other world sizes: {self.algorithm} ({self.algorithm_basis})",
            f"  {'sizes (B)':>25}  {'alpha (us)':>10} {'95% CI':>19}  {'B (GB/s)':>9} {'95% CI':>19}"
            f"  {'R^2':>6} {'medAPE':>6} {'maxAPE':>6}",
        ]
        notes = []
        for k, s in enumerate(self.segments):
            a_lo, a_hi = s.alpha_ci_s
            b_lo, b_hi = s.bw_ci_Bps
            mark = f" [{k + 1}]" if s.ci_notes() else ""
            lines.append(
                f"  {s.size_min_bytes:>12}..{s.size_max_bytes:<12} {s.alpha_s * 1e6:>10.3f} "
                f"[{_us(a_lo):>8},{_us(a_hi):>8}]  {_gbps(s.bw_Bps):>9} "
                f"[{_gbps(b_lo):>8},{_gbps(b_hi):>8}]  {s.r2:>6.3f} {s.median_ape:>5.1f}% "
                f"{s.max_ape:>5.1f}%{mark}")
            notes.extend(f"[{k + 1}] {n}" for n in s.ci_notes())
        lines.append(f"  whole fit: R^2 {self.r2:.4f}, median APE {self.median_ape:.1f}%, "
                     f"max APE {self.max_ape:.1f}%")
        for n in notes:
            lines.append(f"  {n}")
        if math.isfinite(self.single_line_median_ape):
            lines.append(f"  one line instead: median APE {self.single_line_median_ape:.1f}%, "
                         f"max APE {self.single_line_max_ape:.1f}%")
        for note in self.notes:
            lines.append(f"  note: {note}")
        return "\n".join(lines)

    def __repr__(self) -> str:
        return (f"AlphaBetaModel({self.collective}, {self.backend}, {self.link_class}, "
                f"world={self.world_size}, {len(self.segments)} pieces, "
                f"{self.size_min_bytes}..{self.size_max_bytes} B, algorithm={self.algorithm})")

    # -- persistence -----------------------------------------------------------------
    def to_dict(self) -> dict:
        """Plain dict (JSON types only)."""
        return {
            "collective": self.collective,
            "backend": self.backend,
            "link_class": self.link_class,
            "world_size": self.world_size,
            "dtype": self.dtype,
            "algorithm": self.algorithm,
            "algorithm_basis": self.algorithm_basis,
            "criterion": self.criterion,
            "n_points": int(self.n_points),
            "r2": _jf(self.r2),
            "median_ape": _jf(self.median_ape),
            "max_ape": _jf(self.max_ape),
            "single_line_median_ape": _jf(self.single_line_median_ape),
            "single_line_max_ape": _jf(self.single_line_max_ape),
            "sources": list(self.sources),
            "notes": list(self.notes),
            "segments": [s.to_dict() for s in self.segments],
        }

    @classmethod
    def from_dict(cls, d: dict) -> AlphaBetaModel:
        """Inverse of :meth:`to_dict`; raises FileFormatError naming what is wrong."""
        if not isinstance(d, dict):
            raise FileFormatError("a model entry must be a JSON object")
        try:
            segments = tuple(SegmentFit.from_dict(s) for s in d["segments"])
            if not segments:
                raise ValueError("no segments")
            world = d.get("world_size")
            model = cls(
                collective=str(d["collective"]), backend=str(d["backend"]),
                link_class=d.get("link_class"),
                world_size=None if world is None else int(world), dtype=str(d.get("dtype", "")),
                segments=segments, algorithm=str(d["algorithm"]),
                algorithm_basis=str(d.get("algorithm_basis", "")),
                criterion=str(d.get("criterion", "bic")), n_points=int(d.get("n_points", 0)),
                r2=_fj(d.get("r2")), median_ape=_fj(d.get("median_ape")), max_ape=_fj(d.get("max_ape")),
                single_line_median_ape=_fj(d.get("single_line_median_ape")),
                single_line_max_ape=_fj(d.get("single_line_max_ape")),
                sources=tuple(str(x) for x in d.get("sources", [])),
                notes=tuple(str(x) for x in d.get("notes", [])))
        except (KeyError, TypeError, ValueError, AttributeError) as e:
            what = f"missing field {e}" if isinstance(e, KeyError) else str(e)
            raise FileFormatError(f"model entry is malformed: {what}") from None
        for s in segments:
            # Files from before the fit was constrained may hold a negative latency, which
            # predicts negative times at small sizes (or at other world sizes): refuse them.
            if not (s.alpha_s >= 0 and s.inv_bw_s_per_byte >= 0) or (
                    s.alpha_s == 0 and s.inv_bw_s_per_byte == 0):
                raise FileFormatError(
                    f"model entry is unphysical: piece {s.size_min_bytes}..{s.size_max_bytes} B has "
                    f"alpha {s.alpha_s * 1e6:.4g} us and 1/B {s.inv_bw_s_per_byte:.4g} s/B (both must be "
                    f">= 0, not both 0); it predicts negative times. Refit it with this pybench "
                    f"('pybench fit'), whose fit keeps alpha >= 0 and B > 0")
        get_algorithm(model.algorithm)  # unknown formula -> UsageError naming the known ones
        return model

    def save(self, path, overwrite: bool = False) -> Path:
        """Write this model alone to ``path``; see :func:`save_models`."""
        return save_models([self], path, overwrite=overwrite)


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


def _jf(x: float):
    x = float(x)
    return x if math.isfinite(x) else None


def _fj(x) -> float:
    return math.nan if x is None else float(x)


# ----------------------------------------------------------------------------------------
# Building models from measurements
# ----------------------------------------------------------------------------------------

def fit_model(measurements, *, algorithm: str | None = None,
              algorithm_basis: str | None = None, min_points: int = DEFAULT_MIN_POINTS,
              criterion: str = "bic", noise_floor: float = DEFAULT_NOISE_FLOOR,
              confidence: float = DEFAULT_CONFIDENCE) -> AlphaBetaModel:
    """Fit one :class:`AlphaBetaModel` to sweeps of the same collective and world size.

    Parameters
    ----------
    measurements : MeasurementSet or sequence of them
        Must agree on collective, backend, link class and world size (repeated runs are
        pooled).
    algorithm : str, optional
        Formula for world-size extrapolation (default: the collective's ring form).
    algorithm_basis : str, optional
        Text saying why (stored in the model).
    min_points, criterion, noise_floor, confidence
        See :func:`pybench.model.fit.fit_alpha_beta`.

    Returns
    -------
    AlphaBetaModel
    """
    sets = [measurements] if hasattr(measurements, "size_bytes") else list(measurements)
    if not sets:
        raise UsageError("no measurements to fit")
    keys = {(m.collective, m.backend, m.link_class, m.world_size) for m in sets}
    if len(keys) > 1:
        raise UsageError("fit_model needs sweeps of one collective/backend/link class/world size; "
                         f"got {len(keys)} different ones (use fit_models to fit each group)")
    first = sets[0]
    # Every measurement each set holds (nccl-tests: out-of-place and in-place times).
    points = [m.fit_points() for m in sets]
    size = np.concatenate([p[0] for p in points])
    time = np.concatenate([p[1] for p in points])
    if np.unique(size).size < 2:
        raise UsageError(f"{first.path or first.label}: {np.unique(size).size} distinct size(s); "
                         f"a model needs at least 2 (sweep more sizes, e.g. --sizes 1M:1G)")
    fit = fit_alpha_beta(size, time, min_points=min_points, criterion=criterion,
                         noise_floor=noise_floor, confidence=confidence)
    line = fit_single_line(size, time, confidence=confidence)
    if algorithm is None:
        algorithm = default_algorithm(first.collective)
        basis = algorithm_basis or "assumed: data at one world size cannot tell algorithms apart"
    else:
        get_algorithm(algorithm)
        basis = algorithm_basis or "given by the user"
    notes = []
    for m in sets:
        notes.extend(m.notes)
    return AlphaBetaModel(
        collective=first.collective, backend=first.backend, link_class=first.link_class,
        world_size=first.world_size, dtype=first.dtype, segments=fit.segments,
        algorithm=algorithm, algorithm_basis=basis, criterion=criterion,
        n_points=fit.n_points, r2=fit.r2, median_ape=fit.median_ape, max_ape=fit.max_ape,
        single_line_median_ape=line.median_ape, single_line_max_ape=line.max_ape,
        sources=tuple(sorted({m.path for m in sets if m.path})),
        notes=tuple(dict.fromkeys(notes)))


def fit_models(measurements: Sequence, **kwargs) -> list:
    """Fit one model per (collective, backend, link class, world size) group.

    When a (collective, backend, link class) group holds several world sizes, the
    algorithm formula that explains them jointly is selected (see
    :func:`pybench.model.fit.select_algorithm`) and recorded in every model of the group;
    otherwise the ring form is assumed and the model says so.

    Returns
    -------
    list of AlphaBetaModel
        In order of first appearance.
    """
    groups: dict = {}
    for m in measurements:
        groups.setdefault((m.collective, m.backend, m.link_class), {}).setdefault(m.world_size, []).append(m)
    models = []
    for (coll, _, _), by_world in groups.items():
        worlds = [w for w in by_world if w is not None]
        choice = None
        if len(worlds) > 1 and "algorithm" not in kwargs:
            choice = select_algorithm(
                coll, worlds,
                [np.concatenate([m.fit_points()[0] for m in by_world[w]]) for w in worlds],
                [np.concatenate([m.fit_points()[1] for m in by_world[w]]) for w in worlds])
        for w, sets in by_world.items():
            if choice is not None:
                models.append(fit_model(sets, algorithm=choice.name, algorithm_basis=choice.basis,
                                        **kwargs))
            else:
                models.append(fit_model(sets, **kwargs))
    return models


# ----------------------------------------------------------------------------------------
# Files
# ----------------------------------------------------------------------------------------

def models_to_document(models: Sequence[AlphaBetaModel]) -> dict:
    """The JSON document for a model file."""
    return {"schema": MODEL_SCHEMA, "schema_version": MODEL_SCHEMA_VERSION,
            "models": [m.to_dict() for m in models]}


def save_models(models: Sequence[AlphaBetaModel], path, overwrite: bool = False) -> Path:
    """Write models to a versioned JSON file, atomically.

    The document goes to a temporary file in the same directory, is flushed to disk and
    then renamed over ``path`` (``os.replace``), so a reader never sees half a file.

    Parameters
    ----------
    models : sequence of AlphaBetaModel
    path : str or Path
    overwrite : bool
        Refuse (UsageError) to replace an existing file unless True.

    Returns
    -------
    Path
    """
    p = Path(path)
    models = list(models)
    if not models:
        raise UsageError("no models to save")
    refuse_existing(p, overwrite)
    write_atomic(p, json.dumps(models_to_document(models), indent=2, allow_nan=False) + "\n")
    return p


def models_from_document(data, path="<model>") -> list:
    """Models from a loaded model-file document; FileFormatError on anything unexpected."""
    if not isinstance(data, dict):
        raise FileFormatError(f"{path}: a model file must hold a JSON object")
    if data.get("schema") != MODEL_SCHEMA:
        raise FileFormatError(f"{path}: schema {data.get('schema')!r} is not {MODEL_SCHEMA!r}")
    version = data.get("schema_version")
    if not isinstance(version, int) or isinstance(version, bool) or version < 1:
        raise FileFormatError(f"{path}: schema_version {version!r} is not a positive integer")
    if version > MODEL_SCHEMA_VERSION:
        raise FileFormatError(f"{path}: {MODEL_SCHEMA} version {version} is newer than this pybench "
                              f"reads ({MODEL_SCHEMA_VERSION}); upgrade pybench")
    entries = data.get("models")
    if not isinstance(entries, list) or not entries:
        raise FileFormatError(f"{path}: 'models' missing or empty")
    out = []
    for k, entry in enumerate(entries):
        try:
            out.append(AlphaBetaModel.from_dict(entry))
        except FileFormatError as e:
            raise FileFormatError(f"{path}: models[{k}]: {e}") from None
    return out


def load_models(path) -> list:
    """Read every model in a model file (JSON only; never pickle, never eval).

    Raises
    ------
    FileFormatError
        Unreadable, not JSON, wrong schema, newer schema version, malformed entry.
    """
    p = Path(path)
    data = read_json(p)
    return models_from_document(data, p)


def load_model(path, *, collective: str | None = None, link_class: str | None = None,
               world_size: int | None = None, backend: str | None = None) -> AlphaBetaModel:
    """Read the one model in ``path`` that matches the given filters.

    Raises
    ------
    FileFormatError
        As :func:`load_models`.
    UsageError
        No model matches, or several do (the message lists them).
    """
    models = load_models(path)
    match = [m for m in models
             if (collective is None or m.collective == collective)
             and (link_class is None or m.link_class == link_class)
             and (world_size is None or m.world_size == world_size)
             and (backend is None or m.backend == backend)]
    if len(match) == 1:
        return match[0]
    listing = "; ".join(f"{m.collective}/{m.backend}/{m.link_class}/x{m.world_size}" for m in models)
    if not match:
        raise UsageError(f"{path}: no model matches the filters; it holds: {listing}")
    raise UsageError(f"{path}: {len(match)} models match; choose with collective=, link_class=, "
                     f"world_size= or backend= (it holds: {listing})")
