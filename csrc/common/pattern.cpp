#include "common/pattern.hpp"

#include <cstring>

namespace pybench {

Pattern::Pattern(DType dtype, RedOp op, int world, bool reduces)
    : dtype_(dtype),
      op_(op),
      world_(world),
      reduces_(reduces),
      period_(pattern_period(dtype_exact_int_limit(dtype), pattern_op(op), world, reduces)),
      elem_(dtype_size(dtype)) {}

// One period of encoded values starting at input element `first`; every block is
// periodic with this period, so fill and check work from this small table.
std::vector<std::uint8_t> Pattern::encode_period(int source, std::size_t first) const {
  std::vector<std::uint8_t> table(period_ * elem_);
  for (int k = 0; k < period_; ++k) store_value(dtype_, table.data() + k * elem_, expected(source, first + k));
  return table;
}

std::vector<double> Pattern::stored_expected(int source, std::size_t first, std::size_t n) const {
  std::vector<double> out(n);
  std::vector<std::uint8_t> elem(elem_);
  for (std::size_t k = 0; k < n; ++k) {
    store_value(dtype_, elem.data(), expected(source, first + k));
    out[k] = load_value(dtype_, elem.data());
  }
  return out;
}

void Pattern::fill(void* buf, std::size_t n, int rank, std::size_t first) const {
  const auto table = encode_period(rank, first);
  auto* out = static_cast<std::uint8_t*>(buf);
  const std::size_t chunk = table.size();
  std::size_t done = 0;
  for (; done + period_ <= n; done += period_) std::memcpy(out + done * elem_, table.data(), chunk);
  if (done < n) std::memcpy(out + done * elem_, table.data(), (n - done) * elem_);
}

std::size_t Pattern::count_wrong(const void* out, const ExpectedBlock& block) const {
  const auto table = encode_period(block.source, block.in_offset);
  const auto* p = static_cast<const std::uint8_t*>(out) + block.out_offset * elem_;
  std::size_t wrong = 0;
  int phase = 0;
  for (std::size_t k = 0; k < block.length; ++k) {
    if (std::memcmp(p + k * elem_, table.data() + phase * elem_, elem_) != 0) ++wrong;
    if (++phase == period_) phase = 0;
  }
  return wrong;
}

}  // namespace pybench
