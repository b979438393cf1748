#include "atomr/cluster/liveness/stall_watch.hpp"

#include <mpi.h>

#include "atomr/common/log.hpp"

namespace atomr::cluster::detail {

stall_watch::stall_watch(std::function<void()> on_stall, std::chrono::milliseconds grace)
    : on_stall_(std::move(on_stall)), grace_(grace), thread_([this] { run(); }) {}

stall_watch::~stall_watch() { stop(); }

void stall_watch::stop() {
  {
    std::lock_guard lock(mutex_);
    stopping_ = true;
  }
  wake_.notify_all();
  if (thread_.joinable()) thread_.join();
  if (aborter_.joinable()) aborter_.join();
}

void stall_watch::run() {
  std::unique_lock lock(mutex_);
  clock::time_point fired_at{};
  while (!wake_.wait_for(lock, std::chrono::milliseconds(10), [&] { return stopping_; })) {
    looks_.fetch_add(1, std::memory_order_acq_rel);
    const auto d = deadline_.load(std::memory_order_acquire);
    if (d == k_disarmed) continue;
    const auto now = clock::now();
    if (now < clock::time_point(clock::duration(d))) continue;
    const char* what = what_.load(std::memory_order_relaxed);
    if (!fired_.load(std::memory_order_relaxed)) {
      log::get("cluster")->error("{} is still blocked past its deadline: aborting the communicator", what);
      fired_.store(true, std::memory_order_release);
      fired_at = now;
      // On a thread of its own: an abort that blocks too must not stop the grace check below.
      aborter_ = std::thread([this] { on_stall_(); });
    } else if (now - fired_at > grace_) {
      int rank = -1;
      MPI_Comm_rank(MPI_COMM_WORLD, &rank);
      log::get("cluster")->critical(
          "{} on rank {} did not return {} ms after its communicator was aborted (a peer never joined it); "
          "ending the job",
          what, rank, grace_.count());
      MPI_Abort(MPI_COMM_WORLD, 70);
    }
  }
}

}  // namespace atomr::cluster::detail
