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

_MARK = "START OF JOBSPEC"
# Beyond any machine: a count past it is a damaged record, not a job.
_MOST = 1 << 24


@dataclass(frozen=True)
class FluxLayout:
    ranks: int
    nodes: int


def flux_layout(lines: list[str]) -> FluxLayout | None:
    """The job's ranks and nodes from the first jobspec record in ``lines``, None where there is none or it says
    neither (a record without a node level, a count that is no positive integer, JSON that does not parse)."""
    for i, line in enumerate(lines[:-1]):
        if line.strip() == _MARK:
            try:
                spec = json.loads(lines[i + 1])
            except (ValueError, RecursionError):
                return None
            return _layout(spec)
    return None


def _count(value: object) -> int | None:
    if isinstance(value, bool) or not isinstance(value, int) or not 0 < value <= _MOST:
        return None
    return int(value)


def _layout(spec: object) -> FluxLayout | None:
    """Nodes x slots per node x tasks per slot (or the tasks' total) of a version-1 jobspec."""
    if not isinstance(spec, dict) or not isinstance(spec.get("resources"), list) or len(spec["resources"]) != 1:
        return None
    node = spec["resources"][0]
    if not isinstance(node, dict) or node.get("type") != "node" or not isinstance(node.get("with"), list) \
            or len(node["with"]) != 1 or not isinstance(node["with"][0], dict) or node["with"][0].get("type") != "slot":
        return None
    nodes, slots = _count(node.get("count")), _count(node["with"][0].get("count"))
    tasks = spec.get("tasks")
    count = tasks[0].get("count") if isinstance(tasks, list) and len(tasks) == 1 and isinstance(tasks[0], dict) \
        else None
    if nodes is None or slots is None or not isinstance(count, dict):
        return None
    if "total" in count:
        ranks = _count(count["total"])
    else:
        per_slot = _count(count.get("per_slot"))
        ranks = nodes * slots * per_slot if per_slot is not None else None
    if ranks is None or ranks > _MOST or ranks % nodes:  # (ranks spread unevenly: no one count per node)
        return None
    return FluxLayout(ranks, nodes)
