// task<T>: the coroutine type of atomr. A function returning task<T> may co_await atomr futures
// and other tasks, and co_return a T, an error, or a result<T>. Awaiting a task yields its
// result<T>; an exception escaping the body becomes an error (errc::internal, or an
// actor_failure's own error).
//
//   atomr::local::task<double> mean(const atomr::local::device& dev, std::span<const float> xs) {
//     ATOMR_CO_TRY(auto buf, co_await dev.allocate<float>(xs.size()));
//     ATOMR_CO_TRY_VOID(co_await dev.upload(buf, xs));
//     ...
//   }
//
// A task is lazy: its body starts when it is awaited, or when it is turned into a future
// (start(), or the implicit conversion), after which get() and then() work as on any future.
// Ownership: an awaited task belongs to the frame that awaits it, and destroying that frame
// destroys it; a started task owns itself until it finishes, and if it was started on an actor's
// thread that actor owns it too: stopping the actor destroys it and fails its future (see
// frame_registry.hpp). Threading: see resume_point.hpp for where a task resumes.
#pragma once

#include <coroutine>
#include <exception>
#include <optional>
#include <string>
#include <utility>

#include "atomr/common/result.hpp"
#include "atomr/local/actors/awaitable.hpp"
#include "atomr/local/actors/future.hpp"
#include "atomr/local/actors/resume_point.hpp"
#include "atomr/local/actors/supervision.hpp"

namespace atomr::local {

template <typename T = void>
class task;

namespace detail {

// The error an exception escaping a coroutine body becomes (called inside unhandled_exception).
inline error current_exception_error() {
  try {
    throw;
  } catch (const actor_failure& f) {
    return f.failure();
  } catch (const std::exception& e) {
    return error(errc::internal, std::string("coroutine failed: ") + e.what());
  } catch (...) {
    return error(errc::internal, "coroutine failed with an unknown exception");
  }
}

// Who a frame reports to when its body ends.
enum class frame_role : unsigned char {
  child,       // awaited by another frame: resume it
  detached,    // started with no home: fulfil the future, then free the frame
  homed_root,  // started on an actor's thread: fulfil the future; the actor owns the frame meanwhile
  handler,     // a coroutine_actor's handler: an error fails the actor
};

template <typename T>
struct task_value {
  std::optional<result<T>> value_;
  void return_value(result<T> r) { value_.emplace(std::move(r)); }
};
template <>
struct task_value<void> {
  std::optional<result<void>> value_;
  void return_void() { value_.emplace(); }
};

template <typename T>
class task_promise : public homed_promise, public task_value<T> {
 public:
  task<T> get_return_object() noexcept;
  std::suspend_always initial_suspend() noexcept { return {}; }

  struct final_awaiter {
    bool await_ready() noexcept { return false; }
    std::coroutine_handle<> await_suspend(std::coroutine_handle<task_promise> h) noexcept {
      return h.promise().finish(h);
    }
    void await_resume() noexcept {}
  };
  final_awaiter final_suspend() noexcept { return {}; }
  void unhandled_exception() { this->value_.emplace(current_exception_error()); }

  // The body ended (at its end, or leaving early with an error: co_try.hpp): hands the result to
  // whoever waits and returns the frame to run next. The frame may be destroyed here.
  std::coroutine_handle<> finish(std::coroutine_handle<task_promise> self) noexcept {
    finished_ = true;
    switch (role_) {
      case frame_role::child: return continuation_ ? continuation_ : std::noop_coroutine();
      case frame_role::detached:
        sink_.set_result(std::move(*this->value_));
        self.destroy();
        break;
      case frame_role::homed_root:
        sink_.set_result(std::move(*this->value_));
        if (owner_ != nullptr) {
          owner_->frames().finished(self);
          self.destroy();
        }
        break;
      case frame_role::handler:
        if (owner_ != nullptr) {
          cell_base* owner = owner_;
          owner->frames().finished(self);
          if constexpr (std::is_void_v<T>) {
            result<void> r = std::move(*this->value_);
            if (!r) {
              const error e = std::move(r).error_value();
              {
                drop_reason_scope why(e.with_context("actor '" + owner->name() + "' failed handling this request"));
                self.destroy();
              }
              owner->handler_failed(e);
              break;
            }
          }
          self.destroy();
          owner->schedule();  // the mailbox may have been held
        }
        break;
    }
    return std::noop_coroutine();
  }

  frame_role role_ = frame_role::child;
  bool finished_ = false;
  std::coroutine_handle<> continuation_;
  promise<T> sink_{nullptr};
  // The actor that owns this suspended root (set once it is in the actor's frame_registry).
  cell_base* owner_ = nullptr;
};

}  // namespace detail

template <typename T>
class [[nodiscard]] task {
 public:
  using promise_type = detail::task_promise<T>;
  using handle_type = std::coroutine_handle<promise_type>;

  task() = default;
  explicit task(handle_type h) noexcept : frame_(h) {}
  task(task&& other) noexcept : frame_(std::exchange(other.frame_, {})) {}
  task& operator=(task&& other) noexcept {
    if (this != &other) {
      if (frame_) frame_.destroy();
      frame_ = std::exchange(other.frame_, {});
    }
    return *this;
  }
  ~task() {
    if (frame_) frame_.destroy();
  }

  bool valid() const noexcept { return static_cast<bool>(frame_); }

  // Awaiting runs the body on this frame's thread at once and resumes the awaiter when it ends;
  // the body inherits the awaiter's home. Await a task once.
  struct awaiter {
    handle_type child;
    bool await_ready() const noexcept { return false; }
    template <typename P>
    std::coroutine_handle<> await_suspend(std::coroutine_handle<P> parent) noexcept {
      child.promise().continuation_ = parent;
      child.promise().home_ = detail::home_of(parent);
      return child;
    }
    result<T> await_resume() { return std::move(*child.promise().value_); }
  };
  awaiter operator co_await() & noexcept { return awaiter{frame_}; }
  awaiter operator co_await() && noexcept { return awaiter{frame_}; }

  // Starts the body on this thread and returns the future of its result.
  future<T> start() && {
    const handle_type h = std::exchange(frame_, {});
    auto& p = h.promise();
    promise<T> sink;
    future<T> f = sink.get_future();
    p.sink_ = std::move(sink);
    p.home_ = detail::coroutine_home::here();
    if (!p.home_.homed) {
      p.role_ = detail::frame_role::detached;
      h.resume();  // the frame frees itself; it may be gone already
      return f;
    }
    p.role_ = detail::frame_role::homed_root;
    adopt_if_suspended(h, false);
    return f;
  }
  operator future<T>() && { return std::move(*this).start(); }
  // start() and wait (see future::get: not from a handler whose answer needs its own actor).
  result<T> get() && { return std::move(*this).start().get(); }

  // For coroutine_actor: runs the body as the current actor's handler. Throws actor_failure if it
  // fails before it suspends (the cell treats that as a throwing handler); fails the actor later
  // otherwise.
  void start_as_handler(bool holds_mailbox) && requires std::is_void_v<T> {
    const handle_type h = std::exchange(frame_, {});
    auto& p = h.promise();
    p.home_ = detail::coroutine_home::here();
    p.role_ = detail::frame_role::handler;
    if (!adopt_if_suspended(h, holds_mailbox)) {
      result<void> r = std::move(*p.value_);
      if (r) {
        h.destroy();
        return;
      }
      const error e = std::move(r).error_value();
      {
        detail::drop_reason_scope why(
            e.with_context("actor '" + cell_base::current()->name() + "' failed handling this request"));
        h.destroy();
      }
      throw actor_failure(e);
    }
  }

 private:
  // Runs a homed root until it first suspends; a suspended one joins its actor's registry (no
  // other thread can resume it before: it resumes through the actor this thread is running).
  // False, with the frame still to destroy, if the body ended without suspending.
  static bool adopt_if_suspended(handle_type h, bool holds_mailbox) {
    auto& p = h.promise();
    h.resume();
    if (p.finished_) {
      if (p.role_ == detail::frame_role::homed_root) h.destroy();
      return false;
    }
    cell_base* owner = cell_base::current();
    owner->frames().adopt(h, holds_mailbox);
    p.owner_ = owner;
    return true;
  }

  handle_type frame_;
};

template <typename T>
task<T> detail::task_promise<T>::get_return_object() noexcept {
  return task<T>(std::coroutine_handle<task_promise>::from_promise(*this));
}

}  // namespace atomr::local
