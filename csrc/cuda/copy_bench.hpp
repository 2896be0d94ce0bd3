// Copy bandwidth between host and devices and between devices (nvbandwidth's copy tests).
#pragma once

#include <cstddef>
#include <string>
#include <vector>

namespace pybench::gpu {

// Copy bandwidth, as nvbandwidth's copy tests: kind is d2d (within `src`), h2d
// (pinned host -> `dst`), d2h (`src` -> pinned host) or p2p (`src` -> `dst`).
// `engine` "ce" uses the copy engine (cudaMemcpyAsync), "sm" a copy kernel.
// `bidirectional` runs the reverse copy at the same time on a second stream (h2d
// with d2h, p2p with dst -> src); the time is that of the forward direction.
// Returns seconds per copy, one per sample (each sample times `ops` copies with
// CUDA events behind a latch), whether peer access was enabled both ways (p2p),
// and how many destination bytes differed from the source after the copies.
struct CopyResult {
  std::vector<double> per_copy_s;
  bool peer_access;
  long long wrong_bytes;
};
CopyResult copy_times(const std::string& kind, int src, int dst, std::size_t bytes, int n_samples, int ops,
                      const std::string& engine = "ce", bool bidirectional = false);

}  // namespace pybench::gpu
