// Deadline-bounded MPI: setup steps and checks use nonblocking MPI calls polled against a deadline,
// so a missing rank is a clear error instead of a hang.
#include <algorithm>
#include <cstring>
#include <thread>

#include "atomr/cluster/mpi/wait.hpp"
#include "atomr/cluster/mpi_check.hpp"
#include "atomr/common/spin.hpp"

namespace atomr::cluster::detail {

using clock = std::chrono::steady_clock;

result<void> wait_mpi(MPI_Request& request, clock::time_point deadline, const std::string& what) {
  // Nonblocking collectives advance only inside MPI_Test (libnbc has no progress thread), so a rank
  // that sleeps between looks holds every later round of the collective up for all the others: a
  // setup step of log P rounds cost milliseconds. The first 2 ms poll back to back (spin_relax
  // yields where CPUs are scarce); then the pauses grow to at most 100 us.
  const spin_relax relax;
  const auto spin_until = clock::now() + std::chrono::milliseconds(2);
  auto pause = std::chrono::microseconds(1);
  while (true) {
    int done = 0;
    ATOMR_TRY(ATOMR_MPI_CHECK(MPI_Test(&request, &done, MPI_STATUS_IGNORE)));
    if (done) return ok();
    const auto now = clock::now();
    if (now >= deadline) {
      return error(errc::timeout, what + " did not complete by its deadline: a rank did not take part");
    }
    if (now < spin_until) {
      relax();
      continue;
    }
    std::this_thread::sleep_for(pause);
    pause = std::min(pause * 2, std::chrono::microseconds(100));
  }
}

namespace {
struct verdict {
  std::int32_t ok = 0;
  char why[252] = {};
};
}  // namespace

result<void> agree(MPI_Comm comm, const result<void>& mine, clock::time_point deadline, const std::string& step) {
  // Whether every rank succeeded: one all_reduce (log P rounds, a few bytes). Only when some rank
  // failed do the ranks gather everyone's reason (P x 256 bytes), to name the failed ranks.
  int all_ok = mine ? 1 : 0;
  {
    MPI_Request request = MPI_REQUEST_NULL;
    ATOMR_TRY(ATOMR_MPI_CHECK(MPI_Iallreduce(MPI_IN_PLACE, &all_ok, 1, MPI_INT, MPI_MIN, comm, &request)));
    ATOMR_TRY(wait_mpi(request, deadline, step + " (agreeing on the outcome)"));
  }
  if (all_ok) return ok();
  int size = 0;
  ATOMR_TRY(ATOMR_MPI_CHECK(MPI_Comm_size(comm, &size)));
  verdict v;
  v.ok = mine ? 1 : 0;
  if (!mine) {
    const auto text = mine.error_value().describe();
    std::memcpy(v.why, text.data(), std::min(text.size(), sizeof(v.why) - 1));
  }
  std::vector<verdict> all(static_cast<std::size_t>(size));
  MPI_Request request = MPI_REQUEST_NULL;
  ATOMR_TRY(ATOMR_MPI_CHECK(MPI_Iallgather(&v, sizeof(v), MPI_BYTE, all.data(), sizeof(v), MPI_BYTE, comm, &request)));
  ATOMR_TRY(wait_mpi(request, deadline, step + " (naming the ranks that failed)"));
  std::string failed;
  for (int r = 0; r < size; ++r) {
    const auto& a = all[static_cast<std::size_t>(r)];
    if (a.ok) continue;
    failed += (failed.empty() ? "" : "; ") + std::string("rank ") + std::to_string(r) + ": " +
              std::string(a.why, strnlen(a.why, sizeof(a.why)));
  }
  if (!mine) return mine.error_value().with_context(step);
  return error(errc::aborted, step + " failed on other ranks: " + failed);
}

}  // namespace atomr::cluster::detail
