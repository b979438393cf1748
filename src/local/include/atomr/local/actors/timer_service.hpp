// Timers: run a callback once after a delay, or periodically, on one timer thread; cancellable.
// Ask deadlines and actor timers are built on it. Callbacks must be short and must not block (they
// usually enqueue a message or fail a promise). Fires within about a millisecond of the deadline.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

namespace atomr::local {

class timer_handle {
 public:
  timer_handle() = default;
  explicit timer_handle(std::shared_ptr<std::atomic<bool>> cancelled) : cancelled_(std::move(cancelled)) {}
  // The callback will not start after this returns (one already running finishes).
  void cancel() const {
    if (cancelled_) cancelled_->store(true, std::memory_order_release);
  }
  bool cancelled() const { return cancelled_ && cancelled_->load(std::memory_order_acquire); }

 private:
  std::shared_ptr<std::atomic<bool>> cancelled_;
};

class timer_service {
 public:
  using clock = std::chrono::steady_clock;

  timer_service();
  ~timer_service();  // stop()
  // Stops the thread, waiting for a callback that is running (from another thread); pending and
  // later timers never fire. The actor system stops its timers before its dispatchers go: a
  // periodic tell that was running as the system shut down scheduled its actor on a dispatcher
  // being destroyed (a race ThreadSanitizer caught in PeriodicTimerDeliversUntilTheActorStops).
  void stop();
  timer_service(const timer_service&) = delete;
  timer_service& operator=(const timer_service&) = delete;

  timer_handle at(clock::time_point when, std::function<void()> fn);
  timer_handle after(clock::duration delay, std::function<void()> fn) {
    return at(clock::now() + delay, std::move(fn));
  }
  // First run after `interval`, then every `interval` (fixed rate, no catch-up bursts).
  timer_handle every(clock::duration interval, std::function<void()> fn);

  // Entries held: live ones, and cancelled ones not dropped yet (at most about as many again).
  std::size_t pending() const;

 private:
  struct entry {
    clock::time_point when;
    std::uint64_t sequence;  // FIFO among equal deadlines
    clock::duration interval;
    std::function<void()> fn;
    std::shared_ptr<std::atomic<bool>> cancelled;
    bool operator>(const entry& o) const { return when != o.when ? when > o.when : sequence > o.sequence; }
  };
  timer_handle push(clock::time_point when, clock::duration interval, std::function<void()> fn);
  void insert(entry e);  // under mutex_
  void sweep();          // under mutex_
  void run();

  mutable std::mutex mutex_;
  std::condition_variable wake_;
  // A min-heap on (when, sequence) (std::push_heap with std::greater). A cancelled entry stays
  // until it reaches the top or a sweep drops it: every ask sets a deadline and cancels it when the
  // reply comes, so without sweeps a device doing 100k operations a second would hold 6 M dead
  // entries of its 60 s deadlines, and each push would walk a heap far larger than the cache.
  std::vector<entry> queue_;
  std::size_t sweep_at_ = k_first_sweep;  // sweep when the heap reaches this size
  static constexpr std::size_t k_first_sweep = 4096;
  std::uint64_t next_sequence_ = 0;
  bool stopping_ = false;
  std::once_flag joined_;
  std::thread thread_;
};

}  // namespace atomr::local
