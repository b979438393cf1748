// Open asks: their correlation ids, handlers and deadlines, which the progress thread keeps.
#include "router_core_impl.hpp"

namespace atomr::cluster::routing {

std::uint64_t router_core_impl::expect_reply(int peer, const std::string& name, detail::reply_handler handler,
                                             std::chrono::steady_clock::duration timeout) {
  const std::uint64_t correlation = next_correlation_.fetch_add(1, std::memory_order_relaxed);
  const auto due = std::chrono::steady_clock::now() + timeout;
  const auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(timeout).count();
  std::optional<error> refused;
  {
    std::lock_guard lock(pending_mutex_);
    if (failed_peer_reason(peer, refused)) {
      // Answered below, after the lock.
    } else {
      pending_.emplace(correlation, pending_ask{peer, name, std::move(handler), due, ms});
      push_due(due, correlation);
      const auto ns = due.time_since_epoch().count();
      if (ns < next_due_ns_.load(std::memory_order_relaxed)) next_due_ns_.store(ns, std::memory_order_relaxed);
      return correlation;
    }
  }
  handler(std::move(*refused));
  return correlation;
}

// Under pending_mutex_: whether `peer` failed (then `why` holds the error).
bool router_core_impl::failed_peer_reason(int peer, std::optional<error>& why) {
  if (peer < 0 || peer >= size_) return false;
  auto& o = *out_[static_cast<std::size_t>(peer)];
  if (!o.failed.load(std::memory_order_acquire)) return false;
  std::lock_guard lock(o.mutex);
  why = error(errc::unavailable, "rank " + std::to_string(peer) + " failed: " + o.failure);
  return true;
}

// Under pending_mutex_.
void router_core_impl::push_due(std::chrono::steady_clock::time_point at, std::uint64_t correlation) {
  if (due_.size() >= 64 && due_.size() >= 2 * pending_.size()) {
    due_.clear();
    for (const auto& [id, p] : pending_) due_.push_back({p.due, id});
    std::make_heap(due_.begin(), due_.end(), std::greater<>());
  }
  due_.push_back({at, correlation});
  std::push_heap(due_.begin(), due_.end(), std::greater<>());
}

void router_core_impl::expire_due(std::chrono::steady_clock::time_point now) {
  std::vector<pending_ask> late;
  {
    std::lock_guard lock(pending_mutex_);
    while (!due_.empty() && due_.front().at <= now) {
      const auto it = pending_.find(due_.front().correlation);
      std::pop_heap(due_.begin(), due_.end(), std::greater<>());
      due_.pop_back();
      if (it == pending_.end()) continue;
      late.push_back(std::move(it->second));
      pending_.erase(it);
    }
    next_due_ns_.store(
        due_.empty() ? std::numeric_limits<std::int64_t>::max() : due_.front().at.time_since_epoch().count(),
        std::memory_order_relaxed);
  }
  for (auto& p : late) {
    p.handler(
        error(errc::timeout, "ask to " + p.target() + " got no reply within " + std::to_string(p.timeout_ms) + " ms"));
  }
}

}  // namespace atomr::cluster::routing
