"""Read nccl-tests output: the text table of any era and the ``-J`` JSON file.

Text layouts handled (all seen in real logs):

* current: ``size count type redop root time algbw busbw #wrong`` twice (out-of-place,
  in-place), optionally per-iteration columns (``i_min`` ...) and a timestamp;
* 2020 and older: no ``redop``/``root`` columns, an ``error`` column instead of
  ``#wrong``, header lines without a leading ``#``, and all_gather/reduce_scatter algbw
  already multiplied by (n-1)/n;
* every line prefixed by srun's task label (``0: ``), shell noise before and after.

Time is microseconds; before 2019 it was milliseconds. The unit is read from the
``(us)``/``(ms)`` header when present, and otherwise (or as a cross-check) from
algbw = size / time, which only one unit satisfies.

The collective comes from the program name (``all_reduce_perf``, ``# Collective test
starting: ...``, or the JSON ``args``) when the log names it, else from the busbw/algbw
ratio together with the ``redop`` and ``root`` columns. The rank count comes from the
``#  Rank`` lines, else from busbw/algbw (or, in the old layout, from algbw against
size/time). The link class is ``inter-node`` when the ``#  Rank`` lines name more
than one host, ``intra-node`` when they name one, None when they are missing.
"""

from __future__ import annotations

import json
import math
import re
from pathlib import Path

import numpy as np

from pybench.collectives import DTYPE_ALIASES, DTYPES
from pybench.errors import FileFormatError
from pybench.model.logs.measurements import MeasurementSet

# Program name -> pybench collective name.
PROGRAMS = {
    "all_reduce_perf": "allreduce",
    "all_gather_perf": "allgather",
    "reduce_scatter_perf": "reducescatter",
    "broadcast_perf": "broadcast",
    "reduce_perf": "reduce",
    "alltoall_perf": "alltoall",
    "sendrecv_perf": "sendrecv",
    "gather_perf": "gather",
    "scatter_perf": "scatter",
    "hypercube_perf": "hypercube",
}
_PROGRAM_RE = re.compile(r"\b(" + "|".join(sorted(PROGRAMS, key=len, reverse=True)) + r")\b")
_SRUN_PREFIX_RE = re.compile(r"^\s*\d+:\s?")
_RANK_RE = re.compile(r"^#?\s*Rank\s+(\d+)\b.*?\bon\s+(\S+)\s+device\b")
_NUM_RE = re.compile(r"^[+-]?(\d+\.?\d*|\.\d+)([eE][+-]?\d+)?$")


def _err(path, msg: str) -> FileFormatError:
    return FileFormatError(f"{path}: {msg}")


def _clean_lines(text: str) -> list:
    lines = text.splitlines()
    # srun --label prefixes every line with "<task>: "; strip it only when most lines have
    # it, so a data row is never mistaken for a prefixed line.
    prefixed = sum(1 for ln in lines if _SRUN_PREFIX_RE.match(ln) and ":" in ln[:8])
    if lines and prefixed >= max(1, len(lines) // 2):
        lines = [_SRUN_PREFIX_RE.sub("", ln, count=1) if re.match(r"^\s*\d+:", ln) else ln
                 for ln in lines]
    return lines


def looks_like_nccl_tests(text: str) -> bool:
    """True when ``text`` holds an nccl-tests table header (used by the format sniffer)."""
    for ln in _clean_lines(text[:200000]):
        toks = ln.lstrip("#").split()
        if toks[:2] == ["size", "count"] and ("time" in toks[2:] or "cputime" in toks[2:]):
            return True
    return False


def _canonical_dtype(name: str) -> str:
    key = name.strip().lower()
    key = DTYPE_ALIASES.get(key, key)
    # nccl-tests spells some types its own way (int8, uint8, int64, bfloat16 ...); keep them.
    return key if key in DTYPES else name.strip().lower()


def _infer(collective: str | None, redops: set, roots: set, ratios_bus: list,
           ratio_raw: list, old_layout: bool):
    """Recover (collective, world, notes) from bandwidth ratios and the redop/root columns.

    ``ratios_bus``: busbw/algbw; ``ratio_raw``: printed algbw / (size/time), ~1 unless the
    old layout pre-scaled algbw by (n-1)/n.
    """
    notes = []
    bus = float(np.median(ratios_bus)) if ratios_bus else math.nan
    raw = float(np.median(ratio_raw)) if ratio_raw else math.nan
    reduces = bool(redops - {"none", "-"})
    rooted = any(r not in ("-1", "") for r in roots)
    world = None
    if old_layout and math.isfinite(raw) and raw < 0.97:
        # Pre-2020 all_gather/reduce_scatter: algbw = size/time * (n-1)/n.
        world = int(round(1.0 / (1.0 - raw)))
        notes.append(f"world size {world} from algbw/(size/time) = {raw:.4f} = (n-1)/n (old layout)")
        if collective is None:
            collective = "reducescatter" if reduces else "allgather"
            notes.append(f"collective {collective} guessed from pre-scaled algbw")
        return collective, world, notes
    if collective is None and math.isfinite(bus):
        if bus > 1.02:
            collective = "allreduce"
        elif bus < 0.98:
            collective = "reducescatter" if reduces else "allgather"
        elif rooted:
            collective = "reduce" if reduces else "broadcast"
        elif reduces:
            collective = "allreduce"  # busbw/algbw = 2(n-1)/n = 1 only for n = 2
        else:
            collective = "sendrecv"
        if collective is not None:
            notes.append(f"collective {collective} inferred from busbw/algbw = {bus:.3f} "
                         f"and redop/root columns (program name not in the log)")
    if math.isfinite(bus) and collective in ("allreduce", "allgather", "reducescatter", "alltoall"):
        if collective == "allreduce" and 1.0 - 1e-3 <= bus < 2.0 - 1e-3:
            world = int(round(2.0 / (2.0 - bus)))
        elif collective != "allreduce" and 0.45 <= bus < 1.0 - 1e-3:
            world = int(round(1.0 / (1.0 - bus)))
        if world is not None:
            notes.append(f"world size {world} from busbw/algbw = {bus:.4f}")
    return collective, world, notes


def _parse_table(path, lines, start: int, header: list, ctx: dict):
    """Parse rows after the header at ``start``; return (MeasurementSet fields, next index)."""
    names = header
    old_layout = "error" in names or "redop" not in names
    try:
        i_size, i_count, i_type = names.index("size"), names.index("count"), names.index("type")
    except ValueError:
        raise _err(path, f"nccl-tests header lacks size/count/type columns: {' '.join(names)}") from None
    tname = "cputime" if "cputime" in names else "time"
    time_cols = [k for k, n in enumerate(names) if n == tname]
    alg_cols = [k for k, n in enumerate(names) if n == "algbw"]
    bus_cols = [k for k, n in enumerate(names) if n == "busbw"]
    if not time_cols or not alg_cols or not bus_cols:
        raise _err(path, f"nccl-tests header lacks time/algbw/busbw columns: {' '.join(names)}")
    i_redop = names.index("redop") if "redop" in names else None
    i_root = names.index("root") if "root" in names else None

    # Unit line right below: "(B) (elements) (us) (GB/s) ...".
    unit_scale = None
    j = start + 1
    if j < len(lines) and "(B)" in lines[j]:
        units = lines[j]
        if "(ms)" in units:
            unit_scale = 1e-3
        elif "(us)" in units:
            unit_scale = 1e-6
        j += 1

    # Out-of-place is the first time column; when a log only has in-place values
    # (trace replay prints blanks for out-of-place) the row is shorter, handled below.
    rows = []
    while j < len(lines):
        ln = lines[j].strip()
        toks = ln.split()
        if not toks or not toks[0].isdigit():
            if ln.startswith("#") or not ln:
                # Comment inside the table (e.g. a warning) or blank: a blank ends nothing,
                # the footer "Out of bounds" / "Avg bus bandwidth" ends the table.
                if "Avg bus bandwidth" in ln or "Out of bounds" in ln:
                    break
                j += 1
                continue
            break
        rows.append((j, toks))
        j += 1
    if not rows:
        raise _err(path, f"nccl-tests table at line {start + 1} has no data rows")

    sizes, counts, times, algs, buses, redops, roots = [], [], [], [], [], set(), set()
    in_place = []
    row_keys = []
    ncols = len(names)
    for lineno, toks in rows:
        # A timestamp column adds two tokens (date and time); per-iteration adds known ones.
        if len(toks) < ncols - (1 if names[-1] in ("timestamp",) else 0):
            if len(toks) == ncols - 4 and len(time_cols) > 1:
                # out-of-place left blank: use in-place columns, shifted left by 4.
                tc, ac, bc = time_cols[1] - 4, alg_cols[1] - 4, bus_cols[1] - 4
            else:
                raise _err(path, f"line {lineno + 1}: expected {ncols} columns as in the header, "
                                 f"got {len(toks)}: {' '.join(toks)[:80]}")
            ic = None  # the only time is the in-place one, already in tc
        else:
            tc, ac, bc = time_cols[0], alg_cols[0], bus_cols[0]
            ic = time_cols[1] if len(time_cols) > 1 else None
        try:
            size = int(toks[i_size])
            count = int(toks[i_count])
            t, a, b = (float(toks[tc]), float(toks[ac]), float(toks[bc]))
        except ValueError:
            raise _err(path, f"line {lineno + 1}: size/count/time/algbw/busbw are not numbers: "
                             f"{' '.join(toks)[:80]}") from None
        ip = math.nan
        if ic is not None and ic < len(toks):
            try:
                ip = float(toks[ic])
            except ValueError:
                ip = math.nan  # e.g. "N/A": the in-place column is optional evidence
        sizes.append(size)
        counts.append(count)
        times.append(t)
        in_place.append(ip)
        algs.append(a)
        buses.append(b)
        row_keys.append((toks[i_type], toks[i_redop] if i_redop is not None else ""))
        if i_redop is not None:
            redops.add(toks[i_redop])
        if i_root is not None:
            roots.add(toks[i_root])
    size_arr = np.array(sizes, dtype=float)
    time_arr = np.array(times, dtype=float)
    alg_arr = np.array(algs)
    bus_arr = np.array(buses)
    if np.any(time_arr <= 0):
        raise _err(path, "nccl-tests table has a zero or negative time")
    # A hostile or corrupted log can hold inf, NaN or 1e300: refuse it rather than let it overflow later.
    if not (np.all(np.isfinite(time_arr)) and np.all(np.isfinite(alg_arr)) and np.all(np.isfinite(bus_arr))):
        raise _err(path, "nccl-tests table has a time or bandwidth that is not a finite number")
    if np.any(time_arr > 1e15) or np.any(time_arr < 1e-6) or np.any(size_arr > 2.0**60):
        raise _err(path, "nccl-tests table has an impossible size or time (over 2^60 B, or a time outside "
                         "1e-6 .. 1e15 time units)")
    in_place_arr = np.array(in_place, dtype=float)
    in_place_arr[~(in_place_arr > 0)] = math.nan

    # Ratios only from rows where both bandwidths have 3+ significant digits.
    good = alg_arr >= 1.0
    ratio_bus = list(bus_arr[good] / alg_arr[good])
    raw_notes = []
    if unit_scale is None or np.any(good):
        # size/time in GB/s for each unit candidate; pick the one that matches algbw.
        est = {}
        for scale in (1e-6, 1e-3):
            if np.any(good):
                est[scale] = float(np.median(alg_arr[good] / (size_arr[good] / (time_arr[good] * scale) / 1e9)))
        if unit_scale is None:
            if est:
                unit_scale = min(est, key=lambda s_: abs(math.log(est[s_])) if est[s_] > 0 else math.inf)
                raw_notes.append(f"time unit {'ms' if unit_scale == 1e-3 else 'us'} inferred from algbw = size/time")
            else:
                unit_scale = 1e-6
                raw_notes.append("time unit assumed microseconds (no unit line, bandwidths too small to check)")
        ratio_raw = [est[unit_scale]] if unit_scale in est else []
        if ratio_raw and not 0.45 < ratio_raw[0] < 1.05:
            raise _err(path, f"algbw disagrees with size/time by a factor {ratio_raw[0]:.3g}; "
                             f"the time unit or the columns are not what the header says")
    else:
        ratio_raw = []

    collective, world, notes = _infer(ctx.get("collective"), redops, roots, ratio_bus, ratio_raw,
                                      old_layout)
    if ctx.get("world_size") is not None:
        world = ctx["world_size"]
    if collective is None:
        raise _err(path, "cannot tell which collective this nccl-tests table measured "
                         "(no program name, bandwidths too small); pass collective=...")
    # `-d all` / `-o all` runs repeat every size once per type and op: one set each.
    groups = list(dict.fromkeys(row_keys))
    out = []
    for key in groups:
        sel = np.array([k == key for k in row_keys])
        extra = [f"rows with type {key[0]}" + (f", redop {key[1]}" if key[1] else "")] if len(groups) > 1 else []
        out.append({
            "collective": collective, "world_size": world, "dtype": _canonical_dtype(key[0]),
            "size_bytes": size_arr[sel].astype(np.int64), "time_s": time_arr[sel] * unit_scale,
            "time_in_place_s": (in_place_arr[sel] * unit_scale
                                if np.any(np.isfinite(in_place_arr[sel])) else None),
            "notes": tuple(raw_notes + notes + extra),
        })
    return out, j


def parse_nccl_tests_text(text: str, path="<text>", collective: str | None = None,
                          world_size: int | None = None) -> list:
    """Parse nccl-tests stdout into one :class:`MeasurementSet` per result table.

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
        No table, malformed rows, or a collective that cannot be recovered.
    """
    lines = _clean_lines(text)
    ranks = {}
    program = None
    sets = []
    i = 0
    while i < len(lines):
        ln = lines[i]
        m = _RANK_RE.match(ln.strip())
        if m:
            ranks[int(m.group(1))] = m.group(2)
        if program is None:
            pm = _PROGRAM_RE.search(ln)
            if pm:
                program = pm.group(1)
        toks = ln.strip().lstrip("#").split()
        if len(toks) >= 5 and toks[0] == "size" and toks[1] == "count":
            ctx = {"collective": collective or (PROGRAMS.get(program) if program else None),
                   "world_size": world_size}
            table, i = _parse_table(path, lines, i, toks, ctx)
            for fields in table:
                notes = list(fields.pop("notes"))
                world = fields["world_size"]
                link = None
                if ranks:
                    # The Rank lines are the authority on who took part.
                    nranks = len(ranks)
                    if world_size is None:
                        if world is not None and world != nranks:
                            notes.append(f"Rank lines list {nranks} ranks; bandwidth ratio said {world}")
                        world = nranks
                    nhosts = len(set(ranks.values()))
                    link = "inter-node" if nhosts > 1 else "intra-node"
                    notes.append(f"{nranks} ranks on {nhosts} host(s) per the Rank lines")
                fields["world_size"] = world
                sets.append(MeasurementSet(source="nccl-tests", backend="nccl", link_class=link,
                                           path=str(path), time_statistic="mean",
                                           notes=tuple(notes), **fields))
            ranks = {}
            continue
        i += 1
    if not sets:
        raise _err(path, "no nccl-tests result table found (expected a header line "
                         "'# size count type ... time algbw busbw')")
    return sets


def parse_nccl_tests_json(data: dict, path="<json>", collective: str | None = None,
                          world_size: int | None = None) -> list:
    """Parse the JSON file nccl-tests writes with ``-J`` (file version 2 layout).

    The document holds ``args`` (argv; argv[0] names the program), ``config`` with
    ``devices`` (rank, hostname ...) and ``results``: rows with ``size``, ``count``,
    ``type``, ``redop``, ``root`` and ``out_of_place`` / ``in_place`` objects holding
    ``time`` (us), ``alg_bw``, ``bus_bw`` (GB/s) and ``nwrong``.

    Returns
    -------
    list of MeasurementSet
        One set (the document holds one sweep).
    """
    if not isinstance(data, dict) or not isinstance(data.get("results"), list):
        raise _err(path, "not an nccl-tests JSON file: no 'results' list")
    program = None
    args = data.get("args")
    if isinstance(args, list):
        for a in args:
            m = _PROGRAM_RE.search(str(a))
            if m:
                program = m.group(1)
                break
    config = data.get("config") if isinstance(data.get("config"), dict) else {}
    devices = config.get("devices") or data.get("devices") or []
    hosts = {}
    for d in devices if isinstance(devices, list) else []:
        if isinstance(d, dict) and "rank" in d:
            hosts[int(d["rank"])] = str(d.get("hostname", ""))
    sizes, times, algs, buses, in_place = [], [], [], [], []
    redops, roots = set(), set()
    row_keys = []
    for k, row in enumerate(data["results"]):
        if not isinstance(row, dict):
            raise _err(path, f"results[{k}] is not an object")
        block = row.get("out_of_place") or row.get("in_place")
        if not isinstance(block, dict):
            raise _err(path, f"results[{k}] has neither out_of_place nor in_place timings")
        try:
            size = int(row["size"])
            t = float(block.get("time", block.get("cpu_time")))
            a = float(block["alg_bw"])
            b = float(block["bus_bw"])
        except (KeyError, TypeError, ValueError):
            raise _err(path, f"results[{k}]: size/time/alg_bw/bus_bw missing or not numbers") from None
        ip = math.nan
        other = row.get("in_place")
        if block is not other and isinstance(other, dict):
            try:
                ip = float(other.get("time", other.get("cpu_time")))
            except (TypeError, ValueError):
                ip = math.nan
        sizes.append(size)
        times.append(t)
        in_place.append(ip)
        algs.append(a)
        buses.append(b)
        row_keys.append((str(row.get("type", "")), str(row.get("redop", "")).strip()))
        redops.add(str(row.get("redop", "")).strip())
        roots.add(str(row.get("root", "")).strip())
    if not sizes:
        raise _err(path, "nccl-tests JSON has an empty 'results' list")
    alg_arr, bus_arr = np.array(algs), np.array(buses)
    good = alg_arr > 0.01
    coll, world, notes = _infer(collective or PROGRAMS.get(program or ""), redops, roots,
                                list(bus_arr[good] / alg_arr[good]), [], False)
    if coll is None:
        raise _err(path, "cannot tell which collective this nccl-tests JSON measured; pass collective=...")
    notes = list(notes)
    link = None
    if hosts:
        if world_size is None:
            world = len(hosts)
        nhosts = len(set(hosts.values()))
        link = "inter-node" if nhosts > 1 else "intra-node"
        notes.append(f"{len(hosts)} ranks on {nhosts} host(s) per config.devices")
    if world_size is not None:
        world = world_size
    size_arr, time_arr = np.array(sizes, dtype=np.int64), np.array(times) * 1e-6
    in_place_arr = np.array(in_place, dtype=float) * 1e-6
    in_place_arr[~(in_place_arr > 0)] = math.nan
    groups = list(dict.fromkeys(row_keys))
    out = []
    # `-d all` / `-o all` runs repeat every size once per type and op: one set each.
    for key in groups:
        sel = np.array([k == key for k in row_keys])
        extra = [f"rows with type {key[0]}, redop {key[1]}"] if len(groups) > 1 else []
        out.append(MeasurementSet(source="nccl-tests", collective=coll, backend="nccl",
                                  world_size=world, link_class=link, dtype=_canonical_dtype(key[0]),
                                  size_bytes=size_arr[sel], time_s=time_arr[sel],
                                  time_in_place_s=(in_place_arr[sel] if np.any(np.isfinite(in_place_arr[sel]))
                                                   else None), path=str(path),
                                  time_statistic="mean", notes=tuple(notes + extra)))
    return out


def load_nccl_tests(path, collective: str | None = None, world_size: int | None = None) -> list:
    """Read an nccl-tests text log or ``-J`` JSON file; see the parse functions."""
    p = Path(path)
    try:
        text = p.read_text(encoding="utf-8", errors="replace")
    except OSError as e:
        raise FileFormatError(f"{path}: cannot read ({e.strerror})") from None
    if text.lstrip().startswith("{"):
        try:
            data = json.loads(text)
        except json.JSONDecodeError as e:
            raise _err(path, f"not valid JSON (line {e.lineno}: {e.msg})") from None
        return parse_nccl_tests_json(data, path, collective, world_size)
    return parse_nccl_tests_text(text, path, collective, world_size)
