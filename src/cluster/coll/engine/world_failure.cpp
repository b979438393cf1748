// The world engine's failures: the watchdog's health check, telling the other ranks, their
// notices, and failing the world (every open request, with the culprit named).

#include <algorithm>
#include <cstring>

#include "atomr/cluster/liveness.hpp"
#include "atomr/common/log.hpp"
#include "world_engine_impl.hpp"

namespace atomr::cluster {

using namespace engine_detail;  // (coll_request and clock among them)

void world_engine::fail_from_outside(error e, bool may_keep) {
  {
    std::lock_guard lock(mutex_);
    if (failure_) return;  // failed already: nothing more to fail (and the thread must stay free to stop)
    if (!outside_failure_) {
      outside_failure_ = std::move(e);
      outside_may_keep_ = may_keep;
    }
    outside_flag_.store(true, std::memory_order_release);
  }
  wake_.notify_one();
}

void world_engine::check_health() {
  if (failure_) return;
  // Deadlines and NCCL's error state need not be read on every turn of a busy loop: every
  // 100 us is soon enough for a watchdog and keeps those calls off each request's path.
  const auto now = clock::now();
  if (now - last_health_ < std::chrono::microseconds(100) && !outside_flag_.load(std::memory_order_acquire)) return;
  last_health_ = now;
  poll_notices();
  if (peer_failure_) {
    // The failed rank finished everything up to its last completed request: so can this one.
    const bool behind = (!in_flight_.empty() && in_flight_.front()->seq <= peer_failure_->first) ||
                        (!queue_.empty() && queue_.front()->seq <= peer_failure_->first);
    if (!behind) return fail_world(peer_failure_->second, nullptr, false);
  }
  {
    std::unique_lock lock(mutex_);
    if (outside_failure_) {
      auto e = std::move(*outside_failure_);
      const bool may_keep = outside_may_keep_;
      outside_failure_.reset();
      outside_flag_.store(false, std::memory_order_release);
      lock.unlock();
      return fail_world(e, nullptr, true, may_keep);
    }
  }
  if (auto e = backend_->async_error()) return fail_world(*e, in_flight_.empty() ? nullptr : in_flight_.front().get());
  const coll_request* oldest = !in_flight_.empty() ? in_flight_.front().get()
                               : !queue_.empty()   ? queue_.front().get()
                                                   : nullptr;
  if (oldest == nullptr || now < oldest->deadline) return;
  std::string ranks = "ranks 0-" + std::to_string(backend_->size() - 1);
  if (oldest->spec.kind == coll_kind::send || oldest->spec.kind == coll_kind::recv) {
    ranks = "ranks " + std::to_string(backend_->rank(0)) + " and " + std::to_string(oldest->spec.params.root);
  }
  fail_world(error(errc::timeout, oldest->describe() + " on " + ranks + " did not finish within " +
                                      std::to_string(options_.op_timeout.count()) +
                                      " ms (a rank did not join it, or is stuck); the communicator was aborted"),
             oldest);
}

namespace {
constexpr int k_notice_tag = 0x41544e;         // "ATN": failure notices on the control communicator
constexpr int k_notice_max_bytes = 64 * 1024;  // a notice is an id and an error message
}  // namespace

void world_engine::tell_peers(const error& cause) {
  int me = 0;
  int size = 0;
  if (MPI_Comm_rank(control_, &me) != MPI_SUCCESS || MPI_Comm_size(control_, &size) != MPI_SUCCESS) return;
  // id, the last request this rank completed, then the cause.
  constexpr std::size_t head = 2 * sizeof(std::uint64_t);
  const std::string text = cause.describe().substr(0, k_notice_max_bytes - head);
  auto bytes = std::make_unique<std::vector<char>>(head + text.size());
  std::memcpy(bytes->data(), &id_, sizeof(id_));
  std::memcpy(bytes->data() + sizeof(id_), &completed_seq_, sizeof(completed_seq_));
  std::memcpy(bytes->data() + head, text.data(), text.size());
  for (int peer = 0; peer < size; ++peer) {
    if (peer == me) continue;
    MPI_Request q = MPI_REQUEST_NULL;
    // Best effort: a rank that cannot be told still fails by its own deadline.
    if (MPI_Isend(bytes->data(), static_cast<int>(bytes->size()), MPI_BYTE, peer, k_notice_tag, control_, &q) ==
        MPI_SUCCESS) {
      notice_requests_.push_back(q);
    }
  }
  notices_.push_back(std::move(bytes));  // one buffer serves every send
}

void world_engine::poll_notices() {
  const auto now = clock::now();
  if (now - last_probe_ < std::chrono::milliseconds(1)) return;
  last_probe_ = now;
  while (!failure_ && !peer_failure_) {
    int found = 0;
    MPI_Status status;
    if (MPI_Iprobe(MPI_ANY_SOURCE, k_notice_tag, control_, &found, &status) != MPI_SUCCESS || !found) return;
    int count = 0;
    MPI_Get_count(&status, MPI_BYTE, &count);
    std::vector<char> bytes(static_cast<std::size_t>(std::clamp(count, 0, k_notice_max_bytes)));
    if (MPI_Recv(bytes.data(), static_cast<int>(bytes.size()), MPI_BYTE, status.MPI_SOURCE, k_notice_tag, control_,
                 MPI_STATUS_IGNORE) != MPI_SUCCESS) {
      return;
    }
    std::uint64_t id = 0;
    std::uint64_t completed = 0;
    if (bytes.size() < sizeof(id) + sizeof(completed)) continue;
    std::memcpy(&id, bytes.data(), sizeof(id));
    std::memcpy(&completed, bytes.data() + sizeof(id), sizeof(completed));
    if (id != id_) continue;  // meant for an earlier world on a reused communicator
    const std::string text(bytes.begin() + sizeof(id) + sizeof(completed), bytes.end());
    peer_failure_.emplace(completed, error(errc::aborted, "rank " + std::to_string(status.MPI_SOURCE) +
                                                              " of this world failed: " + text));
  }
}

void world_engine::fail_world(error cause, const coll_request* culprit, bool tell, bool may_keep) {
  log::get("cluster")->error("collectives failed: {}", cause.describe());
  note_fatal_failure(cause.describe());
  if (keep_on_failure_ && may_keep) {
    // Its unfinished work stays on the devices until world::shrink() (ncclCommShrink with
    // NCCL_SHRINK_ABORT ends it) or the world's end (an abort).
    kept_.store(true, std::memory_order_release);
  } else {
    backend_->abort();
  }
  if (tell) tell_peers(cause);
  {
    std::lock_guard lock(mutex_);
    failure_ = cause;
    // An outside failure not yet taken (a liveness notice that came with a peer's) is this one now:
    // left set, it would keep the progress thread from ever stopping.
    outside_failure_.reset();
    outside_flag_.store(false, std::memory_order_release);
    // Anything submitted meanwhile fails too.
    while (!inbox_.empty()) {
      queue_.push_back(std::move(inbox_.front()));
      inbox_.pop_front();
    }
    inbox_flag_.store(false, std::memory_order_relaxed);
  }
  // An exchange MPI may still write into keeps its buffers (a failed world's requests are left to
  // MPI, as the destructor leaves its communicator).
  if (exchange_) (void)exchange_.release();
  if (graph_vote_) (void)graph_vote_.release();
  if (vote_shm_) vote_shm_->abandon();  // (the vote it held is the one let go of above)
  graph_decided_.reset();
  graph_voted_ = false;
  for (auto& ex : background_) (void)ex.release();
  background_.clear();
  latency_window_.reset();
  planned_.clear();
  planned_call_ = 0;
  run_cuts_ = {};
  unsealed_.clear();  // (their writes are published below, with the failure)
  unsealed_writes_.clear();
  // What finished before the failure finished with success (the done mark says so already).
  resolve_finished(resolving_.size());
  auto fail = [&](std::deque<std::unique_ptr<coll_request>>& list) {
    for (auto& r : list) {
      if (!r->writes_published) publish_writes(*r, {});
      if (r.get() == culprit) {
        r->done.set_error(cause);
      } else {
        r->done.set_error(error(errc::aborted, r->describe() + " was aborted: " + cause.message()));
      }
      if (r->bulk) {
        r->bulk->fail_entries([&](const coll_request& e) {
          return r.get() == culprit ? cause
                                    : error(errc::aborted, e.describe() + " (of " + r->describe() +
                                                               ") was aborted: " + cause.message());
        });
      }
    }
    list.clear();
  };
  fail(in_flight_);
  fail(queue_);
}

}  // namespace atomr::cluster
