// Runs without a GPU: it checks how failed NCCL calls are reported.
#include <gtest/gtest.h>

#include "atomr/cluster/nccl_check.hpp"

namespace atomr {
namespace {

ncclResult_t fake_call(ncclResult_t status) { return status; }

TEST(NcclCheck, SuccessAndInProgressAreOk) {
  EXPECT_TRUE(ATOMR_NCCL_CHECK(fake_call(ncclSuccess)));
  EXPECT_TRUE(ATOMR_NCCL_CHECK(fake_call(ncclInProgress)));
}

TEST(NcclCheck, FailureNamesTheCallAndNcclText) {
  auto r = ATOMR_NCCL_CHECK(fake_call(ncclInvalidArgument));
  ASSERT_FALSE(r);
  const auto& e = r.error_value();
  EXPECT_EQ(e.code(), errc::nccl);
  EXPECT_NE(e.message().find("fake_call(ncclInvalidArgument) failed: "), std::string::npos) << e;
  EXPECT_NE(e.message().find(ncclGetErrorString(ncclInvalidArgument)), std::string::npos) << e;
  EXPECT_NE(e.message().find("(ncclResult 4)"), std::string::npos) << e;
  EXPECT_NE(e.message().find("tests/unit/test_nccl_check.cpp:"), std::string::npos) << e;
}

}  // namespace
}  // namespace atomr
