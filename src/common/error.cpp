#include "atomr/common/error.hpp"

namespace atomr {

std::string_view to_string(errc code) noexcept {
  switch (code) {
    case errc::invalid_argument: return "invalid_argument";
    case errc::stale_ref: return "stale_ref";
    case errc::out_of_memory: return "out_of_memory";
    case errc::cuda: return "cuda";
    case errc::nccl: return "nccl";
    case errc::mpi: return "mpi";
    case errc::timeout: return "timeout";
    case errc::aborted: return "aborted";
    case errc::protocol: return "protocol";
    case errc::unavailable: return "unavailable";
    case errc::internal: return "internal";
    case errc::resource_exhausted: return "resource_exhausted";
  }
  return "unknown";
}

std::string error::describe() const {
  std::string out(to_string(code_));
  out += ": ";
  out += message_;
  return out;
}

error error::with_context(std::string_view what) const {
  std::string msg = "while ";
  msg += what;
  msg += ": ";
  msg += message_;
  return error(code_, std::move(msg));
}

std::ostream& operator<<(std::ostream& os, const error& e) { return os << e.describe(); }
std::ostream& operator<<(std::ostream& os, errc code) { return os << to_string(code); }

}  // namespace atomr
