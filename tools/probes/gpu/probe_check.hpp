// The probes' call check: a failing CUDA, NCCL or MPI call prints what failed and where, and
// ends the job (a probe has nothing to clean up).
#pragma once

#include <mpi.h>

#include <cstdio>

#define CK(x)                                                                                   \
  do {                                                                                          \
    const auto r_ = (x);                                                                        \
    if (r_ != 0) {                                                                              \
      std::printf("probe: %s failed with %d at line %d\n", #x, static_cast<int>(r_), __LINE__); \
      MPI_Abort(MPI_COMM_WORLD, 1);                                                             \
    }                                                                                           \
  } while (0)
