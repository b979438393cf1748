// `atomr bench actors --remote` (mpirun -n 2): an ask from an actor on rank 0 to an actor on rank 1,
// awaited by a coroutine handler beside the same ask answered through then() (the reply told back
// to the asking actor as a message), in the same run.
#include <mpi.h>

#include <algorithm>
#include <chrono>
#include <variant>

#include "atomr/cluster/mpi_session.hpp"
#include "atomr/cluster/router.hpp"
#include "atomr/local/actors.hpp"
#include "bench/bench_actors.hpp"

namespace atomr::apps::bench::remote {
struct ping {
  local::reply_to<std::uint8_t> reply;
  template <class A>
  void serialize(A& ar) {
    ar(reply);
  }
};
}  // namespace atomr::apps::bench::remote
ATOMR_WIRE_MESSAGE(atomr::apps::bench::remote::ping, 0x7f0101);

namespace atomr::apps::bench {
namespace remote {
namespace {

using clock = std::chrono::steady_clock;
using namespace std::chrono_literals;
using peer_ref = cluster::cluster_ref<std::variant<ping>>;

class ponger : public local::actor<std::variant<ping>> {
 public:
  void receive(std::variant<ping>& m) override { std::get<ping>(m).reply.send(std::uint8_t{1}); }
};

struct ask_round {
  int count;
  peer_ref peer;
  local::reply_to<double> done;  // answers the mean round trip, us
};
struct pong {};

class then_asker : public local::actor<std::variant<ask_round, pong>> {
 public:
  void receive(std::variant<ask_round, pong>& m) override {
    if (auto* r = std::get_if<ask_round>(&m)) {
      job_.emplace(std::move(*r));
      left_ = job_->count;
      t0_ = clock::now();
    } else if (--left_ == 0) {
      job_->done.send(std::chrono::duration<double, std::micro>(clock::now() - t0_).count() / job_->count);
      job_.reset();
      return;
    }
    auto self = context().self();
    job_->peer.ask<std::uint8_t>([](auto reply) { return ping{std::move(reply)}; }, 30s)
        .then([self](const result<std::uint8_t>&) { (void)self.tell(pong{}); });
  }

 private:
  std::optional<ask_round> job_;
  int left_ = 0;
  clock::time_point t0_;
};

class awaiting_asker : public local::coroutine_actor<std::variant<ask_round, pong>> {
  local::task<void> handle(std::variant<ask_round, pong> m) override {
    auto& r = std::get<ask_round>(m);
    const auto t0 = clock::now();
    for (int i = 0; i < r.count; ++i) {
      (void)co_await r.peer.ask<std::uint8_t>([](auto reply) { return ping{std::move(reply)}; }, 30s);
    }
    r.done.send(std::chrono::duration<double, std::micro>(clock::now() - t0).count() / r.count);
  }
};

double timed(const local::actor_ref<std::variant<ask_round, pong>>& asker, const peer_ref& peer, int count) {
  return asker.ask<double>([&](auto done) { return ask_round{count, peer, std::move(done)}; }, 600s).get().value_or(0);
}

}  // namespace
}  // namespace remote

result<std::optional<coroutine_case>> run_remote_ask_case(int round_trips) {
  ATOMR_ASSIGN_OR_RETURN(auto session, cluster::mpi_session::start(nullptr, nullptr));
  const int rank = session->identity().world_rank;
  if (session->identity().world_size != 2) {
    return error(errc::invalid_argument, "atomr bench actors --remote runs at 2 ranks (mpirun -n 2), not " +
                                             std::to_string(session->identity().world_size));
  }
  std::optional<coroutine_case> out;
  {
    local::actor_system system;
    ATOMR_ASSIGN_OR_RETURN(auto router, cluster::router::start(session->world(), system));
    if (rank == 1) ATOMR_TRY(router->publish("ponger", system.spawn<remote::ponger>({.name = "ponger"}).value()));
    MPI_Barrier(session->world());
    if (rank == 0) {
      const auto peer = router->lookup<std::variant<remote::ping>>(1, "ponger");
      auto by_then = system.spawn<remote::then_asker>({}).value();
      auto by_await = system.spawn<remote::awaiting_asker>({}).value();
      out = coroutine_case{"remote ask round trip, 2 ranks: awaited vs then", round_trips, 1e300, 1e300};
      // The two forms alternate, each its own best: the machine's drift lands on both.
      for (int i = 0; i < 5; ++i) {
        out->callback_us = std::min(out->callback_us, remote::timed(by_then, peer, round_trips));
        out->coroutine_us = std::min(out->coroutine_us, remote::timed(by_await, peer, round_trips));
      }
    }
    MPI_Barrier(session->world());  // rank 1 serves until rank 0 is done
    ATOMR_TRY(router->stop());
  }
  return out;
}

}  // namespace atomr::apps::bench
