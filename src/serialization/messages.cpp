#include "atomr/serialization/messages.hpp"

namespace atomr::serialization {

error_reply to_reply(const error& e) { return error_reply{static_cast<std::uint16_t>(e.code()), e.message()}; }

error to_error(const error_reply& r) {
  if (r.code > static_cast<std::uint16_t>(k_errc_last)) {
    return error(errc::protocol, "peer sent unknown error code " + std::to_string(r.code) + ": " + r.message);
  }
  return error(static_cast<errc>(r.code), r.message);
}

}  // namespace atomr::serialization
