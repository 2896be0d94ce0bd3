"""A model file's sweeps joined up: each with its collective's topology model (which answers other layouts) and
with the file's other sweeps of its collective (each answers its own layout)."""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from typing import Any

from pybench.model.piecewise_model import NO_TOPOLOGY, AlphaBetaModel


def attach_topology(models: Sequence[AlphaBetaModel], topology: Sequence[Any]) -> list[AlphaBetaModel]:
    """``models``, each with the topology model of its collective and backend (None where there is none). A curve
    of another element type than the topology model was fitted on gets none, and a note that says why."""
    from pybench.model.topology_fit import topology_dtype

    def match(m: AlphaBetaModel) -> Any:
        return next((tm for tm in topology if (tm.collective, tm.backend or m.backend) == (m.collective, m.backend)),
                    None)

    out: list[AlphaBetaModel] = []
    for m in models:
        tm = match(m)
        same = [x for x in models if (x.collective, x.backend) == (m.collective, m.backend)]
        fitted_on = topology_dtype(same, m)
        if tm is not None and m.dtype != fitted_on:
            why = (f"{NO_TOPOLOGY}the {m.collective} topology model was fitted on the {fitted_on} sweeps only (element "
                   f"types are not pooled): other layouts are answered for {fitted_on}; measure {m.dtype} there")
            out.append(dataclasses.replace(m, topology=None, notes=m.notes if why in m.notes else (*m.notes, why)))
        else:
            out.append(dataclasses.replace(m, topology=tm))
    # each answers a measured layout of its collective with that layout's own sweep, as `pybench predict` does
    def curve(m: AlphaBetaModel) -> tuple[str, str, str]:
        return m.collective, m.backend, m.dtype

    return [dataclasses.replace(m, sweeps=tuple(x for x in out if x is not m and x.world_size and curve(x) == curve(m)))
            for m in out]
