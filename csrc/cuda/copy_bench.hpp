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
// how many destination bytes differed from the source after the copies, and
// (h2d, d2h) where the pinned host buffer is: as nvbandwidth, on the GPU's NUMA
// node when sysfs names it (common/numa_memory.hpp).
struct CopyResult {
  std::vector<double> per_copy_s;
  bool peer_access = false;
  long long wrong_bytes = 0;
  int host_node = -1;  // the host buffer's NUMA node; -1: no host buffer, or none known
  // How the host buffer was placed: "gpu-local node N (mmap + mbind ...)", "one NUMA
  // node (node N); cudaHostAlloc", "no NUMA affinity known (why); cudaHostAlloc", or
  // "NUMA placement refused (why); cudaHostAlloc" where mbind is denied; empty for d2d/p2p.
  std::string host_placement;
};
CopyResult copy_times(const std::string& kind, int src, int dst, std::size_t bytes, int n_samples, int ops,
                      const std::string& engine = "ce", bool bidirectional = false);

}  // namespace pybench::gpu
