#include "mpi/timing.hpp"

#include <chrono>
#include <string>

#include "mpi/mpi_context.hpp"
#include "common/native_error.hpp"
#include "common/watchdog.hpp"

namespace pybench {

Samples time_samples(int n_samples, int ops_per_sample, const std::function<int()>& op, const std::string& label) {
  PYBENCH_REQUIRE(n_samples > 0 && ops_per_sample > 0, "samples and operations per sample must be positive");
  using clock = std::chrono::steady_clock;
  Samples out;
  out.per_op_s.resize(n_samples);
  const auto wall0 = clock::now();
  auto& watchdog = Watchdog::instance();
  for (int s = 0; s < n_samples; ++s) {
    watchdog.arm(label);  // a batch lasts ~1 ms, so the deadline is per operation in effect
    MPI_CHECK(MPI_Barrier(MPI_COMM_WORLD));
    int rc = MPI_SUCCESS;
    const auto t0 = clock::now();
    for (int k = 0; k < ops_per_sample; ++k) rc |= op();
    const auto t1 = clock::now();
    watchdog.disarm();
    if (rc != MPI_SUCCESS) PYBENCH_FAIL("an MPI operation failed inside the timed loop (code " + std::to_string(rc) + ")");
    out.per_op_s[s] = std::chrono::duration<double>(t1 - t0).count() / ops_per_sample;
  }
  std::vector<double> wall{std::chrono::duration<double>(clock::now() - wall0).count()};
  allreduce_max_inplace(out.per_op_s);
  allreduce_max_inplace(wall);
  out.wall_s = wall[0];
  return out;
}

}  // namespace pybench
