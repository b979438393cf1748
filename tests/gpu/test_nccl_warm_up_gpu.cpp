// cluster::warm_nccl on the rank's GPUs before anything else touches them: the devices start and
// the world is made while the warm-up runs, and the world's collectives are right.
#include <gtest/gtest.h>
#include <mpi.h>

#include <numeric>

#include "../support/gpu_test.hpp"
#include "atomr/cluster/nccl_warm_up.hpp"
#include "atomr/cluster/world.hpp"
#include "rank_gpu.hpp"

namespace atomr {
namespace {

TEST(NcclWarmUp, AWorldMadeWhileItsDevicesWarmUpIsRight) {
  ATOMR_REQUIRE_GPUS(1);
  int rank = 0;
  int size = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  // One rank with two GPUs visible drives both (a world of two members); otherwise its own one.
  const int visible = static_cast<int>(local::probe_cuda_devices()->devices.size());
  std::vector<int> gpus{test::rank_gpu()};
  if (size == 1 && visible >= 2) gpus = {0, 1};
  ASSERT_TRUE(cluster::warm_nccl(gpus));
  ASSERT_TRUE(cluster::warm_nccl(gpus));  // a second call for the same devices starts nothing more
  local::actor_system sys;
  std::vector<local::device> devs;
  for (const int g : gpus) devs.push_back(local::device::start(sys, g, local::device_kind::cuda).value());
  auto made = cluster::world::create(MPI_COMM_WORLD, devs, {});
  ASSERT_TRUE(made) << made.error_value();
  auto& w = **made;
  const int members = w.size();
  ASSERT_EQ(members, size * static_cast<int>(gpus.size()));
  // Member r holds r + 1 + i at i: the sum over members is members * (members + 1) / 2 + members * i.
  constexpr std::size_t n = 4096;
  std::vector<local::gpu_ref<std::int64_t>> bufs;
  for (std::size_t m = 0; m < devs.size(); ++m) {
    bufs.push_back(devs[m].allocate<std::int64_t>(n).get().value());
    std::vector<std::int64_t> v(n);
    const auto r = static_cast<std::int64_t>(w.rank(m));
    for (std::size_t i = 0; i < n; ++i) v[i] = r + 1 + static_cast<std::int64_t>(i);
    ASSERT_TRUE(devs[m].upload(bufs[m], std::span<const std::int64_t>(v)).get());
  }
  ASSERT_TRUE(w.collective<std::int64_t>(cluster::coll_kind::all_reduce, bufs, bufs).get());
  const std::int64_t k = members;
  for (std::size_t m = 0; m < devs.size(); ++m) {
    std::vector<std::int64_t> out(n);
    ASSERT_TRUE(devs[m].download(bufs[m], std::span<std::int64_t>(out)).get());
    for (std::size_t i = 0; i < n; ++i) {
      ASSERT_EQ(out[i], k * (k + 1) / 2 + k * static_cast<std::int64_t>(i)) << "member " << m << " element " << i;
    }
  }
}

}  // namespace
}  // namespace atomr
