// Bindings of common/numa_memory.hpp (numa_module.hpp). No CUDA call here: the
// tests run them on machines without a GPU, against real or fake sysfs trees.
#include "cuda/numa_module.hpp"

#include <pybind11/stl.h>

#include <string>
#include <vector>

#include "common/numa_memory.hpp"

namespace py = pybind11;

namespace pybench::gpu {

void register_numa(py::module_& m) {
  m.def("numa_pci_address", &numa::sysfs_pci_address, py::arg("bus_id"),
        "A PCI bus id as sysfs spells it: '00000000:3B:00.0' -> '0000:3b:00.0'.");
  m.def("numa_node_of_pci", [](const std::string& bus_id, const std::string& sysfs_root) {
    const numa::PciNode n = numa::pci_device_node(bus_id, sysfs_root);
    return py::make_tuple(n.node, n.reason);
  }, py::arg("bus_id"), py::arg("sysfs_root") = numa::kSysfsRoot,
     "(node, reason): the NUMA node of a PCI device from sysfs; -1 and why when none is known.");
  m.def("numa_memory_nodes", &numa::memory_nodes, py::arg("sysfs_root") = numa::kSysfsRoot,
        "NUMA nodes that have memory, ascending ([0] on a kernel without NUMA).");
  m.def("numa_host_placement", [](const std::string& bus_id, const std::string& sysfs_root) {
    const numa::HostPlacement p = numa::host_placement_for(bus_id, sysfs_root);
    return py::make_tuple(p.node, p.bind, p.description);
  }, py::arg("bus_id"), py::arg("sysfs_root") = numa::kSysfsRoot,
     "(node, bind, description): where the copy benchmark puts a device's pinned host buffers.");
  m.def("numa_placed_pages", [](int node, std::size_t size_bytes, const std::string& sysfs_root) {
    std::vector<int> nodes;
    {
      py::gil_scoped_release nogil;
      const numa::NodeMemory memory(size_bytes, node, sysfs_root);
      nodes = numa::page_nodes(memory.data(), memory.bytes());
    }
    return nodes;
  }, py::arg("node"), py::arg("size_bytes"), py::arg("sysfs_root") = numa::kSysfsRoot,
     "Allocate size_bytes placed on `node` (mbind MPOL_PREFERRED, pages touched), return the node of each page "
     "(move_pages; negative: -errno), and free it. sysfs_root only changes which nodes count as existing.");
}

}  // namespace pybench::gpu
