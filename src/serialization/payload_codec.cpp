#include "atomr/serialization/payload_codec.hpp"

#include "atomr/common/log.hpp"
#include "atomr/serialization/tunables.hpp"

namespace atomr::serialization {

namespace detail {
error payload_error(std::string_view type_name, std::size_t input_bytes, std::string_view what) {
  std::string msg = "cannot decode ";
  msg += type_name;
  msg += " from ";
  msg += std::to_string(input_bytes);
  msg += " payload byte(s): ";
  msg += what;
  return error(errc::protocol, std::move(msg));
}
}  // namespace detail

namespace {
template <typename T>
T positive_tunable(const tunable& t, T fallback) {
  auto v = tunable_int(t);
  if (v && *v > 0) return static_cast<T>(*v);
  log::get("serialization")
      ->warn("{}: {}; using {}", t.env, v ? std::string("must be positive") : v.error_value().message(), fallback);
  return fallback;
}
}  // namespace

const wire_limits& default_wire_limits() {
  static const wire_limits limits = [] {
    wire_limits l;
    l.max_payload_bytes = positive_tunable(tunables::wire_max_payload, l.max_payload_bytes);
    l.max_container_length = positive_tunable(tunables::wire_max_container, l.max_container_length);
    return l;
  }();
  return limits;
}

}  // namespace atomr::serialization
