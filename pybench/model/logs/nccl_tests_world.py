"""The rank count of an nccl-tests table: busbw/algbw read with the rounding it was printed
with, and the ``#  Rank`` lines above the table; and the link class those lines imply.

At hundreds of ranks the bus factor 2(n-1)/n is within a printed rounding step of its limit,
so the ratio allows a range of counts: then whole Rank lines inside the range pick one, and
without them the world is left unknown (a note names the range) rather than guessed.
"""

from __future__ import annotations

import math
from typing import Protocol

import numpy as np

from pybench.collectives import COLLECTIVES
from pybench.errors import FileFormatError
from pybench.model.logs.launcher_lines import DIRECT, Launch
from pybench.model.logs.measurements import LINK_CLASSES
from pybench.model.logs.nccl_tests_table import Table


class RankLines(Protocol):
    """What the lines above a table said: ``ranks`` (rank -> host, from the Rank lines) and
    ``pybench`` (pybench's own header: world, hosts, link)."""

    ranks: dict[int, str]
    pybench: dict[str, str]
    repeated: dict[int, set[str]]
    launch: Launch | None
    gpus_per_process: int
    gpus_per_thread: int

ROUND_ROBIN = "ranks not filled host by host (as mpirun --map-by node places them): "
"""A note's start: the Rank lines put consecutive ranks on different hosts more often than once per host
(``mpirun --map-by node``)."""

def world_and_link(world: int | None, pre: RankLines, world_size: int | None, notes: list[str],
                   collective: str | None = None, table: Table | None = None,
                   span: tuple[int, int] | None = None, exact: bool = False) -> tuple[int | None, str | None]:
    """:func:`_world_and_link`, and where each process drove several GPUs (nccl-tests ``-t``/``-g``), a note: with
    ``-g`` one thread launches several GPUs' kernels, so its latency per call is not one process per GPU's, as
    training runs; with ``-t`` alone the ranks were threads of one process."""
    world, link = _world_and_link(world, pre, world_size, notes, collective, table, span, exact)
    if pre.gpus_per_process > 1 and (world or 0) > 1:
        threads = pre.gpus_per_process // max(pre.gpus_per_thread, 1)
        notes.append(f"each process drove {pre.gpus_per_process} GPUs (nccl-tests -t {threads} -g "
                     f"{pre.gpus_per_thread}): " + (f"one thread launches {pre.gpus_per_thread} GPUs' kernels, so its "
                                                     f"latency per call is not that of one process per GPU, as "
                                                     f"training runs" if pre.gpus_per_thread > 1 else
                                                     "the ranks were threads of one process"))
    return world, link


def _world_and_link(world: int | None, pre: RankLines, world_size: int | None, notes: list[str],
                    collective: str | None = None, table: Table | None = None,
                    span: tuple[int, int] | None = None, exact: bool = False) -> tuple[int | None, str | None]:
    """Rank count and link class: the override, pybench's header, busbw/algbw, the Rank lines.

    Rank lines 0..k-1 are the whole list when busbw/algbw, read with its printed rounding, allows
    k ranks (at a thousand ranks the rounded ratio alone cannot tell 1024 from 1185). ``span``:
    the range of counts the rounded ratio allows when it allows more than one; then only whole
    Rank lines within it give the world, else it stays unknown and a note says how to give it."""
    if world_size is not None:
        if world != world_size:  # what the ratio said is superseded (it allows the count given, or it was refused)
            notes[:] = [n for n in notes if not n.startswith(f"world size {world} ")]
            notes.append(f"world size {world_size} as given (--world)")
        world = world_size
    elif "world" in pre.pybench:
        world = int(pre.pybench["world"])
    elif pre.launch is not None and pre.launch.devices and not (pre.launch.launcher == DIRECT and pre.ranks):
        # (a binary's line that every rank echoed, `srun bash -c 'set -x; ./x_perf'`: its Rank lines say)
        world, span = _launched(world, pre.launch, notes, collective, table, span, exact)
    if pre.pybench.get("link") in LINK_CLASSES:
        if world and pre.pybench.get("hosts"):  # the node count a fit across nodes needs
            notes.append(f"{world} ranks on {int(pre.pybench['hosts'])} host(s) per pybench's header")
        return world, pre.pybench["link"]
    listed, at_least = len(pre.ranks), (max(pre.ranks) + 1 if pre.ranks else 0)
    if world is None and span is not None and pre.ranks and listed < at_least and span[0] <= at_least <= span[1]:
        # Rank lines elided in the middle (1 of 1440 printed, the last Rank 1439): the smallest count both allow
        notes.append(f"world size {at_least}: the smallest count both the Rank lines (up to Rank {at_least - 1}, "
                     f"{listed} of them printed) and busbw/algbw, rounded as printed ({span[0]} to {span[1]}), allow")
        world = at_least
    elif world is None and span is not None and not (listed == at_least and span[0] <= at_least <= span[1]):
        notes.append(f"world size not determined: busbw/algbw, rounded as printed, allows {span[0]} to "
                     f"{span[1]} ranks" + (f" and the Rank lines list {listed} (of ranks 0..{at_least - 1})"
                                           if pre.ranks else " and no Rank lines are printed")
                     + "; give --world N (world_size=N in Python)")
        if at_least <= span[1]:
            hosts_listed = len(set(pre.ranks.values()))
            return None, ("inter-node" if hosts_listed > 1 else None)
        world = at_least   # more ranks are listed than the ratio allows: the listed ranks exist
    elif world is None and span is not None:
        notes.append(f"world size {at_least} from the Rank lines 0..{at_least - 1}, within the {span[0]} to "
                     f"{span[1]} ranks that busbw/algbw, rounded as printed, allows")
    if not pre.ranks:
        launch = pre.launch
        if launch is not None and launch.hosts and world is not None and world == launch.devices:
            notes.append(f"{world} ranks on {launch.hosts} host(s) per the {launch.launcher} command line")
            return world, ("inter-node" if launch.hosts > 1 else "intra-node")
        if world is not None and world > 1 and pre.gpus_per_process == world:  # one process runs on one host
            notes.append(f"{world} ranks on 1 host(s): one process drove them all (nccl-tests' header: nThread x "
                         f"nGpus = {world})")
            return world, "intra-node"
        return world, None
    if pre.repeated:
        rank, hosts_of = min(pre.repeated.items())
        shown = ", ".join(sorted(hosts_of)[:4]) + (", ..." if len(hosts_of) > 4 else "")
        world = world if world is not None else max(pre.ranks) + 1
        if world > 1 and all(pre.repeated.get(r) == hosts_of for r in range(world)):  # each process: all its ranks
            notes.append(f"Rank {rank} is listed by {len(hosts_of)} processes ({shown}), each with all {world} ranks: "
                         f"each process ran a test of its own inside its host (nccl-tests -g {world}), so the table "
                         f"is one node's (to test across nodes, run one rank per GPU under MPI: nccl-tests MPI=1)")
            notes.append(f"{world} ranks on 1 host(s) per the Rank lines")
            return world, "intra-node"
        notes.append(f"Rank {rank} is listed by {len(hosts_of)} processes ({shown}): each process ran a test of its "
                     f"own (nccl-tests built without MPI=1?), so the table is one process's and the hosts say nothing "
                     f"of the link; rebuild nccl-tests with MPI=1")
        return world, None
    hosts = len(set(pre.ranks.values()))
    if world_size is None and world is not None and listed < at_least and world < at_least and \
            ratio_allows(collective, table, world) and not ratio_allows(collective, table, at_least):
        # a few Rank lines naming more ranks than every row's busbw/algbw allows: they are not this table's
        notes.append(f"the Rank lines name ranks up to {at_least - 1} ({listed} of them printed), which busbw/algbw "
                     f"on every row rules out: the table ran {world} ranks, and those lines are another run's (or "
                     f"were edited); their hosts are not used")
        return world, None
    # busbw is printed to 0.01 GB/s, so at hundreds of ranks the ratio's world is off by a few:
    # Rank lines 0..k-1 within 5% of it are the whole list.
    whole = listed == at_least and world is not None and (
        abs(world - listed) <= 0.05 * listed or ratio_allows(collective, table, at_least))
    if world is None or (world_size is None and (world < at_least or whole)):
        if world is not None and world != at_least:
            notes.append(f"Rank lines name ranks 0..{at_least - 1}; busbw/algbw said {world} ranks")
        world = at_least
    elif listed < world:
        launched = pre.launch is not None and f"world size {world} from the {pre.launch.launcher} command line" in \
            " ".join(notes)
        said = "--world" if world_size is not None else "the command line" if launched else "busbw/algbw"
        notes.append(f"Rank lines list {listed} of {world} ranks (world size from {said})")
    notes.append(f"{listed} ranks on {hosts} host(s) per the Rank lines")
    order = [pre.ranks[r] for r in sorted(pre.ranks)]
    crossings = sum(a != b for a, b in zip(order, order[1:] + order[:1]))  # (the ring back to rank 0 included)
    if 1 < hosts < listed and crossings > hosts:  # not filled host by host (mpirun --map-by node)
        notes.append(ROUND_ROBIN + f"{crossings} of {listed} neighbours on another host, over {hosts} hosts")
    if hosts > 1:
        return world, "inter-node"
    if listed >= world:
        return world, "intra-node"
    notes.append("link class unknown: the Rank lines listed are on one host, the others are not listed")
    return world, None


def _launched(world: int | None, launch: Launch, notes: list[str], collective: str | None, table: Table | None,
              span: tuple[int, int] | None, exact: bool) -> tuple[int | None, tuple[int, int] | None]:
    """The launcher line's ranks (processes times the GPUs each drives), where busbw/algbw, rounded as
    printed, allows them and no exact count (``exact``: the per-rank counts') says otherwise; else the world
    as it was, with a note."""
    launched = launch.devices
    assert launched is not None
    per = f" x {launch.devices_per_process} GPUs each" if launch.devices_per_process > 1 else ""
    allowed = (span[0] <= launched <= span[1] if span is not None
               else world is None or world == launched or (not exact and ratio_allows(collective, table, launched)))
    if not allowed:
        notes.append(f"the {launch.launcher} command line above the table starts {launched} ranks{per}, which "
                     f"{'the per-rank counts' if exact else 'busbw/algbw'} do not allow: another job's line, not used")
        return world, span
    notes[:] = [n for n in notes if not n.startswith(f"world size {world} ")]
    said = f" (busbw/algbw's median said {world})" if world is not None and world != launched else ""
    notes.append(f"world size {launched} from the {launch.launcher} command line ({launch.ranks} process(es){per})"
                 + said)
    return launched, None


def check_world_override(path, table: Table, coll: str, world_size: int | None, ratio_world: int | None,
                         bus: float) -> None:
    """FileFormatError where ``--world`` names a count the table's busbw/algbw rules out: every row's rounding where
    rows bound it, else the median's count (nccl-tests prints busbw from the bus factor at the rank count)."""
    span = ratio_worlds(coll, table)  # every row's rounding, where rows bound it; else the median's count
    if world_size is not None and ratio_world is not None and ratio_world > 1 and (
            not span[0] <= world_size <= span[1] if span is not None
            else world_size != ratio_world and not ratio_allows(coll, table, world_size)):
        says = f"{span[0]} to {span[1]}" if span is not None and span[0] < span[1] else str(span[0] if span else
                                                                                          ratio_world)
        raise FileFormatError(f"{path}: line {table.header_line}: --world {world_size} disagrees with the table's "
                              f"busbw/algbw = {bus:.4f}, which, rounded as printed, says {says} ranks for {coll}; "
                              f"leave --world out, or give the rank count that ran")


def ratio_worlds(collective: str | None, table: Table) -> tuple[int, int] | None:
    """(fewest, most) ranks that every row's busbw/algbw allows, each value known to half its last printed digit.

    Only for the collectives whose bus factor grows with the rank count (2(n-1)/n, (n-1)/n).
    At hundreds of ranks the factor is within a rounding step of its limit, so the rows allow
    a range of worlds, not one. None when no row is precise enough to bound it, or none fits.
    """
    if collective == "allreduce":
        def ranks(f: float) -> float:
            return 2.0 / (2.0 - f) if f < 2.0 else math.inf
    elif collective in ("allgather", "reducescatter", "alltoall"):
        def ranks(f: float) -> float:
            return 1.0 / (1.0 - f) if f < 1.0 else math.inf
    else:
        return None
    lo, hi = 2.0, math.inf
    for alg, bus, (alg_half, bus_half) in zip(table.algbw, table.busbw, _halves(table)):
        if alg <= 2 * alg_half:
            continue  # 0.00 or 0.01 GB/s bounds nothing
        lo = max(lo, ranks(max(bus - bus_half, 0.0) / (alg + alg_half)))
        hi = min(hi, ranks((bus + bus_half) / (alg - alg_half)))
    if not (math.isfinite(lo) and math.isfinite(hi)) or math.ceil(lo - 1e-9) > math.floor(hi + 1e-9):
        return None
    return math.ceil(lo - 1e-9), math.floor(hi + 1e-9)


def world_from_ratio_span(coll: str, table: Table, world: int | None,
                           notes: list[str]) -> tuple[int | None, tuple[int, int] | None]:
    """The ratio's world checked against every row's rounding: (world, None) when one count fits,
    (None, span) when several do (the caller's Rank lines may still pick one)."""
    span = ratio_worlds(coll, table)
    if span is None or world is None:
        return world, None
    lo, hi = span
    if lo == hi:
        if lo != world:
            notes.append(f"world size {lo}: the only count every row's rounded busbw/algbw allows "
                         f"(their median said {world})")
        return lo, None
    notes[:] = [n for n in notes if not n.startswith(f"world size {world} from busbw/algbw")]
    return None, span


def ratio_allows(collective: str | None, table: Table | None, world: int) -> bool:
    """Whether every row's printed busbw/algbw, each rounded to 0.01 GB/s, allows ``world`` ranks."""
    c = COLLECTIVES.get(collective or "")
    if c is None or table is None or world < 2:
        return False
    alg, bus = np.array(table.algbw, dtype=float), np.array(table.busbw, dtype=float)
    halves = np.array(_halves(table), dtype=float).reshape(-1, 2)
    alg_half, bus_half = halves[:, 0], halves[:, 1]
    good = alg > 2 * alg_half
    if not np.any(good):
        return False
    factor = c.busbw_factor(world)
    return bool(np.all((bus[good] - bus_half[good] <= factor * (alg[good] + alg_half[good]))
                       & (factor * (alg[good] - alg_half[good]) <= bus[good] + bus_half[good])))


def _halves(table: Table) -> list[tuple[float, float]]:
    """Each row's (algbw, busbw) rounding half-steps, and a little for the float parse; 0.005
    (two decimals) for tables built without the printed text."""
    if len(table.bw_half) != len(table.algbw):
        return [(0.005 + 1e-9, 0.005 + 1e-9)] * len(table.algbw)
    return [(a + 1e-9, b + 1e-9) for a, b in table.bw_half]
