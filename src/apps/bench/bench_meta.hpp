// What every benchmark's JSON records about its run: when (UTC), which commit, where, and how
// much memory the ranks took.
#pragma once

#include <mpi.h>
#include <sys/resource.h>

#include <chrono>
#include <ctime>
#include <string>
#include <thread>

namespace atomr::apps {

inline std::string utc_now() {
  const auto t = std::chrono::system_clock::to_time_t(std::chrono::system_clock::now());
  std::tm tm{};
  gmtime_r(&t, &tm);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", &tm);
  return buf;
}

// The largest resident set (peak, MiB) of any rank of `comm` so far. Collective.
inline double max_rss_mib(MPI_Comm comm) {
  rusage self{};
  getrusage(RUSAGE_SELF, &self);
  double mine = static_cast<double>(self.ru_maxrss) / 1024.0;  // (Linux reports KiB)
  double most = mine;
  MPI_Allreduce(&mine, &most, 1, MPI_DOUBLE, MPI_MAX, comm);
  return most;
}

// A barrier for a rank that waits while others drive atomr: MPI_Barrier would spin inside Open
// MPI's progress engine, which under MPI_THREAD_MULTIPLE contends with the router's and the
// transfer thread's MPI calls on the same rank (an ask's round trip takes 10.6 us with the idle
// rank in MPI_Barrier), and on a rank bound to one core it holds that core for whole scheduler
// ticks (the ask then takes 4 ms). This one looks every 50 us and sleeps in between.
inline int quiet_barrier(MPI_Comm comm) {
  MPI_Request request = MPI_REQUEST_NULL;
  if (const int rc = MPI_Ibarrier(comm, &request); rc != MPI_SUCCESS) return rc;
  for (;;) {
    int done = 0;
    if (const int rc = MPI_Test(&request, &done, MPI_STATUS_IGNORE); rc != MPI_SUCCESS) return rc;
    if (done) return MPI_SUCCESS;
    std::this_thread::sleep_for(std::chrono::microseconds(50));
  }
}

}  // namespace atomr::apps
