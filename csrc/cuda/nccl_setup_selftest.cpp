#include "cuda/nccl_setup_selftest.hpp"

#include <cstdint>
#include <mutex>

#include "common/native_error.hpp"
#include "cuda/nccl_setup.hpp"

namespace pybench::nccl {
namespace {

// The fake's communicators are tags, never dereferenced.
Comm const kSetup = reinterpret_cast<Comm>(std::uintptr_t{0x5e7});
Comm const kWork = reinterpret_cast<Comm>(std::uintptr_t{0x3041});

// One scenario at a time (function pointers cannot capture): guarded by g_mutex.
std::mutex g_mutex;
SetupScenario g_s;
SetupTrace* g_trace = nullptr;
int g_polls = 0;
bool g_splitting = false;
Comm* g_split_out = nullptr;

const char* name_of(Comm c) { return c == kSetup ? "setup" : c == kWork ? "work" : "?"; }

Result init_rank(Comm* comm, int, UniqueId, int) {
  g_trace->calls.push_back("InitRank");
  *comm = kWork;
  return kSuccess;
}
Result init_rank_config(Comm* comm, int, UniqueId, int, Config* cfg) {
  g_trace->calls.push_back("InitRankConfig(blocking=" + std::to_string(cfg->blocking) + ")");
  if (g_s.refuses_config) {
    *comm = nullptr;
    return kInvalidArgument;
  }
  *comm = kSetup;
  return kInProgress;
}
Result split(Comm comm, int, int, Comm* out, Config* cfg) {
  g_trace->calls.push_back(std::string("Split(") + name_of(comm) + ", blocking=" + std::to_string(cfg->blocking) + ")");
  g_splitting = true;
  g_polls = 0;
  g_split_out = out;  // written when the split completes, as NCCL's thread does
  return kInProgress;
}
// The state of `comm`: in progress for the scenario's number of polls, then its end state.
Result async_error(Comm comm, Result* state) {
  if (comm == kWork) {
    *state = kSuccess;
    return kSuccess;
  }
  const int polls = g_splitting ? g_s.split_polls : g_s.init_polls;
  const int end = g_splitting ? g_s.split_error : g_s.init_error;
  if (polls < 0 || g_polls < polls) {
    ++g_polls;
    *state = kInProgress;
    return kSuccess;
  }
  if (g_splitting && end == 0 && g_split_out != nullptr) *g_split_out = kWork;
  *state = static_cast<Result>(end);
  return kSuccess;
}
Result abort_comm(Comm comm) {
  g_trace->calls.push_back(std::string("Abort(") + name_of(comm) + ")");
  return kSuccess;
}
Result destroy(Comm comm) {
  g_trace->calls.push_back(std::string("Destroy(") + name_of(comm) + ")");
  return kSuccess;
}
const char* error_string(Result r) { return r == kSystemError ? "unhandled system error" : "some NCCL error"; }

}  // namespace

SetupTrace setup_selftest(const SetupScenario& scenario, int rank, int world, double timeout_s) {
  std::lock_guard<std::mutex> lock(g_mutex);
  SetupTrace trace;
  g_s = scenario, g_trace = &trace, g_polls = 0, g_splitting = false, g_split_out = nullptr;
  Api api{};
  api.CommInitRank = init_rank;
  api.CommInitRankConfig = scenario.legacy ? nullptr : init_rank_config;
  api.CommSplit = scenario.legacy ? nullptr : split;
  api.CommGetAsyncError = async_error;
  api.CommAbort = abort_comm;
  api.CommDestroy = destroy;
  api.GetErrorString = error_string;
  try {
    const SetupResult r = setup_communicator(api, world, UniqueId{}, rank, timeout_s);
    trace.bounded = r.bounded;
    trace.calls.push_back(std::string("-> ") + name_of(r.comm));
  } catch (const NativeError& e) {
    trace.error = e.what();
  }
  g_trace = nullptr;
  return trace;
}

}  // namespace pybench::nccl
