"""Read nccl-tests output: the text table of any era and the ``-J`` JSON file.

Text layouts handled (all seen in real logs):

* current: ``size count type redop root time algbw busbw #wrong`` twice (out-of-place,
  in-place), optionally per-iteration columns (``i_min`` ...) and a timestamp;
* 2020 and older: no ``redop``/``root`` columns, an ``error`` column instead of
  ``#wrong``, header lines without a leading ``#``, and all_gather/reduce_scatter algbw
  already multiplied by (n-1)/n;
* NCCL 1.x's test programs (``all_reduce_test``): ``bytes N type op ... res``;
* every line prefixed by srun's task label (``0: ``) or Open MPI's ``--tag-output``
  label (``[1,0]<stdout>:``), every write by MPICH's ``-prepend-rank`` label (``[0] ``),
  shell noise before, inside and after the table;
* NCCL INFO/WARN lines printed inside a row (after its size ... root, before its times):
  the row is joined across them; a last row cut short by a killed run: skipped, with a note;
* several tests in one log (all_reduce then alltoall): one set per table, each named by
  the program named since the previous table (checked against busbw/algbw); a test that failed
  before its first row ("Test NCCL failure ..." under its header) is named in a note on the others;
* times of 10 s and more, printed in e-notation to two digits: read to the precision the row's
  algbw and busbw give (see :mod:`nccl_tests_precision`);
* ``-b 8`` sweeps on many ranks, whose first rows have size 0: skipped, with a note;
* pybench's own stdout table (``# pybench ...: allreduce, backend mpi`` and ``# world N
  ranks, H host(s) [...], link ...`` above it; older pybench wrote ``ranks on H host(s)``):
  labelled with its own backend and link.

Time is microseconds; before 2019 it was milliseconds. The unit is read from the
``(us)``/``(ms)`` header when present, and otherwise (or as a cross-check) from
algbw = size / time, which only one unit satisfies.

The collective comes from the program name (``all_reduce_perf``, ``# Collective test
starting: ...``, or the JSON ``args``) when the log names it, else from the busbw/algbw
ratio together with the ``redop`` and ``root`` columns (an all-to-all of 2020-2022 left its
redop cell blank). The rank count comes from busbw/algbw where the collective's bus factor
depends on it, read with the rounding it was printed with (see :mod:`nccl_tests_world`: at
hundreds of ranks it allows a range, and then only whole Rank lines pick the count), or, in
the old layout, from algbw against size/time, else from the ``#  Rank`` lines: a log may keep
only some of them. busbw 0.00 where algbw is not is one rank.
The link class is ``inter-node`` when the ``#  Rank`` lines name more than one host,
``intra-node`` when they name one and list every rank, None otherwise.

Every error names the file and, for text, the line.
"""

from __future__ import annotations

import dataclasses
import math
import re

import numpy as np

from pybench.collectives import COLLECTIVES, busbw_factor, dtype_name
from pybench.errors import FileFormatError, SeveralTestsNamed
from pybench.model.logs.launcher_labels import clean_lines
from pybench.model.logs.launcher_lines import continued_lines
from pybench.model.logs.measurements import SOCKETS_NOTE, MeasurementSet, device_names
from pybench.model.logs.nccl_env import SOCKETS
from pybench.model.logs.nccl_tests_counts import (
    PER_RANK_COUNT,
    collective_from_counts,
    exact_world,
    refuse_contradicting_counts,
    type_bytes,
)
from pybench.model.logs.nccl_tests_failure import EmptyTable, failed_after_rows
from pybench.model.logs.nccl_tests_interleaved import header_continues, headerless_rows
from pybench.model.logs.nccl_tests_preamble import PROGRAM_RE, PROGRAMS, Preamble, rank_line
from pybench.model.logs.nccl_tests_precision import sharpen_times
from pybench.model.logs.nccl_tests_ratio import infer, ratio_agrees
from pybench.model.logs.nccl_tests_table import (
    Table,
    alltoall_fingerprint,
    bus_ratios,
    check_values,
    header_tokens,
    no_in_place_check,
    raw_algbw_ratio,
    resolve_unit,
    scan_rows,
    world_from_counts,
)
from pybench.model.logs.nccl_tests_world import (
    check_world_override,
    ratio_allows,
    world_and_link,
    world_from_ratio_span,
)


def redop_name(text: str) -> str:
    """nccl-tests' redop column as a reduction name: ``sum`` ..., empty for ``none``/``-``/absent."""
    value = str(text).strip().lower()
    return "" if value in ("", "none", "-") else value


_SNIFF_HEAD = 200000
# Only a line holding one of these can be a table header ("size"; NCCL 1.x's "bytes").
_MAYBE_HEADER_RE = re.compile(r"size|bytes", re.IGNORECASE)


def looks_like_nccl_tests(text: str) -> bool:
    """True when ``text`` holds an nccl-tests table header (used by the format sniffer). Past its head,
    only lines that could be a header are read: thousands of Rank or NCCL INFO lines (NCCL_DEBUG=INFO
    over a thousand ranks) put the first table megabytes into a log."""
    def has_header(lines: list[str]) -> bool:
        return any((toks := header_tokens(ln)) is not None and ("time" in toks[2:] or "cputime" in toks[2:])
                   for ln in lines)

    if has_header(clean_lines(text[:_SNIFF_HEAD])) or _rccl_csv(text):
        return True  # (rccl-tests' CSV: for parse_nccl_tests_text to refuse by name)
    rest = [ln for ln in text[_SNIFF_HEAD:].splitlines() if _MAYBE_HEADER_RE.search(ln)]
    return bool(rest) and has_header(clean_lines("\n".join(rest)))


# Bytes per element of nccl-tests' type names (its -d values), for size = count x ranks x width.
def _allreduce_from_rounding(table: Table, notes: list[str]) -> str | None:
    """All-reduce when some row prints busbw above algbw, even at 0.00 vs 0.01: only all-reduce's
    factor 2(n-1)/n exceeds 1 (send/recv, broadcast and reduce print the same number twice), and
    a count of size / type size rules out the per-rank counts of all-gather and reduce-scatter."""
    above = [b > a for a, b in zip(table.algbw, table.busbw) if a != b]
    if not above or not all(above) or not table.redops - {"none", "-", ""}:
        return None
    notes.append("collective allreduce inferred from busbw printed above algbw (bandwidths too small for "
                 "their ratio; program name not in the log)")
    return "allreduce"


RCCL_NOTE = ("an rccl-tests log (AMD's RCCL), read as NCCL's: the named systems are NVIDIA's, and the constants of "
             "described crossings (--system) were chosen mostly on NVIDIA logs (two of the 2-node logs are AMD's: "
             "docs/model-validation.md), so a prediction from a description rests on few RCCL measurements")
"""What a log that RCCL ran is read as (its text and its JSON alike)."""


def _concluded_after(lines: list[str], start: int) -> str | None:
    """The program a "Collective test concluded" line names after a table, before the next table or test."""
    for ln in lines[start:start + 30]:
        if header_tokens(ln) is not None or "starting" in ln:
            return None
        pm = PROGRAM_RE.search(ln)
        if pm and "concluded" in ln:
            return pm.group(1)
    return None


def _header_follows(lines: list[str], start: int) -> bool:
    """Whether the next line after ``start`` that is not blank, a unit line or a bare ``#`` is a table header."""
    for ln in lines[start:start + 8]:
        body = ln.strip().lstrip("#").strip()
        if not body or "(B)" in body or body.startswith("out-of-place") or body.startswith("in-place"):
            continue
        return header_tokens(ln) is not None
    return False


def _collective_for(table: Table, pre: Preamble, previous: str | None,
                    override: str | None, path: object = "") -> tuple[str | None, list[str]]:
    """The table's collective from the override, pybench's header, or a program name the ratio agrees with (an
    override that contradicts a program named above this table, which its ratio agrees with, is refused: for
    gather, scatter and point-to-point no ratio would)."""
    if override:
        named = _collective_for(table, pre, None, None)[0] if pre.program else None
        if named and named != override and not pre.pybench:
            raise FileFormatError(f"{path}: line {table.header_line}: --collective {override}: the log names "
                                  f"this test {pre.program} ({named}); leave --collective out")
        return override, []
    if pre.pybench.get("benchmark") in COLLECTIVES:
        return pre.pybench["benchmark"], []
    ratios = bus_ratios(table)
    bus = float(np.median(ratios)) if ratios else math.nan
    notes: list[str] = []
    for program, how in ((pre.program, "named above the table"), (previous, "named for the previous table")):
        if program is None:
            continue
        name = PROGRAMS[program]
        if ratio_agrees(name, bus):
            if how != "named above the table":
                notes.append(f"collective {name}: no program named above this table, {program} {how}")
            return name, notes
        notes.append(f"program {program} ({how}) disagrees with busbw/algbw = {bus:.3f}; "
                     f"collective inferred instead")
    return None, notes


def _prescaled(table: Table) -> bool:
    """Pre-2020 all-gather/reduce-scatter layout, whose world comes from algbw against size/time."""
    raw = raw_algbw_ratio(table)
    return table.columns.old_layout and bool(raw) and raw[0] < 0.97


def _measurement_sets(path, table: Table, pre: Preamble, previous: str | None,
                      collective: str | None, world_size: int | None) -> list[MeasurementSet]:
    check_values(path, table)
    unit = resolve_unit(path, table)
    name, name_notes = _collective_for(table, pre, previous, collective, path)
    # A per-rank count is exact, where busbw/algbw = (n-1)/n of an all-gather or reduce-scatter over
    # hundreds of ranks reads as send/recv's or a 2-rank all-reduce's 1.00: the counts speak first.
    count_notes: list[str] = []
    by_counts = None if name else collective_from_counts(table, count_notes)
    coll, world, notes = infer(name or by_counts, table.redops, table.roots, bus_ratios(table),
                               raw_algbw_ratio(table), table.columns.old_layout)
    notes = count_notes + notes
    if name is None and coll == "allreduce" and world == 2 and len(pre.ranks) > 2:
        # busbw/algbw = 1 said a 2-rank all-reduce; Rank lines of more ranks say send/recv (which prints redop sum)
        coll, world = "sendrecv", None
        named = max(pre.ranks) + 1  # the highest Rank line: lines in the middle may be elided
        notes = [f"collective sendrecv inferred from busbw/algbw = 1 over the {named} ranks the Rank lines name "
                 f"(an all-reduce over them would print {2 * (named - 1) / named:.2f}); "
                 f"broadcast has the same ratio: give --collective broadcast if it was"]
    if name is None and coll == "allreduce" and world == 2 and no_in_place_check(table):
        # sendrecv_perf has no in-place check (all_reduce_perf's reports): busbw/algbw = 1 is then not 2 ranks'
        coll, world = "sendrecv", None
        notes = ["collective sendrecv inferred: busbw/algbw = 1 (an all-reduce of 2 ranks, or send/recv) and the "
                 "in-place #wrong printed N/A on every row while the out-of-place check reported, as sendrecv_perf "
                 "prints it (all_reduce_perf checks in place); give --collective allreduce if it was"]
    if coll is None:
        coll = _allreduce_from_rounding(table, notes)
    if coll is None:
        raise FileFormatError(f"{path}: line {table.header_line}: cannot tell which collective this "
                              f"nccl-tests table measured (no program name, and neither busbw/algbw nor the "
                              f"counts tell: bandwidths too small, or busbw 0.00 on one rank); "
                              f"give --collective (collective=... in Python)")
    if name is None and coll == "allgather" and (why := alltoall_fingerprint(table)):
        coll = "alltoall"
        notes = [n for n in notes if not n.startswith("collective allgather")] + [f"collective alltoall: {why}"]
    notes = table.notes + name_notes + notes
    _refuse_contradicting_overrides(path, table, pre, collective, world_size, coll, world)
    from_ratio = world
    world = exact_world(coll, table.sizes, table.counts, table.keys, world, notes)
    counted = coll in PER_RANK_COUNT and world is not None and world > 1 and \
        world_from_counts(table.sizes, table.counts, table.keys, type_bytes(table.keys)) == world
    span = None
    if world == from_ratio and not counted and world_size is None and "world" not in pre.pybench \
            and not _prescaled(table):
        world, span = world_from_ratio_span(coll, table, world, notes)
    if world_size is None and int(pre.pybench.get("world") or 1) < 1:
        raise FileFormatError(f"{path}: pybench's header says world {pre.pybench['world']} ranks, and a run has at "
                              f"least one: the header was edited or damaged; give --world N to read the table anyway")
    launch = pre.launch if pre.launch is not None and PROGRAMS[pre.launch.program] == coll else None  # this test's
    if launch is not None and pre.gpus_per_process:  # the test's own header counts its GPUs per process
        launch = dataclasses.replace(launch, devices_per_process=pre.gpus_per_process)
    world, link = world_and_link(world, dataclasses.replace(pre, launch=launch), world_size, notes, coll, table, span,
                                 exact=counted)
    if pre.pybench.get("backend") == "mpi" and pre.pybench.get("library"):
        notes.append(f"MPI library: {pre.pybench['library']}")  # which library's algorithms ran it
    if pre.rccl:
        notes.append(RCCL_NOTE)
    if launch is not None and launch.devices != world:  # another job's line, its -x too
        pre = pre.without_launch_settings()
    if pre.nccl_algo and coll == "allreduce":  # the one collective NCCL runs by either
        notes.append(f"{pre.nccl_algo_setting} in the log: NCCL ran its {pre.nccl_algo} at every size")
    if pre.network == SOCKETS and link != "intra-node":
        notes.append(SOCKETS_NOTE)
    gpus = device_names(pre.devices.values())
    if ", " in gpus:
        notes.append(f"its Rank lines name {gpus.count(', ') + 1} GPU models ({gpus}): the ranks ran at the slower's "
                     f"pace, so its figures are no node of one of them")
    own = bool(pre.pybench)
    size = np.array(table.sizes, dtype=np.int64)
    time = np.array(table.times) * unit
    in_place = np.array(table.in_place, dtype=float) * unit
    in_place[~(in_place > 0)] = math.nan
    if world == 1 and np.any(np.isfinite(in_place)):  # one rank in place: source and result are one buffer
        in_place[:] = math.nan
        notes.append("in-place block left out: on one rank an in-place operation moves nothing, so its times are "
                     "the launch alone")
    if not table.columns.cputime and not _prescaled(table):  # else algbw is not size over the printed time
        factor = busbw_factor(coll, world, unknown=math.nan)
        notes += sharpen_times(table.sizes, table.cells, table.lines, time, in_place, unit,
                               factor if math.isfinite(factor) else None)
    low, high = np.array(table.p5) * unit, np.array(table.p95) * unit
    out = []
    for sel, key, extra in table.groups():
        spread = own and bool(np.all(np.isfinite(low[sel]) & np.isfinite(high[sel])))
        out.append(MeasurementSet(
            source="pybench" if own else "nccl-tests", collective=coll,
            backend=pre.pybench.get("backend", "nccl"), world_size=world, link_class=link,
            dtype=dtype_name(key[0]), size_bytes=size[sel], time_s=time[sel],
            time_low_s=low[sel] if spread else None, time_high_s=high[sel] if spread else None,
            time_in_place_s=in_place[sel] if np.any(np.isfinite(in_place[sel])) else None,
            path=str(path), time_statistic="median" if own else "mean", notes=tuple(notes + extra),
            redop=redop_name(key[1]), device=gpus, nccl_algo=pre.nccl_algo))
    return out


def _refuse_contradicting_overrides(path, table: Table, pre: Preamble, collective: str | None,
                                    world_size: int | None, coll: str, ratio_world: int | None) -> None:
    """--collective and --world name what a log does not say; where its busbw/algbw says otherwise (nccl-tests
    prints it from the collective's bus factor at the rank count), the override would relabel the data."""
    at_least = max(pre.ranks) + 1 if pre.ranks else 0
    foreign = len(pre.ranks) < at_least and world_size is not None and ratio_allows(coll, table, world_size) \
        and not ratio_allows(coll, table, at_least)  # a few Rank lines the rows rule out: not this table's
    if world_size is not None and world_size < at_least and not pre.pybench and not foreign:
        raise FileFormatError(f"{path}: line {table.header_line}: --world {world_size} is fewer ranks than the Rank "
                              f"lines above the table list (up to Rank {at_least - 1}); leave --world out, or give "
                              f"the rank count that ran")
    if pre.pybench or _prescaled(table):
        return
    ratios = bus_ratios(table)
    bus = float(np.median(ratios)) if ratios else math.nan
    if collective and math.isfinite(bus) and not table.columns.old_layout and not ratio_agrees(collective, bus):
        raise FileFormatError(f"{path}: line {table.header_line}: --collective {collective} disagrees with the "
                              f"table's busbw/algbw = {bus:.3f}, which no {collective} prints; leave --collective "
                              f"out, or give the collective that ran")
    refuse_contradicting_counts(path, table, collective, bus)
    check_world_override(path, table, coll, world_size, ratio_world, bus)


def _rccl_csv(text: str) -> bool:
    """Whether ``text`` opens with the header of rccl-tests' ``-Z csv`` file."""
    return text.lstrip("\ufeff \t\r\n").startswith("numCycle,collective,nodes,ranks,")


def parse_nccl_tests_text(text: str, path="<text>", collective: str | None = None,
                          world_size: int | None = None) -> list[MeasurementSet]:
    """Parse nccl-tests stdout (or pybench's own) into one :class:`MeasurementSet` per result table.

    Parameters
    ----------
    text : str
        The whole log (noise allowed).
    path : str or Path
        Named in error messages and kept in the result.
    collective, world_size : optional
        Override what the log says or what can be recovered from it.

    Returns
    -------
    list of MeasurementSet
        Out-of-place times in ``time_s`` (in-place only where out-of-place is missing)
        and the in-place times, when printed, in ``time_in_place_s``.

    Raises
    ------
    FileFormatError
        No table, malformed rows, or a collective that cannot be recovered; the message names
        the file and the line.
    """
    if _rccl_csv(text):
        raise FileFormatError(f"{path}: rccl-tests CSV (-Z csv), which pybench does not read: rerun with -Z json, "
                              f"or give the text output")
    lines = continued_lines(clean_lines(text))  # (a launcher command continued over lines: one line)
    _refuse_one_name_for_several(path, lines, collective)
    sets: list[MeasurementSet] = []
    pre, previous = Preamble(), None
    failed: list[tuple[str | None, EmptyTable]] = []  # (program, its empty table) of tests that failed
    i, last_header, last_pre, said = 0, None, pre, []  # (said: how the next table's interleaved output was read)
    while i < len(lines):
        names = header_tokens(lines[i])
        if names is None:
            if last_header is not None and headerless_rows(lines, i, last_header):
                # rows after a table's end with no header of their own: another process's table, interleaved
                said.append(f"line {i + 1}: rows with no header of their own after a table's end, read by the header "
                            f"above (several processes' output interleaved)")
                i -= 1
                lines[i] = last_header
                pre = last_pre  # the processes' Rank lines came before the first: this table is one of theirs
                continue
            pre.see(lines[i])
            i += 1
            continue
        if _header_follows(lines, i + 1):
            # Several processes printed their headers before any row (nccl-tests built
            # without MPI, started by mpirun): the rows follow the last header.
            i += 1
            continue
        start, last_header = i, lines[i]
        try:
            table, i = scan_rows(path, lines, start, names)
            while (again := header_continues(lines, i, table)) is not None:
                # a header printed again inside the sweep, its sizes going on (another process's header, or the
                # same one's after a restart): one table
                said.append(f"line {i + 1}: a header repeated inside a table whose sizes go on after it: read as "
                            f"one table (several processes' output interleaved)")
                lines[i:again] = [""] * (again - i)
                table, i = scan_rows(path, lines, start, names)
        except EmptyTable as empty:
            if empty.failure is None:
                raise
            # a test that failed before its first row: the tests after it may have run whole
            failed.append((pre.program, empty))
            i, pre = empty.resume, pre.for_next_test()
            continue
        if pre.program is None:  # named only in the footer: "# Collective test concluded: alltoall_perf"
            pre.program = _concluded_after(lines, i)
        # Rank lines among the rows: another process listed its ranks while this one printed (interleaved output):
        # they say this table's test was one of several, and the next table may be that process's
        among = [ln for ln in lines[start:i] if rank_line(ln)]
        for ln in among:
            pre.see(ln)
        found = _measurement_sets(path, table, pre, previous, collective, world_size)
        if (stopped := failed_after_rows(lines, i, lambda ln: header_tokens(ln) is not None)) is not None:
            said.append(stopped)
        found, said = [dataclasses.replace(m, notes=(*m.notes, *said)) for m in found], []
        sets.extend(found)
        previous = pre.program or previous
        last_pre, pre = pre, pre.for_next_test()
        for ln in among:
            pre.see(ln)
    if not sets:
        if failed:
            raise failed[0][1]
        raise FileFormatError(f"{path}: no nccl-tests result table found (expected a header line "
                              f"'# size count type ... time algbw busbw')")
    return [dataclasses.replace(m, notes=m.notes + tuple(_failed_note(program, empty) for program, empty in failed))
            for m in sets]


def _refuse_one_name_for_several(path, lines: list[str], collective: str | None) -> None:
    """SeveralTestsNamed where ``collective`` is given for a log of several tables that names several tests: before
    any table is read, as the first table's own check would refuse a later test's name first."""
    if not collective:
        return
    programs, current = set(), None  # the programs that name a table: above its header, or in its footer
    for ln in lines:
        named = PROGRAM_RE.search(ln)
        if named and "concluded" in ln:
            programs.add(named.group(1))
        elif named:
            current = named.group(1)
        elif current and header_tokens(ln) is not None:
            programs.add(current)
    if len(programs) > 1:
        raise SeveralTestsNamed(f"{path}: --collective {collective} would name all the tests of this log alike "
                                f"({', '.join(sorted(programs))}); split the log into one file per test, or fit it "
                                f"without --collective")


def _failed_note(program: str | None, empty: EmptyTable) -> str:
    assert empty.failure is not None
    line, text = empty.failure
    return (f"{program or 'a test'} (table header line {empty.resume}) failed before its first row and is not read: "
            f"line {line}: {text[:120]}")
