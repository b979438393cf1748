// Who this rank is in the job: world rank/size, and which node it shares with whom. Nodes are the
// shared-memory domains of MPI_Comm_split_type(MPI_COMM_TYPE_SHARED); node ids are dense, 0..N-1,
// ordered by the lowest world rank on each node.
#pragma once

#include <mpi.h>

#include <string>

#include "atomr/common/result.hpp"

namespace atomr::cluster {

struct node_identity {
  int world_rank = 0;
  int world_size = 1;
  int node_id = 0;
  int node_count = 1;
  int local_rank = 0;
  int local_size = 1;
  std::string hostname;

  template <typename Archive>
  void serialize(Archive& ar) {
    ar(world_rank, world_size, node_id, node_count, local_rank, local_size, hostname);
  }
};

// Collective over `comm`: every rank of it must call.
result<node_identity> discover_node_identity(MPI_Comm comm);

}  // namespace atomr::cluster
