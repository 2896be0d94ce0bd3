// The six collectives on NCCL, one small description each (see nccl_collective.hpp).
// Sizes follow nccl-tests: all-gather's size is the output (total) buffer,
// reduce-scatter's the input buffer, all-to-all's the send buffer.
#include <map>

#include "common/native_error.hpp"
#include "cuda/nccl_collective.hpp"

namespace pybench::gpu {
namespace {

using nccl::api;

std::size_t same(std::size_t count, int) { return count; }
std::size_t block(std::size_t count, int world) { return count / world; }
void at_start(std::size_t, int, int, std::size_t* s, std::size_t* r) { *s = *r = 0; }

// ---- all-reduce: every rank ends with the element-wise reduction of all inputs.
std::vector<Block> allreduce_expected(std::size_t count, int, int, int) {
  return {{0, count, Block::kAllRanks, 0}};
}
nccl::Result allreduce_run(const NcclLaunch& l) {
  return api().AllReduce(l.send, l.recv, l.count, l.dtype, l.op, l.comm, l.stream);
}

// ---- all-gather: rank r contributes block r of the output; in place it sends from there.
std::vector<Block> allgather_expected(std::size_t count, int, int world, int) {
  const std::size_t b = count / world;
  std::vector<Block> out;
  for (int s = 0; s < world; ++s) out.push_back({s * b, b, s, 0});
  return out;
}
void allgather_in_place(std::size_t count, int rank, int world, std::size_t* s, std::size_t* r) {
  *s = rank * (count / world);
  *r = 0;
}
nccl::Result allgather_run(const NcclLaunch& l) {
  return api().AllGather(l.send, l.recv, l.count / l.world, l.dtype, l.comm, l.stream);
}

// ---- reduce-scatter: rank r ends with block r of the reduction; in place it lands there.
std::vector<Block> reducescatter_expected(std::size_t count, int rank, int world, int) {
  const std::size_t b = count / world;
  return {{0, b, Block::kAllRanks, rank * b}};
}
void reducescatter_in_place(std::size_t count, int rank, int world, std::size_t* s, std::size_t* r) {
  *s = 0;
  *r = rank * (count / world);
}
nccl::Result reducescatter_run(const NcclLaunch& l) {
  return api().ReduceScatter(l.send, l.recv, l.count / l.world, l.dtype, l.op, l.comm, l.stream);
}

// ---- broadcast: every rank (the root included, out of place) ends with the root's buffer.
std::vector<Block> broadcast_expected(std::size_t count, int, int, int root) { return {{0, count, root, 0}}; }
nccl::Result broadcast_run(const NcclLaunch& l) {
  return api().Broadcast(l.send, l.recv, l.count, l.dtype, l.root, l.comm, l.stream);
}

// ---- all-to-all as grouped send/recv (NCCL has no all-to-all call): block s of
// rank r's input goes to rank s.
std::vector<Block> alltoall_expected(std::size_t count, int rank, int world, int) {
  const std::size_t b = count / world;
  std::vector<Block> out;
  for (int s = 0; s < world; ++s) out.push_back({s * b, b, s, rank * b});
  return out;
}
nccl::Result alltoall_run(const NcclLaunch& l) {
  const std::size_t b = l.count / l.world;
  const std::size_t elem_bytes = l.elem_bytes;
  nccl::Result r = api().GroupStart();
  for (int p = 0; p < l.world && r == nccl::kSuccess; ++p) {
    r = api().Send(static_cast<const char*>(l.send) + p * b * elem_bytes, b, l.dtype, p, l.comm, l.stream);
    if (r == nccl::kSuccess)
      r = api().Recv(static_cast<char*>(l.recv) + p * b * elem_bytes, b, l.dtype, p, l.comm, l.stream);
  }
  const nccl::Result e = api().GroupEnd();
  return r != nccl::kSuccess ? r : e;
}

// ---- send/recv ring, as nccl-tests' sendrecv: send to the next rank, receive from the previous.
std::vector<Block> sendrecv_expected(std::size_t count, int rank, int world, int) {
  return {{0, count, (rank - 1 + world) % world, 0}};
}
nccl::Result sendrecv_run(const NcclLaunch& l) {
  const int next = (l.rank + 1) % l.world, prev = (l.rank - 1 + l.world) % l.world;
  nccl::Result r = api().GroupStart();
  if (r == nccl::kSuccess) r = api().Send(l.send, l.count, l.dtype, next, l.comm, l.stream);
  if (r == nccl::kSuccess) r = api().Recv(l.recv, l.count, l.dtype, prev, l.comm, l.stream);
  const nccl::Result e = api().GroupEnd();
  return r != nccl::kSuccess ? r : e;
}

const std::map<std::string, NcclCollectiveDesc>& table() {
  static const std::map<std::string, NcclCollectiveDesc> t = {
      {"allreduce", {"allreduce", true, false, same, same, at_start, true, allreduce_expected, allreduce_run}},
      {"allgather",
       {"allgather", false, true, block, same, allgather_in_place, true, allgather_expected, allgather_run}},
      {"reducescatter",
       {"reducescatter", true, true, same, block, reducescatter_in_place, true, reducescatter_expected,
        reducescatter_run}},
      {"broadcast", {"broadcast", false, false, same, same, at_start, true, broadcast_expected, broadcast_run}},
      {"alltoall", {"alltoall", false, true, same, same, at_start, false, alltoall_expected, alltoall_run}},
      {"sendrecv", {"sendrecv", false, false, same, same, at_start, false, sendrecv_expected, sendrecv_run}},
  };
  return t;
}

}  // namespace

const NcclCollectiveDesc& find_nccl_collective(const std::string& name) {
  const auto& t = table();
  auto it = t.find(name);
  if (it == t.end()) {
    std::string known;
    for (const auto& kv : t) known += (known.empty() ? "" : ", ") + kv.first;
    PYBENCH_FAIL("unknown collective '" + name + "'; known: " + known);
  }
  return it->second;
}

std::vector<std::string> nccl_collective_names() {
  std::vector<std::string> names;
  for (const auto& kv : table()) names.push_back(kv.first);
  return names;
}

}  // namespace pybench::gpu
