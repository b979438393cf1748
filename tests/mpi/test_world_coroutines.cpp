// Collectives awaited from coroutines: a chain of collectives and copies, a coroutine handler that
// awaits collectives and resumes on its own actor, and a coroutine whose world fails under it
// (a withheld collective): it gets the world's error, and every later await fails at once.
#include <chrono>
#include <optional>
#include <utility>
#include <variant>

#include "atomr/local/actors.hpp"
#include "world_fixture.hpp"

namespace atomr {
namespace {

using namespace std::chrono_literals;

class WorldCoroutines : public testing::world_fixture {};

// upload, all_reduce, broadcast, two all_reduces at once, download: each step awaited.
local::task<std::vector<float>> sum_then_broadcast(cluster::world* w, local::device dev, int rank) {
  ATOMR_CO_TRY(auto a, co_await dev.allocate<float>(256));
  ATOMR_CO_TRY(auto b, co_await dev.allocate<float>(256));
  const std::vector<float> mine(256, static_cast<float>(rank + 1));
  ATOMR_CO_TRY_VOID(co_await dev.upload(a, std::span<const float>(mine)));
  ATOMR_CO_TRY_VOID(co_await w->all_reduce(a));
  ATOMR_CO_TRY_VOID(co_await w->broadcast(a, b, w->size() - 1));
  // Submitted in this order on every rank, then awaited together.
  auto first = w->all_reduce(a);
  auto second = w->all_reduce(b);
  ATOMR_CO_TRY_VOID(co_await local::when_all(std::move(first), std::move(second)));
  std::vector<float> out(512);
  ATOMR_CO_TRY_VOID(co_await dev.download(a, std::span<float>(out).first(256)));
  ATOMR_CO_TRY_VOID(co_await dev.download(b, std::span<float>(out).last(256)));
  co_return out;
}

TEST_F(WorldCoroutines, ACoroutineChainsCollectivesAndCopies) {
  auto w = make_world();
  ASSERT_TRUE(w);
  const auto out = sum_then_broadcast(w.get(), dev_, rank_).get();
  ASSERT_TRUE(out) << out.error_value();
  // After the first all_reduce every element is n(n+1)/2; both buffers then hold it, summed once more.
  const float once = static_cast<float>(size_ * (size_ + 1) / 2);
  for (std::size_t i = 0; i < out->size(); ++i) ASSERT_EQ((*out)[i], once * static_cast<float>(size_)) << i;
}

struct sum_request {
  int index = 0;
  local::reply_to<float> reply;  // the element of buffer `index` after a sum over the world
};

// Each request: upload, an awaited all_reduce, an awaited download. Held mode keeps the requests in
// order, so every rank submits its collectives in the same order.
class summer : public local::coroutine_actor<sum_request> {
 public:
  summer(cluster::world* w, local::device dev, int rank) : w_(w), dev_(std::move(dev)), rank_(rank) {}

 private:
  local::task<void> handle(sum_request m) override {
    const local::cell_base* me = local::cell_base::current();
    auto b = co_await dev_.allocate<float>(64);
    if (!b) co_return m.reply.fail(b.error_value());
    const std::vector<float> v(64, static_cast<float>(rank_ + m.index));
    if (auto r = co_await dev_.upload(*b, std::span<const float>(v)); !r) co_return m.reply.fail(r.error_value());
    if (auto r = co_await w_->all_reduce(*b); !r) co_return m.reply.fail(r.error_value());
    float got = 0;
    if (auto r = co_await dev_.download(*b, std::span<float>(&got, 1)); !r) co_return m.reply.fail(r.error_value());
    if (local::cell_base::current() != me) co_return m.reply.fail(error(errc::internal, "resumed off the actor"));
    m.reply.send(got);
  }
  cluster::world* w_;
  local::device dev_;
  int rank_;
};

TEST_F(WorldCoroutines, AHandlerAwaitsCollectivesOnItsOwnActorInOrder) {
  auto w = make_world();
  ASSERT_TRUE(w);
  auto a = sys_.spawn<summer>({}, w.get(), dev_, rank_);
  ASSERT_TRUE(a);
  constexpr int n = 40;
  std::vector<local::future<float>> sums;
  for (int i = 0; i < n; ++i) sums.push_back(a->ask<float>([i](auto r) { return sum_request{i, std::move(r)}; }, 60s));
  for (int i = 0; i < n; ++i) {
    const auto r = sums[static_cast<std::size_t>(i)].get();
    ASSERT_TRUE(r) << "request " << i << ": " << r.error_value();
    EXPECT_EQ(*r, summed(i, 1)) << "request " << i;
  }
  a->stop();
  ASSERT_TRUE(a->on_terminated().wait_for(10s));
}

// A coroutine suspended on a collective another rank withholds: the world's deadline fails it with
// the timeout; the world stays failed, so an await after that fails at once with aborted.
using codes = std::pair<std::optional<errc>, std::optional<errc>>;  // nullopt: it succeeded
local::task<codes> await_withheld(cluster::world* w, local::gpu_ref<std::int32_t> b) {
  const auto code = [](const result<void>& r) { return r ? std::nullopt : std::optional(r.error_value().code()); };
  const auto pending = co_await w->all_reduce(b);
  const auto later = co_await w->barrier();
  co_return codes{code(pending), code(later)};
}

TEST_F(WorldCoroutines, AnAwaitedCollectiveOfAFailedWorldGetsItsErrorAndLaterAwaitsFailAtOnce) {
  if (size_ < 2) GTEST_SKIP() << "needs 2 ranks";
  cluster::world_options o;
  o.op_timeout = 500ms;
  auto w = make_world(o);
  ASSERT_TRUE(w);
  auto b = buffer(std::vector<std::int32_t>(64, 1));
  ASSERT_TRUE(w->all_reduce(b).get());  // every rank is up
  if (rank_ != 0) return;               // withhold the next one
  const auto got = await_withheld(w.get(), b).get();
  ASSERT_TRUE(got) << got.error_value();
  EXPECT_EQ(got->first, errc::timeout);
  EXPECT_EQ(got->second, errc::aborted);
  ASSERT_TRUE(w->failure());
  EXPECT_EQ(w->failure()->code(), errc::timeout);
}

}  // namespace
}  // namespace atomr
