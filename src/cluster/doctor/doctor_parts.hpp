// The doctor's phases, each run by every rank of the communicator it is given (private to the
// folder; doctor.cpp runs them in order).
#pragma once

#include <mpi.h>

#include <chrono>
#include <optional>
#include <vector>

#include "atomr/cluster/doctor.hpp"
#include "atomr/cluster/node_identity.hpp"
#include "atomr/local/actors.hpp"
#include "atomr/local/device/device.hpp"

namespace atomr::cluster::doctor::detail {

using clock = std::chrono::steady_clock;

// This rank's own checks; `started` gets the device when it started. `slice` bounds the timed
// parts (several ranks of a node take turns, each with its slice).
rank_result check_rank(local::actor_system& system, const options& opts, const node_identity& id,
                       std::optional<local::device>& started, clock::duration slice);

// Device copy bandwidth alone, for a second look at a rank far below its kind.
result<double> measure_copy(const local::device& dev, const options& opts, clock::duration slice);

// Every pair of `comm`'s ranks, in tournament rounds; this rank's edges as the fetcher, with ranks
// numbered as in `world_rank_of` (comm rank -> world rank). Pairs far below their class are measured
// a second time, and each direction keeps the better of its two looks.
result<std::vector<edge_result>> check_pairs(MPI_Comm comm, const local::device& dev, local::actor_system& system,
                                             const options& opts, const std::vector<int>& world_rank_of, int node_id,
                                             clock::duration slice);

// The world's collectives over `comm`; every rank returns the same rows' shape, rank 0's times.
result<std::vector<coll_result>> check_collectives(MPI_Comm comm, const local::device& dev, const options& opts,
                                                   clock::duration slice);

// Waits on `request` without keeping a CPU busy for long: ranks oversubscribe small machines,
// and a waiter's spin takes the CPU its partner measures on.
result<void> wait_politely(MPI_Request& request, const char* what);

// The pattern a rank writes into the buffers others check: word i of rank r's buffer.
inline std::uint32_t pattern_word(int rank, std::size_t i) {
  return static_cast<std::uint32_t>(i * 2654435761u) ^ static_cast<std::uint32_t>(rank * 40503u + 1);
}

double seconds_of(clock::duration d);

}  // namespace atomr::cluster::doctor::detail
