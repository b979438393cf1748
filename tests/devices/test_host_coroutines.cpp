// Coroutines over the device API on the host kind: a chain read top to bottom, many coroutines
// awaiting one device, and a coroutine that outlives its device.
#include <gtest/gtest.h>

#include <numeric>
#include <span>
#include <variant>
#include <vector>

#include "atomr/local/actors.hpp"
#include "atomr/local/device/device.hpp"

namespace atomr::local {
namespace {

using namespace std::chrono_literals;

// allocate, upload, run (doubles every element), download: each step awaited.
task<std::vector<int>> doubled(device dev, std::vector<int> in) {
  ATOMR_CO_TRY(auto buf, co_await dev.allocate<int>(in.size()));
  ATOMR_CO_TRY_VOID(co_await dev.upload(buf, std::span<const int>(in)));
  auto twice = [buf](const stream_context&) -> result<void> {
    ATOMR_ASSIGN_OR_RETURN(int* p, buf.data());
    for (std::size_t i = 0; i < buf.size(); ++i) p[i] *= 2;
    return ok();
  };
  // (The list of buffers is built first: g++ 12 fails on a braced list inside a co_await operand.)
  std::vector<std::shared_ptr<buffer_block>> uses(1, buf.block());
  ATOMR_CO_TRY_VOID(co_await dev.run(twice, std::move(uses)));
  std::vector<int> out(in.size());
  ATOMR_CO_TRY_VOID(co_await dev.download(buf, std::span<int>(out)));
  co_return out;
}

TEST(HostCoroutines, AllocateUploadRunDownload) {
  actor_system sys;
  auto dev = device::start(sys, 0, device_kind::host).value();
  std::vector<int> in(4096);
  std::iota(in.begin(), in.end(), -100);
  auto r = doubled(dev, in).get();
  ASSERT_TRUE(r) << r.error_value();
  for (std::size_t i = 0; i < in.size(); ++i) ASSERT_EQ((*r)[i], 2 * in[i]) << i;
}

// Writes i * 3 + 1 into slots[i] on the device's thread.
future<void> stamp(const device& dev, std::vector<long>& slots, long i) {
  return dev.run([&slots, i](const stream_context&) {
    slots[static_cast<std::size_t>(i)] = i * 3 + 1;
    return ok();
  });
}

constexpr long k_many = 100000;

TEST(HostCoroutines, AHundredThousandTasksAwaitOneDevice) {
  actor_system sys;
  auto dev = device::start(sys, 0, device_kind::host).value();
  std::vector<long> slots(k_many, 0);
  auto one = [](device d, std::vector<long>* s, long i) -> task<long> {
    ATOMR_CO_TRY_VOID(co_await stamp(d, *s, i));
    co_return (*s)[static_cast<std::size_t>(i)];  // the device's write is visible here
  };
  std::vector<task<long>> tasks;
  tasks.reserve(k_many);
  for (long i = 0; i < k_many; ++i) tasks.push_back(one(dev, &slots, i));
  auto all = when_all(std::move(tasks)).get();
  ASSERT_TRUE(all) << all.error_value();
  for (long i = 0; i < k_many; ++i) ASSERT_EQ((*all)[static_cast<std::size_t>(i)], i * 3 + 1) << i;
}

// The same from inside an actor: 100,000 handlers, interleaved, each suspended on the device and
// resumed on the actor's thread.
struct job {
  long i;
};
struct expect_done {
  reply_to<long> reply;
};
using stamper_msg = std::variant<job, expect_done>;
class stamper : public coroutine_actor<stamper_msg> {
 public:
  explicit stamper(device dev) : coroutine_actor(mailbox_mode::interleave), dev_(std::move(dev)), slots_(k_many) {}

 private:
  task<void> handle(stamper_msg m) override {
    if (auto* e = std::get_if<expect_done>(&m)) {
      pending_.emplace(std::move(e->reply));
      answer();
      co_return;
    }
    const long i = std::get<job>(m).i;
    ATOMR_CO_TRY_VOID(co_await stamp(dev_, slots_, i));
    if (slots_[static_cast<std::size_t>(i)] == i * 3 + 1) ++right_;
    ++done_;
    answer();
  }
  void answer() {
    if (pending_ && done_ == k_many) std::exchange(pending_, std::nullopt)->send(right_);
  }
  device dev_;
  std::vector<long> slots_;
  long done_ = 0, right_ = 0;
  std::optional<reply_to<long>> pending_;
};

TEST(HostCoroutines, AHundredThousandHandlersAwaitOneDevice) {
  actor_system sys(system_config{.pool_threads = 2});
  auto dev = device::start(sys, 0, device_kind::host).value();
  auto a = sys.spawn<stamper>({.name = "stamper"}, dev);
  ASSERT_TRUE(a);
  auto done = a->ask<long>([](reply_to<long> r) { return expect_done{std::move(r)}; }, 300s);
  for (long i = 0; i < k_many; ++i) ASSERT_TRUE(a->tell(job{i}));
  auto right = done.get();
  ASSERT_TRUE(right) << right.error_value();
  EXPECT_EQ(*right, k_many);
}

// A coroutine that holds a buffer across its device's stop: the buffer is then stale and the
// device unavailable, never a dangling pointer.
TEST(HostCoroutines, ACoroutineOutlivingItsDeviceGetsStaleRefAndUnavailable) {
  actor_system sys;
  auto dev = device::start(sys, 0, device_kind::host).value();
  auto buffer = dev.allocate<float>(64).get();
  ASSERT_TRUE(buffer) << buffer.error_value();
  promise<void> gate;
  auto body = [](device d, gpu_ref<float> buf, future<void> g) -> task<std::vector<errc>> {
    ATOMR_CO_TRY_VOID(co_await g);  // the device stops meanwhile
    std::vector<float> out(64);
    std::vector<errc> codes;
    auto read = co_await d.download(buf, std::span<float>(out));
    codes.push_back(read ? errc::internal : read.error_value().code());
    auto more = co_await d.allocate<float>(1);
    codes.push_back(more ? errc::internal : more.error_value().code());
    co_return codes;
  };
  auto f = body(dev, *buffer, gate.get_future()).start();
  dev.stop();
  ASSERT_TRUE(dev.on_terminated().get());
  gate.set_value();
  auto codes = f.get();
  ASSERT_TRUE(codes) << codes.error_value();
  EXPECT_EQ(*codes, (std::vector<errc>{errc::stale_ref, errc::unavailable}));
}

}  // namespace
}  // namespace atomr::local
