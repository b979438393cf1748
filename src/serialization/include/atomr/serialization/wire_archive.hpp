// Cereal archives for atomr's payloads. The byte format is Cereal's portable binary format: one
// leading byte 0x01 (little-endian data), arithmetic values in little-endian order, container and
// string lengths as u64 before their elements. The output archive writes that format straight into
// a byte vector; the input archive reads it from a span of untrusted bytes and enforces
// wire_limits: it never reads past the input and checks every length before the container
// allocates. Stock cereal::PortableBinary{Input,Output}Archive read and write the same bytes (a
// test checks both directions); these exist for speed and for the bounds.
//
// Errors inside the input archive are thrown as wire_decode_error (Cereal reports through
// exceptions); decode() in payload_codec.hpp catches them and returns errc::protocol. Only
// little-endian hosts are supported.
#pragma once

#include <bit>
#include <cereal/cereal.hpp>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <limits>
#include <span>
#include <stdexcept>
#include <string>
#include <type_traits>
#include <vector>

#include "atomr/serialization/wire_limits.hpp"

namespace atomr::serialization {

static_assert(std::endian::native == std::endian::little, "atomr's wire format assumes a little-endian host");

inline constexpr std::byte k_little_endian_marker{0x01};

// What went wrong and at which byte offset of the payload.
class wire_decode_error : public std::runtime_error {
 public:
  wire_decode_error(std::size_t offset, const std::string& what)
      : std::runtime_error(what + " at payload offset " + std::to_string(offset)), offset_(offset) {}
  std::size_t offset() const noexcept { return offset_; }

 private:
  std::size_t offset_;
};

class wire_output_archive : public cereal::OutputArchive<wire_output_archive, cereal::AllowEmptyClassElision> {
 public:
  explicit wire_output_archive(std::vector<std::byte>& out) : OutputArchive(this), out_(out) {
    out_.push_back(k_little_endian_marker);
  }
  void save_bytes(const void* data, std::size_t size) {
    const auto* p = static_cast<const std::byte*>(data);
    out_.insert(out_.end(), p, p + size);
  }

 private:
  std::vector<std::byte>& out_;
};

class wire_input_archive : public cereal::InputArchive<wire_input_archive, cereal::AllowEmptyClassElision> {
 public:
  wire_input_archive(std::span<const std::byte> in, const wire_limits& limits)
      : InputArchive(this), in_(in), limits_(limits) {
    std::byte marker{};
    load_bytes(&marker, 1);
    if (marker != k_little_endian_marker) {
      throw wire_decode_error(0, "payload byte-order marker is " + std::to_string(static_cast<int>(marker)) +
                                     ", expected 1 (little-endian)");
    }
  }

  void load_bytes(void* data, std::size_t size) {
    if (size > remaining()) {
      throw wire_decode_error(offset_, "truncated payload: need " + std::to_string(size) + " byte(s), " +
                                           std::to_string(remaining()) + " left");
    }
    if (size != 0) std::memcpy(data, in_.data() + offset_, size);
    offset_ += size;
  }

  // A container or string is about to be resized to `length` elements.
  void check_length(std::uint64_t length) const {
    if (length > limits_.max_container_length) {
      throw wire_decode_error(offset_ - sizeof(std::uint64_t), "container length " + std::to_string(length) +
                                                                   " exceeds the limit of " +
                                                                   std::to_string(limits_.max_container_length));
    }
    // Every element atomr puts on the wire takes at least one byte, so a length larger than the
    // bytes left is a lie, caught here before the container allocates.
    if (length > remaining()) {
      throw wire_decode_error(offset_ - sizeof(std::uint64_t), "container length " + std::to_string(length) +
                                                                   " exceeds the " + std::to_string(remaining()) +
                                                                   " byte(s) left");
    }
  }

  std::size_t offset() const noexcept { return offset_; }
  std::size_t remaining() const noexcept { return in_.size() - offset_; }

 private:
  std::span<const std::byte> in_;
  const wire_limits& limits_;
  std::size_t offset_ = 0;
};

// --- how Cereal's building blocks map onto the two archives ----------------------------------

template <class T>
requires std::is_arithmetic_v<T>
void CEREAL_SAVE_FUNCTION_NAME(wire_output_archive& ar, const T& t) {
  static_assert(!std::is_floating_point_v<T> || std::numeric_limits<T>::is_iec559, "IEEE 754 floats only");
  ar.save_bytes(std::addressof(t), sizeof(t));
}

template <class T>
requires std::is_arithmetic_v<T>
void CEREAL_LOAD_FUNCTION_NAME(wire_input_archive& ar, T& t) { ar.load_bytes(std::addressof(t), sizeof(t)); }

template <class T>
void CEREAL_SAVE_FUNCTION_NAME(wire_output_archive& ar, const cereal::NameValuePair<T>& t) {
  ar(t.value);
}
template <class T>
void CEREAL_LOAD_FUNCTION_NAME(wire_input_archive& ar, cereal::NameValuePair<T>& t) {
  ar(t.value);
}

template <class T>
void CEREAL_SAVE_FUNCTION_NAME(wire_output_archive& ar, const cereal::SizeTag<T>& t) {
  const auto length = static_cast<std::uint64_t>(t.size);
  ar.save_bytes(&length, sizeof(length));
}
template <class T>
void CEREAL_LOAD_FUNCTION_NAME(wire_input_archive& ar, cereal::SizeTag<T>& t) {
  std::uint64_t length = 0;
  ar.load_bytes(&length, sizeof(length));
  ar.check_length(length);
  t.size = static_cast<std::remove_reference_t<T>>(length);
}

template <class T>
void CEREAL_SAVE_FUNCTION_NAME(wire_output_archive& ar, const cereal::BinaryData<T>& bd) {
  ar.save_bytes(bd.data, static_cast<std::size_t>(bd.size));
}
template <class T>
void CEREAL_LOAD_FUNCTION_NAME(wire_input_archive& ar, cereal::BinaryData<T>& bd) {
  ar.load_bytes(bd.data, static_cast<std::size_t>(bd.size));
}

}  // namespace atomr::serialization

CEREAL_REGISTER_ARCHIVE(atomr::serialization::wire_output_archive)
CEREAL_REGISTER_ARCHIVE(atomr::serialization::wire_input_archive)
CEREAL_SETUP_ARCHIVE_TRAITS(atomr::serialization::wire_input_archive, atomr::serialization::wire_output_archive)
