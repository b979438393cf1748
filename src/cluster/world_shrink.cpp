// world::shrink: a new world of the living ranks after some failed (see world.hpp).
#include <algorithm>
#include <chrono>
#include <thread>

#include "atomr/cluster/liveness.hpp"
#include "atomr/cluster/mpi_check.hpp"
#include "atomr/cluster/world.hpp"
#include "atomr/common/log.hpp"
#include "world_engine.hpp"

namespace atomr::cluster {
namespace {

// MPI_Comm_create_group's tag on the old world's control communicator; the engine's own
// point-to-point traffic there uses other tags.
constexpr int k_shrink_tag = 0x41534b;  // "ASK"

std::string list(const std::vector<int>& ranks) {
  std::string out;
  for (const int r : ranks) out += (out.empty() ? "" : ", ") + std::to_string(r);
  return out;
}

// Creates the survivors' communicator: the control communicator's group without `left_out`.
result<MPI_Comm> survivors_comm(MPI_Comm control, const std::vector<int>& left_out) {
  MPI_Group all = MPI_GROUP_NULL;
  MPI_Group living = MPI_GROUP_NULL;
  ATOMR_TRY(ATOMR_MPI_CHECK(MPI_Comm_group(control, &all)));
  auto excluded = ATOMR_MPI_CHECK(
      MPI_Group_excl(all, static_cast<int>(left_out.size()), const_cast<int*>(left_out.data()), &living));
  MPI_Group_free(&all);
  ATOMR_TRY(excluded);
  MPI_Comm next = MPI_COMM_NULL;
  const auto created = ATOMR_MPI_CHECK(MPI_Comm_create_group(control, living, k_shrink_tag, &next));
  MPI_Group_free(&living);
  ATOMR_TRY(created);
  ATOMR_TRY(ATOMR_MPI_CHECK(MPI_Comm_set_errhandler(next, MPI_ERRORS_RETURN)));
  return next;
}

}  // namespace

result<std::unique_ptr<world>> world::shrink(std::vector<int> failed) {
  if (failed.empty()) {
    // This world may have failed on another rank's notice a moment before this rank's liveness
    // heard of the culprit (it tells every rank within milliseconds): wait for it, bounded.
    const auto until = std::chrono::steady_clock::now() + engine_->options().init_timeout;
    while ((failed = failed_world_ranks()).empty() && engine_->failure() && std::chrono::steady_clock::now() < until) {
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
  }
  if (failed.empty()) {
    return error(errc::invalid_argument,
                 "shrink: no rank of this job has failed (liveness names none); pass the ranks to leave out");
  }
  // The failed ranks as this world numbers its ranks (its control communicator's ranks).
  const auto& members = engine_->world_ranks();
  std::vector<int> left_out;
  for (const int w : failed) {
    const auto at = std::find(members.begin(), members.end(), w);
    if (at != members.end()) left_out.push_back(static_cast<int>(at - members.begin()));
  }
  std::sort(left_out.begin(), left_out.end());
  left_out.erase(std::unique(left_out.begin(), left_out.end()), left_out.end());
  if (left_out.empty()) {
    return error(errc::invalid_argument, "shrink: none of the failed ranks (" + list(failed) + ") is in this world");
  }
  int me = 0;
  ATOMR_TRY(ATOMR_MPI_CHECK(MPI_Comm_rank(engine_->control(), &me)));
  if (std::binary_search(left_out.begin(), left_out.end(), me)) {
    return error(errc::invalid_argument, "shrink: this rank is among the failed ranks (" + list(failed) + ")");
  }
  if (static_cast<int>(left_out.size()) >= static_cast<int>(members.size())) {
    return error(errc::invalid_argument, "shrink: no rank would be left");
  }
  // The old world can never finish what it has pending: fail it, naming why.
  engine_->fail_from_outside(
      error(errc::aborted, "the world was shrunk: rank(s) " + list(failed) + " of the job failed"));
  ATOMR_ASSIGN_OR_RETURN(MPI_Comm next, survivors_comm(engine_->control(), left_out));
  auto shrunk = world::create(next, engine_->members(), engine_->options());  // keeps its own duplicate
  MPI_Comm_free(&next);
  if (shrunk) {
    log::get("cluster")->info("world shrunk from {} to {} ranks, leaving out rank(s) {} of the job", members.size(),
                              members.size() - left_out.size(), list(failed));
  }
  return shrunk;
}

}  // namespace atomr::cluster
