"""The tables ``pybench fit`` takes from a log: ``--collective`` names what the log does not say, or picks one test
out of a log of several."""

from __future__ import annotations

import sys

from pybench.collectives import COLLECTIVES, busbw_factor
from pybench.errors import FileFormatError, SeveralTestsNamed, UsageError
from pybench.model.logs import load_measurements

# A rank count at which every collective whose bus bandwidth factor depends on it has its own (none is 1)
_ANY_WORLD = 8


def _ratio_is_its_own(collective: str) -> bool:
    """Whether no other collective prints ``collective``'s busbw/algbw: then that ratio names it (an all-reduce's
    2(n-1)/n), where an all-gather's (n-1)/n is also a reduce-scatter's and an all-to-all's."""
    mine = busbw_factor(collective, _ANY_WORLD)
    return sum(busbw_factor(c, _ANY_WORLD) == mine for c in (*COLLECTIVES, "gather", "scatter")) == 1


def load_named(path: str, collective: str | None, world: int | None) -> list:
    """A log's tables, with ``collective`` naming what the log does not; on a log of several tests that it names,
    or whose bandwidth ratios tell ``collective``'s apart from every other's, those of ``collective`` alone (said
    on stderr), where it holds any."""
    try:
        return load_measurements(path, collective=collective, world_size=world)
    except FileFormatError as refused:
        if collective is None or not (isinstance(refused, SeveralTestsNamed) or _ratio_is_its_own(collective)):
            raise
        try:
            every = load_measurements(path, world_size=world)
        except FileFormatError:
            raise refused from None
        mine = [m for m in every if m.collective == collective]
        if not mine and isinstance(refused, SeveralTestsNamed):
            raise UsageError(f"{path}: --collective {collective}: the log names no {collective} test; its tests are "
                             f"{', '.join(sorted({m.collective for m in every}))}: give one of them, or leave "
                             f"--collective out") from None
        if mine and len(mine) == len(every) and isinstance(refused, SeveralTestsNamed):
            return mine  # (other tests named in the log's text, none of its tables)
        if not mine or len(mine) == len(every):  # nothing to pick: the refusal stands
            raise refused from None
        print(f"note: {path}: --collective {collective}: its {len(mine)} {collective} table(s) taken, the "
              f"{len(every) - len(mine)} other(s) of this log left out", file=sys.stderr)
        return mine
