// Broadcast: every rank ends with the root's buffer. MPI broadcasts in place, so
// the root sends straight from its send buffer and the others receive into recv.
#include "mpi/collective.hpp"

namespace pybench {
namespace {
std::size_t same(std::size_t count, int) { return count; }
std::vector<ExpectedBlock> expected(std::size_t count, int rank, int, int root) {
  if (rank == root) return {};  // the root's data never leaves its send buffer
  return {{0, count, root, 0}};
}
int run(const MpiLaunch& l) {
  // In place every rank uses its one buffer: the root's holds the input.
  void* buf = l.rank == l.root && !l.in_place ? const_cast<void*>(l.send) : l.recv;
  return MPI_Bcast(buf, static_cast<int>(l.count), l.datatype, l.root, l.comm);
}
const CollectiveRegistrar reg({"broadcast", false, false, same, same, expected, run});
}  // namespace
}  // namespace pybench
