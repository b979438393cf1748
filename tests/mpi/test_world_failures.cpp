// What goes wrong, and how it is reported: bad arguments before anything is sent, a rank that
// never joins (the watchdog), ranks that disagree (the consistency check), a rank that cannot
// create the world.
#include <chrono>
#include <cstdlib>
#include <thread>

#include "world_fixture.hpp"

namespace atomr {
namespace {

using cluster::coll_kind;
using namespace std::chrono_literals;

class WorldFailures : public testing::world_fixture {};

error failure_of(const cluster::future<void>& f) {
  const auto r = f.get();
  EXPECT_FALSE(r);
  return r ? error(errc::internal, "succeeded") : r.error_value();
}

TEST_F(WorldFailures, BadArgumentsAreRefusedBeforeAnythingIsSent) {
  auto w = make_world();
  ASSERT_TRUE(w);
  const auto n = static_cast<std::size_t>(size_);
  auto small = buffer(std::vector<float>(4));
  auto big = buffer(std::vector<float>(8));

  auto e = failure_of(w->all_reduce(big, small));
  EXPECT_EQ(e.code(), errc::invalid_argument);
  EXPECT_EQ(e.message(), "all_reduce: the recv buffer holds 4 elements, 8 are needed");

  e = failure_of(w->all_gather(small, small, 4 * n + 1));
  EXPECT_EQ(e.code(), errc::invalid_argument);

  e = failure_of(w->broadcast(small, size_));
  EXPECT_EQ(e.message(),
            "broadcast: rank " + std::to_string(size_) + " is not in this world of " + std::to_string(size_));
  EXPECT_EQ(failure_of(w->send(small, -1)).code(), errc::invalid_argument);

  e = failure_of(w->all_to_all(big, big));
  EXPECT_EQ(e.message(), "all_to_all cannot run in place; pass two buffers");

  // A buffer of another device.
  auto other = local::device::start(sys_, 1, local::device_kind::host).value();
  auto foreign = other.allocate<float>(8).get().value();
  e = failure_of(w->all_reduce(foreign));
  EXPECT_EQ(e.code(), errc::invalid_argument);
  EXPECT_NE(e.message().find("is not on local device 0"), std::string::npos) << e.message();

  // A stale handle: its device has stopped.
  other.stop();
  ASSERT_TRUE(other.on_terminated().wait_for(10s));
  EXPECT_EQ(failure_of(w->all_reduce(foreign)).code(), errc::stale_ref);

  // An empty handle, and the wrong number of buffers for the local devices.
  EXPECT_EQ(failure_of(w->all_reduce(local::gpu_ref<float>{})).code(), errc::invalid_argument);
  std::vector<local::gpu_ref<float>> two{big, big};
  e = failure_of(w->collective<float>(coll_kind::all_reduce, two, two));
  EXPECT_EQ(e.message(), "all_reduce: this world has 1 local device(s); pass one buffer each");

  // Nothing was issued, and the world still works.
  EXPECT_EQ(w->stats().issues, 0u);
  ASSERT_TRUE(w->all_reduce(big).get());
  EXPECT_FALSE(w->failure());
}

TEST_F(WorldFailures, ARankThatNeverJoinsFailsTheOthersByTheDeadline) {
  if (size_ < 2) GTEST_SKIP() << "needs 2 ranks";
  cluster::world_options o;
  o.op_timeout = 500ms;
  auto w = make_world(o);
  ASSERT_TRUE(w);
  auto b = buffer(std::vector<std::int32_t>(1024, 1));
  ASSERT_TRUE(w->all_reduce(b).get());  // all ranks are up
  if (rank_ != 0) return;               // withhold the next one
  const auto start = std::chrono::steady_clock::now();
  auto pending = w->all_reduce(b);
  auto behind = w->all_gather(b, buffer(std::vector<std::int32_t>(1024 * static_cast<std::size_t>(size_))));
  const auto e = failure_of(pending);
  const auto took = std::chrono::steady_clock::now() - start;
  EXPECT_EQ(e.code(), errc::timeout);
  EXPECT_EQ(e.message(), "all_reduce #2 (1024 x i32, sum) on ranks 0-" + std::to_string(size_ - 1) +
                             " did not finish within 500 ms (a rank did not join it, or is stuck); the "
                             "communicator was aborted");
  EXPECT_GE(took, 500ms);
  EXPECT_LT(took, 1500ms);  // deadline + 1 s
  // Everything behind it fails too, naming the cause; later calls fail at once.
  const auto e2 = failure_of(behind);
  EXPECT_EQ(e2.code(), errc::aborted);
  EXPECT_NE(e2.message().find("all_gather #3 (1024 x i32) was aborted: all_reduce #2"), std::string::npos)
      << e2.message();
  EXPECT_EQ(failure_of(w->barrier()).code(), errc::aborted);
  ASSERT_TRUE(w->failure());
  EXPECT_EQ(w->failure()->code(), errc::timeout);
}

TEST_F(WorldFailures, ABulkCallARankNeverJoinsFailsByTheDeadlineNamingIt) {
  // Rank 0 makes a submit_group call of 300 small all_reduces (bulk calls of 256 and 44) that the
  // others never make: it fails by the deadline, naming the first bulk call, and the call after
  // it fails too.
  if (size_ < 2) GTEST_SKIP() << "needs 2 ranks";
  cluster::world_options o;
  o.op_timeout = 500ms;
  auto w = make_world(o);
  ASSERT_TRUE(w);
  auto b = buffer(std::vector<std::int32_t>(4, 1));
  ASSERT_TRUE(w->all_reduce(b).get());  // all ranks are up
  if (rank_ != 0) return;               // withhold the call
  std::vector<local::gpu_ref<std::int32_t>> bufs;
  std::vector<cluster::coll_spec> specs;
  for (int i = 0; i < 300; ++i) {
    bufs.push_back(buffer(std::vector<std::int32_t>(4, i)));
    specs.push_back({coll_kind::all_reduce, local::dtype::i32, {}, {bufs.back().block()}, {bufs.back().block()}});
  }
  const auto start = std::chrono::steady_clock::now();
  auto pending = w->submit_group(std::move(specs));
  const auto e = failure_of(pending);
  const auto took = std::chrono::steady_clock::now() - start;
  EXPECT_EQ(e.code(), errc::aborted) << e.message();  // (the call's future is its last bulk call's)
  EXPECT_NE(e.message().find("a call of 44 all_reduces (#258-#301, i32, sum) was aborted: a call of 256 "
                             "all_reduces (#2-#257, i32, sum) on ranks 0-" +
                             std::to_string(size_ - 1) + " did not finish within 500 ms"),
            std::string::npos)
      << e.message();
  EXPECT_GE(took, 500ms);
  EXPECT_LT(took, 1500ms);
  ASSERT_TRUE(w->failure());
  EXPECT_EQ(w->failure()->code(), errc::timeout);
  // Nothing was summed.
  EXPECT_EQ(read(bufs[7]), std::vector<std::int32_t>(4, 7));
}

// A rank whose world fails (here: its device was rebuilt) tells the others at once, so their
// pending requests fail with the cause long before their own deadline.
TEST_F(WorldFailures, AFailedRankTellsTheOthersWithoutWaitingForTheDeadline) {
  if (size_ < 2) GTEST_SKIP() << "needs 2 ranks";
  cluster::world_options o;
  o.op_timeout = 120s;
  auto w = make_world(o);
  ASSERT_TRUE(w);
  auto b = buffer(std::vector<std::int32_t>(64, 1));
  ASSERT_TRUE(w->all_reduce(b).get());  // all ranks are up
  if (rank_ == 0) {
    dev_.state()->bump_generation();  // what a context rebuild does
    // Rank 0 issues nothing more while its world is still up: a collective it issued would pair
    // with rank 1's all_reduce, which may already be on the wire (a lone small request does not
    // wait for the packing exchange).
    const auto until = std::chrono::steady_clock::now() + 30s;
    while (!w->failure() && std::chrono::steady_clock::now() < until) std::this_thread::yield();
    ASSERT_TRUE(w->failure()) << "the rebuild did not fail the world within 30 s";
    const auto e = failure_of(w->barrier());
    EXPECT_EQ(e.code(), errc::aborted);
    EXPECT_NE(e.message().find("device 0 was rebuilt"), std::string::npos) << e.message();
    return;
  }
  auto pending = w->all_reduce(b);  // rank 0 never joins it
  ASSERT_TRUE(pending.wait_for(30s)) << "no notice from rank 0 within 30 s (the deadline is 120 s)";
  const auto e = failure_of(pending);
  EXPECT_EQ(e.code(), errc::aborted);
  EXPECT_NE(e.message().find("rank 0 of this world failed: aborted: device 0 was rebuilt"), std::string::npos)
      << e.message();
  ASSERT_TRUE(w->failure());
}

TEST_F(WorldFailures, TheCheckNamesTheFirstMismatchInsteadOfHanging) {
  if (size_ < 2) GTEST_SKIP() << "needs 2 ranks";
  cluster::world_options o;
  o.check = true;
  o.op_timeout = 20s;
  auto w = make_world(o);
  ASSERT_TRUE(w);
  auto b = buffer(std::vector<float>(64, 1));
  ASSERT_TRUE(w->all_reduce(b).get());  // matching requests pass the check
  // Rank 1 reduces 32 elements where everyone else reduces 64.
  const auto e = failure_of(w->all_reduce(b, b, cluster::reduce_op::sum, rank_ == 1 ? 32 : 64));
  EXPECT_EQ(e.code(), errc::invalid_argument);
  const std::string other = rank_ == 1 ? "64" : "32";
  EXPECT_NE(e.message().find("ranks issued different collectives: this rank issued all_reduce #2 of " +
                             std::string(rank_ == 1 ? "32" : "64") + " x f32 (sum), rank "),
            std::string::npos)
      << e.message();
  EXPECT_NE(e.message().find("issued all_reduce #2 of " + other + " x f32 (sum)"), std::string::npos) << e.message();
}

TEST_F(WorldFailures, ARankThatCannotCreateTheWorldFailsItEverywhere) {
  if (size_ < 2) GTEST_SKIP() << "needs 2 ranks";
  std::vector<local::device> members;
  if (rank_ != 1) members.push_back(dev_);  // rank 1 brings no device
  const auto w = cluster::world::create(MPI_COMM_WORLD, members, {});
  ASSERT_FALSE(w);
  if (rank_ == 1) {
    EXPECT_EQ(w.error_value().message(), "while creating a world: a world needs at least one local device");
  } else {
    EXPECT_EQ(w.error_value().code(), errc::aborted);
    EXPECT_EQ(w.error_value().message(),
              "creating a world failed on other ranks: rank 1: invalid_argument: a world needs at least one local "
              "device");
  }
}

// "ranks 0, 2-3": every rank of the test's world but rank 1, as agree_settings lists them.
std::string all_but_rank_1(int size) {
  if (size == 2) return "rank 0";
  return size == 3 ? "ranks 0, 2" : "ranks 0, 2-" + std::to_string(size - 1);
}

TEST_F(WorldFailures, OptionsThatShapeTheCallsMustAgreeAndTheRankThatDiffersIsNamed) {
  if (size_ < 2) GTEST_SKIP() << "needs 2 ranks";
  cluster::world_options o;
  if (rank_ == 1) o.pack_limit = 0;  // rank 1 would not pack what the others pack
  const auto w = cluster::world::create(MPI_COMM_WORLD, {dev_}, o);
  ASSERT_FALSE(w);
  EXPECT_EQ(w.error_value().code(), errc::invalid_argument);
  EXPECT_EQ(w.error_value().message(),
            "creating a world: ATOMR_COLL_PACK_BYTES must be the same on every rank: '0' on rank 1, '65536' on " +
                all_but_rank_1(size_));
  // The same world, agreed, is made next: nothing was left half made.
  EXPECT_TRUE(cluster::world::create(MPI_COMM_WORLD, {dev_}, {}));
}

TEST_F(WorldFailures, HostBackendSettingsMustAgree) {
  if (size_ < 2) GTEST_SKIP() << "needs 2 ranks";
  if (rank_ == 1) {
    ASSERT_EQ(::setenv("ATOMR_HOST_SHM_BYTES", "0", 1), 0);
  }
  const auto w = cluster::world::create(MPI_COMM_WORLD, {dev_}, {});
  if (rank_ == 1) {
    ASSERT_EQ(::unsetenv("ATOMR_HOST_SHM_BYTES"), 0);
  }
  ASSERT_FALSE(w);
  EXPECT_EQ(w.error_value().code(), errc::invalid_argument);
  EXPECT_NE(w.error_value().message().find("starting the host backend: ATOMR_HOST_SHM_BYTES must be the same on "
                                           "every rank: '0' on rank 1, '4194304' on " +
                                           all_but_rank_1(size_)),
            std::string::npos)
      << w.error_value().message();
}

TEST_F(WorldFailures, NcclIsRefusedForHostDevices) {
  cluster::world_options o;
  o.backend = cluster::world_backend::nccl;
  const auto w = cluster::world::create(MPI_COMM_WORLD, {dev_}, o);
  ASSERT_FALSE(w);
  EXPECT_NE(w.error_value().message().find("the nccl backend needs CUDA devices"), std::string::npos);
}

TEST(WorldOptions, ReadFromTheEnvironment) {
  setenv("ATOMR_COLL_TIMEOUT_MS", "2500", 1);
  setenv("ATOMR_COLL_CHECK", "1", 1);
  setenv("ATOMR_COLL_PACK_BYTES", "0", 1);
  auto o = cluster::world_options::from_environment();
  ASSERT_TRUE(o) << o.error_value();
  EXPECT_EQ(o->op_timeout, 2500ms);
  EXPECT_TRUE(o->check);
  EXPECT_EQ(o->pack_limit, 0u);
  setenv("ATOMR_COLL_TIMEOUT_MS", "-1", 1);
  o = cluster::world_options::from_environment();
  ASSERT_FALSE(o);
  EXPECT_EQ(o.error_value().message(), "ATOMR_COLL_TIMEOUT_MS must be a positive number of milliseconds");
  unsetenv("ATOMR_COLL_TIMEOUT_MS");
  unsetenv("ATOMR_COLL_CHECK");
  unsetenv("ATOMR_COLL_PACK_BYTES");
  EXPECT_TRUE(cluster::world_options::from_environment()->pack_graphs);
  setenv("ATOMR_COLL_PACK_GRAPHS", "0", 1);
  o = cluster::world_options::from_environment();
  ASSERT_TRUE(o) << o.error_value();
  EXPECT_FALSE(o->pack_graphs);
  setenv("ATOMR_COLL_PACK_GRAPHS", "2", 1);
  o = cluster::world_options::from_environment();
  ASSERT_FALSE(o);
  EXPECT_EQ(o.error_value().message(), "ATOMR_COLL_PACK_GRAPHS must be 0 or 1");
  unsetenv("ATOMR_COLL_PACK_GRAPHS");
  // Long calls always go as bulk calls unless a program's options say otherwise.
  setenv("ATOMR_COLL_BULK", "0", 1);
  o = cluster::world_options::from_environment();
  ASSERT_TRUE(o) << o.error_value();
  EXPECT_TRUE(o->bulk);
  unsetenv("ATOMR_COLL_BULK");
}

}  // namespace
}  // namespace atomr
