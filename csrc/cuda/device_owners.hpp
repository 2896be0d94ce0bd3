// Owners for CUDA resources the harness and the copy benchmark create: a device
// buffer and an event free themselves when their owner goes, so an exception at
// any step leaks nothing and no catch block frees by hand.
#pragma once

#include <cuda_runtime.h>

#include <cstddef>
#include <memory>
#include <type_traits>

#include "cuda/cuda_check.hpp"

namespace pybench::gpu {

// cudaFree with the buffer's device current (as the allocation had it).
struct DeviceFree {
  int device = 0;
  void operator()(void* p) const {
    cudaSetDevice(device);
    cudaFree(p);
  }
};
using DeviceBuffer = std::unique_ptr<void, DeviceFree>;

// `bytes` of device memory on `device` (left current), owned by the result.
inline DeviceBuffer device_alloc(int device, std::size_t bytes) {
  CUDA_CHECK(cudaSetDevice(device));
  void* p = nullptr;
  CUDA_CHECK(cudaMalloc(&p, bytes));
  return DeviceBuffer(p, DeviceFree{device});
}

struct EventDestroy {
  void operator()(cudaEvent_t e) const { cudaEventDestroy(e); }
};
using Event = std::unique_ptr<std::remove_pointer_t<cudaEvent_t>, EventDestroy>;

// An event on the current device, owned by the result.
inline Event make_event() {
  cudaEvent_t e = nullptr;
  CUDA_CHECK(cudaEventCreate(&e));
  return Event(e);
}

}  // namespace pybench::gpu
