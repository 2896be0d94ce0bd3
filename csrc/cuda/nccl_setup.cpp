#include "cuda/nccl_setup.hpp"

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <thread>

#include "common/deadline.hpp"
#include "common/native_error.hpp"

namespace pybench::nccl {
namespace {

using Clock = std::chrono::steady_clock;

std::int64_t now_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(Clock::now().time_since_epoch()).count();
}

std::string seconds_text(double s) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%g", s);
  return buf;
}

// What ncclGetErrorString says of `r`, with the code.
std::string describe(const Api& api, Result r) {
  const char* text = api.GetErrorString ? api.GetErrorString(r) : nullptr;
  return std::string(text ? text : "unknown error") + " (ncclResult " + std::to_string(static_cast<int>(r)) + ")";
}

// Polls `comm` until its state leaves ncclInProgress or the deadline (0: none)
// passes; returns the state, or kInProgress when the deadline passed first.
Result wait_ready(const Api& api, Comm comm, std::int64_t deadline_ns) {
  for (;;) {
    Result state = kInProgress;
    const Result r = api.CommGetAsyncError(comm, &state);
    if (r != kSuccess) return r;
    if (state != kInProgress) return state;
    if (deadline_ns != 0 && now_ns() >= deadline_ns) return kInProgress;
    std::this_thread::sleep_for(std::chrono::duration<double>(kSetupPollS));
  }
}

// Aborts what was created and throws the set-up failure. The set-up communicator
// goes first: aborting it stops a split in flight and joins NCCL's thread, which
// may still write the split's communicator into *work (NCCL's guide: abort the
// parent, then any new communicator returned).
[[noreturn]] void fail(const Api& api, Comm setup, Comm* work, const std::string& where, const std::string& why) {
  if (setup != nullptr) api.CommAbort(setup);
  if (work != nullptr && *work != nullptr) api.CommAbort(*work);
  PYBENCH_FAIL("NCCL communicator set-up (" + where + ") " + why);
}

}  // namespace

SetupResult setup_communicator(const Api& api, int world, const UniqueId& id, int rank, double timeout_s) {
  const std::string where = "rank " + std::to_string(rank) + " of " + std::to_string(world);
  auto blocking_setup = [&] {
    Comm comm = nullptr;
    const Result r = api.CommInitRank(&comm, world, id, rank);
    if (r != kSuccess) PYBENCH_FAIL("ncclCommInitRank (" + where + ") failed: " + describe(api, r));
    return SetupResult{comm, false};
  };
  if (api.CommInitRankConfig == nullptr || api.CommSplit == nullptr) return blocking_setup();  // NCCL < 2.18
  const std::int64_t deadline = deadline_after(now_ns(), timeout_s);
  const std::string late = "did not finish within its timeout of " + seconds_text(timeout_s) + " s: ";
  const std::string hint = " (NCCL_DEBUG=INFO and NCCL_SOCKET_IFNAME help find which)";
  Config nonblocking = make_config(0);
  Comm setup = nullptr;
  Result r = api.CommInitRankConfig(&setup, world, id, rank, &nonblocking);
  // A config this NCCL refuses is refused at once, alike on every rank, before any rank
  // has contacted another: the blocking set-up is then still open to all of them.
  if (r == kInvalidArgument && setup == nullptr) return blocking_setup();
  if (r != kSuccess && r != kInProgress) fail(api, setup, nullptr, where, "failed: " + describe(api, r));
  if (setup == nullptr) PYBENCH_FAIL("NCCL communicator set-up (" + where + ") returned no communicator");
  r = wait_ready(api, setup, deadline);
  if (r == kInProgress)
    fail(api, setup, nullptr, where,
         late + "a rank did not join (not started, stopped, or unable to reach rank 0's address)" + hint);
  if (r != kSuccess) fail(api, setup, nullptr, where, "failed: " + describe(api, r));

  // Every rank has joined: split off the blocking communicator the benchmark runs on.
  Config blocking = make_config(1);
  Comm work = nullptr;
  r = api.CommSplit(setup, 0, rank, &work, &blocking);
  if (r != kSuccess && r != kInProgress) fail(api, setup, &work, where, "ncclCommSplit failed: " + describe(api, r));
  r = wait_ready(api, setup, deadline);  // the split runs on the set-up communicator's thread
  if (r == kInProgress) fail(api, setup, &work, where, "split " + late + "a rank stopped answering" + hint);
  if (r != kSuccess) fail(api, setup, &work, where, "ncclCommSplit failed: " + describe(api, r));
  if (work == nullptr) fail(api, setup, nullptr, where, "ncclCommSplit returned no communicator");
  r = wait_ready(api, work, deadline);
  if (r != kSuccess) fail(api, setup, &work, where, "the split communicator is not ready: " + describe(api, r));
  api.CommDestroy(setup);  // ready (ncclSuccess), so this does not block
  return {work, true};
}

}  // namespace pybench::nccl
