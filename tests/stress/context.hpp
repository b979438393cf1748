// What the stress program's steps share on one rank: the world, router and registry they drive,
// the program's own communicator, this rank's jitter, and how a step reports that the model was
// not met.
#pragma once

#include <mpi.h>

#include <cstdint>
#include <memory>
#include <random>
#include <string>
#include <string_view>
#include <vector>

#include "atomr/cluster/buffer_registry.hpp"
#include "atomr/cluster/mpi_check.hpp"
#include "atomr/cluster/router.hpp"
#include "atomr/cluster/world.hpp"
#include "atomr/common/result.hpp"
#include "atomr/local/actors.hpp"
#include "atomr/local/device/device.hpp"
#include "program.hpp"

namespace atomr::stress {

struct context {
  int rank = 0;
  int size = 1;
  MPI_Comm comm = MPI_COMM_NULL;  // the program's own exchanges (handles, barriers, counts)
  std::uint64_t seed = 0;
  local::actor_system* system = nullptr;
  local::device* dev = nullptr;
  std::unique_ptr<cluster::world> world;
  cluster::router* router = nullptr;
  cluster::buffer_registry* registry = nullptr;
  // This rank's own randomness (timing, which thread submits, how many messages): seeded by the
  // seed and the rank, so a replay makes the same choices.
  std::mt19937_64 jitter;
  const step* current = nullptr;
  // Set once a fault has been injected: errors of atomr calls are then expected (the culprit is
  // gone or silent), but a value that is wrong never is.
  bool faulted = false;
  std::size_t failures = 0;

  // Cumulative router traffic, for the ordering and dead-letter checks (see message_steps.cpp):
  // sent[thread][rank * 2 + actor] tells, and the dead letters this rank caused on each rank.
  std::vector<std::vector<std::uint64_t>> sent;
  std::vector<std::uint64_t> dead_caused;

  // The model was not met: one line naming the seed, rank and step.
  void fail(const std::string& what);
  // An atomr call that must succeed did not: a failure, unless a fault has been injected.
  void failed_call(std::string_view call, const error& e);
  // `r` must be an error of `code` whose message holds `words`.
  template <typename T>
  void expect_error(const result<T>& r, errc code, std::string_view words, std::string_view what) {
    if (r) return fail(std::string(what) + ": succeeded, expected " + std::string(to_string(code)));
    if (r.error_value().code() == code && r.error_value().message().find(words) != std::string::npos) return;
    if (faulted) return;
    fail(std::string(what) + ": expected " + std::string(to_string(code)) + " with \"" + std::string(words) +
         "\", got " + r.error_value().describe());
  }
  // A short random pause of this rank (a quarter of the time).
  void pause();
  // A barrier of the program's communicator that keeps this thread out of a blocking MPI call
  // (MPI_Ibarrier, tested with short sleeps), so the router's thread is not slowed by it.
  void barrier();
};

// Ends the job, naming the call and the rank, where one of the program's own MPI calls failed
// (ATOMR_MPI_CHECK's error): the steps cannot go on without them.
void require(const context& ctx, const result<void>& r);

void run_collective_step(context& ctx, const step& s);
void run_message_step(context& ctx, const step& s);
// Publishes the actors the message steps address (collective: every rank, then a barrier).
void start_message_actors(context& ctx);

}  // namespace atomr::stress

#define STRESS_MPI(ctx, call) ::atomr::stress::require((ctx), ATOMR_MPI_CHECK(call))
