// Failures on NCCL (2 ranks, one GPU each): a rank that never joins a collective makes the other
// fail by the deadline (the watchdog aborts the blocking communicator), the failed rank tells the
// other, and both destroy their worlds without hanging.
#include <chrono>
#include <cstdlib>
#include <thread>

#include "../mpi/world_fixture.hpp"

namespace atomr {
namespace {

using namespace std::chrono_literals;
using clock = std::chrono::steady_clock;

class GpuWorldFailures : public testing::world_fixture {};

TEST_F(GpuWorldFailures, ARankThatNeverJoinsFailsTheOtherAndBothWorldsEnd) {
  if (size_ != 2) GTEST_SKIP() << "needs 2 ranks";
  ATOMR_REQUIRE_GPUS(2);  // NCCL refuses two ranks of one communicator on one GPU
  cluster::world_options o;
  o.op_timeout = 1000ms;
  auto w = make_world(o);
  ASSERT_TRUE(w);
  ASSERT_EQ(w->backend(), cluster::world_backend::nccl);
  auto b = buffer(std::vector<std::int32_t>(1024, 1));
  ASSERT_TRUE(w->all_reduce(b).get());  // both ranks are up and connected
  if (rank_ == 0) {
    const auto start = clock::now();
    const auto r = w->all_reduce(b).get();  // rank 1 never joins it
    const auto took = clock::now() - start;
    ASSERT_FALSE(r);
    EXPECT_EQ(r.error_value().code(), errc::timeout) << r.error_value();
    EXPECT_NE(r.error_value().message().find("all_reduce #2 (1024 x i32, sum) on ranks 0-1 did not finish within "
                                             "1000 ms"),
              std::string::npos)
        << r.error_value();
    EXPECT_GE(took, 1000ms);
    EXPECT_LT(took, 4000ms);  // the deadline, plus an abort that takes ~0.5 s on NCCL
  } else {
    // Rank 0's notice fails this world too, although nothing of it is pending here.
    const auto until = clock::now() + 30s;
    while (!w->failure() && clock::now() < until) std::this_thread::yield();
  }
  ASSERT_TRUE(w->failure());
  const auto start = clock::now();
  w.reset();
  EXPECT_LT(clock::now() - start, 15s);  // finalizing against an aborted peer is bounded by the stall watch
}

TEST_F(GpuWorldFailures, AWorldHoldingCudaGraphsStillEndsWhenARankNeverJoins) {
  // NCCL's abort waits until no CUDA graph refers to the communicator: the backend must drop its
  // graphs first, or the watchdog's abort (and then the world's end) would hang.
  if (size_ != 2) GTEST_SKIP() << "needs 2 ranks";
  ATOMR_REQUIRE_GPUS(2);
  if (std::getenv("ATOMR_NCCL_GRAPHS") != nullptr) GTEST_SKIP() << "ATOMR_NCCL_GRAPHS is set";
  cluster::world_options o;
  o.op_timeout = 1000ms;
  auto w = make_world(o);
  ASSERT_TRUE(w);
  auto b = buffer(std::vector<std::int32_t>(256, 1));
  for (int i = 0; i < 4; ++i) ASSERT_TRUE(w->all_reduce(b, cluster::reduce_op::max).get());
  ASSERT_EQ(w->stats().graph_launches, 2u);  // captured in the second, launched in the third and fourth
  if (rank_ == 0) {
    const auto start = clock::now();
    const auto r = w->all_reduce(b, cluster::reduce_op::max).get();  // rank 1 never votes on it
    ASSERT_FALSE(r);
    EXPECT_EQ(r.error_value().code(), errc::timeout) << r.error_value();
    EXPECT_NE(r.error_value().message().find("did not finish within 1000 ms"), std::string::npos) << r.error_value();
    EXPECT_LT(clock::now() - start, 4000ms);
  } else {
    const auto until = clock::now() + 30s;
    while (!w->failure() && clock::now() < until) std::this_thread::yield();
  }
  ASSERT_TRUE(w->failure());
  const auto start = clock::now();
  w.reset();
  EXPECT_LT(clock::now() - start, 15s);
}

}  // namespace
}  // namespace atomr
