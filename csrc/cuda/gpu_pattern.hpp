// The check pattern on the GPU side: the rule itself is csrc/common/pattern.hpp
// (rank r's input element j is 1 + (3r + j) mod M, M = 13 or smaller so that a
// reduction over every rank stays an exact integer in the dtype), shared with the
// MPI harness; here it is bound to NCCL's element types and ops (int8/uint8/uint32/
// int64/uint64; prod, avg) and turned into the small per-block tables the device
// check kernel compares against (gpu_kernels.cu). Host-only; free of CUDA headers.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <string>
#include <vector>

#include "common/pattern.hpp"
#include "cuda/nccl_api.hpp"

namespace pybench::gpu {

// Part of a rank's output that must equal the input of rank `source` (or the
// reduction over all ranks when source == kAllRanks): the one ExpectedBlock.
using Block = ExpectedBlock;

constexpr int kMaxPeriod = kPatternMaxPeriod;

// Expected values of one block, one period long: element k of the block must
// equal values[k % period]. Passed to the check kernel by value.
struct PeriodTable {
  double values[kMaxPeriod];
  int period;
  double rel_tolerance;  // 0: exact (bit-equal for every integer the pattern makes)
};

struct DTypeInfo {
  const char* name;
  nccl::DataType nccl;
  std::size_t size;
  double exact_int_limit;  // every integer in [0, limit] is exact
  bool floating;
  int mantissa_bits;       // for avg's tolerance
};

inline const std::vector<DTypeInfo>& dtype_table() {
  static const std::vector<DTypeInfo> t = {
      {"float32", nccl::kFloat32, 4, 16777216.0, true, 23},
      {"float64", nccl::kFloat64, 8, 9007199254740992.0, true, 52},
      {"float16", nccl::kFloat16, 2, 2048.0, true, 10},
      {"bfloat16", nccl::kBfloat16, 2, 256.0, true, 7},
      {"int32", nccl::kInt32, 4, 2147483647.0, false, 0},
      {"int8", nccl::kInt8, 1, 127.0, false, 0},
      // 254, not 255: the 0xff fill of an unwritten uint8 output must never be a valid value
      {"uint8", nccl::kUint8, 1, 254.0, false, 0},
      {"uint32", nccl::kUint32, 4, 4294967294.0, false, 0},
      {"int64", nccl::kInt64, 8, 9007199254740992.0, false, 0},
      {"uint64", nccl::kUint64, 8, 9007199254740992.0, false, 0},
  };
  return t;
}

struct OpInfo {
  const char* name;
  nccl::RedOp nccl;
};

inline const std::vector<OpInfo>& op_table() {
  static const std::vector<OpInfo> t = {
      {"sum", nccl::kSum}, {"prod", nccl::kProd}, {"max", nccl::kMax}, {"min", nccl::kMin}, {"avg", nccl::kAvg}};
  return t;
}

class GpuPattern {
 public:
  GpuPattern(const DTypeInfo& dtype, nccl::RedOp op, int world, bool reduces)
      : dtype_(dtype), op_(op), world_(std::max(world, 1)), reduces_(reduces),
        period_(pattern_period(dtype.exact_int_limit, pattern_op_of(op), world_, reduces)) {}

  int period() const { return period_; }

  // The one rule of csrc/common/pattern.hpp, shared with the MPI harness and the torch backend.
  double value(int rank, std::size_t j) const { return pattern_value(rank, j, period_); }

  double expected(int source, std::size_t j) const {
    return pattern_expected(source, j, period_, pattern_op_of(op_), world_, reduces_);
  }

  static PatternOp pattern_op_of(nccl::RedOp op) {
    switch (op) {
      case nccl::kSum: return PatternOp::sum;
      case nccl::kProd: return PatternOp::prod;
      case nccl::kMax: return PatternOp::max;
      case nccl::kMin: return PatternOp::min;
      case nccl::kAvg: return PatternOp::avg;
    }
    return PatternOp::sum;
  }

  PeriodTable table(const Block& b) const {
    PeriodTable t{};
    t.period = period_;
    for (int k = 0; k < period_; ++k) t.values[k] = expected(b.source, b.in_offset + k);
    // avg divides (NCCL may pre-multiply each input by 1/world, rounding each term):
    // allow about one ulp per rank where the quotient is not exact; every other op is exact.
    t.rel_tolerance = reduces_ && op_ == nccl::kAvg && b.source == Block::kAllRanks
                          ? std::ldexp(static_cast<double>(world_ + 2), -dtype_.mantissa_bits)
                          : 0.0;
    return t;
  }

 private:
  DTypeInfo dtype_;
  nccl::RedOp op_;
  int world_;
  bool reduces_;
  int period_;
};

}  // namespace pybench::gpu
