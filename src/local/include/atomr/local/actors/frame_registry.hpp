// The suspended coroutine frames one actor owns: its coroutine handlers (coroutine_actor) and the
// tasks started on its thread. Each entry is the root of a chain of frames (a root owns the tasks
// it awaits), so destroying the roots destroys every frame that would resume on the actor. The
// actor destroys them when it stops or restarts, which also fails the replies and futures they
// held. A handler that holds the mailbox is counted: while one is suspended, no other message of
// the actor runs (see mailbox_mode).
//
// Threading: the owning actor's thread only (its handlers, and the resumptions it runs).
#pragma once

#include <coroutine>
#include <cstddef>
#include <unordered_map>
#include <utility>

namespace atomr::local::detail {

class frame_registry {
 public:
  frame_registry() = default;
  ~frame_registry() { destroy_all(); }
  frame_registry(const frame_registry&) = delete;
  frame_registry& operator=(const frame_registry&) = delete;

  // `root` is suspended and will resume on this actor; `holds_mailbox` keeps other messages out
  // until it finishes.
  void adopt(std::coroutine_handle<> root, bool holds_mailbox) {
    roots_.emplace(root.address(), holds_mailbox);
    if (holds_mailbox) ++holding_;
  }
  // `root` finished; the caller destroys it.
  void finished(std::coroutine_handle<> root) {
    const auto it = roots_.find(root.address());
    if (it == roots_.end()) return;
    if (it->second) --holding_;
    roots_.erase(it);
  }
  bool holding() const noexcept { return holding_ != 0; }
  std::size_t size() const noexcept { return roots_.size(); }

  // Destroying a frame can fail a future whose continuation starts or suspends another frame of
  // this actor, so the registry is emptied until it stays empty.
  void destroy_all() {
    while (!roots_.empty()) {
      auto roots = std::exchange(roots_, {});
      holding_ = 0;
      for (const auto& [address, holds] : roots) std::coroutine_handle<>::from_address(address).destroy();
    }
  }

 private:
  std::unordered_map<void*, bool> roots_;  // frame address -> holds the mailbox
  std::size_t holding_ = 0;
};

}  // namespace atomr::local::detail
