"""The GPU link matrix: NCCL send/recv bandwidth and latency for every ordered
pair of local GPUs, with pairs that fall below a fraction of the median flagged
(a slow NVLink, a GPU behind the wrong PCIe switch, a degraded cable).

One process drives every GPU (single-process NCCL communicator); C++ times each
pair with CUDA events (NcclWorld.pair_times: a GPU-side barrier, then ``ops``
messages back to back, time / ops, the slower of the two GPUs). Bandwidth is
size / median time in GB/s (1e9 B/s); latency is half the median round trip of a
small message and its reply (a ping-pong, as OSU's latency; back-to-back sends would
time the launch rate).
The NVLink/PCIe class of each pair comes from NVML where it is available.
"""

from __future__ import annotations

import statistics
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass

from pybench.errors import UsageError


@dataclass(frozen=True)
class PairResult:
    src: int
    dst: int
    bandwidth_gbps: float
    latency_s: float
    link: str = "unknown"
    slow_bandwidth: bool = False
    slow_latency: bool = False

    def to_dict(self) -> dict:
        return asdict(self)


def flag_pairs(pairs: Sequence[PairResult], threshold: float) -> list[PairResult]:
    """Mark pairs whose bandwidth is below ``threshold`` x the median bandwidth, or whose
    latency is above the median latency / ``threshold``. ``threshold`` in (0, 1]."""
    if not 0 < threshold <= 1:
        raise UsageError(f"--threshold {threshold} must be in (0, 1], e.g. 0.8 flags pairs under 80% of the median")
    if not pairs:
        return []
    med_bw = statistics.median(p.bandwidth_gbps for p in pairs)
    med_lat = statistics.median(p.latency_s for p in pairs)
    return [PairResult(p.src, p.dst, p.bandwidth_gbps, p.latency_s, p.link,
                       slow_bandwidth=p.bandwidth_gbps < threshold * med_bw,
                       slow_latency=p.latency_s > med_lat / threshold) for p in pairs]


def measure_pairs(pair_times: Callable[[int, int, int, int, int, bool], list[float]], n_devices: int, bw_bytes: int,
                  lat_bytes: int, n_samples: int, links: dict[tuple[int, int], str] | None = None) -> list[PairResult]:
    """Time every ordered pair with ``pair_times(src, dst, bytes, n_samples, ops, pingpong) -> seconds per op``."""
    if n_devices < 2:
        raise UsageError(f"the p2p matrix needs at least 2 GPUs; this process sees {n_devices}")
    links = links or {}
    out = []
    for a in range(n_devices):
        for b in range(n_devices):
            if a == b:
                continue
            lat = statistics.median(pair_times(a, b, lat_bytes, n_samples, 20, True))  # ping-pong: half a round trip
            t_bw = statistics.median(pair_times(a, b, bw_bytes, n_samples, 4, False))
            bw = bw_bytes / t_bw / 1e9 if t_bw > 0 else float("inf")
            out.append(PairResult(a, b, bw, lat, links.get((min(a, b), max(a, b)), "unknown")))
    return out


def matrix_lines(pairs: Sequence[PairResult], n_devices: int) -> list[str]:
    """Bandwidth and latency grids (rows: sender, columns: receiver), then the flagged pairs."""
    by = {(p.src, p.dst): p for p in pairs}
    head = " " * 6 + "".join(f"{'gpu' + str(d):>10}" for d in range(n_devices))
    def grid(value, slow, fmt: str) -> list[str]:
        rows = []
        for a in range(n_devices):
            cells = [f"{'-':>10}" if a == b else f"{value(by[(a, b)]):>9{fmt}}{'!' if slow(by[(a, b)]) else ' '}"
                     for b in range(n_devices)]
            rows.append(f"{'gpu' + str(a):<6}" + "".join(cells))
        return rows

    lines = ["# send/recv bandwidth (GB/s), row sends to column", head]
    lines += grid(lambda p: p.bandwidth_gbps, lambda p: p.slow_bandwidth, ".1f")
    lines += ["# send/recv latency (us)", head]
    lines += grid(lambda p: p.latency_s * 1e6, lambda p: p.slow_latency, ".2f")
    flagged = [p for p in pairs if p.slow_bandwidth or p.slow_latency]
    if flagged:
        lines.append(f"# {len(flagged)} pair(s) flagged (!):")
        for p in flagged:
            what = " and ".join(w for w, f in (("bandwidth", p.slow_bandwidth), ("latency", p.slow_latency)) if f)
            lines.append(f"#   gpu{p.src} -> gpu{p.dst}: {what} off the median ({p.bandwidth_gbps:.1f} GB/s, "
                         f"{p.latency_s * 1e6:.2f} us, link {p.link})")
    else:
        lines.append("# no pair flagged")
    links = sorted({(min(p.src, p.dst), max(p.src, p.dst), p.link) for p in pairs})
    lines.append("# links: " + ", ".join(f"gpu{a}-gpu{b} {link}" for a, b, link in links))
    return lines
