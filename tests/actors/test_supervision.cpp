#include <gtest/gtest.h>

#include <atomic>
#include <variant>

#include "atomr/local/actors.hpp"

namespace atomr::local {
namespace {

using namespace std::chrono_literals;

struct add {
  int n;
};
struct get_total {
  reply_to<int> reply;
};
struct fail_now {
  std::string why;
};
using worker_msg = std::variant<add, get_total, fail_now>;

// Sums numbers; fails on request. Counts how many instances were started.
class worker : public actor<worker_msg> {
 public:
  explicit worker(std::shared_ptr<std::atomic<int>> starts) : starts_(std::move(starts)) {}
  void on_start() override { ++*starts_; }
  void receive(worker_msg& m) override {
    if (auto* a = std::get_if<add>(&m)) {
      total_ += a->n;
    } else if (auto* g = std::get_if<get_total>(&m)) {
      g->reply.send(total_);
    } else {
      throw actor_failure(error(errc::invalid_argument, std::get<fail_now>(m).why));
    }
  }

 private:
  std::shared_ptr<std::atomic<int>> starts_;
  int total_ = 0;
};

// A parent that spawns one worker child with a given strategy and hands out its ref.
struct get_child {
  reply_to<actor_ref<worker_msg>> reply;
};
struct child_ended {
  terminated notice;
};
// Answered once at least `expected` termination notices have arrived (they come asynchronously).
struct get_notices {
  std::size_t expected;
  reply_to<std::vector<terminated>> reply;
};
using parent_msg = std::variant<get_child, child_ended, get_notices>;

class parent : public actor<parent_msg> {
 public:
  explicit parent(std::shared_ptr<std::atomic<int>> child_starts) : child_starts_(std::move(child_starts)) {}
  void on_start() override {
    child_ = context().spawn<worker>(spawn_options{.name = "child"}, child_starts_).value();
    context().watch(child_, [](const terminated& t) { return parent_msg(child_ended{t}); });
  }
  void receive(parent_msg& m) override {
    if (auto* g = std::get_if<get_child>(&m)) {
      g->reply.send(child_);
    } else if (auto* e = std::get_if<child_ended>(&m)) {
      notices_.push_back(e->notice);
    } else {
      waiting_.emplace(std::move(std::get<get_notices>(m)));
    }
    if (waiting_ && notices_.size() >= waiting_->expected) {
      waiting_->reply.send(notices_);
      waiting_.reset();
    }
  }

 private:
  std::shared_ptr<std::atomic<int>> child_starts_;
  actor_ref<worker_msg> child_;
  std::vector<terminated> notices_;
  std::optional<get_notices> waiting_;
};

struct family {
  actor_ref<parent_msg> parent_ref;
  actor_ref<worker_msg> child;
  std::shared_ptr<std::atomic<int>> child_starts = std::make_shared<std::atomic<int>>(0);
};

family make_family(actor_system& sys, supervisor_strategy strategy) {
  family f;
  f.parent_ref = sys.spawn<parent>({.name = "parent", .supervision = std::move(strategy)}, f.child_starts).value();
  f.child = f.parent_ref.ask<actor_ref<worker_msg>>([](auto r) { return get_child{std::move(r)}; }, 5s).get().value();
  return f;
}

result<int> total(const actor_ref<worker_msg>& w) {
  return w.ask<int>([](auto r) { return get_total{std::move(r)}; }, 5s).get();
}

supervisor_strategy always(directive d, int max_restarts = 3) {
  return supervisor_strategy{[d](const error&) { return d; }, restart_budget{max_restarts, 60s}};
}

TEST(Supervision, RestartGivesFreshStateAndKeepsTheMailbox) {
  actor_system sys;
  auto f = make_family(sys, always(directive::restart));
  ASSERT_TRUE(f.child.tell(add{5}));
  ASSERT_TRUE(f.child.tell(fail_now{"bad input"}));
  ASSERT_TRUE(f.child.tell(add{2}));  // queued behind the failure; handled by the new instance
  EXPECT_EQ(total(f.child).value(), 2);
  EXPECT_EQ(f.child_starts->load(), 2);
  EXPECT_TRUE(f.child.alive());
}

TEST(Supervision, ResumeKeepsState) {
  actor_system sys;
  auto f = make_family(sys, always(directive::resume));
  ASSERT_TRUE(f.child.tell(add{5}));
  ASSERT_TRUE(f.child.tell(fail_now{"bad input"}));
  ASSERT_TRUE(f.child.tell(add{2}));
  EXPECT_EQ(total(f.child).value(), 7);
  EXPECT_EQ(f.child_starts->load(), 1);
}

TEST(Supervision, StopEndsTheChildAndWatchersGetTheReason) {
  actor_system sys;
  auto f = make_family(sys, always(directive::stop));
  ASSERT_TRUE(f.child.tell(fail_now{"bad input"}));
  auto notice = f.child.on_terminated().get();
  ASSERT_TRUE(notice);
  ASSERT_TRUE(notice->reason.has_value());
  EXPECT_EQ(notice->reason->code(), errc::invalid_argument);
  EXPECT_EQ(notice->reason->message(), "bad input");
  EXPECT_EQ(notice->name, "child");
  // The parent watched the child and got the same notice as a message.
  auto seen = f.parent_ref.ask<std::vector<terminated>>([](auto r) { return get_notices{1, std::move(r)}; }, 5s).get();
  ASSERT_TRUE(seen);
  ASSERT_EQ(seen->size(), 1u);
  EXPECT_EQ(seen->front().reason->message(), "bad input");
  EXPECT_TRUE(f.parent_ref.alive());
}

TEST(Supervision, EscalateFailsTheParent) {
  // The system's top-level strategy stops the failing parent; stopping it stops the child.
  actor_system sys(system_config{.top_level = always(directive::stop)});
  auto f = make_family(sys, always(directive::escalate));
  ASSERT_TRUE(f.child.tell(fail_now{"disk on fire"}));
  auto parent_end = f.parent_ref.on_terminated().get();
  ASSERT_TRUE(parent_end);
  ASSERT_TRUE(parent_end->reason.has_value());
  EXPECT_EQ(parent_end->reason->code(), errc::invalid_argument);
  EXPECT_EQ(parent_end->reason->message(), "while child 'child' of 'parent' failed: disk on fire");
  ASSERT_TRUE(f.child.on_terminated().get());
  EXPECT_FALSE(f.child.alive());
}

TEST(Supervision, RestartBudgetExhaustedStopsTheChild) {
  actor_system sys;
  auto f = make_family(sys, always(directive::restart, 2));
  for (int i = 0; i < 3; ++i) ASSERT_TRUE(f.child.tell(fail_now{"failure " + std::to_string(i)}));
  auto notice = f.child.on_terminated().get();
  ASSERT_TRUE(notice);
  ASSERT_TRUE(notice->reason.has_value());
  EXPECT_EQ(notice->reason->code(), errc::aborted);
  EXPECT_NE(notice->reason->message().find("exceeded its restart budget (2 restart(s) within 60"), std::string::npos)
      << notice->reason->message();
  EXPECT_NE(notice->reason->message().find("last failure: invalid_argument: failure 2"), std::string::npos)
      << notice->reason->message();
  EXPECT_EQ(f.child_starts->load(), 3);  // the first instance and two restarts
}

TEST(Supervision, AskInFlightWhenTheHandlerFailsGetsTheFailure) {
  actor_system sys;
  struct thrower : actor<std::variant<get_total>> {
    void receive(std::variant<get_total>&) override { throw std::runtime_error("no totals today"); }
  };
  auto t = sys.spawn<thrower>({.name = "thrower"}).value();
  auto r = t.ask<int>([](auto rt) { return get_total{std::move(rt)}; }, 5s).get();
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error_value().code(), errc::internal);
  EXPECT_EQ(r.error_value().message(),
            "while actor 'thrower' failed handling this request: actor 'thrower' failed: no totals today");
}

TEST(Supervision, TopLevelActorsRestartByDefault) {
  actor_system sys;
  auto starts = std::make_shared<std::atomic<int>>(0);
  auto w = sys.spawn<worker>({.name = "top"}, starts).value();
  ASSERT_TRUE(w.tell(add{1}));
  ASSERT_TRUE(w.tell(fail_now{"x"}));
  ASSERT_TRUE(w.tell(add{4}));
  EXPECT_EQ(total(w).value(), 4);
  EXPECT_EQ(starts->load(), 2);
}

}  // namespace
}  // namespace atomr::local
