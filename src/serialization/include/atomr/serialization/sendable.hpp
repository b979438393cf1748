// Which types may cross ranks, and their stable ids. atomr's own types are listed in registry.hpp
// (ids below 0x10000); a program registers its own message types with one line at namespace scope:
//
//   struct add { int n; template <class A> void serialize(A& ar) { ar(n); } };
//   ATOMR_WIRE_MESSAGE(add, 0x10001);
//
// The id is the type's name on the wire: unique in the program, never reused for another type, and
// >= 0x10000 (the range atomr leaves to programs). Sending a type that is registered in neither
// place does not compile (concept sendable).
#pragma once

#include <concepts>
#include <cstdint>
#include <string_view>

#include "atomr/serialization/registry.hpp"

namespace atomr::serialization {

inline constexpr std::uint32_t k_first_user_message_id = 0x10000;

// Specialized by ATOMR_WIRE_MESSAGE; the primary template has no `id`.
template <typename T>
struct user_message {};

template <typename T>
concept user_registered = requires {
  { user_message<T>::id } -> std::convertible_to<std::uint32_t>;
  { user_message<T>::name } -> std::convertible_to<std::string_view>;
};

template <typename T>
concept sendable = wire_message<T> || user_registered<T>;

template <sendable T>
constexpr std::uint32_t message_id() {
  if constexpr (wire_message<T>) {
    return wire_registry::id_of<T>();
  } else {
    return user_message<T>::id;
  }
}

template <sendable T>
constexpr std::string_view message_name() {
  if constexpr (wire_message<T>) {
    return wire_registry::name_of<T>();
  } else {
    return user_message<T>::name;
  }
}

}  // namespace atomr::serialization

// Registers `type` (a Cereal-serializable struct) for sending across ranks under `wire_id`. Use at
// global namespace scope, after the type's definition.
#define ATOMR_WIRE_MESSAGE(type, wire_id)                                                                   \
  template <>                                                                                               \
  struct atomr::serialization::user_message<type> {                                                         \
    static_assert((wire_id) >= ::atomr::serialization::k_first_user_message_id,                             \
                  "ATOMR_WIRE_MESSAGE: program message ids start at 0x10000 (lower ones belong to atomr)"); \
    static constexpr std::uint32_t id = (wire_id);                                                          \
    static constexpr std::string_view name = #type;                                                         \
  }
