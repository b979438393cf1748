// The inline lane of a device (detail::device_lane): a sender runs an operation on its own thread
// when the device thread is idle and nothing it was sent is still queued, rather than mailing it.
#include <mutex>

#include "atomr/common/spin.hpp"
#include "atomr/local/device/device.hpp"

namespace atomr::local {
namespace {

// Lanes this thread holds. Replies are answered, and their continuations run, while a lane is
// held (by the device thread, or by a sender running an operation inline); a continuation that
// sends to a device then goes by mail, never into a lane (no recursion, no lock order).
thread_local int t_lanes_held = 0;
constexpr int k_lane_tries = 32;  // the device thread holds the lane briefly (a poll): worth a short wait
}  // namespace

detail::device_lane::hold::hold(device_lane& lane) : lane_(lane) {
  lane_.mutex_.lock();
  ++t_lanes_held;
}

detail::device_lane::hold::hold(device_lane& lane, std::try_to_lock_t) : lane_(lane), owns_(lane.mutex_.try_lock()) {
  if (owns_) ++t_lanes_held;
}

detail::device_lane::hold::~hold() {
  if (!owns_) return;
  --t_lanes_held;
  lane_.mutex_.unlock();
}

bool detail::device_lane::offer(device_msg& m) {
  if (t_lanes_held == 0 && sent_.load(std::memory_order_acquire) == handled_.load(std::memory_order_acquire)) {
    // Only ever tried: a sender never blocks on a lane.
    std::unique_lock lock(mutex_, std::try_to_lock);
    const spin_relax relax;
    for (int i = 1; i < k_lane_tries && !lock.owns_lock(); ++i) {
      relax();
      (void)lock.try_lock();
    }
    if (lock.owns_lock()) {
      struct depth {
        depth() { ++t_lanes_held; }
        ~depth() { --t_lanes_held; }
      } held;
      // Checked again while held: a sender may have counted one in between.
      if (runner_ != nullptr && sent_.load(std::memory_order_acquire) == handled_.load(std::memory_order_acquire) &&
          runner_->run_inline(m)) {
        inline_.fetch_add(1, std::memory_order_relaxed);
        return true;
      }
    }
  }
  sent_.fetch_add(1, std::memory_order_acq_rel);
  return false;
}

}  // namespace atomr::local
