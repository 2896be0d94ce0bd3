// Host memory on a chosen NUMA node, without libnuma: which node a PCI device
// (a GPU) hangs off, from sysfs; anonymous memory placed on a node (mbind
// MPOL_PREFERRED) with every page touched; and the node each page really landed on
// (move_pages as a query), so placement is verified, not assumed. The copy
// benchmark puts its pinned host buffers on the GPU's node, as nvbandwidth does:
// on a two-socket server a buffer on the far socket crosses the socket link and
// h2d/d2h read low. No CUDA here, so all of it is tested on CPU machines.
#pragma once

#include <cstddef>
#include <string>
#include <vector>

#include "common/native_error.hpp"

namespace pybench::numa {

// Tests point every sysfs reader at a fake tree; the default is the real one.
inline const std::string kSysfsRoot = "/sys";

// The system refused a NUMA memory-policy call (EPERM/ENOSYS: a container's
// seccomp profile without CAP_SYS_NICE, a kernel without NUMA). Callers that can
// do without placement catch this one; any other failure is a plain NativeError.
class PolicyRefused : public NativeError {
 public:
  using NativeError::NativeError;
};

// "0000:3B:00.0" or NVML's "00000000:3b:00.0" -> "0000:3b:00.0", sysfs's spelling.
// NativeError if bus_id is not a PCI address (domain:bus:device.function).
std::string sysfs_pci_address(const std::string& bus_id);

// The NUMA node of a PCI device, -1 when none is known; `reason` says why not.
struct PciNode {
  int node;
  std::string reason;  // empty when node >= 0
};
// From <sysfs_root>/bus/pci/devices/<address>/numa_node: -1 there (firmware gives
// no affinity), a missing file and content that is not a number all give -1.
PciNode pci_device_node(const std::string& bus_id, const std::string& sysfs_root = kSysfsRoot);

// Nodes that have memory (<root>/devices/system/node/has_memory, else online),
// ascending; {0} on a kernel without NUMA support (no node folder at all).
std::vector<int> memory_nodes(const std::string& sysfs_root = kSysfsRoot);

// Where a device's pinned host buffers go. bind: on `node` with NodeMemory; else
// the caller's usual allocation (node is then the only node, or -1 when unknown).
// `description` begins "gpu-local node N", "one NUMA node" or "no NUMA affinity known".
struct HostPlacement {
  int node;
  bool bind;
  std::string description;
};
HostPlacement host_placement_for(const std::string& pci_bus_id, const std::string& sysfs_root = kSysfsRoot);

// Anonymous memory (mmap) placed on one NUMA node (mbind MPOL_PREFERRED) with every
// page touched, so it is resident before any timing. Owns the mapping: unmapped on
// destruction and on every failure inside the constructor. A node without memory is
// refused (NativeError); a refused mbind throws PolicyRefused. PREFERRED, not BIND:
// a node short of memory spills pages elsewhere (callers count them with the page
// query and say so) rather than waking the OOM killer on a shared host.
class NodeMemory {
 public:
  NodeMemory(std::size_t bytes, int node, const std::string& sysfs_root = kSysfsRoot);
  ~NodeMemory();
  NodeMemory(const NodeMemory&) = delete;
  NodeMemory& operator=(const NodeMemory&) = delete;
  NodeMemory(NodeMemory&& other) noexcept;
  NodeMemory& operator=(NodeMemory&& other) noexcept;

  void* data() const { return data_; }
  std::size_t bytes() const { return bytes_; }  // the mapping's length: the request rounded up to pages
  int node() const { return node_; }

 private:
  void* data_ = nullptr;
  std::size_t bytes_ = 0;
  int node_ = -1;
};

// The node of each page of [addr, addr + bytes) (move_pages with no target nodes
// only reports); a negative entry is -errno for that page (-ENOENT: not present).
// PolicyRefused where the system refuses move_pages.
std::vector<int> page_nodes(const void* addr, std::size_t bytes);

}  // namespace pybench::numa
