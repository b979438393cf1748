// The NCCL backend: the world's collectives on NCCL communicators, one per local device.
#pragma once

#include <mpi.h>

#include <memory>
#include <vector>

#include "atomr/cluster/engine/comm_backend.hpp"

namespace atomr::cluster::detail {

// Makes NCCL connect a communicator's peers in its init (NCCL_RUNTIME_CONNECT=0) unless the user
// set NCCL_RUNTIME_CONNECT: call before this process's first NCCL init (NCCL reads it once).
// Connecting lazily, at a collective's first use of an algorithm, blocks that call until the
// peer makes the same call: a rank blocked there cannot advance the MPI exchange its peer waits
// on before that call (a packing plan), and both wait forever.
void connect_nccl_at_init();

// Collective over `comm`: rank 0 makes the unique id, MPI carries it, and each of `devices` (CUDA
// ordinals) gets a communicator by `deadline`.
result<std::unique_ptr<comm_backend>> make_nccl_backend(MPI_Comm comm, const std::vector<int>& devices,
                                                        clock::time_point deadline);

}  // namespace atomr::cluster::detail
