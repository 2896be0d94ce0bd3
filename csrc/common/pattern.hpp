// The data every rank sends and the exact value every output element must hold.
// Rank r's input element j is 1 + (3r + j) mod M: small integers, so reductions
// over all ranks stay exact even in bfloat16 (M shrinks as the world grows), and
// the check can compare bit patterns instead of using a tolerance.
//
// This file is the one definition of that rule for every C++ backend: the MPI
// harness uses Pattern below, the CUDA module calls pattern_period /
// pattern_expected (header-only, no MPI or CUDA headers), and pybench._core
// exposes it to Python as check_pattern so the torch backend can be tested
// against it (tests/test_check_pattern_rule.py).
#pragma once

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <vector>

#include "common/dtypes.hpp"

namespace pybench {

// Part of a rank's output that must equal the input pattern of rank `source`
// (or the reduction over all ranks when source == kAllRanks) starting at input
// element `in_offset`.
struct ExpectedBlock {
  static constexpr int kAllRanks = -1;
  std::size_t out_offset;
  std::size_t length;
  int source;
  std::size_t in_offset;
};

// Every reduction any backend offers (MPI: sum, max, min; NCCL adds prod, avg).
enum class PatternOp { sum, prod, max, min, avg };

constexpr int kPatternMaxPeriod = 13;  // prime, so consecutive ranks' patterns never line up

inline PatternOp pattern_op(RedOp op) {
  switch (op) {
    case RedOp::sum: return PatternOp::sum;
    case RedOp::max: return PatternOp::max;
    case RedOp::min: return PatternOp::min;
  }
  return PatternOp::sum;
}

// M for a dtype whose integers in [0, exact_int_limit] are all exact. Only a
// reducing collective shrinks it: sums (and avg, a sum divided) of `world` values
// up to M, and products of `world` values up to M, must stay exact.
inline int pattern_period(double exact_int_limit, PatternOp op, int world, bool reduces) {
  const int w = std::max(world, 1);
  int m = kPatternMaxPeriod;
  if (reduces && (op == PatternOp::sum || op == PatternOp::avg)) {
    m = static_cast<int>(std::min<double>(m, exact_int_limit / w));
  } else if (reduces && op == PatternOp::prod) {
    while (m > 1 && w * std::log2(static_cast<double>(m)) > std::log2(exact_int_limit)) --m;
  }
  return std::max(m, 1);
}

// Input element j of rank `rank`.
inline double pattern_value(int rank, std::size_t j, int period) {
  return 1.0 + static_cast<double>((3ull * static_cast<unsigned>(rank) + j) % static_cast<unsigned>(period));
}

// What output element j of a block from `source` must equal. kAllRanks is the
// reduction over every rank for a reducing collective; a collective that does not
// reduce never asks for it, and gets rank 0's input if it does.
inline double pattern_expected(int source, std::size_t j, int period, PatternOp op, int world, bool reduces) {
  if (source != ExpectedBlock::kAllRanks) return pattern_value(source, j, period);
  if (!reduces) return pattern_value(0, j, period);
  const int w = std::max(world, 1);
  double acc = pattern_value(0, j, period);
  for (int r = 1; r < w; ++r) {
    const double v = pattern_value(r, j, period);
    switch (op) {
      case PatternOp::sum:
      case PatternOp::avg: acc += v; break;
      case PatternOp::prod: acc *= v; break;
      case PatternOp::max: acc = std::max(acc, v); break;
      case PatternOp::min: acc = std::min(acc, v); break;
    }
  }
  return op == PatternOp::avg ? acc / w : acc;
}

// The rule bound to one MPI dtype, op and world: fills send buffers and counts
// wrong output elements by bit pattern.
class Pattern {
 public:
  Pattern(DType dtype, RedOp op, int world, bool reduces);

  int period() const { return period_; }
  double value(int rank, std::size_t j) const { return pattern_value(rank, j, period_); }
  double expected(int source, std::size_t j) const {
    return pattern_expected(source, j, period_, pattern_op(op_), world_, reduces_);
  }
  // expected(source, first + k) for k in [0, n), as stored in the dtype: the
  // values count_wrong compares bit for bit (pybench._core.check_pattern).
  std::vector<double> stored_expected(int source, std::size_t first, std::size_t n) const;
  // Writes value(rank, first + k) for k in [0, n) into buf.
  void fill(void* buf, std::size_t n, int rank, std::size_t first = 0) const;
  // Number of elements in `out` that differ from what `block` expects.
  std::size_t count_wrong(const void* out, const ExpectedBlock& block) const;

 private:
  std::vector<std::uint8_t> encode_period(int source, std::size_t first) const;

  DType dtype_;
  RedOp op_;
  int world_;
  bool reduces_;
  int period_;
  std::size_t elem_;
};

}  // namespace pybench
