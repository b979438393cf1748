#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <latch>
#include <mutex>
#include <thread>
#include <vector>

#include "atomr/local/actors/future.hpp"
#include "atomr/local/actors/timer_service.hpp"

namespace atomr::local {
namespace {

using namespace std::chrono_literals;
using clock = std::chrono::steady_clock;

TEST(Future, ValueCrossesThreads) {
  promise<int> p;
  auto f = p.get_future();
  std::thread t([&] { p.set_value(42); });
  EXPECT_EQ(f.get().value(), 42);
  t.join();
}

TEST(Future, FirstFulfilmentWins) {
  promise<int> p;
  auto f = p.get_future();
  EXPECT_TRUE(p.set_error(error(errc::timeout, "late")));
  EXPECT_FALSE(p.set_value(1));
  EXPECT_EQ(f.get().error_value().code(), errc::timeout);
}

TEST(Future, ContinuationsRunOnFulfilmentOrAtOnce) {
  promise<int> p;
  auto f = p.get_future();
  std::vector<int> seen;
  f.then([&](const result<int>& r) { seen.push_back(r.value()); });
  f.then([&](const result<int>& r) { seen.push_back(r.value() + 1); });
  EXPECT_TRUE(seen.empty());
  p.set_value(7);
  EXPECT_EQ(seen, (std::vector<int>{7, 8}));
  f.then([&](const result<int>& r) { seen.push_back(r.value() + 2); });  // already ready: runs now
  EXPECT_EQ(seen, (std::vector<int>{7, 8, 9}));
}

TEST(Future, DroppedPromiseFailsItsFuture) {
  future<int> f;
  {
    promise<int> p;
    f = p.get_future();
  }
  ASSERT_TRUE(f.ready());
  EXPECT_EQ(f.get().error_value().code(), errc::unavailable);
}

TEST(Future, DropReasonNamesWhy) {
  promise<int> p;
  future<int> f = p.get_future();
  {
    detail::drop_reason_scope reason(error(errc::unavailable, "actor 'x' stopped"));
    reply_to<int> r(std::move(p));
  }
  EXPECT_EQ(f.get().error_value().message(), "actor 'x' stopped");
}

TEST(Future, WaitForTimesOutWhenNotFulfilled) {
  promise<int> p;
  auto f = p.get_future();
  EXPECT_FALSE(f.wait_for(1ms));
  p.set_value(1);
  EXPECT_TRUE(f.wait_for(0ms));
}

// A hook that fulfils the promise on its third call, on the waiting thread.
class fulfil_on_third final : public progress_hook {
 public:
  explicit fulfil_on_third(promise<int>& p) : p_(p) {}
  void progress() noexcept override {
    if (++calls == 3) {
      waiter = std::this_thread::get_id();
      p_.set_value(3);
    }
  }
  std::atomic<int> calls{0};
  std::thread::id waiter;

 private:
  promise<int>& p_;
};

TEST(Future, WaiterRunsTheProgressHookUntilItsValueComes) {
  promise<int> p;
  auto hook = std::make_shared<fulfil_on_third>(p);
  p.set_progress_hook(hook);
  auto f = p.get_future();
  EXPECT_EQ(f.get().value(), 3);
  EXPECT_EQ(hook->calls.load(), 3);  // not called again once the value was there
  EXPECT_EQ(hook->waiter, std::this_thread::get_id());
  EXPECT_EQ(f.get().value(), 3);  // ready: no more calls
  EXPECT_EQ(hook->calls.load(), 3);
}

TEST(Future, AReadyFutureNeverCallsItsHook) {
  promise<int> p;
  auto hook = std::make_shared<fulfil_on_third>(p);
  p.set_progress_hook(hook);
  p.set_value(7);
  EXPECT_EQ(p.get_future().get().value(), 7);
  EXPECT_EQ(hook->calls.load(), 0);
}

// A hook that records done_looking and lets another thread know the waiter stopped looking.
class note_done_looking final : public progress_hook {
 public:
  explicit note_done_looking(promise<int>* fulfil_on_third = nullptr) : fulfil_(fulfil_on_third) {}
  void progress() noexcept override {
    if (++looks == 3 && fulfil_ != nullptr) fulfil_->set_value(3);
  }
  void done_looking() noexcept override {
    ++handed_back;
    stopped.count_down();
  }
  std::atomic<int> looks{0};
  std::atomic<int> handed_back{0};
  std::latch stopped{1};

 private:
  promise<int>* fulfil_;
};

// A waiter tells its hook when it stops looking, once: before it sleeps (a device operation's
// completion then goes back to the completion thread), and also when the value came while it
// looked (a hook may hold work it must give back, the value having come another way); adding a
// continuation tells it too.
TEST(Future, AWaiterThatStopsLookingSaysSoToItsHook) {
  promise<int> late;
  auto slept = std::make_shared<note_done_looking>();
  late.set_progress_hook(slept);
  auto f = late.get_future();
  // The value is set only once the waiter said it stopped looking: no timing involved.
  std::thread fulfiller([&] {
    slept->stopped.wait();
    late.set_value(11);
  });
  EXPECT_EQ(f.get().value(), 11);
  fulfiller.join();
  EXPECT_GT(slept->looks.load(), 0);
  EXPECT_EQ(slept->handed_back.load(), 1);

  promise<int> looked;
  auto found = std::make_shared<note_done_looking>(&looked);
  looked.set_progress_hook(found);
  EXPECT_EQ(looked.get_future().get().value(), 3);
  EXPECT_EQ(found->looks.load(), 3);
  EXPECT_EQ(found->handed_back.load(), 1);

  promise<int> chained;
  auto handed = std::make_shared<note_done_looking>();
  chained.set_progress_hook(handed);
  auto g = chained.get_future();
  int seen = 0;
  g.then([&](const result<int>& r) { seen = r.value(); });
  EXPECT_EQ(handed->handed_back.load(), 1);
  chained.set_value(5);
  EXPECT_EQ(seen, 5);
  EXPECT_EQ(handed->looks.load(), 0);
}

// A hook that moves a done mark on its second call (a progress thread publishing completions).
class mark_on_second final : public progress_hook {
 public:
  mark_on_second(std::atomic<std::uint64_t>& mark, std::uint64_t to) : mark_(mark), to_(to) {}
  void progress() noexcept override {
    if (++calls == 2) mark_.store(to_, std::memory_order_release);
  }
  std::atomic<int> calls{0};

 private:
  std::atomic<std::uint64_t>& mark_;
  std::uint64_t to_;
};

TEST(Future, ADoneMarkFulfilsWithSuccessBeforeSetValue) {
  std::atomic<std::uint64_t> mark{4};
  promise<void> early, at, late;
  early.set_done_mark(&mark, 3);
  at.set_done_mark(&mark, 5);
  late.set_done_mark(&mark, 6);
  auto fe = early.get_future(), fa = at.get_future(), fl = late.get_future();
  std::vector<int> ran;
  fa.then([&](const result<void>& r) { ran.push_back(r ? 5 : -5); });
  // Through the mark: ready with success, without set_value.
  EXPECT_TRUE(fe.ready());
  EXPECT_TRUE(fe.get());
  EXPECT_TRUE(fe.wait_for(0ms));
  EXPECT_FALSE(fa.ready());
  EXPECT_FALSE(fa.wait_for(1ms));
  // A waiter whose mark comes while it looks returns with success; continuations wait for set_value.
  auto hook = std::make_shared<mark_on_second>(mark, 5);
  promise<void> watched;
  watched.set_progress_hook(hook);
  watched.set_done_mark(&mark, 5);
  EXPECT_TRUE(watched.get_future().get());
  EXPECT_EQ(hook->calls.load(), 2);
  EXPECT_TRUE(fa.ready());
  EXPECT_TRUE(fa.get());
  EXPECT_TRUE(ran.empty());
  at.settle();  // a continuation added before the mark runs at settle
  EXPECT_EQ(ran, std::vector<int>{5});
  fa.then([&](const result<void>& r) { ran.push_back(r ? 6 : -6); });  // after it: at once
  EXPECT_EQ(ran, (std::vector<int>{5, 6}));
  EXPECT_FALSE(at.set_value());  // settled: fulfilled already
  // Past the mark, a future still takes what its promise says, errors too.
  EXPECT_FALSE(fl.ready());
  EXPECT_TRUE(late.set_error(error(errc::aborted, "world failed")));
  EXPECT_EQ(fl.get().error_value().code(), errc::aborted);
  // A settled promise that nobody waits on is left alone, and reads as fulfilled, also after
  // it is gone (its destructor neither fails nor fulfils it).
  early.settle();
  EXPECT_TRUE(fe.get());
  { promise<void> gone = std::move(early); }
  EXPECT_TRUE(fe.ready());
  EXPECT_TRUE(fe.get());
  // A waiter that sleeps (wait_for) wakes at the mark and the settle that follows it, whichever
  // side comes first.
  for (std::uint64_t at_seq = 10; at_seq < 20; ++at_seq) {
    promise<void> sleeper;
    sleeper.set_done_mark(&mark, at_seq);
    auto fs = sleeper.get_future();
    std::atomic<bool> woke{false};
    std::thread t([&] { woke = fs.wait_for(60s); });
    mark.store(at_seq, std::memory_order_seq_cst);
    sleeper.settle();
    t.join();
    EXPECT_TRUE(woke.load()) << at_seq;
  }
}

TEST(Timers, FireAtTheirDeadlineInOrder) {
  timer_service timers;
  std::vector<int> order;
  std::mutex m;
  std::latch done(3);
  const auto start = clock::now();
  std::array<clock::time_point, 3> fired{};
  for (int i : {2, 0, 1}) {
    timers.after(std::chrono::milliseconds(10 + 10 * i), [&, i] {
      fired[static_cast<std::size_t>(i)] = clock::now();
      std::lock_guard lock(m);
      order.push_back(i);
      done.count_down();
    });
  }
  done.wait();
  EXPECT_EQ(order, (std::vector<int>{0, 1, 2}));
  for (int i = 0; i < 3; ++i) {
    const auto deadline = start + std::chrono::milliseconds(10 + 10 * i);
    EXPECT_GE(fired[static_cast<std::size_t>(i)], deadline);
    EXPECT_LT(fired[static_cast<std::size_t>(i)] - deadline, 100ms);
  }
}

TEST(Timers, LatenessIsWithinTenMilliseconds) {
  timer_service timers;
  clock::duration best = clock::duration::max();
  for (int trial = 0; trial < 5; ++trial) {
    promise<clock::time_point> p;
    auto f = p.get_future();
    const auto deadline = clock::now() + 15ms;
    timers.at(deadline, [&] { p.set_value(clock::now()); });
    const auto late = f.get().value() - deadline;
    EXPECT_GE(late, clock::duration::zero());
    EXPECT_LT(late, 100ms);
    best = std::min(best, late);
  }
  EXPECT_LT(best, 10ms);
}

TEST(Timers, CancelledTimerNeverFires) {
  timer_service timers;
  std::atomic<int> cancelled_runs{0};
  auto h = timers.after(5ms, [&] { ++cancelled_runs; });
  h.cancel();
  EXPECT_TRUE(h.cancelled());
  // A later timer fires only after the cancelled one's deadline has passed.
  promise<void> later;
  auto f = later.get_future();
  timers.after(30ms, [&] { later.set_value(); });
  ASSERT_TRUE(f.get());
  EXPECT_EQ(cancelled_runs.load(), 0);
}

// Every ask sets a deadline and cancels it at the reply: the cancelled entries must not pile up
// (a device at 100k operations a second would otherwise hold millions of its 60 s deadlines),
// and the live timers among them must still fire, in order.
TEST(Timers, CancelledEntriesAreDroppedAndLiveOnesStillFire) {
  timer_service timers;
  std::atomic<int> cancelled_runs{0};
  std::vector<int> order;
  std::mutex m;
  std::latch done(3);
  std::size_t most = 0;
  for (int i = 0; i < 100000; ++i) {
    if (i % 40000 == 1) {
      const int n = i / 40000;
      timers.after(20ms + 10ms * n, [&, n] {
        std::lock_guard lock(m);
        order.push_back(n);
        done.count_down();
      });
    }
    timers.after(60s, [&] { ++cancelled_runs; }).cancel();
    most = std::max(most, timers.pending());
  }
  EXPECT_LE(most, 4096u + 8u);  // the first sweep's size, with the three live ones
  done.wait();
  EXPECT_EQ(order, (std::vector<int>{0, 1, 2}));
  EXPECT_EQ(cancelled_runs.load(), 0);
}

TEST(Timers, PeriodicUntilCancelled) {
  timer_service timers;
  std::atomic<int> runs{0};
  promise<void> fifth;
  auto f = fifth.get_future();
  timer_handle h;
  h = timers.every(2ms, [&] {
    if (++runs == 5) fifth.set_value();
  });
  ASSERT_TRUE(f.get());
  h.cancel();
  const int at_cancel = runs.load();
  promise<void> after;
  auto fa = after.get_future();
  timers.after(20ms, [&] { after.set_value(); });
  ASSERT_TRUE(fa.get());
  EXPECT_LE(runs.load(), at_cancel + 1);  // one run may have been under way when we cancelled
}

}  // namespace
}  // namespace atomr::local
