// The reference model of the collectives: what every rank puts in and what every element of every
// result must be. Inputs are small integers (rank r's element i of a case with salt s is
// r + 1 + (i + s) % 3, or 1 + (r + i + s) % 2 for prod), so every sum, product, min and max is
// exact in every element type at up to 8 ranks; only a floating-point avg rounds, and is
// compared within half a unit of its type's last place.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <string>
#include <type_traits>

#include "../support/element_values.hpp"
#include "atomr/cluster/collective.hpp"
#include "atomr/local/device/dtype.hpp"
#include "atomr/local/device/half.hpp"

namespace atomr::stress {

using cluster::reduce_op;

using testing::from_double;
using testing::to_double;

inline double input(reduce_op op, int rank, std::size_t i, std::uint32_t salt) {
  if (op == reduce_op::prod) return 1 + static_cast<double>((static_cast<std::size_t>(rank) + i + salt) % 2);
  return rank + 1 + static_cast<double>((i + salt) % 3);
}

// The value a result placeholder holds before a collective writes it: never a correct result.
inline constexpr double k_untouched = 99;

// The reduction over `ranks` of element i (ranks given by their inputs' rank numbers 0..ranks-1).
template <typename T>
double reduced(reduce_op op, int ranks, std::size_t i, std::uint32_t salt) {
  double acc = input(op, 0, i, salt);
  for (int r = 1; r < ranks; ++r) {
    const double v = input(op, r, i, salt);
    switch (op) {
      case reduce_op::sum:
      case reduce_op::avg: acc += v; break;
      case reduce_op::prod: acc *= v; break;
      case reduce_op::min: acc = std::min(acc, v); break;
      case reduce_op::max: acc = std::max(acc, v); break;
    }
  }
  if (op != reduce_op::avg) return acc;
  if constexpr (std::is_integral_v<T>) {
    return static_cast<double>(static_cast<T>(static_cast<T>(acc) / static_cast<T>(ranks)));  // truncates, as NCCL
  } else {
    return acc / ranks;
  }
}

// Whether `got` is what the model says, exactly, or for a floating-point avg within rounding.
template <typename T>
bool matches(T got, double want, reduce_op op) {
  const double g = to_double(got);
  if (op != reduce_op::avg || std::is_integral_v<T>) return g == to_double(from_double<T>(want));
  double ulp = 1e-12;
  if constexpr (std::is_same_v<T, local::f16_t>) ulp = 1.0 / 1024;
  if constexpr (std::is_same_v<T, local::bf16_t>) ulp = 1.0 / 128;
  if constexpr (std::is_same_v<T, float>) ulp = 1.0 / (1 << 23);
  return std::abs(g - want) <= ulp * std::max(1.0, std::abs(want));
}

// Calls f.template operator()<T>() with the C++ type of `type`.
template <typename F>
decltype(auto) with_dtype(local::dtype type, F&& f) {
  switch (type) {
    case local::dtype::i8: return f.template operator()<std::int8_t>();
    case local::dtype::u8: return f.template operator()<std::uint8_t>();
    case local::dtype::i32: return f.template operator()<std::int32_t>();
    case local::dtype::u32: return f.template operator()<std::uint32_t>();
    case local::dtype::i64: return f.template operator()<std::int64_t>();
    case local::dtype::u64: return f.template operator()<std::uint64_t>();
    case local::dtype::f16: return f.template operator()<local::f16_t>();
    case local::dtype::bf16: return f.template operator()<local::bf16_t>();
    case local::dtype::f32: return f.template operator()<float>();
    case local::dtype::f64: break;
  }
  return f.template operator()<double>();
}

}  // namespace atomr::stress
