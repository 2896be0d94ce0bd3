// For tests on machines without a GPU: setup_communicator (nccl_setup.hpp) driven
// by a fake NCCL whose set-up and split finish after a given number of polls,
// never, or with an error. Records every call, in order.
#pragma once

#include <string>
#include <vector>

namespace pybench::nccl {

struct SetupScenario {
  int init_polls = 0;    // polls answered ncclInProgress before the set-up is ready; < 0: never
  int init_error = 0;    // the state it then reaches (0: ncclSuccess)
  int split_polls = 0;   // the same for the split
  int split_error = 0;
  bool legacy = false;   // an NCCL without ncclCommInitRankConfig / ncclCommSplit
  bool refuses_config = false;  // ncclCommInitRankConfig answers ncclInvalidArgument at once
};

struct SetupTrace {
  std::vector<std::string> calls;  // "InitRankConfig(blocking=0)", "Abort(setup)", ...
  std::string error;               // the NativeError's text; empty when set-up succeeded
  bool bounded = false;
};

SetupTrace setup_selftest(const SetupScenario& scenario, int rank, int world, double timeout_s);

}  // namespace pybench::nccl
