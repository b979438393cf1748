#include "atomr/local/actors/timer_service.hpp"

namespace atomr::local {

timer_service::timer_service() : thread_([this] { run(); }) {}

timer_service::~timer_service() {
  {
    std::lock_guard lock(mutex_);
    stopping_ = true;
  }
  wake_.notify_all();
  thread_.join();
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
    earliest = queue_.empty() || when < queue_.top().when;
    queue_.push(entry{when, next_sequence_++, interval, std::move(fn), cancelled});
  }
  if (earliest) wake_.notify_one();
  return timer_handle(std::move(cancelled));
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
    const auto when = queue_.top().when;
    if (clock::now() < when) {
      wake_.wait_until(lock, when);
      continue;
    }
    entry e = std::move(const_cast<entry&>(queue_.top()));
    queue_.pop();
    if (e.cancelled->load(std::memory_order_acquire)) continue;
    lock.unlock();
    e.fn();
    lock.lock();
    if (e.interval > clock::duration::zero() && !e.cancelled->load(std::memory_order_acquire)) {
      e.when += e.interval;
      const auto now = clock::now();
      if (e.when < now) e.when = now + e.interval;  // fell behind: skip missed beats
      e.sequence = next_sequence_++;
      queue_.push(std::move(e));
    }
  }
}

}  // namespace atomr::local
