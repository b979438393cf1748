// Remote asks awaited from coroutines (host processes, 2 and 4 ranks): from a coroutine handler,
// which resumes on its own actor in the order its requests came, and from a coroutine with no
// home; a remote deadline; when_all over asks to every rank.
#include <gtest/gtest.h>
#include <mpi.h>

#include <mutex>
#include <numeric>
#include <random>
#include <variant>
#include <vector>

#include "atomr/cluster/router.hpp"
#include "atomr/local/actors.hpp"

namespace {

using namespace std::chrono_literals;
using atomr::errc;
using atomr::cluster::router;
namespace local = atomr::local;

struct triple_ask {
  std::int64_t value = 0;
  local::reply_to<std::int64_t> reply;  // answers 3 * value + the answering rank
  template <class A>
  void serialize(A& ar) {
    ar(value, reply);
  }
};
struct keep_ask {
  local::reply_to<std::int64_t> reply;  // kept, never answered
  template <class A>
  void serialize(A& ar) {
    ar(reply);
  }
};
}  // namespace
ATOMR_WIRE_MESSAGE(triple_ask, 0x58001);
ATOMR_WIRE_MESSAGE(keep_ask, 0x58002);

namespace {

using tripler_msg = std::variant<triple_ask, keep_ask>;
class tripler : public local::actor<tripler_msg> {
 public:
  explicit tripler(int rank) : rank_(rank) {}
  void receive(tripler_msg& m) override {
    if (auto* t = std::get_if<triple_ask>(&m)) {
      t->reply.send(3 * t->value + rank_);
    } else {
      kept_.push_back(std::move(std::get<keep_ask>(m).reply));
    }
  }

 private:
  int rank_;
  std::vector<local::reply_to<std::int64_t>> kept_;
};

std::int64_t tripled(std::int64_t v, int rank) { return 3 * v + rank; }

// A local request: ask the next rank's tripler twice, awaiting each answer in the handler.
struct relay {
  std::int64_t value = 0;
  local::reply_to<std::int64_t> reply;
};
struct relay_silent {
  local::reply_to<std::int64_t> reply;  // answers the errc of an awaited ask that gets no reply
};
using relay_msg = std::variant<relay, relay_silent>;

class relayer : public local::coroutine_actor<relay_msg> {
 public:
  relayer(router* r, local::mailbox_mode mode) : coroutine_actor(mode), router_(r) {}

 private:
  local::task<void> handle(relay_msg m) override {
    const int next = (router_->rank() + 1) % router_->size();
    auto peer = router_->lookup<tripler_msg>(next, "tripler");
    if (auto* s = std::get_if<relay_silent>(&m)) {
      auto r = co_await peer.ask<std::int64_t>([](auto reply) { return keep_ask{std::move(reply)}; }, 150ms);
      co_return s->reply.send(r ? -1 : static_cast<std::int64_t>(r.error_value().code()));
    }
    auto& req = std::get<relay>(m);
    const local::cell_base* me = local::cell_base::current();
    auto once = co_await peer.ask<std::int64_t>(
        [&](auto reply) {
          return triple_ask{req.value, std::move(reply)};
        },
        30s);
    if (!once) co_return req.reply.fail(once.error_value());
    auto twice = co_await peer.ask<std::int64_t>([&](auto reply) { return triple_ask{*once, std::move(reply)}; }, 30s);
    if (!twice) co_return req.reply.fail(twice.error_value());
    if (local::cell_base::current() != me) {
      co_return req.reply.fail(atomr::error(errc::internal, "resumed outside the relayer"));
    }
    req.reply.send(*twice);
  }
  router* router_;
};

class coroutine_asks : public ::testing::TestWithParam<local::mailbox_mode> {
 protected:
  void SetUp() override {
    MPI_Comm_rank(MPI_COMM_WORLD, &rank_);
    MPI_Comm_size(MPI_COMM_WORLD, &size_);
    auto r = router::start(MPI_COMM_WORLD, sys_, {});
    ASSERT_TRUE(r) << r.error_value();
    router_ = std::move(*r);
    ASSERT_TRUE(router_->publish("tripler", sys_.spawn<tripler>(local::spawn_options{}, rank_).value()));
    MPI_Barrier(MPI_COMM_WORLD);
  }
  void TearDown() override {
    MPI_Barrier(MPI_COMM_WORLD);  // every rank's asks are answered before any router stops
    if (router_) {
      EXPECT_TRUE(router_->stop());
    }
  }
  int rank_ = 0;
  int size_ = 0;
  local::actor_system sys_;
  std::unique_ptr<router> router_;
};

// Many relays in flight from one sender: each answer is right, and (hold) they finish in order.
TEST_P(coroutine_asks, a_coroutine_handler_awaits_remote_asks) {
  auto a = sys_.spawn<relayer>(local::spawn_options{}, router_.get(), GetParam());
  ASSERT_TRUE(a);
  const int next = (rank_ + 1) % size_;
  std::mt19937_64 rng(58 + static_cast<unsigned>(rank_));
  constexpr int n = 300;
  std::vector<std::int64_t> values(n);
  std::vector<local::future<std::int64_t>> answers;
  std::vector<int> finished;
  std::mutex finished_mutex;
  for (int i = 0; i < n; ++i) {
    values[i] = static_cast<std::int64_t>(rng() % 1000000);
    answers.push_back(a->ask<std::int64_t>([&](auto reply) { return relay{values[i], std::move(reply)}; }, 60s));
    answers.back().then([&, i](const auto&) {
      std::lock_guard lock(finished_mutex);
      finished.push_back(i);
    });
  }
  auto all = local::when_all(answers).get();
  ASSERT_TRUE(all) << all.error_value();
  for (int i = 0; i < n; ++i) ASSERT_EQ((*all)[i], tripled(tripled(values[i], next), next)) << i;
  if (GetParam() == local::mailbox_mode::hold) {
    std::lock_guard lock(finished_mutex);
    std::vector<int> in_order(n);
    std::iota(in_order.begin(), in_order.end(), 0);
    EXPECT_EQ(finished, in_order);
  }
}

TEST_P(coroutine_asks, an_awaited_remote_ask_times_out) {
  auto a = sys_.spawn<relayer>(local::spawn_options{}, router_.get(), GetParam());
  ASSERT_TRUE(a);
  auto code = a->ask<std::int64_t>([](auto reply) { return relay_silent{std::move(reply)}; }, 30s).get();
  ASSERT_TRUE(code) << code.error_value();
  EXPECT_EQ(*code, static_cast<std::int64_t>(errc::timeout));
}

// A coroutine with no home (this thread) asks every rank, then awaits them all at once.
TEST_P(coroutine_asks, when_all_over_asks_to_every_rank) {
  auto body = [](router* r, int size) -> local::task<std::int64_t> {
    std::vector<local::future<std::int64_t>> asks;
    for (int p = 0; p < size; ++p) {
      asks.push_back(r->lookup<tripler_msg>(p, "tripler")
                         .ask<std::int64_t>(
                             [p](auto reply) {
                               return triple_ask{100 + p, std::move(reply)};
                             },
                             30s));
    }
    ATOMR_CO_TRY(auto each, co_await local::when_all(std::move(asks)));
    std::int64_t sum = 0;
    for (auto v : each) sum += v;
    co_return sum;
  };
  auto sum = body(router_.get(), size_).get();
  ASSERT_TRUE(sum) << sum.error_value();
  std::int64_t expected = 0;
  for (int p = 0; p < size_; ++p) expected += tripled(100 + p, p);
  EXPECT_EQ(*sum, expected);
}

// A coroutine that holds a ref across its router's stop: its ask then fails with unavailable.
TEST_P(coroutine_asks, a_coroutine_outliving_its_router_gets_unavailable) {
  auto body = [](atomr::cluster::cluster_ref<tripler_msg> peer, local::future<void> gate) -> local::task<int> {
    ATOMR_CO_TRY_VOID(co_await gate);
    auto r = co_await peer.ask<std::int64_t>([](auto reply) { return triple_ask{1, std::move(reply)}; }, 10s);
    co_return r ? -1 : static_cast<int>(r.error_value().code());
  };
  local::promise<void> gate;
  auto code = body(router_->lookup<tripler_msg>((rank_ + 1) % size_, "tripler"), gate.get_future()).start();
  MPI_Barrier(MPI_COMM_WORLD);
  ASSERT_TRUE(router_->stop());
  router_.reset();
  gate.set_value();
  auto r = code.get();
  ASSERT_TRUE(r) << r.error_value();
  EXPECT_EQ(*r, static_cast<int>(errc::unavailable));
}

INSTANTIATE_TEST_SUITE_P(modes, coroutine_asks,
                         ::testing::Values(local::mailbox_mode::hold, local::mailbox_mode::interleave),
                         [](const auto& mode) {
                           return mode.param == local::mailbox_mode::hold ? "hold" : "interleave";
                         });

}  // namespace
