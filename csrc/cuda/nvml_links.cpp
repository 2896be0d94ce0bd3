#include "cuda/nvml_links.hpp"

#include <cuda_runtime.h>
#include <dlfcn.h>

namespace pybench::gpu {
namespace {

// The few NVML declarations used, matching nvml.h (tests compare them with it).
typedef struct nvmlDevice_st* nvmlDevice_t;
typedef int nvmlReturn_t;  // NVML_SUCCESS == 0
constexpr int kNvmlP2PCapsIndexNvlink = 2;  // NVML_P2P_CAPS_INDEX_NVLINK
constexpr int kNvmlP2PStatusOk = 0;         // NVML_P2P_STATUS_OK
using InitFn = nvmlReturn_t (*)();
using ShutdownFn = nvmlReturn_t (*)();
using DriverVersionFn = nvmlReturn_t (*)(char* version, unsigned int length);
using HandleByPciFn = nvmlReturn_t (*)(const char* pci_bus_id, nvmlDevice_t* device);
using P2PStatusFn = nvmlReturn_t (*)(nvmlDevice_t d1, nvmlDevice_t d2, int caps_index, int* status);
using CommonAncestorFn = nvmlReturn_t (*)(nvmlDevice_t d1, nvmlDevice_t d2, int* level);

const char* topology_name(int level) {
  switch (level) {
    case 0: return "same board";                       // NVML_TOPOLOGY_INTERNAL
    case 10: return "PCIe (same switch)";               // NVML_TOPOLOGY_SINGLE
    case 20: return "PCIe (multiple switches)";         // NVML_TOPOLOGY_MULTIPLE
    case 30: return "PCIe (same host bridge)";          // NVML_TOPOLOGY_HOSTBRIDGE
    case 40: return "PCIe (same NUMA node, via CPU)";   // NVML_TOPOLOGY_NODE
    case 50: return "PCIe (across NUMA nodes, via SMP interconnect)";  // NVML_TOPOLOGY_SYSTEM
    default: return "unknown";
  }
}

}  // namespace

LinkReport link_report(int devices) {
  LinkReport r;
  auto unknown_pairs = [&] {
    for (int a = 0; a < devices; ++a)
      for (int b = a + 1; b < devices; ++b) r.pairs.push_back({a, b, "unknown"});
  };
  void* h = dlopen("libnvidia-ml.so.1", RTLD_NOW | RTLD_LOCAL);
  if (h == nullptr) {
    const char* why = dlerror();
    r.reason = std::string("NVML not available (") + (why ? why : "libnvidia-ml.so.1 not found") + ")";
    unknown_pairs();
    return r;
  }
  auto sym = [&](const char* name) { return dlsym(h, name); };
  auto init = reinterpret_cast<InitFn>(sym("nvmlInit_v2"));
  auto shutdown = reinterpret_cast<ShutdownFn>(sym("nvmlShutdown"));
  auto driver = reinterpret_cast<DriverVersionFn>(sym("nvmlSystemGetDriverVersion"));
  auto by_pci = reinterpret_cast<HandleByPciFn>(sym("nvmlDeviceGetHandleByPciBusId_v2"));
  auto p2p = reinterpret_cast<P2PStatusFn>(sym("nvmlDeviceGetP2PStatus"));
  auto ancestor = reinterpret_cast<CommonAncestorFn>(sym("nvmlDeviceGetTopologyCommonAncestor"));
  if (!init || !shutdown || !by_pci || !p2p || !ancestor) {
    r.reason = "NVML is too old (missing entry points)";
    unknown_pairs();
    return r;  // the library stays loaded: unloading the driver's library buys nothing
  }
  if (init() != 0) {
    r.reason = "nvmlInit failed (no driver or no permission)";
    unknown_pairs();
    return r;
  }
  r.nvml_available = true;
  char version[96] = {0};
  if (driver && driver(version, sizeof(version)) == 0) r.driver_version = version;
  // Map CUDA indices to NVML handles by PCI bus id: CUDA_VISIBLE_DEVICES and
  // CUDA_DEVICE_ORDER change CUDA's numbering, not NVML's.
  std::vector<nvmlDevice_t> handles(devices, nullptr);
  for (int d = 0; d < devices; ++d) {
    char bus[32] = {0};
    if (cudaDeviceGetPCIBusId(bus, sizeof(bus), d) == cudaSuccess) by_pci(bus, &handles[d]);
    else cudaGetLastError();
  }
  for (int a = 0; a < devices; ++a)
    for (int b = a + 1; b < devices; ++b) {
      std::string link = "unknown";
      if (handles[a] && handles[b]) {
        int status = -1, level = -1;
        if (p2p(handles[a], handles[b], kNvmlP2PCapsIndexNvlink, &status) == 0 && status == kNvmlP2PStatusOk)
          link = "NVLink";
        else if (ancestor(handles[a], handles[b], &level) == 0)
          link = topology_name(level);
      }
      r.pairs.push_back({a, b, link});
    }
  shutdown();
  return r;
}

}  // namespace pybench::gpu
