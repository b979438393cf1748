// Seeded sample values of every registered wire message, for round-trip tests, the fuzzer's seed
// corpus and the wire benchmark.
#pragma once

#include <random>

#include "atomr/serialization/registry.hpp"

namespace atomr::test {

inline gpu_token sample_token(std::mt19937& rng) {
  return gpu_token{static_cast<std::uint32_t>(rng() % 4096), static_cast<std::uint32_t>(rng() % 8),
                   (std::uint64_t{rng()} << 32) | rng(), rng() % 100};
}

inline std::string sample_text(std::mt19937& rng, std::size_t max_len) {
  std::string s(rng() % (max_len + 1), '\0');
  for (auto& c : s) c = static_cast<char>(rng());  // any byte, including NUL
  return s;
}

template <typename T>
T sample_message(std::uint32_t seed);

template <>
inline serialization::ping sample_message(std::uint32_t seed) {
  std::mt19937 rng(seed);
  return {(std::uint64_t{rng()} << 32) | rng(), sample_text(rng, 40)};
}
template <>
inline serialization::error_reply sample_message(std::uint32_t seed) {
  std::mt19937 rng(seed);
  return {static_cast<std::uint16_t>(rng() % 11), sample_text(rng, 80)};
}
template <>
inline serialization::opaque_bytes sample_message(std::uint32_t seed) {
  std::mt19937 rng(seed);
  serialization::opaque_bytes m;
  m.bytes.resize(rng() % 300);
  for (auto& b : m.bytes) b = static_cast<std::uint8_t>(rng());
  return m;
}
template <>
inline serialization::fetch_request sample_message(std::uint32_t seed) {
  std::mt19937 rng(seed);
  return {sample_token(rng), rng(), rng(), static_cast<std::uint32_t>(rng())};
}
template <>
inline serialization::fetch_ready sample_message(std::uint32_t seed) {
  std::mt19937 rng(seed);
  return {sample_token(rng), rng(), static_cast<std::uint32_t>(rng())};
}
template <>
inline serialization::buffer_manifest sample_message(std::uint32_t seed) {
  std::mt19937 rng(seed);
  serialization::buffer_manifest m;
  for (unsigned i = rng() % 6; i > 0; --i) {
    serialization::named_buffer b{sample_text(rng, 12), sample_token(rng), static_cast<std::uint8_t>(rng() % 10), {}};
    for (unsigned d = rng() % 4; d > 0; --d) b.shape.push_back(rng() % 1024);
    m.buffers.push_back(std::move(b));
  }
  for (unsigned i = rng() % 3; i > 0; --i) m.attributes[sample_text(rng, 8)] = sample_text(rng, 16);
  return m;
}
template <>
inline serialization::remote_buffer sample_message(std::uint32_t seed) {
  std::mt19937 rng(seed);
  return {sample_token(rng), rng(), static_cast<std::uint8_t>(rng() % 10), static_cast<std::uint32_t>(rng())};
}

}  // namespace atomr::test
