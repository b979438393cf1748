#include "atomr/common/tunables.hpp"

#include <charconv>
#include <cstdlib>

#include "atomr/common/log.hpp"

namespace atomr {

bool tunable_is_set(const tunable& t) {
  const char* v = std::getenv(std::string(t.env).c_str());
  return v != nullptr && *v != '\0';
}

std::string tunable_value(const tunable& t) {
  const char* v = std::getenv(std::string(t.env).c_str());
  return (v != nullptr && *v != '\0') ? std::string(v) : std::string(t.default_value);
}

result<std::int64_t> tunable_int(const tunable& t) {
  const std::string text = tunable_value(t);
  std::int64_t out = 0;
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), out);
  if (ec != std::errc() || end != text.data() + text.size()) {
    return error(errc::invalid_argument, std::string(t.env) + "='" + text + "' is not an integer (default " +
                                             std::string(t.default_value) + ")");
  }
  return out;
}

std::chrono::microseconds tunable_us_or(const tunable& t, std::chrono::microseconds fallback,
                                        std::string_view log_name) {
  const auto v = tunable_int(t);
  if (v && *v >= 0) return std::chrono::microseconds(*v);
  log::get(std::string(log_name))
      ->warn("{}; using {} us", v ? std::string(t.env) + " must be at least 0" : v.error_value().message(),
             fallback.count());
  return fallback;
}

}  // namespace atomr
