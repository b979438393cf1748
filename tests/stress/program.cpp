#include "program.hpp"

#include <array>

namespace atomr::stress {

std::string_view to_string(step_kind k) {
  constexpr std::array<std::string_view, k_step_kinds> names{"single", "group",   "group_each", "prepared", "bulk",
                                                             "split",  "invalid", "tells",      "asks",     "buffers"};
  return names[static_cast<std::size_t>(k)];
}

bool is_collective(step_kind k) { return static_cast<std::size_t>(k) <= static_cast<std::size_t>(step_kind::invalid); }

std::uint64_t mix(std::uint64_t x) {
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

std::vector<step> make_program(std::uint64_t seed, std::size_t length) {
  // Weights: mostly collectives (the engine's paths are the most numerous), then the router and
  // the registry.
  constexpr std::array<unsigned, k_step_kinds> weight{14, 6, 5, 4, 3, 3, 4, 4, 4, 4};
  unsigned total = 0;
  for (const unsigned w : weight) total += w;
  std::vector<step> out;
  out.reserve(length);
  for (std::size_t i = 0; i < length; ++i) {
    const std::uint64_t s = mix(seed * 0x100000001b3ull + i);
    unsigned pick = static_cast<unsigned>(s % total);
    std::size_t k = 0;
    while (pick >= weight[k]) pick -= weight[k++];
    out.push_back(step{i, static_cast<step_kind>(k), mix(s)});
  }
  return out;
}

}  // namespace atomr::stress
