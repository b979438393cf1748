// Node identity and the MPI session, checked for consistency across all ranks of the job.
#include <gtest/gtest.h>
#include <mpi.h>

#include <cereal/types/string.hpp>
#include <chrono>
#include <map>
#include <set>

#include "atomr/cluster/gather.hpp"
#include "atomr/cluster/liveness.hpp"
#include "atomr/cluster/mpi_check.hpp"
#include "atomr/cluster/mpi_session.hpp"
#include "atomr/common/context.hpp"
#include "atomr/common/launch_env.hpp"
#include "atomr/serialization/payload_codec.hpp"

namespace atomr {
namespace {

TEST(Bootstrap, SessionJoinsAnInitializedMpiAndKeepsItRunning) {
  {
    auto session = cluster::mpi_session::start(nullptr, nullptr);
    ASSERT_TRUE(session) << session.error_value();
    int rank = -1;
    int size = -1;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    EXPECT_EQ((*session)->identity().world_rank, rank);
    EXPECT_EQ((*session)->identity().world_size, size);
    EXPECT_EQ(context::rank(), rank);
    int compare = MPI_UNEQUAL;
    MPI_Comm_compare((*session)->world(), MPI_COMM_WORLD, &compare);
    EXPECT_EQ(compare, MPI_CONGRUENT);  // a duplicate, not the user's communicator
  }
  int finalized = 1;
  MPI_Finalized(&finalized);
  EXPECT_EQ(finalized, 0) << "a session that joined MPI must not finalize it";
}

TEST(Bootstrap, NodeIdentityIsConsistentAcrossRanks) {
  auto mine = cluster::discover_node_identity(MPI_COMM_WORLD);
  ASSERT_TRUE(mine) << mine.error_value();
  auto blobs = cluster::gather_bytes(MPI_COMM_WORLD, serialization::encode(*mine));
  ASSERT_TRUE(blobs) << blobs.error_value();
  if (mine->world_rank != 0) {
    EXPECT_TRUE(blobs->empty());
    return;
  }
  ASSERT_EQ(blobs->size(), static_cast<std::size_t>(mine->world_size));
  std::map<int, std::set<int>> local_ranks_by_node;
  std::map<int, std::string> host_by_node;
  std::map<int, int> local_size_by_node;
  for (std::size_t r = 0; r < blobs->size(); ++r) {
    auto id = serialization::decode<cluster::node_identity>((*blobs)[r], "node_identity");
    ASSERT_TRUE(id) << id.error_value();
    EXPECT_EQ(id->world_rank, static_cast<int>(r));
    EXPECT_EQ(id->world_size, mine->world_size);
    EXPECT_EQ(id->node_count, mine->node_count);
    ASSERT_GE(id->node_id, 0);
    ASSERT_LT(id->node_id, id->node_count);
    EXPECT_TRUE(local_ranks_by_node[id->node_id].insert(id->local_rank).second) << "duplicate local rank";
    // Every rank of a node agrees on the node's size and host.
    auto [size_it, new_size] = local_size_by_node.emplace(id->node_id, id->local_size);
    EXPECT_EQ(size_it->second, id->local_size);
    auto [host_it, new_host] = host_by_node.emplace(id->node_id, id->hostname);
    EXPECT_EQ(host_it->second, id->hostname);
    EXPECT_FALSE(id->hostname.empty());
  }
  // Node ids are dense and each node's local ranks are exactly 0..local_size-1.
  EXPECT_EQ(static_cast<int>(local_ranks_by_node.size()), mine->node_count);
  for (const auto& [node, locals] : local_ranks_by_node) {
    EXPECT_EQ(static_cast<int>(locals.size()), local_size_by_node[node]);
    EXPECT_EQ(*locals.begin(), 0);
    EXPECT_EQ(*locals.rbegin(), local_size_by_node[node] - 1);
  }
}

// Whatever started the ranks (mpirun here, srun in the slurm test), the launcher's variables name
// the same rank, size and node-local rank that MPI reports.
TEST(Bootstrap, LauncherVariablesAgreeWithMpi) {
  auto env = read_launch_env();
  ASSERT_TRUE(env) << env.error_value();
  auto mine = cluster::discover_node_identity(MPI_COMM_WORLD);
  ASSERT_TRUE(mine) << mine.error_value();
  if (env->launcher == launcher_kind::none) GTEST_SKIP() << "started without a launcher (singleton)";
  const auto launcher = to_string(env->launcher);
  ASSERT_TRUE(env->rank.has_value()) << launcher << " set no rank variable";
  EXPECT_EQ(*env->rank, mine->world_rank) << launcher;
  EXPECT_EQ(env->size.value_or(mine->world_size), mine->world_size) << launcher;
  EXPECT_EQ(env->local_rank.value_or(mine->local_rank), mine->local_rank) << launcher;
  EXPECT_EQ(env->local_size.value_or(mine->local_size), mine->local_size) << launcher;
}

TEST(Bootstrap, FailedMpiCallIsAnErrorNamingCallAndRank) {
  auto session = cluster::mpi_session::start(nullptr, nullptr);
  ASSERT_TRUE(session) << session.error_value();
  const int size = (*session)->identity().world_size;
  int value = 0;
  // Rank `size` does not exist; the session's communicator returns errors instead of aborting.
  auto r = ATOMR_MPI_CHECK(MPI_Send(&value, 1, MPI_INT, size, 0, (*session)->world()));
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error_value().code(), errc::mpi);
  const auto& msg = r.error_value().message();
  EXPECT_NE(msg.find("MPI_Send(&value, 1, MPI_INT, size, 0, (*session)->world()) failed: "), std::string::npos) << msg;
  EXPECT_NE(msg.find("[rank " + std::to_string((*session)->identity().world_rank) + "]"), std::string::npos) << msg;
}

// Leaving goes up a binomial tree and back down: every rank returns from leave() once all have
// left, having sent at most 2 + ceil(log2 P) messages (a goodbye to its watcher, a report to its
// parent, "all left" to its children), not a goodbye to every rank.
TEST(Bootstrap, LeavingTakesLogPMessagesPerRank) {
  auto session = cluster::mpi_session::start(nullptr, nullptr);
  ASSERT_TRUE(session) << session.error_value();
  const int size = (*session)->identity().world_size;
  if (size < 2) GTEST_SKIP() << "needs 2 ranks";
  cluster::liveness_options options;
  options.period = std::chrono::milliseconds(100);
  options.timeout = std::chrono::seconds(30);
  auto live = cluster::liveness::start(MPI_COMM_WORLD, (*session)->identity(), options);
  ASSERT_TRUE(live) << live.error_value();
  (*live)->leave();
  int log2p = 0;
  while ((1 << log2p) < size) ++log2p;
  const auto sent = (*live)->leave_messages();
  EXPECT_GE(sent, 1u);
  EXPECT_LE(sent, static_cast<std::uint64_t>(2 + log2p)) << "rank " << (*session)->identity().world_rank;
  // Rank 0 (the root) sent "all left" to each of its children, so every rank heard the end.
  std::uint64_t most = sent;
  MPI_Allreduce(MPI_IN_PLACE, &most, 1, MPI_UINT64_T, MPI_MAX, MPI_COMM_WORLD);
  EXPECT_LE(most, static_cast<std::uint64_t>(2 + log2p));
}

}  // namespace
}  // namespace atomr
