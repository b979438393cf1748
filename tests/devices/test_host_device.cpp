// The device API on the host kind: everything above the device layer must work unchanged on a
// rank without a GPU, so this exercises the whole surface on CI.
#include <gtest/gtest.h>

#include <cstring>
#include <numeric>
#include <random>

#include "atomr/local/device/device.hpp"
#include "atomr/local/device/wait_memo.hpp"

namespace atomr::local {
namespace {

using namespace std::chrono_literals;

template <typename T>
std::vector<T> seeded(std::size_t n, unsigned seed) {
  std::mt19937_64 rng(seed);
  std::vector<T> v(n);
  for (auto& x : v) {
    const auto bits = rng();
    std::memcpy(static_cast<void*>(&x), &bits, sizeof(T));
  }
  return v;
}

class HostDevice : public ::testing::Test {
 protected:
  actor_system sys_;
  device dev_ = device::start(sys_, 0, device_kind::host).value();
};

TEST_F(HostDevice, AllocateUploadCopyDownload) {
  auto a = dev_.allocate<std::uint32_t>(1000).get();
  ASSERT_TRUE(a) << a.error_value();
  EXPECT_EQ(a->size(), 1000u);
  EXPECT_EQ(a->device(), 0);
  EXPECT_EQ(a->generation(), 1u);
  EXPECT_TRUE(a->validate());
  auto b = dev_.allocate<std::uint32_t>(1000).get().value();
  EXPECT_NE(a->buffer_id(), b.buffer_id());

  const auto in = seeded<std::uint32_t>(1000, 7);
  ASSERT_TRUE(dev_.upload<std::uint32_t>(*a, in).get());
  ASSERT_TRUE(dev_.copy(b, *a).get());
  std::vector<std::uint32_t> out(1000, 0);
  ASSERT_TRUE(dev_.download<std::uint32_t>(b, out).get());
  EXPECT_EQ(out, in);
}

template <typename T>
class HostDeviceTypes : public HostDevice {};
using all_types = ::testing::Types<std::int8_t, std::uint8_t, std::int32_t, std::uint32_t, std::int64_t, std::uint64_t,
                                   f16_t, bf16_t, float, double>;
TYPED_TEST_SUITE(HostDeviceTypes, all_types);

TYPED_TEST(HostDeviceTypes, RoundTripEveryElementType) {
  auto buf = this->dev_.template allocate<TypeParam>(257).get().value();
  EXPECT_EQ(buf.block()->type, dtype_of<TypeParam>::value);
  EXPECT_EQ(buf.bytes(), 257 * size_of(dtype_of<TypeParam>::value));
  const auto in = seeded<TypeParam>(257, 11);
  ASSERT_TRUE(this->dev_.template upload<TypeParam>(buf, in).get());
  std::vector<TypeParam> out(257);
  ASSERT_TRUE(this->dev_.template download<TypeParam>(buf, out).get());
  EXPECT_EQ(std::memcmp(out.data(), in.data(), in.size() * sizeof(TypeParam)), 0);
}

TEST_F(HostDevice, FillBytes) {
  auto buf = dev_.allocate<std::uint32_t>(64).get().value();
  ASSERT_TRUE(dev_.fill_bytes(buf, 0xAB).get());
  std::vector<std::uint32_t> out(64);
  ASSERT_TRUE(dev_.download<std::uint32_t>(buf, out).get());
  for (auto v : out) EXPECT_EQ(v, 0xABABABABu);
}

TEST_F(HostDevice, RunGivesTheStreamContextAndValidatedBuffers) {
  auto buf = dev_.allocate<std::int32_t>(100).get().value();
  std::vector<std::int32_t> in(100);
  std::iota(in.begin(), in.end(), -50);
  ASSERT_TRUE(dev_.upload<std::int32_t>(buf, in).get());
  auto done = dev_.run(
      [buf](const stream_context& ctx) -> result<void> {
        if (ctx.kind != device_kind::host || ctx.stream != nullptr || ctx.device != 0) {
          return error(errc::internal, "unexpected stream context");
        }
        ATOMR_ASSIGN_OR_RETURN(std::int32_t * p, buf.data());
        for (std::size_t i = 0; i < buf.size(); ++i) p[i] = 3 * p[i] + 1;
        return ok();
      },
      {buf.block()});
  ASSERT_TRUE(done.get());
  std::vector<std::int32_t> out(100);
  ASSERT_TRUE(dev_.download<std::int32_t>(buf, out).get());
  for (std::size_t i = 0; i < out.size(); ++i) EXPECT_EQ(out[i], 3 * in[i] + 1);
}

// The event cache behind "wait once per write": remembers the last four, forgets the oldest.
TEST(WaitMemo, RemembersTheLastFourEvents) {
  wait_memo memo;
  std::vector<std::shared_ptr<void>> events;
  for (int i = 0; i < 5; ++i) events.push_back(std::make_shared<int>(i));
  EXPECT_FALSE(memo.seen(events[0]));
  EXPECT_FALSE(memo.seen(nullptr));  // no event: nothing was waited on
  for (int i = 0; i < 4; ++i) memo.remember(events[i]);
  for (int i = 0; i < 4; ++i) EXPECT_TRUE(memo.seen(events[i])) << i;
  memo.remember(events[4]);  // evicts the oldest
  EXPECT_FALSE(memo.seen(events[0]));
  EXPECT_TRUE(memo.seen(events[4]));
  EXPECT_EQ(events[1].use_count(), 2);  // held, so its pool cannot recycle it
  memo.clear();
  EXPECT_FALSE(memo.seen(events[4]));
  EXPECT_EQ(events[1].use_count(), 1);
}

// One write ticket per buffer: a buffer named twice must not wait on its own second ticket.
TEST_F(HostDevice, RunWithTheSameBufferTwiceCompletes) {
  auto b = dev_.allocate<std::int32_t>(4).get().value();
  auto r = dev_.run(
      [b](const stream_context&) -> result<void> {
        ATOMR_ASSIGN_OR_RETURN(std::int32_t * p, b.data());
        p[0] = 42;
        return ok();
      },
      {b.block(), b.block()});
  ASSERT_TRUE(r.wait_for(30s)) << "an operation naming one buffer twice never ran";
  ASSERT_TRUE(r.get());
  std::vector<std::int32_t> out(4);
  ASSERT_TRUE(dev_.download<std::int32_t>(b, out).get());
  EXPECT_EQ(out[0], 42);
}

TEST_F(HostDevice, WorkThatFailsReportsItsError) {
  auto r =
      dev_.run([](const stream_context&) -> result<void> { return error(errc::invalid_argument, "bad kernel args"); })
          .get();
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error_value().message(), "bad kernel args");
  auto thrown = dev_.run([](const stream_context&) -> result<void> { throw std::runtime_error("oops"); }).get();
  ASSERT_FALSE(thrown);
  EXPECT_EQ(thrown.error_value().message(), "device work threw: oops");
  EXPECT_TRUE(dev_.allocate<float>(4).get()) << "the device keeps working";
}

TEST_F(HostDevice, SizeAndOwnershipMistakesAreInvalidArgument) {
  auto small = dev_.allocate<float>(4).get().value();
  std::vector<float> big(5);
  auto up = dev_.upload<float>(small, big).get();
  ASSERT_FALSE(up);
  EXPECT_EQ(up.error_value().code(), errc::invalid_argument);
  EXPECT_EQ(up.error_value().message(),
            "upload of 5 elements into buffer " + std::to_string(small.buffer_id()) + " of 4");
  auto down = dev_.download<float>(small, big).get();
  EXPECT_EQ(down.error_value().code(), errc::invalid_argument);

  device other = device::start(sys_, 1, device_kind::host).value();
  auto theirs = other.allocate<float>(4).get().value();
  auto cross = dev_.copy(small, theirs).get();
  ASSERT_FALSE(cross);
  EXPECT_EQ(cross.error_value().code(), errc::invalid_argument);
  EXPECT_NE(cross.error_value().message().find("lives on device 1, not device 0"), std::string::npos)
      << cross.error_value();
  auto empty = dev_.fill_bytes(gpu_ref<float>{}, 0).get();
  EXPECT_EQ(empty.error_value().message(), "empty gpu_ref");
}

TEST_F(HostDevice, PeerCopyBetweenTwoDevices) {
  device other = device::start(sys_, 1, device_kind::host).value();
  auto src = other.allocate<std::int64_t>(300).get().value();
  auto dst = dev_.allocate<std::int64_t>(300).get().value();
  const auto in = seeded<std::int64_t>(300, 3);
  ASSERT_TRUE(other.upload<std::int64_t>(src, in).get());
  ASSERT_TRUE(dev_.copy_from_peer(dst, src).get());
  std::vector<std::int64_t> out(300);
  ASSERT_TRUE(dev_.download<std::int64_t>(dst, out).get());
  EXPECT_EQ(out, in);
  auto too_big = other.allocate<std::int64_t>(301).get().value();
  EXPECT_EQ(dev_.copy_from_peer(dst, too_big).get().error_value().code(), errc::invalid_argument);
}

TEST_F(HostDevice, ManagedMemoryIsHostAddressableAndPlaceable) {
  auto m = dev_.allocate_managed<float>(128).get().value();
  auto span = m.host_span();
  ASSERT_TRUE(span) << span.error_value();
  ASSERT_EQ(span->size(), 128u);
  for (std::size_t i = 0; i < span->size(); ++i) (*span)[i] = static_cast<float>(i) * 0.5f;
  EXPECT_TRUE(dev_.prefetch(m, 0).get());
  EXPECT_TRUE(dev_.prefetch(m, k_host_location).get());
  EXPECT_TRUE(dev_.advise(m, memory_advice::read_mostly, 0).get());
  auto elsewhere = dev_.prefetch(m, 3).get();
  ASSERT_FALSE(elsewhere);
  EXPECT_EQ(elsewhere.error_value().code(), errc::invalid_argument);
  std::vector<float> out(128);
  ASSERT_TRUE(dev_.download<float>(m, out).get());
  EXPECT_EQ(out[127], 63.5f);

  auto plain = dev_.allocate<float>(64).get().value();
  EXPECT_EQ(plain.host_span().error_value().code(), errc::invalid_argument);
  EXPECT_EQ(dev_.prefetch(plain, 0).get().error_value().code(), errc::invalid_argument);

  const auto stats = dev_.stats().get().value();
  EXPECT_EQ(stats.managed_buffers, 1u);
  EXPECT_EQ(stats.managed_bytes, 128 * sizeof(float));
  EXPECT_EQ(stats.buffers, 1u);
  EXPECT_EQ(stats.bytes, 64 * sizeof(float));
}

TEST_F(HostDevice, DroppingTheLastRefFreesTheBuffer) {
  {
    auto a = dev_.allocate<double>(1000).get().value();
    EXPECT_EQ(dev_.stats().get().value().buffers, 1u);
  }
  // The free is a message to the device; a stats request sent after it is answered after it.
  EXPECT_EQ(dev_.stats().get().value().buffers, 0u);
}

TEST_F(HostDevice, NewGenerationMakesOldRefsStaleAndTellsWatchers) {
  auto buf = dev_.allocate<double>(8).get().value();
  std::vector<std::uint64_t> seen;
  const auto id = dev_.state()->watch([&](std::uint64_t g) { seen.push_back(g); });
  EXPECT_EQ(dev_.state()->bump_generation(), 2u);
  dev_.state()->unwatch(id);
  EXPECT_EQ(dev_.state()->bump_generation(), 3u);
  EXPECT_EQ(seen, (std::vector<std::uint64_t>{2}));

  auto v = buf.validate();
  ASSERT_FALSE(v);
  EXPECT_EQ(v.error_value().code(), errc::stale_ref);
  EXPECT_NE(
      v.error_value().message().find("is from generation 1; the device context was rebuilt and is at generation 3"),
      std::string::npos)
      << v.error_value();
  std::vector<double> out(8);
  auto stale = dev_.download<double>(buf, out).get();
  EXPECT_EQ(stale.error_value().code(), errc::stale_ref);
  auto fresh = dev_.allocate<double>(8).get().value();
  EXPECT_EQ(fresh.generation(), 3u);
  EXPECT_TRUE(dev_.fill_bytes(fresh, 0).get());
}

TEST_F(HostDevice, StoppedDeviceRefusesWorkAndItsRefsGoStale) {
  auto buf = dev_.allocate<float>(16).get().value();
  dev_.stop();
  ASSERT_TRUE(dev_.on_terminated().get());
  auto v = buf.validate();
  ASSERT_FALSE(v);
  EXPECT_EQ(v.error_value().code(), errc::stale_ref);
  EXPECT_NE(v.error_value().message().find("the device is shutting down"), std::string::npos) << v.error_value();
  auto late = dev_.allocate<float>(1).get();
  ASSERT_FALSE(late);
  EXPECT_EQ(late.error_value().code(), errc::unavailable);
  EXPECT_EQ(late.error_value().message(), "actor 'device-0' stopped");
}

TEST(HostDeviceStart, CudaKindWithoutAGpuStopsWithTheReason) {
  if (!probe_cuda_devices()->devices.empty()) GTEST_SKIP() << "a GPU is visible; covered by the gpu tests";
  actor_system sys;
  auto d = device::start(sys, 0, device_kind::cuda);
  ASSERT_TRUE(d);
  auto end = d->on_terminated().get();
  ASSERT_TRUE(end);
  ASSERT_TRUE(end->reason.has_value());
  EXPECT_TRUE(end->reason->code() == errc::cuda || end->reason->code() == errc::unavailable) << *end->reason;
  EXPECT_FALSE(d->state()->accepting());
}

}  // namespace
}  // namespace atomr::local
