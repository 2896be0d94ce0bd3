"""The fitted alpha-beta model of one collective: prediction at any size and world, its report, its JSON entry.

Every piece has alpha >= 0 and B > 0 (the fit is constrained, see :mod:`pybench.model.segment`)
and the world-size factors are positive, so every predicted time is positive.
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from pybench.collectives import MODELLED
from pybench.errors import FileFormatError, NotDetermined, UsageError
from pybench.io.schemas import MAX_WORLD
from pybench.model.anomalies import Anomaly
from pybench.model.beyond_sweep import unmeasured_bytes, unresolved_latency
from pybench.model.calibration import BEYOND_SIZES, FITTED_SWEEP, Z95, Calibration, Spread, load_calibration
from pybench.model.crossing import one_node_model_nodes
from pybench.model.model_report import model_report
from pybench.model.model_writer import save_models
from pybench.model.piecewise import bytes_rate_above, predict_segments
from pybench.model.segment import SegmentFit
from pybench.model.topology_fit import nodes_of
from pybench.sizes import MAX_SIZE_BYTES, format_size

NO_TOPOLOGY = "no topology model: "
"""Starts the note a curve keeps when the fit gave its collective no topology model, so that a
question about another layout is refused with the fit's own reason, not a guess at it."""


@dataclass(frozen=True, eq=False)
class Prediction:
    """Predicted time per operation with its confidence band.

    Attributes are floats for a scalar size, arrays for an array of sizes.
    ``time_low_s`` is clipped at zero.
    """

    size_bytes: float | np.ndarray
    world: int | None
    time_s: float | np.ndarray
    time_low_s: float | np.ndarray
    time_high_s: float | np.ndarray
    provenance: str = "measured"
    """What the prediction rests on (:meth:`AlphaBetaModel.provenance_at` at the fitted layout, the topology
    model's kinds elsewhere); for several sizes, each kind once."""


def _holds_a_boolean(sizes: Any) -> bool:
    """Whether ``sizes`` (a number, an array or nested lists) holds a boolean, which numpy would read as 0 or 1."""
    if isinstance(sizes, (bool, np.bool_)):
        return True
    if isinstance(sizes, np.ndarray):
        return sizes.dtype == bool or (sizes.dtype == object and any(map(_holds_a_boolean, sizes.reshape(-1))))
    return isinstance(sizes, (list, tuple)) and any(map(_holds_a_boolean, sizes))


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
    algorithm, algorithm_basis : str
        What files from before topology models recorded; other layouts are the topology model's now.
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
    anomalies : tuple of Anomaly
        Sizes far off their neighbours' trend, named and left out of the fit.
    """

    collective: str
    backend: str
    link_class: str | None
    world_size: int | None
    dtype: str
    segments: tuple[SegmentFit, ...]
    algorithm: str = ""
    """Files before topology models named a formula here to extrapolate in world size; kept as read."""
    algorithm_basis: str = ""
    criterion: str = "bic"
    n_points: int = 0
    r2: float = math.nan
    median_ape: float = math.nan
    max_ape: float = math.nan
    single_line_median_ape: float = math.nan
    single_line_max_ape: float = math.nan
    sources: tuple[str, ...] = ()
    notes: tuple[str, ...] = field(default_factory=tuple)
    anomalies: tuple[Anomaly, ...] = ()
    topology: Any = field(default=None, compare=False, repr=False)
    """The model file's topology model of the same collective and backend, which answers for other layouts."""
    sweeps: tuple[Any, ...] = field(default=(), compare=False, repr=False)
    """The file's other sweeps of this collective, backend and element type: each answers its own layout."""
    default_layout: bool = field(default=True, compare=False, repr=False)
    """False where :func:`~pybench.model.model_files.load_model` was not told which of several sweeps sharing one
    topology model to take: every layout is answered alike, but a prediction without ``world=`` has none."""

    # -- geometry --------------------------------------------------------------------
    @property
    def size_min_bytes(self) -> int:
        """Smallest measured size covered."""
        return int(self.segments[0].size_min_bytes)

    @property
    def size_max_bytes(self) -> int:
        """Largest measured size covered."""
        return int(self.segments[-1].size_max_bytes)

    def _fitted_nodes(self) -> int | None:
        """Nodes of the fitted sweep, where the topology model or the link class says."""
        if self.link_class == "intra-node":  # (hosts of one NVLink domain, where a domain is a node: their count)
            return (nodes_of(self) or 1) if getattr(self.topology, "hosts_per_node", 1) > 1 else 1
        fitted = [n for w, n in getattr(self.topology, "fitted", ()) if w == self.world_size and n > 1]
        if not fitted:  # no topology model fitted it (point-to-point): the hosts its notes name
            return nodes_of(self) if self.world_size else None
        return fitted[0] if len(fitted) == 1 else None

    def _nodes_for(self, world: int) -> int:
        """Nodes for ``world`` ranks when the caller gives none: one node for an intra-node model, else
        the ranks per node of the fitted multi-node sweeps."""
        if world < 2:
            raise UsageError(f"world={world}: a collective over one rank moves nothing between ranks; give world= "
                             f"2 or more")
        if self.link_class == "intra-node":
            return one_node_model_nodes(self.topology, self.world_size, self.collective, world)
        per_node = {w // n for w, n in getattr(self.topology, "fitted", ()) if n > 1}
        if len(per_node) == 1 and world % (rpn := per_node.pop()) == 0:
            return world // rpn
        raise UsageError(f"{world} ranks of the {self.collective} model: give nodes= (how many nodes they run on)")

    # -- prediction ------------------------------------------------------------------
    def predict(self, size_bytes, world: int | None = None, band: str | None = None,
                nodes: int | None = None, calibration: Calibration | None = None) -> Prediction:
        """Time per operation at ``size_bytes`` (scalar or array) on ``world`` ranks over ``nodes`` nodes.

        Parameters
        ----------
        size_bytes : int, float or array_like
            Message size(s) in bytes (pybench convention).
        world : int, optional
            Ranks; default the fitted world size. At the fitted layout the measured curve answers;
            anywhere else the file's topology model does (:mod:`pybench.model.topology`), with an
            interval calibrated for what it rests on. A model without one refuses, saying so.
        band : {'prediction', 'confidence'}, optional
            At the fitted layout, ``prediction``: where one new measurement should land (what is
            validated; the default, or ``confidence`` for files that predate it, said in
            ``provenance``); ``confidence``: the 95% band of the mean time. Elsewhere the topology
            model's prediction interval.
        nodes : int, optional
            Nodes the ranks run on (default: the fitted layout's ranks per node).
        calibration : Calibration, optional
            The interval constants beyond the measured sizes (default: the shipped ones; validation passes
            those chosen without the dataset it scores).

        Returns
        -------
        Prediction
            ``time_s`` (always > 0) with the band ``[time_low_s, time_high_s]`` and what it rests on
            (``provenance``).
        """
        try:
            if _holds_a_boolean(size_bytes):
                raise TypeError  # (True is no size, though numpy reads it as 1)
            s = np.asarray(size_bytes, dtype=float)
        except (TypeError, ValueError):
            raise UsageError(f"sizes to predict must be numbers of bytes, got {size_bytes!r:.40}; "
                             f"pybench.sizes.parse_sizes reads '1M:1G'") from None
        if s.size == 0:
            raise UsageError("no sizes to predict: give one or more numbers of bytes")
        if np.any(~np.isfinite(s)) or np.any(s <= 0):  # (a curve's sizes need not be whole: plots, bucket shares)
            raise UsageError("sizes to predict must be positive numbers of bytes")
        if np.any(s > MAX_SIZE_BYTES):  # the CLI's bound too: no collective moves more than 16 TiB at once
            raise UsageError(f"sizes to predict must be at most {format_size(MAX_SIZE_BYTES)}, got "
                             f"{float(np.max(s)):.4g} bytes")
        for name, value in (("world", world), ("nodes", nodes)):
            if value is not None and (not isinstance(value, (int, np.integer)) or isinstance(value, bool) or value < 1
                                      or value > MAX_WORLD):
                raise UsageError(f"{name} {value!r} must be a whole number from 1 to {MAX_WORLD}")
        if world is None and not self.default_layout:
            worlds = ", ".join(str(w) for w in sorted({self.world_size, *(x.world_size for x in self.sweeps)}))
            raise UsageError(f"the file holds {self.collective} sweeps at {worlds} ranks: give world= (and nodes=), or "
                             f"load_model(..., world_size=N) to make one the default")
        if world is None and nodes is not None and nodes != self._fitted_nodes():
            raise UsageError(f"nodes={nodes} needs world= (the rank count to predict for): the {self.collective} "
                             f"model was fitted at {self.world_size} ranks on {self._fitted_nodes() or '?'} node(s)")
        if world == self.world_size and nodes is not None and self._fitted_nodes() is None and self.topology is None:
            raise UsageError(f"the {self.world_size}-rank {self.collective} sweep does not record how many nodes it "
                             f"ran on, so nodes={nodes} cannot be told from it; refit it with `pybench fit --nodes N`, "
                             f"or leave nodes out to have the sweep answer")
        if band not in (None, "prediction", "confidence"):
            raise UsageError(f"unknown band {band!r}; use 'prediction' or 'confidence'")
        if world is not None and not (world == self.world_size and nodes in (None, self._fitted_nodes())):
            own = next((x for x in self.sweeps if x.world_size == world and nodes in (None, x._fitted_nodes())), None)
            if own is not None:  # a measured layout: its own sweep answers, as `pybench predict` does
                return own.predict(size_bytes, world, band, nodes, calibration)
            return self._predict_elsewhere(s, int(world), nodes, band)
        flat = s.reshape(-1)
        other = np.array([bool(self._beyond_own_sweep(float(x))) for x in flat], dtype=bool)
        if not other.any():
            return self._predict_own(s, band, calibration)
        unknown = [why for x in flat if (why := self.undetermined_at(float(x)))]
        if unknown:
            raise NotDetermined(unknown[0])
        # sizes beyond what the sweep determines, measured at other layouts: the topology model answers those, as it
        # does elsewhere, and the sweep's own curve the rest
        if other.all():
            return self._predict_elsewhere(s, int(self.world_size or 0), self._fitted_nodes(), band)
        there = self._predict_elsewhere(flat[other], int(self.world_size or 0), self._fitted_nodes(), band)
        here = self._predict_own(flat[~other], band, calibration)
        t, low, high = (np.empty(flat.shape) for _ in range(3))
        for joined, key in ((t, "time_s"), (low, "time_low_s"), (high, "time_high_s")):
            joined[other], joined[~other] = getattr(there, key), getattr(here, key)
        return Prediction(s, self.world_size, t.reshape(s.shape), low.reshape(s.shape), high.reshape(s.shape),
                          f"{here.provenance}; {there.provenance}")

    def _predict_own(self, s: np.ndarray, band: str | None, calibration: Calibration | None) -> Prediction:
        """The fitted sweep's own curve at sizes ``s`` with its interval (:meth:`predict` at the fitted layout)."""
        said = "; ".join(sorted({self.provenance_at(float(x)) for x in s.reshape(-1)}))
        if band is None:
            band = "prediction"
            if not all(math.isfinite(seg.rel_sigma) for seg in self.segments):
                band = "confidence"
                said += " (confidence band: the file predates prediction bands; refit it)"
        t_arr, spreads = self.times_and_spreads(s, band)
        calibration = calibration or load_calibration()
        ends = np.array([sp.bounds(calibration) for sp in spreads])
        below, above = ends[:, 0].reshape(t_arr.shape), ends[:, 1].reshape(t_arr.shape)
        low, high = t_arr * np.exp(-below), t_arr * np.exp(above)
        # More bytes never take less time than the largest size measured, nor more per byte: above the sweep, the
        # ends stay within that size's own.
        if np.any(s > self.size_max_bytes):
            top_t, top_spread = self.times_and_spreads(np.array(float(self.size_max_bytes)), band)
            (down, up), above_top = top_spread[0].bounds(calibration), s > self.size_max_bytes
            low = np.where(above_top, np.maximum(low, float(top_t) * math.exp(-down)), low)
            per_byte = float(top_t) * math.exp(up) / self.size_max_bytes
            high = np.where(above_top, np.minimum(high, np.maximum(per_byte * s, t_arr)), high)
            # no faster than the described NICs carry: the time too, not only its low end (which alone inverted the
            # interval where the curve carried on ran faster than the NICs)
            floor = np.where(above_top, self._nic_floor_s(s), 0.0)
            if np.any(floor > t_arr):
                said += "; raised to what the described NICs carry"
            t_arr = np.maximum(t_arr, floor)
            low, high = np.maximum(low, floor), np.maximum(high, t_arr)
        # Fewer bytes take no longer, but for a protocol switch just below the sweep (real logs run a size there
        # slower than the one above it): further below, the upper end stays that first octave's.
        if np.any(far_below := s < self.size_min_bytes / 2):
            octave_t, octave_spread = self.times_and_spreads(np.array(self.size_min_bytes / 2), band)
            ceiling = float(octave_t) * math.exp(octave_spread[0].bounds(calibration)[1])
            high = np.where(far_below, np.minimum(high, np.maximum(ceiling, t_arr)), high)
        # An anomaly's own measurement is a real time at its size (a switch there, or a disturbed run): the
        # interval reaches it, wherever the trend lies.
        for a in self.anomalies:
            at = s == a.size_bytes
            low, high = np.where(at, np.minimum(low, a.time_s), low), np.where(at, np.maximum(high, a.time_s), high)
        if s.ndim == 0:
            return Prediction(float(s), self.world_size, float(t_arr), float(low), float(high), said)
        return Prediction(s, self.world_size, t_arr, low, high, said)

    def _nic_floor_s(self, sizes: np.ndarray) -> np.ndarray:
        """The least time the described NICs allow at ``sizes`` for this sweep's layout where it crossed nodes and
        the model is on a system description (:func:`~pybench.model.crossing.nic_floor_s`), else 0: above the
        sweep, the largest size's own low end alone let 1 TiB promise 33 TB/s."""
        nodes, tm, world = self._fitted_nodes(), self.topology, self.world_size
        from pybench.model.description_checks import nics_contradicted
        if tm is None or tm.system is None or not nodes or nodes < 2 or not world or nics_contradicted(tm, tm.system):
            return np.zeros(np.shape(sizes))  # (NICs the sweep outran are not its cluster's: they bound nothing)
        from pybench.model.crossing import nic_floor_s
        return np.vectorize(lambda x: nic_floor_s(tm, float(x), world, nodes), otypes=[float])(sizes)

    def times_and_spreads(self, sizes: np.ndarray, band: str = "prediction") -> tuple[np.ndarray, list[Spread]]:
        """The curve's times at ``sizes`` and each one's interval inputs (:mod:`pybench.model.calibration`, in
        the order of ``sizes.reshape(-1)``): the curve's own ``band`` near the size is its local scatter; beyond
        the measured sizes nothing measured says how the curve goes on, and it widens with the log distance at
        the widening validated for sizes beyond a sweep (:data:`~pybench.model.calibration.BEYOND_SIZES`), each
        part its own factor of its share of the time at the nearest end of the sweep."""
        t, half = predict_segments(self.segments, sizes if sizes.ndim else float(sizes), band)
        t_arr = np.asarray(t, dtype=float)
        flat, rel = sizes.reshape(-1), (np.asarray(half, dtype=float) / t_arr).reshape(-1)
        far = np.maximum(np.log(self.size_min_bytes / flat), 0.0) + np.maximum(np.log(flat / self.size_max_bytes), 0.0)
        return t_arr, [Spread(BEYOND_SIZES, float(np.log1p(b)) / Z95, float(d), True, False,
                              self._bytes_share(float(x)), below_sweep=bool(x < self.size_min_bytes),
                              above_bytes_time=self._above_bytes_time(float(x), float(tx)))
                       for x, b, d, tx in zip(flat, rel, far, t_arr.reshape(-1))]

    def _above_bytes_time(self, size: float, time_s: float) -> float:
        """ln(``time_s`` / the bytes' time at the last piece's rate) above the sweep where that piece has a rate
        (:attr:`~pybench.model.calibration.Spread.above_bytes_time`), else inf."""
        bytes_s = size * bytes_rate_above(self.segments)
        return math.log(time_s / bytes_s) if size > self.size_max_bytes and bytes_s > 0 and time_s > 0 else math.inf

    def _bytes_share(self, size: float) -> float:
        """The share of the time that the bytes take at the end of the measured sizes nearest ``size``: what the
        sweep showed there (one that ends while latency rules says nothing of its bandwidth beyond)."""
        seg, end = ((self.segments[-1], self.size_max_bytes) if size > self.size_max_bytes
                    else (self.segments[0], self.size_min_bytes))
        data = end * (bytes_rate_above(self.segments) if size > self.size_max_bytes else seg.inv_bw_s_per_byte)
        return data / (seg.alpha_s + data) if seg.alpha_s + data > 0 else 0.0

    def undetermined_at(self, size: float) -> str:
        """Why no model of the file answers at ``size`` on the fitted layout, or '': the sweep's own curve cannot
        (:meth:`_beyond_own_sweep`), and the topology model, which may have seen larger sizes at other
        layouts, does not reach it either."""
        why = self._beyond_own_sweep(size)
        return "" if why and self._topology_reaches(size) else why

    def _topology_reaches(self, size: float) -> bool:
        """Whether the topology model's fitted sizes reach ``size`` (then it answers at the fitted layout)."""
        return (self.topology is not None and self.world_size is not None
                and self.topology.size_range[0] <= size <= self.topology.size_range[1])

    def _beyond_own_sweep(self, size: float) -> str:
        """Why the sweep's own curve cannot answer at ``size`` (:mod:`pybench.model.beyond_sweep`)."""
        seg, first = self.segments[-1], self.segments[0]
        return unmeasured_bytes(self.collective, self.backend, self.link_class, self.size_max_bytes, seg.alpha_s,
                                seg.inv_bw_s_per_byte, size) or unresolved_latency(
            self.collective, self.size_min_bytes, first.held_ci_high if first.held == "alpha" else 0.0,
            first.inv_bw_s_per_byte, first.alpha_s + self.size_min_bytes * first.inv_bw_s_per_byte, size)

    def provenance_at(self, size: float) -> str:
        """What a prediction at ``size`` on the fitted layout rests on, in the topology model's words (its own where
        it answers: beyond what the sweep determines, at sizes other layouts measured)."""
        if self._beyond_own_sweep(size) and self._topology_reaches(size):
            try:
                return self._predict_elsewhere(np.array(float(size)), int(self.world_size or 0),
                                               self._fitted_nodes()).provenance
            except NotDetermined:
                pass
        if any(a.size_bytes == size for a in self.anomalies):
            return "the fit's trend (the measurement there was left out of the fit as an anomaly)"
        if not self.size_min_bytes <= size <= self.size_max_bytes:
            last = self.segments[-1]
            data = size * last.inv_bw_s_per_byte
            unseen = size > self.size_max_bytes and self._bytes_share(size) < 0.5 <= data / (last.alpha_s + data)
            return f"{FITTED_SWEEP}, {BEYOND_SIZES}" + (  # where the bytes would rule, a rate never measured
                f"; its bytes' rate is not measured (the sweep ended at {format_size(self.size_max_bytes)} while "
                f"latency ruled): measure up to the sizes asked" if unseen else "")
        return "measured" if size in self._measured_sizes else "between measured sizes"

    @functools.cached_property
    def _measured_sizes(self) -> frozenset[float]:
        """The sizes the fit was measured at (each piece's residuals are recorded at them), once per model."""
        return frozenset(float(x) for seg in self.segments for x, _ in seg.residuals)

    def _predict_elsewhere(self, s: np.ndarray, world: int, nodes: int | None, band: str | None = None) -> Prediction:
        """Another layout (or sizes the sweep does not determine): the topology model's answer, or a one-line
        refusal naming what is missing."""
        if self.world_size is None:
            raise UsageError(f"the {self.collective} model has no recorded world size, so it answers for its own sweep "
                             f"only; refit it with the rank count given (`pybench fit LOG --world N`)")
        if self.topology is None:
            raise UsageError(f"the {self.collective} model was fitted at {self.world_size} ranks only and holds no "
                             f"topology model ({self.why_no_topology()}), so {world} ranks are not determined by "
                             f"it; or measure at {world} ranks")
        n = self._nodes_for(world) if nodes is None else int(nodes)
        preds = [self.topology.predict(int(x), world, n) for x in s.reshape(-1)]
        undetermined = [p.undetermined for p in preds if p.undetermined]
        if undetermined:
            raise NotDetermined(undetermined[0])
        t, lo, hi = (np.array([getattr(p, k) for p in preds]).reshape(s.shape) for k in ("time_s", "low_s", "high_s"))
        kinds = "; ".join(sorted({p.provenance for p in preds}))
        if band == "confidence":  # no mean is measured there to put a confidence band around
            kinds += " (a prediction interval: another layout has no confidence band)"
        if s.ndim == 0:
            return Prediction(float(s), world, float(t), float(lo), float(hi), kinds)
        return Prediction(s, world, t, lo, hi, kinds)

    def why_no_topology(self) -> str:
        """Why this curve carries no topology model, as the fit recorded it, with what to do."""
        recorded = [n.removeprefix(NO_TOPOLOGY) for n in self.notes if n.startswith(NO_TOPOLOGY)]
        if recorded:
            return recorded[0]
        return ("its topology model does not answer that layout (`pybench predict` there says so)" if self.topology else
                "the file was written by a pybench without topology models: refit it (`pybench fit LOG... -o FILE`)")

    # -- text ------------------------------------------------------------------------
    def report(self) -> str:
        """Multi-line text report: what was fitted, each piece with intervals, goodness
        (:func:`pybench.model.model_report.model_report`)."""
        return model_report(self)

    def __repr__(self) -> str:
        return (f"AlphaBetaModel({self.collective}, {self.backend}, {self.link_class}, "
                f"world={self.world_size}, {len(self.segments)} pieces, "
                f"{self.size_min_bytes}..{self.size_max_bytes} B)")

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
            "anomalies": [a.to_dict() for a in self.anomalies],
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
            for a, b in zip(segments, segments[1:]):  # each size has one regime: the pieces follow in order
                if a.size_max_bytes >= b.size_min_bytes:
                    raise ValueError(f"its pieces {a.size_min_bytes}..{a.size_max_bytes} B and "
                                     f"{b.size_min_bytes}..{b.size_max_bytes} B overlap or are out of order")
            if d["collective"] not in MODELLED:
                raise ValueError(f"collective {str(d['collective'])[:40]!r} is none pybench fits "
                                 f"({', '.join(MODELLED)})")
            world = d.get("world_size")
            model = cls(
                collective=str(d["collective"]), backend=str(d["backend"]),
                link_class=d.get("link_class"),
                world_size=None if world is None else int(world), dtype=str(d.get("dtype", "")),
                segments=segments, algorithm=str(d.get("algorithm", "")),
                algorithm_basis=str(d.get("algorithm_basis", "")),
                criterion=str(d.get("criterion", "bic")), n_points=int(d.get("n_points", 0)),
                r2=_fj(d.get("r2")), median_ape=_fj(d.get("median_ape")), max_ape=_fj(d.get("max_ape")),
                single_line_median_ape=_fj(d.get("single_line_median_ape")),
                single_line_max_ape=_fj(d.get("single_line_max_ape")),
                sources=tuple(str(x) for x in d.get("sources", [])),
                notes=tuple(str(x) for x in d.get("notes", [])),
                anomalies=tuple(Anomaly.from_dict(x) for x in d.get("anomalies", [])))
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
        return model

    def save(self, path: str | Path, overwrite: bool = False) -> Path:
        """Write this model, the sweeps it answers other measured layouts with (:attr:`sweeps`) and its topology model
        to ``path``, so that the file answers as the model does; see :func:`pybench.model.model_writer.save_models`."""
        return save_models([self, *self.sweeps], path, overwrite=overwrite,
                           topology=[self.topology] if self.topology else [])


def _jf(x: float):
    x = float(x)
    return x if math.isfinite(x) else None


def _fj(x) -> float:
    return math.nan if x is None else float(x)
