#include "atomr/local/actors/future.hpp"

#include "atomr/local/tunables.hpp"

namespace atomr::local::detail {

// ATOMR_WAIT_LOOK_US, read once; a bad value is reported once and `auto` serves. Auto looks
// long only where the rank has CPUs to spare: on an oversubscribed machine a looking thread holds
// a CPU the thread it waits for needs.
std::chrono::microseconds wait_look() {
  static const std::chrono::microseconds look = [] {
    const auto automatic = std::chrono::microseconds(spin_relax::plenty() ? 1000 : 200);
    if (tunable_value(tunables::wait_look) == "auto") return automatic;
    return tunable_us_or(tunables::wait_look, automatic, "actors");
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

namespace atomr::local::detail {

namespace {
thread_local bool t_no_wait = false;
}  // namespace

bool waiting_forbidden() noexcept { return t_no_wait; }
no_wait_scope::no_wait_scope() noexcept : previous_(std::exchange(t_no_wait, true)) {}
no_wait_scope::~no_wait_scope() { t_no_wait = previous_; }

error waiting_forbidden_error() {
  return error(errc::invalid_argument,
               "a direct actor's handler waited for a future that is not ready (it runs on the sender's thread, "
               "the router's, which would stall; use then(), or spawn the actor without direct)");
}

}  // namespace atomr::local::detail
