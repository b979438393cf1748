#include "atomr/common/check.hpp"

#include "atomr/common/context.hpp"

namespace atomr::detail {

error failed_call(errc code, std::string_view call, std::string_view library_text, std::string_view file, int line) {
  std::string msg(call);
  msg += " failed: ";
  msg += library_text;
  msg += " at ";
  msg += file;
  msg += ':';
  msg += std::to_string(line);
  msg += " [";
  msg += context::describe();
  msg += ']';
  return error(code, std::move(msg));
}

}  // namespace atomr::detail
