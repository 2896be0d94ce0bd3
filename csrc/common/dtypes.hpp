// Element types the harness can move and reduce. fp16 and bf16 are stored as raw
// 16-bit patterns; conversions are exact for the small integers the check uses.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

namespace pybench {

enum class DType { float32, float64, float16, bfloat16, int32 };
enum class RedOp { sum, max, min };

DType parse_dtype(const std::string& name);
RedOp parse_op(const std::string& name);
const char* dtype_name(DType t);
std::size_t dtype_size(DType t);
// Largest N such that every integer in [0, N] is exactly representable, so sums
// of check values stay exact.
double dtype_exact_int_limit(DType t);

float half_to_float(std::uint16_t h);
std::uint16_t float_to_half(float f);
float bf16_to_float(std::uint16_t b);
std::uint16_t float_to_bf16(float f);

// Store / load one element at p as a double.
void store_value(DType t, void* p, double v);
double load_value(DType t, const void* p);

}  // namespace pybench
