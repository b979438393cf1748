#include "atomr/serialization/cereal_codec.hpp"

namespace atomr::serialization::detail {

error decode_failure(std::string_view type_name, std::size_t input_bytes, std::string_view what) {
  std::string msg = "cannot decode ";
  msg += type_name;
  msg += " from ";
  msg += std::to_string(input_bytes);
  msg += " bytes: ";
  msg += what;
  return error(errc::protocol, std::move(msg));
}

}  // namespace atomr::serialization::detail
