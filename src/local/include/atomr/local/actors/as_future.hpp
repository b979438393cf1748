// What when_all and when_any accept as members: an atomr future, or a task, which is started.
#pragma once

#include <type_traits>
#include <utility>
#include <variant>
#include <vector>

#include "atomr/local/actors/future.hpp"
#include "atomr/local/actors/task.hpp"

namespace atomr::local::detail {

template <typename T>
future<T> as_future(future<T> f) {
  return f;
}
template <typename T>
future<T> as_future(task<T>&& t) {
  return std::move(t).start();
}

// Members of one type, in order (tasks are started in order).
template <typename M>
auto as_futures(std::vector<M>&& members) {
  std::vector<decltype(as_future(std::move(members.front())))> out;
  out.reserve(members.size());
  for (auto& m : members) out.push_back(as_future(std::move(m)));
  return out;
}

// The value type of a member: future<T> and task<T> give T.
template <typename M>
using member_value_t = typename decltype(as_future(std::declval<M>()))::value_type;

// A member's value in a when_all tuple: void becomes std::monostate.
template <typename T>
using settled_value_t = std::conditional_t<std::is_void_v<T>, std::monostate, T>;

}  // namespace atomr::local::detail
