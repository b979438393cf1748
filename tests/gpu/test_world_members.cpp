// One rank driving two GPUs: a world with two local members, each one rank of the collective,
// their NCCL calls issued in one group.
#include <gtest/gtest.h>
#include <mpi.h>

#include <cstdlib>

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

// Each member replays its own CUDA graph of the request (graph_cache): every kind, repeated on
// the same buffers with new contents each round, so a graph that ran on stale inputs, on one
// member only, or not at all shows as a wrong value. Between rounds, an all_reduce on fresh
// buffers goes the eager way (one NCCL group), so the members' streams mix both.
TEST(WorldMembers, OneRankTwoGpusReplaysEveryKindAsCudaGraphs) {
  ATOMR_REQUIRE_GPUS(2);
  int size = 0;
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  if (size != 1) GTEST_SKIP() << "one rank holds both GPUs; run with 1 rank";
  local::actor_system sys;
  std::vector<local::device> devs{local::device::start(sys, 0, local::device_kind::cuda).value(),
                                  local::device::start(sys, 1, local::device_kind::cuda).value()};
  auto made = cluster::world::create(MPI_COMM_WORLD, devs, {});
  ASSERT_TRUE(made) << made.error_value();
  auto& w = **made;
  constexpr std::size_t n = 6;
  constexpr int rounds = 5;
  // Member m's element j in round t.
  auto v = [](int m, int t, std::size_t j) { return 1000 * t + 100 * m + static_cast<std::int32_t>(j); };
  auto alloc = [&](std::size_t count) {
    std::vector<local::gpu_ref<std::int32_t>> b;
    for (auto& d : devs) b.push_back(d.allocate<std::int32_t>(count).get().value());
    return b;
  };
  auto fill = [&](const std::vector<local::gpu_ref<std::int32_t>>& b, std::size_t count, int t) {
    for (int m = 0; m < 2; ++m) {
      std::vector<std::int32_t> h(count);
      for (std::size_t j = 0; j < count; ++j) h[j] = v(m, t, j);
      const auto mm = static_cast<std::size_t>(m);
      ASSERT_TRUE(devs[mm].upload(b[mm], std::span<const std::int32_t>(h)).get());
    }
  };
  auto read = [&](const std::vector<local::gpu_ref<std::int32_t>>& b, int m) {
    const auto mm = static_cast<std::size_t>(m);
    std::vector<std::int32_t> h(b[mm].size());
    EXPECT_TRUE(devs[mm].download(b[mm], std::span<std::int32_t>(h)).get());
    return h;
  };
  const auto small = alloc(n), wide = alloc(2 * n), summed = alloc(n), gathered = alloc(2 * n), scattered = alloc(n),
             cast = alloc(n), exchanged = alloc(2 * n);
  using span = std::span<const local::gpu_ref<std::int32_t>>;
  for (int t = 0; t < rounds; ++t) {
    SCOPED_TRACE("round " + std::to_string(t));
    fill(small, n, t);
    fill(wide, 2 * n, t);
    ASSERT_TRUE(w.collective<std::int32_t>(coll_kind::all_reduce, span(small), span(summed)).get());
    ASSERT_TRUE(w.collective<std::int32_t>(coll_kind::all_gather, span(small), span(gathered)).get());
    ASSERT_TRUE(w.collective<std::int32_t>(coll_kind::reduce_scatter, span(wide), span(scattered)).get());
    ASSERT_TRUE(w.collective<std::int32_t>(coll_kind::broadcast, span(small), span(cast), {{}, 1, 0}).get());
    ASSERT_TRUE(w.collective<std::int32_t>(coll_kind::all_to_all, span(wide), span(exchanged)).get());
    const auto fresh = alloc(n);
    fill(fresh, n, t);
    ASSERT_TRUE(w.collective<std::int32_t>(coll_kind::all_reduce, span(fresh), span(fresh)).get());
    for (int m = 0; m < 2; ++m) {
      const auto s = read(summed, m), g = read(gathered, m), sc = read(scattered, m), c = read(cast, m),
                 x = read(exchanged, m), f = read(fresh, m);
      const auto me = static_cast<std::size_t>(m);
      for (std::size_t j = 0; j < n; ++j) {
        ASSERT_EQ(s[j], v(0, t, j) + v(1, t, j)) << "all_reduce, member " << m << ", element " << j;
        ASSERT_EQ(f[j], v(0, t, j) + v(1, t, j)) << "eager all_reduce, member " << m << ", element " << j;
        ASSERT_EQ(sc[j], v(0, t, me * n + j) + v(1, t, me * n + j)) << "reduce_scatter, member " << m;
        ASSERT_EQ(c[j], v(1, t, j)) << "broadcast, member " << m << ", element " << j;
        for (int r = 0; r < 2; ++r) {
          const auto rr = static_cast<std::size_t>(r);
          ASSERT_EQ(g[rr * n + j], v(r, t, j)) << "all_gather, member " << m << ", from " << r;
          ASSERT_EQ(x[rr * n + j], v(r, t, me * n + j)) << "all_to_all, member " << m << ", from " << r;
        }
      }
    }
  }
  if (std::getenv("ATOMR_NCCL_GRAPHS") != nullptr) GTEST_SKIP() << "values checked; ATOMR_NCCL_GRAPHS is set";
  const auto st = w.stats();
  EXPECT_EQ(st.graph_captures, 5u);  // each kind's second round
  EXPECT_EQ(st.graph_launches, 5u * (rounds - 2));
}

}  // namespace
}  // namespace atomr
