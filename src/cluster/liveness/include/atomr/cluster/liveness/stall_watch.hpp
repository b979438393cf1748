// A watch on calls that may block the calling thread (a blocking NCCL communicator's enqueue while
// a peer has not connected yet, ncclCommSplit, ncclCommInitRank): the caller arms it with a
// deadline around the call, and if the deadline passes while the call is still inside, a thread
// of the watch runs `on_stall` once (abort the communicator, so the call returns with an error).
// If the call has still not returned `grace` later, the process cannot make progress and the job
// is ended with MPI_Abort, the culprit named in the log: never a hang.
//
// Arming costs two atomic stores; the watch thread looks every 10 ms, so a stall is noticed
// within 10 ms of its deadline.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <mutex>
#include <string>
#include <thread>

namespace atomr::cluster::detail {

class stall_watch {
 public:
  using clock = std::chrono::steady_clock;
  stall_watch(std::function<void()> on_stall, std::chrono::milliseconds grace);
  // stop().
  ~stall_watch();
  // Stops watching and waits for an on_stall that is running (idempotent): after it, on_stall
  // neither runs nor will.
  void stop();
  stall_watch(const stall_watch&) = delete;
  stall_watch& operator=(const stall_watch&) = delete;

  // `what` must outlive the call (a string literal).
  void arm(clock::time_point deadline, const char* what) noexcept {
    what_.store(what, std::memory_order_relaxed);
    deadline_.store(deadline.time_since_epoch().count(), std::memory_order_release);
  }
  void disarm() noexcept { deadline_.store(k_disarmed, std::memory_order_release); }
  // True once on_stall was started.
  bool fired() const noexcept { return fired_.load(std::memory_order_acquire); }
  // How many times the watch thread has looked (tests wait on it rather than on time).
  std::uint64_t looks() const noexcept { return looks_.load(std::memory_order_acquire); }

  class scope {
   public:
    scope(stall_watch& w, clock::time_point deadline, const char* what) : w_(w) { w_.arm(deadline, what); }
    ~scope() { w_.disarm(); }
    scope(const scope&) = delete;
    scope& operator=(const scope&) = delete;

   private:
    stall_watch& w_;
  };

 private:
  static constexpr clock::rep k_disarmed = 0;
  void run();

  std::function<void()> on_stall_;
  std::chrono::milliseconds grace_;
  std::atomic<clock::rep> deadline_{k_disarmed};
  std::atomic<const char*> what_{""};
  std::atomic<bool> fired_{false};
  std::atomic<std::uint64_t> looks_{0};
  std::mutex mutex_;
  std::condition_variable wake_;
  bool stopping_ = false;
  std::thread thread_;
  std::thread aborter_;  // runs on_stall (a thread of its own: see run())
};

}  // namespace atomr::cluster::detail
