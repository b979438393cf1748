// Host conversions of the 16-bit float types (IEEE binary16 and bfloat16) to and from float,
// rounding to nearest even: the host backend's reductions, test expectations and benchmarks'
// checks compute in float and round back.
#pragma once

#include <cstdint>
#include <cstring>

#include "atomr/local/device/dtype.hpp"

namespace atomr::local {

inline float f16_to_float(std::uint16_t h) {
  const std::uint32_t sign = (h & 0x8000u) << 16;
  std::uint32_t exp = (h >> 10) & 0x1fu;
  std::uint32_t mant = h & 0x3ffu;
  std::uint32_t bits = 0;
  if (exp == 0x1f) {
    bits = sign | 0x7f800000u | (mant << 13);  // inf / nan
  } else if (exp != 0) {
    bits = sign | ((exp + 112) << 23) | (mant << 13);
  } else if (mant != 0) {  // subnormal: normalize
    exp = 113;
    while ((mant & 0x400u) == 0) {
      mant <<= 1;
      --exp;
    }
    bits = sign | (exp << 23) | ((mant & 0x3ffu) << 13);
  } else {
    bits = sign;
  }
  float f = 0;
  std::memcpy(&f, &bits, sizeof f);
  return f;
}

inline std::uint16_t float_to_f16(float f) {
  std::uint32_t x = 0;
  std::memcpy(&x, &f, sizeof x);
  const std::uint16_t sign = static_cast<std::uint16_t>((x >> 16) & 0x8000u);
  const std::uint32_t abs = x & 0x7fffffffu;
  if (abs >= 0x7f800000u) return static_cast<std::uint16_t>(sign | 0x7c00u | (abs > 0x7f800000u ? 0x200u : 0));
  if (abs >= 0x477ff000u) return static_cast<std::uint16_t>(sign | 0x7c00u);  // overflows to inf
  if (abs < 0x38800000u) {                                                    // subnormal or zero in half
    if (abs < 0x33000000u) return sign;
    const std::uint32_t shift = 126 - (abs >> 23);
    const std::uint32_t mant = (abs & 0x7fffffu) | 0x800000u;
    std::uint32_t half = mant >> (shift + 1);
    const std::uint32_t rest = mant & ((1u << (shift + 1)) - 1);
    const std::uint32_t halfway = 1u << shift;
    if (rest > halfway || (rest == halfway && (half & 1u))) ++half;
    return static_cast<std::uint16_t>(sign | half);
  }
  std::uint32_t half = ((abs - 0x38000000u) >> 13);
  const std::uint32_t rest = abs & 0x1fffu;
  if (rest > 0x1000u || (rest == 0x1000u && (half & 1u))) ++half;
  return static_cast<std::uint16_t>(sign | half);
}

inline float bf16_to_float(std::uint16_t h) {
  const std::uint32_t bits = static_cast<std::uint32_t>(h) << 16;
  float f = 0;
  std::memcpy(&f, &bits, sizeof f);
  return f;
}

inline std::uint16_t float_to_bf16(float f) {
  std::uint32_t x = 0;
  std::memcpy(&x, &f, sizeof x);
  if ((x & 0x7fffffffu) > 0x7f800000u) return static_cast<std::uint16_t>((x >> 16) | 0x40u);  // quiet nan
  x += 0x7fffu + ((x >> 16) & 1u);
  return static_cast<std::uint16_t>(x >> 16);
}

inline float to_float(f16_t h) { return f16_to_float(h.bits); }
inline float to_float(bf16_t h) { return bf16_to_float(h.bits); }
inline f16_t to_f16(float f) { return f16_t{float_to_f16(f)}; }
inline bf16_t to_bf16(float f) { return bf16_t{float_to_bf16(f)}; }

}  // namespace atomr::local
