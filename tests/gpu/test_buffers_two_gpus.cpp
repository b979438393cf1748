// One rank driving two GPUs: a token exported from GPU 0's buffer and fetched into GPU 1's goes
// by a peer copy within the process, with the exact bytes from 4 B to 256 MiB; a released export
// is stale. Skips (as CTest "skipped") where fewer than two GPUs are visible.
#include <gtest/gtest.h>
#include <mpi.h>

#include <cstdint>
#include <vector>

#include "../support/gpu_test.hpp"
#include "atomr/cluster/buffer_registry.hpp"
#include "atomr/cluster/router.hpp"

namespace {

using atomr::errc;
using atomr::cluster::buffer_registry;
using atomr::cluster::fetch_route;
using atomr::cluster::router;
namespace local = atomr::local;

std::uint32_t word(std::size_t i) { return static_cast<std::uint32_t>(i * 2654435761u) ^ 0x3c3c0000u; }

TEST(buffers_two_gpus, a_token_from_one_gpu_is_fetched_into_the_other_by_a_peer_copy) {
  ATOMR_REQUIRE_GPUS(2);
  local::actor_system sys;
  auto gpu0 = local::device::start(sys, 0, local::device_kind::cuda).value();
  auto gpu1 = local::device::start(sys, 1, local::device_kind::cuda).value();
  auto r = router::start(MPI_COMM_WORLD, sys).value();
  auto registry = buffer_registry::start(MPI_COMM_WORLD, *r, {gpu0, gpu1}).value();
  int rank = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  EXPECT_EQ(registry->route_from(rank), fetch_route::peer_copy);
  for (const std::size_t n : {std::size_t{1}, std::size_t{1} << 10, std::size_t{1} << 24, std::size_t{1} << 26}) {
    std::vector<std::uint32_t> values(n);
    for (std::size_t i = 0; i < n; ++i) values[i] = word(i);
    auto src = gpu0.allocate<std::uint32_t>(n).get().value();
    ASSERT_TRUE(gpu0.upload(src, std::span<const std::uint32_t>(values)).get());
    auto handle = registry->export_buffer(src).get();
    ASSERT_TRUE(handle) << handle.error_value();
    auto into = gpu1.allocate<std::uint32_t>(n).get().value();
    ASSERT_TRUE(gpu1.fill_bytes(into, 0xff).get());
    auto got = registry->fetch(*handle, into).get();
    ASSERT_TRUE(got) << n * 4 << " bytes: " << got.error_value();
    std::vector<std::uint32_t> back(n);
    ASSERT_TRUE(gpu1.download(into, std::span<std::uint32_t>(back)).get());
    std::size_t wrong = 0;
    for (std::size_t i = 0; i < n; ++i) wrong += back[i] != word(i) ? 1 : 0;
    EXPECT_EQ(wrong, 0u) << n * 4 << " bytes";
    ASSERT_TRUE(registry->release(*handle));
    auto late = registry->fetch(*handle, into).get();
    ASSERT_FALSE(late) << n * 4 << " bytes: a released export was fetched";
    EXPECT_EQ(late.error_value().code(), errc::stale_ref) << late.error_value();
  }
  registry.reset();
  EXPECT_TRUE(r->stop());
}

}  // namespace
