// All-to-all: size is the send buffer; block s of rank r's input goes to rank s.
#include "mpi/collective.hpp"

namespace pybench {
namespace {
std::size_t same(std::size_t count, int) { return count; }
std::vector<ExpectedBlock> expected(std::size_t count, int rank, int world, int) {
  const std::size_t b = count / world;
  std::vector<ExpectedBlock> out;
  for (int s = 0; s < world; ++s) out.push_back({s * b, b, s, rank * b});
  return out;
}
int run(const MpiLaunch& l) {
  const int b = static_cast<int>(l.count / l.world);
  if (l.in_place) return MPI_Alltoall(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, l.recv, b, l.datatype, l.comm);
  return MPI_Alltoall(l.send, b, l.datatype, l.recv, b, l.datatype, l.comm);
}
const CollectiveRegistrar reg({"alltoall", false, true, same, same, expected, run});
}  // namespace
}  // namespace pybench
