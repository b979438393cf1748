// The world engine's bulk calls (detail::bulk_call): a call of small all_reduces carried as one
// request. It is agreed on in one exchange (every rank's cuts, merged), then issued batch by
// batch from its entries, each batch voted on for its CUDA graph as a planned call's batches are,
// and it is sealed, completed, settled and freed once.
#include <algorithm>

#include "world_engine.hpp"

namespace atomr::cluster {

using detail::bulk_call;
using detail::coll_request;
using graph_step = detail::comm_backend::graph_step;

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
  // bulk calls' entries in one go was a sixth of this thread's samples in a profile of calls back
  // to back on the GPU machine, in the idle moments in which the next call came).
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

}  // namespace atomr::cluster
