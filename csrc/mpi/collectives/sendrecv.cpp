// Send/recv ring, as nccl-tests' sendrecv: each rank sends its buffer to the next
// rank and receives the previous rank's.
#include "mpi/collective.hpp"

namespace pybench {
namespace {
constexpr int kTag = 17;
std::size_t same(std::size_t count, int) { return count; }
std::vector<ExpectedBlock> expected(std::size_t count, int rank, int world, int) {
  return {{0, count, (rank - 1 + world) % world, 0}};
}
int run(const MpiLaunch& l) {
  const int next = (l.rank + 1) % l.world, prev = (l.rank - 1 + l.world) % l.world;
  const int n = static_cast<int>(l.count);
  if (l.in_place)
    return MPI_Sendrecv_replace(l.recv, n, l.datatype, next, kTag, prev, kTag, l.comm, MPI_STATUS_IGNORE);
  return MPI_Sendrecv(l.send, n, l.datatype, next, kTag, l.recv, n, l.datatype, prev, kTag, l.comm,
                      MPI_STATUS_IGNORE);
}
const CollectiveRegistrar reg({"sendrecv", false, false, same, same, expected, run});
}  // namespace
}  // namespace pybench
