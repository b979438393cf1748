#include <gtest/gtest.h>

#include <set>
#include <string>

#include "atomr/common/result.hpp"

namespace atomr {
namespace {

result<int> parse_positive(int v) {
  if (v <= 0) return error(errc::invalid_argument, "value " + std::to_string(v) + " is not positive");
  return v;
}

result<int> doubled(int v) {
  ATOMR_ASSIGN_OR_RETURN(int x, parse_positive(v));
  return 2 * x;
}

result<void> check_both(int a, int b) {
  ATOMR_TRY(parse_positive(a));
  ATOMR_TRY(parse_positive(b));
  return ok();
}

TEST(Result, HoldsValueOrError) {
  result<std::string> good = std::string("abc");
  ASSERT_TRUE(good.has_value());
  EXPECT_EQ(*good, "abc");
  EXPECT_EQ(good->size(), 3u);

  result<std::string> bad = error(errc::timeout, "waited 5 ms");
  ASSERT_FALSE(bad);
  EXPECT_EQ(bad.error_value().code(), errc::timeout);
  EXPECT_EQ(bad.value_or("fallback"), "fallback");
}

TEST(Result, AssignOrReturnPropagatesTheFirstError) {
  EXPECT_EQ(doubled(21).value(), 42);
  auto r = doubled(-3);
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error_value().code(), errc::invalid_argument);
  EXPECT_EQ(r.error_value().message(), "value -3 is not positive");
}

TEST(Result, TryStopsAtTheFailingStep) {
  EXPECT_TRUE(check_both(1, 2));
  auto r = check_both(1, 0);
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error_value().message(), "value 0 is not positive");
}

TEST(Error, DescribeAndContext) {
  const error e(errc::stale_ref, "buffer 7 is from generation 2, device is at 3");
  EXPECT_EQ(e.describe(), "stale_ref: buffer 7 is from generation 2, device is at 3");
  const error outer = e.with_context("fetching token 7");
  EXPECT_EQ(outer.code(), errc::stale_ref);
  EXPECT_EQ(outer.message(), "while fetching token 7: buffer 7 is from generation 2, device is at 3");
}

TEST(Error, EveryCodeHasADistinctName) {
  std::set<std::string_view> names;
  for (int c = 0; c <= static_cast<int>(k_errc_last); ++c) {
    const auto name = to_string(static_cast<errc>(c));
    EXPECT_NE(name, "unknown");
    EXPECT_TRUE(names.insert(name).second) << name;
  }
}

}  // namespace
}  // namespace atomr
