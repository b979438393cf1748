// Coroutines without actors: co_await on futures, task, ATOMR_CO_TRY, when_all and when_any. A
// task started outside any actor has no home: it resumes on the thread that fulfils what it awaits.
#include <gtest/gtest.h>

#include <atomic>
#include <string>
#include <thread>
#include <tuple>
#include <variant>
#include <vector>

#include "atomr/local/actors.hpp"

namespace atomr::local {
namespace {

using namespace std::chrono_literals;

template <typename T>
future<T> ready(T v) {
  promise<T> p;
  p.set_value(std::move(v));
  return p.get_future();
}
template <typename T = int>
future<T> failed(errc code, std::string why) {
  promise<T> p;
  p.set_error(error(code, std::move(why)));
  return p.get_future();
}

task<int> plus_one(future<int> f) {
  auto v = co_await f;
  if (!v) co_return v.error_value();
  co_return *v + 1;
}

TEST(Coroutines, AReadyFutureDoesNotSuspend) {
  auto f = plus_one(ready(41)).start();
  ASSERT_TRUE(f.ready());  // ran to its end inside start()
  auto r = f.get();
  ASSERT_TRUE(r) << r.error_value();
  EXPECT_EQ(*r, 42);
}

TEST(Coroutines, ATaskIsLazyUntilStarted) {
  std::atomic<bool> ran{false};
  auto body = [&]() -> task<int> {
    ran = true;
    co_return 7;
  };
  auto t = body();
  EXPECT_FALSE(ran.load());
  auto r = std::move(t).get();
  EXPECT_TRUE(ran.load());
  ASSERT_TRUE(r);
  EXPECT_EQ(*r, 7);
}

TEST(Coroutines, WithoutAHomeItResumesOnTheFulfillingThread) {
  promise<int> p;
  std::thread::id resumed_on;
  auto body = [&](future<int> f) -> task<int> {
    auto v = co_await f;
    resumed_on = std::this_thread::get_id();
    co_return v ? *v * 2 : -1;
  };
  auto result_future = body(p.get_future()).start();
  EXPECT_FALSE(result_future.ready());
  std::thread::id fulfiller;
  std::thread t([&] {
    fulfiller = std::this_thread::get_id();
    p.set_value(21);
  });
  t.join();
  auto r = result_future.get();
  ASSERT_TRUE(r);
  EXPECT_EQ(*r, 42);
  EXPECT_EQ(resumed_on, fulfiller);
}

TEST(Coroutines, AwaitingAFailedFutureYieldsItsError) {
  auto f = plus_one(failed(errc::out_of_memory, "no room for 1 GiB")).start();
  auto r = f.get();
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error_value().code(), errc::out_of_memory);
  EXPECT_NE(r.error_value().message().find("no room for 1 GiB"), std::string::npos);
}

// ATOMR_CO_TRY leaves at the first error; the steps after it do not run.
task<std::string> three_steps(future<int> a, future<int> b, std::atomic<int>* steps) {
  ATOMR_CO_TRY(int x, co_await a);
  ++*steps;
  ATOMR_CO_TRY(int y, co_await b);
  ++*steps;
  co_return std::to_string(x + y);
}
task<void> void_steps(future<void> a, std::atomic<int>* steps) {
  ATOMR_CO_TRY_VOID(co_await a);
  ++*steps;
}

TEST(Coroutines, CoTryReturnsTheErrorFromTheCoroutine) {
  std::atomic<int> steps{0};
  auto ok_run = three_steps(ready(2), ready(3), &steps).get();
  ASSERT_TRUE(ok_run) << ok_run.error_value();
  EXPECT_EQ(*ok_run, "5");
  EXPECT_EQ(steps.load(), 2);

  steps = 0;
  auto bad = three_steps(ready(2), failed(errc::stale_ref, "buffer 9 is stale"), &steps).get();
  ASSERT_FALSE(bad);
  EXPECT_EQ(bad.error_value().code(), errc::stale_ref);
  EXPECT_EQ(steps.load(), 1);

  steps = 0;
  auto bad_void = void_steps(failed<void>(errc::timeout, "late"), &steps).get();
  ASSERT_FALSE(bad_void);
  EXPECT_EQ(bad_void.error_value().code(), errc::timeout);
  EXPECT_EQ(steps.load(), 0);
}

TEST(Coroutines, AnExceptionBecomesAnInternalError) {
  auto body = []() -> task<int> {
    throw std::runtime_error("parse failed");
    co_return 0;
  };
  auto r = body().get();
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error_value().code(), errc::internal);
  EXPECT_NE(r.error_value().message().find("parse failed"), std::string::npos);
}

// A chain of awaited tasks, each resuming its awaiter by symmetric transfer: no stack per level.
task<long> depth(int n, const future<int>& leaf) {
  if (n == 0) {
    auto v = co_await leaf;
    co_return v ? *v : -1;
  }
  auto below = co_await depth(n - 1, leaf);
  co_return below ? *below + 1 : -1;
}

TEST(Coroutines, AwaitedTasksChainDeeply) {
  promise<int> p;
  const future<int> leaf = p.get_future();
  auto f = depth(5000, leaf).start();
  EXPECT_FALSE(f.ready());
  p.set_value(10);
  auto r = f.get();
  ASSERT_TRUE(r);
  EXPECT_EQ(*r, 5010);
}

TEST(Coroutines, ATaskConvertsToAFutureWithThen) {
  promise<int> p;
  future<int> f = plus_one(p.get_future());
  std::atomic<int> seen{0};
  f.then([&](const result<int>& r) { seen = r ? *r : -1; });
  p.set_value(99);
  EXPECT_EQ(seen.load(), 100);
}

// --- when_all / when_any ------------------------------------------------------------------------

TEST(WhenAll, GathersValuesOfMixedTypes) {
  promise<int> a;
  promise<void> b;
  promise<std::string> c;
  auto all = when_all(a.get_future(), b.get_future(), c.get_future(), plus_one(ready(1)));
  c.set_value("three");
  EXPECT_FALSE(all.ready());
  b.set_value();
  a.set_value(1);
  auto r = all.get();
  ASSERT_TRUE(r) << r.error_value();
  EXPECT_EQ(std::get<0>(*r), 1);
  EXPECT_EQ(std::get<2>(*r), "three");
  EXPECT_EQ(std::get<3>(*r), 2);
}

// One member fails first: the combined future still waits for the others, then fails with that
// member's error, naming it.
TEST(WhenAll, WithOneFailingMemberWaitsForAllThenFailsWithIt) {
  promise<int> a, b, c;
  auto all = when_all(a.get_future(), b.get_future(), c.get_future());
  b.set_error(error(errc::stale_ref, "buffer 4 is stale"));
  EXPECT_FALSE(all.ready());
  a.set_value(1);
  EXPECT_FALSE(all.ready());
  c.set_value(3);
  auto r = all.get();
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error_value().code(), errc::stale_ref);
  const std::string m = r.error_value().message();
  EXPECT_NE(m.find("when_all: member 1 of 3 failed"), std::string::npos) << m;
  EXPECT_NE(m.find("buffer 4 is stale"), std::string::npos) << m;
}

TEST(WhenAll, TheFirstFailedMemberInOrderIsReported) {
  std::vector<future<int>> members;
  members.push_back(ready(0));
  members.push_back(failed(errc::timeout, "second"));
  members.push_back(ready(2));
  members.push_back(failed(errc::aborted, "fourth"));
  auto r = when_all(std::move(members)).get();
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error_value().code(), errc::timeout);
  EXPECT_NE(r.error_value().message().find("member 1 of 4 failed (1 more failed too)"), std::string::npos)
      << r.error_value().message();
}

TEST(WhenAll, SettledGivesEveryResult) {
  auto r = when_all_settled(ready(5), failed(errc::unavailable, "gone")).get();
  ASSERT_TRUE(r);
  ASSERT_TRUE(std::get<0>(*r));
  EXPECT_EQ(*std::get<0>(*r), 5);
  ASSERT_FALSE(std::get<1>(*r));
  EXPECT_EQ(std::get<1>(*r).error_value().code(), errc::unavailable);
}

// Many tasks, fulfilled from several threads: every value in its place.
TEST(WhenAll, AVectorOfTasksFulfilledFromManyThreads) {
  constexpr int n = 2000;
  std::vector<promise<int>> promises(n);
  std::vector<task<int>> tasks;
  for (int i = 0; i < n; ++i) tasks.push_back(plus_one(promises[i].get_future()));
  auto all = when_all(std::move(tasks));
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&, t] {
      for (int i = t; i < n; i += 4) promises[i].set_value(i * 10);
    });
  }
  for (auto& t : threads) t.join();
  auto r = all.get();
  ASSERT_TRUE(r) << r.error_value();
  ASSERT_EQ(r->size(), static_cast<std::size_t>(n));
  for (int i = 0; i < n; ++i) ASSERT_EQ((*r)[i], i * 10 + 1) << i;
}

TEST(WhenAll, NoMembersIsReadyAtOnce) {
  auto r = when_all(std::vector<future<int>>{}).get();
  ASSERT_TRUE(r);
  EXPECT_TRUE(r->empty());
  auto v = when_all(std::vector<future<void>>{}).get();
  EXPECT_TRUE(v);
}

TEST(WhenAll, AwaitedInsideATask) {
  auto body = []() -> task<int> {
    ATOMR_CO_TRY(auto both, co_await when_all(ready(20), plus_one(ready(21))));
    co_return std::get<0>(both) + std::get<1>(both);
  };
  auto r = body().get();
  ASSERT_TRUE(r);
  EXPECT_EQ(*r, 42);
}

TEST(WhenAny, TheFirstToFinishWins) {
  promise<int> a, b, c;
  auto any = when_any(a.get_future(), b.get_future(), c.get_future());
  EXPECT_FALSE(any.ready());
  c.set_value(30);
  a.set_value(10);
  auto r = any.get();
  ASSERT_TRUE(r);
  EXPECT_EQ(r->index, 2u);
  ASSERT_TRUE(r->value);
  EXPECT_EQ(*r->value, 30);
}

TEST(WhenAny, AnErrorCanWin) {
  promise<int> a;
  std::vector<future<int>> members{a.get_future(), failed(errc::timeout, "first")};
  auto r = when_any(std::move(members)).get();
  ASSERT_TRUE(r);
  EXPECT_EQ(r->index, 1u);
  ASSERT_FALSE(r->value);
  EXPECT_EQ(r->value.error_value().code(), errc::timeout);
  a.set_value(1);
}

TEST(WhenAny, NoMembersFails) {
  auto r = when_any(std::vector<future<int>>{}).get();
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error_value().code(), errc::invalid_argument);
}

// --- asks awaited outside actors ------------------------------------------------------------------

struct hold_reply {
  reply_to<int> reply;
};
// Keeps every reply unanswered until it stops.
class silent : public actor<std::variant<hold_reply>> {
 public:
  void receive(std::variant<hold_reply>& m) override { kept_.push_back(std::move(std::get<hold_reply>(m).reply)); }

 private:
  std::vector<reply_to<int>> kept_;
};

TEST(Coroutines, AnAwaitedAskTimesOutAtItsDeadline) {
  actor_system sys;
  auto s = sys.spawn<silent>({.name = "silent"});
  ASSERT_TRUE(s);
  auto body = [](actor_ref<std::variant<hold_reply>> target) -> task<int> {
    auto r = co_await target.ask<int>([](reply_to<int> reply) { return hold_reply{std::move(reply)}; }, 30ms);
    if (r) co_return error(errc::internal, "a silent actor answered");
    co_return r.error_value();
  };
  auto r = body(*s).get();
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error_value().code(), errc::timeout);
  EXPECT_NE(r.error_value().message().find("ask to actor 'silent' got no reply within 30 ms"), std::string::npos)
      << r.error_value().message();
}

}  // namespace
}  // namespace atomr::local
