#include "atomr/local/actors/future.hpp"

namespace atomr::local::detail {

std::optional<error>& drop_reason() {
  thread_local std::optional<error> reason;
  return reason;
}

error dropped_error() {
  if (const auto& reason = drop_reason()) return *reason;
  return error(errc::unavailable, "the request was dropped without a reply (its promise was destroyed)");
}

}  // namespace atomr::local::detail
