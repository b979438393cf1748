// How requests reach the world engine: numbered and accepted under the lock, then issued by
// the caller itself where the progress thread is not issuing, or left for it.

#include <algorithm>

#include "world_engine_impl.hpp"

namespace atomr::cluster {

using namespace engine_detail;  // (coll_request and clock among them)

// Under mutex_: numbers the request and hands it to the progress thread (or fails it at once).
void world_engine::accept(std::unique_ptr<coll_request> r, clock::time_point deadline, std::uint64_t together) {
  if (failure_) {
    const error failed(errc::aborted, "the world failed earlier: " + failure_->message());
    r->done.set_error(failed);
    if (r->bulk) r->bulk->fail_entries([&](const coll_request&) { return failed; });
    return;
  }
  r->seq = next_seq_;
  next_seq_ += r->bulk ? r->bulk->entries.size() : 1;  // (a bulk call: one number per entry)
  // A per-request group's requests are announced by the done mark (see resolving_); a request
  // submitted alone is fulfilled as it finishes.
  if (together != 0) r->done.set_done_mark(&hook_->done_through, last_seq(*r));
  r->deadline = deadline;
  r->together = together;
  // A bulk call's entries with futures (a per-request group's) are numbered here, for their done
  // marks. The others (a submit_group or prepared call's) are not looked at one by one: each
  // batch's first entry, which stands for its batch, is numbered as the batch starts
  // (world_engine::start_bulk). (Three fields written into each of 1000 entries, on lines the
  // progress thread had read since the last call, were 8 % of the caller's samples of prepared
  // calls at one rank.)
  if (r->bulk && !r->bulk->entries.front().done.empty()) {
    std::uint64_t seq = r->seq;
    for (auto& e : r->bulk->entries) {
      e.seq = seq++;
      e.deadline = deadline;
      e.together = together;
      e.done.set_done_mark(&hook_->done_through, e.seq);
    }
  }
  if (request_trace::get().on()) {
    r->traced = true;
    r->trace = std::make_unique<traced_request>();
    r->trace->seq = r->seq;
    r->trace->bytes = r->bytes();
    r->trace->kind = r->spec.kind;
    r->trace->caller_thread = this_thread_id();
    r->stamp(trace_stage::submitted);
  }
  if (accept_direct_) {
    r->stamp(trace_stage::taken);
    enqueue(std::move(r));
    return;
  }
  inbox_.push_back(std::move(r));
  inbox_flag_.store(true, std::memory_order_release);
}

// Callers issue themselves when the progress thread is not issuing (the common case for a
// caller that waits for each request): that saves the hand-off and a turn of the progress loop.
// Otherwise the requests wait in the inbox for the progress thread. Neither side ever blocks on
// issue_mutex_ (both try it), so an unlock never has a sleeper to wake.
template <typename Accept>
void world_engine::hand_over(Accept&& accept_all, bool more_coming) {
  // A busy engine (an agreement out, requests queued or the packing window full) has nothing
  // for this caller to issue at once, and each look costs MPI progress calls (0.5-1 us each on an
  // H100 with 16 vCPUs): a burst of 1000 small all_reduces takes 1.2-1.9 ms to submit that way,
  // and holds the lock the progress thread needs to finish the agreements. Leave it to that thread.
  std::unique_lock issuing(issue_mutex_, std::defer_lock);
  if (!deep_.load(std::memory_order_relaxed) && issuing.try_lock() && busy_for_callers()) {
    note_depth();
    issuing.unlock();
  }
  {
    std::lock_guard lock(mutex_);
    // A caller that issues them itself queues them at once: no trip through the inbox, whose
    // flag the progress thread reads while it spins.
    if (issuing.owns_lock()) take_inbox_locked();  // (earlier callers' requests go first)
    accept_direct_ = issuing.owns_lock();
    accept_all();
    accept_direct_ = false;
  }
  if (issuing.owns_lock() && more_coming) {
    // A part of a long per-request group with more to come (the engine was idle: its first part).
    // The caller only posts its plan's offer and goes back to making the next part: the
    // progress thread finishes the agreement and issues the part, and nothing keeps it off the
    // issue lock (the caller does not poll meanwhile). Issuing here, the caller of one rank
    // spent about 80 us on the agreement and the pack's NCCL call before it went on, and the
    // other rank waited for its next part in every later agreement.
    finish_background();
    if (!failure_ && !exchange_ && !graph_vote_ && !queue_.empty()) start_issue();
    note_depth();
    {
      std::lock_guard lock(mutex_);
      kick_.store(true, std::memory_order_release);
    }
    issuing.unlock();
  } else if (issuing.owns_lock()) {
    // The caller polls for this request next (its future's wait): keep the progress thread off
    // the issue lock meanwhile, rather than have the two take turns on it.
    if (assist_hook_) assisted_.mark();
    // What it issues is sealed later: by its own wait (assist, which instead asks whether the
    // streams ran dry where that covers it), by the progress thread's next turn (at most 100 us
    // on, the watchdog's), or at the 64th request, whichever comes first. Back to back, a seal
    // after every request put one cudaEventRecord per NCCL call on the caller's path, which the
    // NCCL call itself already paces.
    issue_ready(!assist_hook_);
    // A caller that polls its futures (assist) finishes what completed at once: else the
    // progress thread often took the lock first and the caller's poll waited for its turn (the
    // "done" stage: 1.6-1.8 us per 8 B all_reduce at one rank on an H100 with 16 vCPUs, where
    // nothing is waited for).
    if (assist_hook_) complete_finished(true);
    // The progress thread polls what is left (and is the watchdog for it). What finished here
    // needs nothing from it: kicking it anyway had it take the locks this caller takes next.
    if (!has_work()) return free_retired(true);  // (all of them: nothing is open)
    // Only the progress thread clears the kick, and only holding issue_mutex_ (as this caller
    // does now): one already set stays set until that thread has looked.
    if (kick_.load(std::memory_order_acquire)) return;
    {
      std::lock_guard lock(mutex_);
      kick_.store(true, std::memory_order_release);
    }
  }
  wake_.notify_one();
}

future<void> world_engine::submit(std::unique_ptr<coll_request> r) {
  if (assist_hook_) r->done.set_progress_hook(assist_hook_);
  auto out = r->done.get_future();
  hand_over([&] { accept(std::move(r), clock::now() + options_.op_timeout, 0); });
  return out;
}

std::vector<future<void>> world_engine::submit_all(std::vector<std::unique_ptr<coll_request>> rs,
                                                   std::uint64_t together, bool more_coming) {
  std::vector<future<void>> out;
  out.reserve(rs.size());
  hand_over(
      [&] {
        const auto deadline = clock::now() + options_.op_timeout;
        for (auto& r : rs) {
          // (A submit_group call's requests have no future of their own, but its last.)
          if (!r->done.empty()) {
            if (assist_hook_) r->done.set_progress_hook(assist_hook_);
            out.push_back(r->done.get_future());
          }
          accept(std::move(r), deadline, together);
        }
      },
      more_coming);
  return out;
}

std::vector<future<void>> world_engine::submit_bulk(std::unique_ptr<coll_request> carrier, std::uint64_t together,
                                                    bool more_coming) {
  std::vector<future<void>> out;
  auto& entries = carrier->bulk->entries;
  out.reserve(entries.size() + 1);
  for (auto& e : entries) {
    if (e.done.empty()) continue;
    if (assist_hook_) e.done.set_progress_hook(assist_hook_);
    out.push_back(e.done.get_future());
  }
  if (!carrier->done.empty()) {
    if (assist_hook_) carrier->done.set_progress_hook(assist_hook_);
    out.push_back(carrier->done.get_future());
  }
  if (more_coming) {
    // The caller goes back to making the call's next bulk call at once: the progress thread
    // agrees on and issues this one meanwhile. (Issued by the caller wherever the engine was not
    // deep yet, a call's bulk calls were all issued on the caller's path: 280-300 us before a
    // call of 1000 x 2 KiB returned at one rank on an H200 with 16 vCPUs, of 290-335 us in all.)
    {
      std::lock_guard lock(mutex_);
      accept(std::move(carrier), clock::now() + options_.op_timeout, together);
    }
    wake_.notify_one();
    return out;
  }
  hand_over([&] { accept(std::move(carrier), clock::now() + options_.op_timeout, together); });
  return out;
}

}  // namespace atomr::cluster
