// Dispatchers run actor cells. A cell with work is scheduled once (its `scheduled` flag makes
// repeated schedules free) and runs a batch of messages on one thread at a time.
// - pool_dispatcher: a few threads shared by many actors; workers block on a moodycamel
//   BlockingConcurrentQueue of cells (spin briefly, then sleep on a semaphore).
// - dedicated_dispatcher: one OS thread for one actor (device actors keep their CUDA device
//   current on it); it spins briefly (longer with ATOMR_DEDICATED_LOOK_US), then sleeps on a
//   moodycamel LightweightSemaphore.
// Idle threads sleep; the spin window trades a few microseconds of CPU for fast wake-up.
#pragma once

#include <concurrentqueue/blockingconcurrentqueue.h>
#include <concurrentqueue/lightweightsemaphore.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <functional>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#include "atomr/common/spin.hpp"

namespace atomr::local {

class cell_base;

class dispatcher {
 public:
  virtual ~dispatcher() = default;
  virtual void schedule(std::shared_ptr<cell_base> cell) = 0;
};

// The shared pool. An idle worker first looks for work for a while (`spin`, one worker at a time,
// with spin_relax), then sleeps; schedule() wakes a sleeper only when no worker is looking. A
// message that arrives within `spin` of the last one (a remote ask's next request, a stream of
// tells arriving one by one) is then picked up without a wake-up system call, which costs several
// microseconds on the waking thread (the router's) and on the woken one.
class pool_dispatcher final : public dispatcher {
 public:
  pool_dispatcher(std::size_t threads, std::size_t batch,
                  std::chrono::microseconds spin = std::chrono::microseconds(100));
  ~pool_dispatcher() override;  // joins the workers
  void schedule(std::shared_ptr<cell_base> cell) override;
  std::size_t threads() const noexcept { return workers_.size(); }

 private:
  void work();
  bool take(moodycamel::ConsumerToken& token, std::shared_ptr<cell_base>& cell);
  moodycamel::ConcurrentQueue<std::shared_ptr<cell_base>> run_queue_;
  std::size_t batch_;
  std::chrono::microseconds spin_;
  std::atomic<bool> stopping_{false};
  std::atomic<int> looking_{0};   // workers spinning for work (at most one)
  std::atomic<int> sleeping_{0};  // workers asleep (or about to be)
  std::mutex sleep_mutex_;
  std::condition_variable sleep_cv_;
  std::vector<std::thread> workers_;
};

class dedicated_dispatcher final : public dispatcher {
 public:
  // `on_thread_start` runs first on the new thread (e.g. to bind a CUDA device).
  dedicated_dispatcher(int spin_iterations, std::size_t batch, std::function<void()> on_thread_start);
  ~dedicated_dispatcher() override;  // joins the thread
  void schedule(std::shared_ptr<cell_base> cell) override;
  // Starts the thread for `cell`; it exits once the cell has stopped.
  void start(std::shared_ptr<cell_base> cell);
  bool finished() const noexcept { return finished_.load(std::memory_order_acquire); }

 private:
  void idle_wait(const spin_relax& relax);
  moodycamel::LightweightSemaphore wake_;
  std::chrono::microseconds look_;
  std::size_t batch_;
  std::function<void()> on_thread_start_;
  std::atomic<bool> finished_{false};
  std::thread thread_;
};

}  // namespace atomr::local
