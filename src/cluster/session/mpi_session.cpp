#include "atomr/cluster/mpi_session.hpp"

#include <chrono>

#include "atomr/cluster/liveness/tunables.hpp"
#include "atomr/cluster/mpi/agree_settings.hpp"
#include "atomr/cluster/mpi_check.hpp"
#include "atomr/common/context.hpp"
#include "atomr/common/log.hpp"

namespace atomr::cluster {
namespace {

// Liveness is not watching yet while its settings are compared: a rank that never arrives is this
// timeout's error, not a hang.
constexpr std::chrono::seconds k_settings_deadline{60};

const char* thread_level_name(int level) {
  switch (level) {
    case MPI_THREAD_SINGLE: return "MPI_THREAD_SINGLE";
    case MPI_THREAD_FUNNELED: return "MPI_THREAD_FUNNELED";
    case MPI_THREAD_SERIALIZED: return "MPI_THREAD_SERIALIZED";
    case MPI_THREAD_MULTIPLE: return "MPI_THREAD_MULTIPLE";
    default: return "unknown";
  }
}

}  // namespace

result<std::unique_ptr<mpi_session>> mpi_session::start(int* argc, char*** argv) {
  using clock = std::chrono::steady_clock;
  auto ms_since = [](clock::time_point t) {
    return std::chrono::duration<double, std::milli>(clock::now() - t).count();
  };
  startup_times times;
  auto t = clock::now();
  int initialized = 0;
  ATOMR_TRY(ATOMR_MPI_CHECK(MPI_Initialized(&initialized)));
  int provided = MPI_THREAD_SINGLE;
  if (initialized) {
    ATOMR_TRY(ATOMR_MPI_CHECK(MPI_Query_thread(&provided)));
  } else {
    ATOMR_TRY(ATOMR_MPI_CHECK(MPI_Init_thread(argc, argv, MPI_THREAD_MULTIPLE, &provided)));
  }
  const bool owns = !initialized;
  if (owns) times.mpi_init = ms_since(t);
  t = clock::now();
  auto fail = [owns](error e) -> error {
    if (owns) MPI_Finalize();
    return e;
  };
  // atomr's progress and watchdog threads call MPI concurrently with user threads.
  if (provided < MPI_THREAD_MULTIPLE) {
    return fail(error(errc::unavailable, std::string("MPI provides only ") + thread_level_name(provided) +
                                             "; atomr needs MPI_THREAD_MULTIPLE (rebuild MPI with thread support)"));
  }
  if (auto r = ATOMR_MPI_CHECK(MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN)); !r) {
    return fail(r.error_value());
  }
  MPI_Comm world = MPI_COMM_NULL;
  if (auto r = ATOMR_MPI_CHECK(MPI_Comm_dup(MPI_COMM_WORLD, &world)); !r) return fail(r.error_value());
  auto identity = discover_node_identity(world);
  if (!identity) {
    MPI_Comm_free(&world);
    return fail(identity.error_value());
  }
  context::set_rank(identity->world_rank);
  log::get("cluster")->debug("MPI up: rank {}/{} on node {} ({}), local rank {}/{}", identity->world_rank,
                             identity->world_size, identity->node_id, identity->hostname, identity->local_rank,
                             identity->local_size);
  std::unique_ptr<mpi_session> session(new mpi_session(owns, world, std::move(identity).value()));
  times.node_identity = ms_since(t);
  t = clock::now();
  if (owns) {
    // All ranks must start liveness or none (a rank without it leaves the others waiting for its
    // name), with the same policy: its settings must agree before they are read.
    ATOMR_TRY(
        detail::agree_settings(world, tunables::k_liveness, clock::now() + k_settings_deadline, "starting liveness"));
    ATOMR_ASSIGN_OR_RETURN(const auto options, liveness_options::from_environment());
    if (options) {
      ATOMR_ASSIGN_OR_RETURN(session->liveness_, liveness::start(world, session->identity_, *options));
    }
  }
  times.liveness = ms_since(t);
  session->startup_ = times;
  return session;
}

mpi_session::mpi_session(bool owns_mpi, MPI_Comm world, node_identity identity)
    : owns_mpi_(owns_mpi), world_(world), identity_(std::move(identity)) {}

mpi_session::~mpi_session() {
  // Still watching until the others are done too: a rank that stops meanwhile is named and ends the
  // job here, instead of holding this one in MPI_Finalize.
  if (liveness_) liveness_->leave();
  const auto lost = liveness_ ? liveness_->failed_ranks() : std::vector<std::pair<int, std::string>>{};
  liveness_.reset();
  if (world_ != MPI_COMM_NULL) MPI_Comm_free(&world_);
  if (owns_mpi_ && !lost.empty()) {
    // MPI_Finalize would wait for the failed rank forever (a stopped one never arrives). The
    // launcher sees this rank leave without it and ends the job, the failed rank included, with
    // a non-zero code: the job did lose a rank.
    log::get("cluster")->warn("leaving without MPI_Finalize: {} failed, and MPI_Finalize would wait for it",
                              lost.front().second);
    return;
  }
  if (owns_mpi_) {
    if (auto r = ATOMR_MPI_CHECK(MPI_Finalize()); !r) log::get("cluster")->error("{}", r.error_value().describe());
  }
}

}  // namespace atomr::cluster
