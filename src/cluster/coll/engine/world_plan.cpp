// The world engine's plans: the exchanges in which ranks agree on how queued requests are
// batched and packed (offers merged by a reduction), when the latency window skips them, and
// issuing a per-request group planned whole.

#include <algorithm>

#include "atomr/cluster/mpi_check.hpp"
#include "world_engine_impl.hpp"

namespace atomr::cluster {

using namespace engine_detail;  // (coll_request and clock among them)

result<bool> world_engine::exchange_done(exchange& ex) {
  if (ex.finished) return true;
  if (ex.reduction) {
    ATOMR_ASSIGN_OR_RETURN(ex.finished, ex.reduction->progress());
    return ex.finished;
  }
  int done = 0;
  ATOMR_TRY(ATOMR_MPI_CHECK(MPI_Test(&ex.request, &done, MPI_STATUS_IGNORE)));
  ex.finished = done != 0;
  return ex.finished;
}

void world_engine::finish_background() {
  // (Each exchange in flight is advanced, not just the oldest: a later one's messages may be
  // waiting for it, see host_allreduce.)
  for (auto& ex : background_) {
    if (auto r = exchange_done(*ex); !r) {
      // (fail_world keeps the exchanges' buffers: MPI may still write into them.)
      return fail_world(r.error_value().with_context("agreeing on a packing plan across ranks"), nullptr);
    }
  }
  while (!background_.empty() && background_.front()->finished) {
    auto& ex = *background_.front();
    settle_merged(ex);
    if (ex.merged.head.sorts == (k_offer_requests | k_offer_bulk)) {
      // (This rank issued its request already: the world cannot go on.)
      return fail_world(error(errc::invalid_argument,
                              "ranks made different calls: request #" + std::to_string(ex.mine.head.seq) +
                                  " met a submit_group call of many small all_reduces on another rank" + k_mixed_rule),
                        nullptr);
    }
    if (ex.merged.head.offered == 1 && ex.merged.head.offered_most == 1) {
      // (Every rank finishes these exchanges, all of them in the background, in this order: all
      // count the same runs.)
      latency_window_.note_lone(ex.mine.head.seq);
    }
    background_.pop_front();
  }
}

// After a gather (check mode): the plan, merged here from every rank's offer.
void world_engine::settle_merged(exchange& ex) {
  if (ex.all.empty()) return;
  ex.merged = ex.all.front();
  int one = 1;
  for (std::size_t r = 1; r < ex.all.size(); ++r) merge_offers(&ex.all[r], &ex.merged, &one, nullptr);
}

std::optional<bool> world_engine::in_latency_window(std::uint64_t seq) const {
  if (!background_.empty() && background_.front()->mine.head.seq + detail::latency_window::k_lag <= seq)
    return std::nullopt;
  return latency_window_.covers(seq);
}

bool world_engine::post_exchange(exchange& ex, const coll_request* head) {
  ex.merged = ex.mine;
  const auto& merge = plan_reduction();
  auto posted = [&]() -> result<void> {
    if (options_.check || merge.op == MPI_OP_NULL) {
      ex.all.resize(static_cast<std::size_t>(control_size_));
      return ATOMR_MPI_CHECK(MPI_Iallgather(&ex.mine, sizeof(offer), MPI_BYTE, ex.all.data(), sizeof(offer), MPI_BYTE,
                                            control_, &ex.request));
    }
    const int tag = k_plan_tag + static_cast<int>(next_exchange_++ % k_plan_slots) * detail::host_allreduce::k_tag_span;
    ex.reduction = std::make_unique<detail::host_allreduce>(control_, control_rank_, control_size_, &ex.merged, 1,
                                                            merge.type, merge.op, tag, sizeof(offer));
    ATOMR_TRY(exchange_done(ex));  // (posts the first messages)
    return ok();
  }();
  if (auto r = posted; !r) {
    fail_world(r.error_value().with_context("comparing requests across ranks"), head);
    return false;
  }
  return true;
}

// Issues the next batch of the agreed plan (the head is ready). False where the plan is a
// call's, planned whole, and the batch waits for requests to be handed over or to be ready.
bool world_engine::issue_planned() {
  std::size_t n = 1;
  while (n < planned_.size() && planned_[n] == 0) ++n;
  if (planned_call_ != 0) {
    // (Parts handed over while this thread issued the ones before are taken at once, not after
    // its turn's looks at completions, settling and freeing: 200-500 us later in a timeline on
    // two H200s.)
    if (queue_.size() < n) take_inbox();
    if (queue_.size() < n) return false;
    for (std::size_t i = 0; i < n; ++i) {
      const auto& r = *queue_[i];
      if (r.together != planned_call_ || !packable(r)) {
        fail_world(error(errc::invalid_argument,
                         "request #" + std::to_string(r.seq) + " (" + r.describe() +
                             ") came between the parts of a per-request group whose packing the ranks had agreed on: " +
                             "submit to a world from one thread at a time, in the same order on every rank"),
                   &r);
        return true;
      }
      if (i > 0 && !ready(r, scratch_waits_)) return false;
    }
  }
  planned_.erase(planned_.begin(), planned_.begin() + static_cast<std::ptrdiff_t>(n));
  if (planned_.empty()) planned_call_ = 0;
  issue_batch(n);
  return true;
}

void world_engine::finish_exchange() {
  const auto ex = std::move(exchange_);
  const auto& head = *queue_.front();
  const auto& mine = ex->mine.head;
  if (options_.check) {
    for (std::size_t r = 0; r < ex->all.size(); ++r) {
      const auto& theirs = ex->all[r].head;
      if (point_to_point(mine) && point_to_point(theirs)) continue;
      if (same_request(mine, theirs)) continue;
      return fail_world(
          error(errc::invalid_argument, "ranks issued different collectives: this rank issued " + describe(mine) +
                                            ", rank " + std::to_string(r) + " issued " + describe(theirs)),
          &head);
    }
  }
  settle_merged(*ex);
  if (ex->merged.head.sorts == (k_offer_requests | k_offer_bulk)) return fail_world(mixed_call(head), &head);
  if (head.bulk) return finish_bulk_exchange(*ex);
  if (!packable(head)) return issue_batch(ex->batch);
  const std::int32_t agreed = ex->merged.head.offered;
  const auto n = static_cast<std::size_t>(std::clamp<std::int32_t>(agreed, 1, static_cast<std::int32_t>(k_plan_most)));
  if (queue_.front()->traced) {
    const auto now = coll_request::trace_now();
    for (std::size_t i = 0; i < n && i < queue_.size(); ++i) queue_[i]->stamp_at(trace_stage::agreed, now);
  }
  for (std::size_t i = 0; i < n; ++i) {
    bool cut = i == 0;
    cut = cut || bit(ex->merged.cuts, i);
    planned_.push_back(cut ? 1 : 0);
  }
  planned_call_ = ex->call;
  (void)issue_planned();
}

}  // namespace atomr::cluster
