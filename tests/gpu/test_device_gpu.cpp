// CUDA device actors on real GPUs: values after every kind of copy and user kernels through run(),
// on one GPU per rank and on every GPU from one rank. (Kernel faults: test_device_fault.cpp.)
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdlib>
#include <random>
#include <string_view>

#include "affine_kernel.hpp"
#include "atomr/local/cuda_check.hpp"
#include "atomr/local/device/device.hpp"
#include "gate_kernel.hpp"
#include "gpu_test.hpp"
#include "rank_gpu.hpp"
#include "slow_fill_kernel.hpp"

namespace atomr::local {
namespace {

using namespace std::chrono_literals;

std::vector<std::int32_t> seeded(std::size_t n, unsigned seed) {
  std::mt19937 rng(seed);
  std::uniform_int_distribution<std::int32_t> dist(-1000000, 1000000);
  std::vector<std::int32_t> v(n);
  for (auto& x : v) x = dist(rng);
  return v;
}

TEST(GpuDevice, CopiesAndKernelsProduceExactValues) {
  ATOMR_REQUIRE_GPUS(1);
  actor_system sys;
  auto dev = device::start(sys, test::rank_gpu(), device_kind::cuda).value();
  constexpr std::size_t n = (1u << 22) + 5;
  const auto in = seeded(n, 20261122u + static_cast<unsigned>(dev.index()));
  auto a = dev.allocate<std::int32_t>(n).get().value();
  auto b = dev.allocate<std::int32_t>(n).get().value();
  ASSERT_TRUE(dev.upload<std::int32_t>(a, in).get());
  ASSERT_TRUE(dev.copy(b, a).get());
  ASSERT_TRUE(dev.run(
                     [a, b](const stream_context& ctx) -> result<void> {
                       ATOMR_ASSIGN_OR_RETURN(std::int32_t * src, b.data());
                       ATOMR_ASSIGN_OR_RETURN(std::int32_t * dst, a.data());
                       return ATOMR_CUDA_CHECK(
                           test::launch_affine(src, dst, b.size(), 5, -3, static_cast<cudaStream_t>(ctx.stream)));
                     },
                     {a.block(), b.block()})
                  .get());
  std::vector<std::int32_t> out(n);
  ASSERT_TRUE(dev.download<std::int32_t>(a, out).get());
  std::size_t wrong = 0;
  for (std::size_t i = 0; i < n; ++i) wrong += out[i] != 5 * in[i] - 3 ? 1 : 0;
  EXPECT_EQ(wrong, 0u);
  ASSERT_TRUE(dev.fill_bytes(b, 0x7f).get());
  ASSERT_TRUE(dev.download<std::int32_t>(b, out).get());
  for (std::size_t i = 0; i < n; i += 4099) ASSERT_EQ(out[i], 0x7f7f7f7f);
}

// The pool maps its first memory as the device starts (on the device's thread, while the caller
// goes on), not in the caller's first allocation: before any buffer is asked for, the pool
// already holds memory.
TEST(GpuDevice, ThePoolHoldsMemoryBeforeTheFirstBuffer) {
  ATOMR_REQUIRE_GPUS(1);
  actor_system sys;
  auto dev = device::start(sys, test::rank_gpu(), device_kind::cuda).value();
  std::uint64_t reserved = 0;
  bool shareable = false;
  ASSERT_TRUE(dev.run(
                     [&](const stream_context& ctx) -> result<void> {
                       if (ctx.shareable_pool == nullptr) return ok();  // the default pool serves
                       shareable = true;
                       return ATOMR_CUDA_CHECK(cudaMemPoolGetAttribute(static_cast<cudaMemPool_t>(ctx.shareable_pool),
                                                                       cudaMemPoolAttrReservedMemCurrent, &reserved));
                     },
                     {})
                  .get());
  if (!shareable) GTEST_SKIP() << "the driver refused a shareable pool; the default pool serves";
  EXPECT_GT(reserved, 0u);
}

// Copies between a device and pageable host memory go through pinned staging, so the actor never
// waits for the stream: while a kernel holds the stream, the actor still enqueues a 64 MiB upload
// and a download and answers other requests; once the gate opens, both land with exact values.
TEST(GpuDevice, PageableCopiesNeverBlockTheActorBehindAKernel) {
  ATOMR_REQUIRE_GPUS(1);
  actor_system sys;
  auto dev = device::start(sys, test::rank_gpu(), device_kind::cuda).value();
  int* gate = nullptr;
  ASSERT_EQ(cudaHostAlloc(reinterpret_cast<void**>(&gate), sizeof(int), cudaHostAllocPortable | cudaHostAllocMapped),
            cudaSuccess);
  *gate = 0;
  constexpr std::size_t n = 16u << 20;  // 64 MiB of int32
  const auto in = seeded(n, 77u);
  auto a = dev.allocate<std::int32_t>(n).get().value();
  auto b = dev.allocate<std::int32_t>(n).get().value();
  ASSERT_TRUE(dev.upload<std::int32_t>(b, in).get());
  auto held = dev.run([gate](const stream_context& ctx) -> result<void> {
    return ATOMR_CUDA_CHECK(test::launch_wait_for_gate(gate, static_cast<cudaStream_t>(ctx.stream)));
  });
  auto up = dev.upload<std::int32_t>(a, in);
  std::vector<std::int32_t> out(n);
  auto down = dev.download<std::int32_t>(b, out);
  // Answered only if the actor got past both copies without waiting for the stream.
  auto stats = dev.stats();
  const bool answered = stats.wait_for(60s);
  const bool still_held = !held.ready() && !up.ready() && !down.ready();
  *gate = 1;  // open the gate whatever happened, so the device drains
  ASSERT_TRUE(answered) << "the device actor blocked on a pageable copy behind a running kernel";
  EXPECT_TRUE(still_held);
  EXPECT_EQ(stats.get()->buffers, 2u);
  ASSERT_TRUE(held.get());
  ASSERT_TRUE(up.get());
  ASSERT_TRUE(down.get());
  EXPECT_EQ(out, in);
  std::vector<std::int32_t> back(n);
  ASSERT_TRUE(dev.download<std::int32_t>(a, back).get());
  EXPECT_EQ(back, in);
  cudaFreeHost(gate);
}

// An operation its caller enqueued itself (the inline lane) and waits for is seen done by that
// caller, without the completion thread's hand-over. The completion thread still answers one
// the caller reads through a continuation, and one waited for longer than a future looks (the
// caller hands it back before it sleeps; without that it would wait forever). Values exact.
TEST(GpuDevice, CallersSeeTheirOwnOperationsDoneAndHandBackTheRest) {
  ATOMR_REQUIRE_GPUS(1);
  actor_system sys;
  auto dev = device::start(sys, test::rank_gpu(), device_kind::cuda).value();
  constexpr std::size_t n = 4096;
  auto a = dev.allocate<std::int32_t>(n).get().value();
  auto b = dev.allocate<std::int32_t>(n).get().value();
  const auto before = dev.stats().get()->completions_seen_by_callers;
  for (unsigned round = 0; round < 200; ++round) {
    const auto in = seeded(n, 20261128u + round);
    ASSERT_TRUE(dev.upload<std::int32_t>(a, in).get());
    ASSERT_TRUE(dev.copy(b, a).get());
    std::vector<std::int32_t> out(n);
    ASSERT_TRUE(dev.download<std::int32_t>(b, out).get());
    ASSERT_EQ(out, in) << "round " << round;
  }
  const auto seen = dev.stats().get()->completions_seen_by_callers - before;
  EXPECT_GT(seen, 0u) << "no waited-for operation of 600 was seen done by its caller";

  // Read through a continuation while a kernel holds the stream: the completion thread answers.
  int* gate = nullptr;
  ASSERT_EQ(cudaHostAlloc(reinterpret_cast<void**>(&gate), sizeof(int), cudaHostAllocPortable | cudaHostAllocMapped),
            cudaSuccess);
  *gate = 0;
  auto held = dev.run([gate](const stream_context& ctx) -> result<void> {
    return ATOMR_CUDA_CHECK(test::launch_wait_for_gate(gate, static_cast<cudaStream_t>(ctx.stream)));
  });
  promise<void> relay;
  auto relayed = relay.get_future();
  held.then([p = std::make_shared<promise<void>>(std::move(relay))](const result<void>& r) {
    if (r) {
      p->set_value();
    } else {
      p->set_error(r.error_value());
    }
  });
  EXPECT_FALSE(relayed.ready());  // (the gate is closed: the kernel cannot have finished)
  *gate = 1;
  EXPECT_TRUE(relayed.get());
  cudaFreeHost(gate);

  // Waited for far longer than a future looks (a kernel of 50 M cycles: tens of milliseconds).
  auto slow = dev.run(
      [a](const stream_context& ctx) -> result<void> {
        ATOMR_ASSIGN_OR_RETURN(std::int32_t * p, a.data());
        return ATOMR_CUDA_CHECK(
            test::launch_slow_fill(p, a.size(), 4242, 50'000'000, static_cast<cudaStream_t>(ctx.stream)));
      },
      {a.block()});
  ASSERT_TRUE(slow.get());
  std::vector<std::int32_t> out(n);
  ASSERT_TRUE(dev.download<std::int32_t>(a, out).get());
  EXPECT_EQ(std::count(out.begin(), out.end(), 4242), static_cast<std::ptrdiff_t>(n));
}

TEST(GpuDevice, EveryVisibleGpuFromOneRank) {
  ATOMR_REQUIRE_GPUS(1);
  actor_system sys;
  const int count = static_cast<int>(probe_cuda_devices()->devices.size());
  std::vector<device> devs;
  for (int d = 0; d < count; ++d) devs.push_back(device::start(sys, d, device_kind::cuda).value());
  std::vector<future<void>> uploads;
  std::vector<gpu_ref<std::int32_t>> bufs;
  std::vector<std::vector<std::int32_t>> ins;
  for (int d = 0; d < count; ++d) {
    ins.push_back(seeded(1 << 20, 100u + static_cast<unsigned>(d)));
    bufs.push_back(devs[static_cast<std::size_t>(d)].allocate<std::int32_t>(1 << 20).get().value());
    uploads.push_back(devs[static_cast<std::size_t>(d)].upload<std::int32_t>(bufs.back(), ins.back()));
  }
  for (auto& u : uploads) ASSERT_TRUE(u.get());
  for (int d = 0; d < count; ++d) {
    std::vector<std::int32_t> out(1 << 20);
    ASSERT_TRUE(devs[static_cast<std::size_t>(d)].download<std::int32_t>(bufs[static_cast<std::size_t>(d)], out).get());
    EXPECT_EQ(out, ins[static_cast<std::size_t>(d)]) << "device " << d;
    EXPECT_EQ(bufs[static_cast<std::size_t>(d)].device(), d);
  }
}

// The peer copy is requested right after a slow kernel was queued on the source GPU, without
// waiting for it on the host: the copy must wait for it on the device (last-write event).
TEST(GpuDevice, PeerCopyWaitsForTheLastWriteOnTheDevice) {
  ATOMR_REQUIRE_GPUS(2);
  actor_system sys;
  auto gpu0 = device::start(sys, 0, device_kind::cuda).value();
  auto gpu1 = device::start(sys, 1, device_kind::cuda).value();
  constexpr std::size_t n = 1 << 24;  // 64 MiB
  auto src = gpu0.allocate<std::int32_t>(n).get().value();
  auto dst = gpu1.allocate<std::int32_t>(n).get().value();
  ASSERT_TRUE(gpu1.fill_bytes(dst, 0).get());
  for (std::int32_t round = 1; round <= 3; ++round) {
    auto writing = gpu0.run(
        [src, round](const stream_context& ctx) -> result<void> {
          ATOMR_ASSIGN_OR_RETURN(std::int32_t * p, src.data());
          return ATOMR_CUDA_CHECK(
              test::launch_slow_fill(p, src.size(), 1000 + round, 50'000'000, static_cast<cudaStream_t>(ctx.stream)));
        },
        {src.block()});
    auto copied = gpu1.copy_from_peer(dst, src);
    ASSERT_TRUE(copied.get());
    ASSERT_TRUE(writing.get());
    std::vector<std::int32_t> out(n);
    ASSERT_TRUE(gpu1.download<std::int32_t>(dst, out).get());
    std::size_t wrong = 0;
    for (auto v : out) wrong += v != 1000 + round ? 1 : 0;
    EXPECT_EQ(wrong, 0u) << "round " << round;
  }
}

TEST(GpuDevice, PeerCopyValuesBothDirections) {
  ATOMR_REQUIRE_GPUS(2);
  actor_system sys;
  auto gpu0 = device::start(sys, 0, device_kind::cuda).value();
  auto gpu1 = device::start(sys, 1, device_kind::cuda).value();
  for (const std::size_t n : {std::size_t{1}, std::size_t{1023}, std::size_t{1} << 20}) {
    const auto in = seeded(n, static_cast<unsigned>(n));
    auto a = gpu0.allocate<std::int32_t>(n).get().value();
    auto b = gpu1.allocate<std::int32_t>(n).get().value();
    auto c = gpu0.allocate<std::int32_t>(n).get().value();
    ASSERT_TRUE(gpu0.upload<std::int32_t>(a, in).get());
    ASSERT_TRUE(gpu1.copy_from_peer(b, a).get());
    ASSERT_TRUE(gpu0.copy_from_peer(c, b).get());
    std::vector<std::int32_t> out(n);
    ASSERT_TRUE(gpu0.download<std::int32_t>(c, out).get());
    EXPECT_EQ(out, in) << n << " elements";
  }
}

// Managed memory prefetched to a device lands on that device (not device 0), and on the host when
// asked; kernels and the host see the same values.
TEST(GpuDevice, ManagedPrefetchLandsOnTheRightDevice) {
  ATOMR_REQUIRE_GPUS(1);
  actor_system sys;
  const int count = static_cast<int>(probe_cuda_devices()->devices.size());
  const int target = count - 1;  // device 1 on a two-GPU machine
  auto dev = device::start(sys, target, device_kind::cuda).value();
  constexpr std::size_t n = 1 << 20;
  auto m = dev.allocate_managed<std::int32_t>(n).get().value();
  auto host = m.host_span().value();
  for (std::size_t i = 0; i < n; ++i) host[i] = static_cast<std::int32_t>(i);
  ASSERT_TRUE(dev.advise(m, memory_advice::read_mostly, target).get());
  // The attribute queries below run on this thread, which needs a current context.
  ASSERT_TRUE(ATOMR_CUDA_CHECK(cudaSetDevice(target)));
  int read_mostly = 0;
  auto got_advice = ATOMR_CUDA_CHECK(
      cudaMemRangeGetAttribute(&read_mostly, sizeof(int), cudaMemRangeAttributeReadMostly, host.data(), m.bytes()));
  ASSERT_TRUE(got_advice) << got_advice.error_value();
  EXPECT_EQ(read_mostly, 1);

  ASSERT_TRUE(dev.prefetch(m, target).get());
  int where = -7;
  auto got_place = ATOMR_CUDA_CHECK(
      cudaMemRangeGetAttribute(&where, sizeof(int), cudaMemRangeAttributeLastPrefetchLocation, host.data(), m.bytes()));
  ASSERT_TRUE(got_place) << got_place.error_value();
  EXPECT_EQ(where, target);

  auto out = dev.allocate<std::int32_t>(n).get().value();
  ASSERT_TRUE(dev.run(
                     [m, out](const stream_context& ctx) -> result<void> {
                       ATOMR_ASSIGN_OR_RETURN(std::int32_t * src, m.data());
                       ATOMR_ASSIGN_OR_RETURN(std::int32_t * dst, out.data());
                       return ATOMR_CUDA_CHECK(
                           test::launch_affine(src, dst, m.size(), 2, 1, static_cast<cudaStream_t>(ctx.stream)));
                     },
                     {m.block(), out.block()})
                  .get());
  std::vector<std::int32_t> got(n);
  ASSERT_TRUE(dev.download<std::int32_t>(out, got).get());
  for (std::size_t i = 0; i < n; i += 997) ASSERT_EQ(got[i], 2 * static_cast<std::int32_t>(i) + 1);

  ASSERT_TRUE(dev.prefetch(m, k_host_location).get());
  got_place = ATOMR_CUDA_CHECK(
      cudaMemRangeGetAttribute(&where, sizeof(int), cudaMemRangeAttributeLastPrefetchLocation, host.data(), m.bytes()));
  ASSERT_TRUE(got_place) << got_place.error_value();
  EXPECT_EQ(where, cudaCpuDeviceId);
  EXPECT_EQ(host[n - 1], static_cast<std::int32_t>(n - 1));
}

}  // namespace
}  // namespace atomr::local
