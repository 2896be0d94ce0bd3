// The host side of the spin-kernel latch (gpu_kernels.cu: latch_kernel): a
// counter in mapped, pinned host memory that the GPU reads. hold() puts one
// latch kernel on each stream, waiting for the next value; release() publishes
// it once the sample behind the latch is enqueued. Used only by the harness,
// which includes the CUDA runtime.
#pragma once

#include <cuda_runtime.h>

#include <vector>

#include "common/native_error.hpp"
#include "cuda/gpu_kernels.hpp"

namespace pybench::gpu {

class HostLatch {
 public:
  // Seconds a latch kernel waits for the host before it lets its stream go
  // (and marks the samples as spoiled).
  static constexpr double kTimeoutS = 10.0;

  HostLatch() = default;
  ~HostLatch() {
    release();
    if (cells_) cudaFreeHost(cells_);
  }
  HostLatch(const HostLatch&) = delete;
  HostLatch& operator=(const HostLatch&) = delete;

  // One latch kernel on each stream (their devices current in turn), all waiting for the same value.
  // The target counts as issued before the first launch: if a launch throws part-way, release()
  // still publishes it, so the kernels already launched never spin until their timeout.
  void hold(const std::vector<std::pair<int, cudaStream_t>>& streams) {
    allocate();
    const unsigned long long target = issued_ + 1;
    issued_ = target;
    for (const auto& [device, stream] : streams) {
      if (cudaSetDevice(device) != cudaSuccess) PYBENCH_FAIL("cudaSetDevice failed before the latch kernel");
      launch_latch(&cells_->released, target, kTimeoutS, &cells_->expired, stream);
    }
  }
  // Lets every held stream run (idempotent).
  void release() {
    if (cells_) __atomic_store_n(&cells_->released, issued_, __ATOMIC_SEQ_CST);
  }
  // Whether any latch kernel gave up waiting (the samples since are not GPU-only times).
  bool expired() const { return cells_ && __atomic_load_n(&cells_->expired, __ATOMIC_SEQ_CST) != 0; }
  void clear_expired() {
    if (cells_) __atomic_store_n(&cells_->expired, 0ull, __ATOMIC_SEQ_CST);
  }

 private:
  // Two whole 64-bit cells the GPU and the host each access as that type (the kernel
  // stores the expired flag as 1ull), read and written with atomic builtins: no
  // aliasing, no assumption on byte order.
  struct Cells {
    unsigned long long released;
    unsigned long long expired;
  };
  // Mapped, pinned and portable: every device reads it through the same address (UVA).
  void allocate() {
    if (cells_) return;
    void* p = nullptr;
    const cudaError_t e = cudaHostAlloc(&p, sizeof(Cells), cudaHostAllocMapped | cudaHostAllocPortable);
    if (e != cudaSuccess) PYBENCH_FAIL(std::string("cudaHostAlloc of the latch flag failed: ") + cudaGetErrorString(e));
    cells_ = static_cast<Cells*>(p);
    __atomic_store_n(&cells_->released, 0ull, __ATOMIC_SEQ_CST);
    __atomic_store_n(&cells_->expired, 0ull, __ATOMIC_SEQ_CST);
  }

  Cells* cells_ = nullptr;
  unsigned long long issued_ = 0;
};

// Releases the latch when a scope ends, so an exception while enqueuing never leaves a GPU waiting.
class LatchRelease {
 public:
  explicit LatchRelease(HostLatch* latch) : latch_(latch) {}
  ~LatchRelease() {
    if (latch_) latch_->release();
  }
  LatchRelease(const LatchRelease&) = delete;
  LatchRelease& operator=(const LatchRelease&) = delete;

 private:
  HostLatch* latch_;
};

}  // namespace pybench::gpu
