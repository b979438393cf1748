// The request timeline: a bounded ring of the last requests, per-stage medians, and the Chrome
// trace JSON each rank writes.
#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "atomr/cluster/request_trace.hpp"

namespace atomr::cluster {
namespace {

// A request that passed every stage, `step_ns[s]` after the one before (stage 0 at `start`).
traced_request request(std::uint64_t seq, std::int64_t start, std::array<std::int64_t, k_trace_stages> step_ns) {
  traced_request r;
  r.seq = seq;
  r.bytes = 8 * seq;
  r.kind = coll_kind::all_reduce;
  r.caller_thread = 11;
  r.progress_thread = 22;
  std::int64_t t = start;
  for (std::size_t s = 0; s < k_trace_stages; ++s) {
    t += step_ns[s];
    r.at_ns[s] = t;
  }
  return r;
}

class RequestTrace : public testing::Test {
 protected:
  void TearDown() override { request_trace::get().disable(); }
};

TEST_F(RequestTrace, KeepsOnlyTheLastRequestsInOrder) {
  auto& t = request_trace::get();
  t.enable(3);
  EXPECT_TRUE(t.on());
  for (std::uint64_t seq = 1; seq <= 5; ++seq) t.add(request(seq, 1000, {0, 1, 1, 1, 1, 1, 1, 1}));
  const auto kept = t.snapshot();
  ASSERT_EQ(kept.size(), 3U);
  EXPECT_EQ(kept[0].seq, 3U);
  EXPECT_EQ(kept[1].seq, 4U);
  EXPECT_EQ(kept[2].seq, 5U);
  t.clear();
  EXPECT_TRUE(t.snapshot().empty());
}

TEST_F(RequestTrace, MediansAreTakenPerStage) {
  std::vector<traced_request> rs;
  // Stage durations in ns: the medians of {1000, 3000, 2000} etc. are the middle values.
  rs.push_back(request(1, 5000, {0, 1000, 500, 100, 9000, 800, 7000, 200}));
  rs.push_back(request(2, 9000, {0, 3000, 700, 300, 9500, 900, 6000, 100}));
  rs.push_back(request(3, 20000, {0, 2000, 600, 200, 8000, 1000, 8000, 300}));
  const auto m = stage_medians(rs);
  EXPECT_DOUBLE_EQ(m[0], 0.0);
  EXPECT_DOUBLE_EQ(m[1], 2.0);
  EXPECT_DOUBLE_EQ(m[2], 0.6);
  EXPECT_DOUBLE_EQ(m[3], 0.2);
  EXPECT_DOUBLE_EQ(m[4], 9.0);
  EXPECT_DOUBLE_EQ(m[5], 0.9);
  EXPECT_DOUBLE_EQ(m[6], 7.0);
  EXPECT_DOUBLE_EQ(m[7], 0.2);
}

TEST_F(RequestTrace, AStagePassedEarlyCountsZeroAndTheNextCountsFromTheLatest) {
  // Agreed (stage 3) in a plan before its inputs (stage 2) were ready.
  auto r = request(1, 1000, {0, 100, 5000, 0, 2000, 100, 3000, 100});
  r.at_ns[3] = r.at_ns[1] + 50;  // agreed 50 ns after it was taken, long before its inputs
  const auto m = stage_medians({r});
  EXPECT_DOUBLE_EQ(m[3], 0.0);
  EXPECT_DOUBLE_EQ(m[4], 2.0);  // the call, from the inputs (the latest stage before it)
}

TEST_F(RequestTrace, WritesOneSpanPerStageAsChromeTraceJson) {
  auto& t = request_trace::get();
  t.enable(8);
  t.add(request(7, 1'000'000, {0, 1000, 2000, 3000, 4000, 5000, 6000, 7000}));
  const auto path = (std::filesystem::temp_directory_path() / "atomr_trace_test.rank3.json").string();
  ASSERT_TRUE(t.write_json(path, 3));
  std::ifstream in(path);
  const auto doc = nlohmann::json::parse(in);
  std::filesystem::remove(path);
  std::vector<nlohmann::json> spans;
  for (const auto& e : doc.at("traceEvents")) {
    if (e.at("ph") == "X") spans.push_back(e);
  }
  ASSERT_EQ(spans.size(), k_trace_stages - 1);
  EXPECT_EQ(spans[0].at("name"), "hand-off");
  EXPECT_EQ(spans[0].at("tid"), 11);  // the caller's thread
  EXPECT_EQ(spans[1].at("tid"), 22);  // then the issuing thread's
  EXPECT_EQ(spans[4].at("name"), "record event");
  EXPECT_EQ(spans[6].at("name"), "resolve future");
  for (std::size_t s = 0; s < spans.size(); ++s) {
    EXPECT_EQ(spans[s].at("pid"), 3);
    EXPECT_EQ(spans[s].at("args").at("seq"), 7);
    EXPECT_EQ(spans[s].at("args").at("bytes"), 56);
    EXPECT_EQ(spans[s].at("args").at("op"), "all_reduce");
    EXPECT_DOUBLE_EQ(spans[s].at("dur").get<double>(), static_cast<double>(s + 1));  // us
  }
  EXPECT_DOUBLE_EQ(spans[0].at("ts").get<double>(), 1000.0);  // us
}

TEST_F(RequestTrace, TheDeviceSpanSaysWhoLookedAndWhen) {
  auto& t = request_trace::get();
  t.enable(8);
  auto r = request(9, 1'000'000, {0, 1000, 2000, 3000, 4000, 5000, 6000, 7000});
  const auto done = r.at_ns[static_cast<std::size_t>(trace_stage::done)];
  r.done_thread = 33;
  r.looks = 4;
  r.last_look_ns = done - 40'000;  // nobody looked for 40 us before it was seen done
  r.done_look_ns = done - 2'000;
  r.voluntary_switches = 0;
  r.involuntary_switches = 1;
  r.graph = 2;
  t.add(r);
  t.add(request(10, 2'000'000, {0, 1000, 2000, 3000, 4000, 5000, 6000, 7000}));  // none of it
  const auto path = (std::filesystem::temp_directory_path() / "atomr_trace_look_test.rank0.json").string();
  ASSERT_TRUE(t.write_json(path, 0));
  std::ifstream in(path);
  const auto doc = nlohmann::json::parse(in);
  std::filesystem::remove(path);
  std::vector<nlohmann::json> device;
  for (const auto& e : doc.at("traceEvents")) {
    if (e.value("name", "") == "on the device") device.push_back(e);
  }
  ASSERT_EQ(device.size(), 2U);
  EXPECT_EQ(device[0].at("tid"), 33);  // the thread that saw it done, not the issuing one
  EXPECT_EQ(device[0].at("args").at("looks"), 4);
  EXPECT_DOUBLE_EQ(device[0].at("args").at("last_look_us_before").get<double>(), 40.0);
  EXPECT_DOUBLE_EQ(device[0].at("args").at("done_look_us_before").get<double>(), 2.0);
  EXPECT_EQ(device[0].at("args").at("involuntary_switches"), 1);
  EXPECT_EQ(device[0].at("args").at("graph"), "launch");
  EXPECT_EQ(device[1].at("tid"), 22);  // no done thread recorded: the issuing thread's
  EXPECT_EQ(device[1].at("args").at("looks"), 0);
  EXPECT_FALSE(device[1].at("args").contains("last_look_us_before"));
  EXPECT_FALSE(device[1].at("args").contains("graph"));
  EXPECT_FALSE(device[1].at("args").contains("voluntary_switches"));
}

TEST_F(RequestTrace, ABadRingSizeIsRefused) {
  ::setenv("ATOMR_TRACE", "/tmp/atomr_trace_unused", 1);
  ::setenv("ATOMR_TRACE_REQUESTS", "0", 1);
  const auto r = request_trace::enable_from_environment();
  ::unsetenv("ATOMR_TRACE");
  ::unsetenv("ATOMR_TRACE_REQUESTS");
  ASSERT_FALSE(r);
  EXPECT_NE(r.error_value().message().find("ATOMR_TRACE_REQUESTS"), std::string::npos);
  EXPECT_EQ(request_trace::path_for_rank(2), "");
}

}  // namespace
}  // namespace atomr::cluster
