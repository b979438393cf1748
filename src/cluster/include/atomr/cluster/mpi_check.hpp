// ATOMR_MPI_CHECK(call): runs an MPI call and yields result<void>; a failure becomes an errc::mpi
// error naming the call, MPI's error class and text, file:line, rank and device. MPI only returns
// errors (instead of aborting) on communicators with MPI_ERRORS_RETURN, which mpi_session sets.
#pragma once

#include <mpi.h>

#include "atomr/common/check.hpp"
#include "atomr/common/result.hpp"

namespace atomr::detail {
error mpi_failure(int status, const char* call, const char* file, int line);

inline result<void> check_mpi(int status, const char* call, const char* file, int line) {
  if (status == MPI_SUCCESS) return ok();
  return mpi_failure(status, call, file, line);
}
}  // namespace atomr::detail

#define ATOMR_MPI_CHECK(call) ::atomr::detail::check_mpi((call), #call, __FILE__, __LINE__)
