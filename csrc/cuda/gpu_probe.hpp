// What the CUDA runtime says about this machine. Kept free of CUDA headers so the
// pybind11 wiring (gpu_module.cpp) is compiled by the host compiler.
#pragma once

#include <string>
#include <vector>

namespace pybench::gpu {

struct DeviceInfo {
  int index;
  std::string name;
  std::size_t total_memory_bytes;
  int compute_major, compute_minor;
  int multiprocessors;
  std::string pci_address;  // domain:bus:device as nccl-tests prints it, e.g. "0000:1b:00"
};

struct Probe {
  int device_count = 0;
  // Empty when devices were found; otherwise why there are none, e.g.
  // "no NVIDIA driver on this machine (cudaErrorInsufficientDriver, 35)".
  std::string no_gpu_reason;
  int runtime_version = 0;  // e.g. 13000
  int driver_version = 0;   // 0 when no driver
  std::vector<DeviceInfo> devices;
};

Probe probe();
// Fills a device buffer with a pattern by kernel and counts mismatches on the
// device; returns the number of wrong elements (0 on a working GPU).
long long kernel_selftest(int device, std::size_t n);
std::vector<std::string> compiled_architectures();

}  // namespace pybench::gpu
