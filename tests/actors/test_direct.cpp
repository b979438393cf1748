// Direct delivery (spawn_options::direct): a sender that may run handlers runs an idle direct
// actor's handler on its own thread; a busy or non-direct actor leaves the message to its mailbox;
// the order per sender holds across both ways; a handler run directly may not wait.
#include <gtest/gtest.h>

#include <atomic>
#include <future>
#include <thread>
#include <variant>

#include "atomr/local/actors.hpp"

namespace atomr::local {
namespace {

using namespace std::chrono_literals;

struct numbered {
  int seq = 0;
  std::thread::id* ran_on = nullptr;  // where the handler ran (written by it)
};
struct hold {
  std::shared_future<void> until;  // the handler blocks on it (a busy actor)
  std::promise<void>* started = nullptr;
};
struct tally_ask {
  reply_to<std::pair<int, int>> reply;  // {messages, out of order}
};
struct wait_inside {
  reply_to<int> reply;  // answers the errc of a get() on a future nobody fulfils
};
struct boom {};
using direct_msg = std::variant<numbered, hold, tally_ask, wait_inside, boom>;

class recorder : public actor<direct_msg> {
 public:
  void receive(direct_msg& m) override {
    if (auto* n = std::get_if<numbered>(&m)) {
      if (n->ran_on) *n->ran_on = std::this_thread::get_id();
      if (n->seq != next_) ++out_of_order_;
      next_ = n->seq + 1;
      ++count_;
    } else if (auto* h = std::get_if<hold>(&m)) {
      h->started->set_value();
      h->until.wait();
    } else if (auto* t = std::get_if<tally_ask>(&m)) {
      t->reply.send(std::pair{count_, out_of_order_});
    } else if (auto* w = std::get_if<wait_inside>(&m)) {
      promise<int> never;
      auto got = never.get_future().get();
      w->reply.send(got ? -1 : static_cast<int>(got.error_value().code()));
    } else {
      throw std::runtime_error("boom");
    }
  }

 private:
  int next_ = 0;
  int count_ = 0;
  int out_of_order_ = 0;
};

std::pair<int, int> tally(const actor_ref<direct_msg>& a) {
  auto r =
      a.ask<std::pair<int, int>>([](reply_to<std::pair<int, int>> reply) { return tally_ask{std::move(reply)}; }, 10s)
          .get();
  EXPECT_TRUE(r) << r.error_value();
  return r ? *r : std::pair{-1, -1};
}

// Delivers `m` directly, retrying while the actor is briefly busy (a pool worker finishing the
// batch it just answered from): the loop ends once the worker has let go.
bool deliver_here(const actor_ref<direct_msg>& a, direct_msg m) {
  const auto until = std::chrono::steady_clock::now() + 10s;
  while (std::chrono::steady_clock::now() < until) {
    if (a.try_receive_here(m)) return true;
    std::this_thread::yield();
  }
  return false;
}

TEST(Direct, AnIdleDirectActorRunsOnTheSendersThread) {
  actor_system sys;
  auto a = sys.spawn<recorder>({.name = "direct", .direct = true});
  ASSERT_TRUE(a) << a.error_value();
  EXPECT_EQ(tally(*a), std::pair(0, 0));  // started, and idle once its worker lets go
  std::thread::id ran_on;
  ASSERT_TRUE(deliver_here(*a, numbered{0, &ran_on}));
  EXPECT_EQ(ran_on, std::this_thread::get_id());
  EXPECT_EQ(tally(*a), std::pair(1, 0));
}

TEST(Direct, ANonDirectActorIsNeverRunHere) {
  actor_system sys;
  auto a = sys.spawn<recorder>({.name = "queued"});
  ASSERT_TRUE(a) << a.error_value();
  EXPECT_EQ(tally(*a), std::pair(0, 0));
  direct_msg m = numbered{0};
  for (int i = 0; i < 1000; ++i) EXPECT_FALSE(a->try_receive_here(m));
  EXPECT_EQ(std::get<numbered>(m).seq, 0);
  EXPECT_EQ(tally(*a), std::pair(0, 0));
}

TEST(Direct, ABusyActorLeavesTheMessageToItsMailbox) {
  actor_system sys;
  auto a = sys.spawn<recorder>({.name = "busy", .direct = true});
  ASSERT_TRUE(a) << a.error_value();
  std::promise<void> release, started;
  ASSERT_TRUE(a->tell(hold{release.get_future().share(), &started}));
  started.get_future().wait();  // its worker is inside the handler now
  direct_msg m = numbered{0};
  EXPECT_FALSE(a->try_receive_here(m));
  ASSERT_TRUE(std::holds_alternative<numbered>(m));  // untouched: the caller queues it
  ASSERT_TRUE(a->tell(std::move(m)));
  // Queued behind the held message: not idle either.
  direct_msg next = numbered{1};
  EXPECT_FALSE(a->try_receive_here(next));
  ASSERT_TRUE(a->tell(std::move(next)));
  release.set_value();
  EXPECT_EQ(tally(*a), std::pair(2, 0));
}

TEST(Direct, OrderPerSenderHoldsAcrossDirectAndQueuedDeliveries) {
  actor_system sys;
  auto a = sys.spawn<recorder>({.name = "mixed", .direct = true});
  ASSERT_TRUE(a) << a.error_value();
  EXPECT_EQ(tally(*a), std::pair(0, 0));
  // One sender mixes tells (queued, handled by a pool worker) and direct tries, which succeed
  // only once the mailbox is empty and fall back to a tell otherwise; every 100th message waits
  // for its direct turn, right behind the queued ones.
  constexpr int k_messages = 20000;
  int direct = 0;
  for (int seq = 0; seq < k_messages; ++seq) {
    direct_msg m = numbered{seq};
    if (seq % 100 == 99) {
      ASSERT_TRUE(deliver_here(*a, std::move(m)));
      ++direct;
    } else if (seq % 7 != 0 && a->try_receive_here(m)) {
      ++direct;
    } else {
      ASSERT_TRUE(a->tell(std::move(m)));
    }
  }
  EXPECT_EQ(tally(*a), std::pair(k_messages, 0));
  EXPECT_GE(direct, k_messages / 100);
}

TEST(Direct, WaitingInsideADirectHandlerFailsAtOnce) {
  actor_system sys;
  auto a = sys.spawn<recorder>({.name = "waiter", .direct = true});
  ASSERT_TRUE(a) << a.error_value();
  EXPECT_EQ(tally(*a), std::pair(0, 0));
  promise<int> answer;
  auto code = answer.get_future();
  ASSERT_TRUE(deliver_here(*a, wait_inside{reply_to<int>(std::move(answer))}));
  ASSERT_TRUE(code.ready());
  EXPECT_EQ(code.get().value(), static_cast<int>(errc::invalid_argument));
  // On its own worker the same handler may wait (here: for ever, so it is not asked that).
}

TEST(Direct, AHandlerThatThrowsIsSupervisedAsOnAWorker) {
  actor_system sys;
  auto a = sys.spawn<recorder>({.name = "thrower", .direct = true});
  ASSERT_TRUE(a) << a.error_value();
  EXPECT_EQ(tally(*a), std::pair(0, 0));
  ASSERT_TRUE(deliver_here(*a, numbered{0}));
  ASSERT_TRUE(deliver_here(*a, boom{}));
  // The default top-level strategy restarts it: a fresh instance, which counts seq 0 again as
  // the first in order (a resumed one would count 2 messages, one out of order).
  ASSERT_TRUE(a->tell(numbered{0}));
  EXPECT_EQ(tally(*a), std::pair(1, 0));
}

TEST(Direct, NeedsPoolDispatch) {
  actor_system sys;
  auto a = sys.spawn<recorder>({.name = "own-thread", .dispatch = dispatch_kind::dedicated, .direct = true});
  ASSERT_FALSE(a);
  EXPECT_EQ(a.error_value().code(), errc::invalid_argument);
  EXPECT_NE(a.error_value().message().find("direct delivery needs pool dispatch"), std::string::npos)
      << a.error_value();
}

}  // namespace
}  // namespace atomr::local
