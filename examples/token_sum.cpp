// Rank 0 sends a buffer's token to an actor on rank 1, which fetches the bytes (GPU to GPU where both
// ranks have GPUs; else host devices), sums them and answers. mpirun -n 2 bin/atomr-example-token-sum
#include <cstdio>

#include "atomr/cluster/buffer_registry.hpp"
#include "atomr/cluster/mpi_session.hpp"
#include "atomr/cluster/router.hpp"
#include "atomr/local/actors.hpp"
#include "example_device.hpp"

namespace al = atomr::local;
using atomr::cluster::buffer_registry;
struct sum_request {  // "sum the floats of this buffer on rank 0"; the reply is the sum
  atomr::cluster::remote_buffer floats;
  al::reply_to<double> reply;
  void serialize(auto& ar) { ar(floats, reply); }
};
ATOMR_WIRE_MESSAGE(sum_request, 0x40001);
// Rank 1's actor. Each step is awaited: its thread never waits for the bytes or the device. An
// error leaves the handler (ATOMR_CO_TRY) and reaches the asker through the destroyed reply_to.
class summer : public al::coroutine_actor<sum_request> {
 public:
  summer(al::device dev, buffer_registry* registry) : dev_(std::move(dev)), registry_(registry) {}

 private:
  al::task<void> handle(sum_request m) override {
    ATOMR_CO_TRY(auto in, co_await dev_.allocate<float>(m.floats.bytes / sizeof(float)));
    ATOMR_CO_TRY_VOID(co_await registry_->fetch(m.floats, in));
    ATOMR_CO_TRY(auto out, co_await dev_.allocate<double>(1));
    std::vector uses{in.block(), out.block()};
    auto sum = [=](const auto& ctx) { return example::sum_floats(in, out, ctx); };  // named: guide/coroutines.md
    ATOMR_CO_TRY_VOID(co_await dev_.run(sum, uses));
    double total = 0;
    ATOMR_CO_TRY_VOID(co_await dev_.download(out, std::span(&total, 1)));
    m.reply.send(total);
  }
  al::device dev_;
  buffer_registry* registry_;
};

// Rank 0: fills a buffer, sends its token to rank 1's summer and checks the sum it answers.
al::task<bool> ask_for_sum(al::device dev, buffer_registry* registry, atomr::cluster::router* router) {
  std::vector<float> values(1 << 20);
  double expected = 0;
  for (std::size_t i = 0; i < values.size(); ++i) expected += values[i] = static_cast<float>(i % 100) * 0.5f;
  ATOMR_CO_TRY(auto buf, co_await dev.allocate<float>(values.size()));
  ATOMR_CO_TRY_VOID(co_await dev.upload(buf, std::span<const float>(values)));
  ATOMR_CO_TRY(auto token, co_await registry->export_buffer(buf));
  auto ask = [&](auto reply) { return sum_request{token, std::move(reply)}; };
  auto sum = co_await router->lookup<sum_request>(1, "summer").ask<double>(ask, std::chrono::seconds(60));
  (void)registry->release(token);  // rank 1 has its copy once it answers
  ATOMR_CO_TRY(double total, sum);
  std::printf("rank 1 summed %zu floats from rank 0's buffer: %.1f (expected %.1f)\n", values.size(), total, expected);
  co_return total == expected;
}

atomr::result<bool> run(const atomr::cluster::mpi_session& session) {
  const auto& id = session.identity();
  if (id.world_size < 2) return atomr::error(atomr::errc::invalid_argument, "the summer is on rank 1: use mpirun -n 2");
  al::actor_system system;
  ATOMR_ASSIGN_OR_RETURN(auto dev, example::start_device(system, id.local_rank));
  ATOMR_ASSIGN_OR_RETURN(auto router, atomr::cluster::router::start(session.world(), system));
  ATOMR_ASSIGN_OR_RETURN(auto registry, buffer_registry::start(session.world(), *router, {dev}));
  if (id.world_rank == 1) ATOMR_TRY(router->publish("summer", system.spawn<summer>({}, dev, registry.get()).value()));
  MPI_Barrier(session.world());  // a name must be published before another rank asks for it
  auto verdict = id.world_rank == 0 ? ask_for_sum(dev, registry.get(), router.get()).get() : atomr::result<bool>(true);
  int right = verdict && *verdict;
  MPI_Bcast(&right, 1, MPI_INT, 0, session.world());  // rank 1 keeps its summer until rank 0 has its answer
  registry.reset();                                   // the registry works through the router: it goes first
  ATOMR_TRY(router->stop());
  return verdict ? atomr::result<bool>(right != 0) : verdict;
}

int main(int argc, char** argv) {
  auto session = atomr::cluster::mpi_session::start(&argc, &argv);
  auto right = session ? run(**session) : atomr::result<bool>(session.error_value());
  if (!right) std::fprintf(stderr, "token_sum: %s\n", right.error_value().describe().c_str());
  return right && *right ? 0 : 1;
}
