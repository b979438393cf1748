// The world engine's issuing: whether a request's inputs are written yet, which requests go
// together (groups, packs, point-to-point runs), and handing them to the backend.

#include <algorithm>

#include "atomr/cluster/engine/buffer_use.hpp"
#include "atomr/cluster/engine/pack_policy.hpp"
#include "world_engine_impl.hpp"

namespace atomr::cluster {

using namespace engine_detail;  // (coll_request and clock among them)
using detail::buffer_use;

bool world_engine::ready(const coll_request& r, detail::member_waits& waits, const write_list* ahead) const {
  waits.resize(members_.size());
  for (auto& w : waits) w.clear();  // keeps their capacity: this runs for every request
  auto need = [&](const coll_request::ticket& t, std::uint64_t upto) {
    if (upto == 0) return true;
    const auto m = member_of(*t.block);
    if (t.block->enqueued_on(upto, backend_->origin(m))) return true;  // recorded on this stream
    if (t.block->enqueued_without_event(upto)) return true;            // a host buffer's writes
    const auto mark = t.block->mark_after(upto);
    // This world's own unsealed write, or one of the chain this request goes in: it runs before
    // this request on the same stream.
    if (!mark) {
      return unsealed_covers(t.block, upto) ||
             (ahead != nullptr && std::any_of(ahead->begin(), ahead->end(),
                                              [&](const auto& w) { return w.first == t.block && w.second >= upto; }));
    }
    if (mark->event && mark->origin != backend_->origin(m)) waits[m].push_back(mark->event);
    return true;
  };
  for (const auto& t : r.writes) {
    if (!need(t, t.seq - 1)) return false;
  }
  for (const auto& t : r.reads) {
    if (!need(t, t.seq)) return false;
  }
  r.no_waits = std::all_of(waits.begin(), waits.end(), [](const auto& w) { return w.empty(); });
  return true;
}

bool world_engine::packable(const coll_request& r) const { return !r.bulk && packs_shape(r.spec.kind, r.bytes()); }

namespace {
bool is_p2p(const detail::coll_request& r) { return r.spec.kind == coll_kind::send || r.spec.kind == coll_kind::recv; }

// Collectives NCCL can aggregate in one group launch. (all_to_all is itself a group of sends and
// receives; a barrier reduces one shared scratch int.)
bool groupable_kind(coll_kind k) {
  return k == coll_kind::all_reduce || k == coll_kind::broadcast || k == coll_kind::reduce ||
         k == coll_kind::all_gather || k == coll_kind::reduce_scatter;
}

}  // namespace

// This rank's offer: the packable all_reduces queued from the head (in check mode only the first
// batch, so that every batch's head is compared), with a cut wherever a request cannot join the
// batch before it. Returns how many requests it covers.
std::size_t world_engine::plan_offer(std::uint8_t* cuts) const {
  const std::size_t most = k_plan_most;
  buffer_use use(std::min(queue_.size(), most) * members_.size());
  detail::member_waits waits;
  const coll_request* first = nullptr;
  std::size_t bytes = 0;
  std::size_t n = 0;
  const std::size_t ahead = std::min(queue_.size(), most);
  for (const auto& r : queue_) {
    if (n + k_prefetch_ahead < ahead) queue_[n + k_prefetch_ahead]->prefetch();
    if (n + k_prefetch_ahead / 2 < ahead) queue_[n + k_prefetch_ahead / 2]->prefetch_buffers();
    if (n == most || !packable(*r)) break;
    // A call planned whole is offered in an exchange of its own (see start_issue).
    if (n > 0 && r->plan && !options_.check) break;
    // (The buffers first: back to back on one buffer every request conflicts with the one before,
    // and that look takes no lock, where ready() takes one per buffer.)
    bool cut = first == nullptr || r->spec.type != first->spec.type || r->spec.params.op != first->spec.params.op ||
               bytes + r->bytes() > options_.pack_capacity || !use.try_add(r->spec) || !ready(*r, waits);
    if (cut && options_.check && first != nullptr) break;
    if (cut) {
      use.clear();
      (void)use.try_add(r->spec);  // always fits an empty set
      set_bit(cuts, n);
      first = r.get();
      bytes = 0;
    }
    bytes += r->bytes();
    ++n;
  }
  return n;
}

bool world_engine::groupable(const coll_request& r) const {
  return !r.bulk && groupable_kind(r.spec.kind) && !packable(r);
}

std::optional<std::size_t> world_engine::group_prefix() const {
  const auto& head = *queue_.front();
  // NCCL takes at most 2048 calls in one group; each request is one call per local member.
  const std::size_t most = std::max<std::size_t>(1, 1024 / backend_->members());
  buffer_use use(std::min(queue_.size(), most) * members_.size());
  detail::member_waits waits;
  std::size_t n = 0;
  for (const auto& r : queue_) {
    if (n == most || r->together != head.together || !groupable(*r) || !use.try_add(r->spec)) break;
    // (A request that may be voted on is issued alone or heads its own group: see graph_shape.)
    if (n > 0 && !graph_shape(head) && graph_shape(*r)) break;
    if (!ready(*r, waits)) return std::nullopt;
    ++n;
  }
  return std::max<std::size_t>(n, 1);
}

// The sends and receives at the head of the queue that can go in one group. Grouping is local:
// NCCL matches each peer's point-to-point calls in order, however the ranks group them.
std::size_t world_engine::p2p_prefix() const {
  // NCCL takes at most 2048 calls in one group; each request is one call per local member.
  const std::size_t most = std::max<std::size_t>(1, 1024 / backend_->members());
  buffer_use use(std::min(queue_.size(), most) * members_.size());
  std::size_t n = 0;
  detail::member_waits waits;
  for (const auto& r : queue_) {
    if (n == most || !is_p2p(*r) || !ready(*r, waits) || !use.try_add(r->spec)) break;
    ++n;
  }
  return std::max<std::size_t>(n, 1);
}

void world_engine::issue_ready(bool seal_now) {
  finish_background();
  struct sealer {
    world_engine& e;
    bool seal_now;
    ~sealer() {
      if (seal_now) e.seal();
      e.note_depth();
    }
  } sealed_on_exit{*this, seal_now};
  while (!failure_) {
    if (graph_vote_) {
      auto done = vote_done(*graph_vote_);
      if (!done) {
        return fail_world(done.error_value().with_context("agreeing on a CUDA graph across ranks"),
                          queue_.front().get());
      }
      if (!*done) return;
      finish_graph_vote();
      continue;
    }
    if (exchange_) {
      const auto done = exchange_done(*exchange_);
      if (!done) {
        return fail_world(done.error_value().with_context("comparing requests across ranks"), queue_.front().get());
      }
      if (!*done) return;
      finish_exchange();
      continue;
    }
    // (A call planned whole: its next part may have come while this thread issued the last.)
    if (queue_.empty() && !planned_.empty()) take_inbox();
    if (queue_.empty() || !start_issue()) return;
  }
}

bool world_engine::start_issue() {
  auto& head = *queue_.front();
  // (A bulk call's later batches run after its first, which waited for its inputs.)
  if (head.bulk && head.bulk->issued > 0) return start_bulk();
  // The rest of an agreed run of bulk calls comes next, and nothing else (see take_run_cuts).
  if (run_cuts_.left > 0 && !(head.bulk && head.bulk->plan_length == 0)) {
    fail_world(came_between_run(head), &head);
    return true;
  }
  if (!ready(head, scratch_waits_)) return false;
  head.stamp(trace_stage::inputs);
  if (!planned_.empty()) return issue_planned();
  if (head.bulk) return start_bulk();
  if (!packable(head)) {
    // A request that does not pack is issued with those that go in one group with it.
    const auto batch = unpacked_batch(head);
    if (!batch) return false;
    if (!options_.check) {
      issue_batch(*batch);
      return true;
    }
    return start_exchange(head, *batch);
  }
  if (detail::pack_policy::may_skip_exchange(options_.check, control_size_, head.together,
                                             [&] { return graph_shape(head); })) {
    latency_window_.forget_before(head.seq);
    const auto latency = in_latency_window(head.seq);
    if (!latency) return false;  // an exchange it depends on is still out
    if (*latency) {
      window_head_ = true;
      issue_batch(1);
      return true;
    }
  }
  const detail::pack_policy::head_state state{in_flight_.size(), head.plan != nullptr, head.together,
                                              queued_call_end_,  queue_.size(),        k_submit_part};
  if (detail::pack_policy::holds(state, [&] { return head_is_cut(); })) return false;
  if (detail::pack_policy::issues_at_once(options_.check, control_size_, queue_.size())) {
    issue_batch(1);
    return true;
  }
  return start_exchange(head, 1);
}

std::optional<std::size_t> world_engine::unpacked_batch(const coll_request& head) {
  if (is_p2p(head)) return p2p_prefix();
  if (head.together != 0 && groupable(head)) return group_prefix();
  return 1;
}

bool world_engine::start_exchange(coll_request& head, std::size_t batch) {
  stats_.agreements.fetch_add(1, std::memory_order_release);
  exchange_ = std::make_unique<exchange>();
  exchange_->batch = batch;
  auto& s = exchange_->mine.head;
  s.seq = head.seq;
  s.count = head.count;
  s.root = head.spec.params.root;
  s.kind = static_cast<std::uint8_t>(head.spec.kind);
  s.type = static_cast<std::uint8_t>(head.spec.type);
  s.op = static_cast<std::uint8_t>(head.spec.params.op);
  s.sorts = k_offer_requests;
  if (packable(head) && head.plan && !options_.check) {
    // The head of a call planned whole: the offer is the caller's plan, most of it for requests
    // not handed over yet. Agreed, it lets every part of the call be issued as it comes.
    s.offered = static_cast<std::int32_t>(std::min<std::size_t>(head.plan->length, k_plan_most));
    std::copy(head.plan->cuts.begin(), head.plan->cuts.end(), exchange_->mine.cuts);
    exchange_->call = head.together;
  } else {
    s.offered = packable(head) ? static_cast<std::int32_t>(plan_offer(exchange_->mine.cuts)) : 1;
  }
  s.offered_most = s.offered;
  if (control_size_ == 1) {
    // Nobody to agree with.
    exchange_->merged = exchange_->mine;
    exchange_->all.assign(1, exchange_->mine);
    finish_exchange();
    return true;
  }
  if (!options_.check && s.offered == 1) {
    // The plan covers the shortest offer: with this rank offering one request, it is that request
    // alone, whatever the others offer. Issue it at once; the others learn the plan from the
    // exchange, which this rank finishes in the background. The offer goes out first: the issue
    // may block (a blocking communicator's first call waits for its peers to connect), and a peer
    // may be waiting for this offer before it issues.
    auto ex = std::move(exchange_);
    if (!post_exchange(*ex, &head)) return true;
    background_.push_back(std::move(ex));
    issue_batch(1);
    return true;
  }
  if (!post_exchange(*exchange_, &head)) exchange_.reset();
  return true;
}

void world_engine::issue_batch(std::size_t n) {
  if (graph_vote_first(n)) return;
  // (The scratch lists keep their capacity from batch to batch: this runs for every request.)
  auto& batch = scratch_batch_;
  batch.clear();
  batch.reserve(n);
  auto& waits = scratch_waits_;
  waits.resize(members_.size());
  for (auto& w : waits) w.clear();
  auto& mine = scratch_mine_;
  // A chain's requests wait for what the ones before them in it write by running after them.
  const bool chain = graph_decided_ && graph_decided_->chain > 1 && !graph_decided_->packed;
  if (chain) ahead_writes_.clear();
  for (std::size_t i = 0; i < n && !queue_.empty(); ++i) {
    // (A request found ready with nothing to wait for when it was planned stays so: one look at
    // its buffers' write marks, a lock each, is enough.)
    auto& r = *queue_.front();
    if (chain || !r.no_waits) {
      ready(r, mine, chain ? &ahead_writes_ : nullptr);
      for (std::size_t m = 0; m < mine.size(); ++m) waits[m].insert(waits[m].end(), mine[m].begin(), mine[m].end());
    }
    if (chain) {
      for (const auto& t : r.writes) ahead_writes_.emplace_back(t.block, t.seq);
    }
    batch.push_back(std::move(queue_.front()));
    queue_.pop_front();
  }
  if (batch.front()->traced) {
    const auto now = coll_request::trace_now();
    const auto thread = this_thread_id();
    for (auto& r : batch) {
      if (!r->traced) continue;  // (tracing went on while it waited)
      r->stamp_at(trace_stage::inputs, now);
      r->stamp_at(trace_stage::agreed, now);
      r->trace->batch = static_cast<std::uint32_t>(batch.size());
      r->trace->progress_thread = thread;
    }
  }
  result<void> issued = ok();
  // The batch as the backends take it (the scratch list keeps its capacity).
  auto raw_batch = [&]() -> std::span<detail::coll_request* const> {
    scratch_raw_.clear();
    for (auto& r : batch) scratch_raw_.push_back(r.get());
    return scratch_raw_;
  };
  if (graph_decided_) {
    const auto d = *graph_decided_;
    graph_decided_.reset();
    for (auto& r : batch) {
      if (r->traced) r->trace->graph = static_cast<std::int8_t>(d.step);
    }
    if (d.packed) {
      issued = backend_->issue_packed_graph(raw_batch(), waits, d.step, d.id);
    } else if (d.chain > 1) {
      issued = backend_->issue_graph_chain(raw_batch(), waits, d.step, d.id);
      if (issued) stats_.graph_chained.fetch_add(batch.size(), std::memory_order_release);
    } else {
      issued = backend_->issue_graph(*batch.front(), waits, d.step, d.id);
    }
    if (issued && d.step == detail::comm_backend::graph_step::capture) {
      stats_.graph_captures.fetch_add(1, std::memory_order_release);
    }
    if (issued && d.step == detail::comm_backend::graph_step::launch) {
      stats_.graph_launches.fetch_add(batch.size(), std::memory_order_release);
    }
  } else if (batch.size() == 1 && !is_p2p(*batch.front())) {
    issued = backend_->issue(*batch.front(), waits);
  } else {
    const auto raw = raw_batch();
    issued = packable(*batch.front()) ? backend_->issue_packed(raw, waits) : backend_->issue_group(raw, waits);
  }
  if (!issued) {
    // The communicator may be half-way through a call: the world cannot go on safely.
    in_flight_.insert(in_flight_.end(), std::make_move_iterator(batch.begin()), std::make_move_iterator(batch.end()));
    return fail_world(issued.error_value().with_context("issuing " + in_flight_.back()->describe()),
                      in_flight_.back().get());
  }
  stats_.issues.fetch_add(1, std::memory_order_release);
  // (A chain's requests go one after another in a graph: neither packed nor grouped.)
  if (!chain && batch.size() > 1 && packable(*batch.front())) {
    stats_.packed.fetch_add(batch.size(), std::memory_order_release);
  }
  if (!chain && batch.size() > 1 && groupable(*batch.front())) {
    stats_.grouped.fetch_add(batch.size(), std::memory_order_release);
  }
  const bool ordered = backend_->stream_ordered();
  coll_request::stamp_all(batch, trace_stage::called);  // where the backend did not say
  coll_request::stamp_all(batch, trace_stage::issued);
  for (auto& r : batch) {
    if (ordered) {
      unsealed_.push_back(r.get());
      for (const auto& t : r->writes) unsealed_writes_.emplace_back(t.block, t.seq);
    } else if (const auto& events = backend_->events(*r); !events.empty()) {
      publish_writes(*r, events);
    }
    in_flight_.push_back(std::move(r));
  }
  batch.clear();
  // A long run of issues is sealed in parts: its first requests complete (and their callers
  // hear of it) without waiting for the whole run to be issued. A large request is sealed
  // alone: its event costs nothing next to its time on the GPU, and back to back from 16 MiB
  // shared events were 2-8 % slower than one each on an H200.
  if (unsealed_.size() >= k_seal_most || (!unsealed_.empty() && unsealed_.back()->bytes() >= options_.seal_bytes)) {
    seal();
  }
}

bool world_engine::head_is_cut() {
  if (queue_.size() < 2) return false;
  const auto& head = *queue_.front();
  const auto& next = *queue_[1];
  return !packable(next) || next.spec.type != head.spec.type || next.spec.params.op != head.spec.params.op ||
         detail::conflicts(head.spec, next.spec) || !ready(next, scratch_mine_);
}

void world_engine::issue_released() {
  // (Such a backend records no events: nothing is left unsealed.)
  if (last_finished_ > 0 && !queue_.empty() && !backend_->stream_ordered()) issue_ready();
}

}  // namespace atomr::cluster
