"""Fitted topology models (:mod:`pybench.model.topology`) as the step model's collective models.

A topology model prices one collective for any world size and node count from per-link-class
parameters; one multi-node log gives the inter-node class, and a published link preset
(``nvlink4``, ``eth-25g``, ...) can fill the class the log does not hold. Each link class it
holds becomes one :class:`TopologyCollective`, which :class:`~pybench.planning.model_set.ModelSet`
uses wherever no piecewise model of that class was fitted (a piecewise model fitted at the
world size asked for stays first). Every prediction says it came from a topology model, and
from a preset when one was used.
"""

from __future__ import annotations

import importlib
import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from pybench.errors import BackendUnavailable, NotDetermined

__all__ = ["TopologyCollective", "topology_collectives", "part_full", "merge_part_full"]

INTRA, INTER = "intra-node", "inter-node"


@dataclass(frozen=True)
class _Prediction:
    time_s: float
    time_low_s: float
    time_high_s: float
    caveats: tuple[str, ...] = ()
    provenance: str = ""


class TopologyCollective:
    """One link class of a fitted topology model, seen as a CollectiveModel for any world size."""

    any_world = True  # ModelSet: predicts at the world asked for, never "as fitted"

    def __init__(self, model: Any, link_class: str) -> None:
        self.model = model
        self.collective: str = model.collective
        self.link_class: str | None = link_class
        self.world_size: int | None = None
        self.backend: str | None = model.backend or None
        link = model.intra if link_class == INTRA else model.inter
        self.label = f"topology model, {link_class} {link.label}" if link is not None else "topology model"

    def predict(self, size_bytes: float, world: int | None = None, nodes: int | None = None) -> _Prediction:
        w = max(2, int(world or 2))
        # the planner's nodes hold its --gpus-per-node; where the model's node is an NVLink domain of
        # several hosts they are not the model's, and the fewest domains the group needs stand in
        spans = nodes if getattr(self.model, "hosts_per_node", 1) == 1 else None
        nodes = 1 if self.link_class == INTRA else _fewest_nodes(w, self.model.system, spans)
        # ranks that do not fill their nodes evenly (29 on four 8-GPU nodes) are priced as the even layout
        # on those nodes that holds them (32): the busiest node's NICs carry as much either way
        priced = nodes * -(-w // nodes)
        if getattr(self.model, "hosts_per_node", 1) > 1 and nodes > 1 and self.model.system is not None:
            # NVLink domains, filled in turn: the busiest sets the pace (as pybench predict prices hosts)
            priced = max(priced, nodes * min(w, self.model.system.gpus_per_node))
        caveats = (part_full(w, nodes, priced),) if priced != w else ()
        # the planner shares the NICs between the groups of a layout itself (nic_sharing.shared_time); its
        # nodes are what the network joins (an NVLink domain where the model's node is one)
        p = self.model.predict(max(1, int(size_bytes)), priced, nodes, nics_as_fitted=True, nodes_are_hosts=False)
        if p.undetermined:
            raise NotDetermined(p.undetermined)
        # what it rests on, in the words `pybench predict` prints for the same layout
        said = "; ".join(x for x in (str(getattr(p, "provenance", "") or ""),
                                     f"regime {p.regime}" if getattr(p, "regime", None) else "") if x)
        return _Prediction(float(p.time_s), float(p.low_s), float(p.high_s), (*p.caveats, *caveats), said)


PART_FULL = ("ranks that do not fill their nodes evenly are priced as the even layout on those nodes that holds "
             "them ({cases}): the busiest node's NICs carry as much")
_CASES = re.compile(re.escape(PART_FULL).replace(r"\{cases\}", "(?P<cases>[^()]*)") + "$")
# A note names this many layouts; past them it says there are others (a search prices dozens).
_CASES_SHOWN = 3
_OTHERS = "; and others"


def part_full(world: int, nodes: int, priced: int) -> str:
    """The caveat of ``world`` ranks on ``nodes`` nodes priced as ``priced``, with these figures."""
    return PART_FULL.format(cases=f"{world} ranks on {nodes} nodes as {priced}")


def merge_part_full(note: str, new: str) -> str | None:
    """``note`` naming the layouts of ``new`` too, when both are the part-full caveat with the same text before
    it (the same collective); None otherwise. The first few layouts are named, then "and others"."""
    a, b = _CASES.search(note), _CASES.search(new)
    if a is None or b is None or note[:a.start()] != new[:b.start()]:
        return None
    others = a["cases"].endswith(_OTHERS)
    shown = a["cases"].removesuffix(_OTHERS).split("; ")
    for case in b["cases"].removesuffix(_OTHERS).split("; "):
        if case in shown:
            continue
        if len(shown) < _CASES_SHOWN:
            shown.append(case)
        else:
            others = True
    return note[:a.start()] + PART_FULL.format(cases="; ".join(shown) + (_OTHERS if others else ""))


def _fewest_nodes(world: int, system: Any, spans: int | None = None) -> int:
    """Nodes a group of ``world`` ranks that crosses the network is priced on: the ``spans`` its layout
    places it on where the caller knows them (the planner does), else two (the least that crosses); at
    least as many as the described nodes' GPUs need."""
    per_node = system.gpus_per_node if system is not None else world
    return max(2, -(-world // per_node), min(spans or 0, world))


def topology_collectives(path: str, links: Sequence[str] = (), system: str | None = None) -> list[TopologyCollective]:
    """The topology models in the model file ``path``, with ``links`` presets and the ``system`` description
    (a name or a file) filling the link classes it does not hold.

    Raises
    ------
    UsageError
        For an unknown preset name (the message lists the known ones).
    BackendUnavailable
        When ``pybench.model`` is not part of this install.
    """
    try:
        files = importlib.import_module("pybench.model.model_files")
        presets_mod = importlib.import_module("pybench.model.link_presets")
    except ImportError as exc:
        raise BackendUnavailable(f"pybench.model cannot be imported ({exc}); it reads model files") from None
    presets = [presets_mod.get_preset(name) for name in links]
    described = importlib.import_module("pybench.model.system").load_system(system) if system else None
    models = list(files.load_topology(path))
    if presets or described:
        # A file fitted before topology models (or from one link class only) still gets the
        # presets: a preset-only model per collective its piecewise models cover.
        topology = importlib.import_module("pybench.model.topology")
        covered = {tm.collective for tm in models}
        for collective in sorted({m.collective for m in files.load_models(path)} - covered):
            models.append(topology.TopologyModel(collective, "ring", None, None, ((2, 1),), (1, 1 << 40)))
    out = []
    for tm in models:
        for preset in presets:
            tm = tm.with_preset(preset)
        if described is not None:
            tm = tm.with_system(described)
        out += [TopologyCollective(tm, cls) for cls, link in ((INTRA, tm.intra), (INTER, tm.inter)) if link]
    return out
