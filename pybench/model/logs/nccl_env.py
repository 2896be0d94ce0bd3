"""The algorithm a log's NCCL was told to run: ``NCCL_ALGO`` as a log's preamble sets it.

NCCL picks ring or tree per size unless ``NCCL_ALGO`` forces one. A log that forced it says how its
sweep crossed the nodes, which one node count alone cannot (the tree's bytes per node grow with the
nodes, the ring's do not). It is set on a launcher line (``mpirun -x NCCL_ALGO=Ring``, ``-genv NCCL_ALGO
Ring``, ``srun --export=ALL,NCCL_ALGO=Ring``), as a shell assignment (``export NCCL_ALGO=Ring``,
``NCCL_ALGO=Tree ./all_reduce_perf``), and NCCL echoes it (``NCCL INFO NCCL_ALGO set by environment to
Ring``); a shell comment sets nothing. One algorithm counts, for every collective or for the all-reduce
(``allreduce:tree``, NCCL 2.24's form): a list or an exclusion (``^NVLS``) forces no single one. A launcher
line's setting holds for the tests of its job, a shell's for everything after it.
"""

from __future__ import annotations

import re

# NCCL_ALGO=VALUE (a quoted value too); "-genv NCCL_ALGO VALUE"; NCCL's "NCCL_ALGO set by environment to VALUE"
_SET = re.compile(r"\bNCCL_ALGO(?:=|\s+set by environment to\s+)[\"']?([^\s\"']+)"
                  r"|-{1,2}g?env\s+NCCL_ALGO\s+[\"']?([^\s\"']+)")
FORCED = {"ring": "ring", "tree": "tree"}


def forced_algorithm(line: str) -> str | None:
    """``ring`` or ``tree`` where ``line`` forces that algorithm on an all-reduce, "" where it sets NCCL_ALGO to
    anything else (no single one), None where it does not set it. A shell comment sets nothing (NCCL's own echo,
    which a log may print behind a ``#``, does)."""
    text = line.strip()
    if text.startswith("#") and "NCCL INFO" not in text:
        return None
    found = _SET.findall(text)
    if not found:
        return None
    value = next(v for v in found[-1] if v)
    items = []
    for item in re.split(r"[,;]", value):
        if "=" in item:  # the next variable of an --export list
            break
        items.append(item.strip().lower())
    per_collective = [i.partition(":")[2] for i in items if i.startswith("allreduce:")]
    if any(":" in i for i in items):  # NCCL 2.24's "allreduce:tree;broadcast:ring": the all-reduce's own
        items = per_collective
    return FORCED.get(items[0], "") if len(items) == 1 else ""
