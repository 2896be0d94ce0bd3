"""Copy bandwidth references, as nvbandwidth's copy tests: what one GPU moves
within its own memory (d2d), over PCIe/C2C to and from pinned host memory (h2d,
d2h), and to another GPU (p2p, over NVLink or PCIe). They give the ceiling a
collective's busbw is read against.

C++ times the copies with CUDA events behind a spin-kernel latch
(csrc/cuda/copy_bench.cpp: copy_times), by the copy engine ("ce",
cudaMemcpyAsync) or by a copy kernel ("sm"), one direction or both at once
(bidirectional: h2d with d2h, p2p both ways; the forward direction is timed), and
checks every destination byte afterwards; this module chooses what to run,
derives statistics and prints the table. Rates are GB/s = 1e9 bytes per second;
time is per copy, median over samples.

Pinned host buffers sit on the GPU's NUMA node, as nvbandwidth places them
(csrc/common/numa_memory.hpp: the node from sysfs, mbind, every page touched and
checked, then cudaHostRegister); with one node, or where no node is known, they
come from cudaHostAlloc. On a two-socket server a buffer on the far socket crosses
the socket link and h2d/d2h read low, so each record says where its buffer was.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass

from pybench.errors import UsageError
from pybench.measure.stats import SampleStats
from pybench.sizes import format_size

KINDS = ("d2d", "h2d", "d2h", "p2p")
ENGINES = ("ce", "sm")
HOST_KINDS = ("h2d", "d2h")  # the kinds with a pinned host buffer
NOT_REPORTED = "not reported by this build of the CUDA module"
KIND_TEXT = {"d2d": "device -> same device", "h2d": "pinned host -> device", "d2h": "device -> pinned host",
             "p2p": "device -> other device"}


@dataclass(frozen=True)
class CopyRecord:
    kind: str
    src: int  # device index; -1 for the host
    dst: int
    size_bytes: int
    time_s: float  # median seconds per copy
    time_p5_s: float
    time_p95_s: float
    bandwidth_gbps: float  # size / median time, GB/s
    peer_access: bool | None  # p2p only: whether CUDA peer access was enabled
    samples_s: tuple[float, ...]
    engine: str = "ce"  # "ce" copy engine, "sm" copy kernel
    bidirectional: bool = False  # the reverse copy ran at the same time
    wrong_bytes: int = 0  # destination bytes that differed from the source after the copies
    host_node: int | None = None  # h2d/d2h: the host buffer's NUMA node (None: not known, or no host buffer)
    host_placement: str = ""  # h2d/d2h: how it was placed ("gpu-local node 1 (mmap + mbind ...)", ...)

    def to_dict(self) -> dict:
        d = asdict(self)
        d["samples_s"] = list(self.samples_s)
        return d


def parse_kinds(text: str) -> tuple[str, ...]:
    """``all`` or a comma list of d2d, h2d, d2h, p2p."""
    items = [k.strip().lower() for k in text.split(",") if k.strip()]
    if not items or items == ["all"]:
        return KINDS
    bad = [k for k in items if k not in KINDS]
    if bad:
        raise UsageError(f"unknown copy kind {bad[0]!r}; use {', '.join(KINDS)} or all")
    return tuple(dict.fromkeys(items))


def copy_plan(kinds: Sequence[str], devices: Sequence[int]) -> list[tuple[str, int, int]]:
    """(kind, src, dst) for every run: d2d/h2d/d2h on each device, p2p for every ordered pair."""
    plan: list[tuple[str, int, int]] = []
    for kind in kinds:
        if kind == "p2p":
            plan += [("p2p", a, b) for a in devices for b in devices if a != b]
        elif kind == "h2d":
            plan += [("h2d", -1, d) for d in devices]
        elif kind == "d2h":
            plan += [("d2h", d, -1) for d in devices]
        else:
            plan += [("d2d", d, d) for d in devices]
    return plan


def make_record(kind: str, src: int, dst: int, size_bytes: int, samples: Sequence[float],
                peer_access: bool | None, engine: str = "ce", bidirectional: bool = False,
                wrong_bytes: int = 0, host_node: int | None = None, host_placement: str = "") -> CopyRecord:
    """One measured copy as a record: median, p5/p95 and bandwidth from the per-copy samples.

    ``host_node`` (negative: none known) and ``host_placement`` describe the pinned
    host buffer of h2d and d2h; other kinds have none and record None and "".
    """
    st = SampleStats.from_samples(list(samples))
    bw = size_bytes / st.median_s / 1e9 if st.median_s > 0 else float("inf")
    has_host = kind in HOST_KINDS
    node = host_node if has_host and host_node is not None and host_node >= 0 else None
    return CopyRecord(kind, src, dst, size_bytes, st.median_s, st.p5_s, st.p95_s, bw,
                      peer_access if kind == "p2p" else None, tuple(float(s) for s in samples), engine,
                      bidirectional, int(wrong_bytes), node, host_placement if has_host else "")


def parse_engines(text: str) -> tuple[str, ...]:
    """``ce``, ``sm``, ``all`` or a comma list of them."""
    items = [k.strip().lower() for k in text.split(",") if k.strip()]
    if not items or items == ["all"]:
        return ENGINES
    bad = [k for k in items if k not in ENGINES]
    if bad:
        raise UsageError(f"unknown copy engine {bad[0]!r}; use ce (copy engine), sm (copy kernel) or all")
    return tuple(dict.fromkeys(items))


def run_copies(kinds: Sequence[str], devices: Sequence[int], sizes: Sequence[int], n_samples: int = 20,
               ops_per_sample: int = 5, copy_times: Callable | None = None, engines: Sequence[str] = ("ce",),
               bidirectional: bool = False) -> list[CopyRecord]:
    """Measure every (kind, pair, size, engine); ``copy_times`` defaults to the CUDA module's.

    ``bidirectional`` runs h2d, d2h and p2p with their reverse copy at the same time
    (d2d has no reverse and runs one way).
    """
    if copy_times is None:
        from pybench._native import cuda
        copy_times = cuda().copy_times
    records = []
    for kind, src, dst in copy_plan(kinds, devices):
        both = bidirectional and kind != "d2d"
        for engine in engines:
            for size in sizes:
                result = copy_times(kind, max(src, 0), max(dst, 0), size, n_samples, ops_per_sample, engine, both)
                samples, peer, wrong = result[:3]
                # (node, placement) follow in builds with NUMA placement; older builds return three values.
                node, placement = result[3:5] if len(result) >= 5 else (None, NOT_REPORTED)
                records.append(make_record(kind, src, dst, size, samples, peer, engine, both, wrong, node,
                                           placement))
    return records


def _where(dev: int) -> str:
    return "host" if dev < 0 else f"gpu{dev}"


def _note(r: CopyRecord) -> str:
    if r.peer_access is not None:
        return "peer access" if r.peer_access else "no peer access: staged via host"
    if r.kind not in HOST_KINDS:
        return ""
    if r.host_node is None:
        for prefix in ("no NUMA affinity known", "NUMA placement refused"):
            if r.host_placement.startswith(prefix):
                return f"host: {prefix}"
        return "host node not reported" if r.host_placement == NOT_REPORTED else "host node unknown"
    how = "gpu-local" if r.host_placement.startswith("gpu-local") else "the only NUMA node"
    return f"host node {r.host_node}, {how}"


def host_buffer_lines(records: Sequence[CopyRecord]) -> list[str]:
    """One comment line per GPU saying where its pinned host buffers were and how they were placed.

    The table's note column says it in short; these lines give the whole placement
    (printed after the table by those who want it; the JSON records carry it too).
    """
    seen: dict[tuple[int, str], None] = {}
    for r in records:
        if r.kind in HOST_KINDS:
            seen[(r.dst if r.kind == "h2d" else r.src, r.host_placement)] = None
    return [f"# host buffers for {_where(gpu)}: {placement}" for gpu, placement in seen]


def table_lines(records: Sequence[CopyRecord]) -> list[str]:
    """The table a nvbandwidth user reads: a header and one row per record (host node in the note)."""
    lines = [f"# {'kind':>4} {'from':>5} {'to':>5} {'eng':>3} {'dir':>3} {'size':>9} {'time(us)':>10} "
             f"{'p5(us)':>9} {'p95(us)':>9} {'GB/s':>8} {'#wrong':>6}  note"]
    for r in records:
        note = _note(r)
        lines.append(f"  {r.kind:>4} {_where(r.src):>5} {_where(r.dst):>5} {r.engine:>3} "
                     f"{'bi' if r.bidirectional else 'uni':>3} {format_size(r.size_bytes):>9} "
                     f"{r.time_s * 1e6:>10.2f} {r.time_p5_s * 1e6:>9.2f} {r.time_p95_s * 1e6:>9.2f} "
                     f"{r.bandwidth_gbps:>8.2f} {r.wrong_bytes:>6}  {note}".rstrip())
    return lines
