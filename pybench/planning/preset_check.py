"""Which ``--link`` presets a model set cannot use, said rather than dropped (issue 25).

A preset fills a link class the model file does not price. Where the file already prices that
class from measurements (a fitted model of that class, or a topology model fitted from a log),
the measured model comes first and the preset changes nothing: the user must hear that, or a
run "on 25G Ethernet" silently prints the figures of the network that was measured.
"""

from __future__ import annotations

from collections.abc import Sequence

from pybench.planning.model_set import ModelSet

__all__ = ["unused_presets", "system_caveats"]


def _measured(models: ModelSet, link_class: str) -> list[str]:
    found = []
    for m in models.models:
        if m.link_class != link_class:
            continue
        label = str(getattr(m, "label", ""))
        if "preset" in label:
            continue
        what = label or (f"{m.collective} fitted at {m.world_size} ranks" if m.world_size else f"{m.collective}")
        if what not in found:
            found.append(what)
    return found


def unused_presets(models: ModelSet, links: Sequence[str], from_file: bool = True) -> list[str]:
    """One sentence per preset in ``links`` that cannot apply to ``models``.

    ``from_file``: whether ``models`` came from a model file (presets only join a file's models).
    """
    from pybench.model.link_presets import get_preset
    said = []
    for name in links:
        preset = get_preset(name)
        if not from_file:
            said.append(f"link preset {name} is not used: presets fill the link classes of a model file, and "
                        f"these models were given as objects; pass the model file's path to use links={name}")
            continue
        measured = _measured(models, preset.link_class)
        if measured:
            said.append(f"link preset {name} is not used: the model file already prices {preset.link_class} links "
                        f"from measurements ({'; '.join(measured)}), which come first; drop links={name}, or fit "
                        f"a file without those measurements to price {name}")
    return said


def system_caveats(models: ModelSet, system: str | None, from_file: bool = True) -> list[str]:
    """What ``system`` (a description's name or file) cannot do for ``models``, as ``pybench predict --system``
    says it: nothing where the models were given as objects, only bounds where both link classes were measured,
    and the figures it contradicts."""
    if not system:
        return []
    if not from_file:
        return [f"system {system} sets the GPUs per node only: a description fills the link classes of a model file, "
                f"and these models were given as objects; pass the model file's path for that"]
    from pybench.model.description_checks import both_links_measured, fabric_mismatches
    from pybench.model.system import load_system
    name = load_system(system).name
    said: dict[str, list[str]] = {}  # what is said -> the collectives it is said of
    fitted = {id(tm): tm for m in models.models if (tm := getattr(m, "model", None)) is not None
              and getattr(m, "any_world", False) and getattr(getattr(tm, "system", None), "name", None) == name}
    for tm in fitted.values():
        if both_links_measured(tm):
            said.setdefault("measured both link classes; the description only bounds the layouts and says which "
                            "are not determined", []).append(tm.collective)
        for line in fabric_mismatches(tm, tm.system_per_node(tm.system)):
            said.setdefault(line, []).append(tm.collective)
    return [f"system {name}: {', '.join(dict.fromkeys(of))} model{'s' if len(of) > 1 else ''}: {line}"
            for line, of in said.items()]
