"""A topology model's JSON form, as a model file holds it: written, and read back against the file format's
schema (:class:`pybench.io.document_schemas.TopologySchema`)."""

from __future__ import annotations

from pybench.errors import FileFormatError
from pybench.io.document_schemas import TopologySchema
from pybench.io.model_names import TOPOLOGY_CROSSING_VERSION
from pybench.io.schemas import validate_body
from pybench.model.calibration import load_calibration
from pybench.model.crossing import described_crossing
from pybench.model.link_cost import LinkCost
from pybench.model.system import system_from_dict
from pybench.model.topology import TopologyModel
from pybench.model.topology_schedules import check_crossing_version


def topology_to_dict(model: TopologyModel) -> dict:
    """A topology model's JSON form (a model file's ``topology`` entry)."""
    return {"collective": model.collective, "algorithm": model.algorithm,
            "intra": model.intra.to_dict() if model.intra else None,
            "inter": model.inter.to_dict() if model.inter else None,
            "fitted": [list(f) for f in model.fitted], "size_range": list(model.size_range),
            "residual_sizes": list(model.residual_sizes), "residuals": list(model.residuals),
            "notes": list(model.notes), "backend": model.backend, "schedule": model.schedule,
            "inter_absorbs_intra": model.inter_absorbs_intra,
            "system": model.system.model_dump() if model.system else None,
            "layout_misses": [list(x) for x in model.layout_misses], "hosts_per_node": model.hosts_per_node,
            "layout_sizes": [list(x) for x in model.layout_sizes],
            "crossing_version": TOPOLOGY_CROSSING_VERSION}


def topology_from_dict(d: object) -> TopologyModel:
    """A model from its JSON form (a model file's ``topology`` entry); FileFormatError if malformed.

    Every rule of that form (names, lengths, types, bounds) is the file format's schema, checked here too so
    that a dict given in Python is held to the rules a file is (its link costs too); the system description
    checks its own.
    """
    if not isinstance(d, dict):
        raise FileFormatError(f"a topology model is {type(d).__name__}, not an object")
    validate_body(d, TopologySchema, "a topology model")
    intra = LinkCost.from_dict(d["intra"]) if d.get("intra") is not None else None
    inter = LinkCost.from_dict(d["inter"]) if d.get("inter") is not None else None
    absorbs = d.get("inter_absorbs_intra", inter is not None)  # older files fitted the phase into it
    check_crossing_version(d["collective"], d.get("schedule", "ring"), d.get("crossing_version", 1), inter,
                           tuple(int(w) for w, _ in d["fitted"]))
    system = system_from_dict(d["system"], "a topology model's system") if d.get("system") is not None else None
    if inter is not None and inter.is_described and intra is not None and system is not None:
        # not a measurement: priced again from the description with the shipped calibration, as
        # `predict --system` prices it, whichever calibration the file was written with
        inter = described_crossing(d["collective"], d.get("schedule", "ring"), intra, system, load_calibration())
    lo, hi = d["size_range"]
    return TopologyModel(
        d["collective"], d["algorithm"], intra, inter, tuple((w, n) for w, n in d["fitted"]), (lo, hi),
        tuple(float(x) for x in d.get("residual_sizes") or ()), tuple(float(x) for x in d.get("residuals") or ()),
        tuple(d.get("notes") or ()), d.get("backend") or "", d.get("schedule", "ring"), absorbs, system,
        tuple((int(w), int(n), float(m)) for w, n, m in d.get("layout_misses") or ()),
        tuple((int(w), int(n), int(a), int(b)) for w, n, a, b in d.get("layout_sizes") or ()),
        int(d.get("hosts_per_node", 1)))
