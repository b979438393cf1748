#include "atomr/cluster/engine/world_engine.hpp"

#include <fmt/ranges.h>

#include <algorithm>
#include <cstring>
#include <fstream>

#include "atomr/cluster/coll/tunables.hpp"
#include "atomr/cluster/liveness.hpp"
#include "atomr/cluster/liveness/tunables.hpp"
#include "atomr/cluster/mpi_check.hpp"
#include "atomr/common/log.hpp"
#include "atomr/common/spin.hpp"
#include "atomr/local/topology/irq_cpus.hpp"
#include "world_engine_impl.hpp"

namespace atomr::cluster {

using namespace engine_detail;  // (coll_request and clock among them)

void* detail::coll_request::operator new(std::size_t bytes) {
  return bytes == sizeof(coll_request) ? recycled_storage<sizeof(coll_request)>::take() : ::operator new(bytes);
}

void detail::coll_request::operator delete(void* p, std::size_t bytes) noexcept {
  if (bytes == sizeof(coll_request)) return recycled_storage<sizeof(coll_request)>::give(p);
  ::operator delete(p);
}

std::string detail::coll_request::describe() const {
  if (bulk) {
    return "a call of " + std::to_string(bulk->entries.size()) + " all_reduces (#" + std::to_string(seq) + "-#" +
           std::to_string(seq + bulk->entries.size() - 1) + ", " + std::string(local::to_string(spec.type)) + ", " +
           std::string(to_string(spec.params.op)) + ")";
  }
  std::string out = std::string(to_string(spec.kind)) + " #" + std::to_string(seq);
  if (spec.kind == coll_kind::barrier) return out;
  out += " (" + std::to_string(count) + " x " + std::string(local::to_string(spec.type));
  if (reduces(spec.kind)) out += ", " + std::string(to_string(spec.params.op));
  if (spec.kind == coll_kind::broadcast || spec.kind == coll_kind::reduce) {
    out += ", root " + std::to_string(spec.params.root);
  }
  if (spec.kind == coll_kind::send || spec.kind == coll_kind::recv) {
    out += ", peer " + std::to_string(spec.params.root);
  }
  return out + ")";
}

namespace {
// The hooks of every world so far, never freed (see the constructor), and listed so that a leak
// checker sees them reachable.
std::mutex kept_hooks_mutex;
std::vector<std::unique_ptr<local::progress_hook>>* kept_hooks = nullptr;
}  // namespace

world_engine::assist_hook* world_engine::keep_forever(world_engine* e) {
  auto hook = std::make_unique<assist_hook>(e);
  auto* raw = hook.get();
  std::lock_guard lock(kept_hooks_mutex);
  if (kept_hooks == nullptr) kept_hooks = new std::vector<std::unique_ptr<local::progress_hook>>();
  kept_hooks->push_back(std::move(hook));
  return raw;
}

void world_engine::assist() {
  assisted_.mark();
  std::unique_lock issuing(issue_mutex_, std::try_to_lock);
  if (!issuing.owns_lock()) return;
  const bool tracing = request_trace::get().on();
  const auto began = tracing ? clock::now() : clock::time_point{};
  struct noter {
    world_engine& e;
    bool on;
    clock::time_point began;
    ~noter() {
      if (on) e.slow_spans_.note(slow_phase::assist, clock::now() - began);
    }
  } noted{*this, tracing, began};
  const bool took = take_inbox();
  // No seal where the waiting caller can ask whether the device queues ran dry instead
  // (idle_poll_covers). Anything else is sealed now: the progress thread keeps off the issue
  // lock while a caller assists, and a packed batch's futures would wait for its watchdog's turn.
  issue_ready(false);
  if (!unsealed_.empty() && !idle_poll_covers()) seal();
  complete_finished(true, true);
  issue_released();
  // The progress thread keeps off while callers assist, and callers that wait on call after
  // call kept it off long enough for thousands of finished requests to pile up (settled by the
  // done mark, unfreed): past the bound, the assisting caller settles and frees the excess itself.
  if (resolving_.size() + retired_.size() > k_retired_most) {
    resolve_finished(resolving_.size());
    free_retired(false);
  }
  // Requests this caller took from the inbox are the progress thread's to watch as well: it may
  // have gone to sleep for its 100 ms (nothing open, the inbox empty) just after this caller
  // emptied the inbox, and a caller whose own wait gives up spinning sleeps too; then nobody
  // polled the requests until that sleep ended.
  if ((took && has_open()) || !resolving_.empty()) {
    if (!kick_.load(std::memory_order_acquire)) {
      std::lock_guard lock(mutex_);
      kick_.store(true, std::memory_order_release);
    }
    wake_.notify_one();
  }
}

result<std::unique_ptr<detail::shm_reducer>> world_engine::open_vote_channel(MPI_Comm parent, MPI_Comm control,
                                                                             bool votes, clock::time_point deadline) {
  ATOMR_ASSIGN_OR_RETURN(const auto wanted, tunable_int(tunables::coll_vote_shm));
  int size = 1;
  int rank = 0;
  ATOMR_TRY(ATOMR_MPI_CHECK(MPI_Comm_size(control, &size)));
  ATOMR_TRY(ATOMR_MPI_CHECK(MPI_Comm_rank(control, &rank)));
  // A vote is at most a kilobyte, one at a time: the least ring there is will do. (Every rank
  // takes part, wanted or not: it is no rank's unless all want it.)
  constexpr std::size_t k_vote_ring = 65536;
  return detail::shm_reducer::open(
      parent, control, rank, size, k_vote_ring, deadline,
      {.user = "the world's CUDA graph votes", .direct = false, .wanted = votes && wanted != 0});
}

world_engine::world_engine(MPI_Comm control, std::unique_ptr<detail::comm_backend> backend,
                           std::vector<local::device> members, world_options options, std::uint64_t id,
                           std::unique_ptr<detail::shm_reducer> votes)
    : control_(control), backend_(std::move(backend)), members_(std::move(members)), options_(options), id_(id) {
  vote_shm_ = std::move(votes);
  if (MPI_Comm_size(control_, &control_size_) != MPI_SUCCESS) control_size_ = backend_->size();
  if (MPI_Comm_rank(control_, &control_rank_) != MPI_SUCCESS) control_rank_ = 0;
  for (const auto& m : members_) {
    watches_.push_back(m.state()->watch([this, device = m.index()](std::uint64_t generation) {
      fail_from_outside(
          error(errc::aborted, "device " + std::to_string(device) + " was rebuilt (generation " +
                                   std::to_string(generation) + "); every rank must create the world again"),
          false);
    }));
  }
  clear_fatal_failure();  // the program goes on with a new world: an earlier world's failure is behind it
  // A program that goes on after a failure shrinks the world: keep what ncclCommShrink needs.
  keep_on_failure_ = tunable_value(tunables::on_failure) == "continue" && backend_->can_shrink();
  if (auto ranks = world_ranks_of(control_)) world_ranks_ = std::move(ranks).value();
  failure_listener_ = add_failure_listener([this](int rank, const std::string& text) {
    if (std::find(world_ranks_.begin(), world_ranks_.end(), rank) == world_ranks_.end()) return;
    fail_from_outside(error(errc::unavailable, text + " (a rank of this world; world::shrink() makes a world of the "
                                                      "living ranks)"));
  });
  // The hook outlives every future that may call it or read its done mark, so it is never freed
  // (a few dozen bytes per world, inert once detached), and the futures hold it without an owner:
  // a shared owner's count went up on the caller's thread and down on the progress thread (which
  // frees the requests) for every request, a cache line the two threads pulled back and forth.
  hook_ = keep_forever(this);
  if (detail::wait_assist_enabled()) assist_hook_ = std::shared_ptr<assist_hook>(std::shared_ptr<assist_hook>(), hook_);
  irq_cpus_ = gpu_interrupt_cpus();
  if (!irq_cpus_.empty()) {
    const auto taken = local::avoid_cpus(irq_cpus_);
    log::get("cluster")->debug(
        "GPU interrupts go to cpus {}; the world's threads keep off them (the creating thread: {})",
        fmt::join(irq_cpus_, ","), taken.empty() ? "none" : fmt::format("{}", fmt::join(taken, ",")));
  }
  thread_ = std::thread([this] {
    (void)local::avoid_cpus(irq_cpus_);
    run();
  });
}

std::vector<int> world_engine::gpu_interrupt_cpus() const {
  if (std::none_of(members_.begin(), members_.end(),
                   [](const local::device& m) { return m.kind() == local::device_kind::cuda; })) {
    return {};
  }
  return local::cpus_to_avoid();
}

world_engine::~world_engine() {
  hook_->detach();                             // futures that outlive the world stop calling in
  remove_failure_listener(failure_listener_);  // (waits for a listener call under way)
  {
    std::lock_guard lock(mutex_);
    stopping_ = true;
  }
  wake_.notify_all();
  thread_.join();
  for (std::size_t i = 0; i < members_.size(); ++i) members_[i].state()->unwatch(watches_[i]);
  // Notices MPI has not finished sending keep their bytes: they must outlive the sends.
  bool unfinished = false;
  for (auto& q : notice_requests_) {
    int done = 0;
    if (MPI_Test(&q, &done, MPI_STATUS_IGNORE) != MPI_SUCCESS || !done) {
      MPI_Request_free(&q);
      unfinished = true;
    }
  }
  if (unfinished) {
    for (auto& n : notices_) (void)n.release();
  }
  write_trace();
  if (request_trace::get().on()) {
    log::get("cluster")->info("progress spans over {} us (count/longest us): {}",
                              std::chrono::duration_cast<std::chrono::microseconds>(detail::k_slow_span).count(),
                              slow_spans_.describe());
  }
  // Kept for a shrink that did not come: end its unfinished work now.
  if (kept_.load(std::memory_order_acquire)) backend_->abort();
  if (failure_) {
    // A request may still be open on the aborted communicators; MPI must not free them under it.
    return;
  }
  if (control_ != MPI_COMM_NULL) MPI_Comm_free(&control_);
}

void world_engine::write_trace() const {
  if (!request_trace::get().on()) return;
  int rank = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  const auto path = request_trace::path_for_rank(rank);
  if (path.empty()) return;
  if (auto r = request_trace::get().write_json(path, rank); !r) {
    log::get("cluster")->warn("request timeline: {}", r.error_value().describe());
  } else {
    log::get("cluster")->debug("request timeline written to {}", path);
  }
  std::ofstream spans(path + ".spans");
  std::lock_guard lock(slow_spans_.kept_mutex);
  for (const auto& k : slow_spans_.kept) {
    spans << k.thread << ' ' << detail::slow_span_counts::names[static_cast<std::size_t>(k.phase)] << ' ' << k.start_ns
          << ' ' << k.ns << '\n';
  }
}

std::optional<error> world_engine::failure() const {
  std::lock_guard lock(mutex_);
  return failure_;
}

world_stats world_engine::stats() const {
  world_stats s;
  s.requests = stats_.requests.load(std::memory_order_acquire);
  s.issues = stats_.issues.load(std::memory_order_acquire);
  s.packed = stats_.packed.load(std::memory_order_acquire);
  s.grouped = stats_.grouped.load(std::memory_order_acquire);
  s.agreements = stats_.agreements.load(std::memory_order_acquire);
  s.assisted = stats_.assisted.load(std::memory_order_acquire);
  s.graph_votes = stats_.graph_votes.load(std::memory_order_acquire);
  s.graph_votes_shared_memory = stats_.graph_votes_shared.load(std::memory_order_acquire);
  s.graph_captures = stats_.graph_captures.load(std::memory_order_acquire);
  s.graph_launches = stats_.graph_launches.load(std::memory_order_acquire);
  s.graph_chained = stats_.graph_chained.load(std::memory_order_acquire);
  s.shared_memory = backend_->shared_memory_reductions();
  s.shared_memory_direct = backend_->shared_memory_direct();
  s.most_unfreed = stats_.most_unfreed.load(std::memory_order_acquire);
  s.group_repeats = group_cache_.repeats();
  s.group_repeats_by_buffers = group_cache_.repeats_by_buffers();
  return s;
}

result<void> world_engine::when_idle(std::function<result<void>()> f) {
  promise<void> p;
  auto done = p.get_future();
  {
    std::lock_guard lock(mutex_);
    if (failure_) return error(errc::aborted, "the world failed earlier: " + failure_->message());
    idle_tasks_.push_back(
        [f = std::move(f), p = std::make_shared<promise<void>>(std::move(p))] { p->set_result(f()); });
  }
  wake_.notify_one();
  return done.get();
}

void world_engine::run() {
  // While requests are in flight the thread polls without sleeping for a while: MPI's
  // nonblocking collectives only advance inside MPI_Test, and NCCL's small operations finish
  // within microseconds. After 2 ms without any change it backs off to at most 50 us between
  // polls (long NCCL operations). With nothing pending it keeps looking at its flags for
  // k_idle_spin before it sleeps: a caller that waits for each request submits the next one
  // within microseconds, and a wake-up from sleep would cost it tens of them.
  constexpr auto k_idle_spin = std::chrono::microseconds(500);
  auto last_change = clock::now();
  const spin_relax relax;
  bool busy = false;               // as the last turn left it
  bool stop_seen = false;          // stopping_ was seen before the last turn began
  auto last_expiry = last_change;  // when the kept submit_group calls were last looked at
  auto flagged = [&] {
    return inbox_flag_.load(std::memory_order_acquire) || outside_flag_.load(std::memory_order_acquire) ||
           kick_.load(std::memory_order_acquire);
  };
  // The spins below look at the clock (and at the caller's assist stamp, a line the caller
  // writes) only every k_looks turns: looking every turn, this thread spends half its time in
  // clock reads and in allocating a task list per turn (a profile on an H100 with 16 vCPUs), on
  // cores the callers need.
  constexpr unsigned k_looks = 32;
  std::vector<std::function<void()>> tasks;
  // ATOMR_TRACE: where the loop's time goes, in spans over k_slow_span (see slow_spans_).
  clock::time_point span_start{};
  clock::time_point missed_since{};  // the issue lock was missed in every turn since
  bool tracing = false;
  auto span = [&](slow_phase p) {
    if (!tracing) return;
    const auto t = clock::now();
    slow_spans_.note(p, t - span_start);
    span_start = t;
  };
  while (true) {
    tasks.clear();
    tracing = request_trace::get().on();
    if (tracing) span_start = clock::now();
    if (!busy && !flagged()) {
      const auto until = last_change + k_idle_spin;
      for (unsigned i = 1; !flagged() && ((i % k_looks) != 0 || clock::now() < until); ++i) relax();
    }
    span(slow_phase::idle_spin);
    auto now = clock::now();
    // A caller is polling for its own request (assist): leave the issue lock and MPI to it, but
    // keep the watchdog's turn (deadlines, failure notices) every 100 us.
    if (assisted_.recent(now) && now - last_health_ < std::chrono::microseconds(100) &&
        !outside_flag_.load(std::memory_order_acquire)) {
      // Where cores are scarce, a spinning bystander takes the caller's (or its peer's) core.
      if (!relax.plenty_here()) {
        std::this_thread::sleep_for(detail::assist_stamp::k_window);
        continue;
      }
      for (unsigned i = 1; (i % k_looks) != 0 || (assisted_.recent(now = clock::now()) &&
                                                  now - last_health_ < std::chrono::microseconds(100));
           ++i) {
        if (outside_flag_.load(std::memory_order_acquire)) break;
        relax();
      }
      span(slow_phase::keep_off);
      continue;
    }
    // Kept submit_group calls unsubmitted for a while let go of their buffers (group_cache.hpp),
    // whether or not the program makes any more calls.
    if (now - last_expiry >= std::chrono::milliseconds(100)) {
      group_cache_.expire(now);
      last_expiry = now;
    }
    const auto quiet = now - last_change;
    // The lock is taken only to sleep or back off: while busy, new requests show in the flags.
    if (!busy || quiet > std::chrono::milliseconds(2)) {
      std::unique_lock lock(mutex_);
      const bool kicked = kick_.load(std::memory_order_acquire);
      if (!busy && inbox_.empty() && !outside_failure_ && !kicked) {
        if (stopping_) {
          // Leave only after a whole turn begun since the stop found nothing open: a caller that
          // polled for its own request (assist) may have posted an exchange after this thread's
          // last turn, and the communicators are freed once this thread is gone (a nonblocking
          // collective left on a freed communicator crashed Open MPI's next progress call).
          if (stop_seen) return;
          stop_seen = true;
        } else {
          if (idle_tasks_.empty()) {
            // Wakes now and then to read failure notices from other ranks while nothing is pending.
            wake_.wait_for(lock, std::chrono::milliseconds(100), [&] {
              return stopping_ || !inbox_.empty() || !idle_tasks_.empty() || outside_failure_ ||
                     kick_.load(std::memory_order_acquire);
            });
          }
          if (inbox_.empty()) tasks.swap(idle_tasks_);
          last_change = clock::now();
        }
      } else if (busy && inbox_.empty() && !outside_failure_ && !kicked) {
        const auto pause = std::min<clock::duration>(std::chrono::microseconds(50), quiet / 40);
        wake_.wait_for(lock, pause, [&] {
          return !inbox_.empty() || outside_failure_.has_value() || kick_.load(std::memory_order_acquire);
        });
      }
    }
    span(slow_phase::sleep);
    // A caller issuing right now holds the lock: look again soon rather than wait for it.
    std::unique_lock issuing(issue_mutex_, std::try_to_lock);
    if (!issuing.owns_lock()) {
      if (!tasks.empty()) {
        issuing.lock();  // rare (a split): worth waiting for
      } else {
        busy = true;
        relax();
        if (tracing && missed_since == clock::time_point{}) missed_since = span_start;
        continue;
      }
    }
    if (tracing && missed_since != clock::time_point{}) {
      slow_spans_.note(slow_phase::lock_missed, clock::now() - missed_since);
      missed_since = {};
    }
    if (kick_.exchange(false, std::memory_order_acq_rel)) last_change = clock::now();
    // Idle tasks were taken on what the last turn left (`busy`), but a caller may have issued
    // since (hand_over, assist) without a kick: a request whose plan exchange is still out in the
    // background, say. A split run then would block this rank in its agreement while a peer
    // waits for this rank's part of that exchange, and neither gets on (SplitByParity at 4 ranks
    // hung so, 1 run in 3 with spinning waits). Tasks run only when nothing is open.
    if (!tasks.empty() && has_work()) {
      std::lock_guard lock(mutex_);
      idle_tasks_.insert(idle_tasks_.begin(), std::make_move_iterator(tasks.begin()),
                         std::make_move_iterator(tasks.end()));
      tasks.clear();
      busy = true;
    }
    for (auto& t : tasks) t();
    const auto before = std::make_tuple(queue_.size(), in_flight_.size(), exchange_ != nullptr, background_.size(),
                                        graph_vote_ != nullptr, resolving_.size());
    span(slow_phase::tasks);
    take_inbox();
    span(slow_phase::take_inbox);
    issue_ready();
    span(slow_phase::issue_ready);
    complete_finished();
    span(slow_phase::complete);
    issue_released();
    check_health();
    span(slow_phase::health);
    // (All at once where nothing else is open: the next call's requests need not find a backlog.
    // A few while a call planned whole is coming in: its next part waits for this turn's end.)
    resolve_finished(!planned_.empty() ? k_planned_resolves : has_open() ? k_resolve_chunk : resolving_.size());
    free_retired(false);
    span(slow_phase::resolve_free);
    const auto after = std::make_tuple(queue_.size(), in_flight_.size(), exchange_ != nullptr, background_.size(),
                                       graph_vote_ != nullptr, resolving_.size());
    if (!has_open()) empty_spares();
    // (Freeing goes on a chunk a turn, without sleeping.)
    busy = has_work() || !retired_.empty() || spares_full_.load(std::memory_order_relaxed);
    issuing.unlock();
    if (before != after) {
      last_change = clock::now();
    } else {
      relax();
    }
  }
}

bool world_engine::take_inbox() {
  if (!inbox_flag_.load(std::memory_order_acquire)) return false;
  // The flag goes up while a caller still holds mutex_ (handing over a part of a per-request group
  // holds it for 128 requests): waiting for it would put this thread to sleep in the kernel.
  // Look again next turn instead.
  std::unique_lock lock(mutex_, std::try_to_lock);
  if (!lock.owns_lock()) return false;
  const bool any = !inbox_.empty();
  take_inbox_locked();
  return any;
}

void world_engine::take_inbox_locked() {
  // (The flag's line is left alone when there is nothing to take: the progress thread reads it
  // while it spins.)
  if (inbox_.empty()) {
    if (inbox_flag_.load(std::memory_order_relaxed)) inbox_flag_.store(false, std::memory_order_relaxed);
    return;
  }
  for (std::size_t i = 0; i < inbox_.size() && i < k_prefetch_ahead; ++i) inbox_[i]->prefetch();
  while (!inbox_.empty()) {
    if (inbox_.size() > k_prefetch_ahead) inbox_[k_prefetch_ahead]->prefetch();
    inbox_.front()->stamp(trace_stage::taken);
    enqueue(std::move(inbox_.front()));
    inbox_.pop_front();
  }
  inbox_flag_.store(false, std::memory_order_relaxed);
}

bool world_engine::busy_for_callers() const {
  return exchange_ || graph_vote_ || !queue_.empty() || !planned_.empty() ||
         in_flight_.size() >= detail::pack_policy::k_window_depth;
}

}  // namespace atomr::cluster
