// A gone world's NCCL communicators are destroyed on a thread of their own (ncclCommDestroy waits
// out a 500 ms poll inside NCCL): worlds let go of in quick succession must all be destroyed,
// worlds made meanwhile must sum right, and the GPU memory must come back.
#include <cuda_runtime.h>
#include <gtest/gtest.h>
#include <mpi.h>

#include <iostream>
#include <memory>
#include <vector>

#include "../support/gpu_test.hpp"
#include "atomr/cluster/world.hpp"
#include "rank_gpu.hpp"

namespace atomr {
namespace {

std::size_t free_gpu_bytes(int gpu) {
  std::size_t free = 0;
  std::size_t total = 0;
  EXPECT_EQ(cudaSetDevice(gpu), cudaSuccess);
  EXPECT_EQ(cudaMemGetInfo(&free, &total), cudaSuccess);
  return free;
}

TEST(WorldTeardown, WorldsLetGoInQuickSuccessionAreDestroyedAndTheirMemoryComesBack) {
  ATOMR_REQUIRE_GPUS(1);
  int rank = 0;
  int size = 1;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  const int gpu = test::rank_gpu();
  local::actor_system sys;
  auto dev = local::device::start(sys, gpu, local::device_kind::cuda).value();
  auto buf = dev.allocate<std::int64_t>(4).get().value();
  // `k` worlds alive at once, each summing `rank + t` over the ranks; then all let go together.
  std::size_t alive = 0;  // free bytes with the first round of six alive
  auto round = [&](int k, std::int64_t t) {
    std::vector<std::unique_ptr<cluster::world>> worlds;
    for (int i = 0; i < k; ++i) {
      auto w = cluster::world::create(MPI_COMM_WORLD, {dev}, {});
      ASSERT_TRUE(w) << w.error_value();
      worlds.push_back(std::move(w).value());
    }
    if (t == 10) alive = free_gpu_bytes(gpu);
    for (std::size_t i = 0; i < worlds.size(); ++i) {
      const std::int64_t v = rank + t + static_cast<std::int64_t>(i);
      ASSERT_TRUE(dev.upload(buf, std::span<const std::int64_t>(std::vector<std::int64_t>(4, v))).get());
      ASSERT_TRUE(worlds[i]->all_reduce(buf).get());
      std::vector<std::int64_t> out(4);
      ASSERT_TRUE(dev.download(buf, std::span<std::int64_t>(out)).get());
      const std::int64_t expected = size * (size - 1) / 2 + size * (t + static_cast<std::int64_t>(i));
      ASSERT_EQ(out, std::vector<std::int64_t>(4, expected)) << "world " << i;
    }
  };
  // A GPU's free memory counts every process's allocations on it, and a peer's communicators
  // hold some on this rank's GPU (two ranks on two H200s: rank 0 saw 160 MiB not back while rank
  // 1 was still destroying its worlds). So every rank waits for its own, then they meet, then
  // each measures.
  auto settled_free_bytes = [&] {
    cluster::wait_for_retired_communicators();
    EXPECT_EQ(MPI_Barrier(MPI_COMM_WORLD), MPI_SUCCESS);
    return free_gpu_bytes(gpu);
  };
  round(1, 0);
  const std::size_t before = settled_free_bytes();
  // Made while the worlds before them are still being destroyed.
  for (std::int64_t t = 1; t <= 3; ++t) round(6, 10 * t);
  const std::size_t after = settled_free_bytes();
  // What a leak would look like: six worlds' communicators hold this much (NCCL's buffers).
  std::cout << "rank " << rank << ", GPU " << gpu << ": six worlds alive held "
            << static_cast<double>(before - alive) / (1 << 20) << " MiB; after all were let go, "
            << (static_cast<double>(before) - static_cast<double>(after)) / (1 << 20) << " MiB not back\n";
  // (CUDA hands memory out in 2 MiB pages; nothing else of this test allocates meanwhile.)
  constexpr std::size_t slack = 16u << 20;
  EXPECT_GE(after + slack, before) << "GPU " << gpu << ": " << (before - after) / (1u << 20)
                                   << " MiB not given back after 18 worlds were let go";
  cluster::wait_for_retired_communicators();  // nothing left: returns at once
}

}  // namespace
}  // namespace atomr
