// The submit_group call cache's keys and bookkeeping (src/cluster/group_cache.hpp), without a
// world: specs over bare buffer blocks, and group_calls that hold nothing.
#include <gtest/gtest.h>

#include <functional>
#include <memory>
#include <vector>

#include "atomr/cluster/engine/group_cache.hpp"

namespace atomr::cluster::detail {
namespace {

using blocks = std::vector<std::shared_ptr<local::buffer_block>>;

blocks some_blocks(int n) {
  blocks out;
  for (int i = 0; i < n; ++i) out.push_back(std::make_shared<local::buffer_block>());
  return out;
}

std::vector<coll_spec> sums(const blocks& bs) {
  std::vector<coll_spec> specs;
  for (const auto& b : bs) specs.push_back({coll_kind::all_reduce, local::dtype::f32, {}, {b}, {b}});
  return specs;
}

const auto t0 = group_cache::clock::time_point{} + std::chrono::hours(1);

TEST(GroupKey, MatchesTheSpecsItWasMadeOfAndNoOthers) {
  const auto bs = some_blocks(5);
  const auto key = key_of(sums(bs));
  EXPECT_TRUE(matches(sums(bs), key));
  // Every part of a spec counts: its buffers, their order, kind, type, reduction, root, count.
  auto other_buffer = sums(bs);
  other_buffer[3].recv[0] = std::make_shared<local::buffer_block>();
  EXPECT_FALSE(matches(other_buffer, key));
  auto reversed = bs;
  std::swap(reversed[0], reversed[1]);
  EXPECT_FALSE(matches(sums(reversed), key));
  std::vector<std::function<void(coll_spec&)>> changes{
      [](coll_spec& s) { s.kind = coll_kind::reduce; },   [](coll_spec& s) { s.type = local::dtype::i32; },
      [](coll_spec& s) { s.params.op = reduce_op::max; }, [](coll_spec& s) { s.params.root = 1; },
      [](coll_spec& s) { s.params.count = 2; },           [](coll_spec& s) { s.send.clear(); },
      [&](coll_spec& s) { s.recv.push_back(bs[0]); },
  };
  for (std::size_t c = 0; c < changes.size(); ++c) {
    auto specs = sums(bs);
    changes[c](specs[2]);
    EXPECT_FALSE(matches(specs, key)) << "change " << c;
    EXPECT_TRUE(matches(specs, key_of(specs))) << "change " << c;
  }
  // A call that is the key's first part, or goes on past it, does not match.
  EXPECT_FALSE(matches(sums(blocks(bs.begin(), bs.end() - 1)), key));
  auto longer = bs;
  longer.push_back(bs[0]);
  EXPECT_FALSE(matches(sums(longer), key));
}

std::vector<const local::buffer_block*> raw(const blocks& bs) {
  std::vector<const local::buffer_block*> out;
  for (const auto& b : bs) out.push_back(b.get());
  return out;
}

TEST(GroupKey, InPlaceSumsOfBuffersMatchTheKeyOfTheirSpecsOnly) {
  const auto bs = some_blocks(4);
  const auto key = key_of(sums(bs));
  EXPECT_TRUE(matches_in_place(local::dtype::f32, reduce_op::sum, raw(bs), key));
  EXPECT_FALSE(matches_in_place(local::dtype::f32, reduce_op::max, raw(bs), key));
  EXPECT_FALSE(matches_in_place(local::dtype::i32, reduce_op::sum, raw(bs), key));
  auto reversed = raw(bs);
  std::swap(reversed[0], reversed[3]);
  EXPECT_FALSE(matches_in_place(local::dtype::f32, reduce_op::sum, reversed, key));
  const auto all = raw(bs);
  EXPECT_FALSE(matches_in_place(local::dtype::f32, reduce_op::sum, std::span(all).first(3), key));
  // Out of place, or with a count given, the specs are another call's.
  auto out_of_place = sums(bs);
  out_of_place[1].recv[0] = std::make_shared<local::buffer_block>();
  EXPECT_FALSE(matches_in_place(local::dtype::f32, reduce_op::sum, raw(bs), key_of(out_of_place)));
  auto counted = sums(bs);
  counted[2].params.count = 1;
  EXPECT_FALSE(matches_in_place(local::dtype::f32, reduce_op::sum, raw(bs), key_of(counted)));
  group_cache cache;
  auto call = std::make_shared<group_call>();
  cache.keep(key, call, t0);
  EXPECT_EQ(cache.find_in_place(local::dtype::f32, reduce_op::sum, raw(bs), t0), call);
  EXPECT_EQ(cache.find_in_place(local::dtype::f32, reduce_op::min, raw(bs), t0), nullptr);
}

TEST(GroupCache, ACallSeenTwiceIsKeptFoundAndLetGoOnceUnsubmitted) {
  group_cache cache;
  const auto bs = some_blocks(3);
  const auto other = some_blocks(3);
  EXPECT_EQ(cache.find(sums(bs), t0), nullptr);
  EXPECT_FALSE(cache.repeated(sums(bs)));     // seen once: remembered
  EXPECT_FALSE(cache.repeated(sums(other)));  // another call
  auto key = cache.repeated(sums(bs));        // seen again
  ASSERT_TRUE(key);
  EXPECT_TRUE(matches(sums(bs), *key));
  auto call = std::make_shared<group_call>();
  cache.keep(std::move(*key), call, t0);
  EXPECT_EQ(cache.kept(), 1u);
  EXPECT_EQ(cache.find(sums(bs), t0 + std::chrono::milliseconds(500)), call);
  EXPECT_EQ(cache.find(sums(other), t0 + std::chrono::milliseconds(500)), nullptr);
  // Found at 0.5 s: kept until 1.5 s.
  EXPECT_EQ(cache.expire(t0 + std::chrono::milliseconds(1400)), 0u);
  EXPECT_EQ(cache.kept(), 1u);
  EXPECT_EQ(cache.expire(t0 + std::chrono::milliseconds(1500)), 1u);
  EXPECT_EQ(cache.kept(), 0u);
  EXPECT_EQ(call.use_count(), 1) << "the cache let go of the call";
  EXPECT_EQ(cache.find(sums(bs), t0 + std::chrono::seconds(2)), nullptr);
}

TEST(GroupCache, KeepsAtMostFourCallsAndDropsTheLeastRecentlyUsed) {
  group_cache cache;
  std::vector<blocks> calls;
  std::vector<std::shared_ptr<group_call>> kept;
  for (int c = 0; c < 5; ++c) {
    calls.push_back(some_blocks(2));
    kept.push_back(std::make_shared<group_call>());
  }
  for (int c = 0; c < 4; ++c) cache.keep(key_of(sums(calls[c])), kept[c], t0 + std::chrono::milliseconds(c));
  ASSERT_EQ(cache.kept(), 4u);
  EXPECT_EQ(cache.find(sums(calls[0]), t0 + std::chrono::milliseconds(10)), kept[0]);  // call 1 is now the oldest
  cache.keep(key_of(sums(calls[4])), kept[4], t0 + std::chrono::milliseconds(11));
  EXPECT_EQ(cache.kept(), 4u);
  EXPECT_EQ(cache.find(sums(calls[1]), t0 + std::chrono::milliseconds(12)), nullptr);
  EXPECT_EQ(kept[1].use_count(), 1);
  for (int c : {0, 2, 3, 4}) EXPECT_NE(cache.find(sums(calls[c]), t0 + std::chrono::milliseconds(12)), nullptr) << c;
  cache.forget(kept[3].get());
  EXPECT_EQ(cache.kept(), 3u);
  EXPECT_EQ(cache.find(sums(calls[3]), t0 + std::chrono::milliseconds(13)), nullptr);
}

TEST(GroupCache, RemembersTheLastFourCallsSeenOnce) {
  group_cache cache;
  std::vector<blocks> calls;
  for (int c = 0; c < 5; ++c) calls.push_back(some_blocks(2));
  for (int c = 0; c < 5; ++c) EXPECT_FALSE(cache.repeated(sums(calls[c]))) << c;
  // The first was forgotten when the fifth came; the fifth is remembered.
  EXPECT_FALSE(cache.repeated(sums(calls[0])));
  EXPECT_TRUE(cache.repeated(sums(calls[4])));
  // A repeat is taken off the list: a third sighting is a first again.
  EXPECT_FALSE(cache.repeated(sums(calls[4])));
  // A call longer than k_specs_most is never remembered, so never repeated; one of exactly that
  // many is.
  const auto many = some_blocks(static_cast<int>(group_cache::k_specs_most) + 1);
  EXPECT_FALSE(cache.repeated(sums(many)));
  EXPECT_FALSE(cache.repeated(sums(many)));
  const blocks most(many.begin(), many.end() - 1);
  EXPECT_FALSE(cache.repeated(sums(most)));
  EXPECT_TRUE(cache.repeated(sums(most)));
}

}  // namespace
}  // namespace atomr::cluster::detail
