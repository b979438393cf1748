// Whether callers waiting on a world's collectives or a router's asks poll for their answer
// themselves (local::progress_hook), per ATOMR_WAIT_ASSIST. Where a rank has few CPUs the waiter
// and the progress thread take turns on the same core and the assist costs more than it saves,
// so `auto` turns it on only where spin_relax counts CPUs as plentiful.
#pragma once

#include <atomic>
#include <chrono>

namespace atomr::cluster::detail {

// Read once per process; a bad value is reported once and `auto` serves.
bool wait_assist_enabled();

// When a waiting caller last polled: the progress thread keeps off the work the caller does (the
// world's issue lock, the router's receive ring) for k_window after it, so that the two do not
// take turns with one lock and MPI. A caller polls for at most 200 us before it sleeps (see
// local::shared_state::wait), so the progress thread takes over within k_window of its last look.
class assist_stamp {
 public:
  using clock = std::chrono::steady_clock;
  static constexpr auto k_window = std::chrono::microseconds(20);
  static constexpr clock::duration k_refresh = std::chrono::microseconds(2);

  // Written only once the stamp has aged a little: the progress thread reads this line while it
  // spins, and a caller polling in a loop would otherwise take the line from it on every look.
  void mark() noexcept {
    const auto now = clock::now().time_since_epoch().count();
    if (now - at_.load(std::memory_order_relaxed) > k_refresh.count()) at_.store(now, std::memory_order_relaxed);
  }
  bool recent(clock::time_point now) const noexcept {
    const auto at = at_.load(std::memory_order_relaxed);
    return at != 0 && now - clock::time_point(clock::duration(at)) < k_window;
  }

 private:
  alignas(64) std::atomic<clock::rep> at_{0};  // 0: never (on a line of its own: read in a tight loop)
};

}  // namespace atomr::cluster::detail
