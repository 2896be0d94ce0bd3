"""Choosing a fitted communication model for each collective the step makes.

Models: any object with ``collective``, ``link_class``, ``world_size`` and
``predict(size_bytes, world=None)`` returning a :class:`Prediction` satisfies
:class:`CollectiveModel`; files are read through
``pybench.model.model_files.load_models``.
"""

from __future__ import annotations

import dataclasses
import importlib
import math
import os
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any, Protocol, cast, runtime_checkable

from pybench.collectives import measure_command
from pybench.errors import BackendUnavailable, FileFormatError, NoModelFor, NotDetermined, PyBenchError, UsageError
from pybench.model.calibration import BEYOND_SIZES
from pybench.planning.topology_models import TopologyCollective, merge_part_full, topology_collectives
from pybench.sizes import format_size

__all__ = ["Prediction", "CollectiveModel", "CommTime", "ModelSet", "load_model_set", "as_model_set",
           "UPPER_BOUND"]


class Prediction(Protocol):
    """What a model's ``predict`` returns; ``time_low_s`` / ``time_high_s`` are read when present."""

    time_s: float


@runtime_checkable
class CollectiveModel(Protocol):
    """What the step model needs from a fitted alpha-beta model (pybench.model)."""

    collective: str
    link_class: str | None
    world_size: int | None

    def predict(self, size_bytes: float, world: int | None = None) -> Prediction: ...


def _norm_collective(name: str) -> str:
    return str(name).lower().replace("_", "").replace("-", "").replace(" ", "")


UPPER_BOUND = "upper bound for intra-node links, from the inter-node model"
"""Starts the source of a time that prices intra-node links with the inter-node model (no intra-node data)."""


@dataclass(frozen=True)
class CommTime:
    """Predicted time of one call, with the model's interval and where it came from."""

    time_s: float
    time_low_s: float
    time_high_s: float
    source: str
    calibrated: bool = True
    """Whether the interval says how far the time may stray (False: a sweep carried to another world by the ring
    formula, or used at a world it does not know, whose band says nothing about the move)."""

    def scaled(self, factor: float) -> CommTime:
        return CommTime(self.time_s * factor, self.time_low_s * factor, self.time_high_s * factor, self.source,
                        self.calibrated)


# Missing collective -> ways to derive it: ([(collective, factor, world override)], why).
# Ring identities: all-reduce = reduce-scatter + all-gather of the same size, each
# moving (n-1)/n of it; all-to-all moves as much as all-gather; a pair's send/recv
# is about a two-rank all-reduce (alpha counted twice: a slight overestimate).
_DERIVATIONS: dict[str, list[tuple[list[tuple[str, float, int | None]], str]]] = {
    "allgather": [([("reducescatter", 1.0, None)], "allgather = reducescatter (ring identity)"),
                  ([("allreduce", 0.5, None)], "allgather = 0.5 x allreduce (ring identity)")],
    "reducescatter": [([("allgather", 1.0, None)], "reducescatter = allgather (ring identity)"),
                      ([("allreduce", 0.5, None)], "reducescatter = 0.5 x allreduce (ring identity)")],
    "allreduce": [([("reducescatter", 1.0, None), ("allgather", 1.0, None)],
                   "allreduce = reducescatter + allgather"),
                  ([("reducescatter", 2.0, None)], "allreduce = 2 x reducescatter"),
                  ([("allgather", 2.0, None)], "allreduce = 2 x allgather")],
    "sendrecv": [([("allreduce", 1.0, 2)], "sendrecv = allreduce at 2 ranks (alpha overestimated)"),
                 ([("broadcast", 1.0, 2)], "sendrecv = broadcast at 2 ranks")],
    "alltoall": [([("allgather", 1.0, None)], "alltoall = allgather (same bytes per rank)")],
    "broadcast": [([("allreduce", 0.5, None)], "broadcast = 0.5 x allreduce")],
}


# The element types whose sweeps price an exchange of so many bytes per value, the training types first.
_WIRE_TYPES = {2: ("bfloat16", "float16"), 4: ("float32",)}


def _with_sweeps(models: list[CollectiveModel]) -> list[CollectiveModel]:
    """``models`` and the sweeps each answers its file's other measured layouts with (a model from
    :func:`~pybench.model.model_files.load_model` of a fit at several layouts), each once: the set prices those
    layouts from their own sweeps, as the model's ``predict`` does."""
    out = list(models)
    for m in models:
        out += [x for x in getattr(m, "sweeps", ()) if not any(x is y or x == y for y in out)]
    return out


class ModelSet:
    """Chooses a fitted model for (collective, link class, world) and predicts with it.

    Choice: same collective and link class (a model whose ``link_class`` is None
    matches any), preferring one fitted at the requested world size, else the
    nearest world size (log ratio), extrapolated by the model's own formula.
    A missing collective is derived (``_DERIVATIONS``) and the derivation is
    recorded in ``notes``; when nothing fits, UsageError names what is missing.
    """

    def __init__(self, models: Iterable[CollectiveModel], backend: str | None = None,
                 wire_bytes: int | None = None):
        self.models: list[CollectiveModel] = _with_sweeps(list(models))
        self._given, self._backend = list(self.models), backend
        if not self.models:
            raise UsageError("no communication models given; fit some with `pybench fit LOG... -o FILE`")
        self.notes: list[str] = []
        backends = sorted({str(getattr(m, "backend", None) or "") for m in self.models} - {""})
        if backend is not None:
            self.models = [m for m in self.models if getattr(m, "backend", None) == backend]
            if not self.models:
                raise UsageError(f"no models for backend {backend!r}; the file has "
                                 f"{', '.join(backends) or 'none named'}")
        elif len(backends) > 1:
            # A step runs on one backend; mixing fits from nccl and mpi would be meaningless.
            chosen = "nccl" if "nccl" in backends else backends[0]
            self.models = [m for m in self.models if getattr(m, "backend", chosen) == chosen]
            self.notes.append(f"models for backends {', '.join(backends)}: using {chosen} (choose with backend=NAME)")
        self._one_dtype(wire_bytes)
        self.models += self._topology_of(self.models)

    @staticmethod
    def _topology_of(models: Sequence[CollectiveModel]) -> list[CollectiveModel]:
        """The topology models fitted sweeps carry (fit_models attaches them) that the set does not hold yet,
        one per link class they price: they answer wherever no sweep was fitted at the world asked for."""
        held = {id(getattr(m, "model", None)) for m in models if getattr(m, "any_world", False)}
        out: list[Any] = []
        for tm in {id(t): t for m in models if (t := getattr(m, "topology", None)) is not None}.values():
            if id(tm) in held:
                continue
            out += [TopologyCollective(tm, cls) for cls, link in (("intra-node", tm.intra), ("inter-node", tm.inter))
                    if link is not None]
        return out

    def for_wire_bytes(self, wire_bytes: int) -> ModelSet:
        """This set with its one element type chosen for an exchange of ``wire_bytes`` per value (see
        :meth:`_one_dtype`); itself where the models hold one type or none."""
        if len({str(getattr(m, "dtype", "") or "") for m in self._given} - {""}) < 2:
            return self
        return ModelSet(self._given, self._backend, wire_bytes)

    def _one_dtype(self, wire_bytes: int | None) -> None:
        # A file fitted from a nccl-tests -d all log holds one model per element type; the plan prices
        # bytes, so it takes one type for every layout: the one of the bytes exchanged where its sweeps carry
        # the topology model that answers the layouts they did not measure, else float32 (models without a type
        # always stay).
        types = sorted({str(getattr(m, "dtype", "") or "") for m in self.models} - {""})
        if len(types) < 2:
            return
        typed = [m for m in self.models if getattr(m, "dtype", "")]
        any_topology = any(getattr(m, "topology", None) is not None for m in typed)
        wire = [t for t in _WIRE_TYPES.get(wire_bytes or 0, ()) if t in types]
        unanswered = [t for t in wire if any_topology and any(getattr(m, "topology", None) is None
                                                              for m in typed if getattr(m, "dtype", "") == t)]
        chosen = next((t for t in wire if t not in unanswered), "float32" if "float32" in types else types[0])
        self.models = [m for m in self.models if (getattr(m, "dtype", "") or chosen) == chosen]
        why = (f" ({wire_bytes} B per value exchanged)" if chosen in wire else
               f" throughout: the {unanswered[0]} sweeps carry no topology model to price the layouts they did not "
               f"measure, and one element type prices every layout" if unanswered else "")
        self.notes.append(f"models for element types {', '.join(types)}: using {chosen}{why}")

    def _note(self, note: str) -> None:
        if note in self.notes:
            return
        for i, said in enumerate(self.notes):  # one part-full note per collective, naming its layouts
            merged = merge_part_full(said, note)
            if merged is not None:
                self.notes[i] = merged
                return
        self.notes.append(note)

    def _pick(self, collective: str, link_class: str, world: int, nodes: int | None = None) -> CollectiveModel | None:
        cands = [m for m in self.models if _norm_collective(m.collective) == collective
                 and (m.link_class is None or m.link_class == link_class)]
        if not cands:
            return None

        def distance(m: CollectiveModel) -> float:
            # A sweep fitted at the layout needed (its world size, and its node count where both are known)
            # beats the topology model (which answers for any layout) beats a sweep fitted elsewhere (which
            # refuses other layouts, saying what is missing) beats unknown world size.
            if getattr(m, "any_world", False):
                return 1.0
            if m.world_size is None:
                return math.inf
            if int(m.world_size) == world and not _other_nodes(m, nodes):
                return 0.0
            return 2.0 + abs(math.log(max(int(m.world_size), 1) / world))

        return min(cands, key=lambda m: (m.link_class is None, distance(m)))

    def _direct(self, collective: str, size_bytes: float, world: int, link_class: str,
                nodes: int | None = None) -> CommTime | None:
        model = self._pick(collective, link_class, world, nodes)
        if model is None:
            return None
        provenance = ""
        if model.link_class is None:
            # e.g. an nccl-tests log without "#  Rank" lines: nobody said which links it crossed
            self._note(f"{collective} model of unknown link class used for {link_class} links "
                       f"(fit one per link class for a better answer)")
        if getattr(model, "any_world", False):
            pred = cast(Any, model).predict(size_bytes, world=world, nodes=nodes)  # a topology model: any layout
            where = f"{collective} {getattr(model, 'label', 'topology model')} at {world} ranks"
            if nodes:
                where += f" on {nodes} nodes"
            provenance = str(getattr(pred, "provenance", "") or "")
            for caveat in getattr(pred, "caveats", ()):
                self._note(f"{collective} across nodes: {caveat}")
            self._note(f"{collective} over {link_class} links from the {getattr(model, 'label', 'topology model')}")
        elif int(model.world_size or 0) == world and _other_nodes(model, nodes):
            # the sweep measured this rank count on other nodes and no topology model answers: not determined
            raise NotDetermined(f"the {collective} sweep was measured at {model.world_size} ranks on "
                                f"{_sweep_nodes(model)} node(s), and {world} ranks on {nodes} nodes are not "
                                f"determined by it ({why_no_topology(model)}); measure them with "
                                f"{measure_command(collective, world)} on {nodes} nodes")
        elif model.world_size is None:
            pred = model.predict(size_bytes)  # cannot be extrapolated: used as fitted, and said so
            where = f"{collective} {model.link_class or 'any-link'} model of unknown world size, used at {world}"
        elif int(model.world_size) != world and getattr(model, "topology", False) is None:
            pred = ring_scaled(model, size_bytes, world)
            where = (f"{collective} {model.link_class or 'any-link'} model fitted at {model.world_size} ranks, "
                     f"scaled to {world} by the ring formula")
            self._note(f"{collective} at world sizes other than its {model.world_size}-rank sweep is scaled by the "
                       f"ring formula, an estimate without a calibrated interval: the file holds no topology model "
                       f"for it ({why_no_topology(model)})")
        else:
            pred = model.predict(size_bytes, world=world)
            where = f"{collective} {model.link_class or 'any-link'} model fitted at {model.world_size} ranks"
            if int(model.world_size) != world:
                where += f", extrapolated to {world}"
            elif (fitted := _sweep_nodes(model)) is not None:
                where += f" on {fitted} node{'s' if fitted > 1 else ''}"
            provenance = str(getattr(pred, "provenance", "") or "")
        if provenance:  # what the figure rests on, in the words `pybench predict` prints
            where += f": {provenance}"
        if BEYOND_SIZES in provenance:  # (the JSON's `where` says it per call; the text says it once)
            # (a sweep's own sizes, or those of the topology model behind a link class)
            largest = getattr(model, "size_max_bytes", None) or getattr(getattr(model, "model", None), "size_range",
                                                                        (0, 0))[1]
            self._note(f"{collective}: messages beyond the largest size its model measured ({format_size(largest)}) "
                       f"carry its fitted curve on, with intervals that widen with the distance; measure up to "
                       f"them to know (`pybench predict` marks them '{BEYOND_SIZES}')")
        t = float(pred.time_s)
        # a sweep carried to another world without a topology model, or of unknown world: no interval says how far
        calibrated = getattr(model, "any_world", False) or not (
            model.world_size is None or (int(model.world_size) != world and getattr(model, "topology", False) is None))
        return CommTime(t, float(getattr(pred, "time_low_s", t)), float(getattr(pred, "time_high_s", t)), where,
                        calibrated)

    def _derived(self, collective: str, size_bytes: float, world: int, link_class: str,
                 nodes: int | None = None) -> CommTime | None:
        for parts, why in _DERIVATIONS.get(collective, []):
            pieces = [self._direct(pc, size_bytes, w or world, link_class, nodes if not w else None)
                      for pc, _, w in parts]
            found = [p.scaled(factor) for p, (_, factor, _) in zip(pieces, parts) if p is not None]
            if len(found) == len(parts):
                self._note(f"derived {why} over {link_class} links (no {collective} model)")
                return CommTime(sum(p.time_s for p in found), sum(p.time_low_s for p in found),
                                sum(p.time_high_s for p in found), f"derived: {why}", all(p.calibrated for p in found))
        return None

    def time(self, collective: str, size_bytes: float, world: int, link_class: str,
             nodes: int | None = None) -> CommTime:
        """Predicted time of one call (on ``nodes`` nodes where the caller knows them: a topology model prices
        the tree's bytes and levels with them; by default the fewest the group can span).

        Raises
        ------
        NoModelFor
            When no model, direct or derived, covers the collective on this link class.
        """
        c = _norm_collective(collective)
        found = (self._direct(c, size_bytes, world, link_class, nodes)
                 or self._derived(c, size_bytes, world, link_class, nodes))
        if found is not None:
            return found
        if link_class == "intra-node":
            # Only a multi-node log: inside a node the links are at least as fast as between nodes,
            # so the inter-node model is an upper bound on the intra-node time (said, not hidden, in the
            # notes and in the call's source).
            said = list(self.notes)
            bound = self._direct(c, size_bytes, world, "inter-node") or self._derived(c, size_bytes, world,
                                                                                     "inter-node")
            if bound is not None:  # (what its crossing's layout left open is no group's inside one node)
                self.notes[:] = said + [n for n in self.notes if n not in said and " across nodes: " not in n]
                self._note(f"{c} over intra-node links priced with the inter-node model, an upper bound (the links "
                           f"inside a node are at least as fast); fit a one-node log or give --link nvlink4, "
                           f"pcie5, ... for a closer answer")
                return CommTime(bound.time_s, bound.time_low_s, bound.time_high_s,
                                f"{UPPER_BOUND}: {bound.source}", bound.calibrated)
        have = sorted({f"{_norm_collective(m.collective)}/{m.link_class or 'any'}" for m in self.models})
        article = "an" if link_class[0] in "aeiou" else "a"
        raise NoModelFor(f"no {c} model for {link_class} links (and none to derive it from); the model file has "
                         f"{', '.join(have)}; measure {c} over {link_class} links and fit it, or give the system "
                         f"(--system NAME|FILE) or {article} {link_class} preset (--link NAME)")

    def described_system(self, collective: str, link_class: str) -> Any:
        """The system description of ``collective``'s models over ``link_class`` with the fewest NICs per GPU
        (shared most), None where none gives one."""
        systems = [getattr(getattr(m, "model", None), "system", None) for m in self.models
                   if _norm_collective(m.collective) == collective and m.link_class in (None, link_class)]
        return min((s for s in systems if s is not None), key=lambda s: s.nics_per_node / s.gpus_per_node,
                   default=None)

    def latency_s(self, collective: str, world: int, link_class: str, nodes: int | None = None) -> float:
        """The time of a 1-byte call: the operation's latency; 0 where its sweep left the latency unresolved (its
        fit held it at 0, and says no more of a message that small than that it may take up to the sweep's first
        time: as a floor or an overhead of its own, no more is known)."""
        try:
            return self.time(collective, 1, world, link_class, nodes).time_s
        except NotDetermined:
            return 0.0


def _sweep_nodes(model: Any) -> int | None:
    """Nodes a fitted sweep ran on, where it records them (pybench's own models do)."""
    fitted = getattr(model, "_fitted_nodes", None)
    if not callable(fitted):
        return None
    try:
        n = fitted()
    except PyBenchError:
        return None
    return int(n) if n else None


def _other_nodes(model: Any, nodes: int | None) -> bool:
    """Whether a sweep is known to have run on another node count than the ``nodes`` asked for: then it answers
    at its own layout only, and other node counts go through the topology model as ``pybench predict`` does."""
    fitted = _sweep_nodes(model)
    return nodes is not None and fitted is not None and fitted != nodes


@dataclass
class _Scaled:
    time_s: float
    time_low_s: float
    time_high_s: float


def ring_scaled(model: Any, size_bytes: float, world: int) -> _Scaled:
    """A fitted sweep's pieces moved to ``world`` ranks by the ring formula (latency by its steps, bytes by
    its per-rank share: :func:`pybench.model.topology_schedules.algorithm_steps`), for files without a
    topology model; the band is the fitted confidence band moved alike, and says nothing about the move."""
    steps = importlib.import_module("pybench.model.topology_schedules").algorithm_steps
    predict_segments = importlib.import_module("pybench.model.piecewise").predict_segments
    collective = model.collective if model.collective in _RING_SHAPED else "allreduce"
    hops0, data0 = steps(collective, "ring", int(model.world_size))
    hops1, data1 = steps(collective, "ring", world)
    ka = hops1 / hops0 if hops0 else 1.0
    kb = (data1 / world) / (data0 / model.world_size) if data0 else 1.0
    moved = [dataclasses.replace(seg, alpha_s=seg.alpha_s * ka, inv_bw_s_per_byte=seg.inv_bw_s_per_byte * kb,
                                 cov=(seg.cov[0] * ka * ka, seg.cov[1] * ka * kb, seg.cov[2] * kb * kb),
                                 held_ci_high=seg.held_ci_high * (ka if seg.held == "alpha" else kb)
                                 if seg.held else seg.held_ci_high, residuals=())
             for seg in model.segments]
    time_s, half = predict_segments(moved, float(size_bytes), "confidence")
    return _Scaled(float(time_s), max(float(time_s) - float(half), 0.0), float(time_s) + float(half))


_RING_SHAPED = ("allreduce", "allgather", "reducescatter", "alltoall", "broadcast", "reduce", "sendrecv")


def why_no_topology(model: CollectiveModel) -> str:
    """Why a model carries no topology model, where it can say (pybench's own models record it)."""
    said = getattr(model, "why_no_topology", None)
    return said() if callable(said) else "it was not fitted by pybench"


def load_model_set(path: str, backend: str | None = None, links: Sequence[str] = (),
                   system: str | None = None) -> ModelSet:
    """Load fitted models through ``pybench.model.model_files.load_models``.

    The file's topology models join them (:mod:`pybench.planning.topology_models`), with the
    ``links`` presets (``nvlink4``, ``eth-25g``, ...) filling the link classes they do not hold.

    Raises
    ------
    BackendUnavailable
        When ``pybench.model`` is not part of this install.
    FileFormatError
        When the file holds something that is not a collective model.
    """
    try:
        files = importlib.import_module("pybench.model.model_files")
    except ImportError as exc:
        raise BackendUnavailable(f"pybench.model cannot be imported ({exc}); it reads model files") from None
    models = list(files.load_models(path))
    for m in models:
        if not isinstance(m, CollectiveModel):
            raise FileFormatError(f"{path}: {type(m).__name__} lacks collective/link_class/world_size/predict")
    models += topology_collectives(path, links, system)  # a pybench model file may hold topology models too
    return ModelSet(models, backend)


def preset_names(links: str | Sequence[str]) -> Sequence[str]:
    """Link presets as given: a comma list in one string (``"nvlink4,ib-ndr"``) is its names, not its letters."""
    return [x.strip() for x in links.split(",") if x.strip()] if isinstance(links, str) else links


def as_model_set(models: ModelSet | Iterable[CollectiveModel] | str, backend: str | None = None,
                 links: Sequence[str] = (), system: str | None = None) -> ModelSet:
    """A ModelSet from a ModelSet, an iterable of models, or a model file path (``links``: presets for it,
    ``system``: a system description filling the link classes it did not measure)."""
    links = preset_names(links)
    if isinstance(models, (str, os.PathLike)):
        return load_model_set(str(models), backend, links, system)
    if isinstance(models, ModelSet):
        return models
    if models is None or not isinstance(models, Iterable):
        raise UsageError(f"models must be a model file's path, a ModelSet or fitted models, not {models!r}")
    return ModelSet(models, backend)
