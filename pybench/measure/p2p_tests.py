"""The point-to-point tests (between ranks 0 and 1), as OSU defines them.

Like pybench.collectives, one row per test: how a time per message becomes a
bandwidth. Time is per message: half a round trip for latency, window time /
window for the bandwidth tests.
"""

from __future__ import annotations

from dataclasses import dataclass

from pybench.errors import UsageError


@dataclass(frozen=True)
class P2PTest:
    name: str
    bytes_per_message_factor: float  # bibw moves a message each way per message time
    description: str

    @property
    def benchmark(self) -> str:
        return f"p2p_{self.name}"


P2P_TESTS: dict[str, P2PTest] = {t.name: t for t in (
    P2PTest("latency", 1.0, "ping-pong between ranks 0 and 1; time is half the round trip (osu_latency)"),
    P2PTest("bw", 1.0, "rank 0 sends a window of messages back to back, rank 1 acknowledges once (osu_bw)"),
    P2PTest("bibw", 2.0, "both ranks send a window to each other at once; bandwidth counts both directions (osu_bibw)"),
)}


def parse_p2p_tests(spec: str) -> list[P2PTest]:
    """``latency,bw`` or ``all`` -> the tests, in the order given."""
    names = list(P2P_TESTS) if spec.strip() == "all" else [s.strip() for s in spec.split(",")]
    out = []
    for n in names:
        if n not in P2P_TESTS:
            raise UsageError(f"unknown point-to-point test {n!r}; known: {', '.join(P2P_TESTS)} or all")
        if P2P_TESTS[n] in out:  # (run twice, its files would take one name; its tables say nothing more)
            raise UsageError(f"--test {spec}: {n} is listed twice; list each test once")
        out.append(P2P_TESTS[n])
    return out
