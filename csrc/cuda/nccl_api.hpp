// NCCL, found at run time: the few types and entry points pybench uses, declared
// here to match NCCL's stable C ABI (nccl.h, 2.x), so the build never needs
// nccl.h and the module imports where NCCL is absent. The library is opened with
// dlopen and every symbol resolved with dlsym (nccl_api.cpp); tests compile this
// header beside the wheel's nccl.h and assert that every value and signature agrees.
#pragma once

#include <climits>
#include <cstddef>
#include <string>

// cudaStream_t without the CUDA headers (it is this pointer type in cuda_runtime_api.h).
typedef struct CUstream_st* cudaStream_t;

namespace pybench::nccl {

struct UniqueId {
  char internal[128];  // NCCL_UNIQUE_ID_BYTES
};
static_assert(sizeof(UniqueId) == 128, "ncclUniqueId is 128 bytes");

typedef struct ncclComm* Comm;  // opaque, as ncclComm_t

enum Result : int {
  kSuccess = 0,
  kUnhandledCudaError = 1,
  kSystemError = 2,
  kInternalError = 3,
  kInvalidArgument = 4,
  kInvalidUsage = 5,
  kRemoteError = 6,
  kInProgress = 7,
};

enum DataType : int {
  kInt8 = 0,
  kUint8 = 1,
  kInt32 = 2,
  kUint32 = 3,
  kInt64 = 4,
  kUint64 = 5,
  kFloat16 = 6,
  kFloat32 = 7,
  kFloat64 = 8,
  kBfloat16 = 9,
};

enum RedOp : int { kSum = 0, kProd = 1, kMax = 2, kMin = 3, kAvg = 4 };

// ncclConfig_t as NCCL 2.14 laid it out (size, magic, version, blocking). The
// struct is versioned and append-only: NCCL copies min(size, its own size) bytes
// and gives every later field its default, so this prefix stays valid in every
// later release (the ABI test checks the offsets against the wheel's nccl.h).
struct Config {
  std::size_t size;
  unsigned int magic;
  unsigned int version;
  int blocking;
};
constexpr unsigned int kConfigMagic = 0xcafebeef;  // NCCL_API_MAGIC
constexpr int kConfigUndefInt = INT_MIN;          // NCCL_CONFIG_UNDEF_INT
constexpr unsigned int kConfigVersion = 21400;    // NCCL_VERSION(2,14,0): the fields above
// NCCL_CONFIG_INITIALIZER for this prefix, with `blocking` set (0 or 1).
inline Config make_config(int blocking) { return Config{sizeof(Config), kConfigMagic, kConfigVersion, blocking}; }

// Function pointer types, one per entry point, with NCCL's exact signatures.
using GetVersionFn = Result (*)(int* version);
using GetUniqueIdFn = Result (*)(UniqueId* id);
using CommInitRankFn = Result (*)(Comm* comm, int nranks, UniqueId id, int rank);
using CommInitAllFn = Result (*)(Comm* comms, int ndev, const int* devlist);
using CommInitRankConfigFn = Result (*)(Comm* comm, int nranks, UniqueId id, int rank, Config* config);
using CommSplitFn = Result (*)(Comm comm, int color, int key, Comm* newcomm, Config* config);
using CommDestroyFn = Result (*)(Comm comm);
using CommAbortFn = Result (*)(Comm comm);
using CommGetAsyncErrorFn = Result (*)(Comm comm, Result* async_error);
using GetErrorStringFn = const char* (*)(Result result);
using GroupStartFn = Result (*)();
using GroupEndFn = Result (*)();
using AllReduceFn = Result (*)(const void* sendbuff, void* recvbuff, std::size_t count, DataType datatype, RedOp op,
                               Comm comm, cudaStream_t stream);
using AllGatherFn = Result (*)(const void* sendbuff, void* recvbuff, std::size_t sendcount, DataType datatype,
                               Comm comm, cudaStream_t stream);
using ReduceScatterFn = Result (*)(const void* sendbuff, void* recvbuff, std::size_t recvcount, DataType datatype,
                                   RedOp op, Comm comm, cudaStream_t stream);
using BroadcastFn = Result (*)(const void* sendbuff, void* recvbuff, std::size_t count, DataType datatype, int root,
                               Comm comm, cudaStream_t stream);
using SendFn = Result (*)(const void* sendbuff, std::size_t count, DataType datatype, int peer, Comm comm,
                          cudaStream_t stream);
using RecvFn = Result (*)(void* recvbuff, std::size_t count, DataType datatype, int peer, Comm comm,
                          cudaStream_t stream);

struct Api {
  GetVersionFn GetVersion;
  GetUniqueIdFn GetUniqueId;
  CommInitRankFn CommInitRank;
  CommInitAllFn CommInitAll;
  CommInitRankConfigFn CommInitRankConfig;  // NCCL >= 2.14; null when older
  CommSplitFn CommSplit;                    // NCCL >= 2.18; null when older
  CommDestroyFn CommDestroy;
  CommAbortFn CommAbort;
  CommGetAsyncErrorFn CommGetAsyncError;
  GetErrorStringFn GetErrorString;
  GroupStartFn GroupStart;
  GroupEndFn GroupEnd;
  AllReduceFn AllReduce;
  AllGatherFn AllGather;
  ReduceScatterFn ReduceScatter;
  BroadcastFn Broadcast;
  SendFn Send;
  RecvFn Recv;
};

struct LoadedLibrary {
  std::string path;  // as given to dlopen
  int version_code;  // ncclGetVersion: e.g. 23203 for 2.32.3
  std::string version;  // "2.32.3"
};

// Opens NCCL at `path` (once per process; asking for another path afterwards
// throws) and resolves every entry point. Throws NativeError naming the path and
// what failed (dlopen's message, or the missing symbol). Needs no GPU.
LoadedLibrary load(const std::string& path);
bool loaded();
const LoadedLibrary& library();
// The resolved entry points; throws NativeError when NCCL has not been loaded.
const Api& api();
// "NCCL 2.32.3 from /path" style version string from a version code.
std::string version_string(int code);

// Throws NativeError "<call> failed: <ncclGetErrorString> (<code>)" on anything but
// ncclSuccess, ncclInProgress included: only for calls on a blocking communicator.
// Calls on a non-blocking one (the set-up, nccl_setup.cpp) accept ncclInProgress
// explicitly and poll ncclCommGetAsyncError for the outcome.
void check(Result r, const char* call, const char* file, int line);
#define NCCL_CHECK(call) ::pybench::nccl::check((call), #call, __FILE__, __LINE__)

}  // namespace pybench::nccl
