#include "atomr/cluster/node_identity.hpp"

#include <array>

#include "atomr/cluster/mpi_check.hpp"

namespace atomr::cluster {
namespace {

// Frees a communicator on every exit path, so a failing MPI call does not leak it.
struct comm_guard {
  MPI_Comm comm = MPI_COMM_NULL;
  ~comm_guard() {
    if (comm != MPI_COMM_NULL) MPI_Comm_free(&comm);
  }
};

}  // namespace

result<node_identity> discover_node_identity(MPI_Comm comm) {
  node_identity id;
  ATOMR_TRY(ATOMR_MPI_CHECK(MPI_Comm_rank(comm, &id.world_rank)));
  ATOMR_TRY(ATOMR_MPI_CHECK(MPI_Comm_size(comm, &id.world_size)));

  comm_guard node;
  ATOMR_TRY(ATOMR_MPI_CHECK(MPI_Comm_split_type(comm, MPI_COMM_TYPE_SHARED, id.world_rank, MPI_INFO_NULL, &node.comm)));
  ATOMR_TRY(ATOMR_MPI_CHECK(MPI_Comm_rank(node.comm, &id.local_rank)));
  ATOMR_TRY(ATOMR_MPI_CHECK(MPI_Comm_size(node.comm, &id.local_size)));

  // Node leaders (local rank 0) number themselves by world rank: a leader's number is the count of
  // leaders before it (an exclusive prefix sum, log P steps, where a split of the communicator
  // would sort every rank's key); everyone learns the count and their leader's number.
  const int is_leader = id.local_rank == 0 ? 1 : 0;
  int before = 0;
  ATOMR_TRY(ATOMR_MPI_CHECK(MPI_Exscan(&is_leader, &before, 1, MPI_INT, MPI_SUM, comm)));
  if (is_leader) id.node_id = id.world_rank == 0 ? 0 : before;  // (Exscan leaves rank 0's undefined)
  ATOMR_TRY(ATOMR_MPI_CHECK(MPI_Bcast(&id.node_id, 1, MPI_INT, 0, node.comm)));
  ATOMR_TRY(ATOMR_MPI_CHECK(MPI_Allreduce(&is_leader, &id.node_count, 1, MPI_INT, MPI_SUM, comm)));

  std::array<char, MPI_MAX_PROCESSOR_NAME> name{};
  int len = 0;
  ATOMR_TRY(ATOMR_MPI_CHECK(MPI_Get_processor_name(name.data(), &len)));
  id.hostname.assign(name.data(), static_cast<std::size_t>(len));
  return id;
}

}  // namespace atomr::cluster
