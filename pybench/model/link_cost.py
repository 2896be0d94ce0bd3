"""One link class's cost: fitted (or described) protocol regimes of the frame NCCL prices.

A link's cost is ``T = base + hops * step + (data + fill * c) * S / B`` per regime (see
:mod:`pybench.model.topology`); an operation costs its fastest regime, as NCCL runs the fastest
protocol. Across nodes each regime also names the algorithm it runs between them.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

import numpy as np

from pybench.errors import FileFormatError
from pybench.model.link_presets import LinkPreset
from pybench.model.topology_schedules import algorithm_steps


@dataclass(frozen=True)
class LinkCost:
    """Fitted (or preset) parameters of one link class.

    Its own figures are the bandwidth regime (what large messages get); ``regimes`` holds the
    regimes that are faster at smaller sizes (NCCL's LL and LL128 protocols, another algorithm;
    see :mod:`pybench.model.regimes`). An operation costs its fastest regime.
    """

    base_s: float
    step_s: float
    busbw_Bps: float
    extra_steps: float
    label: str
    """Where the figures come from: 'fitted at 2, 4 ranks' or 'preset nvlink4'."""
    regimes: tuple[LinkCost, ...] = ()
    algorithm: str = "ring"
    """Across nodes, the algorithm this regime runs between them (``ring`` or ``tree``)."""
    node_step_s: float = 0.0
    """Across nodes, a latency paid at each node boundary a crossing's chunk passes
    (:func:`pybench.model.crossing.network_steps`), on top of its steps' (a described ring that passes chunks on waits
    on the network there, at the node's own pace elsewhere); 0 elsewhere.
    Not in the file: a described link is priced again from its description."""
    nic_efficiency: float = 0.0
    """A described crossing's share of its NICs' rate (what it was priced at: the calibrated one, or 1 for the NICs
    at their full rate); 0 elsewhere. Not in the file: a described link is priced again from its description."""

    @property
    def is_preset(self) -> bool:
        """Published figures (``--link``), not fitted ones."""
        return self.label.startswith("preset")

    @property
    def is_described(self) -> bool:
        """Figures taken from a system description (``--system``), not fitted ones."""
        return self.label.startswith("system")

    def own_time_s(self, collective: str, algorithm: str, size_bytes: float, world: int) -> float:
        """This regime's time alone, without the faster small-size regimes."""
        hops, steps = algorithm_steps(collective, algorithm, world)
        return self.base_s + hops * self.step_s + (steps + self.extra_steps) / world * size_bytes / self.busbw_Bps

    def all_regimes(self) -> tuple[LinkCost, ...]:
        """The small-size regimes, then the bandwidth regime (this one, without its ``regimes``)."""
        return (*self.regimes, dataclasses.replace(self, regimes=())) if self.regimes else (self,)

    def fastest(self, collective: str, algorithm: str, size_bytes: float, world: int) -> tuple[float, int]:
        """(time, index in :meth:`all_regimes`) of the fastest regime for one operation."""
        times = [r.own_time_s(collective, algorithm, size_bytes, world) for r in self.all_regimes()]
        k = int(np.argmin(times))
        return times[k], k

    def time_s(self, collective: str, algorithm: str, size_bytes: float, world: int) -> float:
        return self.fastest(collective, algorithm, size_bytes, world)[0]

    def to_dict(self) -> dict:
        return {"base_s": self.base_s, "step_s": self.step_s, "busbw_Bps": self.busbw_Bps,
                "extra_steps": self.extra_steps, "label": self.label, "algorithm": self.algorithm,
                "regimes": [r.to_dict() for r in self.regimes]}

    @classmethod
    def from_dict(cls, d: object) -> LinkCost:
        """A link from its JSON form; FileFormatError if it breaks the file format's rules
        (:class:`pybench.io.document_schemas.LinkSchema`, checked here too for a dict given in Python)."""
        from pybench.io.document_schemas import LinkSchema
        from pybench.io.schemas import validate_body
        if not isinstance(d, dict):
            raise FileFormatError(f"a link cost is {type(d).__name__}, not an object")
        validate_body(d, LinkSchema, "a link cost")
        return cls._read(d, tuple(cls._read(r, ()) for r in d.get("regimes") or ()))

    @classmethod
    def _read(cls, d: dict, regimes: tuple[LinkCost, ...]) -> LinkCost:
        return cls(float(d["base_s"]), float(d["step_s"]), float(d["busbw_Bps"]), float(d["extra_steps"]),
                   str(d.get("label") or ""), regimes, d.get("algorithm", "ring"))

    @classmethod
    def from_preset(cls, preset: LinkPreset) -> LinkCost:
        return cls(0.0, preset.step_latency_s, preset.bandwidth_Bps, 0.0, f"preset {preset.name}")


def regime_label(link: LinkCost, k: int) -> str:
    return f"{k + 1} of {len(link.regimes) + 1}" if link.regimes else ""


def unless_described(link: LinkCost | None) -> LinkCost | None:
    """``link`` where it was measured or preset, None where a system description priced it."""
    return None if link is None or link.is_described else link
