// Gathers one variable-length byte string from every rank of `comm` to `root`. Collective; on the
// root the result holds comm-size strings in rank order, elsewhere it is empty.
#pragma once

#include <mpi.h>

#include <string>
#include <vector>

#include "atomr/common/result.hpp"

namespace atomr::cluster {

result<std::vector<std::string>> gather_bytes(MPI_Comm comm, const std::string& mine, int root = 0);

}  // namespace atomr::cluster
