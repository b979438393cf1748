// Rank 1 runs an actor that keeps a running mean, published under a name. Rank 0 looks it up, tells
// it two batches of samples and asks it for the mean, across ranks and with a deadline, then checks
// the answer. No device is needed: messages go over MPI.
//
//   mpirun -n 2 build/release/bin/atomr-example-remote-ask
#include <cereal/types/vector.hpp>
#include <chrono>
#include <cstdio>
#include <variant>
#include <vector>

#include "atomr/cluster/mpi_session.hpp"
#include "atomr/cluster/router.hpp"

namespace example {
// A tell: samples to add in. Types that cross ranks say how Cereal serializes them.
struct add_samples {
  std::vector<double> values;
  template <class A>
  void serialize(A& ar) {
    ar(values);
  }
};
// An ask: the reply_to inside goes back to the asker's rank when the actor answers.
struct get_mean {
  atomr::local::reply_to<double> reply;
  template <class A>
  void serialize(A& ar) {
    ar(reply);
  }
};
}  // namespace example
// The receiving rank decodes a message by its id, so an id never changes once used.
ATOMR_WIRE_MESSAGE(example::add_samples, 0x20001);
ATOMR_WIRE_MESSAGE(example::get_mean, 0x20002);

namespace example {
using stats_msg = std::variant<add_samples, get_mean>;

// An actor handles one message at a time, so its state needs no lock.
class running_mean : public atomr::local::actor<stats_msg> {
  double sum_ = 0;
  std::size_t count_ = 0;
  void receive(stats_msg& m) override {
    if (auto* add = std::get_if<add_samples>(&m)) {
      for (double v : add->values) sum_ += v;
      count_ += add->values.size();
    } else {
      std::get<get_mean>(m).reply.send(count_ == 0 ? 0.0 : sum_ / static_cast<double>(count_));
    }
  }
};

// Messages from one sender arrive in the order sent, so the mean counts both batches. The deadline
// bounds the wait: a slow actor or a lost rank gives errc::timeout, never a hang.
atomr::result<double> mean_of_samples(atomr::cluster::router& router) {
  auto stats = router.lookup<stats_msg>(1, "stats");
  ATOMR_TRY(stats.tell(add_samples{{1, 2, 3}}));
  ATOMR_TRY(stats.tell(add_samples{{4, 5, 6, 7}}));
  return stats.ask<double>([](auto reply) { return get_mean{std::move(reply)}; }, std::chrono::seconds(5)).get();
}

atomr::result<void> run(const atomr::cluster::mpi_session& session) {
  const auto& id = session.identity();
  if (id.world_size < 2) {
    return atomr::error(atomr::errc::invalid_argument, "the actor lives on rank 1: run with mpirun -n 2");
  }
  atomr::local::actor_system system;
  ATOMR_ASSIGN_OR_RETURN(auto router, atomr::cluster::router::start(session.world(), system));  // every rank
  if (id.world_rank == 1) {
    ATOMR_ASSIGN_OR_RETURN(auto stats, system.spawn<running_mean>({.name = "stats"}));
    ATOMR_TRY(router->publish("stats", stats));
  }
  // A name must be published before another rank asks for it. Nothing is in flight yet, so this
  // blocking barrier holds up no router traffic.
  MPI_Barrier(session.world());

  // stop() is collective: rank 1's router serves rank 0 until rank 0 is done and stops too.
  if (id.world_rank != 0) return router->stop();
  auto mean = mean_of_samples(*router);
  ATOMR_TRY(router->stop());
  ATOMR_ASSIGN_OR_RETURN(double value, mean);
  std::printf("rank 1's running mean of 7 samples from rank 0: %.1f (expected 4.0)\n", value);
  // A wrong mean would break the order or exactly-once delivery atomr promises: errc::internal.
  if (value != 4.0) return atomr::error(atomr::errc::internal, "the mean is not 4.0");
  return atomr::ok();
}
}  // namespace example

int main(int argc, char** argv) {
  auto session = atomr::cluster::mpi_session::start(&argc, &argv);
  auto done = session ? example::run(**session) : atomr::result<void>(session.error_value());
  if (done) return 0;
  std::fprintf(stderr, "remote_ask: %s\n", done.error_value().describe().c_str());
  return 1;
}
