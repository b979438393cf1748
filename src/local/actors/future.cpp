#include "atomr/local/actors/future.hpp"

#include <string>

#include "atomr/common/log.hpp"
#include "atomr/common/tunables.hpp"

namespace atomr::local::detail {

// ATOMR_WAIT_LOOK_US, read once; a bad value is reported once and the default serves.
std::chrono::microseconds wait_look() {
  static const std::chrono::microseconds look = [] {
    auto v = tunable_int(tunables::wait_look);
    if (!v || *v < 0) {
      log::get("actors")->warn(
          "{}; using {} us",
          v ? std::string(tunables::wait_look.env) + " must be at least 0" : v.error_value().message(),
          tunables::wait_look.default_value);
      return std::chrono::microseconds(std::stoll(std::string(tunables::wait_look.default_value)));
    }
    return std::chrono::microseconds(*v);
  }();
  return look;
}

std::optional<error>& drop_reason() {
  thread_local std::optional<error> reason;
  return reason;
}

error dropped_error() {
  if (const auto& reason = drop_reason()) return *reason;
  return error(errc::unavailable, "the request was dropped without a reply (its promise was destroyed)");
}

}  // namespace atomr::local::detail
