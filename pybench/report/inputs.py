"""Every input a reading command takes, as pybench results: so ``compare`` and ``report`` read
what ``fit`` and ``plot`` read.

* a pybench result (``--json``): as it is;
* a log of another tool, each sweep in it one result: nccl-tests text or ``-J`` JSON, OSU,
  vTrain (through :func:`pybench.model.logs.load_measurements`). A size's samples are the
  times the log prints for it (nccl-tests: out-of-place and in-place), so a comparison of
  logs has one or two samples a size and says so in its ``n`` columns; the check is
  unknown (``#wrong`` N/A);
* a pytest-benchmark save (``.benchmarks/.../0001_*.json``) of pybench's suites: one result
  per group and dtype, each benchmark one size, its samples pytest-benchmark's raw data when
  saved with ``--benchmark-save-data``, else its median alone.
"""

from __future__ import annotations

import dataclasses
import math
from collections import defaultdict
from collections.abc import Callable
from pathlib import Path
from typing import Any

from pybench.collectives import DTYPES, busbw_factor
from pybench.errors import FileFormatError, UsageError
from pybench.io.files import MAX_JSON_BYTES, parse_json, read_bytes
from pybench.measure.results import RunResult, SizeRecord
from pybench.model.logs.log_bytes import decode_log


def _looks_like_pytest_benchmark(data: Any) -> bool:
    return isinstance(data, dict) and isinstance(data.get("benchmarks"), list) and "machine_info" in data


def _record(size: int, dtype: str, redop: str, samples: list[float], low: float | None = None,
            high: float | None = None, busbw_factor: float = 1.0) -> SizeRecord:
    samples = [s for s in samples if isinstance(s, (int, float)) and math.isfinite(s) and s > 0]
    if not samples:
        raise FileFormatError(f"size {size}: no positive time")
    ordered = sorted(samples)
    median = ordered[len(ordered) // 2] if len(ordered) % 2 else (ordered[len(ordered) // 2 - 1]
                                                                   + ordered[len(ordered) // 2]) / 2
    lo = low if low is not None and math.isfinite(low) else ordered[0]
    hi = high if high is not None and math.isfinite(high) else ordered[-1]
    algbw = size / median / 1e9
    return SizeRecord(size_bytes=size, count=size // DTYPES.get(dtype, 1), dtype=dtype, redop=redop, root=-1,
                      time_s=median, time_mean_s=sum(samples) / len(samples), time_min_s=ordered[0],
                      time_max_s=ordered[-1], time_p5_s=lo, time_p95_s=hi, time_p99_s=hi, time_ci_low_s=median,
                      time_ci_high_s=median, algbw_gbps=algbw, busbw_gbps=algbw * busbw_factor, wrong=0,
                      check_iters=0, iterations=len(samples), ops_per_sample=1, precision_met=True,
                      stop_reason="fixed", wall_s=0.0, samples_s=samples)


def _result(benchmark: str, backend: str, dtype: str, redop: str, world: int | None, link: str | None,
            source: str, path: Path, records: list[SizeRecord], device: str = "") -> RunResult:
    environment = {"source": source, "path": str(path), **({DEVICE: device} if device else {})}
    return RunResult(benchmark=benchmark, backend=backend or "?", dtype=dtype, redop=redop or "none",
                     timing="batched", world_size=world or 0, hosts={}, link_class=link or "unknown",
                     environment=environment,
                     options={IMPORTED: source, "buffer_allocation": f"not recorded ({source} file)"},
                     command=[], started_at="", records=records, finished=True)


DEVICE = "device"
"""The environment key of the GPU model another tool's log names for its ranks (nccl-tests' Rank lines)."""

IMPORTED = "imported_from"
"""The option that marks a result read from another tool's file: no check ran, and no precision is pybench's."""


def imported_from(result: RunResult) -> str | None:
    """The tool whose file ``result`` was read from (None for pybench's own runs)."""
    source = result.options.get(IMPORTED)
    return str(source) if source else None


Adjust = Callable[[Any], Any]
"""What ``--nodes`` does to a log's MeasurementSet (``pybench fit``'s rule): records the node count it ran on, or
refuses a count its own record contradicts."""


def _from_log(path: Path, world: int | None = None, adjust: Adjust | None = None,
              collective: str | None = None) -> list[RunResult]:
    from pybench.model.logs import load_measurements
    results = []
    for m in load_measurements(path, collective=collective, world_size=world):
        m = adjust(m) if adjust is not None else m
        factor = busbw_factor(m.collective, m.world_size, math.nan)
        records = []
        for k, size in enumerate(m.size_bytes):
            samples = [float(m.time_s[k])]
            if m.time_in_place_s is not None and math.isfinite(m.time_in_place_s[k]):
                samples.append(float(m.time_in_place_s[k]))
            low = float(m.time_low_s[k]) if m.time_low_s is not None else None
            high = float(m.time_high_s[k]) if m.time_high_s is not None else None
            if int(size) > 0:
                records.append(_record(int(size), m.dtype, m.redop, samples, low, high, factor))
        result = _result(m.collective, m.backend, m.dtype, m.redop, m.world_size, m.link_class, m.source, path,
                         records, m.device)
        results.append(dataclasses.replace(result, options={**result.options, IMPORT_NOTES: list(m.notes)}))
    return results


IMPORT_NOTES = "import_notes"
"""The option that holds what reading another tool's log said (sizes its own check failed, rows skipped ...)."""


def import_notes(result: RunResult) -> list[str]:
    """What reading ``result``'s log said ([] for pybench's own runs)."""
    notes = result.options.get(IMPORT_NOTES)
    return [str(n) for n in notes] if isinstance(notes, list) else []


def failed_check(result: RunResult) -> str:
    """The note of a log whose own check counted wrong values ('' where none did)."""
    from pybench.model.logs.nccl_tests_failure import WRONG_VALUES
    return next((n for n in import_notes(result) if WRONG_VALUES in n), "")


def refuse_unknown_worlds(results: list[RunResult], path: str | Path) -> list[RunResult]:
    """``results``, or a FileFormatError where a log does not say the rank count its bus bandwidth needs (a
    report's headline; a comparison of times does without it)."""
    for r in results:
        if not r.world_size and imported_from(r) and math.isnan(busbw_factor(r.benchmark, None, math.nan)):
            raise FileFormatError(f"{path}: the log does not say how many ranks ran its {r.benchmark}, and a report's "
                                  f"bus bandwidth depends on it; give --world N (one per input, as `pybench fit` "
                                  f"takes it; --nodes N for the nodes they ran on), or compare its times with "
                                  f"`pybench compare`")
    return results


def _from_pytest_benchmark(data: dict, path: Path, world: int | None = None) -> list[RunResult]:
    from pybench.io.foreign_schemas import PytestBenchmarkSchema, validate_foreign
    validate_foreign(data, PytestBenchmarkSchema, str(path),  # every benchmark one of pybench's, typed
                     "not one of pybench's: only pybench's suites (benchmarks/) can be read")
    groups: dict[tuple, list[SizeRecord]] = defaultdict(list)
    for bench in data["benchmarks"]:
        info, stats = bench["extra_info"], bench["stats"]
        samples: list[float] = stats.get("data") or [stats["median"]]
        key = (str(info.get("collective") or bench.get("group") or "?"), str(info.get("backend") or "?"),
               str(info.get("dtype") or "float32"), str(info.get("redop") or ""), info.get("world_size") or world)
        groups[key].append(_record(info["size_bytes"], key[2], key[3], samples,
                                   busbw_factor=busbw_factor(key[0], key[4], math.nan)))
    if not groups:
        raise FileFormatError(f"{path}: a pytest-benchmark save with no benchmarks")
    return [_result(c, b, d, r, w if isinstance(w, int) else None, None, "pytest-benchmark", path,
                    sorted(recs, key=lambda x: x.size_bytes)) for (c, b, d, r, w), recs in groups.items()]


def load_results(path: str | Path, world: int | None = None, adjust: Adjust | None = None,
                 collective: str | None = None) -> list[RunResult]:
    """Every run a file holds, as pybench results; a FileFormatError (one line) when it holds none.

    ``world`` is the rank count of a log (or a pytest-benchmark group) that does not say it, as ``pybench fit
    --world`` (a pybench result says its own); ``adjust`` is applied to each of the file's measurement sets, as
    ``fit --nodes`` applies the node count (a pybench result that recorded other hosts is refused by it);
    ``collective`` names the collective of a log that does not say it, as ``fit --collective``."""
    from pybench.model.logs.rccl_tests_jsonl import looks_like_json_lines
    from pybench.report.plot import load_checked_result

    p = Path(path)
    text = decode_log(read_bytes(p, MAX_JSON_BYTES), p)  # as `fit` reads it: UTF-16 too; compressed files named
    if text.lstrip().startswith("{") and not looks_like_json_lines(text):  # rccl-tests' lines are a log
        data = parse_json(text, str(p))
        if isinstance(data, dict) and "schema" in data:
            result = load_checked_result(p)
            if adjust is not None or world is not None:  # checked as fit checks them; the result's own record stands
                from pybench.model.logs import load_measurements
                for m in load_measurements(p, world_size=world):
                    if adjust is not None:
                        adjust(m)
            return [result]
        if _looks_like_pytest_benchmark(data):
            return _from_pytest_benchmark(data, p, world)
    return _from_log(p, world, adjust, collective)


def sweep_key(result: RunResult) -> tuple[str, str, str, int | None]:
    """What makes two sweeps comparable: the benchmark, the element type, the reduction and the rank count."""
    return result.benchmark, result.dtype, result.redop, result.world_size


def paired_results(path_a: str | Path, path_b: str | Path) -> tuple[list[tuple[RunResult, RunResult]], list[str]]:
    """The runs of two files paired for comparison: the one run of each, or, when a file holds
    several sweeps (a pytest-benchmark save, an ``-d all`` log, logs of several runs), every sweep found in both
    by :func:`sweep_key`; with notes naming the sweeps left unpaired. A UsageError (one line) when none pairs,
    or when a file holds two sweeps of one key (a rerun appended to a log): which one to compare is the user's."""
    runs_a, runs_b = load_results(path_a), load_results(path_b)
    if len(runs_a) == 1 and len(runs_b) == 1:
        return [(runs_a[0], runs_b[0])], []
    for path, runs in ((path_a, runs_a), (path_b, runs_b)):
        keys = [sweep_key(r) for r in runs]
        twice = next((k for k in keys if keys.count(k) > 1), None)
        if twice is not None:
            raise UsageError(f"{path} holds {keys.count(twice)} sweeps of {_key_label(twice)} (several runs in one "
                             f"file): split it so that each side holds the run to compare")
    by_key = {sweep_key(r): r for r in runs_b}
    pairs = [(a, by_key[sweep_key(a)]) for a in runs_a if sweep_key(a) in by_key]
    if not pairs:
        raise UsageError(f"{path_a} and {path_b} hold no sweep of the same collective, type, reduction and rank "
                         "count; compare sweeps of one operation")
    paired = {sweep_key(a) for a, _ in pairs}
    notes = [f"{path}: its sweep of {_key_label(sweep_key(r))} has none to pair in the other file: not compared"
             for path, runs in ((path_a, runs_a), (path_b, runs_b)) for r in runs if sweep_key(r) not in paired]
    return pairs, notes


def _key_label(key: tuple[str, str, str, int | None]) -> str:
    benchmark, dtype, redop, world = key
    return f"{benchmark} {dtype}" + (f" {redop}" if redop not in ("", "none") else "") + \
        (f" at {world} ranks" if world else "")


def load_one_result(path: str | Path) -> RunResult:
    """The one run of a file; a log with several sweeps is refused in one line naming them."""
    runs = load_results(path)
    if len(runs) > 1:
        names = ", ".join(f"{r.benchmark} {r.dtype}" + (f" {r.redop}" if r.redop != "none" else "") for r in runs)
        raise UsageError(f"{path} holds {len(runs)} sweeps ({names}); compare needs one each side: split the log, "
                         "or use `pybench report`, which shows them all")
    return runs[0]
