// The GPU a test rank uses: its local rank modulo the visible GPUs (one GPU per rank on a node).
#pragma once

#include "atomr/cluster/mpi_session.hpp"
#include "atomr/local/devices.hpp"

namespace atomr::test {

inline int rank_gpu() {
  auto session = cluster::mpi_session::start(nullptr, nullptr);
  const int count = static_cast<int>(local::probe_cuda_devices()->devices.size());
  return session && count > 0 ? (*session)->identity().local_rank % count : 0;
}

}  // namespace atomr::test
