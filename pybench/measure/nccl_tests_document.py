"""nccl-tests' ``-J`` document (its version 2) from a run's fields and records as dicts: what rank 0's writer streams
while the run goes (:mod:`pybench.measure.nccl_tests_json`) and what a rebuild from a dead run's journal writes
(:func:`pybench.measure.result_journal.write_from_journal`), one code for both. Its layout is described in
:mod:`pybench.measure.nccl_tests_json`."""

from __future__ import annotations

import datetime as _dt
import json
import math
import os
from collections.abc import Iterable, Iterator
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from pybench.collectives import NCCL_TESTS_TYPE_NAMES
from pybench.io.files import json_text, null_non_finite, write_atomic
from pybench.measure.record_tally import MIN_BW_TOLERANCE, RecordTally

FILE_VERSION = 2
TIME_FORMAT = "%Y-%m-%d %H:%M:%S"
_RESULTS_SLOT = '"results": []'


@dataclass
class EarlierTests:
    """The tests of one file done before the one now written (``-d all``, one file over every type, as nccl-tests
    writes it): their entries, encoded, and what the head counts over them all."""

    entries: list[str] = field(default_factory=list)
    wrong: int = 0
    busbw_sum: float = 0.0
    busbw_count: int = 0

    def add(self, tally: RecordTally, entries: Iterable[str]) -> None:
        self.entries += list(entries)
        self.wrong += tally.wrong
        self.busbw_sum += tally.busbw_sum
        self.busbw_count += tally.busbw_count

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, d: object) -> EarlierTests:
        if not isinstance(d, dict):
            return cls()
        return cls([str(e) for e in d.get("entries") or []], int(d.get("wrong") or 0),
                   float(d.get("busbw_sum") or 0.0), int(d.get("busbw_count") or 0))


def encoded_entries(records: Iterable[dict[str, Any]], in_place: bool) -> Iterator[str]:
    """Each record (as a dict) as one ``results`` entry, encoded."""
    return (json.dumps(null_non_finite(entry(r, in_place)), allow_nan=False) for r in records)


def document_chunks(meta: dict[str, Any], tally: RecordTally, started: _dt.datetime, ended: _dt.datetime | None,
                    devices: list[dict[str, Any]], earlier: EarlierTests, entries: Iterable[str]) -> Iterator[bytes]:
    """The document, streamed: ``earlier`` tests' entries, then this test's ``entries`` (``tally`` its records'),
    the head counting them all (``ended`` None: the file's tests are not all done)."""
    tally.wrong += earlier.wrong
    tally.busbw_sum, tally.busbw_count = tally.busbw_sum + earlier.busbw_sum, tally.busbw_count + earlier.busbw_count
    before, after = json_text(_head(meta, tally, started, ended, devices)).split(_RESULTS_SLOT, 1)
    yield (before + '"results": [').encode()
    n = 0
    batch: list[str] = []
    for line in _chain(earlier, entries):
        batch.append(("\n  " if n == 0 else ",\n  ") + line)
        n += 1
        if len(batch) >= 4096:
            yield "".join(batch).encode()
            batch = []
    yield ("".join(batch) + ("\n ]" if n else "]") + after).encode()


def _chain(earlier: EarlierTests, entries: Iterable[str]) -> Iterator[str]:
    yield from earlier.entries
    yield from entries


class _Row:
    """A record's dict read as the attributes :class:`RecordTally` takes (a missing one: None)."""

    def __init__(self, d: dict[str, Any]) -> None:
        self._d = d

    def __getattr__(self, name: str) -> Any:
        return self._d.get(name)


def rewrite(entry: dict[str, Any], meta: dict[str, Any], records: Iterable[dict[str, Any]]) -> None:
    """Rewrite the -J file a dead run's journal names (``entry``: what the writer kept there; ``meta``: the
    result's fields, cut short as the caller says) with every record journaled."""
    rows = list(records)
    in_place = bool((meta.get("options") or {}).get("in_place"))
    said = entry.get("devices")
    devices: list[dict[str, Any]] = said if isinstance(said, list) else []
    write_atomic(Path(entry["path"]), document_chunks(
        meta, RecordTally.of(_Row(r) for r in rows), _dt.datetime.strptime(entry["start_time"], TIME_FORMAT), None,
        devices, EarlierTests.from_dict(entry.get("earlier")), list(encoded_entries(rows, in_place))))


def _bool(value: bool) -> str:
    return "true" if value else "false"


def _block(r: dict[str, Any]) -> dict[str, Any]:
    return {"time": _number(None if r["time_s"] is None else r["time_s"] * 1e6), "alg_bw": _number(r["algbw_gbps"]),
            "bus_bw": _number(r["busbw_gbps"]), "nwrong": float(r["wrong"]) if r["check_iters"] else None}


def _nccl_version_code(env: dict[str, Any]) -> int | None:
    """NCCL's version code as the nccl backend records it (environment.backend.nccl), else None."""
    backend = env.get("backend")
    lib = backend.get("nccl") if isinstance(backend, dict) else None
    code = lib.get("version_code") if isinstance(lib, dict) else None
    return code if isinstance(code, int) else None


def _number(value: float | None) -> float | str:
    return value if value is not None and math.isfinite(value) else "nan"


def _in_place_block(r: dict[str, Any]) -> dict[str, Any] | None:
    """The in-place figures of a record that measured both modes (mpi), else None."""
    if r.get("in_place_time_s") is None:
        return None
    return _block({"time_s": r["in_place_time_s"], "algbw_gbps": r.get("in_place_algbw_gbps"),
                   "busbw_gbps": r.get("in_place_busbw_gbps"), "wrong": r.get("in_place_wrong") or 0,
                   # (no in-place count: a form whose result is not defined, nwrong null as nccl-tests')
                   "check_iters": r["check_iters"] if r.get("in_place_wrong") is not None else 0})


def entry(r: dict[str, Any], in_place: bool) -> dict[str, Any]:
    """One record (as a dict) as one of nccl-tests' ``results`` entries."""
    return {"size": r["size_bytes"], "count": r["count"], "type": NCCL_TESTS_TYPE_NAMES.get(r["dtype"], r["dtype"]),
            "redop": r["redop"], "root": f"{r['root']:6d}",
            "out_of_place": None if in_place else _block(r),
            "in_place": _block(r) if in_place else _in_place_block(r),
            "actual_iterations": r["iterations"], "experiment_name": ""}


def _byte_range(requested: object, tally: RecordTally) -> dict[str, int]:
    """nccl-tests' minimum_bytes and maximum_bytes (which it fills from -b and -e): the smallest and largest size
    of the sweep asked for, where the result records them, so a run cut short says how far it meant to go; else
    the sizes measured. (pybench's sizes are what -b/-e/-f/-i expand to: -e 11000 -i 3000 from 1000 ends at
    10000.)"""
    if isinstance(requested, list) and len(requested) == 2 and all(isinstance(x, int) for x in requested):
        return {"minimum_bytes": requested[0], "maximum_bytes": requested[1]}
    return {"minimum_bytes": tally.min_size or 0, "maximum_bytes": tally.max_size or 0}


def _head(meta: dict[str, Any], tally: RecordTally, started: _dt.datetime, ended: _dt.datetime | None,
          devices: list[dict[str, Any]]) -> dict[str, Any]:
    """Every key of the document but ``results`` (an empty list), in nccl-tests' order; ``meta``: the result's
    fields but its records, as its JSON holds them."""
    opts, environment = meta.get("options") or {}, meta.get("environment") or {}
    nccl = _nccl_version_code(environment)
    mpi = environment.get("mpi")
    library = mpi.get("library") if isinstance(mpi, dict) and isinstance(mpi.get("library"), str) else None
    wrong = tally.wrong
    gate = opts.get("min_busbw_gbps")
    avg = tally.average_busbw()
    doc: dict[str, Any] = {
        "version": FILE_VERSION,
        "start_time": started.strftime(TIME_FORMAT),
        "args": list(meta.get("command") or []),
        "env": [f"{k}={v}" for k, v in sorted(os.environ.items()) if k.startswith(("NCCL_", "PYBENCH_"))],
        "nccl_version": nccl if isinstance(nccl, int) else 0,
        # what ran it, for pybench's own reader (nccl-tests' readers take the keys they know)
        "pybench": {"backend": meta.get("backend"), **({"mpi_library": library} if library else {})},
        "config": {
            "nthreads": 1, "ngpus": int(opts.get("gpus_per_process", 1)),
            **_byte_range(opts.get("requested_bytes"), tally), **tally.size_step(),
            "warmup_iters": opts.get("warmup", 0), "iterations": opts.get("iters") or 0,
            "aggregated_iterations": 1, "validation": opts.get("check", 0),
            "graph": 1 if meta.get("timing") in ("graph", "host-graph") else 0,
            "blocking_collectives": _bool(meta.get("timing") == "per-op"), "per_iter_timing": _bool(False),
            "parallel_init": _bool(False),
            # one entry per rank as nccl-tests' (its readers count ranks and hosts from them); where the ranks
            # are not known one by one, one entry per host, with no rank number
            "devices": devices or [{"group": 0, "pid": 0, "hostname": host, "device": -1, "device_hex": "",
                                    "device_info": f"{n} rank(s), {meta.get('backend')} backend"}
                                   for host, n in (meta.get("hosts") or {}).items()],
        },
        "results": [],
        "out_of_bounds": {"count": wrong, "okay": _bool(wrong == 0)},
        "average_bus_bandwidth": {"bandwidth": _number(avg),
                                  "okay": "unchecked" if gate is None else _bool(avg >= MIN_BW_TOLERANCE * gate)},
        "errors": [meta["cut_short"]] if meta.get("cut_short") else [],
    }
    if ended is not None:
        doc["end_time"] = ended.strftime(TIME_FORMAT)
    return doc


