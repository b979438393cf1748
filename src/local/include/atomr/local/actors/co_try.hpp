// Error propagation inside a task, the coroutine forms of ATOMR_ASSIGN_OR_RETURN and ATOMR_TRY:
//
//   ATOMR_CO_TRY(auto buf, co_await dev.allocate<float>(n));   // binds the value, or leaves
//   ATOMR_CO_TRY_VOID(co_await dev.upload(buf, host));          // leaves on an error
//
// On an error the task ends at once with that error as its result, in a task<void> as in any
// other (a task<void> has no `co_return error` of its own). The locals still alive are destroyed
// when the frame is: at once for a started task, when its awaiter resumes for an awaited one.
// The expression may contain commas; the declaration may not.
#pragma once

#include <coroutine>
#include <utility>

#include "atomr/common/error.hpp"
#include "atomr/common/result.hpp"
#include "atomr/local/actors/task.hpp"

namespace atomr::local::detail {

// Ends the awaiting task with an error, as if its body had returned it.
class leave_with {
 public:
  explicit leave_with(error e) : error_(std::move(e)) {}
  bool await_ready() const noexcept { return false; }
  template <typename T>
  std::coroutine_handle<> await_suspend(std::coroutine_handle<task_promise<T>> h) noexcept {
    h.promise().value_.emplace(std::move(error_));
    return h.promise().finish(h);  // may destroy the frame, and this awaiter with it
  }
  void await_resume() const noexcept {}

 private:
  error error_;
};

}  // namespace atomr::local::detail

#define ATOMR_CO_TRY(decl, ...) ATOMR_CO_TRY_IMPL_(ATOMR_CONCAT_(atomr_co_try_, __LINE__), decl, __VA_ARGS__)
#define ATOMR_CO_TRY_IMPL_(tmp, decl, ...)                                                         \
  auto tmp = (__VA_ARGS__);                                                                        \
  if (!tmp.has_value()) co_await ::atomr::local::detail::leave_with(std::move(tmp).error_value()); \
  decl = std::move(tmp).value()

#define ATOMR_CO_TRY_VOID(...)                                                               \
  do {                                                                                       \
    if (auto atomr_co_try_r_ = (__VA_ARGS__); !atomr_co_try_r_.has_value()) {                \
      co_await ::atomr::local::detail::leave_with(std::move(atomr_co_try_r_).error_value()); \
    }                                                                                        \
  } while (false)
