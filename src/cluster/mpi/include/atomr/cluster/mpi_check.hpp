// ATOMR_MPI_CHECK(call): runs an MPI call and yields result<void>; a failure becomes an errc::mpi
// error naming the call, MPI's error class and text, file:line, rank and device. MPI only returns
// errors (instead of aborting) on communicators with MPI_ERRORS_RETURN, which mpi_session sets.
#pragma once

#include <mpi.h>

#include <vector>

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

namespace atomr::cluster {

// A communicator of one's own: a duplicate of `comm` that returns errors (MPI_ERRORS_RETURN)
// instead of aborting, with this process's rank and the size. Collective over `comm`. The caller
// frees `comm` with MPI_Comm_free.
struct own_comm {
  MPI_Comm comm = MPI_COMM_NULL;
  int rank = 0;
  int size = 0;
};
result<own_comm> duplicate_comm(MPI_Comm comm);

// MPI_COMM_WORLD's rank of each rank of `comm` (the numbering liveness names ranks by); local.
result<std::vector<int>> world_ranks_of(MPI_Comm comm);

}  // namespace atomr::cluster
