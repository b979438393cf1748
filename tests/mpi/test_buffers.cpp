// Buffers by token across ranks (host devices, MPI path; the gpu build runs the same on GPUs):
// exact bytes of fetched buffers, a fetch right after a write, leases, releases, rebuilds, and
// tokens that are not this job's.
#include <gtest/gtest.h>
#include <mpi.h>

#include <cstdlib>
#include <cstring>
#include <random>
#include <string>
#include <thread>

#include "atomr/cluster/buffer_registry.hpp"
#include "world_fixture.hpp"
#if ATOMR_WORLD_TEST_CUDA
#include "../gpu/slow_fill_kernel.hpp"
#include "atomr/local/cuda_check.hpp"
#endif

namespace {

using namespace std::chrono_literals;
using atomr::errc;
using atomr::cluster::buffer_registry;
using atomr::cluster::remote_buffer;
using atomr::cluster::router;
namespace local = atomr::local;

class buffers_test : public atomr::testing::world_fixture {
 protected:
  void SetUp() override {
    world_fixture::SetUp();
    if (IsSkipped()) return;
    router_ = std::move(router::start(MPI_COMM_WORLD, sys_).value());
    registry_ = std::move(buffer_registry::start(MPI_COMM_WORLD, *router_, {dev_}).value());
  }
  void TearDown() override {
    registry_.reset();
    if (router_) {
      EXPECT_TRUE(router_->stop());
    }
  }
  // Every rank's handle, gathered (tokens are plain bytes; a message would do as well).
  std::vector<remote_buffer> all_handles(const remote_buffer& mine) {
    std::vector<remote_buffer> all(static_cast<std::size_t>(size_));
    MPI_Allgather(&mine, sizeof(remote_buffer), MPI_BYTE, all.data(), sizeof(remote_buffer), MPI_BYTE, MPI_COMM_WORLD);
    return all;
  }
  std::vector<std::uint32_t> pattern(int owner, std::size_t n) {
    std::mt19937 rng(static_cast<unsigned>(owner * 7919 + n));
    std::vector<std::uint32_t> v(n);
    for (auto& x : v) x = static_cast<std::uint32_t>(rng());
    return v;
  }
  local::gpu_ref<std::uint32_t> filled(const std::vector<std::uint32_t>& values) { return buffer(values); }

  std::unique_ptr<router> router_;
  std::unique_ptr<buffer_registry> registry_;
};

TEST_F(buffers_test, fetched_buffers_hold_the_exact_bytes) {
  for (const std::size_t n : {std::size_t{1}, std::size_t{1027}, std::size_t{1} << 18, std::size_t{1} << 22}) {
    const auto mine = pattern(rank_, n);
    auto buf = filled(mine);
    auto handle = registry_->export_buffer(buf).get();
    ASSERT_TRUE(handle) << handle.error_value();
    EXPECT_EQ(handle->bytes, n * 4);
    const auto handles = all_handles(*handle);
    // From the next rank (another process, or this one at 1 rank) and from this rank itself.
    for (const int owner : {(rank_ + 1) % size_, rank_}) {
      auto into = dev_.allocate<std::uint32_t>(n).get().value();
      auto got = registry_->fetch(handles[static_cast<std::size_t>(owner)], into).get();
      ASSERT_TRUE(got) << n << " words from rank " << owner << ": " << got.error_value();
      EXPECT_EQ(read(into), pattern(owner, n)) << n << " words from rank " << owner;
    }
    MPI_Barrier(MPI_COMM_WORLD);  // every fetch of this buffer is done before it is released
    ASSERT_TRUE(registry_->release(*handle));
  }
  EXPECT_EQ(registry_->exported(), 0u);
}

TEST_F(buffers_test, a_fetch_right_after_a_write_sees_it) {
  const std::size_t n = 1 << 16;
  auto buf = dev_.allocate<std::uint32_t>(n).get().value();
  const auto values = pattern(rank_ + 100, n);
  // The upload is not waited for: the export orders itself after it.
  auto upload = dev_.upload(buf, std::span<const std::uint32_t>(values));
  auto handle = registry_->export_buffer(buf).get();
  ASSERT_TRUE(handle) << handle.error_value();
  ASSERT_TRUE(upload.get());
  const auto handles = all_handles(*handle);
  const int owner = (rank_ + size_ - 1) % size_;
  auto into = dev_.allocate<std::uint32_t>(n).get().value();
  ASSERT_TRUE(registry_->fetch(handles[static_cast<std::size_t>(owner)], into).get());
  EXPECT_EQ(read(into), pattern(owner + 100, n));
  MPI_Barrier(MPI_COMM_WORLD);
}

#if ATOMR_WORLD_TEST_CUDA
// The path a fetch between GPU ranks of one node takes, by the environment (buffer_registry.hpp).
atomr::cluster::fetch_route expected_gpu_route() {
  auto env = [](const char* name, const char* fallback) {
    const char* v = std::getenv(name);
    return std::string(v != nullptr && *v != '\0' ? v : fallback);
  };
  using atomr::cluster::fetch_route;
  const std::string nccl = env("ATOMR_FETCH_NCCL", "auto");
  if (nccl == "1") return fetch_route::nccl;
  if (env("ATOMR_CUDA_IPC", "1") != "0") return fetch_route::cuda_ipc;
  return nccl == "0" ? fetch_route::mpi_staged : fetch_route::nccl;
}

// GPU ranks of one node fetch from each other GPU to GPU (CUDA IPC by default; NCCL with
// ATOMR_FETCH_NCCL=1 or with IPC off), from 4 B to 1 GiB, and the path is the same afterwards (a
// failure would have switched the pair to staging).
TEST_F(buffers_test, gpu_ranks_of_a_node_fetch_exact_bytes_gpu_to_gpu) {
  if (size_ < 2) GTEST_SKIP() << "needs 2 ranks";
  const auto route = expected_gpu_route();
  const bool ipc = route == atomr::cluster::fetch_route::cuda_ipc;
  const int owner = (rank_ + 1) % size_;
  EXPECT_EQ(registry_->route_from(owner), route);
  auto word = [](int who, std::size_t i) { return static_cast<std::uint32_t>(i * 2654435761u) ^ (0x5a5a0000u + who); };
  for (const std::size_t n : {std::size_t{1}, std::size_t{1} << 10, std::size_t{1} << 24, std::size_t{1} << 28}) {
    std::vector<std::uint32_t> mine(n);
    for (std::size_t i = 0; i < n; ++i) mine[i] = word(rank_, i);
    auto buf = filled(mine);
    auto handle = registry_->export_buffer(buf).get();
    ASSERT_TRUE(handle) << handle.error_value();
    const auto handles = all_handles(*handle);
    auto into = dev_.allocate<std::uint32_t>(n).get().value();
    ASSERT_TRUE(dev_.fill_bytes(into, 0xff).get());
    auto got = registry_->fetch(handles[static_cast<std::size_t>(owner)], into).get();
    ASSERT_TRUE(got) << n * 4 << " bytes from rank " << owner << ": " << got.error_value();
    const auto back = read(into);
    std::size_t wrong = 0;
    for (std::size_t i = 0; i < n; ++i) wrong += back[i] != word(owner, i) ? 1 : 0;
    EXPECT_EQ(wrong, 0u) << n * 4 << " bytes from rank " << owner;
    // A second fetch reads the same import (kept mapped), and sees the owner's new bytes.
    if (n == (std::size_t{1} << 10)) {
      MPI_Barrier(MPI_COMM_WORLD);
      for (auto& x : mine) x = ~x;
      ASSERT_TRUE(dev_.upload(buf, std::span<const std::uint32_t>(mine)).get());
      MPI_Barrier(MPI_COMM_WORLD);
      const auto unasked = registry_->ipc_fetches_without_asking();
      ASSERT_TRUE(registry_->fetch(handles[static_cast<std::size_t>(owner)], into).get());
      // The export is alive in the owner's table: the kept grant served without a round trip.
      EXPECT_EQ(registry_->ipc_fetches_without_asking(), unasked + (ipc ? 1 : 0));
      const auto again = read(into);
      std::size_t stale_words = 0;
      for (std::size_t i = 0; i < n; ++i) stale_words += again[i] != ~word(owner, i) ? 1 : 0;
      EXPECT_EQ(stale_words, 0u);
    }
    MPI_Barrier(MPI_COMM_WORLD);
    ASSERT_TRUE(registry_->release(*handle));
    MPI_Barrier(MPI_COMM_WORLD);
    // Released: a fetch is stale even though this rank still had it imported, and the owner's pin
    // goes once this rank has freed the import (it is asked to at the release).
    auto late = registry_->fetch(handles[static_cast<std::size_t>(owner)], into).get();
    ASSERT_FALSE(late);
    EXPECT_EQ(late.error_value().code(), errc::stale_ref) << late.error_value();
    const auto deadline = std::chrono::steady_clock::now() + 10s;
    while (registry_->ipc_pins() != 0 && std::chrono::steady_clock::now() < deadline) std::this_thread::yield();
    EXPECT_EQ(registry_->ipc_pins(), 0u);
    MPI_Barrier(MPI_COMM_WORLD);
  }
  EXPECT_EQ(registry_->route_from(owner), route);
}

// By NCCL (run with ATOMR_FETCH_NCCL=1): every rank fetches from both neighbours at once, many
// fetches in flight per channel, so sends of both directions and of several channels interleave;
// each lands whole in its own target, in any completion order. Then a released export is stale
// (refused by the owner before anything is queued) and the channels still serve.
TEST_F(buffers_test, gpu_fetches_by_nccl_both_ways_at_once_hold_the_exact_bytes) {
  if (size_ < 2) GTEST_SKIP() << "needs 2 ranks";
  const int next = (rank_ + 1) % size_;
  const int prev = (rank_ + size_ - 1) % size_;
  if (registry_->route_from(next) != atomr::cluster::fetch_route::nccl) {
    GTEST_SKIP() << "fetches between these ranks do not go by NCCL (run with ATOMR_FETCH_NCCL=1)";
  }
  auto word = [](int who, std::size_t k, std::size_t i) {
    return static_cast<std::uint32_t>((i + 1) * 2246822519u) ^ static_cast<std::uint32_t>(who * 131 + k);
  };
  const std::vector<std::size_t> sizes{1, 3, 1024, 65536, 1 << 20, 7, 1 << 22, 4096};
  std::vector<local::gpu_ref<std::uint32_t>> mine;
  std::vector<std::vector<remote_buffer>> handles;  // [k][rank]
  for (std::size_t k = 0; k < sizes.size(); ++k) {
    std::vector<std::uint32_t> v(sizes[k]);
    for (std::size_t i = 0; i < v.size(); ++i) v[i] = word(rank_, k, i);
    mine.push_back(filled(v));
    auto h = registry_->export_buffer(mine.back()).get();
    ASSERT_TRUE(h) << h.error_value();
    handles.push_back(all_handles(*h));
  }
  struct pending {
    int owner;
    std::size_t k;
    local::gpu_ref<std::uint32_t> into;
    local::future<void> done;
  };
  std::vector<pending> all;
  for (int round = 0; round < 3; ++round) {
    for (std::size_t k = 0; k < sizes.size(); ++k) {
      for (const int owner : {next, prev}) {
        auto into = dev_.allocate<std::uint32_t>(sizes[k]).get().value();
        auto done = registry_->fetch(handles[k][static_cast<std::size_t>(owner)], into);
        all.push_back({owner, k, into, std::move(done)});
      }
    }
  }
  std::size_t wrong = 0;
  for (auto& p : all) {
    auto got = p.done.get();
    ASSERT_TRUE(got) << sizes[p.k] * 4 << " bytes from rank " << p.owner << ": " << got.error_value();
    const auto back = read(p.into);
    for (std::size_t i = 0; i < back.size(); ++i) wrong += back[i] != word(p.owner, p.k, i) ? 1 : 0;
  }
  EXPECT_EQ(wrong, 0u);
  MPI_Barrier(MPI_COMM_WORLD);
  const auto released = registry_->release(handles[0][static_cast<std::size_t>(rank_)]);
  ASSERT_TRUE(released) << released.error_value();
  MPI_Barrier(MPI_COMM_WORLD);
  auto into = dev_.allocate<std::uint32_t>(sizes[0]).get().value();
  auto late = registry_->fetch(handles[0][static_cast<std::size_t>(next)], into).get();
  ASSERT_FALSE(late);
  EXPECT_EQ(late.error_value().code(), errc::stale_ref) << late.error_value();
  auto again = dev_.allocate<std::uint32_t>(sizes[2]).get().value();
  ASSERT_TRUE(registry_->fetch(handles[2][static_cast<std::size_t>(next)], again).get());
  const auto back = read(again);
  for (std::size_t i = 0; i < back.size(); ++i) wrong += back[i] != word(next, 2, i) ? 1 : 0;
  EXPECT_EQ(wrong, 0u);
  EXPECT_EQ(registry_->route_from(next), atomr::cluster::fetch_route::nccl);
  MPI_Barrier(MPI_COMM_WORLD);
}

TEST_F(buffers_test, a_fetch_right_after_a_kernel_wrote_sees_it) {
  const std::size_t n = 1 << 22;  // 16 MiB
  auto src = dev_.allocate<std::int32_t>(n).get().value();
  const std::int32_t value = 4242 + rank_;
  // A kernel that takes a while, not waited for: the export orders itself after it.
  auto writing = dev_.run(
      [src, value](const local::stream_context& ctx) -> atomr::result<void> {
        ATOMR_ASSIGN_OR_RETURN(std::int32_t * p, src.data());
        return ATOMR_CUDA_CHECK(
            atomr::test::launch_slow_fill(p, src.size(), value, 20'000'000, static_cast<cudaStream_t>(ctx.stream)));
      },
      {src.block()});
  auto handle = registry_->export_buffer(src).get();
  ASSERT_TRUE(handle) << handle.error_value();
  ASSERT_TRUE(writing.get());
  const auto handles = all_handles(*handle);
  const int owner = (rank_ + 1) % size_;
  auto into = dev_.allocate<std::int32_t>(n).get().value();
  ASSERT_TRUE(dev_.fill_bytes(into, 0).get());
  auto got = registry_->fetch(handles[static_cast<std::size_t>(owner)], into).get();
  ASSERT_TRUE(got) << got.error_value();
  std::vector<std::int32_t> out(n);
  ASSERT_TRUE(dev_.download(into, std::span<std::int32_t>(out)).get());
  std::size_t wrong = 0;
  for (auto v : out) wrong += v != 4242 + owner ? 1 : 0;
  EXPECT_EQ(wrong, 0u);
  MPI_Barrier(MPI_COMM_WORLD);
}
#endif

TEST_F(buffers_test, released_rebuilt_and_expired_exports_are_stale) {
  const std::size_t n = 64;
  auto into = dev_.allocate<std::uint32_t>(n).get().value();
  const int owner = (rank_ + 1) % size_;
  auto expect_stale = [&](const remote_buffer& h, const std::string& why) {
    auto got = registry_->fetch(h, into).get();
    ASSERT_FALSE(got) << "expected a stale_ref saying " << why;
    EXPECT_EQ(got.error_value().code(), errc::stale_ref) << got.error_value();
    EXPECT_NE(got.error_value().message().find(why), std::string::npos) << got.error_value();
  };

  // Released by the owner.
  auto released = registry_->export_buffer(filled(pattern(rank_, n))).get().value();
  auto handles = all_handles(released);
  MPI_Barrier(MPI_COMM_WORLD);
  ASSERT_TRUE(registry_->release(released));
  auto twice = registry_->release(released);
  ASSERT_FALSE(twice);
  EXPECT_EQ(twice.error_value().code(), errc::invalid_argument);
  MPI_Barrier(MPI_COMM_WORLD);
  expect_stale(handles[static_cast<std::size_t>(owner)], "released by its owner (rank " + std::to_string(owner) + ")");

  // Lease expired (the owner waits until its own registry has ended the export).
  auto leased = registry_->export_buffer(filled(pattern(rank_, n)), 50ms).get().value();
  handles = all_handles(leased);
  while (registry_->exported() != 0) std::this_thread::yield();
  MPI_Barrier(MPI_COMM_WORLD);
  expect_stale(handles[static_cast<std::size_t>(owner)], "its lease of 50 ms expired");

  // The owner's device rebuilt (a new generation), after this rank fetched it twice (so that a
  // CUDA IPC consumer keeps its grant: the rebuild must end that too).
  auto rebuilt = registry_->export_buffer(filled(pattern(rank_, n))).get().value();
  handles = all_handles(rebuilt);
  for (int i = 0; i < 2; ++i) {
    auto before = registry_->fetch(handles[static_cast<std::size_t>(owner)], into).get();
    ASSERT_TRUE(before) << before.error_value();
  }
  MPI_Barrier(MPI_COMM_WORLD);
  dev_.state()->bump_generation();
  MPI_Barrier(MPI_COMM_WORLD);
  into = dev_.allocate<std::uint32_t>(n).get().value();  // the old target is stale too now
  expect_stale(handles[static_cast<std::size_t>(owner)], "generation");
  MPI_Barrier(MPI_COMM_WORLD);
}

TEST_F(buffers_test, foreign_tokens_and_wrong_targets_are_refused_by_name) {
  auto mine = registry_->export_buffer(filled(pattern(rank_, 16))).get().value();
  auto foreign = mine;
  foreign.job ^= 0x5a5a5a5a;
  auto into = dev_.allocate<std::uint32_t>(16).get().value();
  auto got = registry_->fetch(foreign, into).get();
  ASSERT_FALSE(got);
  EXPECT_EQ(got.error_value().code(), errc::invalid_argument);
  EXPECT_NE(got.error_value().message().find("token from another job"), std::string::npos) << got.error_value();

  auto small = dev_.allocate<std::uint32_t>(8).get().value();
  got = registry_->fetch(mine, small).get();
  ASSERT_FALSE(got);
  EXPECT_NE(got.error_value().message().find("the target holds 32 bytes, the buffer 64"), std::string::npos)
      << got.error_value();

  // A token that claims more bytes than its owner exported (bytes from the wire): refused, never
  // read past the buffer's end.
  if (size_ > 1) {
    auto inflated = all_handles(mine)[static_cast<std::size_t>((rank_ + 1) % size_)];
    inflated.bytes *= 4;
    auto large = dev_.allocate<std::uint32_t>(64).get().value();
    auto over = registry_->fetch(inflated, large).get();
    ASSERT_FALSE(over);
    EXPECT_EQ(over.error_value().code(), errc::invalid_argument) << over.error_value();
  }

  auto floats = dev_.allocate<float>(16).get().value();
  auto typed = registry_->fetch(mine, floats).get();
  ASSERT_FALSE(typed);
  EXPECT_NE(typed.error_value().message().find("element type mismatch"), std::string::npos) << typed.error_value();

  // Another rank's release is refused.
  const auto handles = all_handles(mine);
  if (size_ > 1) {
    auto other = registry_->release(handles[static_cast<std::size_t>((rank_ + 1) % size_)]);
    ASSERT_FALSE(other);
    EXPECT_EQ(other.error_value().code(), errc::invalid_argument);
  }
  MPI_Barrier(MPI_COMM_WORLD);
}

}  // namespace
