// The world engine's bulk calls (detail::bulk_call): a call of small all_reduces carried as one
// request. It is agreed on in one exchange (every rank's cuts, merged), then issued batch by
// batch from its entries, each batch voted on for its CUDA graph as a planned call's batches are,
// and it is sealed, completed, settled and freed once.
#include <algorithm>

#include "world_engine_impl.hpp"

namespace atomr::cluster {

using detail::bulk_call;
using graph_step = detail::comm_backend::graph_step;
using namespace engine_detail;  // (coll_request and clock among them)

std::shared_ptr<bulk_call> world_engine::take_bulk() {
  std::shared_ptr<bulk_call> b;
  {
    std::lock_guard lock(spare_mutex_);
    if (spare_bulks_.empty()) return std::make_shared<bulk_call>();
    // One the progress thread emptied already, if any: emptying is that thread's idle work.
    auto it = std::find_if(spare_bulks_.begin(), spare_bulks_.end(), [](const auto& s) { return s->entries.empty(); });
    if (it == spare_bulks_.end()) it = spare_bulks_.end() - 1;
    b = std::move(*it);
    *it = std::move(spare_bulks_.back());
    spare_bulks_.pop_back();
  }
  b->reset();
  return b;
}

void world_engine::empty_spares() {
  if (!spares_full_.load(std::memory_order_acquire)) return;
  // One spare a turn: a call that comes meanwhile waits for no more than that (emptying eight
  // bulk calls' entries in one go is a sixth of this thread's samples in a profile of calls back
  // to back on an H200 with 16 vCPUs, in the idle moments in which the next call comes).
  std::shared_ptr<bulk_call> taken;
  {
    std::lock_guard lock(spare_mutex_);
    for (auto& b : spare_bulks_) {
      if (!b->entries.empty()) {
        taken = std::move(b);
        b = std::move(spare_bulks_.back());
        spare_bulks_.pop_back();
        break;
      }
    }
    if (!taken) {
      spares_full_.store(false, std::memory_order_release);
      return;
    }
  }
  taken->reset();
  std::lock_guard lock(spare_mutex_);
  if (spare_bulks_.size() < k_spare_bulks) spare_bulks_.push_back(std::move(taken));
}

std::uint64_t world_engine::last_seq(const coll_request& r) {
  return r.bulk ? r.seq + r.bulk->entries.size() - 1 : r.seq;
}

std::size_t world_engine::bulk_batch_length() const {
  const auto& b = *queue_.front()->bulk;
  std::size_t n = 1;
  while (b.issued + n < b.entries.size() && !b.cut_at(b.issued + n)) ++n;
  return n;
}

void world_engine::issue_bulk_batch(std::size_t n, std::optional<graph_decision> d) {
  auto& head = *queue_.front();
  auto& b = *head.bulk;
  const std::span<coll_request* const> batch(b.pointers.data() + b.issued, n);
  // The first batch waits for the call's inputs (start_issue found them ready); the later ones
  // run after it.
  auto& waits = scratch_waits_;
  if (b.issued == 0 && !head.no_waits) {
    (void)ready(head, waits);  // (it was ready before the agreement or vote: that cannot change)
  } else {
    // (Found ready with nothing to wait for before the agreement or vote, it stays so: a second
    // look at a bulk call's hundreds of write marks was a pass over their lines for nothing.)
    waits.resize(members_.size());
    for (auto& w : waits) w.clear();
  }
  if (head.traced && b.issued == 0) {
    head.stamp(trace_stage::inputs);
    head.trace->entries = static_cast<std::uint32_t>(b.entries.size());
    head.trace->progress_thread = this_thread_id();
    if (d) head.trace->graph = static_cast<std::int8_t>(d->step);
  }
  result<void> issued = ok();
  if (d) {
    issued = backend_->issue_packed_graph(batch, waits, d->step, d->id);
    if (issued && d->step == graph_step::capture) stats_.graph_captures.fetch_add(1, std::memory_order_release);
    if (issued && d->step == graph_step::launch) stats_.graph_launches.fetch_add(n, std::memory_order_release);
  } else {
    issued = backend_->issue_packed(batch, waits);
  }
  if (!issued) {
    auto r = std::move(queue_.front());
    queue_.pop_front();
    in_flight_.push_back(std::move(r));
    return fail_world(issued.error_value().with_context("issuing " + in_flight_.back()->describe()),
                      in_flight_.back().get());
  }
  stats_.issues.fetch_add(1, std::memory_order_release);
  stats_.packed.fetch_add(n, std::memory_order_release);
  b.batch_heads.push_back(batch.front());
  b.issued += n;
  if (b.issued < b.entries.size()) return;
  // All of it is issued: on a stream-ordered backend its last batch's completion is the call's.
  head.state = batch.back()->state;
  head.stamp(trace_stage::called);
  head.stamp(trace_stage::issued);
  auto r = std::move(queue_.front());
  queue_.pop_front();
  if (backend_->stream_ordered()) {
    unsealed_.push_back(r.get());
    for (const auto& t : r->writes) unsealed_writes_.emplace_back(t.block, t.seq);
    in_flight_.push_back(std::move(r));
    seal();  // (a call's worth of work: its completion is recorded at once)
  } else {
    in_flight_.push_back(std::move(r));
  }
}

result<bool> world_engine::test_request(coll_request& r) {
  if (!r.bulk || backend_->stream_ordered()) return backend_->test(r);
  auto& b = *r.bulk;
  while (b.finished_batches < b.batch_heads.size()) {
    ATOMR_ASSIGN_OR_RETURN(const bool done, backend_->test(*b.batch_heads[b.finished_batches]));
    if (!done) return false;
    ++b.finished_batches;
  }
  return true;
}

void world_engine::free_front(std::size_t budget) {
  while (budget > 0 && !retired_.empty()) {
    auto& r = *retired_.front();
    if (r.bulk && r.bulk->persistent) {
      --budget;  // (the prepared call keeps it; released when it completed or failed)
    } else if (r.bulk) {
      {
        std::lock_guard lock(spare_mutex_);
        if (spare_bulks_.size() < k_spare_bulks) {
          spare_bulks_.push_back(std::move(r.bulk));
          spares_full_.store(true, std::memory_order_release);
        }
      }
      if (r.bulk) {
        // No room: its entries (the call's buffers) are let go of a chunk at a time, from the back.
        auto& entries = r.bulk->entries;
        const auto k = std::min(budget, entries.size());
        entries.erase(entries.end() - static_cast<std::ptrdiff_t>(k), entries.end());
        budget -= k;
        if (!entries.empty()) return;
      } else {
        --budget;
      }
    } else {
      --budget;
    }
    retired_.pop_front();
  }
}

bool world_engine::start_bulk() {
  auto& head = *queue_.front();
  auto& b = *head.bulk;
  if (!b.agreed) {
    if (b.plan_length == 0 && control_size_ > 1) {
      // A later bulk call of its run: its cuts were agreed on with the run's first.
      if (!take_run_cuts(head)) return true;
      b.agreed = true;
      head.stamp(trace_stage::agreed);
    } else {
      // One agreement per run (where the rank is alone, each bulk call agrees with itself).
      stats_.agreements.fetch_add(1, std::memory_order_release);
      if (control_size_ > 1) return post_bulk_offer(head);
      b.agreed = true;  // nobody to agree with: its own cuts
    }
  }
  const auto n = bulk_batch_length();
  // The batch's first entry stands for it (the backends read its number and deadline, a graph
  // decision its number): numbered here rather than each entry at acceptance (see accept).
  auto& first = b.entries[b.issued];
  first.seq = head.seq + b.issued;
  first.deadline = head.deadline;
  first.together = head.together;
  // Where the backend does not run its work in order (the host backend), a batch after one that
  // touches the same buffer waits for the batches before it to finish.
  if (b.repeats && !backend_->stream_ordered()) {
    while (b.finished_batches < b.batch_heads.size()) {
      auto done = backend_->test(*b.batch_heads[b.finished_batches]);
      if (!done) {
        fail_world(done.error_value().with_context("waiting for " + head.describe()), &head);
        return true;
      }
      if (!*done) return false;
      ++b.finished_batches;
    }
  }
  // Its graph: voted on as a planned call's packed batch is (the same shapes on every rank).
  if (n > 1 && options_.pack_graphs && backend_->graph_packs()) {
    std::size_t total = 0;
    for (std::size_t i = 0; i < n; ++i) total += (b.entries[b.issued + i].bytes() + 15) / 16 * 16;
    if (total <= backend_->graph_limit()) {
      if (!graph_pacer_.skips(detail::graph_pacer::of_pack(detail::graph_pacer::of(first.spec, first.count), n))) {
        auto& batch = scratch_const_;
        batch.assign(b.pointers.begin() + static_cast<std::ptrdiff_t>(b.issued),
                     b.pointers.begin() + static_cast<std::ptrdiff_t>(b.issued + n));
        start_pack_vote(batch, b.persistent ? &b.key_of_batch(b.issued, n) : nullptr);
        return true;
      }
    }
  }
  issue_bulk_batch(n, std::nullopt);
  return true;
}

bool world_engine::post_bulk_offer(const coll_request& head) {
  const auto& b = *head.bulk;
  // One exchange for the run the bulk call begins: each rank's cuts (its own repeats differ),
  // merged.
  exchange_ = std::make_unique<exchange>();
  auto& s = exchange_->mine.head;
  s.seq = head.seq;
  s.count = b.plan_length;
  s.kind = static_cast<std::uint8_t>(coll_kind::all_reduce);
  s.type = static_cast<std::uint8_t>(head.spec.type);
  s.op = static_cast<std::uint8_t>(head.spec.params.op);
  s.offered = static_cast<std::int32_t>(b.plan_length);
  s.offered_most = s.offered;
  s.sorts = k_offer_bulk;
  std::copy(b.cuts.begin(), b.cuts.end(), exchange_->mine.cuts);
  exchange_->call = head.together;
  if (!post_exchange(*exchange_, &head)) exchange_.reset();
  return true;
}

bool world_engine::take_run_cuts(coll_request& head) {
  auto& b = *head.bulk;
  const auto length = b.entries.size();
  if (run_cuts_.left < length || run_cuts_.next_seq != head.seq) {
    fail_world(came_between_run(head), &head);
    return false;
  }
  b.cuts = {};
  for (std::size_t i = 0; i < length; ++i) {
    if (bit(run_cuts_.cuts.data(), run_cuts_.at + i)) b.set_cut(i);
  }
  b.set_cut(0);  // (every rank cuts there: a bulk call's batches are its own)
  run_cuts_.next_seq += length;
  run_cuts_.at += length;
  run_cuts_.left -= length;
  return true;
}

error world_engine::came_between_run(const coll_request& r) {
  return error(errc::invalid_argument,
               "request #" + std::to_string(r.seq) + " (" + r.describe() +
                   ") came between the bulk calls of a submit_group call whose batches the ranks had agreed on, "
                   "or where they expected another: submit to a world from one thread at a time, in the same order "
                   "on every rank");
}

error world_engine::mixed_call(const coll_request& head) {
  return error(errc::invalid_argument, "ranks made different calls: this rank made " + head.describe() +
                                           (head.bulk ? " (with submit_group), which met requests made one by one"
                                                      : ", which met a submit_group call of many small all_reduces") +
                                           " on another rank" + k_mixed_rule);
}

void world_engine::finish_bulk_exchange(exchange& ex) {
  auto& head = *queue_.front();
  auto& b = *head.bulk;
  const auto length = static_cast<std::int32_t>(b.plan_length);
  if (ex.merged.head.offered != length || ex.merged.head.offered_most != length) {
    const auto more = b.plan_length - b.entries.size();
    return fail_world(error(errc::invalid_argument,
                            "ranks made different calls: this rank made " + head.describe() +
                                (more > 0 ? " and " + std::to_string(more) + " more after it" : std::string()) +
                                ", which met a call of " + std::to_string(ex.merged.head.offered) + " to " +
                                std::to_string(ex.merged.head.offered_most) +
                                " requests on another rank (every rank must make the same calls, in the same order)"),
                      &head);
  }
  std::copy(ex.merged.cuts, ex.merged.cuts + b.cuts.size(), b.cuts.begin());
  // The rest of the run, for the bulk calls after this one (take_run_cuts).
  run_cuts_ = {};
  if (b.plan_length > b.entries.size()) {
    run_cuts_.next_seq = head.seq + b.entries.size();
    run_cuts_.at = b.entries.size();
    run_cuts_.left = b.plan_length - b.entries.size();
    std::copy(ex.merged.cuts, ex.merged.cuts + run_cuts_.cuts.size(), run_cuts_.cuts.begin());
  }
  b.agreed = true;
  head.stamp(trace_stage::agreed);
  (void)start_bulk();
}

}  // namespace atomr::cluster
