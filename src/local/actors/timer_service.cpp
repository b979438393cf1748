#include "atomr/local/actors/timer_service.hpp"

#include <algorithm>

namespace atomr::local {

timer_service::timer_service() : thread_([this] { run(); }) {}

timer_service::~timer_service() { stop(); }

void timer_service::stop() {
  {
    std::lock_guard lock(mutex_);
    stopping_ = true;
  }
  wake_.notify_all();
  // (From a callback, the thread cannot wait for itself: it ends once the callback returns.)
  if (std::this_thread::get_id() == thread_.get_id()) return;
  std::call_once(joined_, [&] { thread_.join(); });
}

timer_handle timer_service::at(clock::time_point when, std::function<void()> fn) {
  return push(when, clock::duration::zero(), std::move(fn));
}

timer_handle timer_service::every(clock::duration interval, std::function<void()> fn) {
  return push(clock::now() + interval, interval, std::move(fn));
}

timer_handle timer_service::push(clock::time_point when, clock::duration interval, std::function<void()> fn) {
  auto cancelled = std::make_shared<std::atomic<bool>>(false);
  bool earliest = false;
  {
    std::lock_guard lock(mutex_);
    earliest = queue_.empty() || when < queue_.front().when;
    insert(entry{when, next_sequence_++, interval, std::move(fn), cancelled});
  }
  if (earliest) wake_.notify_one();
  return timer_handle(std::move(cancelled));
}

void timer_service::insert(entry e) {
  if (queue_.size() >= sweep_at_) sweep();
  queue_.push_back(std::move(e));
  std::push_heap(queue_.begin(), queue_.end(), std::greater<>{});
}

// Drops the cancelled entries. The next sweep comes when the heap has doubled from what stayed,
// so the linear pass costs O(1) per push however many entries are live.
void timer_service::sweep() {
  std::erase_if(queue_, [](const entry& e) { return e.cancelled->load(std::memory_order_acquire); });
  std::make_heap(queue_.begin(), queue_.end(), std::greater<>{});
  sweep_at_ = std::max(k_first_sweep, queue_.size() * 2);
}

std::size_t timer_service::pending() const {
  std::lock_guard lock(mutex_);
  return queue_.size();
}

void timer_service::run() {
  std::unique_lock lock(mutex_);
  while (!stopping_) {
    if (queue_.empty()) {
      wake_.wait(lock);
      continue;
    }
    const auto when = queue_.front().when;
    if (clock::now() < when) {
      wake_.wait_until(lock, when);
      continue;
    }
    std::pop_heap(queue_.begin(), queue_.end(), std::greater<>{});
    entry e = std::move(queue_.back());
    queue_.pop_back();
    if (e.cancelled->load(std::memory_order_acquire)) continue;
    lock.unlock();
    e.fn();
    lock.lock();
    if (e.interval > clock::duration::zero() && !e.cancelled->load(std::memory_order_acquire)) {
      e.when += e.interval;
      const auto now = clock::now();
      if (e.when < now) e.when = now + e.interval;  // fell behind: skip missed beats
      e.sequence = next_sequence_++;
      insert(std::move(e));
    }
  }
}

}  // namespace atomr::local
