// The world engine's CUDA graph votes (see world_engine.hpp, graph_vote): which requests go
// through one, and what the ranks do after it.
#include <utility>

#include "atomr/cluster/engine/world_engine.hpp"

namespace atomr::cluster {

using detail::coll_request;
using graph_step = detail::comm_backend::graph_step;

namespace {
// The vote's messages on the control communicator (host_allreduce::k_tag_span tags from here;
// one vote is in flight at a time, and failure notices use another tag).
constexpr int k_graph_vote_tag = 0x475600;

detail::graph_pacer::shape shape_of(const coll_request& r) { return detail::graph_pacer::of(r.spec, r.count); }
}  // namespace

bool world_engine::graph_shape(const coll_request& r) const {
  const auto limit = backend_->graph_limit();
  if (limit == 0 || r.bulk || options_.check || r.bytes() == 0 || r.bytes() > limit) return false;
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

bool world_engine::pack_graph_shape(std::size_t n) const {
  if (!options_.pack_graphs || !backend_->graph_packs() || options_.check || n < 2) return false;
  // (Counts are the same on every rank for an all_reduce, so every rank decides alike.)
  std::size_t total = 0;
  for (std::size_t i = 0; i < n; ++i) total += (queue_[i]->bytes() + 15) / 16 * 16;
  return total <= backend_->graph_limit();
}

void world_engine::start_pack_vote(std::span<const coll_request* const> batch, std::vector<std::uint64_t>* kept_key) {
  auto vote = std::make_unique<graph_vote>();
  vote->packed = batch.size();
  const auto held = backend_->graph_lookup_packed(batch, kept_key);
  const auto capture = static_cast<std::int64_t>(held.capture);
  vote->value[0] = capture;
  vote->value[1] = -capture;
  vote->value[2] = held.seen ? 0 : 1;
  send_graph_vote(std::move(vote));
}

void world_engine::finish_pack_vote(const graph_vote& vote) {
  auto& carrier = *queue_.front();
  // (A bulk call's batch: its first entry stands for the batch, as a planned batch's head does.)
  const auto& head = carrier.bulk ? carrier.bulk->entries[carrier.bulk->issued] : carrier;
  graph_decision d{head.seq, graph_step::eager, 0, 1, true};
  if (vote.value[0] == -vote.value[1] && vote.value[0] > 0) {
    d.step = graph_step::launch;
    d.id = static_cast<std::uint64_t>(vote.value[0]);
  } else if (vote.value[2] == 0) {
    d.step = graph_step::capture;  // (the head's sequence number: as for one request)
    d.id = head.seq;
  }
  graph_pacer_.note(detail::graph_pacer::of_pack(shape_of(head), vote.packed), d.step == graph_step::launch);
  if (carrier.bulk) return issue_bulk_batch(vote.packed, d);
  graph_decided_ = d;
  graph_voted_ = true;
  issue_batch(vote.packed);
}

std::size_t world_engine::graph_run_local() const {
  // The agreed plan (planned_, which starts at the request behind the head) issues a packable
  // request alone where it cuts before and after it. Other requests are issued alone where they
  // neither pack nor came with a per-request group (which may group them). (graph_shape leaves out
  // sends and receives.)
  std::size_t run = 1;
  for (std::size_t i = 1; i < queue_.size() && run < k_graph_run_most; ++i) {
    const auto& r = *queue_[i];
    if (!graph_shape(r)) break;
    if (i - 1 < planned_.size()) {
      if (!packable(r) || planned_[i - 1] != 1 || (i < planned_.size() && planned_[i] != 1)) break;
    } else if (packable(r) || r.together != 0) {
      break;
    }
    ++run;
  }
  return run;
}

bool world_engine::graph_vote_first(std::size_t& n) {
  const bool window = std::exchange(window_head_, false);
  if (graph_voted_) {
    graph_voted_ = false;
    return false;
  }
  if (queue_.empty() || !graph_shape(*queue_.front())) return false;
  const auto& head = *queue_.front();
  if (!graph_planned_.empty()) {
    // Decided by the vote of a request before it (every rank issues it alone, as this one does).
    const auto d = graph_planned_.front();
    graph_planned_.pop_front();
    if (d.seq != head.seq || n != 1 || queue_.size() < d.chain) {
      fail_world(error(errc::internal, "a CUDA graph decision for request #" + std::to_string(d.seq) + " (" +
                                           std::to_string(d.chain) + " in one graph) met request #" +
                                           std::to_string(head.seq) + " in a batch of " + std::to_string(n) + ", " +
                                           std::to_string(queue_.size()) + " queued"),
                 &head);
      return true;
    }
    graph_decided_ = d;
    n = d.chain;
    take_planned(d.chain - 1);
    return false;
  }
  // A packed batch is one the ranks agreed on already (a plan): its vote is on its graph alone.
  if (packable(head) && n > 1) {
    if (queue_.size() < n) {
      // (Every rank issues the same batch; one that holds fewer would split it, and vote apart.)
      fail_world(
          error(errc::internal, "a packed batch of " + std::to_string(n) + " from request #" +
                                    std::to_string(head.seq) + " met " + std::to_string(queue_.size()) + " queued"),
          &head);
      return true;
    }
    if (!pack_graph_shape(n)) return false;
    if (graph_pacer_.skips(detail::graph_pacer::of_pack(shape_of(head), n))) return false;
    auto& batch = scratch_const_;
    batch.clear();
    for (std::size_t i = 0; i < n; ++i) batch.push_back(queue_[i].get());
    start_pack_vote(batch);
    return true;
  }
  // (A head the latency window issues alone and that skips its vote leaves the window open: a
  // per-request group met there then issues up to 64 requests alone before packing resumes, on
  // every rank alike.)
  if (graph_pacer_.skips(shape_of(head))) {
    n = 1;
    return false;
  }
  start_graph_vote(n, window);
  return true;
}

void world_engine::start_graph_vote(std::size_t n, bool window) {
  auto& head = *queue_.front();
  const auto held = backend_->graph_lookup(head);
  auto vote = std::make_unique<graph_vote>();
  const auto capture = static_cast<std::int64_t>(held.capture);
  vote->value[0] = capture;
  vote->value[1] = -capture;
  vote->value[2] = held.seen ? 0 : 1;
  vote->value[3] = -static_cast<std::int64_t>(n);
  const auto run = n == 1 ? graph_run_local() : 1;
  vote->value[4] = -static_cast<std::int64_t>(run);
  vote->value[5] = window && head.together != 0 ? 1 : 0;
  for (std::size_t i = 1; i < run; ++i) {
    const auto h = backend_->graph_lookup(*queue_[i]);
    auto* v = vote->value + 6 + 3 * (i - 1);
    v[0] = static_cast<std::int64_t>(h.capture);
    v[1] = -v[0];
    v[2] = h.seen ? 0 : 1;
  }
  // The run's chains (none where the run is shorter than one on any rank: the shortest run is
  // the one all ranks issue).
  bool chain_ready[k_graph_chains_most] = {};
  const std::size_t chains = backend_->graph_chains() ? run / k_graph_chain : 0;
  if (chains > 0) chains_ready(run, chain_ready);
  for (std::size_t c = 0; c < k_graph_chains_most; ++c) {
    auto* v = vote->value + k_chain_fields + 4 * c;
    if (c >= chains) {
      v[2] = 1;
      v[3] = 1;
      continue;
    }
    const auto h = backend_->graph_lookup_chain(chain_at(c * k_graph_chain));
    v[0] = static_cast<std::int64_t>(h.capture);
    v[1] = -v[0];
    v[2] = h.seen ? 0 : 1;
    v[3] = chain_ready[c] ? 0 : 1;
  }
  send_graph_vote(std::move(vote));
}

void world_engine::send_graph_vote(std::unique_ptr<graph_vote> vote) {
  stats_.graph_votes.fetch_add(1, std::memory_order_release);
  if (control_size_ > 1 && vote_shm_) {
    auto started =
        vote_shm_->start({{vote->value, vote->value, sizeof(vote->value)}}, MPI_INT64_T, MPI_MAX, sizeof(std::int64_t));
    if (!started) {
      return fail_world(started.error_value().with_context("agreeing on a CUDA graph across ranks"),
                        queue_.front().get());
    }
    vote->shared = std::move(started).value();
    stats_.graph_votes_shared.fetch_add(1, std::memory_order_release);
    graph_vote_ = std::move(vote);
    return;
  }
  if (control_size_ > 1) {
    vote->reduction = std::make_unique<detail::host_allreduce>(control_, control_rank_, control_size_, vote->value,
                                                               static_cast<int>(std::size(vote->value)), MPI_INT64_T,
                                                               MPI_MAX, k_graph_vote_tag, sizeof(vote->value));
    graph_vote_ = std::move(vote);
    return;
  }
  // Nobody to agree with: the vote is this rank's.
  graph_vote_ = std::move(vote);
  finish_graph_vote();
}

result<bool> world_engine::vote_done(graph_vote& v) {
  if (!v.shared) return v.reduction->progress();
  ATOMR_TRY(vote_shm_->progress());
  return v.shared->done();
}

void world_engine::finish_graph_vote() {
  const auto vote = std::move(graph_vote_);
  if (vote->packed > 0) return finish_pack_vote(*vote);
  // A per-request group met the latency window on some rank: its requests pack, so the window
  // closes on every rank (the exchanges before this request open none), and the head goes back
  // to planning (on every rank alike): issued alone here, it split the call's pack in two.
  if (vote->value[5] != 0) {
    latency_window_.close_before(queue_.front()->seq + 1);
    return;
  }
  const auto group = static_cast<std::size_t>(std::max<std::int64_t>(1, -vote->value[3]));
  graph_voted_ = true;
  if (group > 1) return issue_batch(group);  // a group of NCCL calls, as every rank can make it
  const auto run = static_cast<std::size_t>(
      std::clamp<std::int64_t>(-vote->value[4], 1, static_cast<std::int64_t>(k_graph_run_most)));
  bool launched = false;
  std::size_t head_chain = 1;
  for (std::size_t i = 0; i < run && i < queue_.size(); ++i) {
    // A chain of the run that every rank can issue at once goes as one graph: launched where every
    // rank holds it, captured where every rank issued it before (which ends the run, as a capture
    // of one request does). Otherwise its requests are decided one by one, and it is remembered.
    if (i % k_graph_chain == 0 && i + k_graph_chain <= run && i / k_graph_chain < k_graph_chains_most &&
        backend_->graph_chains()) {
      const auto* cv = vote->value + k_chain_fields + 4 * (i / k_graph_chain);
      const bool all_ready = cv[3] == 0;
      const auto seq = queue_[i]->seq;
      std::optional<graph_decision> d;
      if (all_ready && cv[0] == -cv[1] && cv[0] > 0) {
        d = graph_decision{seq, graph_step::launch, static_cast<std::uint64_t>(cv[0]), k_graph_chain};
        launched = true;
      } else if (all_ready && cv[2] == 0) {
        d = graph_decision{seq, graph_step::capture, seq, k_graph_chain};
      } else if (all_ready) {
        backend_->graph_note_chain(chain_at(i));
      }
      if (d) {
        if (i == 0) {
          graph_decided_ = d;
          head_chain = k_graph_chain;
        } else {
          graph_planned_.push_back(*d);
        }
        if (d->step == graph_step::capture) break;
        i += k_graph_chain - 1;
        continue;
      }
    }
    const auto* v = i == 0 ? vote->value : vote->value + 6 + 3 * (i - 1);
    const auto highest = v[0];
    const auto lowest = -v[1];
    const bool all_seen = v[2] == 0;
    const auto seq = queue_[i]->seq;
    graph_decision d{seq, graph_step::eager, 0};
    if (highest == lowest && highest > 0) {
      d = {seq, graph_step::launch, static_cast<std::uint64_t>(highest)};
      launched = true;
    } else if (all_seen) {
      // A new capture takes the request's sequence number: the same on every rank, and never
      // one an earlier capture took.
      d = {seq, graph_step::capture, seq};
    }
    if (i == 0) {
      graph_decided_ = d;
    } else {
      graph_planned_.push_back(d);
    }
    // A capture may replace a graph that a later request of the run was to launch: the run ends.
    if (d.step == graph_step::capture) break;
  }
  graph_pacer_.note(shape_of(*queue_.front()), launched);
  take_planned(head_chain - 1);
  issue_batch(head_chain);
}

std::array<const coll_request*, world_engine::k_graph_chain> world_engine::chain_at(std::size_t first) const {
  std::array<const coll_request*, k_graph_chain> chain{};
  for (std::size_t i = 0; i < k_graph_chain; ++i) chain[i] = queue_[first + i].get();
  return chain;
}

void world_engine::chains_ready(std::size_t run, bool* ready_out) const {
  // The head is ready (it is being issued); each later request is looked at with the writes of
  // the run's requests before it counted as enqueued, as they will be by the time it is issued.
  ahead_writes_.clear();
  detail::member_waits waits;
  bool all = true;
  for (std::size_t i = 0; i < run && i < queue_.size(); ++i) {
    if (i % k_graph_chain == 0) all = true;
    const auto& r = *queue_[i];
    if (i > 0 && !ready(r, waits, &ahead_writes_)) all = false;
    for (const auto& t : r.writes) ahead_writes_.emplace_back(t.block, t.seq);
    if (i % k_graph_chain == k_graph_chain - 1 && i / k_graph_chain < k_graph_chains_most) {
      ready_out[i / k_graph_chain] = all;
    }
  }
}

void world_engine::take_planned(std::size_t n) {
  // planned_ starts at the request behind the head.
  planned_.erase(planned_.begin(), planned_.begin() + static_cast<std::ptrdiff_t>(std::min(n, planned_.size())));
}

}  // namespace atomr::cluster
