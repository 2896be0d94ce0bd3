// A collective is a small description plugged into the shared harness
// (harness.cpp), in the manner of nccl-tests: each csrc/mpi/collectives/<name>.cpp
// says how large its buffers are, what every output element must equal, and
// how to launch it on MPI. The harness never names a collective.
#pragma once

#include <mpi.h>

#include <cstddef>
#include <string>
#include <vector>

#include "common/pattern.hpp"

namespace pybench {

// ExpectedBlock (which output must equal which input) is defined with the check
// pattern rule in common/pattern.hpp.
struct MpiLaunch {
  const void* send;
  void* recv;
  std::size_t count;  // elements in the user-facing size (size_bytes / element size)
  MPI_Datatype datatype;
  MPI_Op op;
  MPI_Comm comm;
  int rank;
  int world;
  int root;
  // In place: `send` is MPI_IN_PLACE and `recv` the one buffer, holding the input where MPI's in-place
  // form of the call takes it (CollectiveBench::in_place_offset) and the output afterwards.
  bool in_place;
};

struct CollectiveDesc {
  std::string name;
  bool reduces;
  bool split_by_world;  // buffer holds one block per rank: count must divide by world
  std::size_t (*send_count)(std::size_t count, int world);
  std::size_t (*recv_count)(std::size_t count, int world);
  std::vector<ExpectedBlock> (*expected)(std::size_t count, int rank, int world, int root);
  // Returns an MPI error code.
  int (*run_mpi)(const MpiLaunch& l);
};

// Registry filled by each collective's file at load time.
void register_collective(const CollectiveDesc& desc);
const CollectiveDesc& find_collective(const std::string& name);
std::vector<std::string> collective_names();

struct CollectiveRegistrar {
  explicit CollectiveRegistrar(const CollectiveDesc& desc) { register_collective(desc); }
};

}  // namespace pybench
