#include <gtest/gtest.h>

#include <optional>

#include "atomr/common/log_budget.hpp"

namespace {

using namespace std::chrono_literals;
using atomr::log_budget;

TEST(LogBudget, WritesTheFirstLinesOfAWindowAndCountsTheRest) {
  log_budget budget(3, 1s);
  const auto t0 = log_budget::clock::time_point{} + 100s;
  for (int i = 0; i < 3; ++i) EXPECT_EQ(budget.admit(t0 + i * 1ms), std::optional<std::uint64_t>(0)) << i;
  for (int i = 0; i < 1000; ++i) EXPECT_EQ(budget.admit(t0 + 10ms), std::nullopt) << i;
  // The next window's first line carries the count of every line left out before it, once.
  EXPECT_EQ(budget.admit(t0 + 1s), std::optional<std::uint64_t>(1000));
  EXPECT_EQ(budget.admit(t0 + 1s + 1ms), std::optional<std::uint64_t>(0));
}

TEST(LogBudget, AQuietWindowStartsAfresh) {
  log_budget budget(1, 500ms);
  const auto t0 = log_budget::clock::time_point{} + 10s;
  EXPECT_EQ(budget.admit(t0), std::optional<std::uint64_t>(0));
  EXPECT_EQ(budget.admit(t0 + 499ms), std::nullopt);
  EXPECT_EQ(budget.admit(t0 + 10s), std::optional<std::uint64_t>(1));
  EXPECT_EQ(budget.admit(t0 + 10s), std::nullopt);
}

TEST(LogBudget, AZeroBudgetWritesNothing) {
  log_budget budget(0, 1s);
  const auto t0 = log_budget::clock::time_point{} + 1s;
  EXPECT_EQ(budget.admit(t0), std::nullopt);
  EXPECT_EQ(budget.admit(t0 + 5s), std::nullopt);
}

}  // namespace
