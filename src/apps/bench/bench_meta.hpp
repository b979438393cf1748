// What every benchmark's JSON records about its run: when (UTC), which commit, where, and how
// much memory the ranks took.
#pragma once

#include <mpi.h>
#include <sys/resource.h>

#include <chrono>
#include <ctime>
#include <string>

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

}  // namespace atomr::apps
