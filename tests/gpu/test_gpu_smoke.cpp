// GPU smoke test: each rank takes the GPU of its local rank, copies seeded data to it, runs a kernel
// and a device-to-device copy, and checks every value on the host.
#include <gtest/gtest.h>

#include <memory>
#include <random>
#include <vector>

#include "affine_kernel.hpp"
#include "atomr/cluster/mpi_session.hpp"
#include "atomr/common/context.hpp"
#include "atomr/local/cuda_check.hpp"
#include "gpu_test.hpp"

namespace atomr {
namespace {

struct device_free {
  void operator()(void* p) const { cudaFree(p); }
};
using device_ptr = std::unique_ptr<std::int32_t, device_free>;

result<device_ptr> device_alloc(std::size_t n) {
  void* p = nullptr;
  ATOMR_TRY(ATOMR_CUDA_CHECK(cudaMalloc(&p, n * sizeof(std::int32_t))));
  return device_ptr(static_cast<std::int32_t*>(p));
}

TEST(GpuSmoke, AllocateCopyKernelCompare) {
  ATOMR_REQUIRE_GPUS(1);
  auto session = cluster::mpi_session::start(nullptr, nullptr);
  ASSERT_TRUE(session) << session.error_value();
  const auto& id = (*session)->identity();
  const int count = static_cast<int>(local::probe_cuda_devices()->devices.size());
  const int device = id.local_rank % count;
  context::scoped_device bound(device);
  ASSERT_TRUE(ATOMR_CUDA_CHECK(cudaSetDevice(device)));

  constexpr std::size_t n = (std::size_t{1} << 22) + 3;  // not a multiple of the block size
  std::mt19937 rng(20261122u + static_cast<unsigned>(id.world_rank));
  std::uniform_int_distribution<std::int32_t> dist(-1000000, 1000000);
  std::vector<std::int32_t> host_in(n);
  for (auto& v : host_in) v = dist(rng);

  auto in = device_alloc(n);
  auto out = device_alloc(n);
  auto copy = device_alloc(n);
  ASSERT_TRUE(in && out && copy);
  cudaStream_t stream = nullptr;
  ASSERT_TRUE(ATOMR_CUDA_CHECK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking)));
  const std::size_t bytes = n * sizeof(std::int32_t);
  ASSERT_TRUE(ATOMR_CUDA_CHECK(cudaMemcpyAsync(in->get(), host_in.data(), bytes, cudaMemcpyHostToDevice, stream)));
  ASSERT_TRUE(ATOMR_CUDA_CHECK(test::launch_affine(in->get(), out->get(), n, 3, 7 + id.world_rank, stream)));
  ASSERT_TRUE(ATOMR_CUDA_CHECK(cudaMemcpyAsync(copy->get(), out->get(), bytes, cudaMemcpyDeviceToDevice, stream)));
  std::vector<std::int32_t> host_out(n, 0);
  ASSERT_TRUE(ATOMR_CUDA_CHECK(cudaMemcpyAsync(host_out.data(), copy->get(), bytes, cudaMemcpyDeviceToHost, stream)));
  ASSERT_TRUE(ATOMR_CUDA_CHECK(cudaStreamSynchronize(stream)));
  ASSERT_TRUE(ATOMR_CUDA_CHECK(cudaStreamDestroy(stream)));

  std::size_t wrong = 0;
  for (std::size_t i = 0; i < n; ++i) wrong += host_out[i] != 3 * host_in[i] + 7 + id.world_rank ? 1 : 0;
  EXPECT_EQ(wrong, 0u) << "of " << n << " values on rank " << id.world_rank << ", device " << device;
}

TEST(GpuSmoke, InvalidDeviceIsAClearError) {
  ATOMR_REQUIRE_GPUS(1);
  const int count = static_cast<int>(local::probe_cuda_devices()->devices.size());
  auto r = ATOMR_CUDA_CHECK(cudaSetDevice(count));
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error_value().code(), errc::cuda);
  EXPECT_NE(r.error_value().message().find("cudaErrorInvalidDevice"), std::string::npos) << r.error_value();
}

}  // namespace
}  // namespace atomr
