// cluster::warm_nccl's switch (ATOMR_NCCL_WARM_UP): read and checked before anything starts, in
// every build (without NCCL the warm-up itself does nothing). Needs no GPU.
#include <gtest/gtest.h>

#include <cstdlib>

#include "atomr/cluster/nccl_warm_up.hpp"

namespace atomr {
namespace {

struct NcclWarmUpSwitch : ::testing::Test {
  void TearDown() override { unsetenv("ATOMR_NCCL_WARM_UP"); }
};

TEST_F(NcclWarmUpSwitch, AValueOtherThanZeroOrOneIsAnErrorNamingTheVariable) {
  for (const char* bad : {"2", "-1", "yes", "1x"}) {
    setenv("ATOMR_NCCL_WARM_UP", bad, 1);
    const int device = 0;
    const auto r = cluster::warm_nccl(std::span(&device, 1));
    ASSERT_FALSE(r) << bad;
    EXPECT_EQ(r.error_value().code(), errc::invalid_argument) << bad;
    EXPECT_NE(r.error_value().message().find("ATOMR_NCCL_WARM_UP"), std::string::npos) << r.error_value();
  }
}

TEST_F(NcclWarmUpSwitch, OffOrNoDevicesStartsNothingAndWaitingReturns) {
  setenv("ATOMR_NCCL_WARM_UP", "0", 1);
  const int device = 0;
  EXPECT_TRUE(cluster::warm_nccl(std::span(&device, 1)));
  unsetenv("ATOMR_NCCL_WARM_UP");
  EXPECT_TRUE(cluster::warm_nccl(std::span<const int>()));
  cluster::wait_nccl_warm(device);  // nothing was started for it: returns at once
}

}  // namespace
}  // namespace atomr
