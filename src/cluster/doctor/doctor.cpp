// The doctor's run: options agreed, each rank's checks (the ranks of a node in turn), the pairs
// and collectives among the ranks whose device started, then everything gathered to rank 0 and
// judged there.
#include <cereal/types/chrono.hpp>
#include <cereal/types/common.hpp>
#include <cereal/types/string.hpp>
#include <cereal/types/vector.hpp>

#include "atomr/cluster/doctor/classify.hpp"
#include "atomr/cluster/doctor/schedule.hpp"
#include "atomr/cluster/gather.hpp"
#include "atomr/cluster/mpi_check.hpp"
#include "atomr/serialization/payload_codec.hpp"
#include "doctor_parts.hpp"

namespace atomr::cluster::doctor {
namespace {

using detail::clock;

// What each rank sends rank 0 at the end.
struct rank_bundle {
  rank_result rank;
  std::vector<edge_result> edges;
  std::vector<coll_result> collectives;
  std::string failure;  // a phase that failed as a whole on this rank

  template <typename A>
  void serialize(A& ar) {
    ar(rank, edges, collectives, failure);
  }
};

// Shares of the budget; the rest is start-up (router, registry, world) and the gather.
constexpr double k_rank_share = 0.15;
constexpr double k_pair_share = 0.55;
constexpr double k_coll_share = 0.15;

clock::duration share_of(std::chrono::milliseconds budget, double share) {
  return std::chrono::duration_cast<clock::duration>(std::chrono::duration<double, std::milli>(budget.count() * share));
}

// Rank 0's options on every rank (the device choice stays each rank's own).
result<void> agree_on_options(MPI_Comm world, int rank, options& opts) {
  const auto device = opts.device;
  std::vector<std::byte> bytes;
  if (rank == 0) bytes = serialization::encode(opts);
  int n = static_cast<int>(bytes.size());
  ATOMR_TRY(ATOMR_MPI_CHECK(MPI_Bcast(&n, 1, MPI_INT, 0, world)));
  bytes.resize(static_cast<std::size_t>(n));
  ATOMR_TRY(ATOMR_MPI_CHECK(MPI_Bcast(bytes.data(), n, MPI_BYTE, 0, world)));
  ATOMR_ASSIGN_OR_RETURN(opts, serialization::decode<options>(bytes, "doctor options"));
  opts.device = device;
  return ok();
}

result<void> polite_barrier(MPI_Comm comm, const char* what) {
  MPI_Request req = MPI_REQUEST_NULL;
  ATOMR_TRY(ATOMR_MPI_CHECK(MPI_Ibarrier(comm, &req)));
  return detail::wait_politely(req, what);
}

// Ranks whose device copies far below their kind's healthy level measure again, one at a time in
// the whole job, keeping the better look: on a busy host a rank's first look can share its CPU and
// memory with another rank's.
result<void> second_look_at_ranks(MPI_Comm world, const node_identity& id, const options& opts,
                                  const std::optional<local::device>& dev, rank_result& mine, clock::duration slice) {
  ATOMR_ASSIGN_OR_RETURN(auto all, gather_values(world, mine, "doctor rank result"));
  std::vector<int> again;
  if (id.world_rank == 0) {
    std::vector<sample> copies;
    for (const auto& r : all) copies.push_back({r.device_name, r.failure.empty() ? r.device_copy_gbps : 0, 0});
    const auto judged = judge(copies, better::higher, {opts.fraction, 3});
    for (std::size_t i = 0; i < judged.size(); ++i) {
      if (judged[i].outlier) again.push_back(static_cast<int>(i));
    }
  }
  int n = static_cast<int>(again.size());
  ATOMR_TRY(ATOMR_MPI_CHECK(MPI_Bcast(&n, 1, MPI_INT, 0, world)));
  again.resize(static_cast<std::size_t>(n));
  if (n > 0) ATOMR_TRY(ATOMR_MPI_CHECK(MPI_Bcast(again.data(), n, MPI_INT, 0, world)));
  for (const int rank : again) {
    if (rank == id.world_rank && dev) {
      if (auto gbps = detail::measure_copy(*dev, opts, slice / std::max(1, n)); gbps) {
        mine.device_copy_gbps = std::max(mine.device_copy_gbps, *gbps);
      }
    }
    ATOMR_TRY(polite_barrier(world, "a second look at a rank's device"));
  }
  return ok();
}

}  // namespace

void options::for_mode() {
  constexpr std::size_t MiB = std::size_t{1} << 20;
  check_bytes = quick ? 8 * MiB : 64 * MiB;
  pair_bytes = quick ? 4 * MiB : 16 * MiB;
  coll_bytes = quick ? std::vector<std::size_t>{64 << 10, MiB} : std::vector<std::size_t>{4 << 10, MiB, 16 * MiB};
}

std::string rank_result::device_label() const { return gpu ? "GPU " + std::to_string(device_index) : "host device"; }

result<report> run(const mpi_session& session, options opts) {
  const auto t0 = clock::now();
  const auto& id = session.identity();
  const MPI_Comm world = session.world();
  ATOMR_TRY(agree_on_options(world, id.world_rank, opts));

  local::actor_system system;
  std::optional<local::device> dev;
  rank_bundle mine;
  {
    // A node's ranks share its memory and PCIe switches: one at a time, so that each measures
    // its own device rather than their contention.
    MPI_Comm node = MPI_COMM_NULL;
    ATOMR_TRY(ATOMR_MPI_CHECK(MPI_Comm_split(world, id.node_id, id.local_rank, &node)));
    const auto slice = share_of(opts.budget, k_rank_share) / std::max(1, id.local_size);
    result<void> turns = ok();
    for (int turn = 0; turn < id.local_size && turns; ++turn) {
      if (turn == id.local_rank) mine.rank = detail::check_rank(system, opts, id, dev, slice);
      turns = polite_barrier(node, "the ranks of a node taking turns at their checks");
    }
    MPI_Comm_free(&node);
    ATOMR_TRY(turns);
  }

  ATOMR_TRY(second_look_at_ranks(world, id, opts, dev, mine.rank, share_of(opts.budget, k_rank_share)));

  std::vector<int> usable(static_cast<std::size_t>(id.world_size));
  int started = dev ? 1 : 0;
  ATOMR_TRY(ATOMR_MPI_CHECK(MPI_Allgather(&started, 1, MPI_INT, usable.data(), 1, MPI_INT, world)));
  std::vector<int> world_rank_of;
  for (int r = 0; r < id.world_size; ++r) {
    if (usable[static_cast<std::size_t>(r)]) world_rank_of.push_back(r);
  }
  MPI_Comm among = MPI_COMM_NULL;
  ATOMR_TRY(ATOMR_MPI_CHECK(MPI_Comm_split(world, started ? 0 : MPI_UNDEFINED, id.world_rank, &among)));
  if (started) {
    auto edges =
        detail::check_pairs(among, *dev, system, opts, world_rank_of, id.node_id, share_of(opts.budget, k_pair_share));
    if (edges) {
      mine.edges = std::move(edges).value();
    } else {
      mine.failure = "pairs: " + edges.error_value().describe();
    }
    auto colls = detail::check_collectives(among, *dev, opts, share_of(opts.budget, k_coll_share));
    if (colls) {
      mine.collectives = std::move(colls).value();
    } else if (mine.failure.empty()) {
      mine.failure = "collectives: " + colls.error_value().describe();
    }
    MPI_Comm_free(&among);
  }

  ATOMR_ASSIGN_OR_RETURN(auto all, gather_values(world, mine, "doctor rank bundle"));
  report out;
  if (id.world_rank != 0) return out;
  out.ranks = id.world_size;
  out.nodes = id.node_count;
  out.rounds = static_cast<int>(tournament(static_cast<int>(world_rank_of.size())).size());
  out.used = opts;
  std::vector<edge_result> edges;
  for (auto& b : all) {
    out.rank_results.push_back(b.rank);
    edges.insert(edges.end(), b.edges.begin(), b.edges.end());
  }
  if (!world_rank_of.empty()) out.collectives = all[static_cast<std::size_t>(world_rank_of.front())].collectives;
  judge_report(out, edges);
  for (const auto& b : all) {
    if (!b.failure.empty()) {
      out.findings.push_back({"rank", b.rank.rank, -1, b.rank.node,
                              "rank " + std::to_string(b.rank.rank) + " (" + b.rank.hostname + " " +
                                  b.rank.device_label() + "): " + b.failure});
    }
  }
  out.seconds = detail::seconds_of(clock::now() - t0);
  return out;
}

}  // namespace atomr::cluster::doctor
