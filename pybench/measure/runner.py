"""One rank's run of one or more benchmarks: agree that the run can start, then
measure size by size; rank 0 prints rows and journals every size (rewriting the
result files at growing intervals), so a crash loses nothing already measured.
No rank keeps its records: each keeps only their tally, so memory stays flat
however many sizes a sweep has.
"""

from __future__ import annotations

import datetime as _dt
import os
import sys
from collections import Counter
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from pybench.collectives import NCCL_TESTS_PROGRAMS
from pybench.errors import EnvironmentFault, PyBenchError, UsageError
from pybench.measure.backends import Backend, get_backend
from pybench.measure.benchmark import BenchConfig, check_device_memory, check_memory, env_flag, run_sizes
from pybench.measure.envinfo import environment
from pybench.measure.launch import PROGRESS, register_rank, report_status
from pybench.measure.nccl_tests_json import NcclTestsJsonWriter
from pybench.measure.nccl_tests_preamble import config_line, device_entries, rank_lines
from pybench.measure.output_relay import PROGRESS_MARK
from pybench.measure.peer_loss import leave_after_peer_loss, peer_lost
from pybench.measure.rank_devices import CPU_DEVICE, RankDevice, gather_rank_devices
from pybench.measure.results import OutputFiles, RunResult, SizeRecord
from pybench.measure.table import average_busbw, footer_lines, header_lines, min_bw_failed, row_line
from pybench.measure.type_table import TypeTable
from pybench.sizes import format_size

# Longer than any run: a timeout from here up (inf included) means "never" (the native
# deadline is int64 nanoseconds, which overflows near 9.2e9 s).
NEVER_S = 1e9


def watchdog_seconds(timeout_s: float) -> float:
    """The watchdog's timeout for ``timeout_s``: 0 (off) for 0, NaN, huge or infinite values."""
    return timeout_s if 0 < timeout_s < NEVER_S else 0.0


class _OutputFailed(Exception):
    """Rank 0 could not write a result file; every rank stops after agreeing on it."""

    def __init__(self, error: PyBenchError | None) -> None:
        super().__init__(str(error or "rank 0 could not write the result files"))
        self.exit_code = error.exit_code if error is not None else EnvironmentFault.exit_code


@dataclass(frozen=True)
class RunPlan:
    config: BenchConfig
    outputs: OutputFiles
    min_busbw_gbps: float | None = None  # gate for scripts: exit 1 when the average busbw is below 0.9 x this
    size_rounding: dict[str, Any] | None = None  # what fit_plans changed, for the header and the file
    stats_columns: bool = False  # pybench's p5/p95/iters/ci columns after nccl-tests' 13
    nccl_tests_json: Path | None = None  # -J: nccl-tests' own JSON layout, beside pybench's --json
    flag_notes: tuple[str, ...] = ()  # what nccl-tests' flags taken but not used say (rank 0, once per run)

    @property
    def rounding_note(self) -> str | None:
        return None if self.size_rounding is None else str(self.size_rounding["note"])


def check_memory_for(backend: str, cfg: BenchConfig, world: int, ranks_on_host: int,
                     gpus: list[int] | None = None) -> None:
    """Host memory for host-buffer backends; for nccl, device memory of the smallest GPU used (``gpus``: all)."""
    if backend != "nccl":
        check_memory(cfg, world, ranks_on_host)
        return
    from pybench.measure.backends.nccl import gpu_probe
    devices = [d for d in gpu_probe().get("devices", []) if gpus is None or d["index"] in gpus]
    if devices:
        check_device_memory(cfg, world, min(int(d["total_memory_bytes"]) for d in devices))


def fit_plans(plans: list[RunPlan], world: int, backend: str, ranks_on_host: int,
              gpus: list[int] | None = None) -> list[RunPlan]:
    """Every plan ready to run at ``world`` on ``backend``, or a PyBenchError (one line) before anything starts.

    Sizes of collectives that split by rank are rounded down as nccl-tests does
    (BenchConfig.fit_to_world; the plan keeps what changed in ``size_rounding``),
    then validated (count limit of this backend) and checked against memory.
    """
    ready = []
    for plan in plans:
        cfg, rounded = plan.config.fit_to_world(world)
        cfg.validate(world, single_rank_ok=backend == "nccl", backend=backend)
        check_memory_for(backend, cfg, world, ranks_on_host, gpus)
        ready.append(replace(plan, config=cfg, size_rounding=rounded.record(cfg.benchmark)))
    return ready


def _say(text: str) -> None:
    print(text, flush=True)


class _Progress:
    """A one-line progress indicator on stderr, only when a person is watching a terminal.

    Under pybench's own launcher the ranks' stderr is a pipe, so rank 0 sends the
    progress text in band on stdout (PROGRESS_MARK lines) and the parent, which
    owns the terminal, draws it; being in the same stream as the table rows, it is
    always cleared before the next row appears.
    """

    def __init__(self, mode: str, total: int, label: str):
        self.mode, self.total, self.label, self.done = mode, total, label, 0  # mode: "", "tty" or "relay"

    def _show(self, text: str) -> None:
        if self.mode == "tty":
            sys.stderr.write(f"\r\033[K{text}")
            sys.stderr.flush()
        elif self.mode == "relay":
            print(f"{PROGRESS_MARK}{text}", flush=True)

    def start(self, size: int) -> None:
        self._show(f"{self.label}: [{self.done + 1}/{self.total}] measuring {format_size(size)} ...")

    def step(self) -> None:
        self.done += 1
        self._show("")


def _check_host_names(hosts: list[str]) -> None:
    """Each host name one printable word (at most 255 characters, as a DNS name): the table's Rank lines, its
    world line and nccl-tests' readers of them take the word after ' on '; a newline would forge lines."""
    for host in sorted(set(hosts)):
        if not host or len(host) > 255 or any(c.isspace() or not c.isprintable() for c in host):
            raise UsageError(f"host name {host[:80]!r} is not one printable word of at most 255 characters (set "
                             f"by PYBENCH_HOSTNAME or the launcher?); give each host a name without spaces or "
                             f"control characters")


def run_as_rank(plans: list[RunPlan], argv: list[str], force: bool, backend_name: str = "mpi",
                timeout_s: float = 30.0) -> int:
    """Entry point of every rank; returns this process's exit code."""
    backend = get_backend(backend_name)
    set_setup_timeout = getattr(backend, "set_setup_timeout", None)  # NCCL: communicator set-up has a deadline
    if set_setup_timeout is not None:
        set_setup_timeout(watchdog_seconds(timeout_s))
    info = backend.start()
    register_rank()  # under pybench's own launcher: die with it, leave nothing behind
    rank, world = info["rank"], info["world_size"]
    is_root = rank == 0
    current = _CurrentRun()
    backend.watch(watchdog_seconds(timeout_s), current.cut_short if is_root else None)

    # Validation runs on every rank; ranks agree before anyone allocates or opens a file.
    error: PyBenchError | None = None
    claimed: list = []
    nccl_json: dict[int, NcclTestsJsonWriter] = {}
    try:
        _check_host_names(info["hosts"])
        plans = fit_plans(plans, world, backend.name, info["local_size"])
        for k, plan in enumerate(plans):
            if is_root:
                claimed += plan.outputs.claim(force)
                plan.outputs.journal_when_alone()  # one-process NCCL: no launcher, still a journal and a guard
                if plan.nccl_tests_json is not None:  # one file for the tests that name one (-d all), as nccl-tests
                    writer = next((w for w in nccl_json.values() if w.asked == plan.nccl_tests_json), None)
                    if writer is None:
                        writer = NcclTestsJsonWriter(plan.nccl_tests_json, ["pybench", *argv])
                    else:
                        writer.tests += 1
                    nccl_json[k] = writer
                    plan.outputs.also_write(writer)
    except PyBenchError as exc:
        error = exc
    any_error, root_error = backend.agree_max([int(error is not None), int(is_root and error is not None)])
    if any_error:
        OutputFiles.release(claimed)
        for writer in nccl_json.values():
            writer.release()
        if error is not None and (is_root or not root_error):
            prefix = "" if is_root else f"rank {rank} ({info['host']}): "
            print(f"pybench: error: {prefix}{error}", file=sys.stderr, flush=True)
        code = error.exit_code if error is not None else 2
        return report_status(code, is_root)
    if is_root:  # once per run, whichever way the ranks were started (the stand-alone parent stays quiet)
        for note in dict.fromkeys(n for plan in plans for n in plan.flag_notes):
            print(f"pybench: note: {note}", file=sys.stderr, flush=True)
        for plan in plans:
            if plan.rounding_note:
                print(f"pybench: note: {plan.rounding_note}", file=sys.stderr, flush=True)

    env = environment(include_gpu=backend.name == "nccl") if is_root else {}
    if is_root and hasattr(backend, "run_metadata"):
        env["backend"] = backend.run_metadata()  # GPU models, driver, NCCL, links between GPU pairs
    hosts = dict(Counter(info["hosts"]))
    collective = not plans[0].config.is_p2p
    devices = gather_rank_devices(backend, info) if collective else []  # every rank takes part
    # -d all: one table for every type, as nccl-tests prints it
    table = TypeTable([p.config.dtype for p in plans], plans[0].min_busbw_gbps) if collective else None
    preamble = _Preamble(devices, info["host"], sorted({s for p in plans for s in p.config.sizes}), table)
    for writer in nccl_json.values():
        writer.devices = device_entries(devices)
    worst = 0
    try:
        shared = table is not None and len(plans) > 1
        for k, plan in enumerate(plans):
            # one table: every -J file is named above its one header
            named = list({id(w): w for j, w in nccl_json.items() if (k == 0 if shared else j == k)}.values())
            code = _run_one(backend, plan, info, hosts, env, argv, current, nccl_json.get(k), preamble,
                            [f"# Writing JSON output to {w.path}" for w in named], k == 0 or not shared)
            worst = max(worst, code)
            if code >= 2:
                break  # bad input or a write that failed: the next test would fail the same way
        else:
            worst = max(worst, _end_table(table, is_root))
    except RuntimeError as exc:  # torch.distributed's, when a peer rank died: one line, not its traceback
        fault = peer_lost(exc)
        if fault is None:
            raise
        current.cut_short(str(fault))
        kept = str(current.outputs.json_path or "") if is_root and current.outputs is not None else ""
        return leave_after_peer_loss(fault, rank, info["host"], kept)
    return report_status(worst, is_root)


class _CurrentRun:
    """What rank 0 is writing now, so a timeout can mark it cut short and save it."""

    def __init__(self) -> None:
        self.result: RunResult | None = None
        self.outputs: OutputFiles | None = None

    def cut_short(self, reason: str) -> None:
        if self.result is None or self.outputs is None:
            return
        self.result.cut_short = reason
        _Saver(None, self.outputs, True).best_effort(self.result)
        _say(f"# Run cut short: {reason}; {self.result.size_count} size(s) kept")


class _Saver:
    """Rank 0 rewrites the result files; after each write every rank learns whether it worked,
    so a full disk stops the whole job in step instead of leaving ranks waiting in a collective."""

    def __init__(self, backend: Backend | None, outputs: OutputFiles, is_root: bool) -> None:
        self.backend, self.outputs, self.is_root = backend, outputs, is_root
        self.error: PyBenchError | None = None

    def save(self, result: RunResult) -> None:
        """Write (rank 0), agree that it worked, then drop the records held (every rank): rank 0's
        journal holds them now, and the summary needs only their tally, so memory stays flat."""
        if self.is_root:
            try:
                self.outputs.write(result)
            except PyBenchError as exc:
                self.error = exc
        assert self.backend is not None
        if self.backend.agree_max([int(self.error is not None)])[0]:
            raise _OutputFailed(self.error)
        result.spill()

    def best_effort(self, result: RunResult) -> None:
        """Write without raising: the files already hold every size before this one."""
        if self.is_root:
            try:
                self.outputs.write(result)
            except (PyBenchError, OSError):
                pass


def _link_class(cfg: BenchConfig, hosts_by_rank: list[str]) -> str:
    involved = hosts_by_rank[:2] if cfg.is_p2p else hosts_by_rank
    return "intra-node" if len(set(involved)) == 1 else "inter-node"


def runs_in_place(backend: str, benchmark: str) -> bool:
    """Whether ``backend`` runs ``benchmark`` on one buffer only, so that the table prints its one
    measurement in nccl-tests' in-place block: nccl with --in-place. (Every backend otherwise measures
    out of place first; mpi, nccl and torch then in place too, where the collective has that form.)"""
    from pybench.measure.backends.nccl import IN_PLACE_ENV
    return backend == "nccl" and env_flag(IN_PLACE_ENV)


def _new_result(backend: Backend, plan: RunPlan, info: dict, hosts: dict[str, int], env: dict,
                argv: list[str]) -> RunResult:
    cfg = plan.config
    stop = cfg.stop
    return RunResult(
        benchmark=cfg.benchmark, backend=backend.name, dtype="int8" if cfg.is_p2p else cfg.dtype, redop=cfg.redop,
        timing=cfg.timing, world_size=info["world_size"], hosts=hosts, link_class=_link_class(cfg, info["hosts"]),
        environment=env,
        options={"precision": stop.precision, "iters": stop.fixed_iters, "min_iters": stop.min_iters,
                 "max_iters": stop.max_iters, "time_budget_s": stop.budget_s, "warmup": cfg.warmup,
                 "check": cfg.check_iters, "root": cfg.root, "window": cfg.window if cfg.is_p2p else None,
                 "batch_target_s": cfg.batch_target_s, "huge_pages": cfg.huge_pages,
                 "min_busbw_gbps": plan.min_busbw_gbps, "stats_columns": plan.stats_columns,
                 "in_place": runs_in_place(backend.name, cfg.benchmark),
                 "buffer_allocation": backend.describe_buffers(cfg),
                 # the sweep asked for (nccl-tests' -b/-e), which a run cut short does not reach
                 "requested_bytes": [int(min(cfg.sizes)), int(max(cfg.sizes))] if cfg.sizes else None,
                 **({"size_rounding": plan.size_rounding, "notes": [plan.rounding_note]}
                    if plan.size_rounding else {})},
        command=["pybench", *argv], started_at=_dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"))


@dataclass(frozen=True)
class _Preamble:
    """What the table's header says beyond one result: the ranks' devices, every size planned, the types."""

    devices: list[RankDevice]
    local_host: str
    sizes: list[int]
    table: TypeTable | None

    @property
    def gpus_per_process(self) -> int:
        """nccl-tests' nGpus: the GPUs one process of rank 0's host drives (0: CPU ranks)."""
        here = [d for d in self.devices if d.host == self.local_host]
        gpus = sum(1 for d in here if d.device != CPU_DEVICE)
        return gpus // max(1, len({d.pid for d in here}))


def _header(result: RunResult, note: str | None, preamble: _Preamble) -> list[str]:
    """The table header: nccl-tests' config line under pybench's title, the size-rounding note (if any) and
    nccl-tests' Rank lines above the column names."""
    table = preamble.table
    lines = header_lines(result, table.dtypes if table is not None and len(table.dtypes) > 1 else None)
    at = lines.index("#") if "#" in lines else len(lines)
    if note:
        lines.insert(at, f"# note: {note}")
        at += 1
    if preamble.devices:  # (nccl-tests from 2.17 names its test first)
        lines[1:1] = [f"# Collective test starting: {NCCL_TESTS_PROGRAMS[result.benchmark]}",
                      config_line(result, preamble.sizes, preamble.gpus_per_process)]
        at += 1
        lines[at + 2:at + 2] = [*rank_lines(preamble.devices), "#"]
    return lines


def _end_table(table: TypeTable | None, is_root: bool) -> int:
    """After the last type of a -d all table: its one footer (rank 0) and the gate on its one average."""
    if table is None or len(table.dtypes) < 2 or not table.results:
        return 0
    failed = table.gate_failed()
    if is_root:
        for line in table.footer_lines():
            _say(line)
        if failed:
            print(f"pybench: error: the average bus bandwidth {table.average_busbw():g} GB/s over every type is "
                  f"below 0.9 x the minimum {table.min_busbw_gbps:g} GB/s (--min-busbw or NCCL_TESTS_MIN_BW, gated "
                  "as nccl-tests gates)", file=sys.stderr, flush=True)
    return 1 if failed else 0


def _run_one(backend: Backend, plan: RunPlan, info: dict, hosts: dict[str, int], env: dict, argv: list[str],
             current: _CurrentRun, nccl_json: NcclTestsJsonWriter | None = None, preamble: _Preamble | None = None,
             json_lines: tuple[str, ...] | list[str] = (), heads: bool = True) -> int:
    """One test; ``heads`` False: its rows continue the table of the type before (-d all)."""
    cfg = plan.config
    preamble = preamble or _Preamble([], info["host"], list(cfg.sizes), None)
    table = preamble.table
    shared = table is not None and len(table.dtypes) > 1
    is_root = info["rank"] == 0
    result = _new_result(backend, plan, info, hosts, env, argv)
    if preamble.devices:  # every type's -J file says what the one header's nGpus says
        result.options["gpus_per_process"] = preamble.gpus_per_process
    mode = "" if not is_root else "relay" if env_flag(PROGRESS) else "tty" if sys.stderr.isatty() else ""
    progress = _Progress(mode, len(cfg.sizes), cfg.benchmark)
    saver = _Saver(backend, plan.outputs, is_root)

    def on_record(record: SizeRecord) -> None:
        progress.step()
        result.records.append(record)
        if is_root:
            _say(row_line(record))
        saver.save(result)
        if result.size_count < len(cfg.sizes):
            progress.start(cfg.sizes[result.size_count])

    try:
        if is_root:
            for line in json_lines:  # nccl-tests' line: which name was free
                _say(line)
            if heads:
                for line in _header(result, plan.rounding_note, preamble):
                    _say(line)
            current.result, current.outputs = result, plan.outputs
        saver.save(result)
        progress.start(cfg.sizes[0])
        # A backend that can (mpi, nccl, torch) measures each collective size in place too, as nccl-tests does.
        in_place_too = None if cfg.is_p2p else getattr(backend, "make_in_place_bench", None)
        run_sizes(cfg, info["world_size"], on_record, make_bench=backend.make_bench, read_huge_pages=is_root,
                  make_in_place=in_place_too)
    except _OutputFailed as exc:
        # A full disk or any write error: one line, exit 3, and the cause in the file if it still fits.
        result.cut_short = f"stopped: {exc}"
        saver.best_effort(result)
        if is_root:
            print(f"pybench: error: {exc}", file=sys.stderr, flush=True)
        return exc.exit_code
    except KeyboardInterrupt:
        result.cut_short = "interrupted (SIGINT)"
        saver.best_effort(result)
        if is_root:
            _say(f"# Run cut short: {result.cut_short}; {result.size_count} size(s) kept")
        os._exit(130)
    except PyBenchError as exc:
        # A failure on one rank mid-sweep leaves the others inside a collective:
        # keep what was measured, say who failed, and abort the job rather than hang.
        result.cut_short = f"rank {info['rank']} ({info['host']}) failed: {exc}"
        saver.best_effort(result)
        print(f"pybench: error: rank {info['rank']} ({info['host']}): {exc}", file=sys.stderr, flush=True)
        sys.stderr.flush()
        backend.abort(1)
        raise
    result.finished = True
    code = 1 if result.total_wrong() else 0
    if min_bw_failed(result):  # recorded in this type's files; a -d all table gates its one average
        result.options["min_busbw_failed"] = True
        if not shared:
            code = 1
        if is_root and not shared:
            print(f"pybench: error: the average bus bandwidth {average_busbw(result):g} GB/s is below 0.9 x the "
                  f"minimum {plan.min_busbw_gbps:g} GB/s (--min-busbw or NCCL_TESTS_MIN_BW, gated as nccl-tests "
                  "gates)", file=sys.stderr, flush=True)
    try:
        saver.save(result)
    except _OutputFailed as exc:
        if is_root:
            print(f"pybench: error: {exc}", file=sys.stderr, flush=True)
        return exc.exit_code
    if table is not None:
        table.add(result)
    if is_root and not shared:
        for line in footer_lines(result):
            _say(line)
    return code
