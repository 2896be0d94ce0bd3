// A fake NCCL (built as libnccl.so for the harness tests on CPUs): every entry
// point pybench resolves, communicators as tags, no GPU. Each communicator
// counts its aborts and destroys; FAKE_NCCL_ASYNC_RC=r makes
// ncclCommGetAsyncError itself fail with result r. Relaxed atomics only (see
// fake_cudart.cpp: no synchronisation that would hide a race from TSan).
#include <atomic>
#include <cstdint>
#include <cstdlib>

namespace {
constexpr int kMaxComms = 16;
std::atomic<int> g_aborts[kMaxComms];
std::atomic<int> g_destroys[kMaxComms];
std::atomic<int> g_comms{0};
using Comm = void*;
int index_of(Comm c) { return static_cast<int>(reinterpret_cast<std::uintptr_t>(c) >> 4) - 1; }
}  // namespace

extern "C" {
int ncclGetVersion(int* v) {
  *v = 22703;
  return 0;
}
int ncclGetUniqueId(void* id) { return 0; }
int ncclCommInitRank(Comm* c, int, ...) { return 7; }  // not used by the scenarios
int ncclCommInitAll(Comm* comms, int n, const int*) {
  for (int i = 0; i < n; ++i) comms[i] = reinterpret_cast<Comm>(std::uintptr_t(16 * (1 + g_comms.fetch_add(1))));
  return 0;
}
int ncclCommDestroy(Comm c) {
  g_destroys[index_of(c)].fetch_add(1, std::memory_order_relaxed);
  return 0;
}
int ncclCommAbort(Comm c) {
  g_aborts[index_of(c)].fetch_add(1, std::memory_order_relaxed);
  return 0;
}
int ncclCommGetAsyncError(Comm, int* state) {
  const char* rc = std::getenv("FAKE_NCCL_ASYNC_RC");
  if (rc != nullptr) return std::atoi(rc);
  *state = 0;
  return 0;
}
const char* ncclGetErrorString(int r) { return r == 0 ? "no error" : "fake NCCL error"; }
int ncclGroupStart() { return 0; }
int ncclGroupEnd() { return 0; }
int ncclAllReduce(const void*, void*, std::size_t, int, int, Comm, void*) { return 0; }
int ncclAllGather(const void*, void*, std::size_t, int, Comm, void*) { return 0; }
int ncclReduceScatter(const void*, void*, std::size_t, int, int, Comm, void*) { return 0; }
int ncclBroadcast(const void*, void*, std::size_t, int, int, Comm, void*) { return 0; }
int ncclSend(const void*, std::size_t, int, int, Comm, void*) { return 0; }
int ncclRecv(void*, std::size_t, int, int, Comm, void*) { return 0; }

// For the driver: how often communicator i (0-based, in creation order) was aborted / destroyed.
int fake_nccl_aborts(int i) { return g_aborts[i].load(std::memory_order_relaxed); }
int fake_nccl_destroys(int i) { return g_destroys[i].load(std::memory_order_relaxed); }
}
