// The check pattern on the GPU side: the same exact integers as csrc/pattern.cpp
// (rank r's input element j is 1 + (3r + j) mod M, M = 13 or smaller so that a
// reduction over every rank stays an exact integer in the dtype), extended to the
// element types and ops NCCL offers beyond the core's (int8/uint8/uint32/int64/
// uint64; prod, avg). Host-only: it computes the small per-block tables the
// device check kernel compares against (gpu_kernels.cu). Free of CUDA headers.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <string>
#include <vector>

#include "cuda/nccl_api.hpp"

namespace pybench::gpu {

// Part of a rank's output that must equal the input of rank `source` (or the
// reduction over all ranks when source == kAllRanks) from input element
// `in_offset` on: the ExpectedBlock of csrc/collective.hpp, without MPI.
struct Block {
  static constexpr int kAllRanks = -1;
  std::size_t out_offset;
  std::size_t length;
  int source;
  std::size_t in_offset;
};

constexpr int kMaxPeriod = 13;  // prime, so consecutive ranks' patterns never line up

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
      : dtype_(dtype), op_(op), world_(std::max(world, 1)), reduces_(reduces) {
    int m = kMaxPeriod;
    if (reduces && (op == nccl::kSum || op == nccl::kAvg)) {
      m = static_cast<int>(std::min<double>(m, dtype.exact_int_limit / world_));
    } else if (reduces && op == nccl::kProd) {
      // largest m with m^world exact: products of values in [1, m]
      while (m > 1 && world_ * std::log2(static_cast<double>(m)) > std::log2(dtype.exact_int_limit)) --m;
    }
    period_ = std::max(m, 1);
  }

  int period() const { return period_; }

  double value(int rank, std::size_t j) const {
    return 1.0 + static_cast<double>((3ull * static_cast<unsigned>(rank) + j) % static_cast<unsigned>(period_));
  }

  double expected(int source, std::size_t j) const {
    if (source != Block::kAllRanks || !reduces_) return value(source == Block::kAllRanks ? 0 : source, j);
    double acc = value(0, j);
    for (int r = 1; r < world_; ++r) {
      const double v = value(r, j);
      switch (op_) {
        case nccl::kSum:
        case nccl::kAvg: acc += v; break;
        case nccl::kProd: acc *= v; break;
        case nccl::kMax: acc = std::max(acc, v); break;
        case nccl::kMin: acc = std::min(acc, v); break;
      }
    }
    return op_ == nccl::kAvg ? acc / world_ : acc;
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
