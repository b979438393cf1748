#include "atomr/local/actors/dispatcher.hpp"

#include "atomr/local/actors/cell.hpp"

namespace atomr::local {

pool_dispatcher::pool_dispatcher(std::size_t threads, std::size_t batch) : batch_(batch) {
  workers_.reserve(threads);
  for (std::size_t i = 0; i < threads; ++i) workers_.emplace_back([this] { work(); });
}

pool_dispatcher::~pool_dispatcher() {
  stopping_.store(true, std::memory_order_release);
  // One empty entry per worker wakes it to see `stopping_`.
  for (std::size_t i = 0; i < workers_.size(); ++i) run_queue_.enqueue(nullptr);
  for (auto& w : workers_) w.join();
}

void pool_dispatcher::schedule(std::shared_ptr<cell_base> cell) { run_queue_.enqueue(std::move(cell)); }

void pool_dispatcher::work() {
  moodycamel::ConsumerToken token(run_queue_);
  std::shared_ptr<cell_base> cell;
  while (true) {
    run_queue_.wait_dequeue(token, cell);
    if (!cell) {
      if (stopping_.load(std::memory_order_acquire)) return;
      continue;
    }
    cell->run(batch_);
    cell.reset();
  }
}

dedicated_dispatcher::dedicated_dispatcher(int spin_iterations, std::size_t batch,
                                           std::function<void()> on_thread_start)
    : wake_(0, spin_iterations), batch_(batch), on_thread_start_(std::move(on_thread_start)) {}

dedicated_dispatcher::~dedicated_dispatcher() {
  if (thread_.joinable()) thread_.join();
}

void dedicated_dispatcher::start(std::shared_ptr<cell_base> cell) {
  thread_ = std::thread([this, cell = std::move(cell)]() mutable {
    if (on_thread_start_) on_thread_start_();
    while (!cell->stopped()) {
      wake_.wait();
      cell->run(batch_);
    }
    cell.reset();
    finished_.store(true, std::memory_order_release);
  });
}

void dedicated_dispatcher::schedule(std::shared_ptr<cell_base>) { wake_.signal(); }

}  // namespace atomr::local
