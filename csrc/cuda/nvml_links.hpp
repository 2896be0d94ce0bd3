// How local GPU pairs are linked (NVLink or which PCIe path), from NVML opened
// at run time (dlopen of libnvidia-ml.so.1, shipped with the driver): absent
// NVML reads as "unknown", never as an error. Free of CUDA and NVML headers.
#pragma once

#include <string>
#include <vector>

namespace pybench::gpu {

struct PairLink {
  int a, b;          // CUDA device indices (as this process sees them)
  std::string link;  // "NVLink", "PCIe (same switch)", ..., or "unknown"
};

struct LinkReport {
  bool nvml_available = false;
  std::string reason;          // why NVML gave nothing, when it did not
  std::string driver_version;  // from NVML, "" when unknown
  std::vector<PairLink> pairs;  // every a < b among the first `devices` CUDA devices
};

LinkReport link_report(int devices);

}  // namespace pybench::gpu
