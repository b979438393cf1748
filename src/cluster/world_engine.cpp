#include "world_engine.hpp"

#include <fmt/ranges.h>

#include <algorithm>
#include <cstring>
#include <fstream>
#include <limits>

#include "atomr/cluster/liveness.hpp"
#include "atomr/cluster/mpi_check.hpp"
#include "atomr/common/log.hpp"
#include "atomr/common/pointer_set.hpp"
#include "atomr/common/spin.hpp"
#include "atomr/common/tunables.hpp"
#include "atomr/local/topology/irq_cpus.hpp"

namespace atomr::cluster {
namespace {

using detail::clock;
using detail::coll_request;

// What ranks compare before a request, when checking or packing: 32 bytes each.
struct signature {
  std::uint64_t seq = 0;
  std::uint64_t count = 0;
  std::int32_t root = 0;
  std::uint8_t kind = 0;
  std::uint8_t type = 0;
  std::uint8_t op = 0;
  std::uint8_t sorts = 0;         // what the offers were of (k_offer_*), every rank's or-ed together
  std::int32_t offered = 0;       // how many packable requests from this one the rank plans for
  std::int32_t offered_most = 0;  // in a merged plan: the longest offer (offered is the shortest)
};
static_assert(sizeof(signature) == 32);

// signature::sorts: an offer of queued requests (submit_all calls, calls of one request), or of a
// bulk call (a submit_group call of many small all_reduces, see start_bulk). Or-ed across ranks,
// both at once is ranks that made one call differently: their batches would not match.
constexpr std::uint8_t k_offer_requests = 1;
constexpr std::uint8_t k_offer_bulk = 2;
constexpr const char* k_mixed_rule =
    " (a call of more than 128 small all_reduces is made with submit_group on every rank, or on none: "
    "see the README's \"Bulk calls\")";
static_assert(world_engine::k_submit_part == 128, "k_mixed_rule says 128");

// Packing needs every rank to batch the same requests, and what is queued differs between ranks
// at any moment, so ranks agree on a plan: each offers the packable all_reduces it has queued
// (up to this many) and where it would start a new batch; the plan covers the shortest offer and
// starts a batch wherever any rank would. One exchange then serves many batches, and a stream
// of requests that cannot pack (one buffer used again and again) costs one exchange per queue,
// not one per request.
constexpr std::size_t k_plan_most = 1024;
static_assert(k_plan_most == detail::call_plan::k_most);

// Requests in flight from which a small all_reduce waits to be packed with later ones rather
// than being issued alone (see start_issue).
constexpr std::size_t k_pack_window_depth = 2;

// Requests after an exchange in which every rank offered one that skip the exchange (see
// in_latency_window). Each window costs two exchanges (an MPI_Iallreduce with a user operation
// each, 2-4 us of MPI progress) and one wait for the first: with 16, that was 0.2-0.4 us on every
// 8 B all_reduce of a latency-bound caller on the GPU machine. A burst that starts inside a window
// issues up to this many requests unpacked before packing resumes (1-3 us each).
constexpr std::uint64_t k_latency_window = 64;
// Lone exchanges on consecutive requests before a window opens (then one right where the last
// window ended keeps them open). A burst of requests, each by a call of its own, that begins at
// an idle engine has its first one or two requests alone, then a queue: with a window after the
// first lone exchange, the next 64 went out one by one (the host backend's many-small row on 2
// cores, 4-5 us each, about a third of the burst's time). A caller that waits for each request
// offers one every time and pays two exchanges more, once.
constexpr std::uint32_t k_lone_run = 3;

// At most this many requests issued in a row share one completion event (see seal()).
constexpr std::size_t k_seal_most = 64;

struct offer {
  signature head;
  std::uint8_t cuts[k_plan_most / 8] = {};  // bit i: request i starts a new batch
};

// Merging offers is a reduction (the shortest offer, the longest, and every rank's cuts), so the
// ranks agree with one all_reduce of 160 bytes, log P rounds, rather than an all-gather of every
// rank's offer (160 bytes x P, every plan). Check mode still gathers: it names the rank that differs.
void merge_offers(void* in, void* inout, int* len, MPI_Datatype*) {
  const auto* a = static_cast<const offer*>(in);
  auto* b = static_cast<offer*>(inout);
  for (int i = 0; i < *len; ++i) {
    b[i].head.offered = std::min(a[i].head.offered, b[i].head.offered);
    b[i].head.offered_most = std::max(a[i].head.offered_most, b[i].head.offered_most);
    b[i].head.sorts = static_cast<std::uint8_t>(b[i].head.sorts | a[i].head.sorts);
    for (std::size_t c = 0; c < sizeof(a[i].cuts); ++c)
      b[i].cuts[c] = static_cast<std::uint8_t>(b[i].cuts[c] | a[i].cuts[c]);
  }
}

// The MPI type and operation for merge_offers, made once per process (and left to MPI_Finalize).
struct offer_reduction {
  MPI_Datatype type = MPI_DATATYPE_NULL;
  MPI_Op op = MPI_OP_NULL;
};
const offer_reduction& plan_reduction() {
  static const offer_reduction r = [] {
    offer_reduction out;
    if (MPI_Type_contiguous(sizeof(offer), MPI_BYTE, &out.type) != MPI_SUCCESS ||
        MPI_Type_commit(&out.type) != MPI_SUCCESS || MPI_Op_create(&merge_offers, 1, &out.op) != MPI_SUCCESS) {
      out = {};
    }
    return out;
  }();
  return r;
}

bool bit(const std::uint8_t* bits, std::size_t i) { return (bits[i / 8] >> (i % 8)) & 1U; }
void set_bit(std::uint8_t* bits, std::size_t i) {
  bits[i / 8] = static_cast<std::uint8_t>(bits[i / 8] | 1U << (i % 8));
}

bool reduces(coll_kind k) {
  return k == coll_kind::all_reduce || k == coll_kind::reduce || k == coll_kind::reduce_scatter;
}

std::string describe(const signature& s) {
  std::string out = std::string(to_string(static_cast<coll_kind>(s.kind))) + " #" + std::to_string(s.seq) + " of " +
                    std::to_string(s.count) + " x " + std::string(local::to_string(static_cast<local::dtype>(s.type)));
  if (reduces(static_cast<coll_kind>(s.kind))) out += " (" + std::string(to_string(static_cast<reduce_op>(s.op))) + ")";
  const auto k = static_cast<coll_kind>(s.kind);
  if (k == coll_kind::broadcast || k == coll_kind::reduce) out += " root " + std::to_string(s.root);
  return out;
}

bool same_request(const signature& a, const signature& b) {
  return a.seq == b.seq && a.count == b.count && a.kind == b.kind && a.type == b.type &&
         (!reduces(static_cast<coll_kind>(a.kind)) || a.op == b.op) &&
         (static_cast<coll_kind>(a.kind) == coll_kind::send || static_cast<coll_kind>(a.kind) == coll_kind::recv ||
          a.root == b.root);
}

// Send and recv pair up by rank, so their signatures legitimately differ; compare the rest.
bool point_to_point(const signature& s) {
  const auto k = static_cast<coll_kind>(s.kind);
  return k == coll_kind::send || k == coll_kind::recv;
}

}  // namespace

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

struct world_engine::exchange {
  offer mine;
  offer merged;            // the plan: every rank's offer merged (merge_offers)
  std::vector<offer> all;  // check mode: every rank's offer, to name the one that differs
  std::size_t batch = 1;   // check mode, a head that does not pack: the batch it heads
  MPI_Request request = MPI_REQUEST_NULL;
  // The merge by point-to-point recursive doubling (not in check mode). Open MPI's MPI_Iallreduce
  // of the offer took 50-175 us back to back on the two-GPU machine, with both ranks posted and
  // polling, while the GPUs ran dry (twenty-first session's timelines); host_allreduce is what
  // the graph votes use.
  std::unique_ptr<detail::host_allreduce> reduction;
  bool finished = false;
  std::uint64_t call = 0;  // this rank offered the plan of this submit_all call (call_plan)
};

namespace {
// The plan exchanges' messages on the control communicator: each exchange in flight has tags
// of its own (host_allreduce::k_tag_span), taken in turn from k_plan_slots (exchanges are posted
// in the same order on every rank; far fewer than that are ever in flight at once).
constexpr int k_plan_tag = 0x500000;
constexpr std::uint64_t k_plan_slots = 1024;
}  // namespace

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

// Held by the futures of this world's requests; forwards to the engine while it lives.
class world_engine::assist_hook final : public local::progress_hook {
 public:
  explicit assist_hook(world_engine* e) : engine_(e) {}
  // The last sequence number through which every request finished with success (see resolving_).
  // (On a line of its own: every waiter reads it while the progress thread writes it.)
  alignas(64) std::atomic<std::uint64_t> done_through{0};
  void progress() noexcept override {
    std::unique_lock lock(mutex_, std::try_to_lock);
    if (lock.owns_lock() && engine_ != nullptr) engine_->assist();
  }
  // The engine is going: later calls do nothing (waits for a call under way).
  void detach() {
    std::lock_guard lock(mutex_);
    engine_ = nullptr;
  }

 private:
  std::mutex mutex_;
  world_engine* engine_;
};

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
                              std::chrono::duration_cast<std::chrono::microseconds>(k_slow_span).count(),
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

std::string world_engine::slow_span_counts::describe() const {
  std::string out;
  for (std::size_t i = 0; i < n; ++i) {
    const auto c = count[i].load(std::memory_order_relaxed);
    if (c == 0) continue;
    if (!out.empty()) out += ", ";
    out += fmt::format("{} {}/{:.1f}", names[i], c, static_cast<double>(longest_ns[i].load()) / 1e3);
  }
  return out.empty() ? "none" : out;
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
    spans << k.thread << ' ' << slow_span_counts::names[static_cast<std::size_t>(k.phase)] << ' ' << k.start_ns << ' '
          << k.ns << '\n';
  }
}

std::optional<error> world_engine::failure() const {
  std::lock_guard lock(mutex_);
  return failure_;
}

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
  // A submit_all call's requests are announced by the done mark (see resolving_); a request
  // submitted alone is fulfilled as it finishes.
  if (together != 0) r->done.set_done_mark(&hook_->done_through, last_seq(*r));
  r->deadline = deadline;
  r->together = together;
  if (r->bulk) {
    std::uint64_t seq = r->seq;
    for (auto& e : r->bulk->entries) {
      e.seq = seq++;
      e.deadline = deadline;
      e.together = together;
      if (!e.done.empty()) e.done.set_done_mark(&hook_->done_through, e.seq);
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
  // for this caller to issue at once, and each look costs MPI progress calls (0.5-1 us each on
  // the GPU machine): a burst of 1000 small all_reduces took 1.2-1.9 ms to submit that way, and
  // held the lock the progress thread needs to finish the agreements. Leave it to that thread.
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
    // A part of a long submit_all call with more to come (the engine was idle: its first part).
    // The caller only posts its plan's offer and goes back to making the next part: the
    // progress thread finishes the agreement and issues the part, and nothing keeps it off the
    // issue lock (the caller does not poll meanwhile). Issuing here, the caller of one rank
    // spent about 80 us on the agreement and the pack's NCCL call before it went on, and the
    // other rank waited for its next part in every later agreement (docs/benchmarks.md,
    // twenty-third session).
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
    // NCCL call itself already paces (docs/benchmarks.md, twelfth session).
    issue_ready(!assist_hook_);
    // A caller that polls its futures (assist) finishes what completed at once: else the
    // progress thread often took the lock first and the caller's poll waited for its turn (the
    // "done" stage: 1.6-1.8 us per 8 B all_reduce on the GPU machine at one rank, where nothing
    // is waited for).
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
    // call of 1000 x 2 KiB returned at one rank on the GPU machine, of 290-335 us in all.)
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

world::stats_snapshot world_engine::stats() const {
  world::stats_snapshot s;
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
  bool busy = false;       // as the last turn left it
  bool stop_seen = false;  // stopping_ was seen before the last turn began
  auto flagged = [&] {
    return inbox_flag_.load(std::memory_order_acquire) || outside_flag_.load(std::memory_order_acquire) ||
           kick_.load(std::memory_order_acquire);
  };
  // The spins below look at the clock (and at the caller's assist stamp, a line the caller
  // writes) only every k_looks turns: the GPU machine's profile (docs/benchmarks.md) had this
  // thread spending half its time in clock reads and in allocating a task list per turn, on
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
  // The flag goes up while a caller still holds mutex_ (handing over a part of a submit_all call
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

std::size_t world_engine::member_of(const local::buffer_block& b) const {
  if (members_.size() == 1) return 0;  // make_request checked the device
  const auto s = b.state.lock();
  for (std::size_t i = 0; i < members_.size(); ++i) {
    if (members_[i].state() == s) return i;
  }
  return 0;
}

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

// Whether `later` writes a buffer `earlier` uses, or uses one `earlier` writes.
bool conflicts(const detail::coll_request& earlier, const detail::coll_request& later) {
  auto in = [](const auto& blocks, const local::buffer_block* b) {
    return std::any_of(blocks.begin(), blocks.end(), [&](const auto& x) { return x.get() == b; });
  };
  for (const auto& b : later.spec.recv) {
    if (in(earlier.spec.recv, b.get()) || in(earlier.spec.send, b.get())) return true;
  }
  for (const auto& b : later.spec.send) {
    if (in(earlier.spec.recv, b.get())) return true;
  }
  return false;
}

// Collectives NCCL can aggregate in one group launch. (all_to_all is itself a group of sends and
// receives; a barrier reduces one shared scratch int.)
bool groupable_kind(coll_kind k) {
  return k == coll_kind::all_reduce || k == coll_kind::broadcast || k == coll_kind::reduce ||
         k == coll_kind::all_gather || k == coll_kind::reduce_scatter;
}

// Requests issued together must not touch each other's buffers: those must run one after the other.
class buffer_use {
 public:
  explicit buffer_use(std::size_t expected) {
    written_.reset(expected);
    read_.reset(expected);
  }
  bool try_add(const detail::coll_request& r) {
    // In place (one buffer, read and written): a write covers every later check of it.
    if (r.spec.recv.size() == 1 && r.spec.send.size() == 1 && r.spec.recv[0] == r.spec.send[0]) {
      const auto* b = r.spec.recv[0].get();
      if (written_.contains(b) || read_.contains(b)) return false;
      written_.insert(b);
      return true;
    }
    for (const auto& b : r.spec.recv) {
      if (written_.contains(b.get()) || read_.contains(b.get())) return false;
    }
    for (const auto& b : r.spec.send) {
      if (written_.contains(b.get())) return false;
    }
    for (const auto& b : r.spec.recv) written_.insert(b.get());
    for (const auto& b : r.spec.send) read_.insert(b.get());
    return true;
  }
  void clear() {
    written_.clear();
    read_.clear();
  }

 private:
  pointer_set written_;
  pointer_set read_;
};
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
               bytes + r->bytes() > options_.pack_capacity || !use.try_add(*r) || !ready(*r, waits);
    if (cut && options_.check && first != nullptr) break;
    if (cut) {
      use.clear();
      (void)use.try_add(*r);  // always fits an empty set
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
    if (n == most || r->together != head.together || !groupable(*r) || !use.try_add(*r)) break;
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
    if (n == most || !is_p2p(*r) || !ready(*r, waits) || !use.try_add(*r)) break;
    ++n;
  }
  return std::max<std::size_t>(n, 1);
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
    const bool lone = ex.merged.head.offered == 1 && ex.merged.head.offered_most == 1;
    if (lone) {
      // (Every rank finishes these exchanges, all of them in the background, in this order: all
      // count the same runs.)
      const auto seq = ex.mine.head.seq;
      const bool after_window = window_end_ != 0 && seq == window_end_;
      lone_run_ = (lone_run_ > 0 && last_lone_ + 1 == seq) || after_window ? lone_run_ + 1 : 1;
      last_lone_ = seq;
      if (lone_run_ >= k_lone_run || after_window) {
        lone_heads_.push_back(seq);
        window_end_ = seq + 2 + k_latency_window;
      }
    }
    background_.pop_front();
  }
}

// A latency-bound caller (one small all_reduce at a time, each waited for) offers one request
// per exchange, and an exchange per request costs it microseconds. When every rank offered just
// one, k_lone_run times in a row, the ranks skip the exchange for the k_latency_window requests
// that start two after the last of them:
// each rank decides request T from the exchanges headed at T-2 or earlier, which every rank has
// finished before deciding (it waits for them), so all decide alike. A burst that arrives in such
// a window issues up to k_latency_window requests unpacked before packing resumes.
// After a gather (check mode): the plan, merged here from every rank's offer.
void world_engine::settle_merged(exchange& ex) {
  if (ex.all.empty()) return;
  ex.merged = ex.all.front();
  int one = 1;
  for (std::size_t r = 1; r < ex.all.size(); ++r) merge_offers(&ex.all[r], &ex.merged, &one, nullptr);
}

std::optional<bool> world_engine::in_latency_window(std::uint64_t seq) const {
  if (!background_.empty() && background_.front()->mine.head.seq + 2 <= seq) return std::nullopt;
  for (const auto head : lone_heads_) {
    if (head < window_closed_at_) continue;
    if (head + 2 <= seq && seq < head + 2 + k_latency_window) return true;
  }
  return false;
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
  // A small all_reduce issued behind others only waits on the device: while the pipeline is
  // that deep, let more of them queue up, to be packed together (the packing window). A lone
  // request is issued at once, and the requests in flight complete without the queued ones
  // (they are issued and agreed already), so this never waits on another rank.
  // Requests of one submit_all call never take the latency window: they came together, so they
  // pack (every rank knows which requests came together, so all decide alike). In the window,
  // the first 64 of 1000 small all_reduces submitted together went one NCCL call each (about
  // 10 us apiece on the two-GPU machine), and the rest in one packed call.
  // Where the head goes through a graph vote, though, ranks that submitted it differently (alone
  // here, with a submit_all call there) must still all take the window, or one rank would vote
  // while another exchanges offers, and both wait: the vote closes the window instead, for every
  // rank, when any rank's head came with a submit_all call (see graph_vote).
  if (packable(head) && !options_.check && control_size_ > 1 && (head.together == 0 || graph_shape(head))) {
    while (!lone_heads_.empty() && lone_heads_.front() + 2 + k_latency_window <= head.seq) lone_heads_.pop_front();
    const auto latency = in_latency_window(head.seq);
    if (!latency) return false;  // an exchange it depends on is still out
    if (*latency) {
      window_head_ = true;
      issue_batch(1);
      return true;
    }
  }
  // (Once the last request of a submit_all call is queued, its requests have nothing more to
  // wait for: the last part of 1000 small all_reduces waited for the batch before it to finish.)
  // Nor does a head whose batch cannot grow: the request queued behind it already cuts the batch
  // (it waits for the head's own write, or does not pack with it), so waiting only drained the
  // devices. Back to back on one buffer, every plan of 1024 requests waited so for the requests
  // in flight to finish: 400 us per plan on the two-GPU machine, in which the GPUs ran dry.
  // A whole part of a submit_all call (see world::submit_all) goes at once, too: the caller is
  // still making the next one, and a part held back to grow was agreed on and issued only after
  // the call's last part came, all on the time after the call returned.
  if (packable(head) && !head.plan && in_flight_.size() >= k_pack_window_depth &&
      (head.together == 0 || (head.together != queued_call_end_ && queue_.size() < k_submit_part)) && !head_is_cut()) {
    return false;
  }
  // Alone at one rank, a lone small all_reduce has nothing to pack with and nobody to agree
  // with: the plan would be that request alone.
  if (packable(head) && control_size_ == 1 && !options_.check && queue_.size() == 1) {
    issue_batch(1);
    return true;
  }
  // A request that does not pack is issued with those that go in one group with it.
  std::size_t batch = 1;
  if (!packable(head)) {
    if (is_p2p(head)) {
      batch = p2p_prefix();
    } else if (head.together != 0 && groupable(head)) {
      const auto n = group_prefix();
      if (!n) return false;
      batch = *n;
    }
    if (!options_.check) {
      issue_batch(batch);
      return true;
    }
  }
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
      auto& pace = pace_of_pack(b.entries[b.issued], n);
      if (pace.skip > 0) {
        --pace.skip;
      } else {
        auto& batch = scratch_const_;
        batch.assign(b.pointers.begin() + static_cast<std::ptrdiff_t>(b.issued),
                     b.pointers.begin() + static_cast<std::ptrdiff_t>(b.issued + n));
        start_pack_vote(batch);
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
    // its turn's looks at completions, settling and freeing: 200-500 us later in call 1's
    // timeline, docs/benchmarks.md, twenty-eighth session.)
    if (queue_.size() < n) take_inbox();
    if (queue_.size() < n) return false;
    for (std::size_t i = 0; i < n; ++i) {
      const auto& r = *queue_[i];
      if (r.together != planned_call_ || !packable(r)) {
        fail_world(error(errc::invalid_argument,
                         "request #" + std::to_string(r.seq) + " (" + r.describe() +
                             ") came between the parts of a submit_all call whose packing the ranks had agreed on: " +
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
  // shared events were 2-8 % slower than one each on the GPU machine (docs/benchmarks.md).
  if (unsealed_.size() >= k_seal_most || (!unsealed_.empty() && unsealed_.back()->bytes() >= options_.seal_bytes)) {
    seal();
  }
}

bool world_engine::head_is_cut() {
  if (queue_.size() < 2) return false;
  const auto& head = *queue_.front();
  const auto& next = *queue_[1];
  return !packable(next) || next.spec.type != head.spec.type || next.spec.params.op != head.spec.params.op ||
         conflicts(head, next) || !ready(next, scratch_mine_);
}

void world_engine::issue_released() {
  // (Such a backend records no events: nothing is left unsealed.)
  if (last_finished_ > 0 && !queue_.empty() && !backend_->stream_ordered()) issue_ready();
}

bool world_engine::idle_poll_covers() const {
  return !in_flight_.empty() && in_flight_.size() <= k_idle_poll_most && unsealed_.front() == in_flight_.front().get();
}

bool world_engine::unsealed_covers(const local::buffer_block* b, std::uint64_t seq) const {
  return std::any_of(unsealed_writes_.begin(), unsealed_writes_.end(),
                     [&](const auto& w) { return w.first == b && w.second >= seq; });
}

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
  // publishing every request's writes (64 locks a seal back to back on one buffer, 6-7 us on the
  // GPU machine, in which the device queue ran shorter).
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
  for (const auto& [block, seq] : latest) {
    const auto m = member_of(*block);
    block->write_enqueued(seq, m < events.size() ? events[m] : nullptr, backend_->origin(m));
  }
  for (auto* r : unsealed_) r->writes_published = true;
  unsealed_.clear();
  unsealed_writes_.clear();
}

void world_engine::publish_writes(coll_request& r, const std::vector<std::shared_ptr<void>>& events) {
  for (const auto& t : r.writes) {
    const auto m = member_of(*t.block);
    t.block->write_enqueued(t.seq, m < events.size() ? events[m] : nullptr, backend_->origin(m));
  }
  r.writes_published = true;
}

bool world_engine::busy_for_callers() const {
  return exchange_ || graph_vote_ || !queue_.empty() || !planned_.empty() || in_flight_.size() >= k_pack_window_depth;
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
  // Requests submitted alone are fulfilled here. A submit_all call's requests hear at once, by
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
  // with nothing open it frees no more than a chunk: the next submit_all call's first part came
  // while the progress thread freed the last call's 1000 requests in one go, and waited 120 us
  // to be taken (on one rank: the other waited as long for the plan; nineteenth session's
  // timelines, docs/benchmarks.md). The loop turns until all are freed (see run()).
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
  lone_heads_.clear();
  lone_run_ = 0;
  window_end_ = 0;
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
