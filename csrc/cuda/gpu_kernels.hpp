// Host entry points of the device kernels (gpu_kernels.cu): fill a buffer with
// the check pattern and count, on the device, the elements of a block that
// differ from its expected values. Free of CUDA headers so the harness
// (host C++) includes it; every call is asynchronous on `stream`.
#pragma once

#include <cstddef>

#include "cuda/gpu_pattern.hpp"

namespace pybench::gpu {

// buf[k] = 1 + (3 rank + first + k) mod period, for k in [0, n), in `dtype`.
void launch_fill(nccl::DataType dtype, void* buf, std::size_t n, int rank, std::size_t first, int period,
                 cudaStream_t stream);
// Adds to *wrong (device memory) the number of k in [0, length) with
// out[out_offset + k] != table.values[k % table.period] (within the table's tolerance).
void launch_count_wrong(nccl::DataType dtype, const void* out, std::size_t out_offset, std::size_t length,
                        const PeriodTable& table, unsigned long long* wrong, cudaStream_t stream);
// Holds `stream` until *flag >= target (mapped host memory the host advances once a
// sample is enqueued); after timeout_s sets *expired = 1 (the whole 64-bit cell) and lets the stream go.
void launch_latch(const unsigned long long* flag, unsigned long long target, double timeout_s,
                  unsigned long long* expired, cudaStream_t stream);
// Copies `bytes` with a kernel on `blocks` blocks (SM copy; the other path is the copy engine).
void launch_sm_copy(void* dst, const void* src, std::size_t bytes, int blocks, cudaStream_t stream);
// Adds to *wrong the number of bytes of buf[0, n) that differ from `value`.
void launch_count_bytes_not(const void* buf, std::size_t n, unsigned char value, unsigned long long* wrong,
                            cudaStream_t stream);
// Throws NativeError naming the launch when the last kernel launch failed.
void check_launch(const char* what);

}  // namespace pybench::gpu
