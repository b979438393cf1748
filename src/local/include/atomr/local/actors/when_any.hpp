// when_any: the first of several members (atomr futures, or tasks, which are started) to finish,
// whether with a value or an error: its index and its result.
//
//   auto first = co_await when_any(std::move(replicas));   // result<any_of<T>>
//   if (first && first->value) use(first->index, *first->value);
//
// The other members go on; their results are dropped. So members that write into memory the
// awaiting frame owns (a download's destination) must not be raced this way: the frame may go on,
// and free it, before they finish. Members are of one type (variadic or a vector); with no
// members the future fails at once with errc::invalid_argument.
//
// Threading: the future is fulfilled on the thread that fulfils the winning member.
#pragma once

#include <atomic>
#include <cstddef>
#include <memory>
#include <utility>
#include <vector>

#include "atomr/local/actors/as_future.hpp"

namespace atomr::local {

template <typename T>
struct any_of {
  std::size_t index = 0;
  result<T> value;
};

namespace detail {

template <typename T>
struct race_state {
  std::atomic<bool> decided{false};
  promise<any_of<T>> out;
};

template <typename T>
future<any_of<T>> race(std::vector<future<T>> members) {
  auto s = std::make_shared<race_state<T>>();
  future<any_of<T>> f = s->out.get_future();
  if (members.empty()) {
    s->out.set_error(error(errc::invalid_argument, "when_any of no members"));
    return f;
  }
  for (std::size_t i = 0; i < members.size(); ++i) {
    members[i].then([s, i](const result<T>& r) {
      if (!s->decided.exchange(true, std::memory_order_acq_rel)) s->out.set_value(any_of<T>{i, r});
    });
  }
  return f;
}

}  // namespace detail

template <typename M>
future<any_of<detail::member_value_t<M>>> when_any(std::vector<M> members) {
  return detail::race(detail::as_futures(std::move(members)));
}

template <typename M, typename... More>
requires(std::is_same_v<detail::member_value_t<M>, detail::member_value_t<More>>&&...)
    future<any_of<detail::member_value_t<M>>> when_any(M&& first, More&&... more) {
  std::vector<future<detail::member_value_t<M>>> members;
  members.reserve(1 + sizeof...(More));
  members.push_back(detail::as_future(std::forward<M>(first)));
  (members.push_back(detail::as_future(std::forward<More>(more))), ...);
  return detail::race(std::move(members));
}

}  // namespace atomr::local
