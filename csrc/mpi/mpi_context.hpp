// The MPI world this process belongs to: initialisation, rank and host facts,
// and the MPI datatypes / reduction ops for each pybench dtype (user-defined for
// float16 and bfloat16, which MPI-3 has no built-in type for).
#pragma once

#include <mpi.h>

#include <functional>
#include <string>
#include <vector>

#include "common/dtypes.hpp"

namespace pybench {

struct RankInfo {
  int rank = 0;
  int world_size = 1;
  int local_rank = 0;
  int local_size = 1;
  std::string host;
  std::vector<std::string> hosts;  // host of every rank, by rank
};

// Initialises MPI at MPI_THREAD_FUNNELED (a watchdog thread runs beside the main
// thread); throws NativeError when the library provides less.
void mpi_init();
// The thread level MPI_Init_thread provided, by name ("MPI_THREAD_FUNNELED", ...).
std::string mpi_thread_level();
void mpi_finalize();
bool mpi_initialized();
void mpi_abort(int code);
std::string mpi_library_version();  // callable before MPI_Init
RankInfo rank_info();
int world_rank();
int world_size();
// Arms the operation watchdog for this rank and opens the per-host heartbeat table
// (its name agreed over the host's ranks). timeout_s <= 0 disables the timeout.
void start_watchdog(double timeout_s, std::function<void(const std::string&)> on_timeout);
void mpi_barrier();

// "<MPI_Error_string> (MPI error code N)".
std::string mpi_error_string(int rc);
// Throws NativeError naming the failed call, file and line when rc != MPI_SUCCESS.
void mpi_check(int rc, const char* call, const char* file, int line);
#define MPI_CHECK(call) ::pybench::mpi_check((call), #call, __FILE__, __LINE__)

MPI_Datatype mpi_datatype(DType t);
MPI_Op mpi_op(DType t, RedOp op);

// Cross-rank reductions used by the harness to agree on one number.
void allreduce_max_inplace(std::vector<double>& values);
long long allreduce_sum(long long value);

}  // namespace pybench
