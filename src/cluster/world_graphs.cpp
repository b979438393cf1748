// The world engine's CUDA graph votes (see world_engine.hpp, graph_vote): which requests go
// through one, and what the ranks do after it.
#include "atomr/cluster/mpi_check.hpp"
#include "world_engine.hpp"

namespace atomr::cluster {

using detail::coll_request;
using graph_step = detail::comm_backend::graph_step;

namespace {
// Votes in a row that launched nothing before a request shape skips votes, and the longest skip.
constexpr std::uint32_t k_graph_cold = 16;
constexpr std::uint32_t k_graph_backoff_most = 4096;
// Request shapes whose pace is kept; more, and every pace starts over (on every rank alike).
constexpr std::size_t k_graph_paces_most = 4096;

std::array<std::uint64_t, 3> shape_of(const coll_request& r) {
  return {static_cast<std::uint64_t>(r.spec.kind) | static_cast<std::uint64_t>(r.spec.type) << 8 |
              static_cast<std::uint64_t>(r.spec.params.op) << 16,
          static_cast<std::uint64_t>(static_cast<std::uint32_t>(r.spec.params.root)), r.count};
}
}  // namespace

bool world_engine::graph_shape(const coll_request& r) const {
  const auto limit = backend_->graph_limit();
  if (limit == 0 || options_.check || r.bytes() == 0 || r.bytes() > limit) return false;
  switch (r.spec.kind) {
    case coll_kind::all_reduce:
    case coll_kind::broadcast:
    case coll_kind::reduce:
    case coll_kind::all_gather:
    case coll_kind::reduce_scatter:
    case coll_kind::all_to_all: return true;
    default: return false;  // point to point pairs differently on each rank; a barrier has no buffers
  }
}

world_engine::graph_pace& world_engine::pace_of(const coll_request& r) {
  const auto shape = shape_of(r);
  if (graph_paces_.size() >= k_graph_paces_most && !graph_paces_.contains(shape)) graph_paces_.clear();
  return graph_paces_[shape];
}

bool world_engine::graph_vote_first(std::size_t& n) {
  if (graph_voted_) {
    graph_voted_ = false;
    return false;
  }
  if (queue_.empty() || !graph_shape(*queue_.front())) return false;
  const auto& head = *queue_.front();
  // A packed batch is one the ranks agreed on already (a plan): no vote, no graph.
  if (packable(head) && n > 1) return false;
  auto& pace = pace_of(head);
  if (pace.skip > 0) {
    --pace.skip;
    n = 1;
    return false;
  }
  start_graph_vote(n);
  return true;
}

void world_engine::start_graph_vote(std::size_t n) {
  auto& head = *queue_.front();
  const auto held = backend_->graph_lookup(head);
  auto vote = std::make_unique<graph_vote>();
  const auto capture = static_cast<std::int64_t>(held.capture);
  vote->value[0] = capture;
  vote->value[1] = -capture;
  vote->value[2] = held.seen ? 0 : 1;
  vote->value[3] = -static_cast<std::int64_t>(n);
  stats_.graph_votes.fetch_add(1, std::memory_order_release);
  if (control_size_ > 1) {
    auto posted =
        ATOMR_MPI_CHECK(MPI_Iallreduce(MPI_IN_PLACE, vote->value, 4, MPI_INT64_T, MPI_MAX, control_, &vote->request));
    if (!posted) return fail_world(posted.error_value().with_context("agreeing on a CUDA graph across ranks"), &head);
    graph_vote_ = std::move(vote);
    return;
  }
  // Nobody to agree with: the vote is this rank's.
  graph_vote_ = std::move(vote);
  finish_graph_vote();
}

void world_engine::finish_graph_vote() {
  const auto vote = std::move(graph_vote_);
  const auto& head = *queue_.front();
  const auto group = static_cast<std::size_t>(std::max<std::int64_t>(1, -vote->value[3]));
  graph_voted_ = true;
  if (group > 1) return issue_batch(group);  // a group of NCCL calls, as every rank can make it
  const auto highest = vote->value[0];
  const auto lowest = -vote->value[1];
  const bool all_seen = vote->value[2] == 0;
  auto& pace = pace_of(head);
  if (highest == lowest && highest > 0) {
    graph_decided_.emplace(graph_step::launch, static_cast<std::uint64_t>(highest));
    pace.cold = 0;
    pace.backoff = graph_pace{}.backoff;
  } else {
    // A new capture takes the request's sequence number: the same on every rank, and never
    // one an earlier capture took.
    graph_decided_.emplace(all_seen ? graph_step::capture : graph_step::eager, all_seen ? head.seq : 0);
    if (++pace.cold >= k_graph_cold) {
      pace.cold = 0;
      pace.skip = pace.backoff;
      pace.backoff = std::min(pace.backoff * 2, k_graph_backoff_most);
    }
  }
  issue_batch(1);
}

}  // namespace atomr::cluster
