// The registry: every message type that crosses ranks, with its stable numeric id and wire name,
// in one list. Registering a type is one line in `wire_registry` below. Ids are never reused or
// renumbered (see docs/wire-format.md); ids 1-0xFFFF belong to atomr.
//
// Encoding a type that is not in the registry does not compile (concept wire_message).
#pragma once

#include <algorithm>
#include <array>
#include <cstdint>
#include <string_view>
#include <type_traits>

#include "atomr/serialization/messages.hpp"

namespace atomr::serialization {

// A string usable as a template argument: the wire name of a message type.
template <std::size_t N>
struct fixed_name {
  char text[N]{};
  constexpr fixed_name(const char (&s)[N]) { std::copy_n(s, N, text); }
  constexpr std::string_view view() const { return {text, N - 1}; }
};

template <typename T, std::uint32_t Id, fixed_name Name>
struct message_entry {
  using type = T;
  static constexpr std::uint32_t id = Id;
  static constexpr std::string_view name = Name.view();
};

template <typename... Entries>
struct message_registry {
  static constexpr std::array<std::uint32_t, sizeof...(Entries)> ids{Entries::id...};
  static constexpr std::array<std::string_view, sizeof...(Entries)> names{Entries::name...};

  static constexpr bool ids_unique_and_nonzero() {
    for (std::size_t i = 0; i < ids.size(); ++i) {
      if (ids[i] == 0) return false;
      for (std::size_t j = i + 1; j < ids.size(); ++j) {
        if (ids[i] == ids[j]) return false;
      }
    }
    return true;
  }
  static_assert(ids_unique_and_nonzero(), "message ids must be unique and non-zero");

  template <typename T>
  static constexpr bool has_type = (std::is_same_v<T, typename Entries::type> || ...);

  template <typename T>
  static constexpr std::size_t index_of() {
    constexpr std::array<bool, sizeof...(Entries)> match{std::is_same_v<T, typename Entries::type>...};
    for (std::size_t i = 0; i < match.size(); ++i) {
      if (match[i]) return i;
    }
    return match.size();
  }

  template <typename T>
  requires has_type<T>
  static constexpr std::uint32_t id_of() { return ids[index_of<T>()]; }

  template <typename T>
  requires has_type<T>
  static constexpr std::string_view name_of() { return names[index_of<T>()]; }

  static constexpr bool contains(std::uint32_t id) { return ((Entries::id == id) || ...); }

  // Calls f.template operator()<Entry>() for the entry with `id`; returns false if there is none.
  template <typename F>
  static constexpr bool visit_id(std::uint32_t id, F&& f) {
    return ((Entries::id == id ? (f.template operator()<Entries>(), true) : false) || ...);
  }
};

// clang-format off
using wire_registry = message_registry<
    message_entry<ping, 1, "ping">,
    message_entry<error_reply, 2, "error_reply">,
    message_entry<opaque_bytes, 3, "opaque_bytes">,
    // 4: a reply's value (its type is the asker's R, known from the correlation id; no entry)
    message_entry<fetch_request, 16, "fetch_request">,
    message_entry<fetch_ready, 17, "fetch_ready">,
    message_entry<buffer_manifest, 18, "buffer_manifest">,
    message_entry<remote_buffer, 19, "remote_buffer">>;
// Also atomr's, registered as user_message where their types live, since they hold a reply_to
// from the local layer, which this layer sits below (cluster/buffers/registry_state.hpp):
//   0x100 fetch_ask, 0x101 ipc_ask, 0x102 ipc_done, 0x103 ipc_unmap, 0x104 nccl_ask
// clang-format on

template <typename T, typename Registry = wire_registry>
concept wire_message = Registry::template has_type<T>;

}  // namespace atomr::serialization
