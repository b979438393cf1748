// A world over MPI_COMM_WORLD with one device per rank, and typed helpers that move values in
// and out of its buffers. Shared by the cluster tests: host devices and the host backend, or,
// compiled with ATOMR_WORLD_TEST_CUDA (the `gpu` build of the same tests), the rank's GPU and NCCL.
#pragma once

#include <gtest/gtest.h>
#include <mpi.h>

#include <vector>

#include "../support/element_values.hpp"
#include "atomr/cluster/world.hpp"
#include "atomr/local/device/half.hpp"
#if ATOMR_WORLD_TEST_CUDA
#include "../gpu/rank_gpu.hpp"
#include "../support/gpu_test.hpp"
#endif

namespace atomr::testing {

class world_fixture : public ::testing::Test {
 protected:
  void SetUp() override {
    MPI_Comm_rank(MPI_COMM_WORLD, &rank_);
    MPI_Comm_size(MPI_COMM_WORLD, &size_);
#if ATOMR_WORLD_TEST_CUDA
    ATOMR_REQUIRE_GPUS(1);
#endif
  }
  // The rank's GPU in the gpu build (a host device where none is visible: the test skips), else a
  // host device. One device per system: a second would clash on its actor name.
  static local::device start_device(local::actor_system& sys) {
#if ATOMR_WORLD_TEST_CUDA
    if (!local::probe_cuda_devices()->devices.empty()) {
      return local::device::start(sys, test::rank_gpu(), local::device_kind::cuda).value();
    }
#endif
    return local::device::start(sys, 0, local::device_kind::host).value();
  }
  std::unique_ptr<cluster::world> make_world(cluster::world_options o = {}) {
    auto w = cluster::world::create(MPI_COMM_WORLD, {dev_}, o);
    EXPECT_TRUE(w) << w.error_value();
    return w ? std::move(w).value() : nullptr;
  }
  template <typename T>
  local::gpu_ref<T> buffer(const std::vector<T>& values) {
    auto b = dev_.allocate<T>(values.size()).get().value();
    EXPECT_TRUE(dev_.upload(b, std::span<const T>(values)).get());
    return b;
  }
  // `k` buffers of `n` floats, buffer i holding rank + i: sums of them stay exact.
  std::vector<local::gpu_ref<float>> counting_buffers(int k, std::size_t n) {
    std::vector<local::gpu_ref<float>> bufs;
    for (int i = 0; i < k; ++i) bufs.push_back(buffer(std::vector<float>(n, static_cast<float>(rank_ + i))));
    return bufs;
  }
  static cluster::coll_spec sum_in_place(const local::gpu_ref<float>& b) { return cluster::all_reduce_spec(b); }
  // One in-place sum per buffer, in order (one call's specs).
  static std::vector<cluster::coll_spec> sums_in_place(const std::vector<local::gpu_ref<float>>& bufs) {
    std::vector<cluster::coll_spec> specs;
    for (const auto& b : bufs) specs.push_back(sum_in_place(b));
    return specs;
  }
  // Counting buffer i after `times` in-place sums over the world.
  float summed(int i, int times) const {
    float v = static_cast<float>(size_ * (size_ - 1) / 2 + size_ * i);
    for (int t = 1; t < times; ++t) v *= static_cast<float>(size_);
    return v;
  }
  template <typename T>
  std::vector<T> read(const local::gpu_ref<T>& b) {
    std::vector<T> out(b.size());
    const auto r = dev_.download(b, std::span<T>(out)).get();
    EXPECT_TRUE(r) << r.error_value();
    return out;
  }

  int rank_ = 0;
  int size_ = 1;
  local::actor_system sys_;
  local::device dev_ = start_device(sys_);
};

}  // namespace atomr::testing
