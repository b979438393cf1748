#include "atomr/serialization/envelope.hpp"

#include <cstdio>
#include <cstring>

namespace atomr::serialization {
namespace {

// The header exactly as it sits on the wire (little-endian host, asserted in wire_archive.hpp):
// every field naturally aligned, so the struct has no padding and memcpy is the encoding.
struct wire_header {
  std::uint8_t magic[4];
  std::uint16_t version;
  std::uint16_t flags;
  std::uint32_t type_id;
  std::uint32_t payload_length;
  std::uint64_t correlation_id;
  std::uint32_t source_rank;
  std::uint32_t destination_rank;
  std::uint64_t source_actor;
  std::uint64_t destination_actor;
};
static_assert(std::is_trivially_copyable_v<wire_header> && std::is_standard_layout_v<wire_header>);
static_assert(sizeof(wire_header) == k_envelope_header_size);
static_assert(offsetof(wire_header, version) == 4 && offsetof(wire_header, flags) == k_envelope_flags_offset &&
              offsetof(wire_header, type_id) == 8 && offsetof(wire_header, payload_length) == 12 &&
              offsetof(wire_header, correlation_id) == 16 && offsetof(wire_header, source_rank) == 24 &&
              offsetof(wire_header, destination_rank) == 28 && offsetof(wire_header, source_actor) == 32 &&
              offsetof(wire_header, destination_actor) == 40);

constexpr std::uint8_t k_magic[4] = {'A', 'T', 'M', 'R'};

}  // namespace

namespace detail {

error envelope_error(std::size_t offset, std::string_view what) {
  std::string msg = "malformed envelope: ";
  msg += what;
  msg += " at offset ";
  msg += std::to_string(offset);
  return error(errc::protocol, std::move(msg));
}

void write_header(std::byte* out, const envelope_header& h) {
  wire_header w{};
  std::memcpy(w.magic, k_magic, sizeof(k_magic));
  w.version = h.version;
  w.flags = h.flags;
  w.type_id = h.type_id;
  w.payload_length = h.payload_length;
  w.correlation_id = h.correlation_id;
  w.source_rank = h.source.rank;
  w.destination_rank = h.destination.rank;
  w.source_actor = h.source.actor;
  w.destination_actor = h.destination.actor;
  std::memcpy(out, &w, sizeof(w));
}

result<envelope_header> peek_header(std::span<const std::byte> bytes) {
  if (bytes.size() < k_envelope_header_size) {
    return envelope_error(bytes.size(), "truncated: " + std::to_string(bytes.size()) + " byte(s), the header needs " +
                                            std::to_string(k_envelope_header_size));
  }
  wire_header w;
  std::memcpy(&w, bytes.data(), sizeof(w));
  if (std::memcmp(w.magic, k_magic, sizeof(k_magic)) != 0) {
    char hex[16];
    std::snprintf(hex, sizeof(hex), "%02x%02x%02x%02x", w.magic[0], w.magic[1], w.magic[2], w.magic[3]);
    return envelope_error(0, std::string("bad magic 0x") + hex + " (expected \"ATMR\")");
  }
  if (w.version != k_wire_version) {
    return envelope_error(4, "unsupported wire version " + std::to_string(w.version) + " (this build speaks " +
                                 std::to_string(k_wire_version) + ")");
  }
  if ((w.flags & ~k_known_flags) != 0) {
    char hex[8];
    std::snprintf(hex, sizeof(hex), "%04x", static_cast<unsigned>(w.flags & ~k_known_flags));
    return envelope_error(6, std::string("unknown flag bits 0x") + hex);
  }
  if ((w.flags & k_flag_ask) && (w.flags & k_flag_reply)) {
    return envelope_error(6, "flags ask and reply are both set");
  }
  envelope_header h;
  h.version = w.version;
  h.flags = w.flags;
  h.type_id = w.type_id;
  h.payload_length = w.payload_length;
  h.correlation_id = w.correlation_id;
  h.source = {w.source_rank, w.source_actor};
  h.destination = {w.destination_rank, w.destination_actor};
  return h;
}

result<envelope_header> read_header(std::span<const std::byte> bytes, const wire_limits& limits) {
  ATOMR_ASSIGN_OR_RETURN(envelope_header h, peek_header(bytes));
  const std::size_t present = bytes.size() - k_envelope_header_size;
  if (h.payload_length > limits.max_payload_bytes) {
    return envelope_error(12, "payload length " + std::to_string(h.payload_length) + " exceeds the limit of " +
                                  std::to_string(limits.max_payload_bytes));
  }
  if (h.payload_length != present) {
    return envelope_error(12, "payload length " + std::to_string(h.payload_length) + " but " + std::to_string(present) +
                                  " byte(s) follow the header");
  }
  return h;
}

}  // namespace detail
}  // namespace atomr::serialization
