// Where a suspended atomr coroutine resumes. A coroutine started on an actor's thread belongs to
// that actor (its home): whatever it awaits, it resumes on the actor's dispatcher, through the
// actor's system queue, never on the thread that fulfilled the future (a device's completion
// thread, the router's progress thread). A coroutine started elsewhere (main, a test, a plain
// thread) has no home and resumes on the fulfilling thread, as a then() continuation runs.
//
// resume_point is one suspension: the frame, its home, and whether the frame was destroyed while
// it waited (its actor stopped or restarted), in which case the wake-up is dropped.
#pragma once

#include <atomic>
#include <coroutine>
#include <memory>
#include <type_traits>
#include <utility>

#include "atomr/local/actors/cell.hpp"

namespace atomr::local::detail {

struct coroutine_home {
  std::weak_ptr<cell_base> cell;
  bool homed = false;

  // The actor whose handler runs on this thread, if any.
  static coroutine_home here() {
    if (cell_base* c = cell_base::current()) return {c->weak_from_this(), true};
    return {};
  }
};

// What every atomr coroutine promise (task's) carries, so awaiters can find the frame's home.
struct homed_promise {
  coroutine_home home_;
};

template <typename P>
coroutine_home home_of(std::coroutine_handle<P> h) {
  if constexpr (std::is_base_of_v<homed_promise, P>) {
    return h.promise().home_;
  } else {
    return {};  // a foreign coroutine type resumes where its awaited future is fulfilled
  }
}

class resume_point {
 public:
  resume_point(std::coroutine_handle<> frame, coroutine_home home) : frame_(frame), home_(std::move(home)) {}

  // The awaiter has registered the wake-up and is about to suspend. False if the wake-up came
  // first (the future was fulfilled meanwhile, maybe on this very thread): the frame then goes
  // on at once instead of suspending, which also spares a homed one the trip through its
  // actor's queue.
  bool arm() noexcept { return state_.exchange(k_armed, std::memory_order_acq_rel) != k_fired; }

  // The awaited future is fulfilled (any thread, once).
  static void wake(const std::shared_ptr<resume_point>& p) {
    if (p->state_.exchange(k_fired, std::memory_order_acq_rel) != k_armed) return;  // arm() sees it
    if (!p->home_.homed) {
      p->frame_.resume();
      return;
    }
    // A stopped actor has destroyed its frames; nothing is left to resume.
    if (auto c = p->home_.cell.lock(); c && !c->stopped()) c->post_system(resume_frame{p});
  }
  // On the home actor's thread (its system queue): resumes unless the frame was destroyed.
  void resume_here() {
    if (!cancelled_) frame_.resume();
  }
  // The awaiting frame is going away (its awaiter is destroyed). Home actor's thread only: an
  // unhomed frame is never destroyed while it waits (nothing owns it but its own wake-up).
  void cancel() noexcept { cancelled_ = true; }

 private:
  static constexpr int k_registering = 0, k_armed = 1, k_fired = 2;
  const std::coroutine_handle<> frame_;
  const coroutine_home home_;
  std::atomic<int> state_{k_registering};
  bool cancelled_ = false;
};

}  // namespace atomr::local::detail
