#include "atomr/local/actors/dispatcher.hpp"

#include <algorithm>
#include <string>

#include "atomr/common/log.hpp"
#include "atomr/common/spin.hpp"
#include "atomr/local/actors/cell.hpp"
#include "atomr/local/tunables.hpp"

namespace atomr::local {

pool_dispatcher::pool_dispatcher(std::size_t threads, std::size_t batch, std::chrono::microseconds spin)
    : batch_(batch), spin_(spin) {
  workers_.reserve(threads);
  for (std::size_t i = 0; i < threads; ++i) workers_.emplace_back([this] { work(); });
}

pool_dispatcher::~pool_dispatcher() {
  {
    std::lock_guard lock(sleep_mutex_);
    stopping_.store(true, std::memory_order_seq_cst);
  }
  sleep_cv_.notify_all();
  for (auto& w : workers_) w.join();
}

void pool_dispatcher::schedule(std::shared_ptr<cell_base> cell) {
  run_queue_.enqueue(std::move(cell));
  // Pairs with the fence in work(): either a worker about to sleep sees this cell, or this sees it
  // counted as sleeping and wakes it.
  std::atomic_thread_fence(std::memory_order_seq_cst);
  if (looking_.load(std::memory_order_relaxed) == 0 && sleeping_.load(std::memory_order_relaxed) > 0) {
    std::lock_guard lock(sleep_mutex_);
    sleep_cv_.notify_one();
  }
}

bool pool_dispatcher::take(moodycamel::ConsumerToken& token, std::shared_ptr<cell_base>& cell) {
  return run_queue_.try_dequeue(token, cell);
}

void pool_dispatcher::work() {
  moodycamel::ConsumerToken token(run_queue_);
  std::shared_ptr<cell_base> cell;
  const spin_relax relax;
  while (!stopping_.load(std::memory_order_acquire)) {
    if (take(token, cell)) {
      cell->run(batch_);
      cell.reset();
      continue;
    }
    // Look for a while (one worker at a time), then sleep.
    int none = 0;
    if (spin_.count() > 0 && looking_.compare_exchange_strong(none, 1)) {
      const auto until = std::chrono::steady_clock::now() + spin_;
      bool found = false;
      for (unsigned i = 0; !found; ++i) {
        found = take(token, cell);
        if (found || stopping_.load(std::memory_order_relaxed)) break;
        relax();
        if ((i & 63) == 63 && std::chrono::steady_clock::now() > until) break;
      }
      looking_.store(0, std::memory_order_seq_cst);
      if (found) {
        // Others may be waiting behind this one: let a sleeper look.
        if (run_queue_.size_approx() > 0 && sleeping_.load() > 0) {
          std::lock_guard lock(sleep_mutex_);
          sleep_cv_.notify_one();
        }
        cell->run(batch_);
        cell.reset();
        continue;
      }
    }
    std::unique_lock lock(sleep_mutex_);
    sleeping_.fetch_add(1, std::memory_order_seq_cst);
    std::atomic_thread_fence(std::memory_order_seq_cst);
    sleep_cv_.wait(lock, [&] { return run_queue_.size_approx() > 0 || stopping_.load(std::memory_order_acquire); });
    sleeping_.fetch_sub(1, std::memory_order_seq_cst);
  }
  // Whatever was scheduled before the stop still runs (as the blocking queue's workers did).
  while (take(token, cell)) {
    cell->run(batch_);
    cell.reset();
  }
}

namespace {
// ATOMR_DEDICATED_LOOK_US, read once; a bad value is reported once and the default serves.
std::chrono::microseconds dedicated_look() {
  static const std::chrono::microseconds look = tunable_us_or(
      tunables::dedicated_look,
      std::chrono::microseconds(std::stoll(std::string(tunables::dedicated_look.default_value))), "actors");
  return look;
}

constexpr int k_semaphore_spins = 100;
}  // namespace

dedicated_dispatcher::dedicated_dispatcher(int spin_iterations, std::size_t batch,
                                           std::function<void()> on_thread_start)
    // The semaphore's own spin is a bare load loop; the look in idle_wait replaces it.
    : wake_(0, std::min(spin_iterations, k_semaphore_spins)),
      look_(spin_iterations > 0 ? dedicated_look() : std::chrono::microseconds(0)),
      batch_(batch),
      on_thread_start_(std::move(on_thread_start)) {}

dedicated_dispatcher::~dedicated_dispatcher() {
  if (thread_.joinable()) thread_.join();
}

void dedicated_dispatcher::start(std::shared_ptr<cell_base> cell) {
  thread_ = std::thread([this, cell = std::move(cell)]() mutable {
    if (on_thread_start_) on_thread_start_();
    const spin_relax relax;
    while (!cell->stopped()) {
      idle_wait(relax);
      cell->run(batch_);
    }
    cell.reset();
    finished_.store(true, std::memory_order_release);
  });
}

void dedicated_dispatcher::schedule(std::shared_ptr<cell_base>) { wake_.signal(); }

// Waking a sleeping thread costs 5-15 us on a VM (a futex round trip), more than most device
// operations, so the thread looks for work ATOMR_DEDICATED_LOOK_US (100 us) before it sleeps: a
// device operation of tens of microseconds (a 64 MiB copy) then finds the thread awake for the
// next one (on an H100 with 16 vCPUs, a 64 MiB fetch goes from 0.80 to 0.90 of raw with 100 us
// against a short spin). It looks with spin_relax, like the project's other polling loops: the pause hint
// where the rank has cores to spare, a yield where it has not (the semaphore's own spin does
// neither).
void dedicated_dispatcher::idle_wait(const spin_relax& relax) {
  if (wake_.tryWait()) return;
  if (look_.count() > 0) {
    const auto until = std::chrono::steady_clock::now() + look_;
    for (unsigned i = 1;; ++i) {
      relax();
      if (wake_.tryWait()) return;
      if ((i & 63) == 0 && std::chrono::steady_clock::now() > until) break;
    }
  }
  wake_.wait();
}

}  // namespace atomr::local
