// Every tunable of atomr, gathered from the libraries that declare them: what `atomr info` prints.
// (Build tree only: the subsystems' lists are their internals.)
#pragma once

#include <span>
#include <vector>

#include "atomr/cluster/buffers/tunables.hpp"
#include "atomr/cluster/coll/tunables.hpp"
#include "atomr/cluster/host/tunables.hpp"
#include "atomr/cluster/liveness/tunables.hpp"
#include "atomr/cluster/mpi/tunables.hpp"
#include "atomr/cluster/nccl/tunables.hpp"
#include "atomr/cluster/router/tunables.hpp"
#include "atomr/common/tunables.hpp"
#include "atomr/local/tunables.hpp"
#include "atomr/serialization/tunables.hpp"

namespace atomr {

// In the order of the layers, lowest first.
inline std::vector<const tunable*> all_tunables() {
  std::vector<const tunable*> out;
  for (const auto& list :
       {std::span<const tunable* const>(tunables::k_common), std::span<const tunable* const>(tunables::k_serialization),
        std::span<const tunable* const>(tunables::k_local), std::span<const tunable* const>(tunables::k_mpi),
        std::span<const tunable* const>(tunables::k_liveness), std::span<const tunable* const>(tunables::k_coll),
        std::span<const tunable* const>(tunables::k_host), std::span<const tunable* const>(tunables::k_nccl),
        std::span<const tunable* const>(tunables::k_router), std::span<const tunable* const>(tunables::k_buffers)}) {
    out.insert(out.end(), list.begin(), list.end());
  }
  return out;
}

}  // namespace atomr
