// Bounds on what a decoder accepts from the wire. Decoding checks every length against them (and
// against the bytes actually present) before it allocates, so hostile input cannot make a rank
// allocate more than a small multiple of max_payload_bytes.
#pragma once

#include <cstddef>
#include <cstdint>

namespace atomr::serialization {

struct wire_limits {
  std::size_t max_payload_bytes = std::size_t{64} << 20;        // ATOMR_WIRE_MAX_PAYLOAD
  std::uint64_t max_container_length = std::uint64_t{1} << 24;  // ATOMR_WIRE_MAX_CONTAINER
};

// The limits from the tunables (read once per process); invalid values fall back to the defaults
// with a logged warning.
const wire_limits& default_wire_limits();

}  // namespace atomr::serialization
