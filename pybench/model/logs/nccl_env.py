"""The algorithm a log's NCCL was told to run: ``NCCL_ALGO`` as a log's preamble sets it.

NCCL picks ring or tree per size unless ``NCCL_ALGO`` forces one. A log that forced it says how its
sweep crossed the nodes, which one node count alone cannot (the tree's bytes per node grow with the
nodes, the ring's do not). It is set on a launcher line (``mpirun -x NCCL_ALGO=Ring``, ``-genv NCCL_ALGO
Ring``, ``srun --export=ALL,NCCL_ALGO=Ring``), as a shell assignment (``export NCCL_ALGO=Ring``,
``NCCL_ALGO=Tree ./all_reduce_perf``), and NCCL echoes it (``NCCL INFO NCCL_ALGO set by environment to
Ring``). Only one algorithm for every collective counts: a list, an exclusion (``^NVLS``) or a
per-collective form (``allreduce:tree``) forces no single one.
"""

from __future__ import annotations

import re

_SET = re.compile(r"\bNCCL_ALGO(?:=|\s+set by environment to\s+|\s+)([^\s,;\"']+(?:,[^\s;\"']+)*)")
FORCED = {"ring": "ring", "tree": "tree"}


def forced_algorithm(line: str) -> str | None:
    """``ring`` or ``tree`` where ``line`` forces that algorithm, "" where it sets NCCL_ALGO to anything else
    (no single one), None where it does not set it."""
    found = _SET.findall(line)
    if not found:
        return None
    items = []
    for item in found[-1].split(","):
        if "=" in item:  # the next variable of an --export list
            break
        items.append(item)
    return FORCED.get(items[0].strip().lower(), "") if len(items) == 1 else ""
