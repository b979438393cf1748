#include <gtest/gtest.h>

#include "atomr/common/context.hpp"
#include "atomr/common/log.hpp"

namespace atomr {
namespace {

class LogTest : public ::testing::Test {
 protected:
  void TearDown() override {
    ASSERT_TRUE(log::configure("info"));
    context::set_rank(context::k_unknown);
  }
};

std::string capture(const std::function<void()>& body) {
  ::testing::internal::CaptureStderr();
  body();
  return ::testing::internal::GetCapturedStderr();
}

TEST_F(LogTest, EveryLineCarriesRankSubsystemAndLevel) {
  context::set_rank(5);
  const auto out = capture([] { log::get("cluster")->warn("world has {} ranks", 8); });
  EXPECT_NE(out.find("[rank 5] [cluster] [warning] world has 8 ranks"), std::string::npos) << out;
}

TEST_F(LogTest, RankSetAfterLoggerCreationIsUsed) {
  auto logger = log::get("late_rank");
  context::set_rank(2);
  const auto out = capture([&] { logger->info("hello"); });
  EXPECT_NE(out.find("[rank 2] [late_rank] [info] hello"), std::string::npos) << out;
}

TEST_F(LogTest, PerSubsystemLevels) {
  ASSERT_TRUE(log::configure("warn,chatty=debug"));
  const auto out = capture([] {
    log::get("chatty")->debug("chatty debug shown");
    log::get("quiet")->info("quiet info hidden");
    log::get("quiet")->error("quiet error shown");
  });
  EXPECT_NE(out.find("chatty debug shown"), std::string::npos) << out;
  EXPECT_EQ(out.find("quiet info hidden"), std::string::npos) << out;
  EXPECT_NE(out.find("quiet error shown"), std::string::npos) << out;
}

TEST_F(LogTest, BadSpecIsRejectedAndChangesNothing) {
  ASSERT_TRUE(log::configure("error"));
  auto r = log::configure("info,cluster=loud");
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error_value().code(), errc::invalid_argument);
  EXPECT_NE(r.error_value().message().find("unknown log level 'loud'"), std::string::npos);
  EXPECT_EQ(log::get("cluster")->level(), spdlog::level::err);
  EXPECT_FALSE(log::configure("=debug"));
}

}  // namespace
}  // namespace atomr
