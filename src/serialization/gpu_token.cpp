#include "atomr/serialization/gpu_token.hpp"

namespace atomr {

std::string to_string(const gpu_token& t) {
  return "gpu_token{node " + std::to_string(t.node_id) + ", device " + std::to_string(t.device_id) + ", buffer " +
         std::to_string(t.buffer_id) + ", generation " + std::to_string(t.generation) + "}";
}

std::ostream& operator<<(std::ostream& os, const gpu_token& t) { return os << to_string(t); }

}  // namespace atomr

std::size_t std::hash<atomr::gpu_token>::operator()(const atomr::gpu_token& t) const noexcept {
  // splitmix64-style mixing of the fields; tokens that differ in any field spread over the table.
  auto mix = [](std::uint64_t h, std::uint64_t v) {
    h ^= v + 0x9e3779b97f4a7c15ULL + (h << 6) + (h >> 2);
    h ^= h >> 30;
    h *= 0xbf58476d1ce4e5b9ULL;
    h ^= h >> 27;
    return h;
  };
  std::uint64_t h = mix(0, (std::uint64_t{t.node_id} << 32) | t.device_id);
  h = mix(h, t.buffer_id);
  h = mix(h, t.generation);
  return static_cast<std::size_t>(h);
}
