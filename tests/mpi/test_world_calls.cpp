// Calls of many collectives, on the host backend (and, as gpu_world_calls_test, on each rank's GPU
// with NCCL): per-request groups planned whole, submit_group calls and their bulk calls, prepared
// calls, kept calls (world_options::group_cache) and submit_group(buffers), with exact expected values.
// (Split from test_world_collectives.cpp: each program's run stays well inside a minute on the GPU
// machine, where every test makes a world of its own.)
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <thread>

#include "world_fixture.hpp"

namespace atomr {
namespace {

using cluster::coll_kind;
using cluster::reduce_op;

class Collectives : public testing::world_fixture {};

TEST_F(Collectives, LongSubmitAllCallsArePlannedWholeAndHandedOverInParts) {
  // 1000 independent small all_reduces in one call: the caller plans them whole (a batch per
  // ATOMR_COLL_CALL_BATCH requests, 256) and offers that plan with the first part, so the ranks
  // agree once; the progress thread issues each batch as its parts come while the call makes the
  // rest.
  auto w = make_world();
  ASSERT_TRUE(w);
  constexpr int k = 1000;
  const auto bufs = counting_buffers(k, 8);
  auto specs = sums_in_place(bufs);
  auto done = w->submit_group(std::move(specs), cluster::each_request);
  ASSERT_EQ(done.size(), static_cast<std::size_t>(k));
  for (auto& f : done) ASSERT_TRUE(f.get());
  for (int i = 0; i < k; ++i) {
    ASSERT_EQ(read(bufs[static_cast<std::size_t>(i)]), std::vector<float>(8, summed(i, 1))) << "buffer " << i;
  }
  const auto s = w->stats();
  EXPECT_EQ(s.requests, static_cast<std::uint64_t>(k));
  EXPECT_EQ(s.packed, static_cast<std::uint64_t>(k));
  EXPECT_EQ(s.agreements, 1u);
  const std::size_t batch = w->options().call_batch;
  EXPECT_EQ(s.issues, (k + batch - 1) / batch);
}

TEST_F(Collectives, ASubmitGroupCallHasOneFutureThatEndsWithItsLastRequest) {
  // 1000 small all_reduces in one submit_group call, with one future, done once every request
  // is (the engine counts a request complete before the mark that ends the call's future). As
  // bulk calls (the default): four of 256 at most, agreed on in one exchange (their run) and each
  // issued as one packed batch; alone, a rank takes each bulk call's own cuts. Without them:
  // planned and packed as the per-request submit_group's, in one agreement.
  for (const bool bulk : {true, false}) {
    SCOPED_TRACE(bulk ? "bulk calls" : "one request each");
    cluster::world_options o;
    o.bulk = bulk;
    auto w = make_world(o);
    ASSERT_TRUE(w);
    constexpr int k = 1000;
    const auto bufs = counting_buffers(k, 8);
    auto specs = sums_in_place(bufs);
    auto done = w->submit_group(std::move(specs));
    ASSERT_TRUE(done.get());
    const auto s = w->stats();
    EXPECT_EQ(s.requests, static_cast<std::uint64_t>(k));
    EXPECT_EQ(s.packed, static_cast<std::uint64_t>(k));
    EXPECT_EQ(s.agreements, bulk && size_ == 1 ? 4u : 1u);
    EXPECT_EQ(s.issues, 4u);  // (batches of 256 either way)
    for (int i = 0; i < k; ++i) {
      ASSERT_EQ(read(bufs[static_cast<std::size_t>(i)]), std::vector<float>(8, summed(i, 1))) << "buffer " << i;
    }
    // Again, on the same buffers: the second call's sums wait for the first's.
    auto again = sums_in_place(bufs);
    ASSERT_TRUE(w->submit_group(std::move(again)).get());
    for (int i = 0; i < k; ++i) {
      ASSERT_EQ(read(bufs[static_cast<std::size_t>(i)]), std::vector<float>(8, summed(i, 2))) << "buffer " << i;
    }
  }
}

TEST_F(Collectives, ABulkCallThatTouchesABufferTwiceRunsInOrder) {
  // A submit_group call of 300 sums (bulk calls of 256 and 44) in which every 7th buffer is
  // summed again right after its first sum, and every 50th sum's result is read by the next
  // call's sum (out of place, into a buffer of its own): each repeat starts a batch that runs
  // after the one before (on the host backend, which does not keep its work in order, once it
  // has finished), so every sum sees the one before it.
  auto w = make_world();
  ASSERT_TRUE(w);
  constexpr int k = 300;
  const auto bufs = counting_buffers(k, 16);
  const auto chained = counting_buffers(k / 50, 16);
  std::vector<cluster::coll_spec> specs;
  for (int i = 0; i < k; ++i) {
    const auto& b = bufs[static_cast<std::size_t>(i)];
    specs.push_back(sum_in_place(b));
    if (i % 7 == 6) specs.push_back(sum_in_place(b));
    if (i % 50 == 49) {
      specs.push_back({coll_kind::all_reduce,
                       local::dtype::f32,
                       {},
                       {b.block()},
                       {chained[static_cast<std::size_t>(i / 50)].block()}});
    }
  }
  const auto total = specs.size();
  ASSERT_TRUE(w->submit_group(std::move(specs)).get());
  for (int i = 0; i < k; ++i) {
    const int times = i % 7 == 6 ? 2 : 1;
    ASSERT_EQ(read(bufs[static_cast<std::size_t>(i)]), std::vector<float>(16, summed(i, times))) << "buffer " << i;
    if (i % 50 == 49) {
      EXPECT_EQ(read(chained[static_cast<std::size_t>(i / 50)]), std::vector<float>(16, summed(i, times + 1)))
          << "the sum of buffer " << i;
    }
  }
  const auto s = w->stats();
  EXPECT_EQ(s.requests, total);
  EXPECT_EQ(s.packed, total);
  EXPECT_EQ(s.agreements, size_ == 1 ? 2u : 1u);  // (one run of two bulk calls)
  EXPECT_GT(s.issues, 2u + k / 7);                // (a batch from each repeat)
}

TEST_F(Collectives, ACallOfMoreThan1024BulkEntriesIsAgreedOnInRunsOf1024) {
  // 1300 sums in one submit_group call: bulk calls of 256 (five) and 20, in runs of 1024 and 276
  // where the world has other ranks, each run agreed on in one exchange; alone, a rank takes each
  // bulk call's own cuts. Twice, the second call's sums waiting for the first's.
  auto w = make_world();
  ASSERT_TRUE(w);
  constexpr int k = 1300;
  const auto bufs = counting_buffers(k, 4);
  for (int t = 1; t <= 2; ++t) {
    ASSERT_TRUE(w->submit_group(sums_in_place(bufs)).get()) << "call " << t;
    for (int i = 0; i < k; i += 11) {
      ASSERT_EQ(read(bufs[static_cast<std::size_t>(i)]), std::vector<float>(4, summed(i, t)))
          << "call " << t << ", buffer " << i;
    }
  }
  const auto s = w->stats();
  EXPECT_EQ(s.packed, 2u * k);
  EXPECT_EQ(s.agreements, size_ == 1 ? 12u : 4u);
  EXPECT_EQ(s.issues, 12u);  // (one batch per bulk call)
}

TEST_F(Collectives, BulkCallsOfRanksWithDifferentCallBatchesAgree) {
  // ATOMR_COLL_CALL_BATCH 100 on odd ranks, 256 on even ones: a submit_group call of 600 goes as
  // bulk calls of 256, 256 and 88 on every rank, and each rank's cuts are merged.
  cluster::world_options o;
  o.call_batch = rank_ % 2 == 1 ? 100 : 256;
  auto w = make_world(o);
  ASSERT_TRUE(w);
  constexpr int k = 600;
  const auto bufs = counting_buffers(k, 4);
  ASSERT_TRUE(w->submit_group(sums_in_place(bufs)).get());
  for (int i = 0; i < k; ++i) {
    ASSERT_EQ(read(bufs[static_cast<std::size_t>(i)]), std::vector<float>(4, summed(i, 1))) << "buffer " << i;
  }
  const auto s = w->stats();
  EXPECT_EQ(s.packed, static_cast<std::uint64_t>(k));
  EXPECT_EQ(s.agreements, size_ == 1 ? 3u : 1u);
  // Cuts at 0, 100, 200 | 256, 356, 456 | 512 with an odd rank (every 100 of each bulk call);
  // 0 | 256 | 512 alone.
  EXPECT_EQ(s.issues, size_ > 1 ? 7u : 3u);
}

TEST_F(Collectives, APreparedCallIsSubmittedAgainAndAgain) {
  // 300 sums in place prepared once (bulk calls of 256 and 44) and submitted three times, each
  // waited for: every submission sums what the one before left, as three submit_group calls do,
  // with one agreement per run and submission (per bulk call where the rank is alone).
  auto w = make_world();
  ASSERT_TRUE(w);
  constexpr int k = 300;
  const auto bufs = counting_buffers(k, 8);
  auto call = w->prepare_group(sums_in_place(bufs));
  ASSERT_TRUE(call) << call.error_value();
  EXPECT_EQ(call->size(), static_cast<std::size_t>(k));
  EXPECT_TRUE(call->bulk());
  for (int t = 1; t <= 3; ++t) {
    ASSERT_TRUE(w->submit_prepared(*call).get()) << "submission " << t;
    for (int i = 0; i < k; i += 7) {
      ASSERT_EQ(read(bufs[static_cast<std::size_t>(i)]), std::vector<float>(8, summed(i, t)))
          << "submission " << t << ", buffer " << i;
    }
  }
  const auto s = w->stats();
  EXPECT_EQ(s.requests, 3u * k);
  EXPECT_EQ(s.packed, 3u * k);
  EXPECT_EQ(s.agreements, size_ == 1 ? 6u : 3u);
}

TEST_F(Collectives, APreparedCallSubmittedBackToBackSumsInOrder) {
  // Four submissions without waiting: one whose last submission is still under way goes as a
  // copy of its specs (a submit_group call of its own); either way each sums the last one's result.
  auto w = make_world();
  ASSERT_TRUE(w);
  constexpr int k = 200;
  const auto bufs = counting_buffers(k, 4);
  auto call = w->prepare_group(sums_in_place(bufs));
  ASSERT_TRUE(call) << call.error_value();
  std::vector<cluster::future<void>> done;
  for (int t = 0; t < 4; ++t) done.push_back(w->submit_prepared(*call));
  for (auto& f : done) ASSERT_TRUE(f.get());
  for (int i = 0; i < k; ++i) {
    ASSERT_EQ(read(bufs[static_cast<std::size_t>(i)]), std::vector<float>(4, summed(i, 4))) << "buffer " << i;
  }
  EXPECT_EQ(w->stats().requests, 4u * k);
}

TEST_F(Collectives, APreparedCallThatIsNotBulkSubmitsItsSpecs) {
  // Three requests (too few for bulk calls), one an all_gather: the call keeps its specs and
  // submits a copy each time. A bad spec is refused when the call is prepared, naming it.
  auto w = make_world();
  ASSERT_TRUE(w);
  const auto n = static_cast<std::size_t>(size_);
  auto a = buffer(std::vector<float>(4, static_cast<float>(rank_)));
  auto send = buffer(std::vector<std::int32_t>(2, rank_));
  auto gathered = buffer(std::vector<std::int32_t>(2 * n, -1));
  std::vector<cluster::coll_spec> specs{
      sum_in_place(a), {coll_kind::all_gather, local::dtype::i32, {}, {send.block()}, {gathered.block()}}};
  auto call = w->prepare_group(specs);
  ASSERT_TRUE(call) << call.error_value();
  EXPECT_FALSE(call->bulk());
  ASSERT_TRUE(w->submit_prepared(*call).get());
  ASSERT_TRUE(w->submit_prepared(*call).get());
  const float once = static_cast<float>(size_ * (size_ - 1) / 2);
  EXPECT_EQ(read(a), std::vector<float>(4, once * static_cast<float>(size_)));
  std::vector<std::int32_t> expected;
  for (int r = 0; r < size_; ++r) expected.insert(expected.end(), 2, r);
  EXPECT_EQ(read(gathered), expected);
  specs.push_back({coll_kind::all_reduce, local::dtype::f32, {}, {}, {}});
  auto bad = w->prepare_group(specs);
  ASSERT_FALSE(bad);
  EXPECT_NE(bad.error_value().message().find("request 3 of 3"), std::string::npos) << bad.error_value().message();
}

TEST_F(Collectives, APreparedCallIsForTheWorldThatMadeIt) {
  auto w = make_world();
  auto other = make_world();
  ASSERT_TRUE(w);
  ASSERT_TRUE(other);
  const auto bufs = counting_buffers(150, 4);
  auto call = w->prepare_group(sums_in_place(bufs));
  ASSERT_TRUE(call) << call.error_value();
  auto r = other->submit_prepared(*call).get();
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error_value().message(), "submit_prepared: this call was prepared for another world");
  EXPECT_EQ(other->stats().requests, 0u);
  EXPECT_TRUE(w->submit_group(sums_in_place(bufs)).get());  // (the world that made it still works)
}

TEST_F(Collectives, ASubmitGroupCallMadeAgainIsSubmittedAsAKeptPreparedCall) {
  // 300 sums in place in one submit_group call, five times, each waited for: the first is seen,
  // the second prepared and kept, the other three submitted as that prepared call. Every call
  // sums what the one before left. With the cache off, none is.
  for (const bool on : {true, false}) {
    SCOPED_TRACE(on ? "cache on" : "cache off");
    cluster::world_options o;
    o.group_cache = on;
    auto w = make_world(o);
    ASSERT_TRUE(w);
    constexpr int k = 300;
    const auto bufs = counting_buffers(k, 8);
    for (int t = 1; t <= 5; ++t) {
      ASSERT_TRUE(w->submit_group(sums_in_place(bufs)).get()) << "call " << t;
      for (int i = 0; i < k; i += 7) {
        ASSERT_EQ(read(bufs[static_cast<std::size_t>(i)]), std::vector<float>(8, summed(i, t)))
            << "call " << t << ", buffer " << i;
      }
    }
    const auto s = w->stats();
    EXPECT_EQ(s.requests, 5u * k);
    EXPECT_EQ(s.packed, 5u * k);
    EXPECT_EQ(s.agreements, size_ == 1 ? 10u : 5u);  // (one run of two bulk calls each)
    EXPECT_EQ(s.group_repeats, on ? 3u : 0u);
  }
}

TEST_F(Collectives, OnlyTheSameSpecsOnTheSameBuffersRepeatAKeptCall) {
  // A kept call of 200 sums; then calls that differ from it in one spec (another buffer, the
  // maximum instead of the sum, another count) or in order: none is submitted as the kept call,
  // and each reduces what it names.
  auto w = make_world();
  ASSERT_TRUE(w);
  constexpr int k = 200;
  const auto bufs = counting_buffers(k, 4);
  const auto spare = counting_buffers(1, 4);
  for (int t = 1; t <= 3; ++t) ASSERT_TRUE(w->submit_group(sums_in_place(bufs)).get()) << "call " << t;
  ASSERT_EQ(w->stats().group_repeats, 1u);
  auto other_buffer = sums_in_place(bufs);
  other_buffer[k / 2] = sum_in_place(spare[0]);
  ASSERT_TRUE(w->submit_group(std::move(other_buffer)).get());
  auto other_op = sums_in_place(bufs);
  other_op[k - 1].params.op = reduce_op::max;
  ASSERT_TRUE(w->submit_group(std::move(other_op)).get());
  auto other_count = sums_in_place(bufs);
  other_count[0].params.count = 2;  // (the first two of its four elements)
  ASSERT_TRUE(w->submit_group(std::move(other_count)).get());
  auto reordered = sums_in_place(bufs);
  std::swap(reordered[1], reordered[2]);
  ASSERT_TRUE(w->submit_group(std::move(reordered)).get());
  EXPECT_EQ(w->stats().group_repeats, 1u);
  // Buffer i (not 0, k/2 or k-1) was summed 3 + 4 times; k/2 3 + 3 times, the spare once; k-1 3 +
  // 3 times and its maximum once (every rank holds the same sum then: the maximum is that sum).
  const auto n = static_cast<float>(size_);
  auto times = [&](int i, int t) { return summed(i, t); };
  EXPECT_EQ(read(bufs[1]), std::vector<float>(4, times(1, 7)));
  EXPECT_EQ(read(bufs[k / 2]), std::vector<float>(4, times(k / 2, 6)));
  EXPECT_EQ(read(bufs[k - 1]), std::vector<float>(4, times(k - 1, 6)));
  EXPECT_EQ(read(spare[0]), std::vector<float>(4, summed(0, 1)));
  // Buffer 0: its first two elements summed 3 + 4 times, the other two 3 + 3 times.
  const auto zero = read(bufs[0]);
  EXPECT_EQ(zero[0], times(0, 7));
  EXPECT_EQ(zero[3], times(0, 6));
  EXPECT_EQ(zero[3] * n, zero[0]);
}

TEST_F(Collectives, AKeptCallSubmittedBackToBackSumsInOrder) {
  // Once kept, four calls without waiting: one made while the kept call's last submission is
  // under way goes as a call of its own; either way each sums what the one before left.
  auto w = make_world();
  ASSERT_TRUE(w);
  constexpr int k = 200;
  const auto bufs = counting_buffers(k, 4);
  for (int t = 1; t <= 2; ++t) ASSERT_TRUE(w->submit_group(sums_in_place(bufs)).get()) << "call " << t;
  std::vector<cluster::future<void>> done;
  for (int t = 0; t < 4; ++t) done.push_back(w->submit_group(sums_in_place(bufs)));
  for (auto& f : done) ASSERT_TRUE(f.get());
  for (int i = 0; i < k; ++i) {
    ASSERT_EQ(read(bufs[static_cast<std::size_t>(i)]), std::vector<float>(4, summed(i, 6))) << "buffer " << i;
  }
  const auto s = w->stats();
  EXPECT_EQ(s.requests, 6u * k);
  EXPECT_GE(s.group_repeats, 1u);  // (the first of the four at least: nothing of the call was under way)
  EXPECT_LE(s.group_repeats, 4u);
}

TEST_F(Collectives, RanksThatKeepACallMeetRanksThatDoNot) {
  // The call cache on at even ranks only: the kept prepared call of one rank meets the
  // submit_group calls of the others, call after call.
  cluster::world_options o;
  o.group_cache = rank_ % 2 == 0;
  auto w = make_world(o);
  ASSERT_TRUE(w);
  constexpr int k = 300;
  const auto bufs = counting_buffers(k, 4);
  for (int t = 1; t <= 4; ++t) {
    ASSERT_TRUE(w->submit_group(sums_in_place(bufs)).get()) << "call " << t;
    for (int i = 0; i < k; i += 13) {
      ASSERT_EQ(read(bufs[static_cast<std::size_t>(i)]), std::vector<float>(4, summed(i, t)))
          << "call " << t << ", buffer " << i;
    }
  }
  EXPECT_EQ(w->stats().group_repeats, rank_ % 2 == 0 ? 2u : 0u);
}

TEST_F(Collectives, AKeptCallLetsGoOfItsBuffersOnceUnsubmittedForASecond) {
  // Kept, the call holds its buffers (so that no other buffer takes their addresses while it
  // is); unsubmitted for a second, it lets go of them, with or without further calls.
  cluster::world_options o;
  o.pack_graphs = false;  // (graphs of packed batches hold their buffers too)
  auto w = make_world(o);
  ASSERT_TRUE(w);
  const auto bufs = counting_buffers(150, 4);
  for (int t = 1; t <= 3; ++t) ASSERT_TRUE(w->submit_group(sums_in_place(bufs)).get()) << "call " << t;
  ASSERT_EQ(w->stats().group_repeats, 1u);
  EXPECT_GT(bufs.front().block().use_count(), 1) << "held by the kept call";
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  auto only_ours = [&] {
    return std::all_of(bufs.begin(), bufs.end(), [](const auto& b) { return b.block().use_count() == 1; });
  };
  while (!only_ours() && std::chrono::steady_clock::now() < deadline) std::this_thread::yield();
  EXPECT_TRUE(only_ours());
  // Let go, it is made again from the next repeats.
  for (int t = 4; t <= 6; ++t) ASSERT_TRUE(w->submit_group(sums_in_place(bufs)).get()) << "call " << t;
  EXPECT_EQ(w->stats().group_repeats, 2u);
  EXPECT_EQ(read(bufs[3]), std::vector<float>(4, summed(3, 6)));
}

TEST_F(Collectives, AllReduceGroupSumsEveryBufferAndMeetsSubmitGroupCalls) {
  // submit_group(buffers) on even ranks, the same sums as submit_group calls on odd ones, five times:
  // every call sums what the one before left, and from the third on each rank submits its kept
  // call (submit_group(buffers) by comparing the buffers, without specs).
  auto w = make_world();
  ASSERT_TRUE(w);
  constexpr int k = 300;
  const auto bufs = counting_buffers(k, 4);
  for (int t = 1; t <= 5; ++t) {
    auto done = rank_ % 2 == 0 ? w->submit_group(std::span<const local::gpu_ref<float>>(bufs))
                               : w->submit_group(sums_in_place(bufs));
    ASSERT_TRUE(done.get()) << "call " << t;
    for (int i = 0; i < k; i += 11) {
      ASSERT_EQ(read(bufs[static_cast<std::size_t>(i)]), std::vector<float>(4, summed(i, t)))
          << "call " << t << ", buffer " << i;
    }
  }
  EXPECT_EQ(w->stats().group_repeats, 3u);
  EXPECT_EQ(w->stats().group_repeats_by_buffers, rank_ % 2 == 0 ? 3u : 0u);
  EXPECT_EQ(w->stats().requests, 5u * k);
  // A few buffers (not bulk calls), the maximum, and none.
  const std::vector<local::gpu_ref<float>> few(bufs.begin(), bufs.begin() + 3);
  ASSERT_TRUE(w->submit_group(std::span<const local::gpu_ref<float>>(few), reduce_op::max).get());
  EXPECT_EQ(read(bufs[2]), std::vector<float>(4, summed(2, 5)));  // (every rank held the same)
  EXPECT_TRUE(w->submit_group(std::span<const local::gpu_ref<float>>()).get());
  EXPECT_EQ(w->stats().requests, 5u * k + 3);
}

TEST_F(Collectives, ABulkCallMetByAnotherCallFailsNamingIt) {
  // Rank 0 makes a submit_group call of 300 small all_reduces, the others of 200: their first
  // bulk calls (256 and 200 entries) differ, and every rank's future fails saying so, rather
  // than hanging or summing the wrong buffers together.
  if (size_ == 1) GTEST_SKIP() << "needs two ranks";
  auto w = make_world();
  ASSERT_TRUE(w);
  const auto bufs = counting_buffers(rank_ == 0 ? 300 : 200, 4);
  auto r = w->submit_group(sums_in_place(bufs)).get();
  ASSERT_FALSE(r);
  EXPECT_NE(r.error_value().message().find("ranks made different calls"), std::string::npos)
      << r.error_value().message();
}

TEST_F(Collectives, ABulkCallMetByTheSameRequestsMadeOneByOneFailsNamingIt) {
  // A call of 200 small all_reduces, made with submit_group (a bulk call) on one side and with
  // submit_group(each_request) (its requests one by one) on the other: the offers are of the same length, and
  // before they said what they were of, each side went on with batches the other need not
  // match. Every future of every rank fails saying the ranks made different calls, whichever
  // side rank 0 is on.
  if (size_ == 1) GTEST_SKIP() << "needs two ranks";
  for (const bool rank0_groups : {true, false}) {
    auto w = make_world();
    ASSERT_TRUE(w);
    const auto bufs = counting_buffers(200, 4);
    std::vector<result<void>> results;
    if ((rank_ == 0) == rank0_groups) {
      results.push_back(w->submit_group(sums_in_place(bufs)).get());
    } else {
      for (auto& f : w->submit_group(sums_in_place(bufs), cluster::each_request)) results.push_back(f.get());
      EXPECT_EQ(results.size(), 200u);
    }
    for (const auto& r : results) {
      ASSERT_FALSE(r) << "rank 0 " << (rank0_groups ? "grouped" : "did not group");
      EXPECT_NE(r.error_value().message().find("ranks made different calls"), std::string::npos)
          << r.error_value().message();
    }
  }
}

TEST_F(Collectives, ALoneRequestMetByABulkCallFailsNamingIt) {
  // Rank 0 makes one all_reduce (it is issued at once, its offer agreed on in the background);
  // the others a submit_group call of 200. Both fail, saying so, rather than waiting out the
  // deadline for a peer that never joins.
  if (size_ == 1) GTEST_SKIP() << "needs two ranks";
  auto w = make_world();
  ASSERT_TRUE(w);
  const auto bufs = counting_buffers(rank_ == 0 ? 1 : 200, 4);
  auto r = rank_ == 0 ? w->all_reduce(bufs.front(), reduce_op::sum).get() : w->submit_group(sums_in_place(bufs)).get();
  ASSERT_FALSE(r);
  EXPECT_NE(r.error_value().message().find("ranks made different calls"), std::string::npos)
      << r.error_value().message();
}

TEST_F(Collectives, ASubmitGroupCallOfMixedCollectivesMatchesSubmitAllOnOtherRanks) {
  // Rank 0 hands the call over with submit_group, the others with submit_group(each_request): the same requests
  // in the same order, so they match. All_gathers, a broadcast and sums, some reading what an
  // earlier one writes.
  auto w = make_world();
  ASSERT_TRUE(w);
  const auto n = static_cast<std::size_t>(size_);
  constexpr std::size_t k = 4;
  auto send = buffer(std::vector<std::int32_t>(k, rank_ * 10 + 1));
  auto gathered = buffer(std::vector<std::int32_t>(k * n, -1));
  auto bcast = buffer(std::vector<std::int32_t>(8, rank_ + 100));
  auto sum = buffer(std::vector<std::int32_t>(k * n, 0));
  std::vector<cluster::coll_spec> specs;
  specs.push_back({coll_kind::all_gather, local::dtype::i32, {}, {send.block()}, {gathered.block()}});
  specs.push_back({coll_kind::broadcast, local::dtype::i32, {reduce_op::sum, 0, 0}, {bcast.block()}, {bcast.block()}});
  specs.push_back({coll_kind::all_reduce, local::dtype::i32, {}, {gathered.block()}, {sum.block()}});
  if (rank_ == 0) {
    ASSERT_TRUE(w->submit_group(std::move(specs)).get());
  } else {
    for (auto& f : w->submit_group(std::move(specs), cluster::each_request)) ASSERT_TRUE(f.get());
  }
  std::vector<std::int32_t> expected;
  for (int r = 0; r < size_; ++r) expected.insert(expected.end(), k, r * 10 + 1);
  EXPECT_EQ(read(gathered), expected);
  EXPECT_EQ(read(bcast), std::vector<std::int32_t>(8, 100));
  for (auto& v : expected) v *= size_;
  EXPECT_EQ(read(sum), expected);
  EXPECT_EQ(w->stats().requests, 3u);
}

TEST_F(Collectives, ASubmitGroupCallWithABadRequestSubmitsNothing) {
  // The second of three requests names no buffers: the call's future fails at once, naming it,
  // and none of the three is submitted (the world goes on: a later call works).
  auto w = make_world();
  ASSERT_TRUE(w);
  const auto bufs = counting_buffers(3, 4);
  std::vector<cluster::coll_spec> specs{
      sum_in_place(bufs[0]), {coll_kind::all_reduce, local::dtype::f32, {}, {}, {}}, sum_in_place(bufs[2])};
  auto r = w->submit_group(std::move(specs)).get();
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error_value().code(), errc::invalid_argument);
  EXPECT_NE(r.error_value().message().find("request 2 of 3"), std::string::npos) << r.error_value().message();
  EXPECT_NE(r.error_value().message().find("nothing was submitted"), std::string::npos) << r.error_value().message();
  EXPECT_EQ(w->stats().requests, 0u);
  EXPECT_EQ(read(bufs[0]), std::vector<float>(4, static_cast<float>(rank_)));
  // An empty call is done at once; a good one still works.
  EXPECT_TRUE(w->submit_group({}).get());
  ASSERT_TRUE(w->submit_group({sum_in_place(bufs[0]), sum_in_place(bufs[2])}).get());
  EXPECT_EQ(read(bufs[0]), std::vector<float>(4, summed(0, 1)));
  EXPECT_EQ(read(bufs[2]), std::vector<float>(4, summed(2, 1)));
  EXPECT_EQ(w->stats().requests, 2u);
}

TEST_F(Collectives, APlannedCallCutsItsBatchesWhereTheTypeChanges) {
  // 150 float sums, then 150 int32 maxima, in one call: a batch starts where the type changes
  // (150) and every ATOMR_COLL_CALL_BATCH requests (256 by default: [0, 150), [150, 256),
  // [256, 300)), all in one plan.
  auto w = make_world();
  ASSERT_TRUE(w);
  constexpr int k = 150;
  const auto floats = counting_buffers(k, 4);
  std::vector<local::gpu_ref<std::int32_t>> ints;
  for (int i = 0; i < k; ++i) ints.push_back(buffer(std::vector<std::int32_t>(4, rank_ * 1000 + i)));
  auto specs = sums_in_place(floats);
  for (const auto& b : ints) {
    specs.push_back({coll_kind::all_reduce, local::dtype::i32, {reduce_op::max, 0, 0}, {b.block()}, {b.block()}});
  }
  for (auto& f : w->submit_group(std::move(specs), cluster::each_request)) ASSERT_TRUE(f.get());
  for (int i = 0; i < k; ++i) {
    ASSERT_EQ(read(floats[static_cast<std::size_t>(i)]), std::vector<float>(4, summed(i, 1))) << "float " << i;
    ASSERT_EQ(read(ints[static_cast<std::size_t>(i)]), std::vector<std::int32_t>(4, (size_ - 1) * 1000 + i))
        << "int " << i;
  }
  const auto s = w->stats();
  EXPECT_EQ(s.packed, static_cast<std::uint64_t>(2 * k));
  EXPECT_EQ(s.agreements, 1u);
  const std::size_t batch = w->options().call_batch;
  std::size_t batches = 2;  // at 0 and 150
  for (std::size_t at = batch; at < 2 * k; at += batch) batches += at == k ? 0 : 1;
  EXPECT_EQ(s.issues, batches);
}

TEST_F(Collectives, RanksWithDifferentCallBatchesStillAgreeOnThePlan) {
  // ATOMR_COLL_CALL_BATCH set unlike on the ranks (100 on odd ranks, 256 on even ones): the plan
  // starts a batch wherever any rank's would, so every rank issues the same batches.
  cluster::world_options o;
  o.call_batch = rank_ % 2 == 1 ? 100 : 256;
  auto w = make_world(o);
  ASSERT_TRUE(w);
  constexpr int k = 600;
  const auto bufs = counting_buffers(k, 4);
  auto specs = sums_in_place(bufs);
  for (auto& f : w->submit_group(std::move(specs), cluster::each_request)) ASSERT_TRUE(f.get());
  for (int i = 0; i < k; ++i) {
    ASSERT_EQ(read(bufs[static_cast<std::size_t>(i)]), std::vector<float>(4, summed(i, 1))) << "buffer " << i;
  }
  const auto s = w->stats();
  EXPECT_EQ(s.packed, static_cast<std::uint64_t>(k));
  EXPECT_EQ(s.agreements, 1u);
  // Batches at 0, 100, 200, 256, 300, 400, 500, 512 with an odd rank; 0, 256, 512 alone.
  EXPECT_EQ(s.issues, size_ > 1 ? 8u : 3u);
}

TEST_F(Collectives, AWholePlanOfMixedSizesOutOfPlaceIsOnePackedBatchAndExact) {
  // 1024 all_reduces (a whole plan) in one batch of 1024: the NCCL backend's copy tables at their
  // largest. Lengths of 1-7 floats put slots and copies on and off 16-byte boundaries; out of
  // place, so the gather must read the inputs and the scatter write only the outputs.
  cluster::world_options o;
  o.call_batch = 1024;
  auto w = make_world(o);
  ASSERT_TRUE(w);
  constexpr int k = 1024;
  auto length = [](int i) { return static_cast<std::size_t>(i % 7 + 1); };
  auto input = [&](int i, std::size_t j) { return static_cast<float>(rank_ + i + static_cast<int>(j)); };
  std::vector<local::gpu_ref<float>> in, out;
  std::vector<cluster::coll_spec> specs;
  for (int i = 0; i < k; ++i) {
    std::vector<float> v(length(i));
    for (std::size_t j = 0; j < v.size(); ++j) v[j] = input(i, j);
    in.push_back(buffer(v));
    out.push_back(buffer(std::vector<float>(length(i), -1.0f)));
    specs.push_back({coll_kind::all_reduce, local::dtype::f32, {}, {in.back().block()}, {out.back().block()}});
  }
  for (auto& f : w->submit_group(std::move(specs), cluster::each_request)) ASSERT_TRUE(f.get());
  for (int i = 0; i < k; ++i) {
    const auto u = static_cast<std::size_t>(i);
    std::vector<float> sent(length(i)), sum(length(i));
    for (std::size_t j = 0; j < sum.size(); ++j) {
      sent[j] = input(i, j);
      sum[j] = static_cast<float>(size_ * (size_ - 1) / 2 + size_ * (i + static_cast<int>(j)));
    }
    ASSERT_EQ(read(out[u]), sum) << "buffer " << i;
    ASSERT_EQ(read(in[u]), sent) << "buffer " << i << "'s input";
  }
  const auto s = w->stats();
  EXPECT_EQ(s.packed, static_cast<std::uint64_t>(k));
  EXPECT_EQ(s.issues, 1u);
}

TEST_F(Collectives, ACallLongerThanOnePlanGoesOnInParts) {
  // 1500 in one call: the first 1024 in the call's plan, the rest handed over in parts and agreed
  // on as usual, every one packed and exact.
  auto w = make_world();
  ASSERT_TRUE(w);
  constexpr int k = 1500;
  const auto bufs = counting_buffers(k, 2);
  auto specs = sums_in_place(bufs);
  for (auto& f : w->submit_group(std::move(specs), cluster::each_request)) ASSERT_TRUE(f.get());
  for (int i = 0; i < k; ++i) {
    ASSERT_EQ(read(bufs[static_cast<std::size_t>(i)]), std::vector<float>(2, summed(i, 1))) << "buffer " << i;
  }
  const auto s = w->stats();
  EXPECT_EQ(s.requests, static_cast<std::uint64_t>(k));
  EXPECT_EQ(s.packed, static_cast<std::uint64_t>(k));
  EXPECT_GE(s.agreements, 2u);
}

TEST_F(Collectives, RanksThatSplitACallDifferentlyStillAgreeOnThePacking) {
  // Even ranks make one call of 1000, odd ranks two of 500 (or, in the second round, 300 one by
  // one and a call of 700): the plans offered differ, the batches must not.
  for (const bool one_by_one : {false, true}) {
    SCOPED_TRACE(one_by_one ? "odd ranks: 300 one by one, then 700 in one call" : "odd ranks: two calls of 500");
    auto w = make_world();
    ASSERT_TRUE(w);
    constexpr int k = 1000;
    const std::size_t split = one_by_one ? 300 : 500;
    const auto bufs = counting_buffers(k, 8);
    auto specs = sums_in_place(bufs);
    std::vector<cluster::future<void>> done;
    if (rank_ % 2 == 0) {
      done = w->submit_group(std::move(specs), cluster::each_request);
    } else {
      std::vector<cluster::coll_spec> first(specs.begin(), specs.begin() + static_cast<std::ptrdiff_t>(split));
      std::vector<cluster::coll_spec> rest(specs.begin() + static_cast<std::ptrdiff_t>(split), specs.end());
      if (one_by_one) {
        for (auto& spec : first) done.push_back(w->submit(std::move(spec)));
      } else {
        done = w->submit_group(std::move(first), cluster::each_request);
      }
      for (auto& f : w->submit_group(std::move(rest), cluster::each_request)) done.push_back(std::move(f));
    }
    ASSERT_EQ(done.size(), static_cast<std::size_t>(k));
    for (auto& f : done) ASSERT_TRUE(f.get());
    for (int i = 0; i < k; ++i) {
      ASSERT_EQ(read(bufs[static_cast<std::size_t>(i)]), std::vector<float>(8, summed(i, 1))) << "buffer " << i;
    }
    EXPECT_EQ(w->stats().requests, static_cast<std::uint64_t>(k));
  }
}

TEST_F(Collectives, SpecsMadeBySpecOfHoldEachBufferOnceAndRun) {
  auto w = make_world();
  ASSERT_TRUE(w);
  // One reference per list a buffer is in, as the braced spec it equals holds. (On a block of
  // its own: a device's buffer is also held, now and then, by the device's threads.)
  const local::gpu_ref<float> lone(std::make_shared<local::buffer_block>());
  const auto in_place = cluster::all_reduce_spec(lone, reduce_op::max);
  EXPECT_EQ(lone.block().use_count(), 3);
  const cluster::coll_spec braced{
      coll_kind::all_reduce, local::dtype::f32, {reduce_op::max, 0, 0}, {lone.block()}, {lone.block()}};
  EXPECT_EQ(lone.block().use_count(), 5);
  const auto b = buffer(std::vector<float>(8, static_cast<float>(rank_)));
  auto same = [](const cluster::coll_spec& x, const cluster::coll_spec& y) {
    return x.kind == y.kind && x.type == y.type && x.params.op == y.params.op && x.params.root == y.params.root &&
           x.params.count == y.params.count && std::equal(x.send.begin(), x.send.end(), y.send.begin(), y.send.end()) &&
           std::equal(x.recv.begin(), x.recv.end(), y.recv.begin(), y.recv.end());
  };
  EXPECT_TRUE(same(in_place, braced));
  const auto in = buffer(std::vector<std::int32_t>(6, rank_ + 1));
  const auto out = buffer(std::vector<std::int32_t>(6, -1));
  const auto four = cluster::spec_of(coll_kind::all_reduce, in, out, {reduce_op::sum, 0, 4});
  EXPECT_TRUE(
      same(four, {coll_kind::all_reduce, local::dtype::i32, {reduce_op::sum, 0, 4}, {in.block()}, {out.block()}}));
  // A recv's spec keeps its empty send, which the world drops (the kind has none).
  const auto recv = cluster::spec_of(coll_kind::recv, local::gpu_ref<float>{}, b, {reduce_op::sum, 0, 0});
  ASSERT_EQ(recv.send.size(), 1u);
  EXPECT_EQ(recv.send[0], nullptr);
  EXPECT_EQ(recv.recv[0], b.block());
  // They run: 200 in-place sums (bulk calls), then the out-of-place sum of the first 4 elements.
  const auto bufs = counting_buffers(200, 8);
  std::vector<cluster::coll_spec> specs;
  for (const auto& c : bufs) specs.push_back(cluster::all_reduce_spec(c));
  ASSERT_TRUE(w->submit_group(std::move(specs)).get());
  ASSERT_TRUE(w->submit_group({four}).get());
  for (int i = 0; i < 200; i += 39) {
    EXPECT_EQ(read(bufs[static_cast<std::size_t>(i)]), std::vector<float>(8, summed(i, 1))) << "buffer " << i;
  }
  const std::int32_t total = size_ * (size_ + 1) / 2;
  EXPECT_EQ(read(out), (std::vector<std::int32_t>{total, total, total, total, -1, -1}));
  // An empty gpu_ref is refused by name, as the world's own calls refuse it.
  auto empty = w->submit(cluster::all_reduce_spec(local::gpu_ref<float>{})).get();
  ASSERT_FALSE(empty);
  EXPECT_NE(empty.error_value().describe().find("empty gpu_ref"), std::string::npos) << empty.error_value().describe();
}

TEST_F(Collectives, FinishedRequestsAreFreedWhileCallsComeBackToBack) {
  // Calls of 512 small all_reduces, each waited for and the next made at once: the engine is
  // seldom idle between them, and its finished requests (each holding its buffers) must still
  // be freed as it goes, not only when it idles (before, 100 such calls of 1000 left 65 000
  // unfreed). Max in place: every call leaves the same values.
  auto w = make_world();
  ASSERT_TRUE(w);
  constexpr int k = 512;
  constexpr int k_calls = 40;
  const auto bufs = counting_buffers(k, 8);
  for (int c = 0; c < k_calls; ++c) {
    std::vector<cluster::coll_spec> specs;
    for (const auto& b : bufs) {
      specs.push_back({coll_kind::all_reduce, local::dtype::f32, {reduce_op::max, 0, 0}, {b.block()}, {b.block()}});
    }
    for (auto& f : w->submit_group(std::move(specs), cluster::each_request)) ASSERT_TRUE(f.get()) << "call " << c;
  }
  for (int i = 0; i < k; i += 97) {
    ASSERT_EQ(read(bufs[static_cast<std::size_t>(i)]), std::vector<float>(8, static_cast<float>(size_ - 1 + i)))
        << "buffer " << i;
  }
  const auto s = w->stats();
  EXPECT_EQ(s.requests, static_cast<std::uint64_t>(k) * k_calls);
  // At most 1024 kept, plus what one turn of the engine finishes (two calls' worth here).
  EXPECT_GT(s.most_unfreed, 0u);
  EXPECT_LE(s.most_unfreed, 1024u + 2 * k);
}

TEST_F(Collectives, ACallsFinishedRequestsLetGoOfTheirBuffers) {
  // The engine frees a per-request group's finished requests between its turns, and all of them
  // once nothing is open: whether or not another call comes, no request holds a buffer for long
  // after its call ended, and the program's reference is then the only one left. (A packed
  // batch replayed as a CUDA graph holds its buffers in the graph, as a single request's graph
  // does, until the program lets go of them: graphs of packed batches are off here. The third
  // call repeats the first submit_group call and is kept as a prepared call, which holds its
  // buffers for a second once unsubmitted: see AKeptCallLetsGoOfItsBuffersOnceUnsubmittedForASecond.)
  cluster::world_options o;
  o.pack_graphs = false;
  auto w = make_world(o);
  ASSERT_TRUE(w);
  constexpr int k = 300;
  const auto first = counting_buffers(k, 8);
  const auto second = counting_buffers(k, 8);
  auto only_ours = [](const std::vector<local::gpu_ref<float>>& bufs) {
    return std::all_of(bufs.begin(), bufs.end(), [](const auto& b) { return b.block().use_count() == 1; });
  };
  // Polled for (bounded): the engine's threads let go of them in their own time.
  auto soon = [&](const std::vector<local::gpu_ref<float>>& bufs) {
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
    while (!only_ours(bufs) && std::chrono::steady_clock::now() < deadline) std::this_thread::yield();
    return only_ours(bufs);
  };
  for (auto& f : w->submit_group(sums_in_place(first), cluster::each_request)) ASSERT_TRUE(f.get());
  EXPECT_TRUE(soon(first)) << "no further call";
  for (int c = 0; c < 3; ++c) {
    ASSERT_TRUE(w->submit_group(sums_in_place(c % 2 == 0 ? second : first)).get()) << "call " << c;
  }
  EXPECT_TRUE(soon(first));
  EXPECT_TRUE(soon(second));
  // Each buffer was summed twice: the second sum is of every rank holding the first.
  const auto n = static_cast<float>(size_);
  for (int i = 0; i < k; i += 37) {
    const auto at = static_cast<std::size_t>(i);
    const float base = static_cast<float>(i) * n + n * static_cast<float>(size_ - 1) / 2;  // sum of rank + i
    EXPECT_EQ(read(first[at]), std::vector<float>(8, base * n)) << "buffer " << i;
    EXPECT_EQ(read(second[at]), std::vector<float>(8, base * n)) << "buffer " << i;
  }
  EXPECT_EQ(w->stats().requests, 4u * k);
}

TEST_F(Collectives, ACallThatReusesABufferIsHandedOverInOneGo) {
  // The second request reduces the first one's buffer again: nothing is handed over early, so
  // one plan covers all 301 requests (two batches, cut where the buffer repeats).
  auto w = make_world();
  ASSERT_TRUE(w);
  constexpr int k = 300;
  const auto bufs = counting_buffers(k, 8);
  std::vector<cluster::coll_spec> specs;
  specs.push_back(sum_in_place(bufs[0]));
  for (const auto& b : bufs) specs.push_back(sum_in_place(b));
  for (auto& f : w->submit_group(std::move(specs), cluster::each_request)) ASSERT_TRUE(f.get());
  EXPECT_EQ(read(bufs[0]), std::vector<float>(8, summed(0, 2)));
  EXPECT_EQ(read(bufs[k - 1]), std::vector<float>(8, summed(k - 1, 1)));
  if (size_ > 1) {
    EXPECT_EQ(w->stats().agreements, 1u);
  }
}

}  // namespace
}  // namespace atomr
