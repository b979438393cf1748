// Scenarios for testing the MPI-aware test main itself. The DISABLED_ ones fail on purpose and
// run only when tests/runner/CMakeLists.txt asks for them by name.
#include <gtest/gtest.h>
#include <mpi.h>

#include <stdexcept>

namespace {

int world_rank() {
  int rank = -1;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  return rank;
}

TEST(Scenario, Passes) {
  int size = 0;
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  const int mine = world_rank();
  int sum = -1;
  ASSERT_EQ(MPI_Allreduce(&mine, &sum, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD), MPI_SUCCESS);
  EXPECT_EQ(sum, size * (size - 1) / 2);
}

TEST(DISABLED_Scenario, FailOnRank2) {
  if (world_rank() == 2) ADD_FAILURE() << "deliberate failure on rank 2";
}

TEST(DISABLED_Scenario, ThrowOnRank1) {
  if (world_rank() == 1) throw std::runtime_error("boom on rank 1");
}

// Runs after ThrowOnRank1: every rank must still reach this collective.
TEST(DISABLED_Scenario, BarrierAfterThrow) { EXPECT_EQ(MPI_Barrier(MPI_COMM_WORLD), MPI_SUCCESS); }

TEST(DISABLED_Scenario, SkipOnRank0Only) {
  if (world_rank() == 0) GTEST_SKIP() << "only rank 0 skips";
}

}  // namespace
