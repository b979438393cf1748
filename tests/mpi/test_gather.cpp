#include <gtest/gtest.h>
#include <mpi.h>

#include <random>

#include "atomr/cluster/gather.hpp"
#include "atomr/cluster/mpi_session.hpp"
#include "atomr/cluster/rank_report.hpp"

namespace atomr {
namespace {

// Rank r contributes r*37 bytes (rank 0 contributes none) drawn from a generator seeded by r.
std::vector<std::byte> payload_of(int rank) {
  std::mt19937 rng(1000u + static_cast<unsigned>(rank));
  std::vector<std::byte> s(static_cast<std::size_t>(rank) * 37);
  for (auto& c : s) c = static_cast<std::byte>(rng());
  return s;
}

TEST(Gather, VariableLengthBytesArriveInRankOrder) {
  int rank = 0;
  int size = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  for (int root = 0; root < size; ++root) {
    auto got = cluster::gather_bytes(MPI_COMM_WORLD, payload_of(rank), root);
    ASSERT_TRUE(got) << got.error_value();
    if (rank != root) {
      EXPECT_TRUE(got->empty());
      continue;
    }
    ASSERT_EQ(got->size(), static_cast<std::size_t>(size));
    for (int r = 0; r < size; ++r) EXPECT_EQ((*got)[static_cast<std::size_t>(r)], payload_of(r)) << "from rank " << r;
  }
}

TEST(Gather, RankReportsReachRankZero) {
  auto session = cluster::mpi_session::start(nullptr, nullptr);
  ASSERT_TRUE(session) << session.error_value();
  const auto& me = (*session)->identity();
  auto mine = cluster::probe_rank_report(me);
  ASSERT_TRUE(mine) << mine.error_value();
  ASSERT_FALSE(mine->devices.empty());
  EXPECT_FALSE(mine->mpi_version.empty());

  auto all = cluster::gather_rank_reports((*session)->world(), *mine);
  ASSERT_TRUE(all) << all.error_value();
  if (me.world_rank != 0) {
    EXPECT_TRUE(all->empty());
    return;
  }
  ASSERT_EQ(all->size(), static_cast<std::size_t>(me.world_size));
  for (int r = 0; r < me.world_size; ++r) {
    const auto& rep = (*all)[static_cast<std::size_t>(r)];
    EXPECT_EQ(rep.identity.world_rank, r);
    EXPECT_FALSE(rep.devices.empty());
    EXPECT_EQ(rep.mpi_version, mine->mpi_version);
    // The host device stands in exactly when no GPU is visible, and then the reason is given.
    const bool host_only = rep.devices.front().kind == local::device_kind::host;
    EXPECT_EQ(host_only, !rep.no_gpu_reason.empty());
  }
}

}  // namespace
}  // namespace atomr
