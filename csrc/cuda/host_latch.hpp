// The host side of the spin-kernel latch (gpu_kernels.cu: latch_kernel): a
// counter in mapped, pinned host memory that the GPU reads. hold() puts one
// latch kernel on each stream, waiting for the next value; release() publishes
// it once the sample behind the latch is enqueued. Used only by the harness,
// which includes the CUDA runtime.
#pragma once

#include <cuda_runtime.h>

#include <atomic>
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
  void hold(const std::vector<std::pair<int, cudaStream_t>>& streams) {
    allocate();
    const unsigned long long target = issued_ + 1;
    for (const auto& [device, stream] : streams) {
      if (cudaSetDevice(device) != cudaSuccess) PYBENCH_FAIL("cudaSetDevice failed before the latch kernel");
      launch_latch(&cells_[0], target, kTimeoutS, reinterpret_cast<unsigned*>(&cells_[1]), stream);
    }
    issued_ = target;
  }
  // Lets every held stream run (idempotent).
  void release() {
    if (!cells_) return;
    std::atomic_thread_fence(std::memory_order_seq_cst);
    *static_cast<volatile unsigned long long*>(&cells_[0]) = issued_;
    std::atomic_thread_fence(std::memory_order_seq_cst);
  }
  // Whether any latch kernel gave up waiting (the samples since are not GPU-only times).
  bool expired() const { return cells_ && *reinterpret_cast<const volatile unsigned*>(&cells_[1]) != 0; }
  void clear_expired() {
    if (cells_) *reinterpret_cast<volatile unsigned*>(&cells_[1]) = 0;
  }

 private:
  // Mapped, pinned and portable: every device reads it through the same address (UVA).
  void allocate() {
    if (cells_) return;
    const cudaError_t e = cudaHostAlloc(reinterpret_cast<void**>(&cells_), 2 * sizeof(unsigned long long),
                                        cudaHostAllocMapped | cudaHostAllocPortable);
    if (e != cudaSuccess) {
      cells_ = nullptr;
      PYBENCH_FAIL(std::string("cudaHostAlloc of the latch flag failed: ") + cudaGetErrorString(e));
    }
    cells_[0] = 0;
    cells_[1] = 0;
  }

  unsigned long long* cells_ = nullptr;  // [0]: released value, [1]: expired flag (low 32 bits)
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
