// Deadline-bounded MPI for setup steps: a missing rank is a clear timeout error, never a hang.
#pragma once

#include <mpi.h>

#include <chrono>
#include <string>

#include "atomr/common/result.hpp"

namespace atomr::cluster::detail {

// Polls a nonblocking MPI request until it completes or `deadline` passes (then a timeout error
// that names `what`; the request is left to MPI).
result<void> wait_mpi(MPI_Request& request, std::chrono::steady_clock::time_point deadline, const std::string& what);

// The agreement every collective setup step ends with: each rank says whether it succeeded (and
// why not); all ranks get the same verdict, naming the ranks that failed. Fails with a timeout
// if a rank does not arrive by the deadline.
result<void> agree(MPI_Comm comm, const result<void>& mine, std::chrono::steady_clock::time_point deadline,
                   const std::string& step);

}  // namespace atomr::cluster::detail
