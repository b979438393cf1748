// The raw baselines of `atomr bench coll`: the same collective called directly, without atomr.
// NCCL: one blocking communicator per local GPU, buffers from cudaMalloc, calls issued back to
// back on a stream and one stream synchronize, as nccl-tests does. Host: blocking MPI
// collectives on host vectors.
#pragma once

#include <mpi.h>

#include <memory>
#include <vector>

#include "atomr/cluster/collective.hpp"

namespace atomr::apps::bench {

class raw_collectives {
 public:
  virtual ~raw_collectives() = default;
  // Runs `iterations` of the collective (count elements per rank, as world counts them) and
  // returns the seconds they took on this rank, end to end. `each_waited`: every operation is
  // waited for before the next (nccl-tests' -z 1; the host baseline's MPI calls always are).
  virtual result<double> run(cluster::coll_kind kind, std::size_t count, bool in_place, int iterations,
                             bool each_waited = false) = 0;
  // `requests` sequential all_reduces of `count` elements, each waited for before the next.
  virtual result<double> run_sequential_small(std::size_t count, int requests) = 0;
};

struct raw_setup {
  MPI_Comm comm;
  std::vector<int> devices;  // empty: host (MPI)
  local::dtype type;
  cluster::reduce_op op;
  int root;
  std::size_t max_bytes;  // per buffer
};
result<std::unique_ptr<raw_collectives>> make_raw_collectives(const raw_setup& setup);

}  // namespace atomr::apps::bench
