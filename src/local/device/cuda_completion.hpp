// How a CUDA device learns that its work finished: a completion waiter thread per device that waits
// on the marks' events in order, and the caller's own look at an event it waits for (caller_look).
// Private to the CUDA device kind (cuda_backend.cpp).
#pragma once

#include <cuda_runtime_api.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <thread>

#include "atomr/common/recycled_storage.hpp"
#include "atomr/common/spin.hpp"
#include "atomr/local/actors/future.hpp"

namespace atomr::local::detail {

// A mark's completion: answered by the completion waiter, or by the thread that waits for the
// operation where that thread enqueued it (mark's `caller_looks`; see caller_look).
struct watched_mark {
  enum : int {
    k_open,    // the caller may take it; the waiter leaves it until open_until
    k_caller,  // the caller looks at the event (cudaEventQuery on its own thread)
    k_waiter,  // the waiter answers it
    k_done,    // the caller answered it
  };
  watched_mark(std::shared_ptr<void> e, std::function<void(bool)> w, int o)
      : event(std::move(e)), wake(std::move(w)), owner(o) {}
  std::shared_ptr<void> event;
  std::function<void(bool)> wake;  // called once, by whichever side answers
  std::atomic<int> owner;
  std::chrono::steady_clock::time_point open_until{};
};

// How long the waiter leaves an open mark to its caller: from the mark to the caller's first
// look is the rest of the inline operation and the return to get() (well under a microsecond on an
// H200). A caller that does not come by then (one that reads the result through a
// continuation) is answered by the waiter, at most this much later than before.
constexpr auto k_caller_window = std::chrono::microseconds(4);

// The waiting thread's side (the progress hook of the operation's future). Its looks are
// cudaEventQuery calls, like raw code's own wait on its stream; the waiter keeps off the event
// meanwhile (a query loop beside another thread's cudaEventSynchronize of the same event cost
// more than the hand-over it saved, on two H200s). Holds the mark weakly:
// the mark holds the reply, whose state holds this hook.
class caller_look final : public progress_hook {
 public:
  // `seen` counts the marks answered here; the waiter thread, which outlives it, waits for
  // every mark to be answered, so it is still there when this counts.
  caller_look(std::weak_ptr<watched_mark> m, std::atomic<std::uint64_t>* seen) : mark_(std::move(m)), seen_(seen) {}

  void progress() noexcept override {
    const auto m = mark_.lock();  // (gone: the waiter answered it)
    if (!m) return;
    int state = m->owner.load(std::memory_order_acquire);
    if (state == watched_mark::k_open) {
      if (!m->owner.compare_exchange_strong(state, watched_mark::k_caller, std::memory_order_acq_rel)) return;
    } else if (state != watched_mark::k_caller) {
      return;
    }
    const cudaError_t status = cudaEventQuery(static_cast<cudaEvent_t>(m->event.get()));
    if (status == cudaErrorNotReady) return;
    if (status != cudaSuccess) {
      // Failures are the waiter's to report, as for every other mark.
      m->owner.store(watched_mark::k_waiter, std::memory_order_release);
      return;
    }
    m->wake(true);
    seen_->fetch_add(1, std::memory_order_relaxed);
    m->owner.store(watched_mark::k_done, std::memory_order_release);
  }

  // The caller stopped looking (it sleeps now, reads the result through a continuation, or got
  // its value another way, a deadline or a failure): whatever it has not answered, the waiter does.
  void done_looking() noexcept override {
    const auto m = mark_.lock();
    if (!m) return;
    int state = m->owner.load(std::memory_order_acquire);
    while ((state == watched_mark::k_open || state == watched_mark::k_caller) &&
           !m->owner.compare_exchange_weak(state, watched_mark::k_waiter, std::memory_order_acq_rel)) {
    }
  }

 private:
  std::weak_ptr<watched_mark> mark_;
  std::atomic<std::uint64_t>* seen_;
};

// Waits on the device's completion events in order on its own thread and answers each; the
// device actor is woken to retire them only once the queue goes quiet: a wake-up per completion
// put the device thread on the lane just as the answered caller came back with its next
// operation. (Nor every 64 completions, as before: while operations keep coming, their senders
// retire what finished, inline or on the device thread, and a wake-up in a burst of inline
// operations sent the rest of the burst by mail.) (A host function in the stream would do the
// same but stalls the stream until the CPU has run it, which costs every following copy a round
// trip.)
class completion_waiter {
 public:
  // `quiet` (may be empty) is called after completions once the queue has stayed empty for the
  // look below.
  completion_waiter(int device, std::function<void()> quiet)
      : quiet_(std::move(quiet)), thread_([this, device] { run(device); }) {}
  ~completion_waiter() {
    {
      std::lock_guard lock(mutex_);
      stopping_ = true;
    }
    ready_.notify_one();
    thread_.join();
  }
  // `wake` gets whether the event completed without an error (cudaEventSynchronize's own answer:
  // asking again with cudaEventQuery cost every completion another driver call).
  void watch(std::shared_ptr<void> event, std::function<void(bool)> wake) {
    watch(std::allocate_shared<watched_mark>(recycling_allocator<watched_mark>{}, std::move(event), std::move(wake),
                                             watched_mark::k_waiter));
  }
  void watch(std::shared_ptr<watched_mark> mark) {
    {
      std::lock_guard lock(mutex_);
      queue_.push_back(std::move(mark));
    }
    // Counted once the lock is free: the looking thread takes the lock as soon as it sees the
    // count move, and finding it still held here put it to sleep in the kernel (a futex wait and
    // wake on every completion's path).
    queued_.fetch_add(1, std::memory_order_release);
    ready_.notify_one();
  }

 private:
  void run(int device) {
    cudaSetDevice(device);
    std::unique_lock lock(mutex_);
    unsigned unreported = 0;  // completions since quiet_ was last called
    while (true) {
      if (queue_.empty() && !stopping_ && look_found_nothing(lock) && unreported > 0) {
        unreported = 0;
        lock.unlock();
        if (quiet_) quiet_();
        lock.lock();
      }
      ready_.wait(lock, [&] { return stopping_ || !queue_.empty(); });
      if (queue_.empty()) return;
      auto mark = std::move(queue_.front());
      queue_.pop_front();
      lock.unlock();
      if (answers(*mark)) {
        // Returns at completion or with the device's error; the actor reads the outcome itself.
        const bool completed = cudaEventSynchronize(static_cast<cudaEvent_t>(mark->event.get())) == cudaSuccess;
        if (!completed) cudaGetLastError();
        mark->wake(completed);
      }
      mark.reset();
      ++unreported;
      lock.lock();
    }
  }

  // Whether this thread answers `mark`: at once where it is the waiter's; an open one once its
  // window has passed without its caller; one the caller looks at once the caller stops looking
  // (false where the caller answered it). The marks behind it complete after it on the stream,
  // so waiting here delays none of them.
  static bool answers(watched_mark& mark) {
    int state = mark.owner.load(std::memory_order_acquire);
    const spin_relax relax;
    for (unsigned i = 0;; ++i) {
      if (state == watched_mark::k_waiter) return true;
      if (state == watched_mark::k_done) return false;
      if (state == watched_mark::k_open && (i & 15) == 0 && std::chrono::steady_clock::now() >= mark.open_until) {
        if (mark.owner.compare_exchange_strong(state, watched_mark::k_waiter, std::memory_order_acq_rel)) return true;
        continue;
      }
      relax();
      state = mark.owner.load(std::memory_order_acquire);
    }
  }

  // Operations often come back to back: looks for the next one for a while before sleeping.
  // True when none came (the lock is held again either way).
  bool look_found_nothing(std::unique_lock<std::mutex>& lock) {
    const auto seen = queued_.load(std::memory_order_acquire);
    lock.unlock();
    const auto until = std::chrono::steady_clock::now() + std::chrono::microseconds(50);
    // With the pause hint where cores are plenty: a yield is a system call, and this look
    // is on the path of every completion (yielding, it was 44 % of this thread's samples on an
    // H100 with 16 vCPUs).
    const spin_relax relax;
    bool nothing = true;
    for (unsigned i = 1;; ++i) {
      if (queued_.load(std::memory_order_acquire) != seen) {
        nothing = false;
        break;
      }
      relax();
      if ((i & 63) == 0 && std::chrono::steady_clock::now() >= until) break;
    }
    lock.lock();
    return nothing && queue_.empty();
  }

  std::mutex mutex_;
  std::condition_variable ready_;
  std::deque<std::shared_ptr<watched_mark>> queue_;
  std::atomic<std::uint64_t> queued_{0};  // events ever queued: lets the thread look without the lock
  bool stopping_ = false;
  std::function<void()> quiet_;
  std::thread thread_;
};

}  // namespace atomr::local::detail
