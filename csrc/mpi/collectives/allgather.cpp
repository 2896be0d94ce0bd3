// All-gather: size is the output (total) buffer; rank r contributes block r.
#include "mpi/collective.hpp"

namespace pybench {
namespace {
std::size_t block(std::size_t count, int world) { return count / world; }
std::size_t total(std::size_t count, int) { return count; }
std::vector<ExpectedBlock> expected(std::size_t count, int, int world, int) {
  const std::size_t b = count / world;
  std::vector<ExpectedBlock> out;
  for (int s = 0; s < world; ++s) out.push_back({s * b, b, s, 0});
  return out;
}
int run(const MpiLaunch& l) {
  const int b = static_cast<int>(l.count / l.world);
  if (l.in_place)  // this rank's block already sits at recv + rank * b
    return MPI_Allgather(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, l.recv, b, l.datatype, l.comm);
  return MPI_Allgather(l.send, b, l.datatype, l.recv, b, l.datatype, l.comm);
}
const CollectiveRegistrar reg({"allgather", false, true, block, total, expected, run});
}  // namespace
}  // namespace pybench
