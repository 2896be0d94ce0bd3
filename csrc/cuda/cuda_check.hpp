// CUDA runtime errors as NativeError (the call, CUDA's text, name and code), and
// the elapsed time between two events in seconds; shared by the NCCL harness and
// the copy benchmark.
#pragma once

#include <cuda_runtime.h>

#include <string>

#include "common/native_error.hpp"

namespace pybench::gpu {

inline void cuda_check(cudaError_t e, const char* call, const char* file, int line) {
  if (e != cudaSuccess)
    throw_native(std::string(call) + " failed: " + cudaGetErrorString(e) + " (" + cudaGetErrorName(e) + ", " +
                     std::to_string(static_cast<int>(e)) + ")",
                 file, line);
}
#define CUDA_CHECK(call) ::pybench::gpu::cuda_check((call), #call, __FILE__, __LINE__)

inline double elapsed_s(cudaEvent_t a, cudaEvent_t b) {
  float ms = 0;
  CUDA_CHECK(cudaEventElapsedTime(&ms, a, b));
  return static_cast<double>(ms) * 1e-3;
}

}  // namespace pybench::gpu
