// Cereal payload codec: values to bytes in cereal's portable binary archive (fixed little-endian
// byte order, so any two ranks agree) and back. Decoding treats its input as untrusted: it never
// throws and never reads past the input; malformed bytes give an errc::protocol error.
#pragma once

#include <cereal/archives/portable_binary.hpp>
#include <cstddef>
#include <span>
#include <sstream>
#include <string>
#include <utility>

#include "atomr/common/result.hpp"

namespace atomr::serialization {

struct decode_limits {
  // Inputs longer than this are refused before any parsing.
  std::size_t max_input_bytes = std::size_t{64} << 20;
};

template <typename T>
std::string encode(const T& value) {
  std::ostringstream os(std::ios::binary);
  {
    cereal::PortableBinaryOutputArchive archive(os);
    archive(value);
  }
  return std::move(os).str();
}

namespace detail {
error decode_failure(std::string_view type_name, std::size_t input_bytes, std::string_view what);
}

template <typename T>
result<T> decode(std::span<const std::byte> bytes, std::string_view type_name, decode_limits limits = {}) {
  if (bytes.size() > limits.max_input_bytes) {
    return detail::decode_failure(type_name, bytes.size(),
                                  "input exceeds the limit of " + std::to_string(limits.max_input_bytes) + " bytes");
  }
  try {
    std::istringstream is(std::string(reinterpret_cast<const char*>(bytes.data()), bytes.size()), std::ios::binary);
    cereal::PortableBinaryInputArchive archive(is);
    T value{};
    archive(value);
    if (is.peek() != std::char_traits<char>::eof()) {
      return detail::decode_failure(type_name, bytes.size(), "trailing bytes after the value");
    }
    return value;
  } catch (const std::exception& e) {
    return detail::decode_failure(type_name, bytes.size(), e.what());
  }
}

}  // namespace atomr::serialization
