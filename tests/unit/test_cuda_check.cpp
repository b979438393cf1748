// Runs without a GPU: it checks how failed CUDA calls are reported, not the device.
#include <gtest/gtest.h>

#include "atomr/common/context.hpp"
#include "atomr/local/cuda_check.hpp"

namespace atomr {
namespace {

cudaError_t fake_call(cudaError_t status) { return status; }

TEST(CudaCheck, SuccessIsOk) { EXPECT_TRUE(ATOMR_CUDA_CHECK(fake_call(cudaSuccess))); }

TEST(CudaCheck, FailureNamesTheCallTheErrorAndTheSite) {
  context::scoped_device bound(1);
  const int line = __LINE__ + 1;
  auto r = ATOMR_CUDA_CHECK(fake_call(cudaErrorInvalidValue));
  ASSERT_FALSE(r);
  const auto& e = r.error_value();
  EXPECT_EQ(e.code(), errc::cuda);
  EXPECT_NE(e.message().find("fake_call(cudaErrorInvalidValue) failed: "), std::string::npos) << e;
  EXPECT_NE(e.message().find("(cudaErrorInvalidValue=1)"), std::string::npos) << e;
  EXPECT_NE(e.message().find("tests/unit/test_cuda_check.cpp:" + std::to_string(line)), std::string::npos) << e;
  EXPECT_NE(e.message().find("device 1]"), std::string::npos) << e;
}

TEST(CudaCheck, AllocationFailureIsOutOfMemory) {
  auto r = ATOMR_CUDA_CHECK(fake_call(cudaErrorMemoryAllocation));
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error_value().code(), errc::out_of_memory);
}

}  // namespace
}  // namespace atomr
