"""The tables ``pybench fit`` (and ``report``) take from a log: ``--collective`` names what the log does not say, or
picks one test out of a log of several; ``--world`` and ``--nodes``, one for all inputs or one each, what it does not
say of its ranks and hosts."""

from __future__ import annotations

import dataclasses
import hashlib
import os
import stat
import sys

from pybench.cli.argtypes import number
from pybench.collectives import COLLECTIVES, busbw_factor
from pybench.errors import FileFormatError, SeveralTestsNamed, UsageError
from pybench.model.logs import MAX_LOG_BYTES, load_measurements

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


def refuse_repeated(inputs: list[str]) -> None:
    """UsageError where two inputs are one file, or hold the same bytes: one run given twice would be pooled as
    two replicates of it, narrowing the band and adding pieces that its scatter does not show. Only files of one
    size are read, and none over the readers' limit (refused there, in their own words)."""
    found: list[tuple[str, os.stat_result]] = []
    for path in inputs:
        try:
            st = os.stat(path)
        except OSError:
            continue
        if stat.S_ISREG(st.st_mode):  # (a FIFO or device is refused where it is read)
            found.append((path, st))
    seen: dict[tuple, str] = {}
    for path, st in found:
        keys: list[tuple[str, tuple]] = [("are one file", (st.st_dev, st.st_ino))]
        twins = sum(1 for _, other in found if other.st_size == st.st_size) > 1
        if twins and 0 < st.st_size <= MAX_LOG_BYTES:
            keys.append(("hold the same bytes", (st.st_size, _digest(path))))
        for same, key in keys:
            if key in seen:
                which = f"{path} is given twice" if seen[key] == path else f"{seen[key]} and {path} {same}"
                raise UsageError(f"{which}: one run given twice would count as two (fit pools them as replicates); "
                                 f"give each run once")
            seen[key] = path


def _digest(path: str) -> str:
    digest = hashlib.sha256()
    try:
        with open(path, "rb") as f:
            while chunk := f.read(1 << 20):
                digest.update(chunk)
    except OSError:
        return path  # (unreadable: said where it is read)
    return digest.hexdigest()


ranks = number(int, 1, strict=False, maximum=1 << 24)
"""A rank or node count as --world and --nodes take it."""


def per_input(parse):
    """One value for every input, or one per input in their order, comma-separated (``--nodes 2,4``)."""
    def parse_list(text: str) -> tuple:
        return tuple(parse(part) for part in text.split(","))
    return parse_list


def one_per_input(values: tuple | None, inputs: list[str], flag: str) -> list:
    """``values`` spread over ``inputs``: none, one for all, or one each."""
    if values is None:
        return [None] * len(inputs)
    if len(values) == 1:
        return list(values) * len(inputs)
    if len(values) != len(inputs):
        raise UsageError(f"{flag} gives {len(values)} values for {len(inputs)} inputs: give one for all of them, "
                         f"or one per input in their order ({flag} {','.join(['N'] * len(inputs))})")
    return list(values)


def with_nodes(ms, nodes: int):
    """``ms`` with ``--nodes`` recorded where its log did not say; a log that says otherwise is refused."""
    from pybench.model.logs.measurements import SOCKETS_NOTE
    from pybench.model.topology_fit import nodes_of

    where = ms.path or ms.collective
    known = nodes_of(ms)
    if ms.collective.startswith("p2p_") and ms.world_size == 2 and nodes > 2:  # osu_latency beside osu_allreduce
        return dataclasses.replace(ms, notes=(*ms.notes, f"--nodes {nodes} not applied to this table: a "
                                                         f"point-to-point test runs between 2 ranks"))
    if known is not None:
        if known != nodes:
            raise UsageError(f"--nodes {nodes}: {where} ran on {known} node(s) by its own record; leave --nodes "
                             f"out or fit that file separately")
        return ms
    if nodes == 1 and ms.link_class == "inter-node":
        raise UsageError(f"--nodes 1: {where} crossed nodes by its own record (link inter-node); give the node "
                         f"count it ran on")
    if not ms.world_size:
        raise UsageError(f"--nodes {nodes}: {where} does not say its rank count; give --world too")
    if ms.world_size % nodes:
        raise UsageError(f"--nodes {nodes}: {where} has {ms.world_size} ranks, not divisible by {nodes} nodes; "
                         f"give the node count the ranks were spread over")
    said = (*(n for n in ms.notes if nodes > 1 or n != SOCKETS_NOTE), f"{ms.world_size} ranks on {nodes} host(s) "
            f"per --nodes")  # (sockets join nodes: one node's table never used them)
    return dataclasses.replace(ms, link_class="inter-node" if nodes > 1 else "intra-node", notes=said)
