#include "atomr/cluster/engine/slow_spans.hpp"

#include <fmt/format.h>

namespace atomr::cluster::detail {

std::string slow_span_counts::describe() const {
  std::string out;
  for (std::size_t i = 0; i < n; ++i) {
    const auto c = count[i].load(std::memory_order_relaxed);
    if (c == 0) continue;
    if (!out.empty()) out += ", ";
    out += fmt::format("{} {}/{:.1f}", names[i], c, static_cast<double>(longest_ns[i].load()) / 1e3);
  }
  return out.empty() ? "none" : out;
}

}  // namespace atomr::cluster::detail
