// The host backend: the world's collectives on MPI over host memory, for ranks without a GPU.
#pragma once

#include <mpi.h>

#include <memory>

#include "atomr/cluster/engine/comm_backend.hpp"

namespace atomr::cluster::detail {

// Collective over `comm`: every rank makes its backend by the same deadline.
result<std::unique_ptr<comm_backend>> make_host_backend(MPI_Comm comm, clock::time_point deadline);

}  // namespace atomr::cluster::detail
