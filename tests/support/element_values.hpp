// Test values in every element type: a double to and from T, 16-bit floats through their bit
// patterns. Shared by the world tests (world_fixture.hpp) and the stress programs' model.
#pragma once

#include <type_traits>

#include "atomr/local/device/dtype.hpp"
#include "atomr/local/device/half.hpp"

namespace atomr::testing {

template <typename T>
T from_double(double v) {
  if constexpr (std::is_same_v<T, local::f16_t>) {
    return local::to_f16(static_cast<float>(v));
  } else if constexpr (std::is_same_v<T, local::bf16_t>) {
    return local::to_bf16(static_cast<float>(v));
  } else {
    return static_cast<T>(v);
  }
}
template <typename T>
double to_double(T v) {
  if constexpr (std::is_same_v<T, local::f16_t> || std::is_same_v<T, local::bf16_t>) {
    return local::to_float(v);
  } else {
    return static_cast<double>(v);
  }
}

}  // namespace atomr::testing
