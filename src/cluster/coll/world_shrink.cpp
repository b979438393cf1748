// world::shrink: a new world of the living ranks after some failed (see world.hpp).
#include <algorithm>
#include <chrono>
#include <thread>

#include "atomr/cluster/engine/world_engine.hpp"
#include "atomr/cluster/liveness.hpp"
#include "atomr/cluster/mpi_check.hpp"
#include "atomr/cluster/world.hpp"
#include "atomr/common/log.hpp"

namespace atomr::cluster {
namespace {
using detail::clock;

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
  const auto deadline = clock::now() + engine_->options().init_timeout;
  // Once the world has failed its progress thread no longer touches the backend.
  while (!engine_->failure() && clock::now() < deadline) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  if (!engine_->failure()) return error(errc::timeout, "shrink: the world's progress thread did not stop its work");
  ATOMR_ASSIGN_OR_RETURN(MPI_Comm next, survivors_comm(engine_->control(), left_out));
  auto shrunk = shrink_backend(next, left_out, deadline);
  if (shrunk) {
    log::get("cluster")->info("world shrunk from {} to {} ranks with ncclCommShrink, leaving out rank(s) {} of the job",
                              members.size(), members.size() - left_out.size(), list(failed));
    return shrunk;
  }
  if (shrunk.error_value().code() != errc::unavailable) {
    log::get("cluster")->warn("shrink: {}; creating a world of the living ranks instead",
                              shrunk.error_value().describe());
  }
  engine_->backend().abort();  // (a backend kept for ncclCommShrink that did not serve)
  auto fresh = world::create(next, engine_->members(), engine_->options());  // keeps its own duplicate
  MPI_Comm_free(&next);
  if (fresh) {
    log::get("cluster")->info("world shrunk from {} to {} ranks, leaving out rank(s) {} of the job", members.size(),
                              members.size() - left_out.size(), list(failed));
  }
  return fresh;
}

// The survivors' world out of this one's backend (ncclCommShrink), where every survivor kept its
// communicator for it; takes `next` on success. unavailable: some survivor could not (the caller
// creates a fresh world); any other error: the shrink itself failed on some survivor.
result<std::unique_ptr<world>> world::shrink_backend(MPI_Comm next, const std::vector<int>& left_out,
                                                     clock::time_point deadline) {
  // Every survivor takes the same path.
  int kept = engine_->kept_after_failure() ? 1 : 0;
  {
    MPI_Request q = MPI_REQUEST_NULL;
    ATOMR_TRY(ATOMR_MPI_CHECK(MPI_Iallreduce(MPI_IN_PLACE, &kept, 1, MPI_INT, MPI_MIN, next, &q)));
    ATOMR_TRY(detail::wait_mpi(q, deadline, "agreeing how to shrink"));
  }
  if (kept == 0) return error(errc::unavailable, "not every survivor kept its communicator for ncclCommShrink");
  auto sub = engine_->backend().shrink(left_out, next, deadline);
  const auto agreed = detail::agree(next, sub ? ok() : result<void>(sub.error_value()), deadline,
                                    "shrinking the NCCL communicator (ncclCommShrink)");
  if (!agreed) {
    if (sub) (*sub)->abort();  // the others could not: this one's new communicator is not used
    return agreed.error_value();
  }
  std::uint64_t id = 0;
  int me = 0;
  ATOMR_TRY(ATOMR_MPI_CHECK(MPI_Comm_rank(next, &me)));
  if (me == 0) id = detail::new_world_id();
  ATOMR_TRY(ATOMR_MPI_CHECK(MPI_Bcast(&id, 1, MPI_UINT64_T, 0, next)));
  auto votes = world_engine::open_vote_channel(next, next, (*sub)->graph_limit() > 0, deadline);
  if (!votes) {
    (*sub)->abort();
    return votes.error_value();
  }
  auto engine = std::make_shared<world_engine>(next, std::move(sub).value(), engine_->members(), engine_->options(), id,
                                               std::move(votes).value());
  return std::unique_ptr<world>(new world(std::move(engine)));
}

}  // namespace atomr::cluster
