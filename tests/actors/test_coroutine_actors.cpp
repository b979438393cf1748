// Actors whose handlers are coroutines: the two mailbox modes, where a suspended handler
// resumes, and what stopping or restarting the actor does to suspended handlers.
#include <gtest/gtest.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <memory>
#include <mutex>
#include <random>
#include <thread>
#include <variant>
#include <vector>

#include "atomr/local/actors.hpp"

namespace atomr::local {
namespace {

using namespace std::chrono_literals;

// A message that waits for `gate` inside its handler.
struct step {
  int sender = 0;
  int seq = 0;
  future<void> gate;
};
struct event {
  bool start;
  int sender;
  int seq;
};
// Answered once `count` steps have finished (or, with `started`, started).
struct await_count {
  int count;
  bool started;
  reply_to<std::vector<event>> reply;
};
using gated_msg = std::variant<step, await_count>;

class gated : public coroutine_actor<gated_msg> {
 public:
  explicit gated(mailbox_mode mode) : coroutine_actor(mode) {}

 private:
  task<void> handle(gated_msg m) override {
    if (auto* w = std::get_if<await_count>(&m)) {
      waiting_.push_back(std::move(*w));
      answer();
      co_return;
    }
    step s = std::move(std::get<step>(m));
    log_.push_back({true, s.sender, s.seq});
    ++started_;
    max_active_ = std::max(max_active_, ++active_);
    answer();
    auto passed = co_await s.gate;
    if (!passed) throw actor_failure(passed.error_value());
    --active_;
    ++finished_;
    log_.push_back({false, s.sender, s.seq});
    answer();
  }
  void answer() {
    std::erase_if(waiting_, [&](await_count& w) {
      if ((w.started ? started_ : finished_) < w.count) return false;
      auto log = log_;
      log.push_back({false, -1, max_active_});  // the peak of suspended handlers, last
      w.reply.send(std::move(log));
      return true;
    });
  }
  std::vector<event> log_;
  std::vector<await_count> waiting_;
  int started_ = 0, finished_ = 0, active_ = 0, max_active_ = 0;
};

future<std::vector<event>> when_count(const actor_ref<gated_msg>& a, int count, bool started) {
  return a.ask<std::vector<event>>(
      [&](reply_to<std::vector<event>> r) {
        return await_count{count, started, std::move(r)};
      },
      60s);
}

// Per sender, the events of kind `start` come in the order sent.
void expect_sender_order(const std::vector<event>& log, bool start, int senders) {
  std::vector<int> next(senders, 0);
  for (const auto& e : log) {
    if (e.sender < 0 || e.start != start) continue;
    ASSERT_EQ(e.seq, next[e.sender]) << "sender " << e.sender;
    ++next[e.sender];
  }
}

// Hold: several senders, gates opened in a seeded random order by another thread. No second
// handler ever runs while one is suspended; each finishes before the next starts; the order per
// sender holds.
TEST(CoroutineActors, HoldKeepsTheMailboxAndTheOrderPerSender) {
  constexpr int senders = 4, per = 150, total = senders * per;
  actor_system sys(system_config{.pool_threads = 2});
  auto a = sys.spawn<gated>({.name = "held"}, mailbox_mode::hold);
  ASSERT_TRUE(a);
  std::vector<promise<void>> gates(total);
  std::vector<int> order(total);
  for (int i = 0; i < total; ++i) order[i] = i;
  std::shuffle(order.begin(), order.end(), std::mt19937(58));
  auto done = when_count(*a, total, false);
  std::vector<std::thread> threads;
  for (int s = 0; s < senders; ++s) {
    threads.emplace_back([&, s] {
      for (int i = 0; i < per; ++i) ASSERT_TRUE(a->tell(step{s, i, gates[s * per + i].get_future()}));
    });
  }
  threads.emplace_back([&] {
    for (int g : order) gates[g].set_value();
  });
  for (auto& t : threads) t.join();
  auto log = done.get();
  ASSERT_TRUE(log) << log.error_value();
  ASSERT_EQ(log->back().seq, 1) << "two handlers were suspended at once";
  log->pop_back();
  ASSERT_EQ(log->size(), static_cast<std::size_t>(2 * total));
  for (std::size_t i = 0; i < log->size(); i += 2) {
    EXPECT_TRUE((*log)[i].start);
    EXPECT_FALSE((*log)[i + 1].start);
    EXPECT_EQ((*log)[i].sender, (*log)[i + 1].sender);
    EXPECT_EQ((*log)[i].seq, (*log)[i + 1].seq);
  }
  expect_sender_order(*log, true, senders);
}

// Interleave: every handler starts (in order per sender) while the earlier ones are suspended;
// they then finish in the order their gates open.
TEST(CoroutineActors, InterleaveRunsOtherMessagesWhileSuspended) {
  constexpr int senders = 3, per = 100, total = senders * per;
  actor_system sys(system_config{.pool_threads = 2});
  auto a = sys.spawn<gated>({.name = "interleaved"}, mailbox_mode::interleave);
  ASSERT_TRUE(a);
  std::vector<promise<void>> gates(total);
  auto all_started = when_count(*a, total, true);
  std::vector<std::thread> threads;
  for (int s = 0; s < senders; ++s) {
    threads.emplace_back([&, s] {
      for (int i = 0; i < per; ++i) ASSERT_TRUE(a->tell(step{s, i, gates[s * per + i].get_future()}));
    });
  }
  for (auto& t : threads) t.join();
  auto started = all_started.get();
  ASSERT_TRUE(started) << started.error_value();
  EXPECT_EQ(started->back().seq, total);  // all suspended at once
  started->pop_back();
  expect_sender_order(*started, true, senders);

  std::vector<int> order(total);
  for (int i = 0; i < total; ++i) order[i] = i;
  std::shuffle(order.begin(), order.end(), std::mt19937(580));
  auto done = when_count(*a, total, false);
  for (int g : order) gates[g].set_value();  // one thread: resumptions queue in this order
  auto log = done.get();
  ASSERT_TRUE(log) << log.error_value();
  log->pop_back();
  std::vector<int> finished;
  for (const auto& e : *log) {
    if (!e.start) finished.push_back(e.sender * per + e.seq);
  }
  EXPECT_EQ(finished, order);
}

// --- where a handler resumes -------------------------------------------------------------------

// The kernel's id of this thread. (Not std::this_thread::get_id(): clang 14 may take pthread_self(),
// declared const, from before a co_await to after it.)
long os_thread() { return static_cast<long>(::syscall(SYS_gettid)); }

struct probe {
  future<int> value;
  reply_to<std::vector<long>> reply;
};
// Records the thread it starts on and the thread it resumes on, and checks it is still the
// current actor after resuming.
class prober : public coroutine_actor<std::variant<probe>> {
  task<void> handle(std::variant<probe> m) override {
    auto& p = std::get<probe>(m);
    const long before = os_thread();
    const cell_base* me = cell_base::current();
    auto v = co_await p.value;
    if (!v || cell_base::current() != me) co_return p.reply.fail(error(errc::internal, "resumed elsewhere"));
    p.reply.send(std::vector{before, os_thread()});
  }
};

TEST(CoroutineActors, ASuspendedHandlerResumesOnItsOwnDispatcher) {
  actor_system sys(system_config{.pool_threads = 2});
  auto a = sys.spawn<prober>({.name = "prober", .dispatch = dispatch_kind::dedicated});
  ASSERT_TRUE(a);
  promise<int> value;
  auto threads = a->ask<std::vector<long>>([&](auto r) { return probe{value.get_future(), std::move(r)}; }, 30s);
  long fulfiller_id = 0;
  std::thread([&] {
    fulfiller_id = os_thread();
    value.set_value(1);
  }).join();
  auto r = threads.get();
  ASSERT_TRUE(r) << r.error_value();
  EXPECT_EQ((*r)[0], (*r)[1]);  // the dedicated thread, both times
  EXPECT_NE((*r)[1], fulfiller_id);
  EXPECT_NE((*r)[1], os_thread());
}

// --- stopping and restarting with suspended handlers ------------------------------------------------

struct park {
  future<int> gate;
  std::shared_ptr<int> sentinel;  // destroyed with the frame
  reply_to<int> reply;
  promise<void> parked;
};
struct crash {};
struct started_task {
  future<int> gate;
  reply_to<future<int>> reply;
};
using parker_msg = std::variant<park, crash, started_task>;

class parker : public coroutine_actor<parker_msg> {
 public:
  explicit parker(std::atomic<int>* starts) : coroutine_actor(mailbox_mode::interleave), starts_(starts) {}
  void on_start() override { ++*starts_; }

 private:
  task<void> handle(parker_msg m) override {
    if (std::holds_alternative<crash>(m)) throw std::runtime_error("crash requested");
    if (auto* s = std::get_if<started_task>(&m)) {
      // A task started on the actor's thread belongs to the actor.
      auto inner = [](future<int> gate) -> task<int> {
        auto v = co_await gate;
        co_return v;
      };
      s->reply.send(inner(s->gate).start());
      co_return;
    }
    auto& p = std::get<park>(m);
    p.parked.set_value();
    auto v = co_await p.gate;
    if (!v) co_return p.reply.fail(v.error_value());
    p.reply.send(*v);
  }
  std::atomic<int>* starts_;
};

struct parked_ask {
  future<int> reply;
  std::weak_ptr<int> sentinel;
};

parked_ask park_one(const actor_ref<parker_msg>& a, const future<int>& gate) {
  promise<void> parked;
  auto parked_f = parked.get_future();
  auto sentinel = std::make_shared<int>(5);
  parked_ask out{{}, sentinel};
  out.reply = a.ask<int>(
      [&](reply_to<int> r) {
        return park{gate, std::move(sentinel), std::move(r), std::move(parked)};
      },
      30s);
  EXPECT_TRUE(parked_f.get());  // the handler is (about to be) suspended on the gate
  return out;
}

TEST(CoroutineActors, StoppingDestroysSuspendedHandlersAndFailsTheirAsks) {
  std::atomic<int> starts{0};
  actor_system sys(system_config{.pool_threads = 2});
  auto a = sys.spawn<parker>({.name = "parker"}, &starts);
  ASSERT_TRUE(a);
  promise<int> gate;
  auto first = park_one(*a, gate.get_future());
  auto second = park_one(*a, gate.get_future());
  promise<int> task_gate;
  auto inner = a->ask<future<int>>([&](auto r) { return started_task{task_gate.get_future(), std::move(r)}; }, 30s);
  auto inner_future = inner.get();
  ASSERT_TRUE(inner_future);
  EXPECT_FALSE(inner_future->ready());

  a->stop();
  ASSERT_TRUE(a->on_terminated().get());
  for (auto* p : {&first, &second}) {
    auto r = p->reply.get();
    ASSERT_FALSE(r);
    EXPECT_EQ(r.error_value().code(), errc::unavailable);
    EXPECT_NE(r.error_value().message().find("actor 'parker' stopped"), std::string::npos) << r.error_value();
    EXPECT_TRUE(p->sentinel.expired());  // the frame and its message are gone
  }
  auto t = inner_future->get();
  ASSERT_FALSE(t);
  EXPECT_EQ(t.error_value().code(), errc::unavailable);
  // Fulfilling what they awaited now resumes nothing.
  gate.set_value(1);
  task_gate.set_value(2);
  EXPECT_EQ(starts.load(), 1);
}

TEST(CoroutineActors, ARestartDestroysSuspendedHandlersWithAbortedAsks) {
  std::atomic<int> starts{0};
  actor_system sys(system_config{.pool_threads = 2});
  auto a = sys.spawn<parker>({.name = "restarted"}, &starts);
  ASSERT_TRUE(a);
  promise<int> gate;
  auto parked = park_one(*a, gate.get_future());
  ASSERT_TRUE(a->tell(crash{}));  // the default strategy restarts it
  auto r = parked.reply.get();
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error_value().code(), errc::aborted);
  EXPECT_TRUE(parked.sentinel.expired());
  gate.set_value(1);
  // The new instance works.
  promise<int> open;
  open.set_value(9);
  auto again = park_one(*a, open.get_future());
  auto v = again.reply.get();
  ASSERT_TRUE(v) << v.error_value();
  EXPECT_EQ(*v, 9);
  EXPECT_EQ(starts.load(), 2);
}

TEST(CoroutineActors, SystemShutdownDestroysSuspendedHandlers) {
  std::atomic<int> starts{0};
  promise<int> gate;
  parked_ask parked;
  {
    actor_system sys(system_config{.pool_threads = 2});
    auto a = sys.spawn<parker>({.name = "until-shutdown"}, &starts);
    ASSERT_TRUE(a);
    parked = park_one(*a, gate.get_future());
  }
  auto r = parked.reply.get();
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error_value().code(), errc::unavailable);
  EXPECT_TRUE(parked.sentinel.expired());
  gate.set_value(1);
}

// --- failures and deadlines inside handlers --------------------------------------------------------

struct silent_msg {
  reply_to<int> reply;
};
class silent_actor : public actor<std::variant<silent_msg>> {
 public:
  void receive(std::variant<silent_msg>& m) override { kept_.push_back(std::move(std::get<silent_msg>(m).reply)); }

 private:
  std::vector<reply_to<int>> kept_;
};
struct ask_silent {
  actor_ref<std::variant<silent_msg>> to;
  reply_to<int> reply;
};
struct fail_after {
  future<int> gate;
};
using asker_msg = std::variant<ask_silent, fail_after>;

// Awaits an ask to an actor that never answers; passes on the timeout as its own error.
class asker : public coroutine_actor<asker_msg> {
 public:
  explicit asker(std::atomic<int>* starts) : starts_(starts) {}
  void on_start() override { ++*starts_; }

 private:
  task<void> handle(asker_msg m) override {
    if (auto* f = std::get_if<fail_after>(&m)) {
      ATOMR_CO_TRY(int v, co_await f->gate);  // a failed gate fails the actor after a suspension
      (void)v;
      co_return;
    }
    auto& a = std::get<ask_silent>(m);
    auto r = co_await a.to.ask<int>([](reply_to<int> reply) { return silent_msg{std::move(reply)}; }, 40ms);
    if (r) co_return a.reply.send(*r);
    a.reply.fail(r.error_value());
  }
  std::atomic<int>* starts_;
};

TEST(CoroutineActors, AnAwaitedAskTimesOutInsideAHandler) {
  std::atomic<int> starts{0};
  actor_system sys(system_config{.pool_threads = 2});
  auto s = sys.spawn<silent_actor>({.name = "never-answers"});
  auto a = sys.spawn<asker>({.name = "asker"}, &starts);
  ASSERT_TRUE(s && a);
  auto r = a->ask<int>([&](reply_to<int> reply) { return ask_silent{*s, std::move(reply)}; }, 30s).get();
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error_value().code(), errc::timeout);
  EXPECT_NE(r.error_value().message().find("actor 'never-answers' got no reply within 40 ms"), std::string::npos)
      << r.error_value();
}

TEST(CoroutineActors, AnErrorAfterASuspensionFailsTheActor) {
  std::atomic<int> starts{0};
  actor_system sys(system_config{.pool_threads = 2});
  auto a = sys.spawn<asker>({.name = "fails-late"}, &starts);
  ASSERT_TRUE(a);
  promise<int> gate;
  ASSERT_TRUE(a->tell(fail_after{gate.get_future()}));
  std::thread([&] { gate.set_error(error(errc::stale_ref, "buffer 3 is stale")); }).join();
  // The restart runs before this ask (the hold keeps it queued until the failed handler ends).
  auto s = sys.spawn<silent_actor>({.name = "never-answers-2"});
  ASSERT_TRUE(s);
  auto r = a->ask<int>([&](reply_to<int> reply) { return ask_silent{*s, std::move(reply)}; }, 30s).get();
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error_value().code(), errc::timeout);
  EXPECT_EQ(starts.load(), 2);
}

// --- direct actors --------------------------------------------------------------------------------

// Spawned direct: the handler starts on the deliverer's thread, and after a co_await goes on on
// the pool, so the deliverer's thread never waits.
TEST(CoroutineActors, ADirectHandlerAwaitsWithoutHoldingTheDeliverersThread) {
  actor_system sys(system_config{.pool_threads = 2});
  auto a = sys.spawn<prober>({.name = "direct-prober", .direct = true});
  ASSERT_TRUE(a);
  promise<int> value;
  promise<std::vector<long>> answer;
  auto threads = answer.get_future();
  std::variant<probe> m = probe{value.get_future(), reply_to<std::vector<long>>(std::move(answer))};
  // (Retried while the actor is still starting on a pool worker.)
  bool here = false;
  for (const auto until = std::chrono::steady_clock::now() + 10s; !here && std::chrono::steady_clock::now() < until;) {
    here = a->try_receive_here(m);
    if (!here) std::this_thread::yield();
  }
  ASSERT_TRUE(here);
  EXPECT_FALSE(threads.ready());  // suspended; this thread is free again
  // Held: a second direct delivery is refused while the first is suspended.
  promise<int> second_value;
  second_value.set_value(2);
  promise<std::vector<long>> second_answer;
  auto second = second_answer.get_future();
  std::variant<probe> m2 = probe{second_value.get_future(), reply_to<std::vector<long>>(std::move(second_answer))};
  EXPECT_FALSE(a->try_receive_here(m2));
  ASSERT_TRUE(a->tell(std::move(m2)));
  value.set_value(1);
  auto r = threads.get();
  ASSERT_TRUE(r) << r.error_value();
  EXPECT_EQ((*r)[0], os_thread());
  EXPECT_NE((*r)[1], os_thread());
  EXPECT_TRUE(second.get());
}

}  // namespace
}  // namespace atomr::local
