// Deadline-bounded MPI: setup steps and checks use nonblocking MPI calls polled against a deadline,
// so a missing rank is a clear error instead of a hang.
#include <algorithm>
#include <cstring>
#include <thread>

#include "atomr/cluster/mpi_check.hpp"
#include "comm_backend.hpp"

namespace atomr::cluster::detail {

result<void> wait_mpi(MPI_Request& request, clock::time_point deadline, const std::string& what) {
  auto pause = std::chrono::microseconds(1);
  while (true) {
    int done = 0;
    ATOMR_TRY(ATOMR_MPI_CHECK(MPI_Test(&request, &done, MPI_STATUS_IGNORE)));
    if (done) return ok();
    if (clock::now() >= deadline) {
      return error(errc::timeout, what + " did not complete by its deadline: a rank did not take part");
    }
    // Short waits first: these steps usually finish within microseconds of the last rank arriving.
    std::this_thread::sleep_for(pause);
    pause = std::min(pause * 2, std::chrono::microseconds(1000));
  }
}

namespace {
struct verdict {
  std::int32_t ok = 0;
  char why[252] = {};
};
}  // namespace

result<void> agree(MPI_Comm comm, const result<void>& mine, clock::time_point deadline, const std::string& step) {
  int size = 0;
  int rank = 0;
  ATOMR_TRY(ATOMR_MPI_CHECK(MPI_Comm_size(comm, &size)));
  ATOMR_TRY(ATOMR_MPI_CHECK(MPI_Comm_rank(comm, &rank)));
  verdict v;
  v.ok = mine ? 1 : 0;
  if (!mine) {
    const auto text = mine.error_value().describe();
    std::memcpy(v.why, text.data(), std::min(text.size(), sizeof(v.why) - 1));
  }
  std::vector<verdict> all(static_cast<std::size_t>(size));
  MPI_Request request = MPI_REQUEST_NULL;
  ATOMR_TRY(ATOMR_MPI_CHECK(MPI_Iallgather(&v, sizeof(v), MPI_BYTE, all.data(), sizeof(v), MPI_BYTE, comm, &request)));
  ATOMR_TRY(wait_mpi(request, deadline, step + " (agreeing on the outcome)"));
  std::string failed;
  for (int r = 0; r < size; ++r) {
    const auto& a = all[static_cast<std::size_t>(r)];
    if (a.ok) continue;
    failed += (failed.empty() ? "" : "; ") + std::string("rank ") + std::to_string(r) + ": " +
              std::string(a.why, strnlen(a.why, sizeof(a.why)));
  }
  if (failed.empty()) return ok();
  if (!mine) return mine.error_value().with_context(step);
  return error(errc::aborted, step + " failed on other ranks: " + failed);
}

}  // namespace atomr::cluster::detail
