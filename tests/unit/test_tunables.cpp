#include <gtest/gtest.h>
#include <stdlib.h>

#include <chrono>

#include "atomr/common/tunables.hpp"

namespace atomr {
namespace {

constexpr tunable k_test_tunable{"test_value", "ATOMR_TEST_TUNABLE_VALUE", "42", "used by this test only"};

class TunablesTest : public ::testing::Test {
 protected:
  void TearDown() override { unsetenv("ATOMR_TEST_TUNABLE_VALUE"); }
};

TEST_F(TunablesTest, DefaultUnlessTheEnvironmentSetsIt) {
  unsetenv("ATOMR_TEST_TUNABLE_VALUE");
  EXPECT_FALSE(tunable_is_set(k_test_tunable));
  EXPECT_EQ(tunable_value(k_test_tunable), "42");
  EXPECT_EQ(tunable_int(k_test_tunable).value(), 42);

  setenv("ATOMR_TEST_TUNABLE_VALUE", "-17", 1);
  EXPECT_TRUE(tunable_is_set(k_test_tunable));
  EXPECT_EQ(tunable_int(k_test_tunable).value(), -17);

  // An empty variable counts as unset, as shells make it easy to export one by accident.
  setenv("ATOMR_TEST_TUNABLE_VALUE", "", 1);
  EXPECT_EQ(tunable_value(k_test_tunable), "42");
}

TEST_F(TunablesTest, NonIntegerIsAnErrorNamingTheVariable) {
  setenv("ATOMR_TEST_TUNABLE_VALUE", "12ms", 1);
  auto r = tunable_int(k_test_tunable);
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error_value().code(), errc::invalid_argument);
  EXPECT_EQ(r.error_value().message(), "ATOMR_TEST_TUNABLE_VALUE='12ms' is not an integer (default 42)");
}

TEST_F(TunablesTest, MicrosecondsOrTheFallbackForAMissingNegativeOrBadValue) {
  using std::chrono::microseconds;
  unsetenv("ATOMR_TEST_TUNABLE_VALUE");
  EXPECT_EQ(tunable_us_or(k_test_tunable, microseconds(7), "test"), microseconds(42));
  setenv("ATOMR_TEST_TUNABLE_VALUE", "0", 1);
  EXPECT_EQ(tunable_us_or(k_test_tunable, microseconds(7), "test"), microseconds(0));
  setenv("ATOMR_TEST_TUNABLE_VALUE", "-1", 1);
  EXPECT_EQ(tunable_us_or(k_test_tunable, microseconds(7), "test"), microseconds(7));
  setenv("ATOMR_TEST_TUNABLE_VALUE", "5us", 1);
  EXPECT_EQ(tunable_us_or(k_test_tunable, microseconds(7), "test"), microseconds(7));
}

}  // namespace
}  // namespace atomr
