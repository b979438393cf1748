// recycled_storage: blocks freed on one thread come back to another that takes them, through the
// shared pool (what the world's requests do: callers make them, the progress thread frees them);
// and recycling_allocator's shared states hold their values. (Recycling is off under the
// sanitizers, where the tests that need it skip, saying so.)
#include <gtest/gtest.h>

#include <cstring>
#include <memory>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "atomr/common/recycled_storage.hpp"

namespace atomr {
namespace {

// Sizes of their own (a pool each): no other code or test shares these pools.
using storage = recycled_storage<328>;
using storage_b = recycled_storage<344>;

TEST(RecycledStorage, BlocksFreedOnAnotherThreadAreTakenAgain) {
  if (!storage::k_on) GTEST_SKIP() << "recycling is off in sanitizer builds";
  constexpr std::size_t k = 1000;
  std::vector<void*> first;
  for (std::size_t i = 0; i < k; ++i) {
    first.push_back(storage::take());
    std::memset(first.back(), 0xab, 328);  // usable, all of it
  }
  // Given back on a thread that then ends: its cache goes to the pool with it.
  std::thread([&] {
    for (void* b : first) storage::give(b);
  }).join();
  EXPECT_EQ(storage::pooled(), k);
  const std::set<void*> freed(first.begin(), first.end());
  std::vector<void*> second;
  std::size_t reused = 0;
  for (std::size_t i = 0; i < k; ++i) {
    second.push_back(storage::take());
    reused += freed.count(second.back());
  }
  EXPECT_EQ(reused, k);
  EXPECT_EQ(std::set<void*>(second.begin(), second.end()).size(), k);  // none handed out twice
  for (void* b : second) storage::give(b);
}

TEST(RecycledStorage, AThreadKeepsABoundedCacheAndSpillsTheRest) {
  if (!storage_b::k_on) GTEST_SKIP() << "recycling is off in sanitizer builds";
  constexpr std::size_t k = 2000;
  // On a fresh thread (an empty cache): of what it gives back, all but its cache's bound go to
  // the pool, whatever the pool held before.
  std::size_t pooled = 0;
  std::thread([&] {
    std::vector<void*> blocks;
    for (std::size_t i = 0; i < k; ++i) blocks.push_back(storage_b::take());
    for (void* b : blocks) storage_b::give(b);
    pooled = storage_b::pooled();
  }).join();
  EXPECT_GE(pooled, k - (storage_b::k_thread_most + storage_b::k_batch));
  EXPECT_LE(storage_b::pooled(), storage_b::k_pool_most);
}

TEST(RecyclingAllocator, SharedStatesHoldTheirValuesAcrossReuse) {
  for (int round = 0; round < 3; ++round) {
    std::vector<std::shared_ptr<std::string>> states;
    for (int i = 0; i < 500; ++i) {
      states.push_back(std::allocate_shared<std::string>(recycling_allocator<std::string>{},
                                                         "state " + std::to_string(round * 1000 + i)));
    }
    std::thread([moved = std::move(states), round]() mutable {
      for (int i = 0; i < 500; ++i) {
        ASSERT_EQ(*moved[static_cast<std::size_t>(i)], "state " + std::to_string(round * 1000 + i));
      }
      moved.clear();  // freed here, taken again on the test's thread next round
    }).join();
  }
}

}  // namespace
}  // namespace atomr
