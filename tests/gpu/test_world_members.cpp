// One rank driving two GPUs: a world with two local members, each one rank of the collective,
// their NCCL calls issued in one group.
#include <gtest/gtest.h>
#include <mpi.h>

#include "../support/gpu_test.hpp"
#include "atomr/cluster/world.hpp"

namespace atomr {
namespace {

using cluster::coll_kind;

TEST(WorldMembers, OneRankTwoGpus) {
  ATOMR_REQUIRE_GPUS(2);
  int size = 0;
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  if (size != 1) GTEST_SKIP() << "one rank holds both GPUs; run with 1 rank";
  local::actor_system sys;
  std::vector<local::device> devs{local::device::start(sys, 0, local::device_kind::cuda).value(),
                                  local::device::start(sys, 1, local::device_kind::cuda).value()};
  auto w = cluster::world::create(MPI_COMM_WORLD, devs, {});
  ASSERT_TRUE(w) << w.error_value();
  EXPECT_EQ((*w)->size(), 2);
  EXPECT_EQ((*w)->local_members(), 2u);
  EXPECT_EQ((*w)->rank(0), 0);
  EXPECT_EQ((*w)->rank(1), 1);

  constexpr std::size_t n = 1 << 20;
  std::vector<local::gpu_ref<float>> bufs;
  for (int m = 0; m < 2; ++m) {
    bufs.push_back(devs[static_cast<std::size_t>(m)].allocate<float>(n).get().value());
    std::vector<float> v(n);
    for (std::size_t i = 0; i < n; ++i) v[i] = static_cast<float>((m + 1) * static_cast<int>(i % 100));
    ASSERT_TRUE(devs[static_cast<std::size_t>(m)].upload(bufs.back(), std::span<const float>(v)).get());
  }
  ASSERT_TRUE((*w)->collective<float>(coll_kind::all_reduce, bufs, bufs).get());
  for (int m = 0; m < 2; ++m) {
    std::vector<float> out(n);
    ASSERT_TRUE(
        devs[static_cast<std::size_t>(m)].download(bufs[static_cast<std::size_t>(m)], std::span<float>(out)).get());
    for (std::size_t i = 0; i < n; ++i) ASSERT_EQ(out[i], 3.0f * static_cast<float>(i % 100)) << m << " " << i;
  }

  // all_gather: member m's 1000 elements land at m * 1000 on both.
  std::vector<local::gpu_ref<std::int32_t>> send;
  std::vector<local::gpu_ref<std::int32_t>> recv;
  for (int m = 0; m < 2; ++m) {
    auto& d = devs[static_cast<std::size_t>(m)];
    send.push_back(d.allocate<std::int32_t>(1000).get().value());
    recv.push_back(d.allocate<std::int32_t>(2000).get().value());
    std::vector<std::int32_t> v(1000);
    for (std::size_t i = 0; i < 1000; ++i) v[i] = m * 100000 + static_cast<std::int32_t>(i);
    ASSERT_TRUE(d.upload(send.back(), std::span<const std::int32_t>(v)).get());
  }
  ASSERT_TRUE((*w)->collective<std::int32_t>(coll_kind::all_gather, send, recv).get());
  for (int m = 0; m < 2; ++m) {
    std::vector<std::int32_t> out(2000);
    ASSERT_TRUE(devs[static_cast<std::size_t>(m)]
                    .download(recv[static_cast<std::size_t>(m)], std::span<std::int32_t>(out))
                    .get());
    for (std::size_t i = 0; i < 2000; ++i) {
      ASSERT_EQ(out[i], static_cast<std::int32_t>(i / 1000) * 100000 + static_cast<std::int32_t>(i % 1000));
    }
  }
  ASSERT_TRUE((*w)->barrier().get());
}

}  // namespace
}  // namespace atomr
