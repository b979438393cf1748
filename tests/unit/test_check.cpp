#include <gtest/gtest.h>

#include "atomr/common/check.hpp"
#include "atomr/common/context.hpp"

namespace atomr {
namespace {

class CheckTest : public ::testing::Test {
 protected:
  void TearDown() override { context::set_rank(context::k_unknown); }
};

TEST_F(CheckTest, FailedCallNamesCallFileLineRankAndDevice) {
  context::set_rank(3);
  context::scoped_device bound(1);
  const error e = detail::failed_call(errc::cuda, "cudaMalloc(&p, n)", "out of memory", "src/local/x.cpp", 40);
  EXPECT_EQ(e.code(), errc::cuda);
  EXPECT_EQ(e.message(), "cudaMalloc(&p, n) failed: out of memory at src/local/x.cpp:40 [rank 3, device 1]");
}

TEST_F(CheckTest, ContextBeforeBootstrapSaysRankUnknown) { EXPECT_EQ(context::describe(), "rank ?"); }

TEST_F(CheckTest, ScopedDeviceRestoresThePreviousBinding) {
  context::set_rank(0);
  {
    context::scoped_device outer(2);
    {
      context::scoped_device inner(5);
      EXPECT_EQ(context::device(), 5);
    }
    EXPECT_EQ(context::device(), 2);
    EXPECT_EQ(context::describe(), "rank 0, device 2");
  }
  EXPECT_EQ(context::device(), context::k_unknown);
  EXPECT_EQ(context::describe(), "rank 0");
}

}  // namespace
}  // namespace atomr
