// Reduce-scatter: size is the input buffer; rank r ends with block r of the reduction.
#include "mpi/collective.hpp"

namespace pybench {
namespace {
std::size_t total(std::size_t count, int) { return count; }
std::size_t block(std::size_t count, int world) { return count / world; }
std::vector<ExpectedBlock> expected(std::size_t count, int rank, int world, int) {
  const std::size_t b = count / world;
  return {{0, b, ExpectedBlock::kAllRanks, rank * b}};
}
int run(const MpiLaunch& l) {
  // In place the whole input is in recv and the result lands in its first block.
  return MPI_Reduce_scatter_block(l.in_place ? MPI_IN_PLACE : l.send, l.recv, static_cast<int>(l.count / l.world), l.datatype, l.op, l.comm);
}
const CollectiveRegistrar reg({"reducescatter", true, true, total, block, expected, run});
}  // namespace
}  // namespace pybench
