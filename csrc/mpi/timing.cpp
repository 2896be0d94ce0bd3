#include "mpi/timing.hpp"

#include <chrono>
#include <string>

#include "mpi/mpi_context.hpp"
#include "common/native_error.hpp"
#include "common/watchdog.hpp"

namespace pybench {
namespace {

[[noreturn]] void fail_in_loop(int rc, const std::string& label, int sample, int n_samples, int op, int ops) {
  PYBENCH_FAIL("an MPI operation failed inside the timed loop of " + label + " (sample " + std::to_string(sample + 1) +
               " of " + std::to_string(n_samples) + ", operation " + std::to_string(op + 1) + " of " +
               std::to_string(ops) + "): " + mpi_error_string(rc));
}

}  // namespace

Samples time_samples(int n_samples, int ops_per_sample, const std::function<int()>& op, const std::string& label) {
  PYBENCH_REQUIRE(n_samples > 0 && ops_per_sample > 0, "samples and operations per sample must be positive");
  using clock = std::chrono::steady_clock;
  Samples out;
  out.per_op_s.resize(n_samples);
  const auto wall0 = clock::now();
  for (int s = 0; s < n_samples; ++s) {
    // One guard per sample: it disarms however the sample ends, so a caller that
    // catches the error below is not killed by the watchdog later. A batch lasts
    // ~1 ms, so the deadline is per operation in effect.
    WatchGuard guard(label);
    MPI_CHECK(MPI_Barrier(MPI_COMM_WORLD));
    const auto t0 = clock::now();
    for (int k = 0; k < ops_per_sample; ++k) {
      // The first failure is the one to report; the operations after it would only fail too.
      const int rc = op();
      if (rc != MPI_SUCCESS) fail_in_loop(rc, label, s, n_samples, k, ops_per_sample);
    }
    const auto t1 = clock::now();
    out.per_op_s[s] = std::chrono::duration<double>(t1 - t0).count() / ops_per_sample;
  }
  std::vector<double> wall{std::chrono::duration<double>(clock::now() - wall0).count()};
  allreduce_max_inplace(out.per_op_s);
  allreduce_max_inplace(wall);
  out.wall_s = wall[0];
  return out;
}

void warm_up(int n, const std::function<int()>& op, const std::string& label) {
  const std::string what = "warm-up of " + label;
  for (int i = 0; i < n; ++i) {
    WatchGuard guard(what);
    MPI_CHECK(op());
  }
  WatchGuard guard(what);
  MPI_CHECK(MPI_Barrier(MPI_COMM_WORLD));
}

}  // namespace pybench
