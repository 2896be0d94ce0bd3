// pybench._cuda: the CUDA module, built only when a CUDA compiler is found (or
// PYBENCH_CUDA=ON). cudart is linked statically, so importing it needs no CUDA
// toolkit on the user's machine, and with no driver it reports "no GPU".
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include "gpu_probe.hpp"

namespace py = pybind11;

PYBIND11_MODULE(_cuda, m) {
  m.doc() = "pybench CUDA module: device probe and device kernels";
  m.def("probe", [] {
    const auto p = pybench::gpu::probe();
    py::list devices;
    for (const auto& d : p.devices) {
      py::dict dd;
      dd["index"] = d.index;
      dd["name"] = d.name;
      dd["total_memory_bytes"] = d.total_memory_bytes;
      dd["compute_capability"] = std::to_string(d.compute_major) + "." + std::to_string(d.compute_minor);
      dd["multiprocessors"] = d.multiprocessors;
      devices.append(dd);
    }
    py::dict out;
    out["device_count"] = p.device_count;
    out["no_gpu_reason"] = p.no_gpu_reason;
    out["runtime_version"] = p.runtime_version;
    out["driver_version"] = p.driver_version;
    out["devices"] = devices;
    return out;
  });
  m.def("kernel_selftest", &pybench::gpu::kernel_selftest, py::arg("device") = 0, py::arg("n") = 1 << 20,
        py::call_guard<py::gil_scoped_release>());
  m.def("compiled_architectures", &pybench::gpu::compiled_architectures);
}
