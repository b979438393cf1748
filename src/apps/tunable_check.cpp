#include "tunable_check.hpp"

#include <charconv>

#include "atomr/cluster/all_tunables.hpp"

namespace atomr::apps {

namespace {

bool is_integer(std::string_view text) {
  std::int64_t out = 0;
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), out);
  return !text.empty() && ec == std::errc() && end == text.data() + text.size();
}

}  // namespace

std::optional<std::string> first_bad_tunable() {
  for (const tunable* t : all_tunables()) {
    if (!tunable_is_set(*t) || !is_integer(t->default_value)) continue;
    if (auto v = tunable_int(*t); !v) return v.error_value().message();
  }
  return std::nullopt;
}

}  // namespace atomr::apps
