// actor<Msg>: derive from it to write an actor that accepts messages of type Msg (typically a
// std::variant of structs). receive() runs on one thread at a time, so the actor's members need no
// locks. Throwing from receive() or on_start() fails the actor and its parent's supervisor
// strategy decides what happens (throw actor_failure to choose the error).
//
//   struct add { int n; };
//   struct get { atomr::local::reply_to<int> reply; };
//   class counter : public atomr::local::actor<std::variant<add, get>> {
//     int total_ = 0;
//     void receive(std::variant<add, get>& m) override {
//       if (auto* a = std::get_if<add>(&m)) total_ += a->n;
//       else std::get<get>(m).reply.send(total_);
//     }
//   };
#pragma once

#include <chrono>
#include <concepts>
#include <functional>
#include <string>

#include "atomr/local/actors/actor_ref.hpp"
#include "atomr/local/actors/timer_service.hpp"

namespace atomr::local {

class actor_system;
struct spawn_options;

// What an actor can do besides handling messages. Use it from the actor's own thread (receive,
// on_start, on_stop) only.
template <typename Msg>
class actor_context {
 public:
  explicit actor_context(cell<Msg>& c) : cell_(c) {}

  actor_ref<Msg> self() const { return actor_ref<Msg>(cell_.shared_self()); }
  const std::string& name() const { return cell_.name(); }
  actor_system& system() const { return cell_.system(); }

  // Spawns a child supervised by this actor (see spawn_options::supervision).
  template <typename Child, typename... Args>
  auto spawn(const spawn_options& options, Args&&... args) const;

  // Delivers map(terminated) to this actor when `other` terminates.
  template <typename OtherMsg, typename Map>
  void watch(const actor_ref<OtherMsg>& other, Map map) const {
    auto me = self();
    other.on_terminated().then([me, map = std::move(map)](const result<terminated>& t) {
      if (t) (void)me.tell(map(*t));
    });
  }

  // Sends `value` (anything Msg is constructible from) to this actor after `delay`, or a copy of
  // it every `interval`. Cancelled when the actor stops.
  template <typename V>
  timer_handle tell_after(std::chrono::steady_clock::duration delay, V value) const {
    auto me = self();
    auto h =
        cell_.system_timers().after(delay, [me, v = std::move(value)]() mutable { (void)me.tell(Msg(std::move(v))); });
    cell_.keep_timer(h);
    return h;
  }
  template <typename V>
  requires std::copy_constructible<V> timer_handle tell_every(std::chrono::steady_clock::duration interval, V value)
  const {
    auto me = self();
    auto h = cell_.system_timers().every(interval, [me, v = std::move(value)] { (void)me.tell(Msg(v)); });
    cell_.keep_timer(h);
    return h;
  }

  // Stops this actor after the current message; with a reason, watchers get it as the failure.
  void stop() const { cell_.request_stop(); }
  void stop(error reason) const { cell_.request_stop(std::move(reason)); }

 private:
  cell<Msg>& cell_;
};

template <typename Msg>
class actor {
 public:
  using message_type = Msg;

  virtual ~actor() = default;
  virtual void receive(Msg& message) = 0;
  // Run on the actor's thread: before the first message, and after a restart on the new instance.
  virtual void on_start() {}
  // Run on the actor's thread when it stops, and on the old instance before a restart.
  virtual void on_stop() {}

  actor_context<Msg>& context() { return *context_; }

 private:
  template <typename>
  friend class cell;
  actor_context<Msg>* context_ = nullptr;
};

}  // namespace atomr::local
