// spin_mutex: mutual exclusion under contention (a plain counter and a two-field invariant
// updated by several threads), and try_lock's answers while held and after.
#include <gtest/gtest.h>

#include <atomic>
#include <mutex>
#include <thread>
#include <vector>

#include "atomr/common/spin_mutex.hpp"

namespace atomr {
namespace {

TEST(SpinMutex, TryLockFailsWhileHeldAndSucceedsAfter) {
  spin_mutex m;
  ASSERT_TRUE(m.try_lock());
  EXPECT_FALSE(m.try_lock());
  bool other = true;
  std::thread t([&] { other = m.try_lock(); });
  t.join();
  EXPECT_FALSE(other);
  m.unlock();
  EXPECT_TRUE(m.try_lock());
  m.unlock();
}

TEST(SpinMutex, ThreadsThatIncrementUnderItLoseNoUpdate) {
  // Two fields that must move together: a reader under the lock never sees them apart, and every
  // increment of every thread is counted (a lock that let two in at once loses some).
  spin_mutex m;
  volatile std::uint64_t a = 0;
  volatile std::uint64_t b = 0;
  std::uint64_t torn = 0;
  constexpr int k_threads = 4;
  constexpr int k_each = 200'000;
  // (All start together, so that they contend: one that ran alone would prove nothing.)
  std::atomic<int> started{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < k_threads; ++t) {
    threads.emplace_back([&] {
      started.fetch_add(1);
      while (started.load() < k_threads) std::this_thread::yield();
      for (int i = 0; i < k_each; ++i) {
        std::lock_guard lock(m);
        // (Read, then write back a few loads later through volatile accesses: a second thread
        // inside at the same time would overwrite the first one's update.)
        const std::uint64_t was = a;
        if (was != b) ++torn;
        std::uint64_t reads = 0;
        for (int k = 0; k < 8; ++k) reads += b;
        a = was + 1 + (reads & 0U);
        b = b + 1;
      }
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(a, std::uint64_t{k_threads} * k_each);
  EXPECT_EQ(b, std::uint64_t{k_threads} * k_each);
  EXPECT_EQ(torn, 0u);
}

}  // namespace
}  // namespace atomr
