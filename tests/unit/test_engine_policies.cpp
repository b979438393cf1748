// The world engine's decisions that every rank must make alike, as the small types that make them,
// without a world: when a small all_reduce packs or waits for company (pack_policy), when lone plan
// exchanges open a latency window (latency_window), and when a request shape skips its CUDA graph
// votes (graph_pacer).
#include <gtest/gtest.h>

#include <cstdint>

#include "atomr/cluster/engine/graph_pacer.hpp"
#include "atomr/cluster/engine/latency_window.hpp"
#include "atomr/cluster/engine/pack_policy.hpp"

namespace atomr::cluster::detail {
namespace {

// --- pack_policy -------------------------------------------------------------------------------

TEST(PackPolicy, OnlySmallAllReducesOfOneMemberPack) {
  EXPECT_TRUE(pack_policy::packs(coll_kind::all_reduce, 8, 64 << 10, 1));
  EXPECT_TRUE(pack_policy::packs(coll_kind::all_reduce, 64 << 10, 64 << 10, 1));  // the limit itself packs
  EXPECT_FALSE(pack_policy::packs(coll_kind::all_reduce, (64 << 10) + 1, 64 << 10, 1));
  EXPECT_FALSE(pack_policy::packs(coll_kind::all_reduce, 8, 0, 1));  // a limit of 0 turns packing off
  EXPECT_FALSE(pack_policy::packs(coll_kind::all_reduce, 8, 64 << 10, 2));
  for (auto k : {coll_kind::broadcast, coll_kind::reduce, coll_kind::all_gather, coll_kind::reduce_scatter,
                 coll_kind::all_to_all, coll_kind::send, coll_kind::recv, coll_kind::barrier}) {
    EXPECT_FALSE(pack_policy::packs(k, 8, 64 << 10, 1)) << static_cast<int>(k);
  }
}

pack_policy::head_state deep_alone() {
  return {.in_flight = pack_policy::k_window_depth,
          .planned_whole = false,
          .together = 0,
          .queued_call_end = 0,
          .queued = 1,
          .part = 64};
}

TEST(PackPolicy, AHeadWaitsOnlyBehindADeepPipelineAndWhileNothingCutsItsBatch) {
  int cut_asked = 0;
  const auto not_cut = [&] {
    ++cut_asked;
    return false;
  };
  const auto cut = [] { return true; };
  EXPECT_TRUE(pack_policy::holds(deep_alone(), not_cut));
  EXPECT_FALSE(pack_policy::holds(deep_alone(), cut));
  EXPECT_EQ(cut_asked, 1);

  auto shallow = deep_alone();
  shallow.in_flight = pack_policy::k_window_depth - 1;
  EXPECT_FALSE(pack_policy::holds(shallow, not_cut));
  auto planned = deep_alone();
  planned.planned_whole = true;
  EXPECT_FALSE(pack_policy::holds(planned, not_cut));
  EXPECT_EQ(cut_asked, 1) << "the cut (a lock per buffer) is looked at last";
}

TEST(PackPolicy, AGroupsHeadGoesAtOnceWhenNothingMoreOfItCanCome) {
  const auto not_cut = [] { return false; };
  auto h = deep_alone();
  h.together = 7;
  h.queued_call_end = 6;
  h.queued = 10;
  EXPECT_TRUE(pack_policy::holds(h, not_cut));  // more of group 7 is on its way
  h.queued_call_end = 7;                        // group 7's last request is queued
  EXPECT_FALSE(pack_policy::holds(h, not_cut));
  h.queued_call_end = 6;
  h.queued = h.part;  // a whole part of it is queued
  EXPECT_FALSE(pack_policy::holds(h, not_cut));
}

TEST(PackPolicy, TheExchangeIsSkippedOnlyWhereEveryRankDecidesAlike) {
  int shape_asked = 0;
  const auto voting = [&] {
    ++shape_asked;
    return true;
  };
  const auto not_voting = [] { return false; };
  EXPECT_TRUE(pack_policy::may_skip_exchange(false, 2, 0, not_voting));
  EXPECT_FALSE(pack_policy::may_skip_exchange(true, 2, 0, voting));   // check mode compares every request
  EXPECT_FALSE(pack_policy::may_skip_exchange(false, 1, 0, voting));  // alone: no exchange to skip
  EXPECT_EQ(shape_asked, 0);
  EXPECT_FALSE(pack_policy::may_skip_exchange(false, 4, 3, not_voting));  // a group packs instead
  EXPECT_TRUE(pack_policy::may_skip_exchange(false, 4, 3, voting));       // unless it goes to a graph vote
  EXPECT_EQ(shape_asked, 1);

  EXPECT_TRUE(pack_policy::issues_at_once(false, 1, 1));
  EXPECT_FALSE(pack_policy::issues_at_once(false, 1, 2));
  EXPECT_FALSE(pack_policy::issues_at_once(false, 2, 1));
  EXPECT_FALSE(pack_policy::issues_at_once(true, 1, 1));
}

// --- latency_window ----------------------------------------------------------------------------

constexpr auto k_lag = latency_window::k_lag;
constexpr auto k_length = latency_window::k_length;

TEST(LatencyWindow, ARunOfLoneExchangesOpensAWindowThatStartsTwoRequestsLater) {
  static_assert(latency_window::k_lone_run == 3);
  latency_window w;
  w.note_lone(10);
  w.note_lone(11);
  EXPECT_FALSE(w.covers(13)) << "two lone exchanges open nothing";
  w.note_lone(12);
  EXPECT_FALSE(w.covers(12 + k_lag - 1));
  EXPECT_TRUE(w.covers(12 + k_lag));
  EXPECT_TRUE(w.covers(12 + k_lag + k_length - 1));
  EXPECT_FALSE(w.covers(12 + k_lag + k_length));
}

TEST(LatencyWindow, AGapBreaksTheRun) {
  latency_window w;
  w.note_lone(10);
  w.note_lone(12);
  w.note_lone(13);
  for (std::uint64_t s = 10; s < 100; ++s) EXPECT_FALSE(w.covers(s)) << s;
  w.note_lone(14);  // 12, 13, 14: a run of three
  EXPECT_TRUE(w.covers(14 + k_lag));
}

TEST(LatencyWindow, ALoneExchangeWhereAWindowEndsKeepsItOpen) {
  latency_window w;
  for (std::uint64_t s : {1, 2, 3}) w.note_lone(s);
  const std::uint64_t end = 3 + k_lag + k_length;
  w.note_lone(end);  // one, not three: right where the window ended
  EXPECT_TRUE(w.covers(end + k_lag));
  EXPECT_FALSE(w.covers(end + 1)) << "a new window starts k_lag after its head, as every window does";
  EXPECT_TRUE(w.covers(end - 1)) << "the first window still covers its last request";
}

TEST(LatencyWindow, ClosedAndForgottenWindowsCoverNothing) {
  latency_window w;
  for (std::uint64_t s : {1, 2, 3}) w.note_lone(s);
  ASSERT_TRUE(w.covers(5));
  w.close_before(3);
  EXPECT_TRUE(w.covers(5)) << "closing before a window's head leaves it";
  w.close_before(4);
  EXPECT_FALSE(w.covers(5));

  latency_window v;
  for (std::uint64_t s : {1, 2, 3}) v.note_lone(s);
  v.forget_before(3 + k_lag + k_length - 1);
  EXPECT_TRUE(v.covers(3 + k_lag + k_length - 1));
  v.forget_before(3 + k_lag + k_length);
  EXPECT_FALSE(v.covers(3 + k_lag + k_length - 1));

  latency_window r;
  for (std::uint64_t s : {1, 2, 3}) r.note_lone(s);
  r.reset();
  EXPECT_FALSE(r.covers(5));
  r.note_lone(4);  // the run starts over
  EXPECT_FALSE(r.covers(6));
}

// --- graph_pacer -------------------------------------------------------------------------------

coll_spec spec(coll_kind k, int root = 0) { return coll_spec{k, local::dtype::f32, {reduce_op::sum, root, 0}, {}, {}}; }

TEST(GraphPacer, ShapesDifferByKindRootCountAndPacking) {
  const auto a = graph_pacer::of(spec(coll_kind::all_reduce), 2);
  EXPECT_EQ(a, graph_pacer::of(spec(coll_kind::all_reduce), 2));
  EXPECT_NE(a, graph_pacer::of(spec(coll_kind::all_reduce), 3));
  EXPECT_NE(a, graph_pacer::of(spec(coll_kind::broadcast), 2));
  EXPECT_NE(graph_pacer::of(spec(coll_kind::broadcast, 0), 2), graph_pacer::of(spec(coll_kind::broadcast, 1), 2));
  EXPECT_NE(graph_pacer::of_pack(a, 1), a);
  EXPECT_NE(graph_pacer::of_pack(a, 1), graph_pacer::of_pack(a, 2));
}

// Cold votes on `s` until the pacer starts skipping; returns how many votes it then skips.
std::uint32_t skipped_after_cold_run(graph_pacer& p, const graph_pacer::shape& s) {
  for (std::uint32_t i = 0; i < graph_pacer::k_cold; ++i) {
    EXPECT_FALSE(p.skips(s));
    p.note(s, false);
  }
  std::uint32_t n = 0;
  while (p.skips(s)) ++n;
  return n;
}

TEST(GraphPacer, ColdVotesBackOffDoublingUpToTheMostAndALaunchResetsIt) {
  graph_pacer p;
  const auto s = graph_pacer::of(spec(coll_kind::all_reduce), 2);
  EXPECT_EQ(skipped_after_cold_run(p, s), graph_pacer::k_backoff_first);
  EXPECT_EQ(skipped_after_cold_run(p, s), 2 * graph_pacer::k_backoff_first);
  std::uint32_t last = 0;
  for (int i = 0; i < 12; ++i) last = skipped_after_cold_run(p, s);
  EXPECT_EQ(last, graph_pacer::k_backoff_most);

  // A launch: the cold run starts over, and so does the backoff.
  for (std::uint32_t i = 0; i + 1 < graph_pacer::k_cold; ++i) p.note(s, false);
  p.note(s, true);
  EXPECT_FALSE(p.skips(s));
  EXPECT_EQ(skipped_after_cold_run(p, s), graph_pacer::k_backoff_first);

  // Another shape keeps its own pace.
  EXPECT_FALSE(p.skips(graph_pacer::of(spec(coll_kind::all_reduce), 4)));
}

TEST(GraphPacer, TooManyShapesStartEveryPaceOver) {
  graph_pacer p;
  const auto cold = graph_pacer::of(spec(coll_kind::all_reduce), 1);
  for (std::uint32_t i = 0; i < graph_pacer::k_cold; ++i) p.note(cold, false);
  for (std::size_t n = 2; p.shapes() < graph_pacer::k_shapes_most; ++n)
    p.note(graph_pacer::of(spec(coll_kind::all_reduce), n), true);
  ASSERT_EQ(p.shapes(), graph_pacer::k_shapes_most);
  p.note(graph_pacer::of(spec(coll_kind::broadcast), 1), true);  // one more: all start over
  EXPECT_EQ(p.shapes(), 1U);
  EXPECT_FALSE(p.skips(cold));
}

}  // namespace
}  // namespace atomr::cluster::detail
