// Communicator set-up that a rank which never joins cannot hold forever.
//
// ncclCommInitRank blocks until every rank has joined; nothing can interrupt it.
// NCCL's documented way out (user guide, "Fault Tolerance") is a non-blocking
// communicator: ncclCommInitRankConfig with blocking = 0 returns at once, the
// caller polls ncclCommGetAsyncError against its own deadline and, past it,
// ncclCommAbort frees the half-built communicator. A non-blocking communicator
// would then hand every later group to a new NCCL thread (ncclGroupEnd returns
// ncclInProgress), which adds host time to every timed operation; so once every
// rank has joined, the work communicator is split off it with blocking = 1
// (every rank is present by then) and the set-up communicator is destroyed.
//
// NCCL older than 2.18 lacks ncclCommSplit (2.14: ncclCommInitRankConfig): the
// set-up is then blocking, as before, and `bounded` says so.
//
// Pure host code against the Api table, so tests drive it with a fake NCCL.
#pragma once

#include <string>

#include "cuda/nccl_api.hpp"

namespace pybench::nccl {

struct SetupResult {
  Comm comm = nullptr;   // the blocking communicator the benchmark uses
  bool bounded = false;  // whether the deadline applied (false on NCCL < 2.18)
};

// Builds this process's communicator (`rank` of `world`, on the current CUDA
// device) within `timeout_s` seconds (<= 0: no deadline). On a deadline or an
// NCCL error, aborts whatever it created and throws NativeError in one line
// naming the rank, the world and what to check.
SetupResult setup_communicator(const Api& api, int world, const UniqueId& id, int rank, double timeout_s);

// The poll interval while waiting (NCCL's own example yields in a loop; 100 us keeps
// a waiting rank off the CPU its peers may need).
constexpr double kSetupPollS = 100e-6;

}  // namespace pybench::nccl
