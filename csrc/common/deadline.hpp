// One rule for turning a timeout in seconds into nanoseconds, for every watchdog
// (the MPI core's thread, the CUDA module's waits and latch kernel): a timeout
// <= 0 or NaN disables it; one too large to count in int64 nanoseconds (1e12 s,
// inf) saturates at "never" instead of overflowing, which would put the deadline
// in the past and fire at once (issue 16 case 5). Header-only, no dependencies.
#pragma once

#include <algorithm>
#include <cstdint>
#include <limits>

namespace pybench {

constexpr std::int64_t kNeverNs = std::numeric_limits<std::int64_t>::max();
constexpr double kLongestTimeoutS = 1e9;  // ~31 years: anything longer is "never"; 1e18 ns fits int64

// The span of a timeout in ns: 0 when disabled, kNeverNs when too long to matter.
inline std::int64_t timeout_span_ns(double timeout_s) {
  if (!(timeout_s > 0)) return 0;
  if (timeout_s >= kLongestTimeoutS) return kNeverNs;
  return std::max<std::int64_t>(static_cast<std::int64_t>(timeout_s * 1e9), 1);
}

// The deadline of an operation started at now_ns (a steady clock, >= 0): 0 when
// disabled, saturated at kNeverNs.
inline std::int64_t deadline_after(std::int64_t now_ns, double timeout_s) {
  const std::int64_t span = timeout_span_ns(timeout_s);
  if (span == 0) return 0;
  return now_ns > kNeverNs - span ? kNeverNs : now_ns + span;
}

}  // namespace pybench
