"""``-J FILE``: a run written in nccl-tests' own JSON layout (its version 2), for tools that read it.

pybench's own schema, with raw samples, stays under ``--json``. This file holds what
nccl-tests' ``-J`` holds: ``version``, ``start_time``, ``args``, ``env``,
``nccl_version``, ``config``, one ``results`` entry per size with ``out_of_place`` and
``in_place`` objects (``time`` in us, ``alg_bw``, ``bus_bw``, ``nwrong``; every backend
measures both, as nccl-tests does; null for a block not measured, ``nwrong`` null where nothing was
checked), ``out_of_bounds``,
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
import os
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

from pybench.errors import EnvironmentFault
from pybench.io.files import json_text, write_atomic
from pybench.measure.job import record_nccl_tests_claim
from pybench.measure.nccl_tests_document import (
    FILE_VERSION,
    TIME_FORMAT,
    EarlierTests,
    document_chunks,
    encoded_entries,
)
from pybench.measure.results import RunResult

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


NOT_STARTED = "no size measured: the run stopped before this test began, or it has not begun yet"


class NcclTestsJsonWriter:
    """Rank 0's -J file: claimed at the start, rewritten with the result files (from their journal:
    :meth:`pybench.measure.results.OutputFiles.also_write`), closed at the end. Tests that name one file (``-d
    all``) share one writer: the file holds each test's rows after those of the tests before it."""

    def __init__(self, path: Path, command: Iterable[str] = ()) -> None:
        self.asked = path  # (the name asked for: tests that share it share this file)
        self.path = claim_path(path)
        self.started = _dt.datetime.now()
        self.devices: list[dict[str, Any]] = []  # config.devices, one per rank (the runner's Rank lines)
        self.begun = False  # a document of the run itself was written (not only the placeholder)
        self.tests, self.tests_done = 1, 0
        self.earlier = EarlierTests()
        record_nccl_tests_claim(self.path)
        # The name is held from the start (the next run takes path.0); until its first sizes land it holds a
        # valid document that says so, so that a run stopped before this test began leaves no empty file.
        try:
            write_atomic(self.path, json_text({"version": FILE_VERSION, "start_time": self.started.strftime(
                TIME_FORMAT), "args": list(command), "results": [], "errors": [NOT_STARTED]}).encode())
        except OSError as exc:
            raise EnvironmentFault(f"cannot write {self.path}: {exc.strerror or exc}") from None

    def chunks(self, result: RunResult, records: Iterable[dict[str, Any]], finished: bool = False) -> Iterator[bytes]:
        """The document, streamed: ``records`` are every record of ``result`` (as dicts), in order, after the
        rows of the tests before it in this file."""
        self.begun = True
        last = self.tests_done + 1 >= self.tests  # (the file's end_time: once its last test has ended)
        return document_chunks(_meta(result), result.tally(), self.started,
                               _dt.datetime.now() if finished and last else None, self.devices, self.earlier,
                               encoded_entries(records, bool(result.options.get("in_place"))))

    def test_done(self, result: RunResult, records: Iterable[dict[str, Any]]) -> None:
        """``result``'s test ended (its records, as dicts, read only where another test follows in this file): the
        next test's document holds its rows first."""
        self.tests_done += 1
        if self.tests_done < self.tests:
            self.earlier.add(result.tally(), encoded_entries(records, bool(result.options.get("in_place"))))

    def journal_entry(self) -> dict[str, Any]:
        """What the run's journal keeps of this file, so that a rebuild from it writes it too
        (:func:`pybench.measure.nccl_tests_document.rewrite`)."""
        return {"path": str(self.path.absolute()), "start_time": self.started.strftime(TIME_FORMAT),
                "devices": self.devices, "earlier": self.earlier.to_dict()}

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


def _meta(result: RunResult) -> dict[str, Any]:
    """The fields of ``result`` the document's head reads, as its JSON holds them."""
    return {"options": result.options, "environment": result.environment, "command": result.command,
            "backend": result.backend, "timing": result.timing, "hosts": result.hosts, "cut_short": result.cut_short}


def nccl_tests_document(result: RunResult, started: _dt.datetime, ended: _dt.datetime | None,
                        devices: list[dict[str, Any]] | None = None) -> dict[str, Any]:
    """``result`` (the records it holds) as nccl-tests' JSON document (``ended`` None: the run is still going);
    ``devices``: its ranks' ``config.devices`` entries, where known."""
    return json.loads(b"".join(document_chunks(
        _meta(result), result.tally(), started, ended, devices or [], EarlierTests(),
        encoded_entries((r.to_dict() for r in result.records), bool(result.options.get("in_place"))))))
