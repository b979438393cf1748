// The envelope: a fixed 48-byte header followed by one Cereal payload. The header says what the
// payload is (registered type id), how long it is, and who sends it to whom; docs/wire-format.md
// gives the layout byte by byte. encode_envelope() builds one; decode_envelope() validates one from
// untrusted bytes (never crashes, never reads out of bounds, errc::protocol with the offset on any
// problem); decode_message()/dispatch() then decode the payload as the registered type.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <string_view>
#include <vector>

#include "atomr/common/result.hpp"
#include "atomr/serialization/payload_codec.hpp"
#include "atomr/serialization/registry.hpp"

namespace atomr::serialization {

inline constexpr std::uint16_t k_wire_version = 1;
inline constexpr std::size_t k_envelope_header_size = 48;
// Where the flags (ask, reply) sit in an encoded header: for a sender that sorts envelopes it
// made itself without decoding them.
inline constexpr std::size_t k_envelope_flags_offset = 6;

// An actor anywhere in the job. `actor` is a spawned actor's id, or named_actor(name) for an actor
// registered under a name (high bit set, so the two never collide).
struct actor_address {
  std::uint32_t rank = 0;
  std::uint64_t actor = 0;
  friend bool operator==(const actor_address&, const actor_address&) = default;
};

inline constexpr std::uint64_t k_named_actor_bit = std::uint64_t{1} << 63;

// FNV-1a 64 of the name, high bit set: the same id on every rank without a lookup.
constexpr std::uint64_t named_actor(std::string_view name) {
  std::uint64_t h = 0xcbf29ce484222325ULL;
  for (const char c : name) {
    h ^= static_cast<std::uint8_t>(c);
    h *= 0x100000001b3ULL;
  }
  return h | k_named_actor_bit;
}

enum envelope_flag : std::uint16_t {
  k_flag_ask = 1u << 0,    // the sender waits for a reply carrying the same correlation id
  k_flag_reply = 1u << 1,  // this answers the ask with `correlation_id`
};
inline constexpr std::uint16_t k_known_flags = k_flag_ask | k_flag_reply;

struct envelope_header {
  std::uint16_t version = k_wire_version;
  std::uint16_t flags = 0;
  std::uint32_t type_id = 0;
  std::uint32_t payload_length = 0;
  std::uint64_t correlation_id = 0;
  actor_address source;
  actor_address destination;
  friend bool operator==(const envelope_header&, const envelope_header&) = default;
};

// Where a message goes; type id and payload length are filled in by encode_envelope.
struct envelope_route {
  actor_address source;
  actor_address destination;
  std::uint16_t flags = 0;
  std::uint64_t correlation_id = 0;
};

// A validated envelope. `payload` points into the bytes given to decode_envelope(), which must
// outlive the view.
struct envelope_view {
  envelope_header header;
  std::span<const std::byte> payload;
};

namespace detail {
void write_header(std::byte* out, const envelope_header& h);
result<envelope_header> read_header(std::span<const std::byte> bytes, const wire_limits& limits);
// The header's own checks (size, magic, version, flags) without the payload length ones: for a
// reader of a byte stream that learns from the header how many bytes make the envelope.
result<envelope_header> peek_header(std::span<const std::byte> bytes);
error envelope_error(std::size_t offset, std::string_view what);
}  // namespace detail

// Header + payload of `message`. Fails (errc::invalid_argument) only if the payload would exceed
// limits.max_payload_bytes, which every receiver would refuse.
template <typename Registry = wire_registry, typename T>
requires wire_message<T, Registry> result<std::vector<std::byte>> encode_envelope(
    const envelope_route& route, const T& message, const wire_limits& limits = default_wire_limits()) {
  std::vector<std::byte> out(k_envelope_header_size);
  encode_into(out, message);
  const std::size_t payload = out.size() - k_envelope_header_size;
  if (payload > limits.max_payload_bytes) {
    return error(errc::invalid_argument, "cannot send " + std::string(Registry::template name_of<T>()) +
                                             ": payload of " + std::to_string(payload) +
                                             " bytes exceeds the limit of " + std::to_string(limits.max_payload_bytes));
  }
  envelope_header h;
  h.flags = route.flags;
  h.type_id = Registry::template id_of<T>();
  h.payload_length = static_cast<std::uint32_t>(payload);
  h.correlation_id = route.correlation_id;
  h.source = route.source;
  h.destination = route.destination;
  detail::write_header(out.data(), h);
  return out;
}

// Validates the header (size, magic, version, flags, registered type id, payload length against
// the bytes present and the limit). The payload itself is checked when it is decoded.
template <typename Registry = wire_registry>
result<envelope_view> decode_envelope(std::span<const std::byte> bytes,
                                      const wire_limits& limits = default_wire_limits()) {
  ATOMR_ASSIGN_OR_RETURN(envelope_header h, detail::read_header(bytes, limits));
  if (!Registry::contains(h.type_id)) {
    return detail::envelope_error(8, "unknown message type id " + std::to_string(h.type_id));
  }
  return envelope_view{h, bytes.subspan(k_envelope_header_size)};
}

// The payload as T; errc::protocol if the envelope holds another type or the payload is malformed
// (offsets in the message are relative to the start of the envelope).
template <typename T, typename Registry = wire_registry>
requires wire_message<T, Registry> result<T> decode_message(const envelope_view& env,
                                                            const wire_limits& limits = default_wire_limits()) {
  constexpr auto id = Registry::template id_of<T>();
  if (env.header.type_id != id) {
    return detail::envelope_error(8, "expected " + std::string(Registry::template name_of<T>()) + " (type id " +
                                         std::to_string(id) + "), envelope holds type id " +
                                         std::to_string(env.header.type_id));
  }
  auto decoded = decode<T>(env.payload, Registry::template name_of<T>(), limits);
  if (!decoded) return decoded.error_value().with_context("reading an envelope (payload at offset 48)");
  return decoded;
}

// Decodes the payload as whichever registered type the header names and calls
// visitor(header, T&&). Returns the decoding error, if any; the visitor is not called then.
template <typename Registry = wire_registry, typename Visitor>
result<void> dispatch(const envelope_view& env, Visitor&& visitor, const wire_limits& limits = default_wire_limits()) {
  result<void> outcome = ok();
  const bool known = Registry::visit_id(env.header.type_id, [&]<typename Entry>() {
    auto decoded = decode_message<typename Entry::type, Registry>(env, limits);
    if (!decoded) {
      outcome = std::move(decoded).error_value();
      return;
    }
    visitor(env.header, std::move(decoded).value());
  });
  if (!known) return detail::envelope_error(8, "unknown message type id " + std::to_string(env.header.type_id));
  return outcome;
}

}  // namespace atomr::serialization
