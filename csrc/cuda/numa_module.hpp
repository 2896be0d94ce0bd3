// Python bindings of the NUMA placement unit (common/numa_memory.hpp), part of
// pybench._cuda: the copy benchmark's host-buffer placement, testable on CPU.
#pragma once

#include <pybind11/pybind11.h>

namespace pybench::gpu {

// Adds numa_pci_address, numa_node_of_pci, numa_memory_nodes,
// numa_host_placement and numa_placed_pages to `m`.
void register_numa(pybind11::module_& m);

}  // namespace pybench::gpu
