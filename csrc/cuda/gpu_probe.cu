#include <cuda_runtime.h>

#include <cstdio>
#include <stdexcept>
#include <string>

#include "cuda/gpu_probe.hpp"

namespace pybench::gpu {
namespace {

std::string describe(cudaError_t e) {
  return std::string(cudaGetErrorName(e)) + ", " + std::to_string(static_cast<int>(e));
}

void check(cudaError_t e, const char* what) {
  if (e != cudaSuccess) throw std::runtime_error(std::string(what) + " failed: " + cudaGetErrorString(e) + " (" + describe(e) + ")");
}

__global__ void fill_pattern(int* buf, std::size_t n) {
  for (std::size_t i = blockIdx.x * static_cast<std::size_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<std::size_t>(gridDim.x) * blockDim.x)
    buf[i] = static_cast<int>(1 + i % 13);
}

__global__ void count_wrong(const int* buf, std::size_t n, unsigned long long* wrong) {
  for (std::size_t i = blockIdx.x * static_cast<std::size_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<std::size_t>(gridDim.x) * blockDim.x)
    if (buf[i] != static_cast<int>(1 + i % 13)) atomicAdd(wrong, 1ull);
}

}  // namespace

Probe probe() {
  Probe p;
  cudaRuntimeGetVersion(&p.runtime_version);
  if (cudaDriverGetVersion(&p.driver_version) != cudaSuccess) p.driver_version = 0;
  const cudaError_t e = cudaGetDeviceCount(&p.device_count);
  if (e != cudaSuccess) {
    // No driver (35), no device (100) and friends all mean "no GPU here", not a crash.
    p.device_count = 0;
    p.no_gpu_reason = e == cudaErrorInsufficientDriver ? "no NVIDIA driver on this machine (" + describe(e) + ")"
                      : e == cudaErrorNoDevice         ? "no CUDA device visible (" + describe(e) + ")"
                                                       : std::string(cudaGetErrorString(e)) + " (" + describe(e) + ")";
    cudaGetLastError();  // clear the sticky error so later calls start clean
    return p;
  }
  if (p.device_count == 0) p.no_gpu_reason = "no CUDA device visible";
  for (int d = 0; d < p.device_count; ++d) {
    cudaDeviceProp prop{};
    check(cudaGetDeviceProperties(&prop, d), "cudaGetDeviceProperties");
    char pci[32];
    std::snprintf(pci, sizeof(pci), "%04x:%02x:%02x", prop.pciDomainID, prop.pciBusID, prop.pciDeviceID);
    p.devices.push_back(
        {d, prop.name, prop.totalGlobalMem, prop.major, prop.minor, prop.multiProcessorCount, std::string(pci)});
  }
  return p;
}

long long kernel_selftest(int device, std::size_t n) {
  check(cudaSetDevice(device), "cudaSetDevice");
  int* buf = nullptr;
  unsigned long long* wrong = nullptr;
  check(cudaMalloc(&buf, n * sizeof(int)), "cudaMalloc");
  check(cudaMalloc(&wrong, sizeof(*wrong)), "cudaMalloc");
  check(cudaMemset(wrong, 0, sizeof(*wrong)), "cudaMemset");
  fill_pattern<<<256, 256>>>(buf, n);
  count_wrong<<<256, 256>>>(buf, n, wrong);
  check(cudaGetLastError(), "kernel launch");
  unsigned long long host = 0;
  check(cudaMemcpy(&host, wrong, sizeof(host), cudaMemcpyDeviceToHost), "cudaMemcpy");
  cudaFree(buf);
  cudaFree(wrong);
  return static_cast<long long>(host);
}

std::vector<std::string> compiled_architectures() {
  std::vector<std::string> out;
  std::string s = PYBENCH_CUDA_ARCHS;  // comma-separated, set by CMake from CMAKE_CUDA_ARCHITECTURES
  std::size_t start = 0;
  while (start <= s.size()) {
    const std::size_t end = s.find(',', start);
    const std::string item = s.substr(start, end == std::string::npos ? std::string::npos : end - start);
    if (!item.empty()) out.push_back(item);
    if (end == std::string::npos) break;
    start = end + 1;
  }
  return out;
}

}  // namespace pybench::gpu
