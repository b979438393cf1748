// The actor example from README.md, verbatim apart from the assertions: it must keep compiling and
// doing what the README says.
#include <gtest/gtest.h>

#include <atomr/local/actors.hpp>

namespace readme {
using namespace atomr::local;
using namespace std::chrono_literals;

struct add {
  int n;
};
struct get_total {
  reply_to<int> reply;
};
using counter_msg = std::variant<add, get_total>;

class counter : public actor<counter_msg> {
  int total_ = 0;
  void receive(counter_msg& m) override {
    if (auto* a = std::get_if<add>(&m))
      total_ += a->n;
    else
      std::get<get_total>(m).reply.send(total_);
  }
};

TEST(Readme, ActorExample) {
  actor_system sys;
  auto c = sys.spawn<counter>({.name = "counter"}).value();
  ASSERT_TRUE(c.tell(add{5}));
  future<int> f = c.ask<int>([](reply_to<int> r) { return get_total{std::move(r)}; }, 100ms);
  atomr::result<int> total = f.get();
  EXPECT_EQ(total.value(), 5);
  int seen = 0;
  f.then([&](const atomr::result<int>& r) { seen = r.value(); });
  EXPECT_EQ(seen, 5);
}

}  // namespace readme
