// CUDA graphs on NCCL, one GPU per rank (comm_backend::graph_limit): a collective repeated on the
// same buffers is voted on each time; the first goes as usual, the second is captured into a
// graph, and later ones launch that graph. Each round writes new contents into the buffers first,
// so a launch that ran on stale inputs, or did not run, shows as a wrong value.
#include <cstdint>
#include <cstdlib>
#include <string>

#include "../mpi/world_fixture.hpp"

namespace atomr {
namespace {

using cluster::reduce_op;

class WorldGraphs : public testing::world_fixture {
 protected:
  // Rank r's element j in round t.
  static std::int32_t v(int r, int t, std::size_t j) { return 1000 * t + 100 * r + static_cast<std::int32_t>(j); }
  std::vector<std::int32_t> mine(int t, std::size_t n) const {
    std::vector<std::int32_t> out(n);
    for (std::size_t j = 0; j < n; ++j) out[j] = v(rank_, t, j);
    return out;
  }
  template <typename T>
  void upload(const local::gpu_ref<T>& b, const std::vector<T>& values) {
    ASSERT_TRUE(dev_.upload(b, std::span<const T>(values)).get());
  }
  bool graphs_on(const cluster::world& w) const {
    return w.backend() == cluster::world_backend::nccl && std::getenv("ATOMR_NCCL_GRAPHS") == nullptr;
  }

  // The packed-call tests: k_packed all_reduces of 1-9 ints, out of place (send i into recv i),
  // in one call made k_packed_rounds times; rank r's element j of buffer i in round t.
  static constexpr std::size_t k_packed = 300;
  static constexpr int k_packed_rounds = 5;
  static std::size_t packed_length(std::size_t i) { return i % 9 + 1; }
  static std::int32_t packed_value(int r, int t, std::size_t i, std::size_t j) {
    return v(r, t, j) + static_cast<std::int32_t>(10000 * i);
  }
  struct packed_pairs {
    std::vector<local::gpu_ref<std::int32_t>> send, recv;
  };
  packed_pairs make_packed_pairs() {
    packed_pairs p;
    for (std::size_t i = 0; i < k_packed; ++i) {
      p.send.push_back(buffer(std::vector<std::int32_t>(packed_length(i), 0)));
      p.recv.push_back(buffer(std::vector<std::int32_t>(packed_length(i), -1)));
    }
    return p;
  }
  static std::vector<cluster::coll_spec> packed_specs(const packed_pairs& p) {
    std::vector<cluster::coll_spec> specs;
    for (std::size_t i = 0; i < p.send.size(); ++i) {
      specs.push_back(
          {cluster::coll_kind::all_reduce, local::dtype::i32, {}, {p.send[i].block()}, {p.recv[i].block()}});
    }
    return specs;
  }
  // This rank's inputs of round t.
  void upload_round(const packed_pairs& p, int t) {
    for (std::size_t i = 0; i < p.send.size(); ++i) {
      std::vector<std::int32_t> in(packed_length(i));
      for (std::size_t j = 0; j < in.size(); ++j) in[j] = packed_value(rank_, t, i, j);
      ASSERT_NO_FATAL_FAILURE(upload(p.send[i], in));
    }
  }
  // Every output of round t: the sum of every rank's inputs.
  void expect_round_sums(const packed_pairs& p, int t) {
    for (std::size_t i = 0; i < p.recv.size(); ++i) {
      std::vector<std::int32_t> expected(packed_length(i), 0);
      for (int r = 0; r < size_; ++r) {
        for (std::size_t j = 0; j < expected.size(); ++j) expected[j] += packed_value(r, t, i, j);
      }
      ASSERT_EQ(read(p.recv[i]), expected) << "round " << t << ", buffer " << i;
    }
  }
  // After k_packed_rounds calls of two packed batches (256 and 44): each batch went as usual in
  // the first round, was captured in the second and launched in the rest.
  void expect_two_batches_graphed(const cluster::world& w) {
    const auto s = w.stats();
    EXPECT_EQ(s.packed, k_packed_rounds * k_packed);
    if (!graphs_on(w)) GTEST_SKIP() << "values checked; no CUDA graphs on this backend";
    EXPECT_EQ(s.graph_votes, 2u * k_packed_rounds);
    EXPECT_EQ(s.graph_captures, 2u);  // the second round's two batches
    EXPECT_EQ(s.graph_launches, (k_packed_rounds - 2) * k_packed);
  }
};

TEST_F(WorldGraphs, AnAllReduceRepeatedOnTheSameBuffersLaunchesItsGraph) {
  auto w = make_world();
  ASSERT_TRUE(w);
  constexpr int k = 10;
  constexpr std::size_t n = 33;
  auto send = buffer(std::vector<std::int32_t>(n, 0));
  auto recv = buffer(std::vector<std::int32_t>(n, -1));
  for (int t = 0; t < k; ++t) {
    upload(send, mine(t, n));
    ASSERT_TRUE(w->all_reduce(send, recv).get());
    std::vector<std::int32_t> expected(n, 0);
    for (int r = 0; r < size_; ++r) {
      for (std::size_t j = 0; j < n; ++j) expected[j] += v(r, t, j);
    }
    ASSERT_EQ(read(recv), expected) << "round " << t;
  }
  if (!graphs_on(*w)) GTEST_SKIP() << "values checked; no CUDA graphs on this backend";
  const auto s = w->stats();
  EXPECT_EQ(s.graph_votes, static_cast<std::uint64_t>(k));
  // Ranks of one node vote through shared memory (ATOMR_COLL_VOTE_SHM, on unless 0).
  const char* vote_shm = std::getenv("ATOMR_COLL_VOTE_SHM");
  const bool shm_off = vote_shm != nullptr && std::string(vote_shm) == "0";
  EXPECT_EQ(s.graph_votes_shared_memory, size_ > 1 && !shm_off ? static_cast<std::uint64_t>(k) : 0u);
  EXPECT_EQ(s.graph_captures, 1u);  // the second round
  EXPECT_EQ(s.graph_launches, static_cast<std::uint64_t>(k - 2));
}

TEST_F(WorldGraphs, APackedCallRepeatedOnTheSameBuffersLaunchesItsGraph) {
  // 300 small all_reduces of 1-9 ints in one submit_group call, out of place: packed batches of
  // 256 and 44, each issued as usual, then captured (gather, all_reduce, scatter) and then
  // launched, with new inputs every round.
  auto w = make_world();
  ASSERT_TRUE(w);
  const auto p = make_packed_pairs();
  for (int t = 0; t < k_packed_rounds; ++t) {
    ASSERT_NO_FATAL_FAILURE(upload_round(p, t));
    ASSERT_TRUE(w->submit_group(packed_specs(p)).get()) << "round " << t;
    ASSERT_NO_FATAL_FAILURE(expect_round_sums(p, t));
  }
  expect_two_batches_graphed(*w);
}

TEST_F(WorldGraphs, APreparedCallSubmittedAgainLaunchesItsGraphs) {
  // The same 300 as a call prepared once (world::prepare_group) and submitted every round with
  // new inputs: its two bulk calls are issued as usual, then captured, then launched.
  auto w = make_world();
  ASSERT_TRUE(w);
  const auto p = make_packed_pairs();
  auto call = w->prepare_group(packed_specs(p));
  ASSERT_TRUE(call) << call.error_value();
  for (int t = 0; t < k_packed_rounds; ++t) {
    ASSERT_NO_FATAL_FAILURE(upload_round(p, t));
    ASSERT_TRUE(w->submit_prepared(*call).get()) << "round " << t;
    ASSERT_NO_FATAL_FAILURE(expect_round_sums(p, t));
  }
  expect_two_batches_graphed(*w);
}

TEST_F(WorldGraphs, EveryCollectiveKindLaunchesItsGraphWithCurrentContents) {
  auto w = make_world();
  ASSERT_TRUE(w);
  constexpr int k = 4;
  constexpr std::size_t n = 5;
  const auto p = static_cast<std::size_t>(size_);
  const int root = size_ - 1;
  auto small = buffer(std::vector<std::int32_t>(n, 0));
  auto wide = buffer(std::vector<std::int32_t>(n * p, 0));
  auto gathered = buffer(std::vector<std::int32_t>(n * p, -1));
  auto scattered = buffer(std::vector<std::int32_t>(n, -1));
  auto cast = buffer(std::vector<std::int32_t>(n, -1));
  auto reduced = buffer(std::vector<std::int32_t>(n, -1));
  auto exchanged = buffer(std::vector<std::int32_t>(n * p, -1));
  for (int t = 0; t < k; ++t) {
    SCOPED_TRACE("round " + std::to_string(t));
    upload(small, mine(t, n));
    upload(wide, mine(t, n * p));
    upload(reduced, std::vector<std::int32_t>(n, -1));
    ASSERT_TRUE(w->all_gather(small, gathered).get());
    ASSERT_TRUE(w->reduce_scatter(wide, scattered).get());
    ASSERT_TRUE(w->broadcast(small, cast, root).get());
    ASSERT_TRUE(w->reduce(small, reduced, reduce_op::sum, 0).get());
    ASSERT_TRUE(w->all_to_all(wide, exchanged).get());
    const auto g = read(gathered);
    const auto s = read(scattered);
    const auto c = read(cast);
    const auto rd = read(reduced);
    const auto x = read(exchanged);
    for (std::size_t j = 0; j < n; ++j) {
      std::int32_t scatter_sum = 0;
      std::int32_t reduce_sum = 0;
      for (int r = 0; r < size_; ++r) {
        const auto rr = static_cast<std::size_t>(r);
        ASSERT_EQ(g[rr * n + j], v(r, t, j)) << "all_gather, from rank " << r << ", element " << j;
        ASSERT_EQ(x[rr * n + j], v(r, t, static_cast<std::size_t>(rank_) * n + j))
            << "all_to_all, from rank " << r << ", element " << j;
        scatter_sum += v(r, t, static_cast<std::size_t>(rank_) * n + j);
        reduce_sum += v(r, t, j);
      }
      ASSERT_EQ(s[j], scatter_sum) << "reduce_scatter, element " << j;
      ASSERT_EQ(c[j], v(root, t, j)) << "broadcast, element " << j;
      ASSERT_EQ(rd[j], rank_ == 0 ? reduce_sum : -1) << "reduce, element " << j;
    }
  }
  if (!graphs_on(*w)) GTEST_SKIP() << "values checked; no CUDA graphs on this backend";
  const auto st = w->stats();
  EXPECT_EQ(st.graph_votes, 5u * k);
  EXPECT_EQ(st.graph_captures, 5u);
  EXPECT_EQ(st.graph_launches, 5u * (k - 2));
}

TEST_F(WorldGraphs, RanksThatAlternateBuffersDifferentlyStayCorrect) {
  // Rank 0 always reduces buffer a; the other ranks take turns between a and b. No rank may
  // launch a graph its peers do not launch with it (NCCL would hang or mix up the calls).
  auto w = make_world();
  ASSERT_TRUE(w);
  constexpr int k = 12;
  constexpr std::size_t n = 8;
  auto a = buffer(std::vector<std::int32_t>(n, 0));
  auto b = buffer(std::vector<std::int32_t>(n, 0));
  for (int t = 0; t < k; ++t) {
    auto& use = rank_ == 0 || t % 2 == 0 ? a : b;
    upload(use, mine(t, n));
    ASSERT_TRUE(w->all_reduce(use).get());
    std::vector<std::int32_t> expected(n, 0);
    for (int r = 0; r < size_; ++r) {
      for (std::size_t j = 0; j < n; ++j) expected[j] += v(r, t, j);
    }
    ASSERT_EQ(read(use), expected) << "round " << t;
  }
  if (!graphs_on(*w)) GTEST_SKIP() << "values checked; no CUDA graphs on this backend";
  const auto s = w->stats();
  EXPECT_EQ(s.graph_votes, static_cast<std::uint64_t>(k));
  // Alone, rank 0 repeats one buffer; with others, the ranks never hold one capture for all.
  EXPECT_EQ(s.graph_launches, size_ == 1 ? static_cast<std::uint64_t>(k - 2) : 0u);
}

TEST_F(WorldGraphs, RequestsQueuedBehindAVoteAreDecidedByItAndStayInOrder) {
  // Submitted one by one without waiting, requests pile up behind the head: one vote decides a
  // run of them (each rank issues them alone). In-place sums of one buffer: each depends on the
  // one before, so a request issued out of turn or twice shows in the value. 128 KiB: too large
  // to pack, small enough for a graph.
  auto w = make_world();
  ASSERT_TRUE(w);
  constexpr int k = 64;
  constexpr std::size_t n = 32768;
  auto b = buffer(std::vector<float>(n, static_cast<float>(rank_ + 1)));
  std::vector<cluster::future<void>> done;
  for (int t = 0; t < k; ++t) {
    done.push_back(w->submit({cluster::coll_kind::all_reduce, local::dtype::f32, {}, {b.block()}, {b.block()}}));
  }
  for (auto& f : done) ASSERT_TRUE(f.get());
  float expected = static_cast<float>(size_ * (size_ + 1) / 2);
  for (int t = 1; t < k; ++t) expected *= static_cast<float>(size_);
  EXPECT_EQ(read(b), std::vector<float>(n, expected));
  if (!graphs_on(*w)) GTEST_SKIP() << "values checked; no CUDA graphs on this backend";
  const auto s = w->stats();
  EXPECT_LE(s.graph_votes, static_cast<std::uint64_t>(k));
  // The first vote's run (at most 32) goes as usual; then at most one capture of a request and one
  // of a chain of 8 (the same key for every chain here); later requests are launched.
  EXPECT_GE(s.graph_captures, 1u);
  EXPECT_LE(s.graph_captures, 2u);
  EXPECT_GE(s.graph_launches, static_cast<std::uint64_t>(k - 32 - 1 - 8));
}

TEST_F(WorldGraphs, BackToBackRequestsGoAsChainsInOneGraphEach) {
  // Requests queued behind a vote go as chains of 8 in one graph (captured once every rank
  // issued the chain before, then launched): small ones through the packing plan (each cuts the
  // next, on one buffer) and 256 KiB ones that do not pack. In-place sums: a request of a chain
  // run out of order, twice or not at all shows in the value.
  struct row {
    const char* what;
    std::size_t n;
    int k;
  };
  for (const row& c : {row{"8 B", 1, 200}, row{"256 KiB", 32768, 200}}) {
    SCOPED_TRACE(c.what);
    auto w = make_world();
    ASSERT_TRUE(w);
    // (Powers of the rank count stay exact in f64 for 200 rounds at up to 3 ranks: 3^200 < 2^1024.)
    auto b = buffer(std::vector<double>(c.n, static_cast<double>(rank_ + 1)));
    std::vector<cluster::future<void>> done;
    for (int t = 0; t < c.k; ++t) {
      done.push_back(w->submit({cluster::coll_kind::all_reduce, local::dtype::f64, {}, {b.block()}, {b.block()}}));
    }
    for (auto& f : done) ASSERT_TRUE(f.get());
    double expected = static_cast<double>(size_ * (size_ + 1) / 2);
    for (int t = 1; t < c.k; ++t) expected *= static_cast<double>(size_);
    EXPECT_EQ(read(b), std::vector<double>(c.n, expected));
    if (!graphs_on(*w)) continue;
    const auto s = w->stats();
    EXPECT_GT(s.graph_chained, 0u) << "votes " << s.graph_votes << ", launches " << s.graph_launches;
    EXPECT_EQ(s.graph_chained % 8, 0u);
    EXPECT_GE(s.graph_captures, 1u);
  }
}

TEST_F(WorldGraphs, BuffersThatNeverRepeatStopBeingVotedOn) {
  auto w = make_world();
  ASSERT_TRUE(w);
  constexpr int k = 40;
  for (int t = 0; t < k; ++t) {
    auto fresh = buffer(mine(t, 4));
    ASSERT_TRUE(w->all_reduce(fresh).get());
    std::vector<std::int32_t> expected(4, 0);
    for (int r = 0; r < size_; ++r) {
      for (std::size_t j = 0; j < 4; ++j) expected[j] += v(r, t, j);
    }
    ASSERT_EQ(read(fresh), expected) << "round " << t;
  }
  if (!graphs_on(*w)) GTEST_SKIP() << "values checked; no CUDA graphs on this backend";
  const auto s = w->stats();
  EXPECT_EQ(s.graph_votes, 16u);  // 16 votes that launch nothing; the next 64 of the shape skip
  EXPECT_EQ(s.graph_captures, 0u);
  EXPECT_EQ(s.graph_launches, 0u);
}

TEST_F(WorldGraphs, GraphsOffByEnvironmentMeansNoVotes) {
  if (std::getenv("ATOMR_NCCL_GRAPHS") != nullptr) GTEST_SKIP() << "ATOMR_NCCL_GRAPHS is set";
  ASSERT_EQ(::setenv("ATOMR_NCCL_GRAPHS", "0", 1), 0);
  auto w = make_world();
  ::unsetenv("ATOMR_NCCL_GRAPHS");
  ASSERT_TRUE(w);
  auto b = buffer(std::vector<std::int32_t>(4, rank_));
  for (int t = 0; t < 5; ++t) ASSERT_TRUE(w->all_reduce(b, reduce_op::max).get());
  EXPECT_EQ(read(b), std::vector<std::int32_t>(4, size_ - 1));
  EXPECT_EQ(w->stats().graph_votes, 0u);
}

TEST_F(WorldGraphs, ABadGraphSettingFailsWorldCreation) {
  if (std::getenv("ATOMR_NCCL_GRAPHS") != nullptr) GTEST_SKIP() << "ATOMR_NCCL_GRAPHS is set";
  ASSERT_EQ(::setenv("ATOMR_NCCL_GRAPHS", "2", 1), 0);
  auto w = cluster::world::create(MPI_COMM_WORLD, {dev_}, {});
  ::unsetenv("ATOMR_NCCL_GRAPHS");
  ASSERT_FALSE(w);
  EXPECT_NE(w.error_value().message().find("ATOMR_NCCL_GRAPHS must be 0 or 1"), std::string::npos) << w.error_value();
}

}  // namespace
}  // namespace atomr
