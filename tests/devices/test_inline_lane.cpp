// The device's inline lane (device.hpp, device_lane): an operation that would be the device's
// next anyway runs on its sender's thread; each sender's order holds whichever way its
// operations go; a reply's continuation that sends to the device goes by mail (no deadlock).
#include <gtest/gtest.h>

#include <atomic>
#include <cstdlib>
#include <string_view>
#include <thread>
#include <vector>

#include "atomr/local/device/device.hpp"

namespace atomr::local {
namespace {

using namespace std::chrono_literals;

class InlineLane : public ::testing::Test {
 protected:
  actor_system sys_;
  device dev_ = device::start(sys_, 0, device_kind::host).value();
};

TEST_F(InlineLane, AnIdleDeviceRunsTheOperationOnTheSendersThread) {
  // Allocation goes by mail; once the device thread has let the lane go, a run is inline. (It may
  // still hold the lane for a moment after the reply: a busy lane sends the run by mail, which is
  // why this tries more than once.)
  auto buf = dev_.allocate<std::uint8_t>(16).get().value();
  int by_mail = 0;
  for (; by_mail < 1000; ++by_mail) {
    std::thread::id ran_on;
    ASSERT_TRUE(dev_.run(
                        [&](const stream_context&) -> result<void> {
                          ran_on = std::this_thread::get_id();
                          return ok();
                        },
                        {buf.block()})
                    .get());
    if (ran_on == std::this_thread::get_id()) break;
  }
  EXPECT_LT(by_mail, 1000) << "no run took the lane";
}

// Four senders, each a sequence of runs with an allocation (always by mail) every 16th: a run
// sent while that allocation is unanswered must go by mail behind it, and one sent after may go
// inline; either way each sender's runs execute in the order sent, exactly once.
TEST_F(InlineLane, EachSendersOrderHoldsAcrossTheLaneAndTheMail) {
  constexpr int k_senders = 4;
  constexpr int k_runs = 2000;
  std::vector<std::vector<int>> seen(k_senders);  // appended to by the work, which the lane serializes
  std::atomic<int> on_sender{0};
  std::vector<std::thread> senders;
  for (int s = 0; s < k_senders; ++s) {
    senders.emplace_back([&, s] {
      std::vector<future<void>> runs;
      std::vector<future<gpu_ref<float>>> allocations;
      const auto me = std::this_thread::get_id();
      for (int i = 0; i < k_runs; ++i) {
        if (i % 16 == 0) allocations.push_back(dev_.allocate<float>(4));
        runs.push_back(dev_.run([&seen, &on_sender, s, i, me](const stream_context&) -> result<void> {
          seen[static_cast<std::size_t>(s)].push_back(i);
          if (std::this_thread::get_id() == me) ++on_sender;
          return ok();
        }));
      }
      for (auto& r : runs) EXPECT_TRUE(r.get());
      for (auto& a : allocations) EXPECT_TRUE(a.get());
    });
  }
  for (auto& t : senders) t.join();
  for (int s = 0; s < k_senders; ++s) {
    const auto& v = seen[static_cast<std::size_t>(s)];
    ASSERT_EQ(v.size(), static_cast<std::size_t>(k_runs)) << "sender " << s;
    for (int i = 0; i < k_runs; ++i) ASSERT_EQ(v[static_cast<std::size_t>(i)], i) << "sender " << s;
  }
  // (How many ran on their sender's thread depends on timing; the first test shows the lane.)
  RecordProperty("runs_on_their_sender", on_sender.load());
}

// A reply answered while the lane is held (an allocation, answered by the device thread) runs
// its continuation there; an operation sent from it must go by mail, not into the held lane.
TEST_F(InlineLane, AContinuationThatSendsToTheDeviceGoesByMail) {
  constexpr int k_rounds = 200;
  auto buf = dev_.allocate<std::uint32_t>(8).get().value();
  std::atomic<int> filled{0};
  std::atomic<int> answered{0};
  promise<void> all_done;
  auto done = all_done.get_future();
  for (int i = 0; i < k_rounds; ++i) {
    dev_.allocate<float>(4).then([&](const result<gpu_ref<float>>& a) {
      EXPECT_TRUE(a);
      dev_.fill_bytes(buf, 0xcd).then([&](const result<void>& r) {
        if (r) ++filled;
        if (++answered == k_rounds) all_done.set_value();
      });
    });
  }
  ASSERT_TRUE(done.wait_for(20s)) << answered.load() << " of " << k_rounds << " fills answered";
  EXPECT_EQ(filled.load(), k_rounds);
  std::vector<std::uint32_t> out(8);
  ASSERT_TRUE(dev_.download<std::uint32_t>(buf, out).get());
  for (const auto x : out) EXPECT_EQ(x, 0xcdcdcdcdu);
}

}  // namespace
}  // namespace atomr::local
