// Element types of device buffers. f16 and bf16 are stored as 16-bit patterns (f16_t, bf16_t),
// so host code needs no CUDA headers; kernels reinterpret them as __half / __nv_bfloat16.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string_view>

namespace atomr::local {

enum class dtype : std::uint8_t { i8, u8, i32, u32, i64, u64, f16, bf16, f32, f64 };

struct f16_t {
  std::uint16_t bits = 0;
  friend bool operator==(f16_t, f16_t) = default;
};
struct bf16_t {
  std::uint16_t bits = 0;
  friend bool operator==(bf16_t, bf16_t) = default;
};

constexpr std::size_t size_of(dtype t) {
  switch (t) {
    case dtype::i8:
    case dtype::u8: return 1;
    case dtype::f16:
    case dtype::bf16: return 2;
    case dtype::i32:
    case dtype::u32:
    case dtype::f32: return 4;
    case dtype::i64:
    case dtype::u64:
    case dtype::f64: return 8;
  }
  return 0;
}

std::string_view to_string(dtype t);

template <typename T>
struct dtype_of;
template <>
struct dtype_of<std::int8_t> {
  static constexpr dtype value = dtype::i8;
};
template <>
struct dtype_of<std::uint8_t> {
  static constexpr dtype value = dtype::u8;
};
template <>
struct dtype_of<std::int32_t> {
  static constexpr dtype value = dtype::i32;
};
template <>
struct dtype_of<std::uint32_t> {
  static constexpr dtype value = dtype::u32;
};
template <>
struct dtype_of<std::int64_t> {
  static constexpr dtype value = dtype::i64;
};
template <>
struct dtype_of<std::uint64_t> {
  static constexpr dtype value = dtype::u64;
};
template <>
struct dtype_of<f16_t> {
  static constexpr dtype value = dtype::f16;
};
template <>
struct dtype_of<bf16_t> {
  static constexpr dtype value = dtype::bf16;
};
template <>
struct dtype_of<float> {
  static constexpr dtype value = dtype::f32;
};
template <>
struct dtype_of<double> {
  static constexpr dtype value = dtype::f64;
};

template <typename T>
concept device_element = requires {
  dtype_of<T>::value;
}
&&(sizeof(T) == size_of(dtype_of<T>::value));

}  // namespace atomr::local
