"""``-J FILE``: a run written in nccl-tests' own JSON layout (its version 2), for tools that read it.

pybench's own schema, with raw samples, stays under ``--json``. This file holds what
nccl-tests' ``-J`` holds: ``version``, ``start_time``, ``args``, ``env``,
``nccl_version``, ``config``, one ``results`` entry per size with ``out_of_place`` and
``in_place`` objects (``time`` in us, ``alg_bw``, ``bus_bw``, ``nwrong``; the mpi backend
measures both, as nccl-tests does; null for a block not measured), ``out_of_bounds``,
``average_bus_bandwidth``, ``errors`` and
``end_time``. Its booleans are the strings "true" and "false" and ``root`` is a string,
as nccl-tests writes them. ``env`` lists only NCCL_* and PYBENCH_* variables: the whole
environment, which nccl-tests copies, can hold secrets.

As nccl-tests does, an existing file is never overwritten: the file is created
exclusively, and when FILE exists FILE.0, FILE.1, ... are tried in turn; stdout says
``# Writing JSON output to PATH``.
"""

from __future__ import annotations

import datetime as _dt
import json
import math
import os
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

from pybench.errors import EnvironmentFault
from pybench.io.files import json_text, null_non_finite, write_atomic
from pybench.measure.job import record_nccl_tests_claim
from pybench.measure.record_tally import RecordTally
from pybench.measure.results import RunResult
from pybench.measure.table import MIN_BW_TOLERANCE, NCCL_TESTS_TYPE_NAMES

FILE_VERSION = 2
_TIME_FORMAT = "%Y-%m-%d %H:%M:%S"
_MAX_TRIES = 1000


def claim_path(path: Path) -> Path:
    """Create ``path`` exclusively, else ``path.0``, ``path.1``, ...; return the one created."""
    candidate = path
    for k in range(_MAX_TRIES):
        try:
            fd = os.open(candidate, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666)
        except FileExistsError:
            candidate = path.with_name(f"{path.name}.{k}")
            continue
        except OSError as exc:
            raise EnvironmentFault(f"cannot create -J file {candidate}: {exc.strerror or exc}") from None
        os.close(fd)
        return candidate
    raise EnvironmentFault(f"-J {path}: {path}.0 to {path}.{_MAX_TRIES - 1} all exist; remove some or choose "
                           "another name")


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


def nccl_tests_document(result: RunResult, started: _dt.datetime, ended: _dt.datetime | None,
                        devices: list[dict[str, Any]] | None = None) -> dict[str, Any]:
    """``result`` (the records it holds) as nccl-tests' JSON document (``ended`` None: the run is still going);
    ``devices``: its ranks' ``config.devices`` entries, where known."""
    doc = _head(result, result.tally(), started, ended, devices or [])
    doc["results"] = [_entry(r.to_dict(), bool(result.options.get("in_place"))) for r in result.records]
    return doc


def _in_place_block(r: dict[str, Any]) -> dict[str, Any] | None:
    """The in-place figures of a record that measured both modes (mpi), else None."""
    if r.get("in_place_time_s") is None:
        return None
    return _block({"time_s": r["in_place_time_s"], "algbw_gbps": r.get("in_place_algbw_gbps"),
                   "busbw_gbps": r.get("in_place_busbw_gbps"), "wrong": r.get("in_place_wrong") or 0,
                   "check_iters": r["check_iters"]})


def _entry(r: dict[str, Any], in_place: bool) -> dict[str, Any]:
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


def _head(result: RunResult, tally: RecordTally, started: _dt.datetime, ended: _dt.datetime | None,
          devices: list[dict[str, Any]]) -> dict[str, Any]:
    """Every key of the document but ``results`` (an empty list), in nccl-tests' order."""
    opts = result.options
    nccl = _nccl_version_code(result.environment)
    mpi = result.environment.get("mpi")
    library = mpi.get("library") if isinstance(mpi, dict) and isinstance(mpi.get("library"), str) else None
    wrong = tally.wrong
    gate = opts.get("min_busbw_gbps")
    avg = tally.average_busbw()
    doc: dict[str, Any] = {
        "version": FILE_VERSION,
        "start_time": started.strftime(_TIME_FORMAT),
        "args": list(result.command),
        "env": [f"{k}={v}" for k, v in sorted(os.environ.items()) if k.startswith(("NCCL_", "PYBENCH_"))],
        "nccl_version": nccl if isinstance(nccl, int) else 0,
        # what ran it, for pybench's own reader (nccl-tests' readers take the keys they know)
        "pybench": {"backend": result.backend, **({"mpi_library": library} if library else {})},
        "config": {
            "nthreads": 1, "ngpus": int(opts.get("gpus_per_process", 1)),
            **_byte_range(opts.get("requested_bytes"), tally), **tally.size_step(),
            "warmup_iters": opts.get("warmup", 0), "iterations": opts.get("iters") or 0,
            "aggregated_iterations": 1, "validation": opts.get("check", 0),
            "graph": 1 if result.timing in ("graph", "host-graph") else 0,
            "blocking_collectives": _bool(result.timing == "per-op"), "per_iter_timing": _bool(False),
            "parallel_init": _bool(False),
            # one entry per rank as nccl-tests' (its readers count ranks and hosts from them); where the ranks
            # are not known one by one, one entry per host, with no rank number
            "devices": devices or [{"group": 0, "pid": 0, "hostname": host, "device": -1, "device_hex": "",
                                    "device_info": f"{n} rank(s), {result.backend} backend"}
                                   for host, n in result.hosts.items()],
        },
        "results": [],
        "out_of_bounds": {"count": wrong, "okay": _bool(wrong == 0)},
        "average_bus_bandwidth": {"bandwidth": _number(avg),
                                  "okay": "unchecked" if gate is None else _bool(avg >= MIN_BW_TOLERANCE * gate)},
        "errors": [result.cut_short] if result.cut_short else [],
    }
    if ended is not None:
        doc["end_time"] = ended.strftime(_TIME_FORMAT)
    return doc


_RESULTS_SLOT = '"results": []'
NOT_STARTED = "no size measured: the run stopped before this test began, or it has not begun yet"


class NcclTestsJsonWriter:
    """Rank 0's -J file: claimed at the start, rewritten with the result files (from their journal:
    :meth:`pybench.measure.results.OutputFiles.also_write`), closed at the end."""

    def __init__(self, path: Path, command: Iterable[str] = (), resumed: dict[str, Any] | None = None) -> None:
        """``resumed``: a dead run's :meth:`journal_entry`, whose file is rewritten, not claimed again."""
        self.asked = path  # (the name asked for: tests that share it share this file)
        self.path = claim_path(path) if resumed is None else path
        self.started = _dt.datetime.now() if resumed is None else _dt.datetime.strptime(resumed["start_time"],
                                                                                         _TIME_FORMAT)
        self.devices: list[dict[str, Any]] = []  # config.devices, one per rank (the runner's Rank lines)
        self.begun = resumed is not None  # a document of the run itself was written (not only the placeholder)
        # -d all: one file over every type's test, as nccl-tests writes it: the tests done so far, then this one
        self.tests, self.tests_done = 1, 0
        self.earlier: list[str] = []  # their entries, encoded
        self.earlier_wrong = 0
        self.earlier_busbw: tuple[float, int] = (0.0, 0)  # (sum, count) of nccl-tests' average
        if resumed is not None:
            devices, busbw = resumed.get("devices"), resumed.get("earlier_busbw") or [0.0, 0]
            self.devices = devices if isinstance(devices, list) else []
            self.earlier = [str(e) for e in resumed.get("earlier") or []]
            self.earlier_wrong = int(resumed.get("earlier_wrong") or 0)
            self.earlier_busbw = (float(busbw[0]), int(busbw[1]))
            return
        record_nccl_tests_claim(self.path)
        # The name is held from the start (the next run takes path.0); until its first sizes land it holds a
        # valid document that says so, so that a run stopped before this test began leaves no empty file.
        try:
            write_atomic(self.path, json_text({"version": FILE_VERSION, "start_time": self.started.strftime(
                _TIME_FORMAT), "args": list(command), "results": [], "errors": [NOT_STARTED]}).encode())
        except OSError as exc:
            raise EnvironmentFault(f"cannot write {self.path}: {exc.strerror or exc}") from None

    def chunks(self, result: RunResult, records: Iterable[dict[str, Any]], finished: bool = False) -> Iterator[bytes]:
        """The document, streamed: ``records`` are every record of ``result`` (as dicts), in order."""
        self.begun = True
        tally = result.tally()
        tally.wrong += self.earlier_wrong
        tally.busbw_sum, tally.busbw_count = (tally.busbw_sum + self.earlier_busbw[0],
                                              tally.busbw_count + self.earlier_busbw[1])
        last = self.tests_done + 1 >= self.tests  # (the file's end_time: once its last test has ended)
        head = json_text(_head(result, tally, self.started, _dt.datetime.now() if finished and last else None,
                               self.devices))
        before, after = head.split(_RESULTS_SLOT, 1)
        yield (before + '"results": [').encode()
        n = 0
        for line in self.earlier:
            yield (("\n  " if n == 0 else ",\n  ") + line).encode()
            n += 1
        batch: list[str] = []
        for line in self._encoded(result, records):
            batch.append(("\n  " if n == 0 else ",\n  ") + line)
            n += 1
            if len(batch) >= 4096:
                yield "".join(batch).encode()
                batch = []
        yield ("".join(batch) + ("\n ]" if n else "]") + after).encode()

    @staticmethod
    def _encoded(result: RunResult, records: Iterable[dict[str, Any]]) -> Iterator[str]:
        in_place = bool(result.options.get("in_place"))
        return (json.dumps(null_non_finite(_entry(r, in_place)), allow_nan=False) for r in records)

    def test_done(self, result: RunResult, records: Iterable[dict[str, Any]]) -> None:
        """``result``'s test ended (its records, as dicts): the next test's document holds its entries first."""
        tally = result.tally()
        self.earlier += list(self._encoded(result, records))
        self.earlier_wrong += tally.wrong
        self.earlier_busbw = (self.earlier_busbw[0] + tally.busbw_sum, self.earlier_busbw[1] + tally.busbw_count)
        self.tests_done += 1

    def journal_entry(self) -> dict[str, Any]:
        """What the run's journal keeps of this file, so that a rebuild from it writes it too
        (:func:`write_from_journal_head`)."""
        return {"path": str(self.path.absolute()), "start_time": self.started.strftime(_TIME_FORMAT),
                "devices": self.devices, "earlier": self.earlier, "earlier_wrong": self.earlier_wrong,
                "earlier_busbw": list(self.earlier_busbw)}

    def release(self) -> None:
        """Remove the file when the run refused to start: it holds only the placeholder."""
        if not self.begun:
            self.path.unlink(missing_ok=True)

    def write(self, result: RunResult, finished: bool = False) -> None:
        """Write the records ``result`` holds (a result not streamed through a journal)."""
        try:
            write_atomic(self.path, self.chunks(result, (r.to_dict() for r in result.records), finished))
        except OSError as exc:
            raise EnvironmentFault(f"cannot write {self.path}: {exc.strerror or exc}") from None


def write_from_journal_head(head: dict[str, Any], records: Iterable[dict[str, Any]]) -> None:
    """Rewrite the -J file a dead run's journal names (its first line ``head``, cut short as the caller says) with
    every record journaled: rank 0 rewrote it only now and then (:mod:`pybench.measure.result_journal`)."""
    from pybench.measure.result_journal import CSV_KEY, NCCL_TESTS_KEY
    from pybench.measure.results import RunResult

    entry = head[NCCL_TESTS_KEY]
    result = RunResult.from_dict({**{k: v for k, v in head.items() if k not in (CSV_KEY, NCCL_TESTS_KEY)},
                                  "records": list(records)}, "journal")
    writer = NcclTestsJsonWriter(Path(entry["path"]), resumed=entry)
    write_atomic(writer.path, writer.chunks(result, (r.to_dict() for r in result.records)))
