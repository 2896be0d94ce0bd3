// All-reduce: every rank ends with the element-wise reduction of all inputs.
#include "mpi/collective.hpp"

namespace pybench {
namespace {
std::size_t same(std::size_t count, int) { return count; }
std::vector<ExpectedBlock> expected(std::size_t count, int, int, int) {
  return {{0, count, ExpectedBlock::kAllRanks, 0}};
}
int run(const MpiLaunch& l) {
  return MPI_Allreduce(l.in_place ? MPI_IN_PLACE : l.send, l.recv, static_cast<int>(l.count), l.datatype, l.op, l.comm);
}
const CollectiveRegistrar reg({"allreduce", true, false, same, same, expected, run});
}  // namespace
}  // namespace pybench
