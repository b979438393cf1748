// actor_ref<Msg>: the handle to a typed actor. Cheap to copy, safe from any thread, valid after the
// actor stops (sends then fail with errc::unavailable). It keeps the actor's cell alive, not the
// actor itself.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>

#include "atomr/common/result.hpp"
#include "atomr/local/actors/future.hpp"
#include "atomr/local/actors/supervision.hpp"

namespace atomr::local {

template <typename Msg>
class cell;

template <typename Msg>
class actor_ref {
 public:
  actor_ref() = default;
  explicit actor_ref(std::shared_ptr<cell<Msg>> c) : cell_(std::move(c)) {}

  // Enqueues `msg`. Never blocks, except on a full bounded mailbox whose policy is `block` (then up
  // to the spawn option's block_timeout). Errors: unavailable (stopped), resource_exhausted (full),
  // timeout (still full at the deadline).
  result<void> tell(Msg msg) const {
    if (!cell_) return error(errc::unavailable, "tell through an empty actor_ref");
    return cell_->enqueue(std::move(msg));
  }

  // Sends make(reply_to<R>) and returns the future of the reply. The future fails with
  // errc::timeout `timeout` after the call if no reply came, with errc::unavailable if the actor
  // is stopped or stops before answering, and never hangs.
  template <typename R, typename F>
  future<R> ask(F&& make, std::chrono::steady_clock::duration timeout) const {
    return ask_routed<R>(std::forward<F>(make), timeout, [](Msg&) { return false; });
  }

  // As ask(), but route(msg) sees the message first and returns true where it took it itself (a
  // device's inline lane runs the operation on the caller's thread); false enqueues it as usual.
  template <typename R, typename F, typename Route>
  future<R> ask_routed(F&& make, std::chrono::steady_clock::duration timeout, Route&& route) const {
    auto state = std::make_shared<detail::shared_state<R>>();
    future<R> reply(state);
    if (!cell_) {
      state->fulfil(error(errc::unavailable, "ask through an empty actor_ref"));
      return reply;
    }
    // The timer holds the state weakly: a cancelled timer stays queued until its deadline, and
    // must not keep the reply (a buffer, say) alive that long.
    auto deadline = cell_->system_timers().after(timeout, [weak = std::weak_ptr(state), name = cell_->name(), timeout] {
      const auto pending = weak.lock();
      if (!pending) return;
      pending->fulfil(error(errc::timeout,
                            "ask to actor '" + name + "' got no reply within " +
                                std::to_string(std::chrono::duration_cast<std::chrono::milliseconds>(timeout).count()) +
                                " ms"));
    });
    reply.then([deadline](const result<R>&) { deadline.cancel(); });
    Msg msg = make(reply_to<R>(promise<R>(state)));
    if (!route(msg)) (void)cell_->enqueue(std::move(msg));  // a refused message fails `state` with the reason
    return reply;
  }

  // For senders that deliver many messages at once (the router): enqueue without waking the
  // actor, then wake it once with flush(). Errors as tell().
  result<void> tell_deferred(Msg msg) const {
    if (!cell_) return error(errc::unavailable, "tell through an empty actor_ref");
    return cell_->enqueue(std::move(msg), false);
  }
  void flush() const {
    if (cell_) cell_->schedule();
  }
  // For the router: runs the actor's handler with `msg` on this thread when the actor was spawned
  // direct and is idle (true; `msg` is consumed), else false (`msg` untouched; enqueue it).
  bool try_receive_here(Msg& msg) const { return cell_ && cell_->try_receive_here(msg); }

  // Asks the actor to stop: it finishes the message in hand, stops its children, runs on_stop,
  // and fails every queued ask with "actor '<name>' stopped". Asynchronous; see on_terminated().
  void stop() const {
    if (cell_) cell_->request_stop();
  }

  // Fulfilled once the actor has terminated, with the reason (empty for a normal stop).
  future<terminated> on_terminated() const { return cell_->on_terminated(); }

  bool valid() const noexcept { return cell_ != nullptr; }
  bool alive() const { return cell_ && !cell_->stopped(); }
  std::uint64_t id() const { return cell_->id(); }
  const std::string& name() const { return cell_->name(); }

  friend bool operator==(const actor_ref& a, const actor_ref& b) { return a.cell_ == b.cell_; }

 private:
  std::shared_ptr<cell<Msg>> cell_;
};

}  // namespace atomr::local
