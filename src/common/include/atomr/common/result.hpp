// result<T>: either a T or an atomr::error. The return type of every fallible function.
// (std::expected is C++23; this is the small subset atomr needs, with the same spelling.)
#pragma once

#include <cassert>
#include <optional>
#include <type_traits>
#include <utility>
#include <variant>

#include "atomr/common/error.hpp"

namespace atomr {

template <typename T>
class [[nodiscard]] result {
  static_assert(!std::is_same_v<std::decay_t<T>, error>, "result<error> is ambiguous");

 public:
  using value_type = T;

  template <typename U = T>
  requires std::is_constructible_v<T, U&&> &&
      (!std::is_same_v<std::decay_t<U>, error>)&&(!std::is_same_v<std::decay_t<U>, result>)result(U&& value)
      : state_(std::in_place_index<0>, std::forward<U>(value)) {}
  result(error e) : state_(std::in_place_index<1>, std::move(e)) {}

  bool has_value() const noexcept { return state_.index() == 0; }
  explicit operator bool() const noexcept { return has_value(); }

  // Precondition: has_value(). Checked in debug builds.
  T& value() & { return assert(has_value()), std::get<0>(state_); }
  const T& value() const& { return assert(has_value()), std::get<0>(state_); }
  T&& value() && { return assert(has_value()), std::get<0>(std::move(state_)); }
  T& operator*() & { return value(); }
  const T& operator*() const& { return value(); }
  T* operator->() { return &value(); }
  const T* operator->() const { return &value(); }

  // Precondition: !has_value().
  const error& error_value() const& { return assert(!has_value()), std::get<1>(state_); }
  error&& error_value() && { return assert(!has_value()), std::get<1>(std::move(state_)); }

  template <typename U>
  T value_or(U&& fallback) const& {
    return has_value() ? std::get<0>(state_) : static_cast<T>(std::forward<U>(fallback));
  }

 private:
  std::variant<T, error> state_;
};

template <>
class [[nodiscard]] result<void> {
 public:
  using value_type = void;

  result() = default;
  result(error e) : error_(std::move(e)) {}

  bool has_value() const noexcept { return !error_.has_value(); }
  explicit operator bool() const noexcept { return has_value(); }
  void value() const { assert(has_value()); }
  const error& error_value() const& { return assert(!has_value()), *error_; }
  error&& error_value() && { return assert(!has_value()), std::move(*error_); }

 private:
  // Empty on success: an ok() costs no error object (it is returned by every checked call).
  std::optional<error> error_;
};

// The "no error" value of result<void>, for symmetry at return sites.
inline result<void> ok() { return {}; }

}  // namespace atomr

// Evaluates `expr` (a result<...>); on error returns that error from the enclosing function,
// which must itself return some result<U>.
#define ATOMR_TRY(expr)                                          \
  do {                                                           \
    if (auto atomr_try_r_ = (expr); !atomr_try_r_.has_value()) { \
      return std::move(atomr_try_r_).error_value();              \
    }                                                            \
  } while (false)

#define ATOMR_CONCAT_INNER_(a, b) a##b
#define ATOMR_CONCAT_(a, b) ATOMR_CONCAT_INNER_(a, b)
// `ATOMR_ASSIGN_OR_RETURN(auto x, f());` binds the value of f() or returns its error.
#define ATOMR_ASSIGN_OR_RETURN(decl, expr) ATOMR_ASSIGN_OR_RETURN_IMPL_(ATOMR_CONCAT_(atomr_aor_, __LINE__), decl, expr)
#define ATOMR_ASSIGN_OR_RETURN_IMPL_(tmp, decl, expr)        \
  auto tmp = (expr);                                         \
  if (!tmp.has_value()) return std::move(tmp).error_value(); \
  decl = std::move(tmp).value()
