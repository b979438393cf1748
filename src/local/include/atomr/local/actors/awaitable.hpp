// `co_await f` on any atomr future (device operations, collectives, asks, token exports and
// fetches: they all return future<T>) yields its result<T>: no exception is thrown, an error is a
// value to test or to pass on with ATOMR_CO_TRY (co_try.hpp).
//
//   atomr::local::task<float> first(const atomr::local::device& dev, atomr::local::gpu_ref<float> buf) {
//     std::vector<float> host(1);
//     ATOMR_CO_TRY_VOID(co_await dev.download(buf, std::span(host)));
//     co_return host[0];
//   }
//
// A ready future does not suspend. Otherwise the coroutine resumes on its home actor's thread, or
// on the fulfilling thread if it has none (see resume_point.hpp). An ask's deadline applies as it
// does to get(): the awaited result is then errc::timeout. The future must stay valid until the
// co_await completes (a temporary does: it lives to the end of the co_await expression).
#pragma once

#include <coroutine>
#include <memory>

#include "atomr/local/actors/future.hpp"
#include "atomr/local/actors/resume_point.hpp"

namespace atomr::local {

namespace detail {

template <typename T>
class future_awaiter {
 public:
  explicit future_awaiter(const future<T>& f) noexcept : future_(&f) {}
  ~future_awaiter() {
    if (point_) point_->cancel();
  }
  future_awaiter(const future_awaiter&) = delete;
  future_awaiter& operator=(const future_awaiter&) = delete;

  bool await_ready() const { return future_->ready(); }

  template <typename P>
  bool await_suspend(std::coroutine_handle<P> h) {
    point_ = std::make_shared<resume_point>(h, home_of(h));
    future_->then([point = point_](const result<T>&) { resume_point::wake(point); });
    return point_->arm();
  }

  result<T> await_resume() const { return future_->get(); }

 private:
  const future<T>* future_;
  std::shared_ptr<resume_point> point_;
};

}  // namespace detail

template <typename T>
detail::future_awaiter<T> operator co_await(const future<T>& f) noexcept {
  return detail::future_awaiter<T>(f);
}

}  // namespace atomr::local
