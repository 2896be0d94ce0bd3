"""One prediction of the topology model (:meth:`pybench.model.topology.TopologyModel.predict`): its time, its
95% interval, what was priced and what it rests on."""

from __future__ import annotations

from dataclasses import dataclass, field

from pybench.model.calibration import Spread


@dataclass(frozen=True)
class TopologyPrediction:
    """One predicted operation: time with a 95% prediction interval, and how far it reaches."""

    size_bytes: int
    world: int
    nodes: int
    time_s: float
    low_s: float
    high_s: float
    algorithm: str
    schedule: str
    """What was priced across nodes: ``ring`` (one node: the fitted algorithm's step count), the
    model's schedule, or for ``openmpi`` the algorithm Open MPI runs (``openmpi tuned:rabenseifner``)."""
    provenance: str
    """What it rests on: one of :data:`pybench.model.topology.KINDS` (with ``, beyond the measured sizes`` where
    it is)."""
    links: str
    regime: str = ""
    """Which of the link's regimes priced it, smallest-size regime first (``2 of 4``); empty with one."""
    undetermined: str = ""
    """Why these inputs cannot determine the time (then ``time_s`` and the interval are nan); empty when they can."""
    spread: Spread | None = field(default=None, repr=False, compare=False)
    """What the interval is made of (:mod:`pybench.model.calibration`), for validation to recalibrate it."""
    caveats: tuple[str, ...] = ()
    """What the inputs leave open, each spanned by the interval (the layout's also end ``links``)."""
    size_notes: tuple[str, ...] = ()
    """This size's own (a time raised to a floor): kept out of ``links``, which tables print once per layout."""

    @property
    def determined(self) -> bool:
        return not self.undetermined
