// pybench._core: wires the C++ pieces into one Python module. Each piece lives in
// its own file; this file only binds them. Long calls release the GIL.
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include "common/buffers.hpp"
#include "mpi/collective.hpp"
#include "common/dtypes.hpp"
#include "mpi/harness.hpp"
#include "mpi/mpi_context.hpp"
#include "common/native_error.hpp"
#include "common/pattern.hpp"
#include "mpi/p2p.hpp"
#include "common/watchdog.hpp"

namespace py = pybind11;
using namespace pybench;

namespace {

// The timed loop runs without the GIL; only the conversion of its samples needs it.
template <class Bench>
py::tuple measure(Bench& bench, int n_samples, int ops_per_sample) {
  Samples s;
  {
    py::gil_scoped_release nogil;
    s = bench.measure(n_samples, ops_per_sample);
  }
  return py::make_tuple(s.per_op_s, s.wall_s);
}

void register_errors(py::module_& m) {
  // Map the C++ exception onto pybench.errors.NativeError so callers catch one family.
  // pybind11's safe static: stored once under the GIL and never destroyed, so
  // nothing touches a Python object after the interpreter has gone.
  PYBIND11_CONSTINIT static py::gil_safe_call_once_and_store<py::object> native_error;
  native_error.call_once_and_store_result(
      [] { return py::module_::import("pybench.errors").attr("NativeError"); });
  py::register_exception_translator([](std::exception_ptr p) {
    try {
      if (p) std::rethrow_exception(p);
    } catch (const NativeError& e) {
      py::set_error(native_error.get_stored(), e.what());
    }
  });
  m.def("raise_native_error", [](const std::string& msg) { PYBENCH_FAIL(msg); }, py::arg("message"),
        "Raise a NativeError from C++ (used by tests of the exception mapping).");
}

void register_mpi(py::module_& m) {
  m.def("mpi_init", &mpi_init, "Initialise MPI in this process (idempotent).", py::call_guard<py::gil_scoped_release>());
  m.def("mpi_finalize", &mpi_finalize);
  m.def("mpi_initialized", &mpi_initialized);
  m.def("mpi_abort", &mpi_abort, py::arg("code"));
  m.def("mpi_library_version", &mpi_library_version);
  m.def("mpi_thread_level", &mpi_thread_level,
        "The thread level MPI provided (at least MPI_THREAD_FUNNELED; mpi_init fails otherwise).");
  m.def("barrier", &mpi_barrier, py::call_guard<py::gil_scoped_release>());
  m.def("allreduce_max_ints", [](std::vector<long long> v) {
    // Lets every rank agree on flags (any rank failed? which?) before going on.
    WatchGuard guard("agreeing on the run's state");
    if (!v.empty())
      MPI_CHECK(MPI_Allreduce(MPI_IN_PLACE, v.data(), static_cast<int>(v.size()), MPI_LONG_LONG, MPI_MAX, MPI_COMM_WORLD));
    return v;
  }, py::arg("values"), py::call_guard<py::gil_scoped_release>());
  m.def("start_watchdog", [](double timeout_s, py::object on_timeout) {
    // Kept alive for the life of the process: the watchdog may call it from its
    // own thread at any time, and it must never be destroyed without the GIL.
    auto* cb = new py::object(std::move(on_timeout));
    py::gil_scoped_release nogil;
    start_watchdog(timeout_s, [cb](const std::string& msg) {
      py::gil_scoped_acquire gil;
      try {
        if (!cb->is_none()) (*cb)(msg);
      } catch (const py::error_already_set&) {
        // nothing more can be done on the way out
      }
    });
  }, py::arg("timeout_s"), py::arg("on_timeout") = py::none(),
     "Arm the per-operation timeout (seconds, <= 0 disables) and the heartbeat table.");
  m.def("watchdog_deadline_ns", &Watchdog::deadline_after, py::arg("now_ns"), py::arg("timeout_s"),
        "The watchdog's deadline for an operation started at now_ns (0: disabled; saturates at 2**63 - 1).");
  m.def("rank_info", [] {
    RankInfo i;
    {
      py::gil_scoped_release nogil;
      i = rank_info();
    }
    py::dict d;
    d["rank"] = i.rank;
    d["world_size"] = i.world_size;
    d["local_rank"] = i.local_rank;
    d["local_size"] = i.local_size;
    d["host"] = i.host;
    d["hosts"] = i.hosts;
    return d;
  });
}

void register_benches(py::module_& m) {
  m.def("collective_names", &collective_names);
  m.def("host_allocation", &host_allocation_description, py::arg("huge_pages") = true);
  py::class_<CollectiveBench>(m, "CollectiveBench")
      .def(py::init<const std::string&, const std::string&, const std::string&, std::size_t, int, bool, bool>(),
           py::arg("collective"), py::arg("dtype"), py::arg("op"), py::arg("size_bytes"), py::arg("root") = 0,
           py::arg("huge_pages") = true, py::arg("in_place") = false,
           py::call_guard<py::gil_scoped_release>())
      .def("warmup", &CollectiveBench::warmup, py::arg("n"), py::call_guard<py::gil_scoped_release>())
      .def("check", &CollectiveBench::check, py::arg("iters"), py::call_guard<py::gil_scoped_release>())
      .def("measure", &measure<CollectiveBench>, py::arg("n_samples"), py::arg("ops_per_sample"),
           "Time n_samples batches of ops_per_sample operations: (per-op seconds, max over ranks; wall seconds).")
      .def_property_readonly("send_bytes", &CollectiveBench::send_bytes)
      .def_property_readonly("huge_page_fraction", &CollectiveBench::huge_page_fraction)
      .def_property_readonly("recv_bytes", &CollectiveBench::recv_bytes)
      .def_property_readonly("count", &CollectiveBench::count);
  py::class_<P2PBench>(m, "P2PBench")
      .def(py::init<const std::string&, std::size_t, int, bool>(), py::arg("test"), py::arg("size_bytes"),
           py::arg("window") = 64, py::arg("huge_pages") = true, py::call_guard<py::gil_scoped_release>())
      .def("warmup", &P2PBench::warmup, py::arg("n"), py::call_guard<py::gil_scoped_release>())
      .def("check", &P2PBench::check, py::arg("iters"), py::call_guard<py::gil_scoped_release>())
      .def("measure", &measure<P2PBench>, py::arg("n_samples"), py::arg("ops_per_sample"),
           "Time n_samples batches of ops_per_sample operations: (per-message seconds, max over ranks; wall seconds).")
      .def_property_readonly("window", &P2PBench::window)
      .def_property_readonly("huge_page_fraction", &P2PBench::huge_page_fraction);
}

void register_build_info(py::module_& m) {
  m.def("build_info", [] {
    py::dict d;
    d["mpi"] = PYBENCH_BUILD_MPI;
    d["mpi_cxx_compiler"] = PYBENCH_BUILD_MPI_CXX;
    d["cuda_module"] = PYBENCH_BUILD_CUDA_MODULE;
    d["cuda_architectures"] = PYBENCH_BUILD_CUDA_ARCHS;
    d["cxx_compiler"] = PYBENCH_BUILD_CXX;
    return d;
  });
}

void register_dtypes(py::module_& m) {
  // Exposed so tests can prove the 16-bit conversions exact where the check relies on them.
  m.def("half_roundtrip", [](float f) { return half_to_float(float_to_half(f)); }, py::arg("value"));
  m.def("bf16_roundtrip", [](float f) { return bf16_to_float(float_to_bf16(f)); }, py::arg("value"));
  // The one check-pattern rule (common/pattern.hpp), so every backend can be tested against it.
  m.def("check_pattern", [](const std::string& dtype, const std::string& op, int world, int rank, std::size_t count,
                            std::size_t first, bool reduces) {
    PYBENCH_REQUIRE(world >= 1, "world must be at least 1");
    PYBENCH_REQUIRE(rank >= ExpectedBlock::kAllRanks && rank < world,
                    "rank must be -1 (the reduction over all ranks) or a rank of the world");
    PYBENCH_REQUIRE(count <= (std::size_t(1) << 24), "count must be at most 16777216 (the values repeat every 13)");
    return Pattern(parse_dtype(dtype), parse_op(op), world, reduces).stored_expected(rank, first, count);
  }, py::arg("dtype"), py::arg("op"), py::arg("world"), py::arg("rank"), py::arg("count"), py::arg("first") = 0,
     py::arg("reduces") = true,
     "Input elements first..first+count-1 of `rank` (-1: their reduction over all ranks), as stored in the dtype.");
}

}  // namespace

PYBIND11_MODULE(_core, m) {
  m.doc() = "pybench native core: MPI backend, collective harness, point-to-point tests";
  register_errors(m);
  register_mpi(m);
  register_benches(m);
  register_dtypes(m);
  register_build_info(m);
}
