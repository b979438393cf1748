#include "atomr/cluster/nccl_check.hpp"

#include <string>

namespace atomr::detail {

error nccl_failure(ncclResult_t status, const char* call, const char* file, int line) {
  std::string what = ncclGetErrorString(status);
  what += " (ncclResult " + std::to_string(static_cast<int>(status)) + ")";
  // NCCL keeps a human-readable detail of the last failure (e.g. which peer or transport).
  if (const char* last = ncclGetLastError(nullptr); last != nullptr && *last != '\0') {
    what += ": ";
    what += last;
  }
  return failed_call(errc::nccl, call, what, file, line);
}

}  // namespace atomr::detail
