#include "request_reaper.hpp"

#include "atomr/common/spin.hpp"
#include "atomr/common/tunables.hpp"
#include "atomr/local/topology/irq_cpus.hpp"

namespace atomr::cluster::detail {

request_reaper::request_reaper(std::vector<int> avoid)
    : thread_([this, avoid = std::move(avoid)] {
        (void)local::avoid_cpus(avoid);  // (as the progress thread: see world_engine::irq_cpus_)
        run();
      }) {}

request_reaper::~request_reaper() {
  {
    std::lock_guard lock(mutex_);
    stopping_ = true;
  }
  wake_.notify_one();
  thread_.join();
}

void request_reaper::take(std::deque<std::unique_ptr<coll_request>>& from, std::size_t n) {
  if (n == 0) return;
  bool wake = false;
  {
    std::lock_guard lock(mutex_);
    for (std::size_t i = 0; i < n; ++i) {
      pending_.push_back(std::move(from.front()));
      from.pop_front();
    }
    wake = sleeping_;
  }
  // (A wake-up only for a sleeping reaper: one that is freeing comes back for these itself.)
  if (wake) wake_.notify_one();
}

void request_reaper::run() {
  std::vector<std::unique_ptr<coll_request>> freeing;
  std::unique_lock lock(mutex_);
  while (true) {
    if (pending_.empty()) {
      if (stopping_) return;
      sleeping_ = true;
      wake_.wait(lock, [&] { return stopping_ || !pending_.empty(); });
      sleeping_ = false;
      continue;
    }
    freeing.swap(pending_);
    lock.unlock();
    freeing.clear();  // (the frees, outside the lock)
    lock.lock();
  }
}

bool request_reaper::wanted() {
  const auto mode = tunable_value(tunables::coll_free_thread);
  if (mode == "1") return true;
  if (mode == "0") return false;
  return spin_relax::plenty();
}

}  // namespace atomr::cluster::detail
