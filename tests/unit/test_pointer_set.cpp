// pointer_set against std::unordered_set on seeded random addresses, through inserts, clears,
// resets and growth.
#include <gtest/gtest.h>

#include <random>
#include <unordered_set>
#include <vector>

#include "atomr/common/pointer_set.hpp"

namespace atomr {
namespace {

const void* address(std::uint64_t v) { return reinterpret_cast<const void*>(static_cast<std::uintptr_t>(v)); }

TEST(PointerSet, AgreesWithUnorderedSetThroughClearsAndGrowth) {
  std::mt19937_64 rng(20261123);
  pointer_set set;
  std::unordered_set<const void*> reference;
  set.reset(8);  // small on purpose: the rounds below grow it
  for (int round = 0; round < 50; ++round) {
    const int n = static_cast<int>(rng() % 700);
    for (int i = 0; i < n; ++i) {
      // Aligned like allocations, from a narrow range so that some repeat.
      const auto* p = address(0x7f0000000000ULL + (rng() % 4096) * 64);
      EXPECT_EQ(set.insert(p), reference.insert(p).second);
    }
    EXPECT_EQ(set.size(), reference.size());
    for (int i = 0; i < 2000; ++i) {
      const auto* p = address(0x7f0000000000ULL + (rng() % 4096) * 64);
      ASSERT_EQ(set.contains(p), reference.count(p) == 1) << "round " << round;
    }
    if (round % 3 == 0) {
      set.reset(static_cast<std::size_t>(rng() % 100));
    } else {
      set.clear();
    }
    reference.clear();
    EXPECT_EQ(set.size(), 0u);
    EXPECT_FALSE(set.contains(address(0x7f0000000000ULL)));
  }
}

TEST(PointerSet, EmptySetHoldsNothingAndInsertTellsDuplicates) {
  pointer_set set;
  int a = 0;
  int b = 0;
  EXPECT_FALSE(set.contains(&a));
  EXPECT_TRUE(set.insert(&a));
  EXPECT_FALSE(set.insert(&a));
  EXPECT_TRUE(set.contains(&a));
  EXPECT_FALSE(set.contains(&b));
  EXPECT_FALSE(set.contains(nullptr));
  set.clear();
  EXPECT_FALSE(set.contains(&a));
  EXPECT_TRUE(set.insert(&a));
}

}  // namespace
}  // namespace atomr
