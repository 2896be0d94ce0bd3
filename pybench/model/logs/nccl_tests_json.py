"""Read the JSON file nccl-tests writes with ``-J`` (file version 2 layout).

The document holds ``args`` (argv; argv[0] names the program), ``config`` with ``devices``
(rank, hostname ...) and ``results``: rows with ``size``, ``count``, ``type``, ``redop``,
``root`` and ``out_of_place`` / ``in_place`` objects holding ``time`` (us), ``alg_bw``,
``bus_bw`` (GB/s) and ``nwrong``. With ``-C 1`` the time is ``cpu_time``: the host's time per
operation (for non-blocking collectives, the time to launch them), while the bandwidths still
come from the operation's own time; the measurement sets say so in their notes. The document is
parsed by :func:`pybench.io.files.parse_json` before it gets here, and checked against
:class:`pybench.io.foreign_schemas.NcclTestsJsonSchema`.
"""

from __future__ import annotations

import dataclasses
import json
import math
from pathlib import Path
from typing import Any

import numpy as np

from pybench.collectives import COLLECTIVES, dtype_name
from pybench.errors import FileFormatError
from pybench.io.files import parse_json
from pybench.model.logs.measurements import MeasurementSet, device_names
from pybench.model.logs.nccl_tests import redop_name
from pybench.model.logs.nccl_tests_counts import exact_world
from pybench.model.logs.nccl_tests_failure import wrong_note
from pybench.model.logs.nccl_tests_preamble import PROGRAM_RE, PROGRAMS
from pybench.model.logs.nccl_tests_ratio import infer, ratio_agrees
from pybench.model.logs.nccl_tests_table import Columns, Rows, Table, is_wrong
from pybench.model.logs.nccl_tests_world import ratio_allows, ratio_worlds


def _program(data: dict[str, Any]) -> str | None:
    args = data.get("args")
    for a in args if isinstance(args, list) else []:
        m = PROGRAM_RE.search(str(a))
        if m:
            return m.group(1)
    return None


def _pybench_collective(data: dict[str, Any]) -> str | None:
    """The collective of pybench's own -J file: its subcommand (``pybench allreduce ...``)."""
    args = data.get("args")
    if isinstance(args, list) and len(args) > 1 and Path(str(args[0])).name == "pybench":
        return str(args[1]) if str(args[1]) in COLLECTIVES else None
    return None


def _pybench_run(data: dict[str, Any]) -> dict[str, str]:
    """What pybench's own -J file says ran it (``backend``, ``mpi_library``); empty for nccl-tests'."""
    run = data.get("pybench")
    if not isinstance(run, dict):
        return {}
    return {k: str(v)[:160] for k, v in run.items() if k in ("backend", "mpi_library") and isinstance(v, str)}


def _listed(data: dict[str, Any]) -> list[dict[str, Any]]:
    """config.devices (or a top-level devices list): one entry per listed process, with its rank."""
    config = data.get("config")
    devices = (config.get("devices") if isinstance(config, dict) else None) or data.get("devices") or []
    return [d for d in devices if isinstance(d, dict) and isinstance(d.get("rank"), int)] \
        if isinstance(devices, list) else []


def _hosts(data: dict[str, Any]) -> dict[int, str]:
    return {int(d["rank"]): str(d.get("hostname", "")) for d in _listed(data)}


def _device_names(data: dict[str, Any]) -> str:
    """The GPU names config.devices lists (its device_info)."""
    return device_names(str(d["device_info"]) for d in _listed(data) if isinstance(d.get("device_info"), str))


def _per_process(data: dict[str, Any]) -> int:
    """Ranks each listed process drives: config's nthreads x ngpus (1 each where absent or not whole)."""
    config = data.get("config")
    if not isinstance(config, dict):
        return 1
    count = 1
    for key in ("nthreads", "ngpus"):
        value = config.get(key)
        count *= value if isinstance(value, int) and not isinstance(value, bool) and 1 <= value <= 1024 else 1
    return count


def _time(block: dict[str, Any]) -> float:
    return block["time"] if block.get("time") is not None else block["cpu_time"]


CPU_TIME_NOTE = ("times are nccl-tests' cpu_time (-C 1): measured on the host, for non-blocking collectives the "
                 "time to launch them, not to complete them; its alg_bw and bus_bw come from the operations' own time")


def _add_row(rows: Rows, row: dict[str, Any], wrong: list[tuple[int, str]]) -> bool:
    """One row (typed and bounded by NcclTestsJsonSchema) into ``rows``; a row of size 0 measured nothing.
    A block whose ``nwrong`` counts wrong elements (-c) timed a broken collective: it is left out and
    added to ``wrong``. Returns False when that left the row no block."""
    if row["size"] == 0:
        return True
    blocks = [(half, row[key]) for half, key in (("out-of-place", "out_of_place"), ("in-place", "in_place"))
              if row.get(key)]
    wrong.extend((row["size"], half) for half, b in blocks if is_wrong(b.get("nwrong")))
    right = [b for _, b in blocks if not is_wrong(b.get("nwrong"))]
    if not right:
        return not blocks
    block, other = right[0], (right[1] if len(right) > 1 else None)
    rows.sizes.append(row["size"])
    rows.counts.append(row.get("count") or 0)
    rows.times.append(float(_time(block)))
    rows.in_place.append(float(_time(other)) if other is not None else math.nan)
    rows.algbw.append(float(block["alg_bw"]))
    rows.busbw.append(float(block["bus_bw"]))
    redop = str(row.get("redop") or "").strip()
    rows.keys.append((str(row.get("type") or ""), redop))
    rows.redops.add(redop)
    rows.roots.add(str(row.get("root", "")).strip())
    return True


def parse_nccl_tests_json(data: Any, path="<json>", collective: str | None = None,
                          world_size: int | None = None) -> list[MeasurementSet]:
    """Measurement sets of an nccl-tests ``-J`` document (one per type and redop).

    Returns
    -------
    list of MeasurementSet

    Raises
    ------
    FileFormatError
        No ``results`` list, a row without numbers, or a collective that cannot be told.
    """
    if not isinstance(data, dict) or not isinstance(data.get("results"), list):
        raise FileFormatError(f"{path}: not an nccl-tests JSON file: no 'results' list")
    from pybench.io.foreign_schemas import NcclTestsJsonSchema, validate_foreign
    validate_foreign(data, NcclTestsJsonSchema, str(path))
    rows = Rows()
    host_timed = False
    wrong: list[tuple[int, str]] = []
    lost = 0
    for row in data["results"]:
        lost += not _add_row(rows, row, wrong)
        block = row.get("out_of_place") or row.get("in_place") or {}
        host_timed = host_timed or block.get("time") is None and block.get("cpu_time") is not None
    if wrong and not rows.sizes:
        raise FileFormatError(f"{path}: every row of this nccl-tests JSON has wrong results (non-zero 'nwrong': "
                              f"the -c check failed); no valid measurement to read")
    if not rows.sizes:
        errors = [" ".join(e.split())[:200] for e in data.get("errors") or [] if isinstance(e, str)]
        raise FileFormatError(f"{path}: nccl-tests JSON has no rows with a size above 0 and a timing in 'results'"
                              + (f" (its errors: {'; '.join(errors[:3])})" if errors else ""))
    alg, bus = np.array(rows.algbw, dtype=float), np.array(rows.busbw, dtype=float)
    good = alg > 0.01
    # pybench's subcommand before any program name in its args (an output named all_reduce_perf.json)
    own = _pybench_collective(data) or PROGRAMS.get(_program(data) or "")
    named = collective or own
    coll, world, notes = infer(named, rows.redops, rows.roots,
                               list(bus[good] / alg[good]), [], False)
    if coll is None:
        raise FileFormatError(f"{path}: cannot tell which collective this nccl-tests JSON measured; "
                              f"give --collective (collective=... in Python)")
    ratio = float(np.median(bus[good] / alg[good])) if np.any(good) else math.nan
    _refuse_contradicting_overrides(path, data, rows, collective, world_size, coll, world, ratio, own)
    world = exact_world(coll, rows.sizes, rows.counts, rows.keys, world, notes)
    hosts, link = _hosts(data), None
    if hosts:
        # nccl-tests lists one device per process (its first Rank line): each drives nthreads x ngpus ranks
        per_process = _per_process(data)
        ranks = sorted(hosts)
        if per_process > 1 and any(b - a != per_process for a, b in zip(ranks, ranks[1:])):
            per_process = 1  # the entries are ranks, not processes (consecutive): each is one
        listed = max(len(hosts) * per_process, ranks[-1] + 1)
        if world_size is not None and world_size < listed:  # the listed ranks ran: fewer cannot have
            raise FileFormatError(
                f"{path}: --world {world_size} is fewer than the {listed} ranks config.devices lists"
                + (f" ({len(hosts)} processes x {per_process} ranks each, -t x -g)" if per_process > 1 else "")
                + "; leave --world out, or give the rank count that ran")
        if world is not None and world > listed and ratio_allows(coll, _as_table(rows), listed):
            # the bandwidths, rounded as written, allow the listed ranks: the devices say exactly
            notes[:] = [n for n in notes if not n.startswith(f"world size {world} ")]
            world = listed
        world = max(world or 0, listed)   # the ranks listed exist; the ratio may say more
        link = "inter-node" if len(set(hosts.values())) > 1 else "intra-node"
        notes.append(f"{listed} ranks on {len(set(hosts.values()))} host(s) per config.devices"
                     + (f" ({len(hosts)} processes x {per_process} ranks each, -t x -g)" if per_process > 1 else ""))
    if world_size is not None:
        if world != world_size:  # what the ratio or the devices said is superseded (it allows the count given)
            notes[:] = [n for n in notes if not n.startswith(f"world size {world} ")]
            notes.append(f"world size {world_size} as given (--world)")
        world = world_size
    if host_timed:
        notes.append(CPU_TIME_NOTE)
    if wrong:
        notes.append(wrong_note(wrong, lost, "nccl-tests' nwrong"))
    backend = _backend(data)
    if backend != "nccl":
        notes.append(f"pybench's -J file of its {backend} backend")
    if _pybench_run(data).get("mpi_library"):
        notes.append(f"MPI library: {_pybench_run(data)['mpi_library']}")
    return _sets(path, rows, coll, world, link, notes, backend, _device_names(data))


def _refuse_contradicting_overrides(path, data: dict[str, Any], rows: Rows, collective: str | None,
                                    world_size: int | None, coll: str, ratio_world: int | None, bus: float,
                                    own: str | None) -> None:
    """--collective and --world name what a file does not say, as for a text table (nccl_tests.py): one its
    program name, or its bus_bw/alg_bw (from the collective's bus factor at the rank count), contradicts would
    relabel the data."""
    if collective and own and collective != own:
        said = "pybench's subcommand" if _pybench_collective(data) else f"its program {_program(data)}"
        raise FileFormatError(f"{path}: --collective {collective} disagrees with this JSON's args, which name "
                              f"{said} ({own}); leave --collective out, or give the file of the collective that ran")
    if _pybench_collective(data):
        return  # pybench's own file names its collective and world; its bandwidths are not nccl-tests'
    if collective and math.isfinite(bus) and not ratio_agrees(collective, bus):
        raise FileFormatError(f"{path}: --collective {collective} disagrees with this JSON's bus_bw/alg_bw = "
                              f"{bus:.3f}, which no {collective} gives; leave --collective out, or give the "
                              f"collective that ran")
    if world_size is None or ratio_world is None or ratio_world < 2:
        return
    table = _as_table(rows)
    span = ratio_worlds(coll, table)  # every row's rounding (nccl-tests writes 2 decimals), where rows bound it
    if (not span[0] <= world_size <= span[1] if span is not None
            else world_size != ratio_world and not ratio_allows(coll, table, world_size)):
        says = f"{span[0]} to {span[1]}" if span is not None and span[0] < span[1] else str(
            span[0] if span else ratio_world)
        raise FileFormatError(f"{path}: --world {world_size} disagrees with this JSON's bus_bw/alg_bw = {bus:.4f}, "
                              f"which, rounded as written, says {says} ranks for {coll}; leave --world out, or "
                              f"give the rank count that ran")


def _as_table(rows: Rows) -> Table:
    """The rows as a text table, for nccl_tests_world's ratio checks (only the bandwidths are read)."""
    none = Columns(names=(), size=0, count=1, type=2, time=(), algbw=(), busbw=(), redop=None, root=None,
                   p5=None, p95=None)
    return Table(columns=none, header_line=0, sizes=rows.sizes, counts=rows.counts, algbw=rows.algbw,
                 busbw=rows.busbw)


# The top-level keys nccl-tests writes before its results: what tells its -J file from other JSON.
_HEAD_KEYS = {"version", "start_time", "args", "env", "nccl_version", "config"}
CUT_NOTE = "the JSON ends mid-document (run killed?): read the {n} complete result record(s) before the cut"


def parse_cut_nccl_tests_json(body: str, path="<json>", collective: str | None = None,
                              world_size: int | None = None) -> list[MeasurementSet] | None:
    """The sets of an nccl-tests ``-J`` file cut short, where :func:`parse_json` refused it; None for other text.

    nccl-tests writes the file as it runs, so a job killed mid-run (or by a time limit) leaves its complete
    result records followed by half of one: those records are read, with a note, as the text reader keeps the
    complete rows of a cut log. One FileFormatError line when no record before the cut is complete."""
    found = _cut_results(body)
    if found is None:
        return None
    end, complete = found
    if not complete:
        raise FileFormatError(f"{path}: this nccl-tests JSON ends mid-document (run killed?) before any complete "
                              f"result record; nothing to read")
    data = parse_json(body[:end] + "]}", str(path))  # the complete records, closed: strict and bounded as ever
    note = CUT_NOTE.format(n=complete)
    return [dataclasses.replace(m, notes=(*m.notes, note))
            for m in parse_nccl_tests_json(data, path, collective, world_size)]


def _cut_results(body: str) -> tuple[int, int] | None:
    """(offset just past the last complete ``results`` record, how many) of an nccl-tests -J document cut
    short: its keys before ``results`` whole, the text ending in that array or in a key after it. None where
    the text is not such a document, or fails before its end (corrupt, not cut). The stdlib decoder reads
    every value; only the commas and colons between them are looked at here."""
    decoder, head, end, complete = json.JSONDecoder(), {}, -1, 0

    def skip(i: int) -> int:
        while i < len(body) and body[i] in " \t\r\n":
            i += 1
        return i

    def members(i: int, until: str | None) -> tuple[int, bool]:
        """Past the top-level members from ``i`` up to key ``until`` (its value not read), and whether the
        text ended first; ValueError where a separator is wrong."""
        while True:
            i = skip(i)
            if i >= len(body):
                return i, True
            if body.startswith("}", i):
                raise ValueError("the document is whole")  # parse_json failed for another reason
            key, i = decoder.raw_decode(body, i)
            i = skip(i)
            if i >= len(body):
                return i, True
            if not isinstance(key, str) or not body.startswith(":", i):
                raise ValueError("not a member")
            i = skip(i + 1)
            if key == until:
                return i, i >= len(body)
            head[key], i = decoder.raw_decode(body, i)
            i = skip(i)
            if body.startswith(",", i):
                i += 1
            elif i < len(body):
                raise ValueError("no comma")

    try:
        if not body.startswith("{", skip(0)):
            return None
        i, cut = members(skip(0) + 1, "results")
        if cut:
            return (0, 0) if _nccl_head(head) else None
        if not body.startswith("[", i):
            return None
        end, i = i + 1, skip(i + 1)
        while i < len(body) and not body.startswith("]", i):
            _, i = decoder.raw_decode(body, i)
            end, complete, i = i, complete + 1, skip(i)
            if body.startswith(",", i):
                i = skip(i + 1)
            elif i < len(body) and not body.startswith("]", i):
                return None
        if i < len(body):  # the array whole: the cut must come in a member after it
            i = skip(i + 1)
            if i < len(body) and not body.startswith(",", i):
                return None
            _, cut = members(i + 1, None)
            if not cut:
                return None
    except json.JSONDecodeError as exc:
        if not _at_end(body, exc):
            return None
        if end < 0:  # cut before the results: nccl-tests' still, when its keys say so
            return (0, 0) if _nccl_head(head) else None
    except (ValueError, RecursionError):
        return None
    return (end, complete) if head.keys() & _HEAD_KEYS else None


def _nccl_head(head: dict[str, Any]) -> bool:
    """Whether the members before a cut say nccl-tests wrote them (its version, config, or program)."""
    return bool(head.keys() & {"nccl_version", "config"}) or _program(head) is not None


def _at_end(body: str, exc: json.JSONDecodeError) -> bool:
    """Whether the decoder failed for want of text: at the end (but a cut literal such as ``tru``), or in a
    string that runs to the end."""
    return exc.msg.startswith("Unterminated string") or exc.pos >= len(body.rstrip()) - 5


def _backend(data: dict[str, Any]) -> str:
    """pybench's own -J file names its backend (its ``pybench`` object; older ones only in ``args``) and lists
    CPU ranks as device -1, which nccl-tests never does; anything else is NCCL's."""
    if _pybench_run(data).get("backend") in ("mpi", "nccl", "torch"):
        return _pybench_run(data)["backend"]
    args = [str(a) for a in data.get("args") or [] if isinstance(data.get("args"), list)]
    if args and Path(args[0]).name == "pybench" and "--backend" in args[:-1]:
        named = args[args.index("--backend") + 1]
        if named in ("mpi", "nccl", "torch"):
            return named
    config = data.get("config")
    devices = config.get("devices") if isinstance(config, dict) else None
    listed = [d for d in devices if isinstance(d, dict)] if isinstance(devices, list) else []
    if listed and all(d.get("device") == -1 for d in listed) and all(isinstance(d.get("rank"), int) for d in listed):
        return "mpi"
    return "nccl"


def _sets(path, rows: Rows, coll: str, world: int | None, link: str | None,
          notes: list[str], backend: str, device: str) -> list[MeasurementSet]:
    size, time = np.array(rows.sizes, dtype=np.int64), np.array(rows.times) * 1e-6
    in_place = np.array(rows.in_place, dtype=float) * 1e-6
    in_place[~(in_place > 0)] = math.nan
    out = []
    for sel, key, extra in rows.groups():
        out.append(MeasurementSet(source="nccl-tests", collective=coll, backend=backend, world_size=world,
                                  link_class=link, dtype=dtype_name(key[0]), size_bytes=size[sel],
                                  time_s=time[sel],
                                  time_in_place_s=in_place[sel] if np.any(np.isfinite(in_place[sel])) else None,
                                  path=str(path), time_statistic="mean", notes=tuple(notes + extra),
                                  redop=redop_name(key[1]), device=device))
    return out
