// The stall watch: it runs its action once when an armed call passes its deadline, and never for
// a call that returned (was disarmed) in time.
#include <gtest/gtest.h>

#include <condition_variable>
#include <mutex>
#include <thread>

#include "atomr/cluster/liveness/stall_watch.hpp"

namespace atomr::cluster::detail {
namespace {

using namespace std::chrono_literals;
using clock = stall_watch::clock;

struct counter {
  std::mutex mutex;
  std::condition_variable changed;
  int calls = 0;
  void bump() {
    {
      std::lock_guard lock(mutex);
      ++calls;
    }
    changed.notify_all();
  }
  bool wait_for_calls(int n, std::chrono::milliseconds limit) {
    std::unique_lock lock(mutex);
    return changed.wait_for(lock, limit, [&] { return calls >= n; });
  }
};

// Waits until the watch thread has looked `n` more times (it looks every 10 ms).
void wait_for_looks(const stall_watch& w, std::uint64_t n) {
  const auto target = w.looks() + n;
  const auto until = clock::now() + 5s;
  while (w.looks() < target && clock::now() < until) std::this_thread::yield();
  ASSERT_GE(w.looks(), target) << "the watch thread stopped looking";
}

TEST(StallWatch, ACallPastItsDeadlineIsAbortedOnce) {
  counter aborted;
  stall_watch w([&] { aborted.bump(); }, 60s);
  stall_watch::scope guard(w, clock::now() + 20ms, "a test call");
  ASSERT_TRUE(aborted.wait_for_calls(1, 5s)) << "the watch did not fire within 5 s of a 20 ms deadline";
  EXPECT_TRUE(w.fired());
  wait_for_looks(w, 3);  // still armed and past the deadline: it must not fire again
  std::lock_guard lock(aborted.mutex);
  EXPECT_EQ(aborted.calls, 1);
}

TEST(StallWatch, ACallThatReturnedInTimeIsLeftAlone) {
  counter aborted;
  stall_watch w([&] { aborted.bump(); }, 60s);
  { stall_watch::scope guard(w, clock::now() + 10ms, "a quick call"); }
  // Long past that deadline, looked at again and again: nothing armed, nothing fired.
  std::this_thread::yield();
  const auto past = clock::now() + 30ms;
  while (clock::now() < past) wait_for_looks(w, 1);
  EXPECT_FALSE(w.fired());
  std::lock_guard lock(aborted.mutex);
  EXPECT_EQ(aborted.calls, 0);
}

TEST(StallWatch, ItCanBeArmedAgainForTheNextCall) {
  counter aborted;
  stall_watch w([&] { aborted.bump(); }, 60s);
  for (int i = 0; i < 3; ++i) {
    stall_watch::scope guard(w, clock::now() + 1h, "a call with time to spare");
  }
  wait_for_looks(w, 2);
  EXPECT_FALSE(w.fired());
  stall_watch::scope guard(w, clock::now() - 1ms, "a call already late");
  ASSERT_TRUE(aborted.wait_for_calls(1, 5s));
}

}  // namespace
}  // namespace atomr::cluster::detail
