// coroutine_actor<Msg>: an actor whose handler is a coroutine. handle() takes the message by value
// (it lives in the coroutine frame, so it outlives a suspension) and may co_await any atomr future
// or task:
//
//   class fetcher : public atomr::local::coroutine_actor<fetch> {
//     atomr::local::task<void> handle(fetch m) override {
//       auto bytes = co_await registry_->fetch(m.token, m.into);   // suspends, does not block
//       if (!bytes) co_return m.reply.fail(bytes.error_value());
//       m.reply.send(m.into.size());
//     }
//   };
//
// What the mailbox does while a handler is suspended (the mode, given to the constructor):
//   - mailbox_mode::hold (default): nothing. No other message of this actor runs until the
//     handler finishes, so state the handler read before co_await is still what it read after.
//     Messages queue up (a bounded mailbox fills up) and run in order afterwards.
//   - mailbox_mode::interleave: the next messages run while it is suspended, and so may other
//     suspended handlers resume, each in turn on the actor's thread (never two at once). Handlers
//     start in the order per sender; they may finish in another order.
// A suspended handler resumes on this actor's dispatcher (a pool worker, or its own dedicated
// thread), never on the thread that fulfilled what it awaited. An error that leaves the handler
// (ATOMR_CO_TRY, an exception) fails the actor as a throwing receive() does, whether it came
// before or after a suspension.
//
// Stopping or restarting the actor destroys its suspended handlers: their messages (and the
// reply_to handles in them) are destroyed, so each asker gets errc::unavailable "actor 'x'
// stopped" (errc::aborted on a restart).
//
// A direct actor (spawn_options::direct) runs the handler on the sender's thread (the router's)
// only until its first suspension; the rest runs on the pool. Awaiting is the way to wait in a
// direct actor: get() there fails at once, co_await suspends and frees the router's thread. In
// hold mode the router's later deliveries then go to the mailbox until the handler finishes.
#pragma once

#include <utility>

#include "atomr/local/actors/actor.hpp"
#include "atomr/local/actors/task.hpp"

namespace atomr::local {

enum class mailbox_mode {
  hold,        // a suspended handler keeps the other messages out until it finishes
  interleave,  // other messages (and resumptions) run while a handler is suspended
};

template <typename Msg>
class coroutine_actor : public actor<Msg> {
 public:
  explicit coroutine_actor(mailbox_mode mode = mailbox_mode::hold) noexcept : mode_(mode) {}
  mailbox_mode mode() const noexcept { return mode_; }

  void receive(Msg& message) final { handle(std::move(message)).start_as_handler(mode_ == mailbox_mode::hold); }

 protected:
  virtual task<void> handle(Msg message) = 0;

 private:
  const mailbox_mode mode_;
};

}  // namespace atomr::local
