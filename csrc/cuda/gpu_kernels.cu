// Fill and check kernels for every element type NCCL moves. One grid-stride
// kernel per direction, templated on the element type; the dtype switch lives on
// the host side, so the harness never sees a template.
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <cstdint>
#include <string>

#include "common/deadline.hpp"
#include "common/native_error.hpp"
#include "cuda/gpu_kernels.hpp"

namespace pybench::gpu {
namespace {

template <typename T>
__device__ __forceinline__ T from_double(double v) { return static_cast<T>(v); }
template <>
__device__ __forceinline__ __half from_double<__half>(double v) { return __float2half(static_cast<float>(v)); }
template <>
__device__ __forceinline__ __nv_bfloat16 from_double<__nv_bfloat16>(double v) {
  return __float2bfloat16(static_cast<float>(v));
}

template <typename T>
__device__ __forceinline__ double to_double(T v) { return static_cast<double>(v); }
template <>
__device__ __forceinline__ double to_double<__half>(__half v) { return static_cast<double>(__half2float(v)); }
template <>
__device__ __forceinline__ double to_double<__nv_bfloat16>(__nv_bfloat16 v) {
  return static_cast<double>(__bfloat162float(v));
}

template <typename T>
__global__ void fill_kernel(T* buf, std::size_t n, unsigned long long shift, unsigned period) {
  for (std::size_t k = blockIdx.x * static_cast<std::size_t>(blockDim.x) + threadIdx.x; k < n;
       k += static_cast<std::size_t>(gridDim.x) * blockDim.x)
    buf[k] = from_double<T>(1.0 + static_cast<double>((shift + k) % period));
}

template <typename T>
__global__ void count_wrong_kernel(const T* out, std::size_t length, PeriodTable table, unsigned long long* wrong) {
  unsigned long long mine = 0;
  for (std::size_t k = blockIdx.x * static_cast<std::size_t>(blockDim.x) + threadIdx.x; k < length;
       k += static_cast<std::size_t>(gridDim.x) * blockDim.x) {
    const double want = table.values[k % static_cast<unsigned>(table.period)];
    const double got = to_double(out[k]);
    // NaN (the 0xff fill of an unwritten float output) fails both comparisons.
    const bool ok = table.rel_tolerance == 0.0 ? got == want : fabs(got - want) <= table.rel_tolerance * fabs(want);
    if (!ok) ++mine;
  }
  if (mine) atomicAdd(wrong, mine);
}

// One thread holds its stream until the host has enqueued a whole sample (*flag
// reaches target), as nvbandwidth's spin kernel does, so the events around the
// sample time GPU work, not the host's launch gap. Gives up after timeout_ns
// (then *expired = 1 and the caller discards the samples), so a host that dies
// never leaves the GPU spinning.
__global__ void latch_kernel(const volatile unsigned long long* flag, unsigned long long target,
                             unsigned long long timeout_ns, volatile unsigned long long* expired) {
  unsigned long long t0, now;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t0));
  while (*flag < target) {
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(now));
    if (now - t0 > timeout_ns) {
      *expired = 1ull;
      return;
    }
  }
}

// An SM copy (the copy-engine path's alternative, as nvbandwidth's SM tests): 16-byte
// vector loads and stores where both ends are aligned, bytes for the tail.
__global__ void sm_copy_kernel(char* dst, const char* src, std::size_t n) {
  const std::size_t stride = static_cast<std::size_t>(gridDim.x) * blockDim.x;
  const std::size_t first = blockIdx.x * static_cast<std::size_t>(blockDim.x) + threadIdx.x;
  const bool aligned = (reinterpret_cast<std::uintptr_t>(dst) % 16 == 0) &&
                       (reinterpret_cast<std::uintptr_t>(src) % 16 == 0);
  std::size_t done = 0;
  if (aligned) {
    const std::size_t nv = n / 16;
    const uint4* s = reinterpret_cast<const uint4*>(src);
    uint4* d = reinterpret_cast<uint4*>(dst);
    for (std::size_t k = first; k < nv; k += stride) d[k] = s[k];
    done = nv * 16;
  }
  for (std::size_t k = done + first; k < n; k += stride) dst[k] = src[k];
}

// Counts bytes of `buf` that differ from `value`: the copies' data check.
__global__ void count_bytes_not_kernel(const unsigned char* buf, std::size_t n, unsigned char value,
                                       unsigned long long* wrong) {
  unsigned long long mine = 0;
  for (std::size_t k = blockIdx.x * static_cast<std::size_t>(blockDim.x) + threadIdx.x; k < n;
       k += static_cast<std::size_t>(gridDim.x) * blockDim.x)
    if (buf[k] != value) ++mine;
  if (mine) atomicAdd(wrong, mine);
}

constexpr int kThreads = 256;

unsigned blocks_for(std::size_t n) {
  const std::size_t b = (n + kThreads - 1) / kThreads;
  return static_cast<unsigned>(b < 1 ? 1 : (b > 1024 ? 1024 : b));
}

template <typename F>
void dispatch(nccl::DataType dtype, F&& f) {
  switch (dtype) {
    case nccl::kInt8: f(std::int8_t{}); break;
    case nccl::kUint8: f(std::uint8_t{}); break;
    case nccl::kInt32: f(std::int32_t{}); break;
    case nccl::kUint32: f(std::uint32_t{}); break;
    case nccl::kInt64: f(std::int64_t{}); break;
    case nccl::kUint64: f(std::uint64_t{}); break;
    case nccl::kFloat16: f(__half{}); break;
    case nccl::kFloat32: f(float{}); break;
    case nccl::kFloat64: f(double{}); break;
    case nccl::kBfloat16: f(__nv_bfloat16{}); break;
    default: PYBENCH_FAIL("no device kernels for NCCL data type " + std::to_string(static_cast<int>(dtype)));
  }
}

}  // namespace

void launch_fill(nccl::DataType dtype, void* buf, std::size_t n, int rank, std::size_t first, int period,
                 cudaStream_t stream) {
  if (n == 0) return;
  const unsigned long long shift = 3ull * static_cast<unsigned>(rank) + first;
  dispatch(dtype, [&](auto tag) {
    using T = decltype(tag);
    fill_kernel<T><<<blocks_for(n), kThreads, 0, stream>>>(static_cast<T*>(buf), n, shift,
                                                          static_cast<unsigned>(period));
  });
  check_launch("fill kernel");
}

void launch_count_wrong(nccl::DataType dtype, const void* out, std::size_t out_offset, std::size_t length,
                        const PeriodTable& table, unsigned long long* wrong, cudaStream_t stream) {
  if (length == 0) return;
  dispatch(dtype, [&](auto tag) {
    using T = decltype(tag);
    count_wrong_kernel<T><<<blocks_for(length), kThreads, 0, stream>>>(static_cast<const T*>(out) + out_offset,
                                                                      length, table, wrong);
  });
  check_launch("check kernel");
}

void launch_latch(const unsigned long long* flag, unsigned long long target, double timeout_s,
                  unsigned long long* expired, cudaStream_t stream) {
  // The one saturating rule (common/deadline.hpp): disabled (0) or too long means "never expire".
  const std::int64_t span = pybench::timeout_span_ns(timeout_s);
  const auto ns = span == 0 || span == pybench::kNeverNs ? ~0ull : static_cast<unsigned long long>(span);
  latch_kernel<<<1, 1, 0, stream>>>(flag, target, ns, expired);
  check_launch("latch kernel");
}

void launch_sm_copy(void* dst, const void* src, std::size_t bytes, int blocks, cudaStream_t stream) {
  if (bytes == 0) return;
  sm_copy_kernel<<<blocks, 512, 0, stream>>>(static_cast<char*>(dst), static_cast<const char*>(src), bytes);
  check_launch("SM copy kernel");
}

void launch_count_bytes_not(const void* buf, std::size_t n, unsigned char value, unsigned long long* wrong,
                            cudaStream_t stream) {
  if (n == 0) return;
  count_bytes_not_kernel<<<blocks_for(n), kThreads, 0, stream>>>(static_cast<const unsigned char*>(buf), n, value,
                                                                 wrong);
  check_launch("copy check kernel");
}

void check_launch(const char* what) {
  const cudaError_t e = cudaGetLastError();
  if (e != cudaSuccess)
    PYBENCH_FAIL(std::string(what) + " launch failed: " + cudaGetErrorString(e) + " (" + cudaGetErrorName(e) + ")");
}

}  // namespace pybench::gpu
