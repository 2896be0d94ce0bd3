#include "common/dtypes.hpp"

#include <cmath>
#include <cstring>

#include "common/native_error.hpp"

namespace pybench {

DType parse_dtype(const std::string& name) {
  if (name == "float32") return DType::float32;
  if (name == "float64") return DType::float64;
  if (name == "float16") return DType::float16;
  if (name == "bfloat16") return DType::bfloat16;
  if (name == "int32") return DType::int32;
  PYBENCH_FAIL("unknown dtype '" + name + "'; known: float32, float64, float16, bfloat16, int32");
}

RedOp parse_op(const std::string& name) {
  if (name == "sum") return RedOp::sum;
  if (name == "max") return RedOp::max;
  if (name == "min") return RedOp::min;
  PYBENCH_FAIL("unknown reduction op '" + name + "'; known: sum, max, min");
}

const char* dtype_name(DType t) {
  switch (t) {
    case DType::float32: return "float32";
    case DType::float64: return "float64";
    case DType::float16: return "float16";
    case DType::bfloat16: return "bfloat16";
    case DType::int32: return "int32";
  }
  return "?";
}

std::size_t dtype_size(DType t) {
  switch (t) {
    case DType::float64: return 8;
    case DType::float16:
    case DType::bfloat16: return 2;
    default: return 4;
  }
}

double dtype_exact_int_limit(DType t) {
  switch (t) {
    case DType::float32: return 16777216.0;          // 2^24
    case DType::float64: return 9007199254740992.0;  // 2^53
    case DType::float16: return 2048.0;              // 2^11
    case DType::bfloat16: return 256.0;              // 2^8
    case DType::int32: return 2147483647.0;
  }
  return 0;
}

float half_to_float(std::uint16_t h) {
  const std::uint32_t sign = (h & 0x8000u) << 16;
  std::uint32_t exp = (h >> 10) & 0x1f;
  std::uint32_t mant = h & 0x3ffu;
  std::uint32_t bits;
  if (exp == 0) {
    if (mant == 0) {
      bits = sign;
    } else {  // subnormal: renormalise
      exp = 127 - 15 + 1;
      while ((mant & 0x400u) == 0) {
        mant <<= 1;
        --exp;
      }
      mant &= 0x3ffu;
      bits = sign | (exp << 23) | (mant << 13);
    }
  } else if (exp == 0x1f) {
    bits = sign | 0x7f800000u | (mant << 13);
  } else {
    bits = sign | ((exp + 127 - 15) << 23) | (mant << 13);
  }
  float f;
  std::memcpy(&f, &bits, 4);
  return f;
}

std::uint16_t float_to_half(float f) {
  std::uint32_t x;
  std::memcpy(&x, &f, 4);
  const std::uint16_t sign = static_cast<std::uint16_t>((x >> 16) & 0x8000u);
  const std::uint32_t absx = x & 0x7fffffffu;
  if (absx >= 0x7f800000u) return sign | (absx > 0x7f800000u ? 0x7e00 : 0x7c00);  // NaN / inf
  if (absx >= 0x477ff000u) return sign | 0x7c00;                                  // overflow
  if (absx < 0x38800000u) {                                                       // subnormal or zero
    if (absx < 0x33000000u) return sign;
    const std::uint32_t e = absx >> 23;
    const std::uint32_t m = (absx & 0x7fffffu) | 0x800000u;
    const int shift = 126 - static_cast<int>(e);
    std::uint32_t r = m >> (shift - 10 + 1);
    const std::uint32_t rem = m & ((1u << (shift - 10 + 1)) - 1);
    const std::uint32_t halfway = 1u << (shift - 10);
    if (rem > halfway || (rem == halfway && (r & 1u))) ++r;
    return sign | static_cast<std::uint16_t>(r);
  }
  // Normal: round the 13 dropped mantissa bits to nearest even.
  std::uint32_t r = absx - 0x38000000u;
  r += 0xfffu + ((r >> 13) & 1u);
  return sign | static_cast<std::uint16_t>(r >> 13);
}

float bf16_to_float(std::uint16_t b) {
  const std::uint32_t bits = static_cast<std::uint32_t>(b) << 16;
  float f;
  std::memcpy(&f, &bits, 4);
  return f;
}

std::uint16_t float_to_bf16(float f) {
  std::uint32_t x;
  std::memcpy(&x, &f, 4);
  if ((x & 0x7fffffffu) > 0x7f800000u) return static_cast<std::uint16_t>((x >> 16) | 0x40);  // keep NaN a NaN
  x += 0x7fffu + ((x >> 16) & 1u);  // round to nearest even
  return static_cast<std::uint16_t>(x >> 16);
}

void store_value(DType t, void* p, double v) {
  switch (t) {
    case DType::float32: {
      const float f = static_cast<float>(v);
      std::memcpy(p, &f, 4);
      break;
    }
    case DType::float64: std::memcpy(p, &v, 8); break;
    case DType::float16: {
      const std::uint16_t h = float_to_half(static_cast<float>(v));
      std::memcpy(p, &h, 2);
      break;
    }
    case DType::bfloat16: {
      const std::uint16_t b = float_to_bf16(static_cast<float>(v));
      std::memcpy(p, &b, 2);
      break;
    }
    case DType::int32: {
      const std::int32_t i = static_cast<std::int32_t>(v);
      std::memcpy(p, &i, 4);
      break;
    }
  }
}

double load_value(DType t, const void* p) {
  switch (t) {
    case DType::float32: {
      float f;
      std::memcpy(&f, p, 4);
      return f;
    }
    case DType::float64: {
      double d;
      std::memcpy(&d, p, 8);
      return d;
    }
    case DType::float16: {
      std::uint16_t h;
      std::memcpy(&h, p, 2);
      return half_to_float(h);
    }
    case DType::bfloat16: {
      std::uint16_t b;
      std::memcpy(&b, p, 2);
      return bf16_to_float(b);
    }
    case DType::int32: {
      std::int32_t i;
      std::memcpy(&i, p, 4);
      return i;
    }
  }
  return 0;
}

}  // namespace pybench
