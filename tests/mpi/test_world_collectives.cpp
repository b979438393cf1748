// Every collective, several types and every reduction, on the host backend, with exact expected
// values: rank r's element i is (r + 1) + i % 3 (or 1 + (r + i) % 2 for prod, to stay in range).
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <numeric>
#include <random>
#include <thread>

#include "world_fixture.hpp"

namespace atomr {
namespace {

using cluster::coll_kind;
using cluster::reduce_op;
using testing::from_double;
using testing::to_double;

double value(reduce_op op, int r, std::size_t i) {
  if (op == reduce_op::prod) return 1 + static_cast<double>((static_cast<std::size_t>(r) + i) % 2);
  return r + 1 + static_cast<double>(i % 3);
}

template <typename T>
T reduced(reduce_op op, int ranks, std::size_t i) {
  double acc = value(op, 0, i);
  for (int r = 1; r < ranks; ++r) {
    const double v = value(op, r, i);
    switch (op) {
      case reduce_op::sum:
      case reduce_op::avg: acc += v; break;
      case reduce_op::prod: acc *= v; break;
      case reduce_op::min: acc = std::min(acc, v); break;
      case reduce_op::max: acc = std::max(acc, v); break;
    }
  }
  if (op != reduce_op::avg) return from_double<T>(acc);
  if constexpr (std::is_integral_v<T>) {
    return static_cast<T>(static_cast<T>(acc) / static_cast<T>(ranks));  // truncates, as NCCL does
  } else {
    return from_double<T>(acc / ranks);
  }
}

template <typename T>
std::vector<T> inputs(reduce_op op, int r, std::size_t n) {
  std::vector<T> v(n);
  for (std::size_t i = 0; i < n; ++i) v[i] = from_double<T>(value(op, r, i));
  return v;
}

class Collectives : public testing::world_fixture {
 protected:
  template <typename T>
  void all_reduce_every_op() {
    auto w = make_world();
    ASSERT_TRUE(w);
    constexpr std::size_t n = 1031;
    for (auto op : {reduce_op::sum, reduce_op::prod, reduce_op::min, reduce_op::max, reduce_op::avg}) {
      SCOPED_TRACE(std::string(cluster::to_string(op)) + " " +
                   std::string(local::to_string(local::dtype_of<T>::value)));
      auto send = buffer(inputs<T>(op, rank_, n));
      auto recv = buffer(std::vector<T>(n));
      ASSERT_TRUE(w->all_reduce(send, recv, op).get());
      auto in_place = buffer(inputs<T>(op, rank_, n));
      ASSERT_TRUE(w->all_reduce(in_place, op).get());
      const auto got = read(recv);
      const auto got_in_place = read(in_place);
      for (std::size_t i = 0; i < n; ++i) {
        ASSERT_EQ(to_double(got[i]), to_double(reduced<T>(op, size_, i))) << "element " << i;
        ASSERT_EQ(to_double(got_in_place[i]), to_double(reduced<T>(op, size_, i))) << "element " << i;
      }
      // The send buffer of an out-of-place reduction is left alone.
      EXPECT_EQ(read(send), inputs<T>(op, rank_, n));
    }
  }
};

TEST_F(Collectives, AllReduceI8) { all_reduce_every_op<std::int8_t>(); }
TEST_F(Collectives, AllReduceU8) { all_reduce_every_op<std::uint8_t>(); }
TEST_F(Collectives, AllReduceI32) { all_reduce_every_op<std::int32_t>(); }
TEST_F(Collectives, AllReduceU32) { all_reduce_every_op<std::uint32_t>(); }
TEST_F(Collectives, AllReduceI64) { all_reduce_every_op<std::int64_t>(); }
TEST_F(Collectives, AllReduceU64) { all_reduce_every_op<std::uint64_t>(); }
TEST_F(Collectives, AllReduceF16) { all_reduce_every_op<local::f16_t>(); }
TEST_F(Collectives, AllReduceBf16) { all_reduce_every_op<local::bf16_t>(); }
TEST_F(Collectives, AllReduceF32) { all_reduce_every_op<float>(); }
TEST_F(Collectives, AllReduceF64) { all_reduce_every_op<double>(); }

TEST_F(Collectives, BroadcastFromEveryRoot) {
  auto w = make_world();
  ASSERT_TRUE(w);
  for (int root = 0; root < size_; ++root) {
    auto send = buffer(inputs<std::int64_t>(reduce_op::sum, rank_, 300));
    auto recv = buffer(std::vector<std::int64_t>(300, -1));
    ASSERT_TRUE(w->broadcast(send, recv, root).get());
    EXPECT_EQ(read(recv), inputs<std::int64_t>(reduce_op::sum, root, 300));
    auto in_place = buffer(inputs<float>(reduce_op::sum, rank_, 77));
    ASSERT_TRUE(w->broadcast(in_place, root).get());
    EXPECT_EQ(read(in_place), inputs<float>(reduce_op::sum, root, 77));
  }
}

TEST_F(Collectives, ReduceToEveryRoot) {
  auto w = make_world();
  ASSERT_TRUE(w);
  for (int root = 0; root < size_; ++root) {
    for (auto op : {reduce_op::sum, reduce_op::max, reduce_op::avg}) {
      auto send = buffer(inputs<double>(op, rank_, 64));
      auto recv = buffer(std::vector<double>(64, -1));
      ASSERT_TRUE(w->reduce(send, recv, op, root).get());
      const auto got = read(recv);
      for (std::size_t i = 0; i < 64; ++i) {
        // Only the root receives; elsewhere recv is untouched.
        ASSERT_EQ(got[i], rank_ == root ? reduced<double>(op, size_, i) : -1) << "root " << root << " element " << i;
      }
    }
  }
}

TEST_F(Collectives, AllGatherOutOfPlaceAndInPlace) {
  auto w = make_world();
  ASSERT_TRUE(w);
  constexpr std::size_t n = 129;
  const auto n_ranks = static_cast<std::size_t>(size_);
  auto send = buffer(inputs<std::uint32_t>(reduce_op::sum, rank_, n));
  auto recv = buffer(std::vector<std::uint32_t>(n * n_ranks));
  ASSERT_TRUE(w->all_gather(send, recv).get());
  std::vector<std::uint32_t> expected;
  for (int r = 0; r < size_; ++r) {
    const auto part = inputs<std::uint32_t>(reduce_op::sum, r, n);
    expected.insert(expected.end(), part.begin(), part.end());
  }
  EXPECT_EQ(read(recv), expected);

  // In place: this rank's block already sits at rank * n.
  std::vector<std::uint32_t> mine(n * n_ranks, 0);
  const auto own = inputs<std::uint32_t>(reduce_op::sum, rank_, n);
  std::copy(own.begin(), own.end(), mine.begin() + static_cast<std::ptrdiff_t>(n) * rank_);
  auto in_place = buffer(mine);
  ASSERT_TRUE(w->all_gather(in_place, in_place, n).get());
  EXPECT_EQ(read(in_place), expected);
}

TEST_F(Collectives, ReduceScatterOutOfPlaceAndInPlace) {
  auto w = make_world();
  ASSERT_TRUE(w);
  constexpr std::size_t n = 50;
  const auto total = n * static_cast<std::size_t>(size_);
  for (auto op : {reduce_op::sum, reduce_op::min, reduce_op::avg}) {
    auto send = buffer(inputs<std::int32_t>(op, rank_, total));
    auto recv = buffer(std::vector<std::int32_t>(n));
    ASSERT_TRUE(w->reduce_scatter(send, recv, op).get());
    const auto got = read(recv);
    auto in_place = buffer(inputs<std::int32_t>(op, rank_, total));
    ASSERT_TRUE(w->reduce_scatter(in_place, in_place, op, n).get());
    const auto got_in_place = read(in_place);
    for (std::size_t i = 0; i < n; ++i) {
      const auto global = static_cast<std::size_t>(rank_) * n + i;
      ASSERT_EQ(got[i], reduced<std::int32_t>(op, size_, global)) << i;
      ASSERT_EQ(got_in_place[global], reduced<std::int32_t>(op, size_, global)) << i;
    }
  }
}

TEST_F(Collectives, AllToAll) {
  auto w = make_world();
  ASSERT_TRUE(w);
  constexpr std::size_t n = 33;
  const auto total = n * static_cast<std::size_t>(size_);
  // Block p of rank r holds 1000 r + p, element by element plus i.
  std::vector<std::int64_t> mine(total);
  for (std::size_t p = 0; p < static_cast<std::size_t>(size_); ++p) {
    for (std::size_t i = 0; i < n; ++i) mine[p * n + i] = 1000 * rank_ + static_cast<std::int64_t>(p * 10 + i);
  }
  auto send = buffer(mine);
  auto recv = buffer(std::vector<std::int64_t>(total));
  ASSERT_TRUE(w->all_to_all(send, recv).get());
  const auto got = read(recv);
  for (std::size_t r = 0; r < static_cast<std::size_t>(size_); ++r) {
    for (std::size_t i = 0; i < n; ++i) {
      ASSERT_EQ(got[r * n + i], 1000 * static_cast<std::int64_t>(r) + static_cast<std::int64_t>(rank_) * 10 +
                                    static_cast<std::int64_t>(i));
    }
  }
}

TEST_F(Collectives, SendRecvAroundARing) {
  auto w = make_world();
  ASSERT_TRUE(w);
  const int next = (rank_ + 1) % size_;
  const int prev = (rank_ + size_ - 1) % size_;
  auto out = buffer(inputs<float>(reduce_op::sum, rank_, 500));
  auto in = buffer(std::vector<float>(500));
  // Submitted together, they are issued as one group: no rank waits for its receive before it
  // sends, and on one rank the send to itself finds its receive (NCCL requires both in a group).
  auto done = w->submit_group({{coll_kind::send, local::dtype::f32, {reduce_op::sum, next, 0}, {out.block()}, {}},
                               {coll_kind::recv, local::dtype::f32, {reduce_op::sum, prev, 0}, {}, {in.block()}}},
                              cluster::each_request);
  ASSERT_TRUE(done[0].get());
  ASSERT_TRUE(done[1].get());
  EXPECT_EQ(read(in), inputs<float>(reduce_op::sum, prev, 500));
  EXPECT_EQ(w->stats().requests, 2u);
  EXPECT_EQ(w->stats().issues, 1u);  // one group
}

TEST_F(Collectives, BarrierAndOrderOfManyRequests) {
  auto w = make_world();
  ASSERT_TRUE(w);
  ASSERT_TRUE(w->barrier().get());
  // 50 dependent in-place sums on one buffer, none awaited until the end: each must see the
  // previous one's result, so the value is multiplied by the rank count 50 times... modulo 2^64.
  auto b = buffer(std::vector<std::uint64_t>(8, 1));
  std::vector<cluster::future<void>> pending;
  for (int i = 0; i < 50; ++i) pending.push_back(w->all_reduce(b));
  for (auto& f : pending) ASSERT_TRUE(f.get());
  std::uint64_t expected = 1;
  for (int i = 0; i < 50; ++i) expected *= static_cast<std::uint64_t>(size_);
  EXPECT_EQ(read(b), std::vector<std::uint64_t>(8, expected));
  EXPECT_EQ(w->stats().requests, 51u);
}

// Sizes on both sides of ATOMR_HOST_RD_BYTES (64 KiB: point-to-point recursive doubling up to it,
// MPI_Iallreduce above), seeded random floats whose sums round: the sums are right within float
// rounding, and every rank holds the same bits.
TEST_F(Collectives, AllReducesAroundThePointToPointLimitGiveEveryRankTheSameBits) {
  auto w = make_world();
  ASSERT_TRUE(w);
  auto values = [](int r, std::size_t n) {
    std::mt19937 gen(static_cast<std::uint32_t>(1234 + r));
    std::uniform_real_distribution<float> d(-1.f, 1.f);
    std::vector<float> v(n);
    for (auto& x : v) x = d(gen);
    return v;
  };
  for (const std::size_t n : {1, 16383, 16384, 16385, 70000}) {
    SCOPED_TRACE(std::to_string(n) + " floats");
    auto b = buffer(values(rank_, n));
    ASSERT_TRUE(w->all_reduce(b).get());
    const auto got = read(b);
    std::vector<double> expected(n, 0.0);
    for (int r = 0; r < size_; ++r) {
      const auto v = values(r, n);
      for (std::size_t i = 0; i < n; ++i) expected[i] += v[i];
    }
    for (std::size_t i = 0; i < n; ++i) ASSERT_NEAR(got[i], expected[i], 1e-5 * size_) << "element " << i;
    auto first = got;
    ASSERT_EQ(MPI_Bcast(first.data(), static_cast<int>(n), MPI_FLOAT, 0, MPI_COMM_WORLD), MPI_SUCCESS);
    ASSERT_EQ(std::memcmp(first.data(), got.data(), n * sizeof(float)), 0) << "rank " << rank_ << " differs from 0";
  }
}

// min and max are commutative but not symmetric in every bit (NaN against a number, +0 against
// -0 keep one operand): every rank must still hold the same bits.
TEST_F(Collectives, MinAndMaxOfNaNAndSignedZerosGiveEveryRankTheSameBits) {
  auto w = make_world();
  ASSERT_TRUE(w);
  const float nan = std::numeric_limits<float>::quiet_NaN();
  for (auto op : {reduce_op::min, reduce_op::max}) {
    SCOPED_TRACE(std::string(cluster::to_string(op)));
    // Element 0: NaN on rank 0, 1 elsewhere; element 1: +0 on even ranks, -0 on odd ones.
    auto b = buffer(std::vector<float>{rank_ == 0 ? nan : 1.f, rank_ % 2 == 0 ? 0.f : -0.f});
    ASSERT_TRUE(w->all_reduce(b, op).get());
    const auto got = read(b);
    auto first = got;
    ASSERT_EQ(MPI_Bcast(first.data(), 2, MPI_FLOAT, 0, MPI_COMM_WORLD), MPI_SUCCESS);
    EXPECT_EQ(std::memcmp(first.data(), got.data(), 2 * sizeof(float)), 0) << "rank " << rank_ << " differs from 0";
    EXPECT_EQ(got[1], 0.f);
  }
}

TEST_F(Collectives, DeviceReadsWaitForACollectiveThatIsStillPending) {
  auto w = make_world();
  ASSERT_TRUE(w);
  auto b = buffer(std::vector<std::int32_t>(1000, rank_ + 1));
  // The download is asked for before the reduction has finished; it must see the reduced values.
  auto reduced_f = w->all_reduce(b);
  std::vector<std::int32_t> out(1000);
  auto downloaded = dev_.download(b, std::span<std::int32_t>(out));
  ASSERT_TRUE(reduced_f.get());
  ASSERT_TRUE(downloaded.get());
  EXPECT_EQ(out, std::vector<std::int32_t>(1000, size_ * (size_ + 1) / 2));
}

// A run of requests issued together shares one completion (NCCL: one event per run, "sealed"
// after the last); a device read asked for right behind the run must still see every write of
// it, and a request of the run never completes before the writes before it.
TEST_F(Collectives, DeviceReadsWaitForARunOfPendingCollectives) {
  auto w = make_world();
  ASSERT_TRUE(w);
  auto b = buffer(std::vector<std::uint64_t>(16, 5));
  constexpr int k = 100;
  std::vector<cluster::future<void>> pending;
  for (int i = 0; i < k; ++i) pending.push_back(w->all_reduce(b));
  std::vector<std::uint64_t> out(16);
  auto downloaded = dev_.download(b, std::span<std::uint64_t>(out));
  ASSERT_TRUE(downloaded.get());
  std::uint64_t expected = 5;  // modulo 2^64, as the sums wrap
  for (int i = 0; i < k; ++i) expected *= static_cast<std::uint64_t>(size_);
  EXPECT_EQ(out, std::vector<std::uint64_t>(16, expected));
  for (auto& f : pending) ASSERT_TRUE(f.get());
  EXPECT_EQ(w->stats().requests, static_cast<std::uint64_t>(k));
}

TEST_F(Collectives, SmallAllReducesSubmittedTogetherArePacked) {
  auto w = make_world();
  ASSERT_TRUE(w);
  constexpr int k = 100;  // (one part: see LongSubmitAllCallsAreHandedOverInParts)
  const auto bufs = counting_buffers(k, 512);
  auto specs = sums_in_place(bufs);
  // A second reduction of buffer 0 depends on the first: it must not be packed with it.
  specs.push_back(sum_in_place(bufs[0]));
  auto done = w->submit_group(std::move(specs), cluster::each_request);
  for (auto& f : done) ASSERT_TRUE(f.get());
  for (int i = 0; i < k; ++i) {
    ASSERT_EQ(read(bufs[static_cast<std::size_t>(i)]), std::vector<float>(512, summed(i, i == 0 ? 2 : 1)))
        << "buffer " << i;
  }
  const auto s = w->stats();
  EXPECT_EQ(s.requests, static_cast<std::uint64_t>(k + 1));
  EXPECT_EQ(s.packed, static_cast<std::uint64_t>(k));
  EXPECT_EQ(s.issues, 2u);
  EXPECT_EQ(s.agreements, 1u);  // one plan covered both batches
}

// Packs above ATOMR_HOST_RD_BYTES (64 KiB) go through shared memory in slices, one per rank (or,
// with ATOMR_HOST_SHM_BYTES=0, by MPI_Iallreduce from one pooled buffer into another). Several in flight at once, from
// calls not waited for in between, and their buffers reused from the pool: every call's values come back exact, none
// mixed with another's.
TEST_F(Collectives, LargePacksInFlightTogetherStayExact) {
  auto w = make_world();
  ASSERT_TRUE(w);
  constexpr int k_calls = 4;
  constexpr int k = 100;  // x 2 KiB: a 200 KiB pack per call
  std::vector<std::vector<local::gpu_ref<float>>> sets;
  std::vector<cluster::future<void>> done;
  // Buffer i of call c holds rank + i + 1000 c: a pack that read another call's data would show.
  auto value = [&](int c, int i) { return static_cast<float>(i + 1000 * c); };
  for (int c = 0; c < k_calls; ++c) {
    sets.emplace_back();
    for (int i = 0; i < k; ++i)
      sets.back().push_back(buffer(std::vector<float>(512, static_cast<float>(rank_) + value(c, i))));
    std::vector<cluster::coll_spec> specs;
    for (const auto& b : sets.back()) specs.push_back(sum_in_place(b));
    for (auto& f : w->submit_group(std::move(specs), cluster::each_request)) done.push_back(std::move(f));
  }
  for (auto& f : done) ASSERT_TRUE(f.get());
  for (int c = 0; c < k_calls; ++c) {
    for (int i = 0; i < k; ++i) {
      const float expected = static_cast<float>(size_ * (size_ - 1) / 2) + static_cast<float>(size_) * value(c, i);
      ASSERT_EQ(read(sets[static_cast<std::size_t>(c)][static_cast<std::size_t>(i)]), std::vector<float>(512, expected))
          << "call " << c << ", buffer " << i;
    }
  }
  if (size_ > 1) {
    EXPECT_EQ(w->stats().packed, static_cast<std::uint64_t>(k_calls * k));
  }
}

// Whether host buffers may be shared with the node's other ranks (not ATOMR_HOST_ARENA_MOST=0,
// which the test command also runs): shared-memory reductions over 16 KiB then go direct.
bool arena_shared() {
  const char* v = std::getenv("ATOMR_HOST_ARENA_MOST");
  return v == nullptr || std::string(v) != "0";
}

// Whether every rank has this rank's host name.
bool one_host() {
  char mine[256] = {};
  gethostname(mine, sizeof(mine) - 1);
  int size = 1;
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  std::vector<char> all(sizeof(mine) * static_cast<std::size_t>(size));
  MPI_Allgather(mine, sizeof(mine), MPI_CHAR, all.data(), sizeof(mine), MPI_CHAR, MPI_COMM_WORLD);
  for (int r = 0; r < size; ++r) {
    if (std::strcmp(all.data() + sizeof(mine) * static_cast<std::size_t>(r), mine) != 0) return false;
  }
  return true;
}

// Where every rank is on one host, the host backend reduces all_reduces through shared memory
// (unless ATOMR_HOST_SHM_BYTES=0, which the test command also runs; ranks on several hosts, as in
// the multihost tests, use MPI): sizes on both sides of the whole/sliced boundary, out of place and
// in place, give exact sums.
TEST_F(Collectives, AllReducesGoThroughSharedMemoryOnOneNode) {
  const bool same_host = one_host();  // (before anything a rank may return early from)
  auto w = make_world();
  ASSERT_TRUE(w);
  const char* env = std::getenv("ATOMR_HOST_SHM_BYTES");
  // (The gpu build's NCCL world never uses it.)
  const bool off =
      (env != nullptr && std::strcmp(env, "0") == 0) || !same_host || w->backend() != cluster::world_backend::host;
  std::vector<local::gpu_ref<float>> bufs;
  std::vector<local::gpu_ref<float>> outs;
  std::vector<cluster::future<void>> done;
  const std::size_t sizes[] = {1, 2, 4095, 4096, 4097, 100000};  // elements: 4 B .. 400 KB
  for (std::size_t i = 0; i < std::size(sizes); ++i) {
    std::vector<float> v(sizes[i]);
    for (std::size_t j = 0; j < v.size(); ++j) v[j] = static_cast<float>((rank_ + 1) * (j % 97) + i);
    bufs.push_back(buffer(v));
    outs.push_back(buffer(std::vector<float>(sizes[i], -1.0F)));
    done.push_back(w->all_reduce(bufs.back(), outs.back(), cluster::reduce_op::sum));
  }
  // (In place after the reads are done: a pending collective's inputs must not be written.)
  for (auto& f : done) ASSERT_TRUE(f.get());
  done.clear();
  for (const auto& b : bufs) done.push_back(w->all_reduce(b, cluster::reduce_op::sum));
  for (auto& f : done) ASSERT_TRUE(f.get());
  const double ranks = size_ * (size_ + 1) / 2.0;
  for (std::size_t i = 0; i < std::size(sizes); ++i) {
    const auto out = read(outs[i]);
    const auto in_place = read(bufs[i]);
    for (std::size_t j = 0; j < sizes[i]; ++j) {
      const auto expected = static_cast<float>(ranks * static_cast<double>(j % 97) + static_cast<double>(size_ * i));
      ASSERT_EQ(out[j], expected) << "size " << sizes[i] << ", element " << j;
      ASSERT_EQ(in_place[j], expected) << "size " << sizes[i] << ", element " << j << " (in place)";
    }
  }
  const auto s = w->stats();
  if (size_ == 1 || off) {
    EXPECT_EQ(s.shared_memory, 0u);
  } else {
    EXPECT_EQ(s.shared_memory, s.issues) << "every all_reduce here fits the default ring (4 MiB)";
  }
}

// A small ring (64 KiB a rank: reductions up to 32 KiB) under hundreds of all_reduces in flight,
// alone and packed, of seeded random sizes: its space is taken in order, wraps around many
// times, and is reused only once every rank is done with it; every value comes back exact.
TEST_F(Collectives, ASmallSharedMemoryRingWrapsAroundWithManyReductionsInFlight) {
  const bool same_host = one_host();
  const char* before = std::getenv("ATOMR_HOST_SHM_BYTES");
  const std::string saved = before != nullptr ? before : "";
  setenv("ATOMR_HOST_SHM_BYTES", "65536", 1);
  auto w = make_world();
  if (before != nullptr) {
    setenv("ATOMR_HOST_SHM_BYTES", saved.c_str(), 1);
  } else {
    unsetenv("ATOMR_HOST_SHM_BYTES");
  }
  ASSERT_TRUE(w);
  std::mt19937 gen(20261127);                                 // the same sizes on every rank
  std::uniform_int_distribution<std::size_t> elems(1, 8192);  // up to 32 KiB
  constexpr int k = 600;
  std::vector<local::gpu_ref<std::int32_t>> bufs;
  std::vector<cluster::future<void>> done;
  auto value = [&](int i, std::size_t j, int rank) {
    return static_cast<std::int32_t>((rank + 1) * 1000 + i + j % 13);
  };
  std::vector<cluster::coll_spec> together;
  for (int i = 0; i < k; ++i) {
    std::vector<std::int32_t> v(elems(gen));
    for (std::size_t j = 0; j < v.size(); ++j) v[j] = value(i, j, rank_);
    bufs.push_back(buffer(v));
    if (i % 3 == 0) {
      together.push_back({cluster::coll_kind::all_reduce,
                          local::dtype::i32,
                          {cluster::reduce_op::sum, 0, 0},
                          {bufs.back().block()},
                          {bufs.back().block()}});
    } else {
      done.push_back(w->all_reduce(bufs.back(), cluster::reduce_op::sum));
    }
    if (together.size() == 50) {
      for (auto& f : w->submit_group(std::move(together), cluster::each_request)) done.push_back(std::move(f));
      together.clear();
    }
  }
  for (auto& f : w->submit_group(std::move(together), cluster::each_request)) done.push_back(std::move(f));
  for (auto& f : done) ASSERT_TRUE(f.get());
  for (int i = 0; i < k; ++i) {
    const auto got = read(bufs[static_cast<std::size_t>(i)]);
    for (std::size_t j = 0; j < got.size(); ++j) {
      std::int32_t expected = 0;
      for (int r = 0; r < size_; ++r) expected += value(i, j, r);
      ASSERT_EQ(got[j], expected) << "request " << i << ", element " << j << " of " << got.size();
    }
  }
  if (size_ > 1) {
    const auto s = w->stats();
    if (same_host && w->backend() == cluster::world_backend::host) {
      EXPECT_GT(s.shared_memory, 0u);
      if (arena_shared()) {
        EXPECT_GT(s.shared_memory_direct, 0u) << "packs over 16 KiB go direct where every rank maps the others' arenas";
      } else {
        EXPECT_EQ(s.shared_memory_direct, 0u);
      }
    }
    EXPECT_GT(s.packed, 0u);
  }
}

// Direct shared-memory reductions (shm_allreduce.hpp) where some pieces are not in the shared
// arena: even ranks take every buffer from the heap (host_arena_most 0), odd ranks only
// those up to 4 KiB from the arena, so one pack mixes pieces read where they are with pieces
// copied through the ring. Seeded sizes, in place and not, sums of f32 (combined in C++) and
// maxima of i32 (MPI_Reduce_local): every value exact on every rank.
TEST_F(Collectives, DirectReductionsMixBuffersInAndOutOfTheSharedArena) {
  const bool same_host = one_host();
  if (dev_.kind() != local::device_kind::host) GTEST_SKIP() << "host devices only (the arena is theirs)";
  local::actor_system sys;  // (a second host device needs a system of its own)
  local::device_options options;
  options.host_arena_most = rank_ % 2 == 0 ? 0 : 4096;
  auto dev = local::device::start(sys, 0, local::device_kind::host, options);
  ASSERT_TRUE(dev) << dev.error_value();
  auto made = cluster::world::create(MPI_COMM_WORLD, {*dev}, {});
  ASSERT_TRUE(made) << made.error_value();
  auto& w = *made;
  std::mt19937 gen(20261128);                                 // the same sizes on every rank
  std::uniform_int_distribution<std::size_t> elems(1, 3000);  // up to 12 KiB: 1-3 KiB straddle 4 KiB
  constexpr int k = 240;
  auto sum_in = [&](int i, std::size_t j, int r) { return static_cast<float>((r + 1) * 3 + i % 7 + j % 11); };
  auto max_in = [&](int i, std::size_t j, int r) { return static_cast<std::int32_t>((r * 37 + i + j) % 101); };
  std::vector<local::gpu_ref<float>> sums_in, sums_out;
  std::vector<local::gpu_ref<std::int32_t>> maxes;
  std::vector<cluster::coll_spec> sum_specs, max_specs;
  for (int i = 0; i < k; ++i) {
    const std::size_t n = elems(gen);
    std::vector<float> v(n);
    std::vector<std::int32_t> m(n);
    for (std::size_t j = 0; j < n; ++j) {
      v[j] = sum_in(i, j, rank_);
      m[j] = max_in(i, j, rank_);
    }
    auto up = [&](auto& d, const auto& values) {
      using T = typename std::decay_t<decltype(values)>::value_type;
      auto b = d.template allocate<T>(values.size()).get().value();
      EXPECT_TRUE(d.upload(b, std::span<const T>(values)).get());
      return b;
    };
    sums_in.push_back(up(*dev, v));
    // Every third out of place (into a buffer of its own, which may sit elsewhere than the input).
    sums_out.push_back(i % 3 == 0 ? up(*dev, std::vector<float>(n, -1.0f)) : sums_in.back());
    maxes.push_back(up(*dev, m));
    sum_specs.push_back({coll_kind::all_reduce,
                         local::dtype::f32,
                         {reduce_op::sum, 0, 0},
                         {sums_in.back().block()},
                         {sums_out.back().block()}});
    max_specs.push_back({coll_kind::all_reduce,
                         local::dtype::i32,
                         {reduce_op::max, 0, 0},
                         {maxes.back().block()},
                         {maxes.back().block()}});
  }
  // In calls of 40 sums, then 40 maxima: each call packs into reductions well over 16 KiB.
  std::vector<cluster::future<void>> done;
  constexpr std::size_t k_call = 40;
  for (std::size_t at = 0; at < sum_specs.size(); at += k_call) {
    for (auto* specs : {&sum_specs, &max_specs}) {
      std::vector<cluster::coll_spec> call(
          specs->begin() + static_cast<std::ptrdiff_t>(at),
          specs->begin() + static_cast<std::ptrdiff_t>(std::min(at + k_call, specs->size())));
      for (auto& f : w->submit_group(std::move(call), cluster::each_request)) done.push_back(std::move(f));
    }
  }
  for (auto& f : done) ASSERT_TRUE(f.get());
  auto down = [&]<typename T>(const local::gpu_ref<T>& b) {
    std::vector<T> out(b.size());
    EXPECT_TRUE(dev->download(b, std::span<T>(out)).get());
    return out;
  };
  for (int i = 0; i < k; ++i) {
    const auto s = down(sums_out[static_cast<std::size_t>(i)]);
    const auto m = down(maxes[static_cast<std::size_t>(i)]);
    for (std::size_t j = 0; j < s.size(); ++j) {
      float want = 0;
      std::int32_t most = std::numeric_limits<std::int32_t>::min();
      for (int r = 0; r < size_; ++r) {
        want += sum_in(i, j, r);
        most = std::max(most, max_in(i, j, r));
      }
      ASSERT_EQ(s[j], want) << "sum " << i << ", element " << j << " of " << s.size();
      ASSERT_EQ(m[j], most) << "max " << i << ", element " << j << " of " << m.size();
    }
  }
  const auto st = w->stats();
  // (Where the shared memory is on at all: AllReducesGoThroughSharedMemoryOnOneNode checks that.)
  if (size_ > 1 && same_host && arena_shared() && st.shared_memory > 0) {
    EXPECT_GT(st.shared_memory_direct, 0u);
  } else {
    EXPECT_EQ(st.shared_memory_direct, 0u);
  }
}

// A latency-bound caller (one small all_reduce at a time, each waited for) opens a window in
// which lone requests skip the packing exchange; requests submitted together still pack there.
TEST_F(Collectives, RequestsSubmittedTogetherPackInsideTheLatencyWindow) {
  auto w = make_world();
  ASSERT_TRUE(w);
  auto one = buffer(std::vector<float>(4, 1.0F));
  for (int i = 0; i < 4; ++i) ASSERT_TRUE(w->all_reduce(one).get());
  const auto before = w->stats();
  constexpr int k = 100;
  const auto bufs = counting_buffers(k, 64);
  auto specs = sums_in_place(bufs);
  for (auto& f : w->submit_group(std::move(specs), cluster::each_request)) ASSERT_TRUE(f.get());
  for (int i = 0; i < k; ++i) {
    ASSERT_EQ(read(bufs[static_cast<std::size_t>(i)]), std::vector<float>(64, summed(i, 1))) << "buffer " << i;
  }
  const auto s = w->stats();
  EXPECT_EQ(s.packed - before.packed, static_cast<std::uint64_t>(k));
  EXPECT_EQ(s.issues - before.issues, 1u);
  // And a lone request right after still gives the right sum.
  ASSERT_TRUE(w->all_reduce(one).get());
  EXPECT_EQ(read(one), std::vector<float>(4, std::pow(static_cast<float>(size_), 5.0F)));
}

// The window opens after three lone exchanges on consecutive requests (world_engine_impl.hpp,
// k_lone_run): a caller that waits for each request pays exchanges for its first four (the
// fourth was decided before the third's exchange was in), then none while the window stays open;
// a burst that begins at an idle engine, with only its first one or two requests alone, opens
// none and packs. On the host backend (the NCCL backend's graph votes take such requests too).
TEST_F(Collectives, ALatencyBoundCallerSkipsTheExchangeAfterThreeLoneOnes) {
  auto w = make_world();
  ASSERT_TRUE(w);
  auto one = buffer(std::vector<float>(4, 1.0F));
  const auto before = w->stats();
  constexpr int k = 40;
  for (int i = 0; i < k; ++i) ASSERT_TRUE(w->all_reduce(one).get()) << "request " << i;
  EXPECT_EQ(read(one), std::vector<float>(4, std::pow(static_cast<float>(size_), static_cast<float>(k))));
  if (size_ > 1 && w->backend() == cluster::world_backend::host) {
    EXPECT_EQ(w->stats().agreements - before.agreements, 4u);
  }
}

TEST_F(Collectives, ASubmitAllCallsFuturesRunTheirContinuationsOnceWithSuccess) {
  // A per-request group's futures hear by the world's done mark and are settled after: each
  // continuation added before the mark runs once, at the settle (by the world's end at the
  // latest); one added after runs at once; every value is right.
  auto w = make_world();
  ASSERT_TRUE(w);
  constexpr int k = 300;
  const auto bufs = counting_buffers(k, 16);
  auto specs = sums_in_place(bufs);
  auto done = w->submit_group(std::move(specs), cluster::each_request);
  std::atomic<int> before{0}, after{0}, failed{0};
  for (auto& f : done) {
    f.then([&](const result<void>& r) { (r ? before : failed).fetch_add(1); });
  }
  for (auto& f : done) {
    ASSERT_TRUE(f.get());
    EXPECT_TRUE(f.ready());
  }
  for (auto& f : done) f.then([&](const result<void>& r) { (r ? after : failed).fetch_add(1); });
  EXPECT_EQ(after.load(), k);
  for (int i = 0; i < k; ++i) {
    ASSERT_EQ(read(bufs[static_cast<std::size_t>(i)]), std::vector<float>(16, summed(i, 1))) << "buffer " << i;
  }
  w.reset();  // the progress thread settles everything before it stops
  EXPECT_EQ(before.load(), k);
  EXPECT_EQ(failed.load(), 0);
  for (auto& f : done) EXPECT_TRUE(f.get());
}

TEST_F(Collectives, WaitingCallersFinishTheirOwnRequestsWhereAssistIsOn) {
  // ATOMR_WAIT_ASSIST=1 (a CTest variant registers it): a caller waiting on its future polls the
  // reduction itself, and stats() counts what it finished; =0: the progress thread does it all.
  const char* env = std::getenv("ATOMR_WAIT_ASSIST");
  const std::string assist = env == nullptr ? "auto" : env;
  auto w = make_world();
  ASSERT_TRUE(w);
  auto b = buffer(std::vector<std::int32_t>(2, rank_));
  constexpr int k = 200;
  for (int i = 0; i < k; ++i) ASSERT_TRUE(w->all_reduce(b, reduce_op::max).get());
  EXPECT_EQ(read(b), std::vector<std::int32_t>(2, size_ - 1));
  const auto s = w->stats();
  EXPECT_EQ(s.requests, static_cast<std::uint64_t>(k));
  EXPECT_LE(s.assisted, s.requests);
  if (assist == "1") {
    EXPECT_GT(s.assisted, 0u);
  }
  if (assist == "0") {
    EXPECT_EQ(s.assisted, 0u);
  }
}

TEST_F(Collectives, ARunOfRequestsThatCannotPackNeedsOneAgreementPer1024) {
  auto w = make_world();
  ASSERT_TRUE(w);
  // 1100 dependent sums on one buffer, all pending together: each starts its own batch, and the
  // ranks agree on that for 1024 requests at a time, not request by request.
  constexpr int k = 1100;
  auto b = buffer(std::vector<std::uint64_t>(4, 3));
  std::vector<cluster::coll_spec> specs(k, {coll_kind::all_reduce, local::dtype::u64, {}, {b.block()}, {b.block()}});
  for (auto& f : w->submit_group(std::move(specs), cluster::each_request)) ASSERT_TRUE(f.get());
  std::uint64_t expected = 3;  // modulo 2^64, as the sums wrap
  for (int i = 0; i < k; ++i) expected *= static_cast<std::uint64_t>(size_);
  EXPECT_EQ(read(b), std::vector<std::uint64_t>(4, expected));
  const auto s = w->stats();
  EXPECT_EQ(s.requests, static_cast<std::uint64_t>(k));
  // One issue each, but for chains of 8 replayed as one CUDA graph (NCCL).
  EXPECT_EQ(s.graph_chained % 8, 0u);
  EXPECT_EQ(s.issues, static_cast<std::uint64_t>(k) - s.graph_chained + s.graph_chained / 8);
  EXPECT_EQ(s.packed, 0u);
  EXPECT_EQ(s.agreements, 2u);  // 1024, then 76
}

TEST_F(Collectives, BackToBackSumsOnOneBufferAgreeOnEveryPlan) {
  // Small sums submitted without waiting, each on the buffer the one before wrote: plan after plan
  // of requests that each start a batch, agreed by point-to-point exchanges (host_allreduce),
  // with the ranks submitting alike or not (one by one here, one per-request group there). Ranks
  // that exchanged unalike would hang (the test's deadline) or sum wrongly.
  for (const bool mixed : {false, true}) {
    SCOPED_TRACE(mixed ? "odd ranks in one per-request group" : "one by one");
    auto w = make_world();
    ASSERT_TRUE(w);
#if ATOMR_WORLD_TEST_CUDA
    // Fewer on GPUs, still past one agreement's 1024: where ranks share one GPU (a one-GPU machine,
    // launch/own-nccl-host) each small NCCL all_reduce waits out the GPU's time slices, ~4.5 ms.
    constexpr int k = 1200;
#else
    constexpr int k = 3000;
#endif
    auto b = buffer(std::vector<std::uint64_t>(2, 3));
    const cluster::coll_spec one{coll_kind::all_reduce, local::dtype::u64, {}, {b.block()}, {b.block()}};
    std::vector<cluster::future<void>> done;
    if (mixed && rank_ % 2 == 1) {
      done = w->submit_group(std::vector<cluster::coll_spec>(k, one), cluster::each_request);
    } else {
      for (int i = 0; i < k; ++i) done.push_back(w->submit(cluster::coll_spec(one)));
    }
    for (auto& f : done) ASSERT_TRUE(f.get());
    std::uint64_t expected = 3;  // modulo 2^64
    for (int i = 0; i < k; ++i) expected *= static_cast<std::uint64_t>(size_);
    EXPECT_EQ(read(b), std::vector<std::uint64_t>(2, expected));
    EXPECT_EQ(w->stats().requests, static_cast<std::uint64_t>(k));
  }
}

TEST_F(Collectives, RanksThatQueueDifferentlyStillAgreeOnThePacking) {
  auto w = make_world();
  ASSERT_TRUE(w);
  // Even ranks submit one request at a time, odd ranks all at once: their queues (and so their
  // offers) differ, the plans must not. Every 7th buffer is reduced a second time right after
  // its first reduction, which must cut the batch between the two.
  constexpr int k = 200;
  const auto bufs = counting_buffers(k, 256);
  std::vector<cluster::coll_spec> specs;
  for (int i = 0; i < k; ++i) {
    specs.push_back(sum_in_place(bufs[static_cast<std::size_t>(i)]));
    if (i % 7 == 6) specs.push_back(sum_in_place(bufs[static_cast<std::size_t>(i)]));
  }
  const auto total = specs.size();
  std::vector<cluster::future<void>> done;
  if (rank_ % 2 == 0) {
    for (auto& spec : specs) done.push_back(w->submit(std::move(spec)));
  } else {
    done = w->submit_group(std::move(specs), cluster::each_request);
  }
  for (auto& f : done) ASSERT_TRUE(f.get());
  for (int i = 0; i < k; ++i) {
    ASSERT_EQ(read(bufs[static_cast<std::size_t>(i)]), std::vector<float>(256, summed(i, i % 7 == 6 ? 2 : 1)))
        << "buffer " << i;
  }
  EXPECT_EQ(w->stats().requests, static_cast<std::uint64_t>(total));
}

TEST_F(Collectives, CollectivesSubmittedTogetherGoInOneGroup) {
  auto w = make_world();
  ASSERT_TRUE(w);
  const auto n = static_cast<std::size_t>(size_);
  constexpr std::size_t k = 4;
  // Three all_gathers and a broadcast on distinct buffers form one group; a fifth all_gather
  // reads what the first writes, so it starts a second group after it.
  std::vector<local::gpu_ref<std::int32_t>> sends, recvs;
  std::vector<cluster::coll_spec> specs;
  for (int i = 0; i < 3; ++i) {
    sends.push_back(buffer(std::vector<std::int32_t>(k, rank_ * 10 + i)));
    recvs.push_back(buffer(std::vector<std::int32_t>(k * n, -1)));
    specs.push_back({coll_kind::all_gather, local::dtype::i32, {}, {sends.back().block()}, {recvs.back().block()}});
  }
  auto bcast = buffer(std::vector<std::int32_t>(8, rank_ + 100));
  specs.push_back({coll_kind::broadcast, local::dtype::i32, {reduce_op::sum, 0, 0}, {bcast.block()}, {bcast.block()}});
  auto again = buffer(std::vector<std::int32_t>(k * n * n, -1));
  specs.push_back({coll_kind::all_gather, local::dtype::i32, {}, {recvs[0].block()}, {again.block()}});
  for (auto& f : w->submit_group(std::move(specs), cluster::each_request)) ASSERT_TRUE(f.get());

  for (std::size_t i = 0; i < 3; ++i) {
    std::vector<std::int32_t> expected;
    for (int r = 0; r < size_; ++r) expected.insert(expected.end(), k, r * 10 + static_cast<int>(i));
    EXPECT_EQ(read(recvs[i]), expected) << "all_gather " << i;
  }
  EXPECT_EQ(read(bcast), std::vector<std::int32_t>(8, 100));
  std::vector<std::int32_t> twice;
  const auto first = read(recvs[0]);
  for (int r = 0; r < size_; ++r) twice.insert(twice.end(), first.begin(), first.end());
  EXPECT_EQ(read(again), twice);
  const auto s = w->stats();
  EXPECT_EQ(s.requests, 5u);
  EXPECT_EQ(s.grouped, 4u);
  EXPECT_EQ(s.issues, 2u);
  EXPECT_EQ(s.agreements, 0u);  // groups follow the program, not the queue: nothing to agree on
}

TEST_F(Collectives, WithPackingOffRequestsSubmittedTogetherAreGroupedInstead) {
  cluster::world_options o;
  o.pack_limit = 0;
  auto w = make_world(o);
  ASSERT_TRUE(w);
  std::vector<local::gpu_ref<std::int32_t>> bufs;
  std::vector<cluster::coll_spec> specs;
  for (int i = 0; i < 10; ++i) {
    bufs.push_back(buffer(std::vector<std::int32_t>(4, i)));
    specs.push_back({coll_kind::all_reduce, local::dtype::i32, {}, {bufs.back().block()}, {bufs.back().block()}});
  }
  for (auto& f : w->submit_group(std::move(specs), cluster::each_request)) ASSERT_TRUE(f.get());
  EXPECT_EQ(w->stats().packed, 0u);
  EXPECT_EQ(w->stats().grouped, 10u);
  EXPECT_EQ(w->stats().issues, 1u);
  EXPECT_EQ(read(bufs[3]), std::vector<std::int32_t>(4, 3 * size_));
}

TEST_F(Collectives, SplitByParity) {
  auto w = make_world();
  ASSERT_TRUE(w);
  auto sub = w->split(rank_ % 2, rank_);
  ASSERT_TRUE(sub) << sub.error_value();
  ASSERT_TRUE(*sub);
  const int members = (size_ + 1 - rank_ % 2) / 2;
  EXPECT_EQ((*sub)->size(), members);
  EXPECT_EQ((*sub)->rank(), rank_ / 2);
  auto b = buffer(std::vector<std::int32_t>(16, rank_));
  ASSERT_TRUE((*sub)->all_reduce(b).get());
  int expected = 0;
  for (int r = rank_ % 2; r < size_; r += 2) expected += r;
  EXPECT_EQ(read(b), std::vector<std::int32_t>(16, expected));
  // The parent world still works after the split.
  auto c = buffer(std::vector<std::int32_t>(4, 1));
  ASSERT_TRUE(w->all_reduce(c).get());
  EXPECT_EQ(read(c), std::vector<std::int32_t>(4, size_));
  // A negative color leaves a rank out.
  auto none = w->split(rank_ == 0 ? -1 : 0, 0);
  ASSERT_TRUE(none) << none.error_value();
  EXPECT_EQ(*none == nullptr, rank_ == 0);
}

}  // namespace
}  // namespace atomr
