// A fake CUDA runtime for the harness tests on CPUs: the runtime entry points
// the host code calls (C linkage, as cuda_runtime_api.h declares them) and the
// kernel launchers of gpu_kernels.hpp, with no device behind them. It counts live
// resources, fails the Nth call of a function when told to, and keeps streams
// busy for a number of polls. Configured by environment variables (one scenario
// per process). Counters are relaxed atomics on purpose: a mutex here would add
// happens-before edges between the harness's threads and hide their races from
// ThreadSanitizer.
#include <cuda_runtime.h>

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

#include "cuda/gpu_kernels.hpp"
#include "gpu_fakes.hpp"

namespace {

std::atomic<long> g_live_device{0}, g_live_host{0}, g_live_events{0}, g_live_streams{0}, g_polls{0};
std::atomic<long> g_malloc_calls{0}, g_event_calls{0};
thread_local int g_device = 0;
std::atomic<int> g_latches{0};
LatchLaunch g_latch[8];

long env_long(const char* name, long fallback) {
  const char* v = std::getenv(name);
  return v ? std::atol(v) : fallback;
}
// FAKE_CUDA_FAIL_<what>=N: the Nth call (1-based) of that function fails.
bool fails_now(const char* var, std::atomic<long>& calls) {
  const long n = calls.fetch_add(1, std::memory_order_relaxed) + 1;
  return n == env_long(var, 0);
}

}  // namespace

long fake_live_device_buffers() { return g_live_device.load(std::memory_order_relaxed); }
long fake_live_host_buffers() { return g_live_host.load(std::memory_order_relaxed); }
long fake_live_events() { return g_live_events.load(std::memory_order_relaxed); }
long fake_live_streams() { return g_live_streams.load(std::memory_order_relaxed); }
int fake_latch_launches(LatchLaunch* out, int max) {
  const int n = g_latches.load(std::memory_order_relaxed);
  for (int i = 0; i < n && i < max; ++i) out[i] = g_latch[i];
  return n;
}

extern "C" {

cudaError_t cudaSetDevice(int device) {
  // FAKE_CUDA_BAD_DEVICE=d: that device cannot be made current (a launch part-way fails).
  if (device == env_long("FAKE_CUDA_BAD_DEVICE", -1)) return cudaErrorInvalidDevice;
  g_device = device;
  return cudaSuccess;
}
cudaError_t cudaGetDevice(int* device) {
  *device = g_device;
  return cudaSuccess;
}
const char* cudaGetErrorString(cudaError_t e) { return e == cudaSuccess ? "no error" : "fake CUDA error"; }
const char* cudaGetErrorName(cudaError_t e) { return e == cudaSuccess ? "cudaSuccess" : "cudaErrorFake"; }
cudaError_t cudaGetLastError(void) { return cudaSuccess; }

cudaError_t cudaMalloc(void** p, size_t bytes) {
  if (fails_now("FAKE_CUDA_FAIL_MALLOC", g_malloc_calls)) return cudaErrorMemoryAllocation;
  *p = std::malloc(bytes);  // never touched beyond the few bytes a copy reads: stays virtual
  g_live_device.fetch_add(1, std::memory_order_relaxed);
  return cudaSuccess;
}
cudaError_t cudaFree(void* p) {
  if (p == nullptr) return cudaSuccess;
  std::free(p);
  g_live_device.fetch_sub(1, std::memory_order_relaxed);
  return cudaSuccess;
}
cudaError_t cudaHostAlloc(void** p, size_t bytes, unsigned int) {
  *p = std::calloc(1, bytes);
  g_live_host.fetch_add(1, std::memory_order_relaxed);
  return cudaSuccess;
}
cudaError_t cudaFreeHost(void* p) {
  if (p == nullptr) return cudaSuccess;
  std::free(p);
  g_live_host.fetch_sub(1, std::memory_order_relaxed);
  return cudaSuccess;
}
cudaError_t cudaMemset(void*, int, size_t) { return cudaSuccess; }
cudaError_t cudaMemsetAsync(void*, int, size_t, cudaStream_t) { return cudaSuccess; }
cudaError_t cudaMemcpyAsync(void* dst, const void*, size_t bytes, enum cudaMemcpyKind, cudaStream_t) {
  std::memset(dst, 0, bytes);  // device memory holds zeros as far as the host can tell
  return cudaSuccess;
}

cudaError_t cudaStreamCreateWithFlags(cudaStream_t* s, unsigned int) {
  static std::atomic<long> next{1};
  *s = reinterpret_cast<cudaStream_t>(0x1000 + 16 * next.fetch_add(1, std::memory_order_relaxed));
  g_live_streams.fetch_add(1, std::memory_order_relaxed);
  return cudaSuccess;
}
cudaError_t cudaStreamDestroy(cudaStream_t) {
  g_live_streams.fetch_sub(1, std::memory_order_relaxed);
  return cudaSuccess;
}
// FAKE_CUDA_BUSY_POLLS=N: a stream reports work pending for its first N queries (-1: forever).
cudaError_t cudaStreamQuery(cudaStream_t) {
  const long busy = env_long("FAKE_CUDA_BUSY_POLLS", 0);
  if (busy < 0 || g_polls.fetch_add(1, std::memory_order_relaxed) < busy) return cudaErrorNotReady;
  return cudaSuccess;
}
cudaError_t cudaStreamSynchronize(cudaStream_t) { return cudaSuccess; }

cudaError_t cudaEventCreate(cudaEvent_t* e) {
  if (fails_now("FAKE_CUDA_FAIL_EVENT_CREATE", g_event_calls)) return cudaErrorMemoryAllocation;
  *e = reinterpret_cast<cudaEvent_t>(std::malloc(1));
  g_live_events.fetch_add(1, std::memory_order_relaxed);
  return cudaSuccess;
}
cudaError_t cudaEventDestroy(cudaEvent_t e) {
  std::free(e);
  g_live_events.fetch_sub(1, std::memory_order_relaxed);
  return cudaSuccess;
}
cudaError_t cudaEventRecord(cudaEvent_t, cudaStream_t) { return cudaSuccess; }
cudaError_t cudaEventQuery(cudaEvent_t) { return cudaSuccess; }
cudaError_t cudaEventElapsedTime(float* ms, cudaEvent_t, cudaEvent_t) {
  *ms = 1.0f;
  return cudaSuccess;
}

cudaError_t cudaStreamBeginCapture(cudaStream_t, enum cudaStreamCaptureMode) { return cudaSuccess; }
cudaError_t cudaStreamEndCapture(cudaStream_t, cudaGraph_t* g) {
  *g = nullptr;
  return cudaSuccess;
}
cudaError_t cudaGraphInstantiate(cudaGraphExec_t* exec, cudaGraph_t, unsigned long long) {
  *exec = nullptr;
  return cudaSuccess;
}
cudaError_t cudaGraphUpload(cudaGraphExec_t, cudaStream_t) { return cudaSuccess; }
cudaError_t cudaGraphLaunch(cudaGraphExec_t, cudaStream_t) { return cudaSuccess; }
cudaError_t cudaGraphExecDestroy(cudaGraphExec_t) { return cudaSuccess; }
cudaError_t cudaGraphDestroy(cudaGraph_t) { return cudaSuccess; }

}  // extern "C"

namespace pybench::gpu {

void launch_fill(nccl::DataType, void*, std::size_t, int, std::size_t, int, cudaStream_t) {}
void launch_count_wrong(nccl::DataType, const void*, std::size_t, std::size_t, const PeriodTable&,
                        unsigned long long*, cudaStream_t) {}
// Records where the latch kernel would wait and what it would wait for.
void launch_latch(const unsigned long long* flag, unsigned long long target, double, unsigned long long* expired,
                  cudaStream_t stream) {
  const int i = g_latches.fetch_add(1, std::memory_order_relaxed);
  if (i < 8) g_latch[i] = LatchLaunch{flag, target, expired, stream};
}
void launch_sm_copy(void*, const void*, std::size_t, int, cudaStream_t) {}
void launch_count_bytes_not(const void*, std::size_t, unsigned char, unsigned long long*, cudaStream_t) {}
void check_launch(const char*) {}

}  // namespace pybench::gpu
