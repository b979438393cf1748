// The message types that cross ranks. Each is a plain struct with a Cereal serialize(); its stable
// numeric id is given in registry.hpp, the one place ids live.
#pragma once

#include <cereal/types/map.hpp>
#include <cereal/types/string.hpp>
#include <cereal/types/vector.hpp>
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "atomr/common/error.hpp"
#include "atomr/serialization/gpu_token.hpp"

namespace atomr::serialization {

// Liveness and round-trip checks between routers.
struct ping {
  std::uint64_t sequence = 0;
  std::string text;
  friend bool operator==(const ping&, const ping&) = default;
  template <typename A>
  void serialize(A& ar) {
    ar(sequence, text);
  }
};

// An atomr::error crossing ranks (the failed reply to a remote ask).
struct error_reply {
  std::uint16_t code = 0;  // atomr::errc
  std::string message;
  friend bool operator==(const error_reply&, const error_reply&) = default;
  template <typename A>
  void serialize(A& ar) {
    ar(code, message);
  }
};
error_reply to_reply(const error& e);
// A code this build does not know becomes errc::protocol, keeping the peer's text.
error to_error(const error_reply& r);

// Bytes the runtime does not interpret (user payloads, benchmarks).
struct opaque_bytes {
  std::vector<std::uint8_t> bytes;
  friend bool operator==(const opaque_bytes&, const opaque_bytes&) = default;
  template <typename A>
  void serialize(A& ar) {
    ar(bytes);
  }
};

// A consumer asks the owner of `token` to send [offset, offset+length) of the buffer; the bytes
// then flow GPU to GPU on `transfer_tag`, not through the router.
struct fetch_request {
  gpu_token token;
  std::uint64_t offset = 0;
  std::uint64_t length = 0;
  std::uint32_t transfer_tag = 0;
  friend bool operator==(const fetch_request&, const fetch_request&) = default;
  template <typename A>
  void serialize(A& ar) {
    ar(token, offset, length, transfer_tag);
  }
};

// The owner validated the token and posted its send.
struct fetch_ready {
  gpu_token token;
  std::uint64_t length = 0;
  std::uint32_t transfer_tag = 0;
  friend bool operator==(const fetch_ready&, const fetch_ready&) = default;
  template <typename A>
  void serialize(A& ar) {
    ar(token, length, transfer_tag);
  }
};

// An exported buffer as other ranks see it: its token, size and element type, and the tag of the
// job that exported it (a token from another job is refused by name, not misread).
struct remote_buffer {
  gpu_token token;
  std::uint64_t bytes = 0;
  std::uint8_t dtype = 0;  // atomr::local::dtype
  std::uint32_t job = 0;
  friend bool operator==(const remote_buffer&, const remote_buffer&) = default;
  template <typename A>
  void serialize(A& ar) {
    ar(token, bytes, dtype, job);
  }
};

// One exported buffer with its name, element type and shape.
struct named_buffer {
  std::string name;
  gpu_token token;
  std::uint8_t dtype = 0;
  std::vector<std::uint64_t> shape;
  friend bool operator==(const named_buffer&, const named_buffer&) = default;
  template <typename A>
  void serialize(A& ar) {
    ar(name, token, dtype, shape);
  }
};

// A producer announcing several exported buffers at once.
struct buffer_manifest {
  std::vector<named_buffer> buffers;
  std::map<std::string, std::string> attributes;
  friend bool operator==(const buffer_manifest&, const buffer_manifest&) = default;
  template <typename A>
  void serialize(A& ar) {
    ar(buffers, attributes);
  }
};

}  // namespace atomr::serialization
