// The world engine's completions: sealing issued work with its completion events (and
// publishing its writes), finding it finished, resolving futures and freeing requests.

#include <algorithm>
#include <limits>

#include "world_engine_impl.hpp"

namespace atomr::cluster {

using namespace engine_detail;  // (coll_request and clock among them)

bool world_engine::idle_poll_covers() const {
  return !in_flight_.empty() && in_flight_.size() <= k_idle_poll_most && unsealed_.front() == in_flight_.front().get();
}

bool world_engine::unsealed_covers(const local::buffer_block* b, std::uint64_t seq) const {
  return std::any_of(unsealed_writes_.begin(), unsealed_writes_.end(),
                     [&](const auto& w) { return w.first == b && w.second >= seq; });
}

namespace {
// A member's event of a seal, or none, by reference: each mark takes a reference of its own.
// (`m < events.size() ? events[m] : nullptr` made a temporary copy per buffer, two atomic
// operations more on the one line that all of a seal's marks share: a third of the seal's samples
// in a profile of prepared calls.)
const std::shared_ptr<void>& event_of(const std::vector<std::shared_ptr<void>>& events, std::size_t m) {
  static const std::shared_ptr<void> none;
  return m < events.size() ? events[m] : none;
}
}  // namespace

void world_engine::seal() {
  if (unsealed_.empty() || failure_) return;
  if (auto sealed = backend_->seal(unsealed_); !sealed) {
    const auto* culprit = unsealed_.back();
    unsealed_.clear();
    unsealed_writes_.clear();
    return fail_world(sealed.error_value().with_context("recording the completion of " + culprit->describe()), culprit);
  }
  // The requests of one seal share its events, and each buffer's mark keeps only its latest
  // write: publishing each buffer once, at its highest sequence number, says the same as
  // publishing every request's writes (64 locks a seal back to back on one buffer take 6-7 us on
  // two H200s, in which the device queue runs shorter).
  const auto& events = backend_->events(*unsealed_.front());
  auto& latest = scratch_latest_;
  latest.clear();
  // (Only the last few buffers are looked through: a packed batch of 1000 writes 1000 buffers.)
  constexpr std::size_t k_look_back = 4;
  for (const auto& w : unsealed_writes_) {
    const auto from = latest.size() > k_look_back ? latest.end() - k_look_back : latest.begin();
    auto it = std::find_if(from, latest.end(), [&](const auto& l) { return l.first == w.first; });
    if (it == latest.end()) {
      latest.push_back(w);
    } else if (w.second > it->second) {
      it->second = w.second;
    }
  }
  // (The member's stream asked once per run of buffers on it, not once per buffer: a virtual call.)
  std::size_t last_m = members_.size();
  const void* origin = nullptr;
  for (const auto& [block, seq] : latest) {
    const auto m = member_of(*block);
    if (m != last_m) origin = backend_->origin(last_m = m);
    block->write_enqueued(seq, event_of(events, m), origin);
  }
  for (auto* r : unsealed_) r->writes_published = true;
  unsealed_.clear();
  unsealed_writes_.clear();
}

void world_engine::publish_writes(coll_request& r, const std::vector<std::shared_ptr<void>>& events) {
  for (const auto& t : r.writes) {
    const auto m = member_of(*t.block);
    t.block->write_enqueued(t.seq, event_of(events, m), backend_->origin(m));
  }
  r.writes_published = true;
}

void world_engine::complete_finished(bool by_caller, bool poll_idle) {
  if (failure_) return;
  struct depth_noter {
    world_engine& e;
    ~depth_noter() { e.note_depth(); }
  } noted_on_exit{*this};
  // Finished requests are counted (one lock) before their futures resolve, so a caller that saw
  // its future also sees it in stats().
  std::size_t n = 0;
  std::optional<error> failed;
  // A waiting caller's request not sealed yet: if the device queues ran dry, everything in
  // flight is done (all of it resolves in this turn: at most a chunk is in flight then).
  if (poll_idle && !unsealed_.empty() && idle_poll_covers()) {
    if (auto idle = backend_->finish_if_idle(unsealed_); !idle) {
      failed = idle.error_value().with_context("waiting for " + in_flight_.front()->describe());
    } else if (*idle) {
      // Their writes are complete: published below without an event.
      unsealed_.clear();
      unsealed_writes_.clear();
    }
  }
  // (Requests submitted alone are fulfilled in this look, at most k_fulfil_most of them: back to
  // back, fulfilling hundreds in one go held up the issuing of the next ones.)
  std::size_t alone = 0;
  for (; !failed && n < in_flight_.size() && n < k_finish_most; ++n) {
    const bool is_alone = in_flight_[n]->together == 0;
    if (is_alone && alone == k_fulfil_most) break;
    const auto look_began = in_flight_[n]->traced ? clock::now().time_since_epoch().count() : 0;
    auto finished = test_request(*in_flight_[n]);
    if (look_began != 0) {
      slow_spans_.note(slow_phase::query, clock::now() - clock::time_point(clock::duration(look_began)));
    }
    if (!finished) {
      failed = finished.error_value().with_context("waiting for " + in_flight_[n]->describe());
      break;
    }
    if (!*finished) {
      if (auto& r = *in_flight_[n]; r.traced) {
        ++r.trace->looks;
        r.trace->last_look_ns = clock::now().time_since_epoch().count();
        const auto switches = this_thread_switches();
        r.trace->last_look_thread = this_thread_id();
        r.trace->last_look_switches[0] = switches[0];
        r.trace->last_look_switches[1] = switches[1];
      }
      break;
    }
    if (auto& r = *in_flight_[n]; r.traced) {
      r.trace->done_look_ns = look_began;
      if (r.trace->last_look_thread == this_thread_id()) {
        const auto switches = this_thread_switches();
        r.trace->voluntary_switches = static_cast<std::int32_t>(switches[0] - r.trace->last_look_switches[0]);
        r.trace->involuntary_switches = static_cast<std::int32_t>(switches[1] - r.trace->last_look_switches[1]);
      }
    }
    if (is_alone) ++alone;
  }
  last_alone_ = alone;
  if (n > 0 && by_caller) stats_.assisted.fetch_add(n, std::memory_order_release);
  if (n > 0) {
    std::size_t requests = 0;  // (a bulk call counts its entries)
    for (std::size_t i = 0; i < n; ++i) requests += in_flight_[i]->bulk ? in_flight_[i]->bulk->entries.size() : 1;
    stats_.requests.fetch_add(requests, std::memory_order_release);
  }
  // Requests submitted alone are fulfilled here. A per-request group's requests hear at once, by
  // the done mark; their futures are settled after (resolve_finished). Both are freed later
  // (free_retired).
  last_finished_ = n;
  bool marked = false;
  std::int64_t done_ns = 0;  // (one clock read for all found done in this look)
  for (std::size_t i = 0; i < n; ++i) {
    auto& r = *in_flight_[i];
    if (!r.writes_published) publish_writes(r, {});
    completed_seq_ = last_seq(r);
    // A prepared call's bulk call may be submitted again from here on (before its future hears).
    if (r.bulk) r.bulk->release();
    if (r.traced) {
      if (done_ns == 0) done_ns = coll_request::trace_now();
      r.stamp_at(trace_stage::done, done_ns);
      r.trace->done_thread = this_thread_id();
    }
    marked = marked || r.together != 0;
  }
  // (Sequentially consistent: see promise::set_done_mark.)
  if (marked) hook_->done_through.store(completed_seq_, std::memory_order_seq_cst);
  for (std::size_t i = 0; i < n; ++i) {
    auto& r = *in_flight_.front();
    if (r.together != 0) {
      resolving_.push_back(std::move(in_flight_.front()));
    } else {
      const auto fulfil_began = r.traced ? clock::now() : clock::time_point{};
      r.done.set_value();
      if (r.traced) {
        slow_spans_.note(slow_phase::fulfil, clock::now() - fulfil_began);
        r.stamp(trace_stage::resolved);
        request_trace::get().add(*r.trace);
      }
      retired_.push_back(std::move(in_flight_.front()));
    }
    in_flight_.pop_front();  // (a range erase costs ~400 instructions even when empty)
  }
  // A few are settled at once, as before the mark: one request at a time (a caller waiting for
  // each, or large requests back to back) gains nothing from waiting, and a caller settles its
  // own so that the progress thread need not be woken for it. A run of many is settled after,
  // by the progress thread (its turn's end), off the path of the next batch.
  if (by_caller || resolving_.size() <= k_caller_resolves) resolve_finished(k_caller_resolves);
  if (failed) fail_world(*failed, in_flight_.front().get());
}

void world_engine::resolve_finished(std::size_t most) {
  for (std::size_t i = 0; i < most && !resolving_.empty(); ++i) {
    auto& r = *resolving_.front();
    r.done.settle();
    if (r.bulk) r.bulk->settle_entries();
    if (r.traced) {
      r.stamp(trace_stage::resolved);
      request_trace::get().add(*r.trace);
    }
    retired_.push_back(std::move(resolving_.front()));
    resolving_.pop_front();
  }
}

void world_engine::free_retired(bool all) {
  if (retired_.empty()) return;
  // (Only here, before freeing: the lists grow within a turn, between two of these.)
  if (const auto unfreed = retired_.size() + resolving_.size();
      unfreed > stats_.most_unfreed.load(std::memory_order_relaxed)) {
    stats_.most_unfreed.store(unfreed, std::memory_order_release);
  }
  // A turn frees a chunk, and only a few requests while futures wait to be fulfilled (or after
  // a turn that fulfilled a whole chunk of requests submitted alone: more are finishing). Even
  // with nothing open it frees no more than a chunk: when the next per-request group's first part
  // comes while the progress thread frees the last call's 1000 requests in one go, it waits 120 us
  // to be taken (on one rank: the other waits as long for the plan). The loop turns until all are freed (see run()).
  // But never more than k_retired_most are kept: a rank that submits without a pause (calls of
  // 1000 back to back) left the engine no idle turn, and the list grew by hundreds a call (65 000
  // requests after 100 calls), their buffers held and every new request in fresh memory.
  // Oldest first: the buffers a caller dropped long ago are released first.
  const std::size_t policy = all                                                   ? retired_.size()
                             : !resolving_.empty() || last_alone_ == k_fulfil_most ? 8
                                                                                   : k_free_chunk;
  const std::size_t over = retired_.size() > k_retired_most ? retired_.size() - k_retired_most : 0;
  free_front(all ? std::numeric_limits<std::size_t>::max() : std::max(policy, over));
}

}  // namespace atomr::cluster
