// A lock for critical sections of a few instructions that are seldom contended: a buffer's write
// mark (a reference copied, two stores), taken by the world's seal once per buffer it publishes,
// a thousand times for a call of 1000 small all_reduces. std::mutex is two calls into the C
// library and two atomic read-modify-writes per section; this is one exchange and one store. A
// waiter spins as spin_relax says (the pause hint where cores are plentiful, else a yield, so that
// a preempted holder gets to run). Meets Lockable, for std::lock_guard and std::unique_lock.
#pragma once

#include <atomic>

#include "atomr/common/spin.hpp"

namespace atomr {

class spin_mutex {
 public:
  void lock() noexcept {
    while (locked_.exchange(true, std::memory_order_acquire)) {
      const spin_relax relax;
      while (locked_.load(std::memory_order_relaxed)) relax();
    }
  }
  bool try_lock() noexcept {
    return !locked_.load(std::memory_order_relaxed) && !locked_.exchange(true, std::memory_order_acquire);
  }
  void unlock() noexcept { locked_.store(false, std::memory_order_release); }

 private:
  std::atomic<bool> locked_{false};
};

}  // namespace atomr
