// pybench._cuda: the CUDA module, built only when a CUDA compiler is found (or
// PYBENCH_CUDA=ON). cudart is linked statically, so importing it needs no CUDA
// toolkit on the user's machine, and with no driver it reports "no GPU". NCCL
// and NVML are opened at run time (nccl_api.cpp, nvml_links.cpp), so neither is
// needed to build or import it. This file only binds; long calls release the GIL.
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <cstring>
#include <memory>

#include "common/native_error.hpp"
#include "cuda/copy_bench.hpp"
#include "cuda/gpu_probe.hpp"
#include "cuda/nccl_api.hpp"
#include "cuda/nccl_harness.hpp"
#include "cuda/nccl_setup_selftest.hpp"
#include "cuda/numa_module.hpp"
#include "cuda/nvml_links.hpp"

namespace py = pybind11;
using namespace pybench;

namespace {

py::tuple samples_to_python(const gpu::Samples& s) { return py::make_tuple(s.per_op_s, s.wall_s); }

void register_errors(py::module_& m) {
  // This module has its own copy of NativeError; map it onto pybench.errors.NativeError too.
  // pybind11's safe static (as csrc/mpi/module.cpp): stored once under the GIL, never destroyed.
  PYBIND11_CONSTINIT static py::gil_safe_call_once_and_store<py::object> native_error;
  native_error.call_once_and_store_result(
      [] { return py::module_::import("pybench.errors").attr("NativeError"); });
  py::register_local_exception_translator([](std::exception_ptr p) {
    try {
      if (p) std::rethrow_exception(p);
    } catch (const NativeError& e) {
      py::set_error(native_error.get_stored(), e.what());
    }
  });
  m.def("raise_native_error", [](const std::string& msg) { PYBENCH_FAIL(msg); },
        "Raise a NativeError from the CUDA module (used by tests of the exception mapping).");
}

void register_probe(py::module_& m) {
  m.def("probe", [] {
    const auto p = gpu::probe();
    py::list devices;
    for (const auto& d : p.devices) {
      py::dict dd;
      dd["index"] = d.index;
      dd["name"] = d.name;
      dd["total_memory_bytes"] = d.total_memory_bytes;
      dd["compute_capability"] = std::to_string(d.compute_major) + "." + std::to_string(d.compute_minor);
      dd["multiprocessors"] = d.multiprocessors;
      dd["pci_address"] = d.pci_address;
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
  m.def("kernel_selftest", &gpu::kernel_selftest, py::arg("device") = 0, py::arg("n") = 1 << 20,
        py::call_guard<py::gil_scoped_release>());
  m.def("compiled_architectures", &gpu::compiled_architectures);
  m.def("link_report", [](int devices) {
    gpu::LinkReport r;
    {
      py::gil_scoped_release nogil;
      r = gpu::link_report(devices);
    }
    py::dict d;
    d["nvml_available"] = r.nvml_available;
    d["reason"] = r.reason;
    d["driver_version"] = r.driver_version;
    py::list pairs;
    for (const auto& p : r.pairs) pairs.append(py::make_tuple(p.a, p.b, p.link));
    d["pairs"] = pairs;
    return d;
  }, py::arg("devices"), "NVLink/PCIe link of every pair of the first `devices` GPUs, from NVML ('unknown' without).");
}

py::dict library_dict(const nccl::LoadedLibrary& lib) {
  py::dict d;
  d["path"] = lib.path;
  d["version"] = lib.version;
  d["version_code"] = lib.version_code;
  return d;
}

void register_nccl(py::module_& m) {
  m.def("nccl_load", [](const std::string& path) { return library_dict(nccl::load(path)); }, py::arg("path"),
        "dlopen NCCL at `path` and resolve its entry points; returns path, version, version_code. Needs no GPU.");
  m.def("nccl_loaded", []() -> py::object {
    if (!nccl::loaded()) return py::none();
    return library_dict(nccl::library());
  });
  m.def("nccl_version_string", &nccl::version_string, py::arg("code"));
  m.def("nccl_unique_id", [] {
    nccl::UniqueId id{};
    {
      py::gil_scoped_release nogil;
      NCCL_CHECK(nccl::api().GetUniqueId(&id));
    }
    return py::bytes(id.internal, sizeof(id.internal));
  }, "A fresh ncclUniqueId (128 bytes) for rank 0 to hand to every rank.");
  m.def("nccl_collective_names", &gpu::nccl_collective_names);
  m.def("nccl_setup_selftest", [](int init_polls, int init_error, int split_polls, int split_error, bool legacy,
                                  bool refuses_config, double timeout_s) {
    // Communicator set-up on a fake NCCL (no GPU): returns the calls in order, the error text or None, and
    // whether the deadline applied.
    nccl::SetupTrace t;
    {
      py::gil_scoped_release nogil;
      t = nccl::setup_selftest({init_polls, init_error, split_polls, split_error, legacy, refuses_config}, 1, 4,
                              timeout_s);
    }
    return py::make_tuple(t.calls, t.error.empty() ? py::object(py::none()) : py::object(py::str(t.error)), t.bounded);
  }, py::arg("init_polls"), py::arg("init_error") = 0, py::arg("split_polls") = 0, py::arg("split_error") = 0,
     py::arg("legacy") = false, py::arg("refuses_config") = false, py::arg("timeout_s") = 5.0);
  m.def("pattern_table", [](const std::string& dtype, const std::string& op, int world, bool reduces, int source,
                            std::size_t in_offset) {
    const gpu::DTypeInfo* dt = nullptr;
    for (const auto& t : gpu::dtype_table())
      if (dtype == t.name) dt = &t;
    PYBENCH_REQUIRE(dt != nullptr, "unknown dtype '" + dtype + "'");
    nccl::RedOp rop = nccl::kSum;
    bool found = false;
    for (const auto& o : gpu::op_table())
      if (op == o.name) rop = o.nccl, found = true;
    PYBENCH_REQUIRE(found, "unknown op '" + op + "'");
    const gpu::GpuPattern pattern(*dt, rop, world, reduces);
    const auto t = pattern.table(gpu::Block{0, 0, source, in_offset});
    return py::make_tuple(std::vector<double>(t.values, t.values + t.period), t.period, t.rel_tolerance);
  }, py::arg("dtype"), py::arg("op"), py::arg("world"), py::arg("reduces"), py::arg("source"), py::arg("in_offset") = 0,
     "The values the device check expects for a block (source -1: the reduction over all ranks); for tests.");
  m.def("nccl_dtypes", [] {
    py::dict d;
    for (const auto& t : gpu::dtype_table()) d[t.name] = t.size;
    return d;
  });
  m.def("nccl_ops", [] {
    py::list l;
    for (const auto& o : gpu::op_table()) l.append(o.name);
    return l;
  });

  py::class_<gpu::NcclWorld, std::shared_ptr<gpu::NcclWorld>>(m, "NcclWorld")
      .def(py::init([](std::vector<int> devices, double timeout_s) {
             py::gil_scoped_release nogil;
             return std::make_shared<gpu::NcclWorld>(devices, timeout_s);
           }), py::arg("devices"), py::arg("timeout_s") = 30.0,
           "One process driving `devices` (ncclCommInitAll): ranks 0..n-1 in that order.")
      .def(py::init([](int rank, int world, int device, py::bytes unique_id, double timeout_s) {
             const std::string raw = unique_id;
             PYBENCH_REQUIRE(raw.size() == sizeof(nccl::UniqueId),
                             "an NCCL unique id is 128 bytes, got " + std::to_string(raw.size()));
             nccl::UniqueId id{};
             std::memcpy(id.internal, raw.data(), sizeof(id.internal));
             py::gil_scoped_release nogil;
             return std::make_shared<gpu::NcclWorld>(rank, world, device, id, timeout_s);
           }), py::arg("rank"), py::arg("world"), py::arg("device"), py::arg("unique_id"), py::arg("timeout_s") = 30.0,
           "This process is `rank` of `world` on `device` (ncclCommInitRank).")
      .def_property_readonly("world", &gpu::NcclWorld::world)
      .def_property_readonly("multi_process", &gpu::NcclWorld::multi_process)
      .def_property_readonly("devices", [](gpu::NcclWorld& w) {
        std::vector<int> d;
        for (const auto& m : w.members()) d.push_back(m.device);
        return d;
      })
      .def_property("timeout_s", &gpu::NcclWorld::timeout_s, &gpu::NcclWorld::set_timeout_s)
      .def("max_over_ranks", &gpu::NcclWorld::max_over_ranks_ll, py::arg("values"),
           py::call_guard<py::gil_scoped_release>())
      .def("abort", &gpu::NcclWorld::abort, py::call_guard<py::gil_scoped_release>())
      .def_property_readonly("aborted", &gpu::NcclWorld::aborted)
      .def_property_readonly("setup_bounded", &gpu::NcclWorld::setup_bounded)
      .def("pair_times", &gpu::NcclWorld::pair_times, py::arg("src"), py::arg("dst"), py::arg("size_bytes"),
           py::arg("n_samples"), py::arg("ops_per_sample"), py::arg("pingpong") = false,
           py::call_guard<py::gil_scoped_release>());

  py::class_<gpu::NcclBench>(m, "NcclBench")
      .def(py::init([](std::shared_ptr<gpu::NcclWorld> world, const std::string& collective, const std::string& dtype,
                       const std::string& op, std::size_t size_bytes, int root, bool in_place,
                       const std::string& timing) {
             py::gil_scoped_release nogil;
             return std::make_unique<gpu::NcclBench>(std::move(world), collective, dtype, op, size_bytes, root,
                                                     in_place, timing);
           }), py::arg("world"), py::arg("collective"), py::arg("dtype"), py::arg("op"), py::arg("size_bytes"),
           py::arg("root") = 0, py::arg("in_place") = false, py::arg("timing") = "batched")
      .def("warmup", &gpu::NcclBench::warmup, py::arg("n"), py::call_guard<py::gil_scoped_release>())
      .def("check", &gpu::NcclBench::check, py::arg("iters"), py::call_guard<py::gil_scoped_release>())
      .def("measure", [](gpu::NcclBench& b, int n, int ops) {
            gpu::Samples s;
            {
              py::gil_scoped_release nogil;
              s = b.measure(n, ops);
            }
            return samples_to_python(s);
          }, py::arg("n_samples"), py::arg("ops_per_sample"))
      .def_property_readonly("count", &gpu::NcclBench::count)
      .def_property_readonly("send_bytes", &gpu::NcclBench::send_bytes)
      .def_property_readonly("recv_bytes", &gpu::NcclBench::recv_bytes)
      .def_property_readonly("device_bytes", &gpu::NcclBench::device_bytes)
      .def_property_readonly("rotation_slots", &gpu::NcclBench::rotation_slots)
      .def_property_readonly("slot_stride", &gpu::NcclBench::slot_stride)
      .def("latched", &gpu::NcclBench::latched, py::arg("ops_per_sample"),
           "Whether a sample of this many operations is held by the spin-kernel latch until enqueued.");

  m.def("copy_times", [](const std::string& kind, int src, int dst, std::size_t size_bytes, int n_samples, int ops,
                         const std::string& engine, bool bidirectional) {
    gpu::CopyResult r;
    {
      py::gil_scoped_release nogil;
      r = gpu::copy_times(kind, src, dst, size_bytes, n_samples, ops, engine, bidirectional);
    }
    return py::make_tuple(r.per_copy_s, r.peer_access, r.wrong_bytes, r.host_node, r.host_placement);
  }, py::arg("kind"), py::arg("src"), py::arg("dst"), py::arg("size_bytes"), py::arg("n_samples"),
     py::arg("ops_per_sample"), py::arg("engine") = "ce", py::arg("bidirectional") = false,
     "Seconds per copy (one per sample), whether peer access was on, destination bytes that differ, the host buffer's NUMA node (-1: none or unknown) and how it was placed.");
  m.def("teardown_order_selftest", [](int n_graphs, int released_first) {
    // The world's abort path on stand-ins (no GPU): graphs registered, one released
    // by its bench, then abort_after_graphs. Returns what happened, in order.
    std::vector<std::string> log;
    gpu::GraphRegistry graphs;
    std::vector<int> ids;
    for (int i = 0; i < n_graphs; ++i)
      ids.push_back(graphs.add([&log, i] { log.push_back("destroy graph " + std::to_string(i)); }));
    if (released_first >= 0 && released_first < n_graphs) graphs.release(ids[released_first]);
    gpu::abort_after_graphs(graphs, [&log, &graphs] {
      log.push_back("abort communicators (" + std::to_string(graphs.live()) + " graphs live)");
    });
    for (int id : ids) graphs.release(id);  // a bench freeing its graphs after the abort: nothing happens
    return log;
  }, py::arg("n_graphs"), py::arg("released_first") = -1, "For tests: the graph/communicator tear-down order.");
}

}  // namespace

PYBIND11_MODULE(_cuda, m) {
  m.doc() = "pybench CUDA module: device probe, NCCL harness (NCCL loaded at run time), copy bandwidth";
  register_errors(m);  // first: the others' NativeError is translated through it
  gpu::register_numa(m);
  register_probe(m);
  register_nccl(m);
}
