// The one timed loop every benchmark uses. A sample is a batch of `ops` back-to-back
// operations started together after a barrier; its time per operation is the
// batch time / ops, and the sample's value is the slowest rank's (the synchronous
// cost). ops == 1 is the per-op mode. Nothing but the operation runs between the
// two clock reads.
#pragma once

#include <functional>
#include <string>
#include <vector>

namespace pybench {

struct Samples {
  std::vector<double> per_op_s;  // one value per sample, max over ranks
  double wall_s = 0;             // wall time of the whole call, max over ranks
};

// `op` returns an MPI error code; the first failure stops the loop and is raised
// as NativeError with its MPI error string (the watchdog is disarmed first).
// `label` names the operation for the watchdog ("allreduce of 1048576 B").
Samples time_samples(int n_samples, int ops_per_sample, const std::function<int()>& op, const std::string& label);

// `n` untimed operations, each under the watchdog, then a barrier: the first calls of a
// communicator pay connection set-up and must never be timed. MPI errors raise NativeError.
void warm_up(int n, const std::function<int()>& op, const std::string& label);

}  // namespace pybench
