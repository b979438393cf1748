// gpu_token names a GPU buffer anywhere in the job: which rank owns it, on which of that rank's
// devices, which buffer, and the device generation it was minted in. It holds no pointer; only the
// owning rank can resolve it, and a token from an older generation resolves to errc::stale_ref.
// Fixed size, trivially copyable: it can be memcpy'd, hashed and sent as is.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <ostream>
#include <string>
#include <type_traits>

namespace atomr {

struct gpu_token {
  std::uint32_t node_id = 0;     // world rank of the owning process (a "node" of the actor system)
  std::uint32_t device_id = 0;   // the owner's device index
  std::uint64_t buffer_id = 0;   // unique per owning rank
  std::uint64_t generation = 0;  // device generation at export

  friend bool operator==(const gpu_token&, const gpu_token&) = default;

  template <typename Archive>
  void serialize(Archive& ar) {
    ar(node_id, device_id, buffer_id, generation);
  }
};

static_assert(std::is_trivially_copyable_v<gpu_token> && std::is_standard_layout_v<gpu_token>);
static_assert(sizeof(gpu_token) == 24 && alignof(gpu_token) == 8);
static_assert(offsetof(gpu_token, node_id) == 0 && offsetof(gpu_token, device_id) == 4 &&
              offsetof(gpu_token, buffer_id) == 8 && offsetof(gpu_token, generation) == 16);

// "gpu_token{node 3, device 1, buffer 42, generation 2}"
std::string to_string(const gpu_token& t);
std::ostream& operator<<(std::ostream& os, const gpu_token& t);

}  // namespace atomr

template <>
struct std::hash<atomr::gpu_token> {
  std::size_t operator()(const atomr::gpu_token& t) const noexcept;
};
