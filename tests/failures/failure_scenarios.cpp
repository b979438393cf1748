// A job in which one rank misbehaves, for the failure tests (tests/failures/CMakeLists.txt): every
// rank runs all_reduces on the host backend; after 20 of them rank 1 stops itself (SIGSTOP, a hung
// node), kills itself (SIGKILL), or exits with code 1. The others keep reducing, so they wait on
// it: liveness must name it and end the job.
//   failure_scenarios stop|kill|exit1|exit1_cause|timeout|hang|none|late|continue|router|router_reversed|fetch|
//                     fetch_inflight|shrink|paused|hang_in_create
// none: nobody misbehaves (no false alarm; prints "all ranks done"). late: nobody misbehaves, but
// rank 3 works on for longer than the heartbeat timeout after the others have ended (no false
// alarm while they wait for it). continue: rank 1 stops, and
// with ATOMR_ON_FAILURE=continue the others wait until liveness reports it, print what they saw,
// then end the stopped rank themselves (it cannot end its own job) and leave. router: the same,
// but the survivors are waiting on an ask (deadline 60 s) to an actor on rank 1 when it stops;
// the ask must fail as soon as liveness names the rank. fetch: the same for a fetch of a buffer
// rank 1 exported, in flight when it stops. fetch_inflight: rank 0 fetches rank 1's 1 GiB buffer
// twice (on GPUs, by NCCL with ATOMR_FETCH_NCCL=1), and rank 1 stops while the bytes of the second
// are moving. shrink: ATOMR_ON_FAILURE=continue; rank 1 stops during
// the all_reduces; the others' pending all_reduce fails as soon as liveness names it, and they go
// on with world::shrink(). timeout (run with a collective deadline shorter than the heartbeat
// timeout): rank 1 stops; the others' all_reduce times out first, they end, and the session must
// still name rank 1 and end the job instead of waiting for it in MPI_Finalize. hang: rank 1 blocks
// in its main thread while its heartbeats go on; the others' all_reduce times out, and their
// session names rank 1 as not finished once the heartbeat timeout has passed. hang_in_create: the
// same, but rank 1 hangs instead of creating the world, and the others' creation times out. paused:
// see paused_and_resumed().

#include <signal.h>
#include <spawn.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "atomr/cluster/buffer_registry.hpp"
#include "atomr/cluster/liveness.hpp"
#include "atomr/cluster/mpi_session.hpp"
#include "atomr/cluster/router.hpp"
#include "atomr/cluster/world.hpp"
#include "atomr/local/actors/actor_system.hpp"
#include "atomr/local/device/device.hpp"

namespace al = atomr::local;

// An actor that keeps every reply_to it is given (a rank that hangs with asks in hand).
struct keep_reply {
  al::reply_to<int> reply;
  template <class A>
  void serialize(A& ar) {
    ar(reply);
  }
};
ATOMR_WIRE_MESSAGE(keep_reply, 0x30001);
class reply_keeper : public al::actor<keep_reply> {
 public:
  void receive(keep_reply& m) override { kept_.push_back(std::move(m.reply)); }

 private:
  std::vector<al::reply_to<int>> kept_;
};

// shrink: the survivors' all_reduce has failed (rank 1 stopped); they build a world of the living
// ranks and reduce on it: ranks 0, 2 and 3 each add rank + 1, so the sum is 1 + 3 + 4 = 8. The old
// world's buffer stays allocated until the new world has reduced (the old world's unfinished
// work may still reference it until the shrink ends it).
int go_on_shrunk(atomr::cluster::world& old, const al::device& dev, int rank,
                 std::chrono::steady_clock::time_point t0) {
  auto smaller = old.shrink();
  if (!smaller) {
    std::fprintf(stderr, "rank %d: shrink: %s\n", rank, smaller.error_value().describe().c_str());
    return 1;
  }
  auto b = dev.allocate<int>(4).get().value();
  const std::vector<int> mine(4, rank + 1);
  (void)dev.upload(b, std::span<const int>(mine)).get().value();
  if (auto r = (*smaller)->all_reduce(b).get(); !r) {
    std::fprintf(stderr, "rank %d: all_reduce on the shrunk world: %s\n", rank, r.error_value().describe().c_str());
    return 1;
  }
  std::vector<int> sum(4);
  (void)dev.download(b, std::span<int>(sum)).get().value();
  const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  std::printf("rank %d (now %d of %d) went on after %.1f s: sum %d %d %d %d\n", rank, (*smaller)->rank(),
              (*smaller)->size(), s, sum[0], sum[1], sum[2], sum[3]);
  std::fflush(stdout);
  // Leaves normally: the session skips MPI_Finalize (it would wait for the stopped rank), and the
  // launcher ends the job, the stopped rank too.
  return 0;
}

// The survivors' end under ATOMR_ON_FAILURE=continue: each waits until liveness reports rank 1
// and prints what it saw; they meet at rank 0 (point to point: a collective would wait for rank 1),
// so that all have printed before rank 0 ends rank 1 and the launcher ends the job. `hear_rank_1`:
// rank 0 first waits for a word from rank 1 (tag 9). Returns only on a failure (the exit code).
int survivors_report_and_end(const atomr::cluster::mpi_session& session, const std::vector<int>& pids, int rank,
                             bool hear_rank_1) {
  const auto* live = session.liveness();
  if (live == nullptr) return 3;
  const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(60);
  while (live->failed_ranks().empty() && std::chrono::steady_clock::now() < until) {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));  // polls liveness's report
  }
  const auto failed = live->failed_ranks();
  if (failed.empty()) return 4;
  std::printf("rank %d kept going after: %s\n", rank, failed.front().second.c_str());
  std::fflush(stdout);
  const MPI_Comm comm = session.world();
  const int size = static_cast<int>(pids.size());
  char byte = 0;
  if (rank == 0) {
    if (hear_rank_1) MPI_Recv(&byte, 1, MPI_BYTE, 1, 9, comm, MPI_STATUS_IGNORE);
    for (int r = 2; r < size; ++r) MPI_Recv(&byte, 1, MPI_BYTE, r, 7, comm, MPI_STATUS_IGNORE);
    for (int r = 2; r < size; ++r) MPI_Send(&byte, 1, MPI_BYTE, r, 8, comm);
    ::kill(pids[1], SIGKILL);
  } else {
    MPI_Send(&byte, 1, MPI_BYTE, 0, 7, comm);
    MPI_Recv(&byte, 1, MPI_BYTE, 0, 8, comm, MPI_STATUS_IGNORE);
  }
  std::_Exit(0);  // MPI_Finalize would wait for the dead rank
}

// paused: with ATOMR_ON_FAILURE=continue, rank 1 is stopped for longer than the heartbeat timeout
// and then resumed (a shell it started sends SIGCONT). The others name it. Its own watcher must see
// that it was the one not running, and name nobody: every peer looks silent to it at first.
int paused_and_resumed(atomr::cluster::mpi_session& session, const std::vector<int>& pids, int rank) {
  const auto* live = session.liveness();
  if (live == nullptr) return 3;
  if (rank == 1) {
    const std::string resume = "sleep 5; kill -CONT " + std::to_string(::getpid());
    const char* argv[] = {"/bin/sh", "-c", resume.c_str(), nullptr};
    pid_t shell = 0;
    if (::posix_spawn(&shell, "/bin/sh", nullptr, nullptr, const_cast<char* const*>(argv), environ) != 0) return 5;
    const auto stopped = std::chrono::steady_clock::now();
    ::raise(SIGSTOP);
    const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - stopped).count();
    // A heartbeat timeout and a half for the watcher to judge (wrongly, if it does) after the pause:
    // an observation window, not a synchronization.
    std::this_thread::sleep_for(std::chrono::milliseconds(4500));
    std::string named;
    for (const auto& [r, text] : live->failed_ranks()) named += (named.empty() ? "" : ", ") + std::to_string(r);
    std::printf("rank 1 resumed after %.1f s; failed ranks it knows of: %s\n", s,
                named.empty() ? "none" : named.c_str());
    std::fflush(stdout);
    char byte = 0;
    MPI_Send(&byte, 1, MPI_BYTE, 0, 9, session.world());
    for (;;) ::pause();  // rank 0 ends it
  }
  return survivors_report_and_end(session, pids, rank, true);
}

int main(int argc, char** argv) {
  const std::string mode = argc > 1 ? argv[1] : "none";
  auto session = atomr::cluster::mpi_session::start(&argc, &argv);
  if (!session) {
    std::fprintf(stderr, "session: %s\n", session.error_value().describe().c_str());
    return 2;
  }
  const int rank = (*session)->identity().world_rank;
  std::vector<int> pids(static_cast<std::size_t>((*session)->identity().world_size));
  const int pid = static_cast<int>(::getpid());
  MPI_Allgather(&pid, 1, MPI_INT, pids.data(), 1, MPI_INT, (*session)->world());

  // ATOMR_SCENARIO_DEVICE=cuda: each rank's world runs on GPU 0 with NCCL (a GPU host; ranks
  // sharing one GPU need NCCL_HOSTID per rank, launch/own-nccl-host), so that shrink goes through
  // ncclCommShrink, and fetches go GPU to GPU.
  const char* kind = std::getenv("ATOMR_SCENARIO_DEVICE");
  const bool cuda = kind != nullptr && std::string(kind) == "cuda";
  al::actor_system early;
  std::unique_ptr<atomr::cluster::router> router;
  std::optional<atomr::local::future<int>> waiting;
  const auto t0 = std::chrono::steady_clock::now();
  std::optional<al::future<void>> fetching;
  std::unique_ptr<atomr::cluster::buffer_registry> registry;
  std::optional<al::device> fetch_dev;
  if (mode == "fetch") {
    // Every rank exports a buffer; the others fetch rank 1's after it has stopped.
    router = std::move(atomr::cluster::router::start((*session)->world(), early).value());
    fetch_dev = al::device::start(early, 0, al::device_kind::host).value();
    registry = std::move(atomr::cluster::buffer_registry::start((*session)->world(), *router, {*fetch_dev}).value());
    auto mine = fetch_dev->allocate<float>(1 << 20).get().value();
    auto handle = registry->export_buffer(mine).get().value();
    std::vector<atomr::cluster::remote_buffer> all(pids.size());
    MPI_Allgather(&handle, sizeof(handle), MPI_BYTE, all.data(), sizeof(handle), MPI_BYTE, (*session)->world());
    MPI_Barrier((*session)->world());
    if (rank == 1) ::raise(SIGSTOP);
    auto into = fetch_dev->allocate<float>(1 << 20).get().value();
    fetching = registry->fetch(all[1], into);
  }
  if (mode == "fetch_inflight") {
    // Rank 0 fetches rank 1's 1 GiB buffer once (on GPUs with ATOMR_FETCH_NCCL=1 the NCCL channel
    // opens, and the transfer's time is known), then again; rank 1 stops a third of that time
    // after the second fetch began, so it fails in flight, with liveness's words and at once.
    router = std::move(atomr::cluster::router::start((*session)->world(), early).value());
    fetch_dev = al::device::start(early, 0, cuda ? al::device_kind::cuda : al::device_kind::host).value();
    registry = std::move(atomr::cluster::buffer_registry::start((*session)->world(), *router, {*fetch_dev}).value());
    auto mine = fetch_dev->allocate<float>(std::size_t{1} << 28).get().value();
    auto handle = registry->export_buffer(mine).get().value();
    MPI_Bcast(&handle, sizeof(handle), MPI_BYTE, 1, (*session)->world());
    double first_s = 0;
    if (rank == 0) {
      auto into = fetch_dev->allocate<float>(std::size_t{1} << 28).get().value();
      const auto start = std::chrono::steady_clock::now();
      if (auto once = registry->fetch(handle, into).get(); !once) {
        std::fprintf(stderr, "rank 0: first fetch: %s\n", once.error_value().describe().c_str());
        return 5;
      }
      first_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
      std::printf("rank 0: first fetch of 1 GiB by %s took %.3f s\n",
                  std::string(atomr::cluster::to_string(registry->route_from(1))).c_str(), first_s);
      std::fflush(stdout);
      fetching = registry->fetch(handle, into);
      MPI_Send(&first_s, 1, MPI_DOUBLE, 1, 9, (*session)->world());
    } else if (rank == 1) {
      MPI_Recv(&first_s, 1, MPI_DOUBLE, 0, 9, (*session)->world(), MPI_STATUS_IGNORE);
      // Failure injection, not synchronization: the stop must land while the bytes are moving.
      std::this_thread::sleep_for(std::chrono::duration<double>(first_s / 3));
      ::raise(SIGSTOP);
    }
  }
  if (mode == "router" || mode == "router_reversed") {
    // router_reversed: the router runs on a communicator whose ranks are the world's in reverse
    // (liveness names world rank 1, the router must fail its own rank size - 2).
    MPI_Comm comm = (*session)->world();
    const int size = static_cast<int>(pids.size());
    if (mode == "router_reversed") MPI_Comm_split((*session)->world(), 0, size - 1 - rank, &comm);
    const int keeper_rank = mode == "router_reversed" ? size - 2 : 1;
    router = std::move(atomr::cluster::router::start(comm, early).value());
    if (rank == 1) {
      auto keeper = early.spawn<reply_keeper>(al::spawn_options{.name = "keeper"}).value();
      (void)router->publish("keeper", keeper);
    }
    MPI_Barrier((*session)->world());
    if (rank != 1) {
      waiting = router->lookup<keep_reply>(keeper_rank, "keeper")
                    .ask<int>([](al::reply_to<int> r) { return keep_reply{std::move(r)}; }, std::chrono::seconds(60));
    }
  }
  if (mode == "paused") return paused_and_resumed(**session, pids, rank);
  if (mode == "continue" || mode == "router" || mode == "router_reversed" || mode == "fetch" ||
      mode == "fetch_inflight") {
    if (rank == 1) ::raise(SIGSTOP);
    if (fetching) {
      auto got = fetching->get();
      const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
      std::printf("rank %d: fetch failed after %.1f s: %s\n", rank, s,
                  got ? "no error" : got.error_value().describe().c_str());
    }
    if (waiting) {
      auto got = waiting->get();
      const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
      std::printf("rank %d: ask failed after %.1f s: %s\n", rank, s,
                  got ? "no error" : got.error_value().describe().c_str());
    }
    return survivors_report_and_end(**session, pids, rank, false);
  }

  al::actor_system system;
  auto dev = al::device::start(system, 0, cuda ? al::device_kind::cuda : al::device_kind::host).value();
  auto options = atomr::cluster::world_options::from_environment().value();
  if (mode == "hang_in_create" && rank == 1) {
    for (;;) ::pause();  // never comes to the world the others create; its heartbeats go on
  }
  auto world = atomr::cluster::world::create((*session)->world(), {dev}, options);
  if (!world) {
    std::fprintf(stderr, "world: %s\n", world.error_value().describe().c_str());
    return 2;
  }
  auto buf = dev.allocate<int>(4).get().value();
  for (int i = 0; i < 100; ++i) {
    if (i == 20 && rank == 1) {
      if (mode == "stop" || mode == "shrink" || mode == "timeout") ::raise(SIGSTOP);
      if (mode == "hang") {
        for (;;) ::pause();  // a hang in user code: only a signal (the job's end) gets it out
      }
      if (mode == "kill") ::raise(SIGKILL);
      if (mode == "exit1") std::exit(1);
      if (mode == "exit1_cause") {
        atomr::cluster::note_fatal_failure("unavailable: the scenario's own cause (device 0 lost)");
        std::exit(1);
      }
    }
    if (auto r = (*world)->all_reduce(buf).get(); !r) {
      std::fprintf(stderr, "rank %d: all_reduce %d: %s\n", rank, i, r.error_value().describe().c_str());
      if (mode == "shrink") return go_on_shrunk(**world, dev, rank, t0);
      return 1;
    }
  }
  world->reset();
  if (mode == "late") {
    // A last stretch of work on rank 3 alone (longer than the 3 s heartbeat timeout): the others
    // leave meanwhile and must wait for it without calling it failed.
    if (rank == 3) std::this_thread::sleep_for(std::chrono::seconds(4));
    std::printf("rank %d finished\n", rank);
    return 0;
  }
  MPI_Barrier((*session)->world());
  if (rank == 0) std::printf("all ranks done\n");
  return 0;
}
