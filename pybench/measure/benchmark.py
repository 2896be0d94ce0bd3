"""What one rank does for one benchmark: validate, then for each size build the
native bench, warm up, check, time until the stop rule says enough, and record.

Python decides how many samples to take; C++ owns everything inside the timed
region and returns raw samples already max-reduced over ranks, so every rank
sees the same numbers and takes the same decisions.
"""

from __future__ import annotations

import math
import os
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import Protocol

from pybench.collectives import DTYPES, get_collective
from pybench.errors import SizeError, UsageError
from pybench.io.memory import address_space_left, check_budget, host_memory_left
from pybench.measure.backends.selection import RoundedSizes, nccl_count_limit, round_sizes_for_world
from pybench.measure.p2p_tests import P2P_TESTS
from pybench.measure.results import SizeRecord
from pybench.measure.stats import SampleStats
from pybench.measure.stopping import Decision, StopRule
from pybench.sizes import format_size

# Documented ranges (README, "Options"): untimed and checked iterations per size, and
# messages in flight in the p2p bandwidth tests (OSU uses 64).
MAX_WARMUP = 1_000_000
MAX_CHECK = 10_000
MAX_WINDOW = 65_536
#: MPI counts are C ``int``; torch's gloo is held to the same limit (not verified beyond it).
MPI_MAX_COUNT = 2**31 - 1
#: The NCCL harness rotates each buffer over a pool of at least this many bytes (csrc/cuda/nccl_harness.hpp).
NCCL_POOL_BYTES = 256 << 20
#: Open MPI 5's shared-memory transport sends messages up to this size eagerly (btl_sm_eager_limit).
MPI_EAGER_BYTES = 4 << 10
#: Below it a message in flight costs about its payload and a fragment header; above it, about twice
#: max(size, this): on this project's 2-core host, one rank's peak RSS grew by 98 KB per message in
#: flight for 8 KiB (p2p --test bw --window 4096) and 128 KB for 64 KiB, against 1.5 KB for 1 KiB.
MPI_RENDEZVOUS_FLOOR_BYTES = 64 << 10
#: Transparent huge pages are 2 MiB; the native buffers ask for them from this size (csrc/common/buffers.hpp).
HUGE_PAGE_BYTES = 2 << 20


def max_count(backend: str) -> int:
    """Largest element count one operation of ``backend`` takes: NCCL's are ``size_t``, MPI's ``int``."""
    return nccl_count_limit() if backend == "nccl" else MPI_MAX_COUNT


class NativeBench(Protocol):
    """What the C++ CollectiveBench and P2PBench have in common."""

    def warmup(self, n: int) -> None: ...
    def check(self, iters: int) -> int: ...
    def measure(self, n_samples: int, ops_per_sample: int) -> tuple[list[float], float]: ...


@dataclass(frozen=True)
class BenchConfig:
    """One benchmark over a list of sizes, with how to measure each size."""

    benchmark: str  # a collective name or p2p_latency / p2p_bw / p2p_bibw
    sizes: tuple[int, ...]
    dtype: str = "float32"
    op: str = "sum"
    root: int = 0
    timing: str = "batched"  # or "per-op"; nccl also "graph", "host" and "host-graph"
    stop: StopRule = field(default_factory=StopRule)
    warmup: int = 5
    check_iters: int = 2
    window: int = 64
    batch_target_s: float = 1e-3  # batched mode: enough ops per sample to fill about this long
    huge_pages: bool = True  # transparent huge pages for buffers >= 2 MiB (numpy does the same)

    @property
    def is_p2p(self) -> bool:
        return self.benchmark.startswith("p2p_")

    @property
    def elem_bytes(self) -> int:
        return 1 if self.is_p2p else DTYPES[self.dtype]

    @property
    def redop(self) -> str:
        if self.is_p2p or not get_collective(self.benchmark).reduces:
            return "none"
        return self.op

    def validate(self, world: int, single_rank_ok: bool = False, backend: str = "mpi") -> None:
        """Raise a one-line error for anything that cannot run at this world size.

        ``single_rank_ok``: a one-GPU NCCL communicator is a real measurement (of the
        device's own copy path), unlike a one-rank MPI job. ``backend`` sets the
        element-count limit (:func:`max_count`): 2**31 - 1 except for nccl.
        """
        if self.timing not in ("batched", "per-op", "graph", "host", "host-graph"):
            raise UsageError(f"unknown timing mode {self.timing!r}; use batched, per-op, graph, host or host-graph")
        if not 0 <= self.warmup <= MAX_WARMUP or not 0 <= self.check_iters <= MAX_CHECK:
            raise UsageError(f"--warmup must be 0 to {MAX_WARMUP:,} and --check 0 to {MAX_CHECK:,}, "
                             f"got {self.warmup} and {self.check_iters}")
        if not self.sizes:
            raise SizeError("no sizes to run")
        if self.is_p2p:
            if world < 2:
                raise UsageError(f"point-to-point tests need 2 ranks, got {world}; run with --np 2")
            if not 1 <= self.window <= MAX_WINDOW:  # each message in flight holds MPI requests
                raise UsageError(f"--window must be 1 to {MAX_WINDOW}, got {self.window}")
            for s in self.sizes:  # OSU's tests run over MPI whatever the backend
                if s > MPI_MAX_COUNT:
                    raise SizeError(f"p2p size {format_size(s)} exceeds MPI's 32-bit count (2 GiB - 1 bytes); "
                                    "use smaller sizes")
            return
        coll = get_collective(self.benchmark)
        if world < (1 if single_rank_ok else coll.min_ranks):
            raise UsageError(f"{coll.name} needs at least {coll.min_ranks} ranks, got {world}; "
                             f"run with --np {coll.min_ranks} or more")
        if not 0 <= self.root < world:
            raise UsageError(f"--root {self.root} is not a rank of a world of {world}; use 0..{world - 1}")
        limit = max_count(backend)
        for s in self.sizes:
            coll.validate(s, self.elem_bytes, world, self.dtype)
            if s // self.elem_bytes > limit:
                raise SizeError(f"{coll.name}: size {format_size(s)} is {s // self.elem_bytes} {self.dtype} elements, "
                                f"over the {backend} backend's 32-bit count limit; use a larger dtype, the nccl "
                                f"backend, or sizes up to {format_size(limit * self.elem_bytes)}")

    def fit_to_world(self, world: int) -> tuple[BenchConfig, RoundedSizes]:
        """This config with its sizes rounded as nccl-tests does for collectives that split by rank.

        All-gather, reduce-scatter and all-to-all need a multiple of ranks x element size:
        each size becomes the largest such multiple not above it, and sizes below one
        element per rank are dropped (SizeError when none is left). Other benchmarks are
        returned as they are.
        """
        if self.is_p2p:
            return self, RoundedSizes(self.sizes, ())
        rounded = round_sizes_for_world(self.benchmark, self.sizes, self.elem_bytes, max(world, 1))
        return (replace(self, sizes=rounded.sizes) if rounded.changes else self), rounded

    def buffer_bytes_per_rank(self, size_bytes: int, world: int) -> int:
        if self.is_p2p:
            return 2 * size_bytes
        send, recv = get_collective(self.benchmark).buffer_bytes(size_bytes, world)
        return send + recv

    def bandwidths(self, size_bytes: int, time_s: float, world: int) -> tuple[float, float]:
        """(algbw, busbw) in GB/s (1e9 B/s) for one operation of ``size_bytes`` taking ``time_s``."""
        if time_s <= 0:
            return math.inf, math.inf
        if self.is_p2p:
            algbw = P2P_TESTS[self.benchmark[4:]].bytes_per_message_factor * size_bytes / time_s / 1e9
            return algbw, algbw
        algbw = size_bytes / time_s / 1e9
        return algbw, algbw * get_collective(self.benchmark).busbw_factor(world)


def available_memory_bytes() -> int | None:
    """Free host memory (MemAvailable and the cgroup's memory.max), or None where neither can be read."""
    return host_memory_left()


def in_flight_bytes_per_rank(cfg: BenchConfig, size_bytes: int) -> int:
    """What MPI holds for one rank's messages in flight: a p2p window test keeps ``window`` messages
    of ``size_bytes`` outstanding per direction (bibw: both), each staged by the MPI library and
    carrying its own request and fragment state; collectives keep none beyond their buffers."""
    if not cfg.is_p2p or cfg.benchmark == "p2p_latency":
        return 0
    directions = 2 if cfg.benchmark == "p2p_bibw" else 1
    if size_bytes <= MPI_EAGER_BYTES:
        per_message = size_bytes + MPI_EAGER_BYTES
    else:
        per_message = 2 * max(size_bytes, MPI_RENDEZVOUS_FLOOR_BYTES)
    return cfg.window * directions * per_message


def check_memory(cfg: BenchConfig, world: int, ranks_on_this_host: int, available: int | None = None) -> None:
    """Refuse, before allocating, sizes whose buffers and messages in flight would not fit: all ranks of
    this host against free host memory, one rank against what this process may map (ulimit -v)."""
    biggest = max(cfg.sizes)
    per_rank = cfg.buffer_bytes_per_rank(biggest, world) + in_flight_bytes_per_rank(cfg, biggest)
    window = f" with --window {cfg.window}" if in_flight_bytes_per_rank(cfg, biggest) else ""
    what = f"size {format_size(biggest)}{window}"
    remedy = "use smaller sizes" + (", a smaller --window" if window else "") + " or fewer ranks per host"
    host = available_memory_bytes() if available is None else available
    if host is not None:
        check_budget(per_rank * ranks_on_this_host, f"{what} x {ranks_on_this_host} ranks on this host", remedy,
                     available=host)
    if available is None:
        process = address_space_left()
        if process is not None:
            check_budget(per_rank, f"{what} on one rank", remedy, available=process)


def check_device_memory(cfg: BenchConfig, world: int, device_bytes: int) -> None:
    """Refuse, before allocating, sizes whose NCCL buffers (one rank per GPU) would not fit on the smallest GPU."""
    if cfg.is_p2p or device_bytes <= 0:
        return
    biggest = max(cfg.sizes)
    send, recv = get_collective(cfg.benchmark).buffer_bytes(biggest, world)
    need = max(send, NCCL_POOL_BYTES) + max(recv, NCCL_POOL_BYTES)  # each buffer rotates over a >= 256 MiB pool
    if need > 0.9 * device_bytes:
        gib = 1 << 30
        raise SizeError(f"size {format_size(biggest)} needs {need / gib:.1f} GiB of device buffers per GPU, but the "
                        f"smallest GPU has {device_bytes / gib:.1f} GiB; use smaller sizes")


def make_native_bench(cfg: BenchConfig, size_bytes: int, in_place: bool = False) -> NativeBench:
    """The C++ bench (MPI, host buffers) for one size of ``cfg``; ``in_place``: a collective on one
    buffer, called with MPI_IN_PLACE."""
    from pybench._native import core
    c = core()
    if cfg.is_p2p:
        return c.P2PBench(cfg.benchmark[4:], size_bytes, cfg.window, cfg.huge_pages)
    return c.CollectiveBench(cfg.benchmark, cfg.dtype, cfg.op, size_bytes, cfg.root, cfg.huge_pages, in_place)


def ops_per_sample(cfg: BenchConfig, bench: NativeBench) -> tuple[int, float]:
    """Batch size for this size, and the wall time spent finding it.

    Per-op mode times every operation alone. Batched mode times one operation,
    then batches enough to fill ``batch_target_s``, so the clock reads and the
    barrier before each batch are negligible.
    """
    if cfg.timing == "per-op":
        return 1, 0.0
    # every other mode: a sample is k operations (the graph modes replay them as one captured graph)
    probe, wall = bench.measure(1, 1)
    wanted = max(1, min(1000, math.ceil(cfg.batch_target_s / max(probe[0], 1e-9))))
    return cfg.stop.ops_per_sample(wanted), wall


def huge_page_fraction(cfg: BenchConfig, bench: NativeBench, size_bytes: int, world: int) -> float | None:
    """Share of this rank's buffers the kernel backs with huge pages, or None where it is not read.

    The native code reads it from /proc/self/smaps, which costs tens of milliseconds on a rank
    with MPI's mappings (more than measuring a small size with --time-budget 0.001), so it is
    read only where a buffer can hold a huge page of its own: huge pages are requested only
    for such buffers, and they are where the backing moves results.
    """
    if cfg.is_p2p:
        largest = size_bytes
    else:
        largest = max(get_collective(cfg.benchmark).buffer_bytes(size_bytes, world))
    if largest < HUGE_PAGE_BYTES:
        return None
    return getattr(bench, "huge_page_fraction", None)


def _timed(cfg: BenchConfig, bench: NativeBench) -> tuple[int, int, list[float], Decision, float]:
    """Warm up, check and time ``bench`` until the stop rule is satisfied: (wrong, ops per sample,
    samples, the stop rule's decision, wall seconds)."""
    bench.warmup(cfg.warmup)
    wrong = int(bench.check(cfg.check_iters)) if cfg.check_iters else 0
    k, elapsed = ops_per_sample(cfg, bench)
    samples: list[float] = []
    n = cfg.stop.first_chunk(k)
    while True:
        chunk, wall = bench.measure(n, k)
        samples.extend(chunk)
        elapsed += wall
        decision = cfg.stop.decide(samples, k, elapsed)
        if decision.done:
            return wrong, k, samples, decision, elapsed
        n = cfg.stop.next_chunk(len(samples), k, elapsed)


def with_in_place(cfg: BenchConfig, record: SizeRecord, bench: NativeBench, world: int) -> SizeRecord:
    """``record`` with the in-place figures of its size, measured on ``bench`` (the in-place bench)
    as the out-of-place ones were: warm-up, check, then timed under the same stop rule."""
    wrong, _, samples, _, _ = _timed(cfg, bench)
    median = SampleStats.from_samples(samples).median_s
    algbw, busbw = cfg.bandwidths(record.size_bytes, median, world)
    return replace(record, in_place_time_s=median, in_place_algbw_gbps=algbw, in_place_busbw_gbps=busbw,
                   in_place_wrong=None if wrong < 0 else wrong)  # (-1: a form whose result is not defined)


def measure_size(cfg: BenchConfig, bench: NativeBench, size_bytes: int, world: int,
                 read_huge_pages: bool = True) -> SizeRecord:
    """Warm up, check and time one size until the stop rule is satisfied.

    ``read_huge_pages``: record :func:`huge_page_fraction` (only rank 0's is kept, so the
    others skip reading it).
    """
    wrong, k, samples, decision, elapsed = _timed(cfg, bench)
    st = SampleStats.from_samples(samples)
    algbw, busbw = cfg.bandwidths(size_bytes, st.median_s, world)
    count = size_bytes // cfg.elem_bytes
    return SizeRecord(size_bytes=size_bytes, count=count, dtype="int8" if cfg.is_p2p else cfg.dtype,
                      redop=cfg.redop, root=cfg.root if cfg.benchmark == "broadcast" else -1,
                      time_s=st.median_s, time_mean_s=st.mean_s, time_min_s=st.min_s, time_max_s=st.max_s,
                      time_p5_s=st.p5_s, time_p95_s=st.p95_s, time_p99_s=st.p99_s, time_ci_low_s=st.ci_low_s,
                      time_ci_high_s=st.ci_high_s, algbw_gbps=algbw, busbw_gbps=busbw, wrong=wrong,
                      check_iters=cfg.check_iters, iterations=len(samples) * k, ops_per_sample=k,
                      precision_met=decision.precision_met, stop_reason=decision.reason, wall_s=elapsed,
                      samples_s=[float(s) for s in samples],
                      huge_page_fraction=huge_page_fraction(cfg, bench, size_bytes, world) if read_huge_pages
                      else None)


def run_sizes(cfg: BenchConfig, world: int, on_record: Callable[[SizeRecord], None],
              make_bench: Callable[[BenchConfig, int], NativeBench], read_huge_pages: bool = True,
              make_in_place: Callable[[BenchConfig, int], NativeBench | None] | None = None) -> None:
    """Measure every size in order, handing each record over as soon as it exists.

    ``make_in_place``: each size is measured out of place, then in place on the bench it makes,
    as nccl-tests measures both at every size (the record holds both); it makes None where the
    collective has no in-place form.
    """
    for size in cfg.sizes:
        bench = make_bench(cfg, size)
        try:
            record = measure_size(cfg, bench, size, world, read_huge_pages)
        finally:
            del bench  # free this size's buffers before the next (bigger) one is allocated
        one_buffer = make_in_place(cfg, size) if make_in_place is not None else None
        if one_buffer is not None:
            try:
                record = with_in_place(cfg, record, one_buffer, world)
            finally:
                del one_buffer
        on_record(record)


def env_flag(name: str) -> bool:
    return os.environ.get(name, "") not in ("", "0")
