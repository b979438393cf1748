// The world engine's CUDA graph votes, driven over the host backend: a wrapper (set with
// detail::set_backend_wrapper) says it can replay requests as graphs, keeps captures the way the
// NCCL backend does, refuses a launch of a capture it does not hold, and logs every decision. The
// requests still run on the host backend, so every value is checked, and each rank's log of
// decisions must equal rank 0's: NCCL hangs or mixes calls up where ranks use graphs unalike.
// (tests/gpu/test_world_graphs.cpp runs the same paths on NCCL and real graphs.)
#include <atomic>
#include <cstdlib>
#include <map>
#include <mutex>
#include <set>
#include <string>

#include "atomr/cluster/engine/backend_wrapper.hpp"
#include "world_fixture.hpp"

namespace atomr {
namespace {

using cluster::coll_kind;
using cluster::reduce_op;
using cluster::detail::coll_request;
using cluster::detail::comm_backend;
using cluster::detail::member_waits;
using graph_step = comm_backend::graph_step;

// Every decision of this process, in order: sequence number, step (0 eager, 1 capture, 2 launch)
// and capture id; a request issued without a vote is logged with step 3, each request of a
// chain with 4 + its chain's step (5 capture, 6 launch), and a packed batch (its first request)
// with 7 + its step (7 eager, 8 capture, 9 launch).
std::mutex log_mutex;
std::vector<std::uint64_t> decisions;
void note(std::uint64_t seq, std::uint64_t step, std::uint64_t id) {
  std::lock_guard lock(log_mutex);
  decisions.insert(decisions.end(), {seq, step, id});
}

// A test may hold a world's first request unfinished until it has submitted all of its own, so
// that they queue up behind it (each waits for the one before) whatever the machine's speed: a
// run of queued requests is then what the next vote sees. Each rank holds and releases its own.
std::atomic<bool> hold_first{false};
// Packed batches this process issued through issue_packed_graph, by step (eager, capture, launch).
std::atomic<int> packed_graph_steps[3] = {};
// Packed batches this process looked up for a vote, and how many of them with a key the engine
// kept for the batch (a prepared call's, see bulk_call::batch_keys).
std::atomic<int> packed_lookups{0};
std::atomic<int> packed_lookups_kept{0};
std::atomic<bool> released{true};

class graph_emulation final : public comm_backend {
 public:
  explicit graph_emulation(std::unique_ptr<comm_backend> inner) : inner_(std::move(inner)) {}

  cluster::world_backend kind() const override { return inner_->kind(); }
  int size() const override { return inner_->size(); }
  int rank(std::size_t m) const override { return inner_->rank(m); }
  std::size_t members() const override { return inner_->members(); }
  const void* origin(std::size_t m) const override { return inner_->origin(m); }
  result<void> issue(coll_request& r, const member_waits& w) override {
    note_first(r);
    note(r.seq, 3, 0);
    return inner_->issue(r, w);
  }
  result<void> issue_packed(std::span<coll_request* const> b, const member_waits& w) override {
    note_first(*b.front());
    return inner_->issue_packed(b, w);
  }
  result<void> issue_group(std::span<coll_request* const> b, const member_waits& w) override {
    note_first(*b.front());
    return inner_->issue_group(b, w);
  }
  bool stream_ordered() const override { return inner_->stream_ordered(); }
  result<void> seal(std::span<coll_request* const> issued) override { return inner_->seal(issued); }
  result<bool> finish_if_idle(std::span<coll_request* const> u) override { return inner_->finish_if_idle(u); }
  const std::vector<std::shared_ptr<void>>& events(const coll_request& r) const override { return inner_->events(r); }
  result<bool> test(coll_request& r) override {
    if (r.seq == held_ && !released.load(std::memory_order_acquire)) return false;
    return inner_->test(r);
  }
  std::optional<error> async_error() override { return inner_->async_error(); }
  void abort() override { inner_->abort(); }
  // (A world split from this one votes as well.)
  result<std::unique_ptr<comm_backend>> split(int color, int key, cluster::detail::clock::time_point d) override {
    ATOMR_ASSIGN_OR_RETURN(auto sub, inner_->split(color, key, d));
    if (!sub) return sub;
    return std::unique_ptr<comm_backend>(new graph_emulation(std::move(sub)));
  }

  std::size_t graph_limit() const override { return 1 << 20; }
  graph_holding graph_lookup(const coll_request& r) override {
    const auto k = key_of(r);
    const auto it = captures_.find(k);
    const std::uint64_t capture = it == captures_.end() ? 0 : it->second;
    return {capture, capture != 0 || seen_.contains(k)};
  }
  result<void> issue_graph(coll_request& r, const member_waits& w, graph_step step, std::uint64_t id) override {
    note_first(r);
    note(r.seq, static_cast<std::uint64_t>(step), id);
    const auto k = key_of(r);
    switch (step) {
      case graph_step::eager: seen_.insert(k); break;
      case graph_step::capture: captures_[k] = id; break;
      case graph_step::launch: {
        const auto it = captures_.find(k);
        if (it == captures_.end() || it->second != id) {
          return error(errc::internal, "launch of capture " + std::to_string(id) + ", which this rank does not hold");
        }
        break;
      }
    }
    return inner_->issue(r, w);
  }

  // A chain's requests depend on each other (a request's buffer written by the one before). The
  // host backend does not order what it issues, so the emulation runs them one after another,
  // each finished before the next is issued, as a graph runs them on a stream.
  bool graph_chains() const override { return true; }
  graph_holding graph_lookup_chain(std::span<const coll_request* const> chain) override {
    const auto k = key_of(chain);
    const auto it = captures_.find(k);
    const std::uint64_t capture = it == captures_.end() ? 0 : it->second;
    return {capture, capture != 0 || seen_.contains(k)};
  }
  void graph_note_chain(std::span<const coll_request* const> chain) override { seen_.insert(key_of(chain)); }
  result<void> issue_graph_chain(std::span<coll_request* const> chain, const member_waits& w, graph_step step,
                                 std::uint64_t id) override {
    const auto k = key_of(std::span<const coll_request* const>(chain.data(), chain.size()));
    if (step == graph_step::capture) captures_[k] = id;
    if (step == graph_step::launch) {
      const auto it = captures_.find(k);
      if (it == captures_.end() || it->second != id) {
        return error(errc::internal,
                     "launch of chain capture " + std::to_string(id) + ", which this rank does not hold");
      }
    }
    if (step == graph_step::eager) return error(errc::internal, "a chain issued eagerly");
    note_first(*chain.front());
    for (auto* r : chain) {
      note(r->seq, 4 + static_cast<std::uint64_t>(step), id);
      ATOMR_TRY(inner_->issue(*r, w));
      while (true) {
        ATOMR_ASSIGN_OR_RETURN(const bool done, inner_->test(*r));
        if (done) break;
      }
    }
    return ok();
  }

  // Packed batches: kept and checked as chains are; they run packed on the host backend.
  bool graph_packs() const override { return true; }
  graph_holding graph_lookup_packed(std::span<const coll_request* const> batch,
                                    std::vector<std::uint64_t>* kept) override {
    ++packed_lookups;
    // A kept key is used as it is, as the NCCL backend uses it: one that named other buffers
    // would find another capture, or none, and the launch's own check below would fail.
    request_key k;
    if (kept != nullptr && !kept->empty()) {
      ++packed_lookups_kept;
      k = *kept;
    } else {
      k = packed_key_of(batch);
      if (kept != nullptr) *kept = k;
    }
    const auto it = captures_.find(k);
    const std::uint64_t capture = it == captures_.end() ? 0 : it->second;
    return {capture, capture != 0 || seen_.contains(k)};
  }
  result<void> issue_packed_graph(std::span<coll_request* const> batch, const member_waits& w, graph_step step,
                                  std::uint64_t id) override {
    note_first(*batch.front());
    note(batch.front()->seq, 7 + static_cast<std::uint64_t>(step), id);
    const auto k = packed_key_of(std::span<const coll_request* const>(batch.data(), batch.size()));
    switch (step) {
      case graph_step::eager: seen_.insert(k); break;
      case graph_step::capture: captures_[k] = id; break;
      case graph_step::launch: {
        const auto it = captures_.find(k);
        if (it == captures_.end() || it->second != id) {
          return error(errc::internal,
                       "launch of packed capture " + std::to_string(id) + ", which this rank does not hold");
        }
        break;
      }
    }
    ++packed_graph_steps[static_cast<int>(step)];
    return inner_->issue_packed(batch, w);
  }

 private:
  using request_key = std::vector<std::uint64_t>;
  static request_key key_of(std::span<const coll_request* const> chain) {
    request_key k{0xc4a1, chain.size()};
    for (const auto* r : chain) {
      const auto one = key_of(*r);
      k.insert(k.end(), one.begin(), one.end());
    }
    return k;
  }
  static request_key packed_key_of(std::span<const coll_request* const> batch) {
    auto k = key_of(batch);
    k[0] = 0x9ac4;
    return k;
  }
  static request_key key_of(const coll_request& r) {
    return {static_cast<std::uint64_t>(r.spec.kind),
            static_cast<std::uint64_t>(r.spec.type),
            static_cast<std::uint64_t>(r.spec.params.op),
            static_cast<std::uint64_t>(r.spec.params.root),
            r.count,
            r.spec.send.empty() ? 0 : r.spec.send[0]->id,
            r.spec.recv.empty() ? 0 : r.spec.recv[0]->id};
  }
  void note_first(const coll_request& r) {
    if (first_seen_) return;
    first_seen_ = true;
    if (hold_first.load(std::memory_order_acquire)) held_ = r.seq;
  }
  bool first_seen_ = false;
  std::uint64_t held_ = 0;  // (sequence numbers start at 1)
  std::unique_ptr<comm_backend> inner_;
  std::map<request_key, std::uint64_t> captures_;
  std::set<request_key> seen_;
};

std::unique_ptr<comm_backend> emulate_graphs(std::unique_ptr<comm_backend> inner) {
  return std::make_unique<graph_emulation>(std::move(inner));
}

class GraphVotes : public testing::world_fixture {
 protected:
  void SetUp() override {
    world_fixture::SetUp();
    cluster::detail::set_backend_wrapper(&emulate_graphs);
    for (auto& n : packed_graph_steps) n = 0;
    packed_lookups = 0;
    packed_lookups_kept = 0;
    std::lock_guard lock(log_mutex);
    decisions.clear();
  }
  void TearDown() override {
    cluster::detail::set_backend_wrapper(nullptr);
    hold_first = false;
    released = true;
  }

  // This rank's decisions equal rank 0's, decision by decision.
  void expect_decided_alike() {
    std::vector<std::uint64_t> mine;
    {
      std::lock_guard lock(log_mutex);
      mine = decisions;
    }
    int n = static_cast<int>(mine.size());
    int most = 0;
    int least = 0;
    MPI_Allreduce(&n, &most, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
    MPI_Allreduce(&n, &least, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
    ASSERT_EQ(most, least) << "ranks logged different numbers of decisions";
    std::vector<std::uint64_t> first = mine;
    MPI_Bcast(first.data(), n, MPI_UINT64_T, 0, MPI_COMM_WORLD);
    EXPECT_EQ(mine, first);
  }
  // How many of a world's `votes` go through shared memory: all of them where it has other ranks
  // (this test's are on one machine) and ATOMR_COLL_VOTE_SHM is not 0; else none.
  static std::uint64_t shared_votes(std::uint64_t votes, int world_size) {
    const char* setting = std::getenv("ATOMR_COLL_VOTE_SHM");
    const bool off = setting != nullptr && std::string(setting) == "0";
    return world_size > 1 && !off ? votes : 0;
  }
  // One round of a packed call: `bufs[i]` (send, recv) gets this rank's values for round t (plus
  // 10000 i, so that buffers differ), all go in one per-request group, and every sum is checked.
  using buffer_pairs = std::vector<std::pair<local::gpu_ref<std::int32_t>, local::gpu_ref<std::int32_t>>>;
  // k (send, recv) pairs of n ints (send 0, recv -1).
  buffer_pairs make_pairs(std::size_t k, std::size_t n) {
    buffer_pairs out;
    for (std::size_t i = 0; i < k; ++i) {
      out.emplace_back(buffer(std::vector<std::int32_t>(n, 0)), buffer(std::vector<std::int32_t>(n, -1)));
    }
    return out;
  }
  // A call of k small all_reduces made `rounds` times, its two packed batches (256 and the rest)
  // each voted on every round: issued as usual, captured, then launched, on every rank alike.
  void expect_two_batches_graphed(const cluster::world::stats_snapshot& s, int rounds, std::size_t k) {
    EXPECT_EQ(s.graph_votes, 2u * rounds);
    EXPECT_EQ(s.graph_votes_shared_memory, shared_votes(2u * rounds, size_));
    EXPECT_EQ(packed_graph_steps[0].load(), 2);
    EXPECT_EQ(packed_graph_steps[1].load(), 2);
    EXPECT_EQ(packed_graph_steps[2].load(), 2 * (rounds - 2));
    EXPECT_EQ(s.graph_captures, 2u);
    EXPECT_EQ(s.graph_launches, (rounds - 2) * k);
    expect_decided_alike();
  }
  static int packed_graph_issues() {
    return packed_graph_steps[0].load() + packed_graph_steps[1].load() + packed_graph_steps[2].load();
  }
  // (`group`: in one submit_group call, bulk calls: see world_options::bulk.)
  // Out-of-place sums of each pair, send into recv: one call's specs.
  static std::vector<cluster::coll_spec> pair_specs(const buffer_pairs& bufs) {
    std::vector<cluster::coll_spec> specs;
    for (const auto& [send, recv] : bufs) {
      specs.push_back({coll_kind::all_reduce, local::dtype::i32, {}, {send.block()}, {recv.block()}});
    }
    return specs;
  }
  // Round t of a packed call: new inputs, the call (submit_group(each_request); submit_group if `group`; or the
  // prepared call submitted), then every sum checked.
  void packed_round(cluster::world& w, int t, const buffer_pairs& bufs, std::size_t n, bool group = false,
                    const cluster::group_call* prepared = nullptr) {
    auto value = [&](int r, std::size_t i, std::size_t j) {
      return 1000 * t + 100 * r + static_cast<std::int32_t>(j + 10000 * i);
    };
    for (std::size_t i = 0; i < bufs.size(); ++i) {
      std::vector<std::int32_t> v(n);
      for (std::size_t j = 0; j < n; ++j) v[j] = value(rank_, i, j);
      ASSERT_TRUE(dev_.upload(bufs[i].first, std::span<const std::int32_t>(v)).get());
    }
    if (prepared != nullptr) {
      ASSERT_TRUE(w.submit_prepared(*prepared).get()) << "round " << t;
    } else if (group) {
      ASSERT_TRUE(w.submit_group(pair_specs(bufs)).get()) << "round " << t;
    } else {
      for (auto& done : w.submit_group(pair_specs(bufs), cluster::each_request))
        ASSERT_TRUE(done.get()) << "round " << t;
    }
    for (std::size_t i = 0; i < bufs.size(); ++i) {
      std::vector<std::int32_t> want(n, 0);
      for (int r = 0; r < size_; ++r) {
        for (std::size_t j = 0; j < n; ++j) want[j] += value(r, i, j);
      }
      ASSERT_EQ(read(bufs[i].second), want) << "round " << t << ", buffer " << i;
    }
  }
  static std::int32_t v(int r, int t, std::size_t j) { return 1000 * t + 100 * r + static_cast<std::int32_t>(j); }
  std::vector<std::int32_t> mine(int t, std::size_t n) const {
    std::vector<std::int32_t> out(n);
    for (std::size_t j = 0; j < n; ++j) out[j] = v(rank_, t, j);
    return out;
  }
  std::vector<std::int32_t> summed(int t, std::size_t n) const {
    std::vector<std::int32_t> out(n, 0);
    for (int r = 0; r < size_; ++r) {
      for (std::size_t j = 0; j < n; ++j) out[j] += v(r, t, j);
    }
    return out;
  }
};

TEST_F(GraphVotes, ARepeatedRequestGoesAsUsualThenIsCapturedThenLaunched) {
  auto w = make_world();
  ASSERT_TRUE(w);
  constexpr int k = 10;
  auto send = buffer(std::vector<std::int32_t>(16, 0));
  auto recv = buffer(std::vector<std::int32_t>(16, -1));
  for (int t = 0; t < k; ++t) {
    ASSERT_TRUE(dev_.upload(send, std::span<const std::int32_t>(mine(t, 16))).get());
    ASSERT_TRUE(w->all_reduce(send, recv).get());
    ASSERT_EQ(read(recv), summed(t, 16)) << "round " << t;
  }
  const auto s = w->stats();
  EXPECT_EQ(s.graph_votes, static_cast<std::uint64_t>(k));
  EXPECT_EQ(s.graph_votes_shared_memory, shared_votes(k, size_));
  EXPECT_EQ(s.graph_captures, 1u);
  EXPECT_EQ(s.graph_launches, static_cast<std::uint64_t>(k - 2));
  expect_decided_alike();
}

TEST_F(GraphVotes, AWorldSplitFromAnotherVotesThroughItsOwnChannel) {
  auto w = make_world();
  ASSERT_TRUE(w);
  // Two halves (by parity), each voting on its own requests while the other votes on others.
  const int color = rank_ % 2;
  auto half = w->split(color, rank_);
  ASSERT_TRUE(half) << half.error_value().describe();
  ASSERT_TRUE(*half);
  auto& sub = **half;
  const int sub_size = sub.size();
  ASSERT_EQ(sub_size, (size_ + 1 - color) / 2);
  constexpr int k = 6;
  const std::size_t n = 8 + static_cast<std::size_t>(color);  // (the halves' shapes differ)
  auto send = buffer(std::vector<std::int32_t>(n, 0));
  auto recv = buffer(std::vector<std::int32_t>(n, -1));
  for (int t = 0; t < k; ++t) {
    ASSERT_TRUE(dev_.upload(send, std::span<const std::int32_t>(mine(t, n))).get());
    ASSERT_TRUE(sub.all_reduce(send, recv).get());
    std::vector<std::int32_t> want(n, 0);
    for (int r = color; r < size_; r += 2) {
      for (std::size_t j = 0; j < n; ++j) want[j] += v(r, t, j);
    }
    ASSERT_EQ(read(recv), want) << "round " << t;
  }
  const auto s = sub.stats();
  EXPECT_EQ(s.graph_votes, static_cast<std::uint64_t>(k));
  EXPECT_EQ(s.graph_votes_shared_memory, shared_votes(k, sub_size));
  EXPECT_EQ(s.graph_launches, static_cast<std::uint64_t>(k - 2));
  // The world it came from goes on voting through its own.
  ASSERT_TRUE(dev_.upload(send, std::span<const std::int32_t>(mine(0, n))).get());
  auto whole = buffer(std::vector<std::int32_t>(8, -1));
  auto whole_send = buffer(std::vector<std::int32_t>(8, 0));
  ASSERT_TRUE(dev_.upload(whole_send, std::span<const std::int32_t>(mine(1, 8))).get());
  ASSERT_TRUE(w->all_reduce(whole_send, whole).get());
  EXPECT_EQ(read(whole), summed(1, 8));
  EXPECT_EQ(w->stats().graph_votes_shared_memory, shared_votes(1, size_));
}

TEST_F(GraphVotes, RanksThatAlternateBuffersDifferentlyNeverLaunch) {
  auto w = make_world();
  ASSERT_TRUE(w);
  constexpr int k = 12;
  auto a = buffer(std::vector<std::int32_t>(8, 0));
  auto b = buffer(std::vector<std::int32_t>(8, 0));
  for (int t = 0; t < k; ++t) {
    auto& use = rank_ == 0 || t % 2 == 0 ? a : b;
    ASSERT_TRUE(dev_.upload(use, std::span<const std::int32_t>(mine(t, 8))).get());
    ASSERT_TRUE(w->all_reduce(use).get());
    ASSERT_EQ(read(use), summed(t, 8)) << "round " << t;
  }
  EXPECT_EQ(w->stats().graph_launches, size_ == 1 ? static_cast<std::uint64_t>(k - 2) : 0u);
  expect_decided_alike();
}

TEST_F(GraphVotes, ARepeatedPackedCallGoesAsUsualThenIsCapturedThenLaunched) {
  // 300 small all_reduces in one call: packed batches of 256 and 44 (ATOMR_COLL_CALL_BATCH), each
  // voted on as one graph: issued as usual, then captured, then launched, with every sum exact.
  auto w = make_world();
  ASSERT_TRUE(w);
  constexpr int rounds = 5;
  constexpr std::size_t k = 300;
  constexpr std::size_t n = 16;
  const auto bufs = make_pairs(k, n);
  for (int t = 0; t < rounds; ++t) packed_round(*w, t, bufs, n);
  const auto s = w->stats();
  EXPECT_EQ(s.packed, rounds * k);
  expect_two_batches_graphed(s, rounds, k);
}

TEST_F(GraphVotes, ARepeatedBulkCallGoesAsUsualThenIsCapturedThenLaunched) {
  // The same 300 in one submit_group call: bulk calls of 256 and 44, each one packed batch,
  // voted on, captured and launched as a planned call's batches are. (Not kept as a prepared
  // call: see the next test.)
  cluster::world_options o;
  o.group_cache = false;
  auto w = make_world(o);
  ASSERT_TRUE(w);
  constexpr int rounds = 5;
  constexpr std::size_t k = 300;
  constexpr std::size_t n = 16;
  const auto bufs = make_pairs(k, n);
  for (int t = 0; t < rounds; ++t) packed_round(*w, t, bufs, n, true);
  const auto s = w->stats();
  EXPECT_EQ(s.packed, rounds * k);
  EXPECT_EQ(s.agreements, (size_ == 1 ? 2u : 1u) * rounds);  // (a run of two bulk calls)
  expect_two_batches_graphed(s, rounds, k);
  EXPECT_EQ(packed_lookups_kept.load(), 0);  // (fresh entries every call: keys made each time)
  EXPECT_EQ(s.group_repeats, 0u);
}

TEST_F(GraphVotes, ARepeatedBulkCallIsKeptAsAPreparedCallAndItsBatchesGraphedAlike) {
  // The same with the call cache on (the default): round 0's call is seen, round 1's is prepared
  // and kept, and rounds 2-4 are submitted as that prepared call. The batches are voted on,
  // captured and launched as before, and the kept call's batch keys are made once (round 1).
  auto w = make_world();
  ASSERT_TRUE(w);
  constexpr int rounds = 5;
  constexpr std::size_t k = 300;
  constexpr std::size_t n = 16;
  const auto bufs = make_pairs(k, n);
  for (int t = 0; t < rounds; ++t) packed_round(*w, t, bufs, n, true);
  const auto s = w->stats();
  EXPECT_EQ(s.packed, rounds * k);
  EXPECT_EQ(s.group_repeats, static_cast<std::uint64_t>(rounds - 2));
  expect_two_batches_graphed(s, rounds, k);
  EXPECT_EQ(packed_lookups.load(), 2 * rounds);
  EXPECT_EQ(packed_lookups_kept.load(), 2 * (rounds - 2));
}

TEST_F(GraphVotes, ARepeatedPreparedCallIsCapturedThenLaunched) {
  // The same 300 as a prepared call (world::prepare_group), submitted each round with new
  // inputs: its two bulk calls go as usual, are captured, then launched, as submit_group's are.
  auto w = make_world();
  ASSERT_TRUE(w);
  constexpr int rounds = 5;
  constexpr std::size_t k = 300;
  constexpr std::size_t n = 16;
  const auto bufs = make_pairs(k, n);
  auto call = w->prepare_group(pair_specs(bufs));
  ASSERT_TRUE(call) << call.error_value();
  ASSERT_TRUE(call->bulk());
  for (int t = 0; t < rounds; ++t) ASSERT_NO_FATAL_FAILURE(packed_round(*w, t, bufs, n, false, &*call));
  const auto s = w->stats();
  EXPECT_EQ(s.packed, rounds * k);
  expect_two_batches_graphed(s, rounds, k);
  // Each batch's key made at its first vote and kept: every later vote looks it up as kept.
  EXPECT_EQ(packed_lookups.load(), 2 * rounds);
  EXPECT_EQ(packed_lookups_kept.load(), 2 * (rounds - 1));
}

TEST(BulkCallKeys, AKeptKeyIsFoundByFirstEntryAndLengthAndTheListIsBounded) {
  cluster::detail::bulk_call b;
  auto& first = b.key_of_batch(0, 256);
  EXPECT_TRUE(first.empty());  // (made by the backend at the batch's first vote)
  first = {1, 2, 3};
  EXPECT_EQ(b.key_of_batch(0, 256), (std::vector<std::uint64_t>{1, 2, 3}));
  EXPECT_TRUE(b.key_of_batch(0, 200).empty());  // another length: another batch
  b.key_of_batch(0, 200) = {4};
  EXPECT_EQ(b.key_of_batch(0, 256), (std::vector<std::uint64_t>{1, 2, 3}));
  EXPECT_EQ(b.batch_keys.size(), 2u);
  // Cuts that change every submission: the list starts again rather than growing.
  for (std::size_t at = 1; b.batch_keys.size() < cluster::detail::bulk_call::k_batch_keys_most; ++at) {
    b.key_of_batch(at, 1) = {at};
  }
  EXPECT_EQ(b.key_of_batch(0, 256), (std::vector<std::uint64_t>{1, 2, 3}));  // (still listed)
  EXPECT_TRUE(b.key_of_batch(1000, 1).empty());
  EXPECT_EQ(b.batch_keys.size(), 1u);
  EXPECT_TRUE(b.key_of_batch(0, 256).empty());
}

TEST_F(GraphVotes, PackedBatchesLargerThanTheGraphLimitAreNotVotedOn) {
  // 100 x 16 KiB packs into 1.6 MiB, over the emulated graph limit (1 MiB): no vote, no graph.
  auto w = make_world();
  ASSERT_TRUE(w);
  constexpr std::size_t k = 100;
  constexpr std::size_t n = 4096;
  const auto bufs = make_pairs(k, n);
  for (int t = 0; t < 3; ++t) packed_round(*w, t, bufs, n);
  const auto s = w->stats();
  EXPECT_EQ(s.packed, 3 * k);
  EXPECT_EQ(s.graph_votes, 0u);
  EXPECT_EQ(packed_graph_issues(), 0);
}

TEST_F(GraphVotes, WithPackGraphsOffPackedBatchesAreNotVotedOn) {
  // ATOMR_COLL_PACK_GRAPHS=0 (world_options::pack_graphs): a repeated packed call goes as usual.
  cluster::world_options o;
  o.pack_graphs = false;
  auto w = make_world(o);
  ASSERT_TRUE(w);
  constexpr std::size_t k = 100;
  const auto bufs = make_pairs(k, 4);
  for (int t = 0; t < 4; ++t) packed_round(*w, t, bufs, 4);
  EXPECT_EQ(w->stats().packed, 4 * k);
  EXPECT_EQ(w->stats().graph_votes, 0u);
  EXPECT_EQ(packed_graph_issues(), 0);
}

TEST_F(GraphVotes, RanksThatAlternatePackedBuffersDifferentlyNeverLaunch) {
  // Rank 0 takes turns between two sets of buffers, the others keep one: whatever each holds,
  // no capture is ever held by every rank, and every sum stays exact.
  auto w = make_world();
  ASSERT_TRUE(w);
  constexpr int rounds = 8;
  constexpr std::size_t k = 64;
  constexpr std::size_t n = 8;
  const auto a = make_pairs(k, n);
  const auto b = make_pairs(k, n);
  for (int t = 0; t < rounds; ++t) packed_round(*w, t, rank_ == 0 && t % 2 == 1 ? b : a, n);
  EXPECT_EQ(w->stats().graph_votes, static_cast<std::uint64_t>(rounds));
  EXPECT_EQ(packed_graph_steps[2].load(), size_ == 1 ? rounds - 4 : 0);
  expect_decided_alike();
}

TEST_F(GraphVotes, OneVoteDecidesARunOfQueuedRequestsInOrder) {
  // In-place sums of one buffer too large to pack (128 KiB), submitted without waiting: each
  // depends on the one before.
  auto w = make_world();
  ASSERT_TRUE(w);
  constexpr int k = 64;
  constexpr std::size_t n = 32768;
  auto b = buffer(std::vector<float>(n, static_cast<float>(rank_ + 1)));
  std::vector<cluster::future<void>> done;
  for (int t = 0; t < k; ++t) {
    done.push_back(w->submit({coll_kind::all_reduce, local::dtype::f32, {}, {b.block()}, {b.block()}}));
  }
  for (auto& f : done) ASSERT_TRUE(f.get());
  float expected = static_cast<float>(size_ * (size_ + 1) / 2);
  for (int t = 1; t < k; ++t) expected *= static_cast<float>(size_);
  EXPECT_EQ(read(b), std::vector<float>(n, expected));
  const auto s = w->stats();
  EXPECT_LE(s.graph_votes, static_cast<std::uint64_t>(k));
  // The first vote's run (at most 32) goes as usual; then at most one capture of a request and one
  // of a chain of 8 (its key is the same for every chain here); the rest are launched.
  EXPECT_GE(s.graph_captures, 1u);
  EXPECT_LE(s.graph_captures, 2u);
  EXPECT_GE(s.graph_launches, static_cast<std::uint64_t>(k - 32 - 1 - 8));
  expect_decided_alike();
}

// Back to back on one buffer (each request depends on the one before), runs of queued requests
// go as chains of 8 in one graph each: captured once every rank issued the chain before, then
// launched. A chain run out of order, or twice, shows in the value.
TEST_F(GraphVotes, BackToBackRequestsGoAsChainsInOrder) {
  struct row {
    const char* what;
    std::size_t n;  // elements: 2 packs (through the agreed plan), 32768 does not
    int k;
  };
  for (const row& c : {row{"8 B, packable", 2, 64}, row{"128 KiB", 32768, 64}}) {
    SCOPED_TRACE(c.what);
    // The first request stays unfinished until all are submitted: the rest queue up behind it.
    hold_first = true;
    released = false;
    auto w = make_world();
    ASSERT_TRUE(w);
    auto b = buffer(std::vector<float>(c.n, static_cast<float>(rank_ + 1)));
    std::vector<cluster::future<void>> done;
    for (int t = 0; t < c.k; ++t) {
      done.push_back(w->submit({coll_kind::all_reduce, local::dtype::f32, {}, {b.block()}, {b.block()}}));
    }
    released = true;
    for (auto& f : done) ASSERT_TRUE(f.get());
    float expected = static_cast<float>(size_ * (size_ + 1) / 2);
    for (int t = 1; t < c.k; ++t) expected *= static_cast<float>(size_);
    EXPECT_EQ(read(b), std::vector<float>(c.n, expected));
    const auto s = w->stats();
    EXPECT_GT(s.graph_chained, 0u);
    EXPECT_EQ(s.graph_chained % 8, 0u);
    EXPECT_LE(s.graph_chained, static_cast<std::uint64_t>(c.k));
    EXPECT_GE(s.graph_captures, 1u);
    EXPECT_EQ(s.requests, static_cast<std::uint64_t>(c.k));
    expect_decided_alike();
  }
}

TEST_F(GraphVotes, RanksThatQueueDifferentlyDecideAlike) {
  // Even ranks submit one request at a time, odd ranks all in one per-request group, so their
  // queues, plans and groups are made up differently: small all_reduces (which pack), all_gathers
  // (which group) and large all_reduces, each kind on a few buffers used again and again.
  auto w = make_world();
  ASSERT_TRUE(w);
  const auto p = static_cast<std::size_t>(size_);
  constexpr int rounds = 6;
  std::vector<local::gpu_ref<std::int32_t>> small, gather_in, gather_out, large;
  for (int i = 0; i < 3; ++i) {
    small.push_back(buffer(std::vector<std::int32_t>(64, rank_ + 1)));
    gather_in.push_back(buffer(std::vector<std::int32_t>(8, rank_ * 10 + i)));
    gather_out.push_back(buffer(std::vector<std::int32_t>(8 * p, -1)));
    large.push_back(buffer(std::vector<std::int32_t>(40000, 1)));
  }
  std::vector<cluster::coll_spec> specs;
  for (int t = 0; t < rounds; ++t) {
    for (std::size_t i = 0; i < 3; ++i) {
      specs.push_back(
          {coll_kind::all_reduce, local::dtype::i32, {reduce_op::max}, {small[i].block()}, {small[i].block()}});
      specs.push_back({coll_kind::all_gather, local::dtype::i32, {}, {gather_in[i].block()}, {gather_out[i].block()}});
      specs.push_back(
          {coll_kind::all_reduce, local::dtype::i32, {reduce_op::max}, {large[i].block()}, {large[i].block()}});
    }
  }
  const auto total = specs.size();
  std::vector<cluster::future<void>> done;
  if (rank_ % 2 == 0) {
    for (auto& spec : specs) done.push_back(w->submit(std::move(spec)));
  } else {
    done = w->submit_group(std::move(specs), cluster::each_request);
  }
  for (auto& f : done) ASSERT_TRUE(f.get());
  for (std::size_t i = 0; i < 3; ++i) {
    EXPECT_EQ(read(small[i]), std::vector<std::int32_t>(64, size_)) << "buffer " << i;
    EXPECT_EQ(read(large[i]), std::vector<std::int32_t>(40000, 1)) << "buffer " << i;
    const auto g = read(gather_out[i]);
    for (std::size_t r = 0; r < p; ++r) {
      EXPECT_EQ(std::vector<std::int32_t>(g.begin() + static_cast<std::ptrdiff_t>(r * 8),
                                          g.begin() + static_cast<std::ptrdiff_t>((r + 1) * 8)),
                std::vector<std::int32_t>(8, static_cast<std::int32_t>(r) * 10 + static_cast<std::int32_t>(i)))
          << "buffer " << i << ", from rank " << r;
    }
  }
  EXPECT_EQ(w->stats().requests, static_cast<std::uint64_t>(total));
  expect_decided_alike();
}

TEST_F(GraphVotes, CollectivesSubmittedTogetherStillGoInOneGroup) {
  // The vote also settles the group: four all_gathers on distinct buffers, one call.
  auto w = make_world();
  ASSERT_TRUE(w);
  const auto p = static_cast<std::size_t>(size_);
  std::vector<local::gpu_ref<std::int32_t>> in, out;
  std::vector<cluster::coll_spec> specs;
  for (int i = 0; i < 4; ++i) {
    in.push_back(buffer(std::vector<std::int32_t>(4, rank_ + i)));
    out.push_back(buffer(std::vector<std::int32_t>(4 * p, -1)));
    specs.push_back({coll_kind::all_gather, local::dtype::i32, {}, {in.back().block()}, {out.back().block()}});
  }
  for (auto& f : w->submit_group(std::move(specs), cluster::each_request)) ASSERT_TRUE(f.get());
  for (std::size_t i = 0; i < 4; ++i) {
    const auto g = read(out[i]);
    for (std::size_t r = 0; r < p; ++r) EXPECT_EQ(g[r * 4], static_cast<std::int32_t>(r + i)) << i << " " << r;
  }
  const auto s = w->stats();
  EXPECT_EQ(s.graph_votes, 1u);
  EXPECT_EQ(s.grouped, 4u);
  EXPECT_EQ(s.issues, 1u);
  expect_decided_alike();
}

// Lone small all_reduces, each waited for, open the latency window (lone requests skip the
// packing exchange). A per-request group met there still packs whole: its head goes through a vote
// (ranks that submitted it differently must all take the window alike), which closes the window
// and sends the head back to planning (without the vote the head was issued alone and the call
// went in two issues).
TEST_F(GraphVotes, ASubmitAllCallMetInTheLatencyWindowStillPacksWhole) {
  for (const bool mixed : {false, true}) {
    auto w = make_world();
    ASSERT_TRUE(w);
    auto one = buffer(std::vector<std::int32_t>(4, 1));
    for (int i = 0; i < 4; ++i) ASSERT_TRUE(w->all_reduce(one).get());
    const auto before = w->stats();
    constexpr int k = 100;
    std::vector<local::gpu_ref<std::int32_t>> bufs;
    std::vector<cluster::coll_spec> specs;
    for (int i = 0; i < k; ++i) {
      bufs.push_back(buffer(mine(i, 64)));
      specs.push_back({coll_kind::all_reduce, local::dtype::i32, {}, {bufs.back().block()}, {bufs.back().block()}});
    }
    std::vector<cluster::future<void>> done;
    if (mixed && rank_ % 2 == 1) {
      for (auto& spec : specs) done.push_back(w->submit(std::move(spec)));
    } else {
      done = w->submit_group(std::move(specs), cluster::each_request);
    }
    for (auto& f : done) ASSERT_TRUE(f.get());
    for (int i = 0; i < k; ++i) {
      ASSERT_EQ(read(bufs[static_cast<std::size_t>(i)]), summed(i, 64)) << "buffer " << i << (mixed ? ", mixed" : "");
    }
    const auto s = w->stats();
    if (size_ > 1 && !mixed) {
      EXPECT_EQ(s.packed - before.packed, static_cast<std::uint64_t>(k));
      EXPECT_EQ(s.issues - before.issues, 1u);
    }
    ASSERT_TRUE(w->all_reduce(one).get());
    std::int32_t expected = 1;
    for (int i = 0; i < 5; ++i) expected *= size_;
    EXPECT_EQ(read(one), std::vector<std::int32_t>(4, expected)) << (mixed ? "mixed" : "");
    expect_decided_alike();
  }
}

TEST_F(GraphVotes, AVoteARankNeverTakesPartInFailsByTheDeadline) {
  // The vote goes through shared memory where the ranks share a node (by MPI otherwise); either
  // way a rank that never votes is a timeout and an abort by the request's deadline, not a hang.
  if (size_ < 2) GTEST_SKIP() << "needs 2 ranks";
  using namespace std::chrono_literals;
  cluster::world_options o;
  o.op_timeout = 500ms;
  auto w = make_world(o);
  ASSERT_TRUE(w);
  auto b = buffer(std::vector<std::int32_t>(16, 1));
  ASSERT_TRUE(w->all_reduce(b).get());  // every rank voted once
  EXPECT_EQ(w->stats().graph_votes_shared_memory, shared_votes(1, size_));
  if (rank_ != 0) return;  // withholds its vote on the next one
  const auto start = std::chrono::steady_clock::now();
  auto pending = w->all_reduce(b);
  ASSERT_FALSE(pending.get());
  const auto took = std::chrono::steady_clock::now() - start;
  const auto e = pending.get().error_value();
  EXPECT_EQ(e.code(), errc::timeout) << e.describe();
  EXPECT_NE(e.message().find("all_reduce #2"), std::string::npos) << e.message();
  EXPECT_GE(took, 500ms);
  EXPECT_LT(took, 1500ms);  // deadline + 1 s
  EXPECT_EQ(w->stats().graph_votes, 2u);
  ASSERT_TRUE(w->failure());
}

TEST_F(GraphVotes, BuffersThatNeverRepeatStopBeingVotedOn) {
  auto w = make_world();
  ASSERT_TRUE(w);
  constexpr int k = 40;
  for (int t = 0; t < k; ++t) {
    auto fresh = buffer(mine(t, 4));
    ASSERT_TRUE(w->all_reduce(fresh).get());
    ASSERT_EQ(read(fresh), summed(t, 4)) << "round " << t;
  }
  const auto s = w->stats();
  EXPECT_EQ(s.graph_votes, 16u);  // 16 votes that launch nothing; the next 64 of the shape skip
  EXPECT_EQ(s.graph_launches, 0u);
  expect_decided_alike();
}

}  // namespace
}  // namespace atomr
