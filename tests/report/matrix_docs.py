"""A GPU pair-matrix document for tests: no GPU here writes one, so the tests build it."""


def link_matrix(n: int = 4, slow: tuple[int, int] = (1, 2)) -> dict:
    """A pair-matrix document as `pybench p2p --matrix --json` writes it, one pair slow."""
    pairs = []
    for i in range(n):
        for j in range(n):
            if i != j:
                bw = 40.0 if (i, j) == slow else 180.0 + i + j
                pairs.append({"src": i, "dst": j, "bandwidth_gbps": bw, "latency_s": 8e-6, "link": "NV12",
                              "slow_bandwidth": (i, j) == slow, "slow_latency": False})
    return {"schema": "pybench.p2p_matrix", "schema_version": 1, "threshold": 0.8,
            "bandwidth_size_bytes": 64 << 20, "latency_size_bytes": 8, "pairs": pairs}
