#include "cuda/nccl_api.hpp"

#include <dlfcn.h>

#include <mutex>

#include "common/native_error.hpp"

namespace pybench::nccl {
namespace {

std::mutex g_mutex;
Api g_api{};
LoadedLibrary g_lib{};
bool g_loaded = false;

template <typename Fn>
void resolve(void* handle, const std::string& path, const char* name, Fn& out) {
  dlerror();
  void* sym = dlsym(handle, name);
  if (sym == nullptr)
    PYBENCH_FAIL("NCCL library " + path + " has no symbol " + name + "; it is not NCCL 2.x or is too old "
                 "(pybench needs NCCL >= 2.7 for ncclSend/ncclRecv)");
  out = reinterpret_cast<Fn>(sym);
}

// Entry points newer releases added: null when this NCCL lacks them (callers fall back).
template <typename Fn>
void resolve_optional(void* handle, const char* name, Fn& out) {
  dlerror();
  out = reinterpret_cast<Fn>(dlsym(handle, name));
}

}  // namespace

std::string version_string(int code) {
  // NCCL >= 2.9 encodes major*10000 + minor*100 + patch; older releases major*1000 + minor*100 + patch.
  const int major = code >= 10000 ? code / 10000 : code / 1000;
  const int minor = code >= 10000 ? (code % 10000) / 100 : (code % 1000) / 100;
  const int patch = code % 100;
  return std::to_string(major) + "." + std::to_string(minor) + "." + std::to_string(patch);
}

LoadedLibrary load(const std::string& path) {
  std::lock_guard<std::mutex> lock(g_mutex);
  if (g_loaded) {
    if (path == g_lib.path) return g_lib;
    PYBENCH_FAIL("NCCL is already loaded from " + g_lib.path + " in this process; cannot switch to " + path);
  }
  // RTLD_GLOBAL: NCCL's plugins (net, tuner) resolve NCCL symbols from the global scope.
  void* handle = dlopen(path.c_str(), RTLD_NOW | RTLD_GLOBAL);
  if (handle == nullptr) {
    const char* why = dlerror();
    PYBENCH_FAIL("cannot load NCCL from " + path + ": " + (why ? why : "dlopen failed"));
  }
  Api a{};
  resolve(handle, path, "ncclGetVersion", a.GetVersion);
  resolve(handle, path, "ncclGetUniqueId", a.GetUniqueId);
  resolve(handle, path, "ncclCommInitRank", a.CommInitRank);
  resolve(handle, path, "ncclCommInitAll", a.CommInitAll);
  resolve_optional(handle, "ncclCommInitRankConfig", a.CommInitRankConfig);
  resolve_optional(handle, "ncclCommSplit", a.CommSplit);
  resolve(handle, path, "ncclCommDestroy", a.CommDestroy);
  resolve(handle, path, "ncclCommAbort", a.CommAbort);
  resolve(handle, path, "ncclCommGetAsyncError", a.CommGetAsyncError);
  resolve(handle, path, "ncclGetErrorString", a.GetErrorString);
  resolve(handle, path, "ncclGroupStart", a.GroupStart);
  resolve(handle, path, "ncclGroupEnd", a.GroupEnd);
  resolve(handle, path, "ncclAllReduce", a.AllReduce);
  resolve(handle, path, "ncclAllGather", a.AllGather);
  resolve(handle, path, "ncclReduceScatter", a.ReduceScatter);
  resolve(handle, path, "ncclBroadcast", a.Broadcast);
  resolve(handle, path, "ncclSend", a.Send);
  resolve(handle, path, "ncclRecv", a.Recv);
  int code = 0;
  const Result r = a.GetVersion(&code);
  if (r != kSuccess) PYBENCH_FAIL("ncclGetVersion failed in " + path + " (error " + std::to_string(r) + ")");
  g_api = a;
  g_lib = LoadedLibrary{path, code, version_string(code)};
  g_loaded = true;
  return g_lib;
}

bool loaded() {
  std::lock_guard<std::mutex> lock(g_mutex);
  return g_loaded;
}

const LoadedLibrary& library() {
  if (!loaded()) PYBENCH_FAIL("NCCL has not been loaded in this process (pybench.nccl_lib.load_nccl does it)");
  return g_lib;
}

const Api& api() {
  if (!loaded()) PYBENCH_FAIL("NCCL has not been loaded in this process (pybench.nccl_lib.load_nccl does it)");
  return g_api;
}

void check(Result r, const char* call, const char* file, int line) {
  // kInProgress is an error here: every call checked this way goes to the blocking work
  // communicator, where it means NCCL did not finish what the caller relies on being done.
  // The non-blocking set-up communicator's calls handle it themselves (nccl_setup.cpp).
  if (r == kSuccess) return;
  const char* text = g_loaded && g_api.GetErrorString ? g_api.GetErrorString(r) : "unknown error";
  throw_native(std::string(call) + " failed: " + text + " (ncclResult " + std::to_string(static_cast<int>(r)) + ")",
               file, line);
}

}  // namespace pybench::nccl
