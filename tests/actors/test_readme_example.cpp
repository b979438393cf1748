// The actor block of README.md's tour, between "README: <name>" and "README: end" word for word
// (readme_snippets_test checks it): it must keep compiling and doing what the README says.
#include <gtest/gtest.h>

// README: actors
#include <atomr/local/actors.hpp>
using namespace atomr::local;
using namespace std::chrono_literals;

struct add {
  int n;
};
struct get_total {
  reply_to<int> reply;
};
using counter_msg = std::variant<add, get_total>;

// An actor owns its state and handles one message at a time: no locks.
class counter : public actor<counter_msg> {
  int total_ = 0;
  void receive(counter_msg& m) override {
    if (auto* a = std::get_if<add>(&m))
      total_ += a->n;
    else
      std::get<get_total>(m).reply.send(total_);
  }
};

atomr::result<int> count() {
  actor_system sys;  // a thread pool sized to the machine
  ATOMR_ASSIGN_OR_RETURN(auto c, sys.spawn<counter>({.name = "counter"}));
  ATOMR_TRY(c.tell(add{5}));  // enqueues; never blocks
  future<int> total = c.ask<int>([](reply_to<int> r) { return get_total{std::move(r)}; }, 100ms);
  return total.get();  // 5, or errc::timeout after 100 ms
}
// README: end

TEST(Readme, ActorExample) { EXPECT_EQ(count().value(), 5); }
