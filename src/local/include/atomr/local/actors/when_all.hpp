// when_all: one future for several members (atomr futures, or tasks, which are started).
//
//   ATOMR_CO_TRY(auto both, co_await when_all(dev.download(a, ha), dev.download(b, hb)));
//
// It is fulfilled once every member is, never before: a member that fails does not end the wait
// early, so no member still writes into memory the awaiting frame owns (a download's destination)
// when it goes on. Then:
//   - when_all: the members' values (a tuple; std::monostate for a future<void>), or, if any
//     failed, the error of the first failed member in argument order, its message prefixed with
//     "when_all: member i of n failed" (and how many others failed);
//   - when_all_settled: every member's own result<T>, never an error.
// The vector forms take members of one type: when_all gives std::vector<T> (future<void> for
// void members), when_all_settled std::vector<result<T>>. No members: fulfilled at once.
//
// Threading: the combined future is fulfilled on the thread that fulfils the last member.
#pragma once

#include <atomic>
#include <cstddef>
#include <memory>
#include <optional>
#include <string>
#include <tuple>
#include <utility>
#include <variant>
#include <vector>

#include "atomr/local/actors/as_future.hpp"

namespace atomr::local {

namespace detail {

inline error member_failed(const error& e, std::size_t index, std::size_t count, std::size_t failed) {
  std::string what = "when_all: member " + std::to_string(index) + " of " + std::to_string(count) + " failed";
  if (failed > 1) what += " (" + std::to_string(failed - 1) + " more failed too)";
  return e.with_context(what);
}

template <typename T>
settled_value_t<T> settled_value(result<T>&& r) {
  if constexpr (std::is_void_v<T>) {
    return std::monostate{};
  } else {
    return std::move(r).value();
  }
}

// Counts members down; the last one to finish builds the outcome. Each member writes only its own
// slot, and the acq_rel count orders every write before the last member's reads.
template <typename Out, typename Slots>
struct gather_state {
  explicit gather_state(std::size_t n) : left(n) {}
  Slots slots;
  std::atomic<std::size_t> left;
  promise<Out> out;
  bool arrived() { return left.fetch_sub(1, std::memory_order_acq_rel) == 1; }
};

template <typename Out, typename... T>
struct tuple_gather {
  using state = gather_state<Out, std::tuple<std::optional<result<T>>...>>;

  template <std::size_t I, typename F>
  static void watch(const std::shared_ptr<state>& s, const F& member, void (*finish)(state&)) {
    member.then([s, finish](const auto& r) {
      std::get<I>(s->slots).emplace(r);
      if (s->arrived()) finish(*s);
    });
  }
};

template <typename... T>
void finish_all(typename tuple_gather<std::tuple<settled_value_t<T>...>, T...>::state& s) {
  constexpr std::size_t n = sizeof...(T);
  std::size_t failed = 0;
  std::optional<error> first;
  std::size_t first_index = 0;
  std::apply(
      [&](auto&... slot) {
        std::size_t i = 0;
        (
            [&] {
              if (!slot->has_value()) {
                if (!first) {
                  first = slot->error_value();
                  first_index = i;
                }
                ++failed;
              }
              ++i;
            }(),
            ...);
      },
      s.slots);
  if (first) {
    s.out.set_error(member_failed(*first, first_index, n, failed));
    return;
  }
  s.out.set_value(
      std::apply([](auto&... slot) { return std::make_tuple(settled_value(std::move(*slot))...); }, s.slots));
}

template <typename... T>
void finish_settled(typename tuple_gather<std::tuple<result<T>...>, T...>::state& s) {
  s.out.set_value(std::apply([](auto&... slot) { return std::make_tuple(std::move(*slot)...); }, s.slots));
}

template <typename Out, typename... T, typename... F, std::size_t... I>
future<Out> gather_tuple(void (*finish)(typename tuple_gather<Out, T...>::state&), std::index_sequence<I...>,
                         const F&... members) {
  using gather = tuple_gather<Out, T...>;
  auto s = std::make_shared<typename gather::state>(sizeof...(T));
  future<Out> f = s->out.get_future();
  if constexpr (sizeof...(T) == 0) {
    finish(*s);
  } else {
    (gather::template watch<I>(s, members, finish), ...);
  }
  return f;
}

template <typename Out, typename T, typename Finish>
future<Out> gather_vector(std::vector<future<T>> members, Finish finish) {
  using state = gather_state<Out, std::vector<std::optional<result<T>>>>;
  auto s = std::make_shared<state>(members.size());
  s->slots.resize(members.size());
  future<Out> f = s->out.get_future();
  if (members.empty()) {
    finish(*s);
    return f;
  }
  for (std::size_t i = 0; i < members.size(); ++i) {
    members[i].then([s, i, finish](const result<T>& r) {
      s->slots[i].emplace(r);
      if (s->arrived()) finish(*s);
    });
  }
  return f;
}

}  // namespace detail

template <typename... M>
future<std::tuple<detail::settled_value_t<detail::member_value_t<M>>...>> when_all(M&&... members) {
  using out = std::tuple<detail::settled_value_t<detail::member_value_t<M>>...>;
  return detail::gather_tuple<out, detail::member_value_t<M>...>(&detail::finish_all<detail::member_value_t<M>...>,
                                                                 std::index_sequence_for<M...>{},
                                                                 detail::as_future(std::forward<M>(members))...);
}

template <typename... M>
future<std::tuple<result<detail::member_value_t<M>>...>> when_all_settled(M&&... members) {
  using out = std::tuple<result<detail::member_value_t<M>>...>;
  return detail::gather_tuple<out, detail::member_value_t<M>...>(&detail::finish_settled<detail::member_value_t<M>...>,
                                                                 std::index_sequence_for<M...>{},
                                                                 detail::as_future(std::forward<M>(members))...);
}

template <typename M>
auto when_all(std::vector<M> members) {
  using T = detail::member_value_t<M>;
  using out = std::conditional_t<std::is_void_v<T>, void, std::vector<detail::settled_value_t<T>>>;
  return detail::gather_vector<out, T>(detail::as_futures(std::move(members)), [](auto& s) {
    std::size_t failed = 0;
    std::size_t first = s.slots.size();
    for (std::size_t i = 0; i < s.slots.size(); ++i) {
      if (s.slots[i]->has_value()) continue;
      if (failed++ == 0) first = i;
    }
    if (failed != 0) {
      s.out.set_error(detail::member_failed(s.slots[first]->error_value(), first, s.slots.size(), failed));
    } else if constexpr (std::is_void_v<T>) {
      s.out.set_value();
    } else {
      std::vector<T> values;
      values.reserve(s.slots.size());
      for (auto& slot : s.slots) values.push_back(std::move(*slot).value());
      s.out.set_value(std::move(values));
    }
  });
}

template <typename M>
auto when_all_settled(std::vector<M> members) {
  using T = detail::member_value_t<M>;
  return detail::gather_vector<std::vector<result<T>>, T>(detail::as_futures(std::move(members)), [](auto& s) {
    std::vector<result<T>> results;
    results.reserve(s.slots.size());
    for (auto& slot : s.slots) results.push_back(std::move(*slot));
    s.out.set_value(std::move(results));
  });
}

}  // namespace atomr::local
