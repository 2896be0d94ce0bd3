// The data every rank sends and the exact value every output element must hold.
// Rank r's input element j is 1 + (3r + j) mod M: small integers, so sums over
// all ranks stay exact even in bfloat16 (M shrinks as the world grows), and the
// check can compare bit patterns instead of using a tolerance.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "mpi/collective.hpp"
#include "common/dtypes.hpp"

namespace pybench {

class Pattern {
 public:
  Pattern(DType dtype, RedOp op, int world, bool reduces);

  int period() const { return period_; }
  double value(int rank, std::size_t j) const;
  // Writes value(rank, first + k) for k in [0, n) into buf.
  void fill(void* buf, std::size_t n, int rank, std::size_t first = 0) const;
  // Number of elements in `out` that differ from what `block` expects.
  std::size_t count_wrong(const void* out, const ExpectedBlock& block) const;

 private:
  std::vector<std::uint8_t> encode_period(int source, std::size_t first) const;
  double expected(int source, std::size_t j) const;

  DType dtype_;
  RedOp op_;
  int world_;
  int period_;
  std::size_t elem_;
};

}  // namespace pybench
