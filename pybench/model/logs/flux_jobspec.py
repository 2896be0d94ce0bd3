"""The ranks and nodes of a Flux job, from the record a log keeps after its output.

Jobs run under the Flux resource manager (``flux run -N 4 --tasks-per-node 8 ...``) print no launcher line
above their output; a collector that keeps the job's record (``flux job info <id> jobspec``, as the
converged-computing performance study's OSU logs do) writes it after the table, one JSON line under a
``START OF JOBSPEC`` line:

    {"resources": [{"type": "node", "count": 4, "with": [{"type": "slot", "count": 8, ...}]}],
     "tasks": [{"command": [...], "slot": "task", "count": {"per_slot": 1}}], ...}

that is 4 nodes x 8 slots x 1 task per slot: 32 ranks on 4 nodes.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

_MARK = "START OF JOBSPEC"
# Beyond any machine: a count past it is a damaged record, not a job.
_MOST = 1 << 24
Count = Annotated[int, Field(strict=True, gt=0, le=_MOST)]


class _Slot(BaseModel):
    type: Literal["slot"]
    count: Count


class _Node(BaseModel):
    model_config = ConfigDict(populate_by_name=True)
    type: Literal["node"]
    count: Count
    slots: Annotated[list[_Slot], Field(alias="with", min_length=1, max_length=1)]


class _TaskCount(BaseModel):
    per_slot: Count | None = None
    total: Count | None = None


class _Task(BaseModel):
    count: _TaskCount


class _Jobspec(BaseModel):
    """What a version-1 jobspec says of its layout (its other fields ignored)."""

    resources: Annotated[list[_Node], Field(min_length=1, max_length=1)]
    tasks: Annotated[list[_Task], Field(min_length=1, max_length=1)]


@dataclass(frozen=True)
class FluxLayout:
    ranks: int
    nodes: int


def flux_layout(lines: list[str]) -> FluxLayout | None:
    """The job's ranks and nodes from the first jobspec record in ``lines``: nodes x slots per node x tasks per slot
    (or the tasks' total); None where there is none or it says neither (a record without a node level, a count that
    is no positive integer, ranks spread unevenly over the nodes, JSON that does not parse)."""
    for i, line in enumerate(lines[:-1]):
        if line.strip() == _MARK:
            try:
                spec = _Jobspec.model_validate(json.loads(lines[i + 1]))
            except (ValueError, RecursionError, ValidationError):
                return None
            node, count = spec.resources[0], spec.tasks[0].count
            ranks = count.total or (node.count * node.slots[0].count * count.per_slot if count.per_slot else None)
            if ranks is None or ranks > _MOST or ranks % node.count:
                return None
            return FluxLayout(ranks, node.count)
    return None
