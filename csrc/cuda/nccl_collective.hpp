// A collective on NCCL is one small description plugged into the shared GPU
// harness (nccl_harness.cpp), as csrc/collective.hpp is for MPI and as
// nccl-tests does it: buffer sizes, what every output element must equal,
// where the data sits when run in place, and how to launch it. The harness
// never names a collective; the descriptions live in nccl_collectives.cpp.
#pragma once

#include <cstddef>
#include <string>
#include <vector>

#include "cuda/gpu_pattern.hpp"
#include "cuda/nccl_api.hpp"

namespace pybench::gpu {

struct NcclLaunch {
  const void* send;
  void* recv;
  std::size_t count;  // elements in the user-facing size (size_bytes / element size)
  nccl::DataType dtype;
  std::size_t elem_bytes;
  nccl::RedOp op;
  nccl::Comm comm;
  cudaStream_t stream;
  int rank;
  int world;
  int root;
};

struct NcclCollectiveDesc {
  std::string name;
  bool reduces;
  bool split_by_world;  // buffers hold one block per rank: count must divide by world
  std::size_t (*send_count)(std::size_t count, int world);
  std::size_t (*recv_count)(std::size_t count, int world);
  // In place (nccl-tests' convention): one buffer of max(send, recv) elements, with
  // send and recv at these element offsets in it (every collective has them; a null
  // one is refused when a bench is made in place).
  void (*in_place_offsets)(std::size_t count, int rank, int world, std::size_t* send_off, std::size_t* recv_off);
  // Whether the in-place result is defined and checked. All-to-all and send/recv in place (nccl-tests'
  // convention, timed so that both blocks hold figures) send from the buffer they receive into: what
  // lands there depends on the order of the transfers, so nccl-tests reports no #wrong for them, nor we.
  bool in_place_checked;
  std::vector<Block> (*expected)(std::size_t count, int rank, int world, int root);
  nccl::Result (*run)(const NcclLaunch& l);
};

const NcclCollectiveDesc& find_nccl_collective(const std::string& name);
std::vector<std::string> nccl_collective_names();

}  // namespace pybench::gpu
