// Values to payload bytes and back with Cereal and the wire archives (wire_archive.hpp). decode()
// treats its input as untrusted: it never throws, never reads past the input, checks lengths
// against wire_limits before allocating, and refuses trailing bytes; failures are errc::protocol
// errors that say what was wrong and at which offset.
#pragma once

#include <span>
#include <string_view>
#include <vector>

#include "atomr/common/result.hpp"
#include "atomr/serialization/wire_archive.hpp"

namespace atomr::serialization {

// Appends the encoding of `value` to `out`.
template <typename T>
void encode_into(std::vector<std::byte>& out, const T& value) {
  wire_output_archive archive(out);
  archive(value);
}

template <typename T>
std::vector<std::byte> encode(const T& value) {
  std::vector<std::byte> out;
  encode_into(out, value);
  return out;
}

namespace detail {
error payload_error(std::string_view type_name, std::size_t input_bytes, std::string_view what);
}

template <typename T>
result<T> decode(std::span<const std::byte> bytes, std::string_view type_name,
                 const wire_limits& limits = default_wire_limits()) {
  if (bytes.size() > limits.max_payload_bytes) {
    return detail::payload_error(type_name, bytes.size(),
                                 "payload exceeds the limit of " + std::to_string(limits.max_payload_bytes) + " bytes");
  }
  try {
    wire_input_archive archive(bytes, limits);
    T value{};
    archive(value);
    if (archive.remaining() != 0) {
      return detail::payload_error(type_name, bytes.size(),
                                   std::to_string(archive.remaining()) + " trailing byte(s) at payload offset " +
                                       std::to_string(archive.offset()));
    }
    return value;
  } catch (const std::exception& e) {
    // wire_decode_error from the archive; also whatever a type's own load() throws.
    return detail::payload_error(type_name, bytes.size(), e.what());
  }
}

}  // namespace atomr::serialization
