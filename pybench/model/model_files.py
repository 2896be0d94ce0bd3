"""Model files: versioned JSON (never pickle) holding one or more fitted models.

``{"schema": "pybench.model", "schema_version": 1, "models": [ {...}, ... ]}``: the schema
name and version come from the registry :mod:`pybench.io.formats` (``MODEL``); reading goes
through :func:`pybench.io.files.read_document`, writing through ``write_atomic``.

One file may hold several models (one per collective / backend / link class / world size).
:func:`load_models` returns all of them; :func:`load_model` returns one, chosen by optional
filters, and refuses to guess when several match. Each model is the measured curve of one sweep;
it carries its collective's topology model from the same file, which answers for every other
layout (:mod:`pybench.model.topology`), so ``load_model(...).predict(size, world=64)`` takes the
same path as ``pybench predict --world 64``. A curve without one refuses other layouts in one
line that says which input is missing. Files that hold a negative latency (from before the fit
was constrained) are refused on load, with the remedy (refit).
"""

from __future__ import annotations

import dataclasses
import shlex
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

from pybench.collectives import dtype_name
from pybench.errors import FileFormatError, UsageError
from pybench.io.files import read_document
from pybench.io.formats import MODEL, check_document
from pybench.model.model_writer import models_to_document, save_models
from pybench.model.piecewise_model import NO_TOPOLOGY, AlphaBetaModel
from pybench.model.sweeps_joined import attach_topology
from pybench.model.system import SystemDescription, load_system
from pybench.model.topology import TopologyModel
from pybench.model.topology_schedules import StaleCrossing

T = TypeVar("T")

__all__ = ["load_model", "load_models", "load_topology", "models_from_document", "models_to_document",
           "save_models"]


def models_from_document(data: Any, path: str | Path = "<model>",
                         system: str | SystemDescription | None = None) -> list[AlphaBetaModel]:
    """Models from a loaded model-file document; FileFormatError on anything unexpected.

    ``system`` (a named system, a description file or a description) prices what the file's topology
    models did not measure, as ``pybench predict --system`` does."""
    data = check_document(data, MODEL, str(path))  # the schema: a non-empty list of models, a list of topology
    stale: dict[str, str] = {}  # collective -> why its topology model is not used (its curves still answer)

    def topology_model(entry: Any) -> TopologyModel | None:
        try:
            return TopologyModel.from_dict(entry)
        except StaleCrossing as e:
            stale[str(entry.get("collective"))] = str(e)
            return None

    topology = [tm for tm in _entries(data, "topology", topology_model, path) if tm is not None]
    if system is not None:
        described = system if isinstance(system, SystemDescription) else load_system(system)
        topology = [tm.with_system(described) for tm in topology]
    models = [dataclasses.replace(m, notes=(*m.notes, f"{NO_TOPOLOGY}{stale[m.collective]}"))
              if m.collective in stale else m for m in _entries(data, "models", AlphaBetaModel.from_dict, path)]
    # Each model carries its collective's topology model, which answers for every other layout.
    return attach_topology(models, topology)


def _entries(data: dict[str, Any], key: str, parse: Callable[[Any], T], path: str | Path) -> list[T]:
    """Every entry of the list ``data[key]`` (checked a list by the schema) parsed, an error naming the
    file, the key and the index."""
    out = []
    for k, entry in enumerate(data.get(key) or []):
        try:
            out.append(parse(entry))
        except FileFormatError as e:
            raise FileFormatError(f"{path}: {key}[{k}]: {e}") from None
    return out


def load_models(path: str | Path, *, system: str | SystemDescription | None = None) -> list[AlphaBetaModel]:
    """Read every model in a model file (JSON only; never pickle, never eval), on ``system`` when given
    (see :func:`models_from_document`).

    Raises
    ------
    FileFormatError
        Unreadable, not JSON, wrong schema, newer schema version, malformed entry.
    """
    return models_from_document(_model_document(path), path, system)


def load_topology(path: str | Path) -> list[TopologyModel]:
    """The topology-aware models a model file holds (none in files written before them)."""
    return _entries(_model_document(path), "topology", TopologyModel.from_dict, path)


def _model_document(path: str | Path) -> dict[str, Any]:
    """The model file's document; a measurement given in its place is refused saying how to fit it first."""
    try:
        return read_document(path, MODEL)
    except FileFormatError as refused:
        from pybench.model.logs import load_measurements  # (the log readers are needed only here)
        try:
            load_measurements(path)
        except (FileFormatError, UsageError):
            raise refused from None
        raise FileFormatError(f"{path} holds measurements, not a fitted model: fit it first "
                              f"(`pybench fit {shlex.quote(str(path))} -o MODEL.json`) and give MODEL.json") from None


def load_model(path: str | Path, *, collective: str | None = None, link_class: str | None = None,
               world_size: int | None = None, backend: str | None = None,
               dtype: str | None = None, system: str | SystemDescription | None = None) -> AlphaBetaModel:
    """Read the one model in ``path`` that matches the given filters, on ``system`` when given (a named
    system such as ``"dgx-h100"``, a description file, or a description): as ``pybench predict --system``.

    Raises
    ------
    FileFormatError
        As :func:`load_models`.
    UsageError
        No model matches, or several do (the message lists them). Sweeps of one collective at several worlds
        that share one topology model are one system: the smallest world's is returned, answering every layout
        alike, and its ``predict`` then asks for ``world=``.
    """
    models = load_models(path, system=system)
    match = [m for m in models
             if (collective is None or m.collective == collective)
             and (link_class is None or m.link_class == link_class)
             and (world_size is None or m.world_size == world_size)
             and (backend is None or m.backend == backend)
             and (dtype is None or dtype_name(m.dtype) == dtype_name(dtype))]
    if len(match) == 1:
        return match[0]
    listing = "; ".join(f"{m.collective}/{m.backend}/{m.link_class}/x{m.world_size}/{m.dtype}" for m in models)
    if not match:
        raise UsageError(f"{path}: no model matches the filters; it holds: {listing}")
    shared = {id(m.topology) for m in match} if all(m.topology is not None for m in match) else set()
    if len(shared) == 1 and len({(m.collective, m.backend, m.dtype) for m in match}) == 1 \
            and len({m.world_size for m in match}) == len(match):
        # one system at several layouts: each measured one answers from its own sweep, the others from their one
        # topology model, whichever sweep is asked; only a prediction without world= has no layout to take
        return dataclasses.replace(min(match, key=lambda m: m.world_size or 0), default_layout=False)
    raise UsageError(f"{path}: {len(match)} models match; choose with collective=, link_class=, "
                     f"world_size=, backend= or dtype= (it holds: {listing})")
