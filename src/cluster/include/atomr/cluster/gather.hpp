// Gathers one variable-length byte string from every rank of `comm` to `root`. Collective; on the
// root the result holds comm-size byte vectors in rank order, elsewhere it is empty.
#pragma once

#include <mpi.h>

#include <cstddef>
#include <span>
#include <vector>

#include "atomr/common/result.hpp"

namespace atomr::cluster {

result<std::vector<std::vector<std::byte>>> gather_bytes(MPI_Comm comm, std::span<const std::byte> mine, int root = 0);

}  // namespace atomr::cluster
