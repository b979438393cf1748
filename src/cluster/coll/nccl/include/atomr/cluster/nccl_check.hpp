// ATOMR_NCCL_CHECK(call): runs an NCCL call and yields result<void>; a failure becomes an
// errc::nccl error naming the call, NCCL's result text and last error message, file:line, rank and
// device. ncclInProgress (nonblocking communicators) is not a failure and yields success.
#pragma once

#include <nccl.h>

#include "atomr/common/check.hpp"
#include "atomr/common/result.hpp"

namespace atomr::detail {
error nccl_failure(ncclResult_t status, const char* call, const char* file, int line);

inline result<void> check_nccl(ncclResult_t status, const char* call, const char* file, int line) {
  if (status == ncclSuccess || status == ncclInProgress) return ok();
  return nccl_failure(status, call, file, line);
}
}  // namespace atomr::detail

#define ATOMR_NCCL_CHECK(call) ::atomr::detail::check_nccl((call), #call, __FILE__, __LINE__)
