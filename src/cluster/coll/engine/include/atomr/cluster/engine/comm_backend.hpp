// The internals shared by the world's engine and its two backends (not installed).
#pragma once

#include <mpi.h>

#include <array>
#include <atomic>
#include <boost/container/small_vector.hpp>
#include <chrono>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "atomr/cluster/coll_spec.hpp"
#include "atomr/cluster/mpi/wait.hpp"
#include "atomr/cluster/request_trace.hpp"
#include "atomr/common/recycled_storage.hpp"

namespace atomr::cluster::detail {

using clock = std::chrono::steady_clock;

// A long per-request group of small all_reduces, planned whole by its caller before it makes the
// requests (world::submit_group (each_request)): how they go in packed batches. Its first request carries it,
// and the rank offers it in one exchange with the other ranks, so that every later part of the
// call is issued as it comes, with no exchange of its own.
struct call_plan {
  static constexpr std::size_t k_most = 1024;   // requests one plan covers (an exchange's most)
  std::uint32_t length = 0;                     // requests of the call it covers, from its first
  std::array<std::uint8_t, k_most / 8> cuts{};  // bit i: request i starts a batch
};

struct bulk_call;

// One accepted collective, from submission until its future resolves.
struct coll_request {
  // (Made around its spec: the spec is moved once, not assigned after the checks.)
  explicit coll_request(coll_spec&& s) : spec(std::move(s)) {}
  // Made by callers and freed by the progress thread, hundreds a call: their storage is recycled
  // (see recycled_storage.hpp).
  static void* operator new(std::size_t bytes);
  static void operator delete(void* p, std::size_t bytes) noexcept;
  coll_spec spec;
  std::size_t count = 0;  // resolved: elements per rank, as NCCL counts them
  std::uint64_t seq = 0;  // 1, 2, ... in submission order, the same on every rank
  clock::time_point deadline;
  // (Held inline for a request's first two buffers: a heap list each was an allocation and a free
  // per request on the paths that make and complete them.)
  // (The blocks are held by `spec` for the request's life: a ticket holding one too cost two
  // atomic operations per buffer and request, the release often on another thread.)
  struct ticket {
    local::buffer_block* block;
    std::uint64_t seq;
  };
  using tickets = boost::container::small_vector<ticket, 2>;
  tickets writes;  // recv blocks, with this request's write
  tickets reads;   // send-only blocks, with the writes before
  // Empty for the requests of a submit_group call but its last (one future for the call: see
  // world::submit_group); made by world::make_request otherwise.
  promise<void> done{nullptr};
  std::shared_ptr<void> state;  // the backend's, while in flight
  bool writes_published = false;
  // The per-request group this came with (0: submitted alone). Its collectives that neither pack nor
  // touch each other's buffers go in one NCCL group: every rank makes the same calls, so the
  // groups are the same everywhere without asking the other ranks.
  std::uint64_t together = 0;
  bool ends_call = false;  // the last request of its per-request group
  // The first request of a per-request group planned whole (see call_plan); null otherwise.
  std::unique_ptr<call_plan> plan;
  // A call of small all_reduces carried as this one request (bulk_call); null otherwise.
  std::shared_ptr<bulk_call> bulk;
  // An entry of a bulk call (bulk_call::entries): not tracked on its own, so a batch of them
  // needs the state of its work on its first and last entry only (give_state).
  bool in_bulk = false;
  // ready() found every write it depends on enqueued, with nothing to wait for: that cannot change
  // (later writes come after it), so issuing it needs no second look.
  mutable bool no_waits = false;
  // The request timeline (request_trace), when tracing was on at submission. (Held apart, made
  // only then: inline, its 160 bytes were zeroed for every request, a third of making one, and
  // every loop over a batch's requests touched twice the lines.)
  bool traced = false;
  std::unique_ptr<traced_request> trace;
  // Marks the first time the request passes `s`.
  void stamp(trace_stage s) {
    if (!traced) return;
    auto& at = trace->at_ns[static_cast<std::size_t>(s)];
    if (at == 0) at = clock::now().time_since_epoch().count();
  }
  // The same at a time read once for a whole batch (trace_now()): a clock read per request and
  // stage put about 1 us per request on the timeline of a packed batch of hundreds, and the
  // batches' stages looked that much longer than they were.
  void stamp_at(trace_stage s, std::int64_t ns) {
    if (!traced) return;
    auto& at = trace->at_ns[static_cast<std::size_t>(s)];
    if (at == 0) at = ns;
  }
  static std::int64_t trace_now() { return clock::now().time_since_epoch().count(); }
  // Stamps `s` on every traced request of `batch` (pointers or unique_ptrs) at one clock read.
  template <typename Batch>
  static void stamp_all(const Batch& batch, trace_stage s) {
    std::int64_t now = 0;
    for (const auto& r : batch) {
      if (!r->traced) continue;
      if (now == 0) now = trace_now();
      r->stamp_at(s, now);
    }
  }

  // Loops over hundreds of requests (a packed batch) run on the progress thread, and another
  // thread made each request, its state and its buffers' write marks: every first touch was a
  // miss in this thread's caches. These ask for the lines a few iterations ahead.
  void prefetch() const {
    const auto* p = reinterpret_cast<const char*>(this);
    for (std::size_t at = 0; at < sizeof(*this); at += 64) __builtin_prefetch(p + at);
  }
  // (Reads `writes` and `spec`: prefetch() this request some iterations before.)
  void prefetch_buffers() const {
    for (const auto& t : writes) {
      // The block's pointer, and its write marks (a line of their own: see local::buffer_block).
      __builtin_prefetch(t.block);
      __builtin_prefetch(t.block->write_marks());
    }
    for (const auto& b : spec.send) __builtin_prefetch(b.get());
  }

  // "all_reduce #17 (4096 x f32, sum)"; "a call of 1000 all_reduces (#17-#1016, f32, sum)"
  std::string describe() const;
  std::size_t bytes() const { return count * local::size_of(spec.type); }
};

// A call of small all_reduces that the world packs, carried through the engine as one request
// (world::submit_call): its all_reduces are entries made in one block, and the engine numbers,
// agrees on, seals, completes and frees the call once, issuing its packed batches from the
// entries. As one request each, the engine's work per request (making, queueing, agreeing,
// sealing, completing, settling and freeing each) took 250-370 us of a call of 1000 x 2 KiB on
// an H200 with 16 vCPUs at one rank, against 18-71 us for the GPU work itself. Every rank makes the same calls, and the
// same calls make the same bulk calls on every rank (the rule is the calls' shapes: world::bulk_shape), so a bulk call
// meets bulk calls only. The request that carries it holds, as tickets, every buffer the call touches once (as one
// request with many buffers), and the call's sequence numbers, one per entry.
struct bulk_call {
  // The call's all_reduces in order: entry i has the carrier's sequence number + i. They hold
  // the specs (their buffers) and a per-request group's futures; the backends take them as
  // requests. (A block of them, not one allocation each; kept for its capacity, see
  // world_engine::spare_bulk_.)
  std::vector<coll_request> entries;
  std::vector<coll_request*> pointers;  // entries' addresses, as the backends take batches
  // This rank's cuts before agreement (bit i: entry i starts a batch), then the agreed ones (every
  // rank's, merged): where the type or reduction changes, every call_batch entries, where a pack
  // would outgrow its buffer, and before an entry whose buffer an earlier entry touches (on this
  // rank: the batches run in order).
  // A run's first bulk call (plan_length > 0) holds the cuts of the whole run here (below).
  std::array<std::uint8_t, call_plan::k_most / 8> cuts{};
  // A call's bulk calls go in runs of up to call_plan::k_most entries (one bulk call where the
  // world has one rank), agreed on in one exchange: the run's first bulk call offers the cuts of
  // all its entries (plan_length of them, in `cuts`), and the ones after it (plan_length 0) take
  // theirs from that agreement. (One exchange per bulk call was four per call of 1000, each a
  // meeting of every rank before the bulk call's first batch.)
  std::uint32_t plan_length = 0;
  bool repeats = false;                    // some entry touches a buffer an earlier entry touches (see cuts)
  bool agreed = false;                     // cuts holds the agreed batches
  std::size_t issued = 0;                  // entries issued so far (whole batches)
  std::vector<coll_request*> batch_heads;  // the first entry of each issued batch
  std::size_t finished_batches = 0;        // batch_heads found finished (in order)
  std::size_t bytes = 0;                   // the entries' bytes, all told
  // The buffers the call writes, and those it only reads: each takes one ticket per submission.
  std::vector<local::buffer_block*> write_blocks, read_blocks;
  // A world::group_call's: made once, submitted again and again, never a spare. `busy` from its
  // submission until the engine is done with it (complete or failed); own_cuts: this rank's cuts
  // (cuts holds the agreed ones after each agreement).
  bool persistent = false;
  std::atomic<bool> busy{false};
  std::array<std::uint8_t, call_plan::k_most / 8> own_cuts{};
  // A persistent call's packed batches' graph keys, each made once (its entries never change; the
  // keying read every entry's spec and buffer, a tenth of a prepared call's samples at one rank on
  // an H200 with 16 vCPUs). By first entry and length: a
  // submission whose agreed cuts differ makes keys of its own.
  struct batch_key {
    std::size_t at = 0;
    std::size_t n = 0;
    std::vector<std::uint64_t> words;
  };
  std::vector<batch_key> batch_keys;
  // (At most this many: cuts that changed from submission to submission start the list again.)
  static constexpr std::size_t k_batch_keys_most = 64;
  // The batch's kept key, empty until it is made; valid until the next call.
  std::vector<std::uint64_t>& key_of_batch(std::size_t at, std::size_t n) {
    for (auto& k : batch_keys) {
      if (k.at == at && k.n == n) return k.words;
    }
    if (batch_keys.size() >= k_batch_keys_most) batch_keys.clear();
    return batch_keys.emplace_back(batch_key{at, n, {}}).words;
  }
  // The engine is done with this submission (complete or failed): a prepared call's bulk call
  // may be submitted again from here on, before its future hears.
  void release() {
    if (persistent) busy.store(false, std::memory_order_release);
  }
  // The entries' futures (a prepared call's entries have none) settled, or failed with
  // why(entry); the submission is released either way.
  void settle_entries() {
    if (persistent) return;
    for (auto& e : entries) e.done.settle();
  }
  template <class Why>
  void fail_entries(Why&& why) {
    release();
    if (persistent) return;
    for (auto& e : entries) e.done.set_error(why(e));
  }
  bool cut_at(std::size_t i) const { return (cuts[i / 8] >> (i % 8)) & 1U; }
  void set_cut(std::size_t i) { cuts[i / 8] = static_cast<std::uint8_t>(cuts[i / 8] | 1U << (i % 8)); }
  // Ready for another call: no entries (their buffers let go of), no batches.
  void reset() {
    entries.clear();
    pointers.clear();
    cuts = {};
    plan_length = 0;
    repeats = false;
    bytes = 0;
    write_blocks.clear();
    read_blocks.clear();
    rearm();
  }
  // Ready to be submitted again (a persistent one): no agreement, no batches.
  void rearm() {
    if (persistent) cuts = own_cuts;
    agreed = false;
    issued = 0;
    batch_heads.clear();
    finished_batches = 0;
  }
};

// Gives a batch's requests the state of their work. A bulk call's entries only need it on the
// batch's first (the backend tests it where it does not run its work in order) and last (the
// call's state once all of it is issued): given to each, two atomic operations per entry (the
// new state's count up, the last submission's down), 512 a batch of 256, were 5-7 % of each
// thread's samples of prepared calls at one rank on an H200 with 16 vCPUs.
template <typename State>
void give_state(std::span<coll_request* const> batch, const std::shared_ptr<State>& state) {
  if (batch.empty()) return;
  if (batch.front()->in_bulk) {
    batch.front()->state = state;
    batch.back()->state = state;
    return;
  }
  for (auto* r : batch) r->state = state;
}

// Per local member: events to wait on before the request's work.
using member_waits = std::vector<std::vector<std::shared_ptr<void>>>;

class comm_backend {
 public:
  virtual ~comm_backend() = default;
  virtual world_backend kind() const = 0;
  virtual int size() const = 0;
  virtual int rank(std::size_t member) const = 0;
  virtual std::size_t members() const = 0;
  // The queue (stream) a member's work runs on: writes recorded there need no wait by it.
  virtual const void* origin(std::size_t member) const = 0;

  // Enqueues one request after `waits`. Afterwards `events(r)` holds, per member, the event
  // after its work (empty where writes become visible only when test() says done).
  virtual result<void> issue(coll_request& r, const member_waits& waits) = 0;
  // Enqueues all_reduces of one type and reduction as one packed reduction.
  virtual result<void> issue_packed(std::span<coll_request* const> batch, const member_waits& waits) = 0;
  // Enqueues requests together (one NCCL group): sends and receives, so that a rank's sends and
  // receives, to itself too, never wait on each other; or collectives submitted together, as one
  // aggregated launch.
  virtual result<void> issue_group(std::span<coll_request* const> batch, const member_waits& waits) = 0;
  // Whether work issued later runs after work issued earlier, on each member (a stream). The
  // issue calls of such a backend record no completion: the engine issues a request behind its
  // own earlier ones without waiting, and seals each run of issues once (seal), since an event
  // recorded after every NCCL call adds 1-2 us to each, back to back on two H100s joined by NV18
  // NVLink (issue_cost_probe).
  virtual bool stream_ordered() const { return false; }
  // Records, after everything issued so far, the events that complete `issued` (the requests
  // issued since the last seal, in order): afterwards events(r) and test(r) answer for them.
  virtual result<void> seal(std::span<coll_request* const> issued) {
    (void)issued;
    return ok();
  }
  // A stream-ordered backend whose queues have run dry has finished everything issued, sealed
  // or not: then it marks `unsealed` (the requests issued since the last seal) finished without
  // an event, starts a new run for later issues, and answers true. False while work is queued
  // (or where the backend cannot tell). A waiting caller asks this instead of sealing: one event
  // record fewer on the path of a request that is waited for at once.
  virtual result<bool> finish_if_idle(std::span<coll_request* const> unsealed) {
    (void)unsealed;
    return false;
  }
  // CUDA graphs. A backend that can replay a request as a graph of its calls (graph_limit() > 0:
  // requests of up to that many bytes) keeps the graphs it captured, keyed by the request's shape
  // and buffers. NCCL lets a rank launch such a graph only when every rank launches the graph of
  // the same collective capture, and buffers differ between ranks, so the engine asks each rank
  // what it holds (graph_lookup), agrees across ranks, and then issues the request one of three
  // ways (issue_graph): as usual, captured by every rank now (id: the capture's, the same
  // everywhere) and launched, or by launching the capture `id` every rank holds.
  virtual std::size_t graph_limit() const { return 0; }
  struct graph_holding {
    std::uint64_t capture = 0;  // the capture of this rank's graph for the request (0: none)
    bool seen = false;          // the same request was issued here before (a graph would be used again)
  };
  virtual graph_holding graph_lookup(const coll_request& r) {
    (void)r;
    return {};
  }
  enum class graph_step : std::uint8_t { eager, capture, launch };
  virtual result<void> issue_graph(coll_request& r, const member_waits& waits, graph_step step, std::uint64_t id) {
    (void)step;
    (void)id;
    return issue(r, waits);
  }
  // Chains: requests every rank issues alone, one after another, replayed as one graph of all
  // their calls in order. Back to back, one graph per request runs them 8-11 us apart on two H100s
  // joined by NV18 NVLink and a graph of 8 or 16 runs them 5.7-5.9 us apart, with one launch for
  // all. A backend offers chains only where a request
  // issued after another runs after it (its streams keep the order), so that a chain's requests
  // may depend on each other. Keys, captures and the three steps are as for one request.
  virtual bool graph_chains() const { return false; }
  virtual graph_holding graph_lookup_chain(std::span<const coll_request* const> chain) {
    (void)chain;
    return {};
  }
  // The chain's requests went one by one (the next vote that finds every rank saw it captures it).
  virtual void graph_note_chain(std::span<const coll_request* const> chain) { (void)chain; }
  // Captures (and launches) or launches the chain's graph, after `waits`; never eager.
  virtual result<void> issue_graph_chain(std::span<coll_request* const> chain, const member_waits& waits,
                                         graph_step step, std::uint64_t id) {
    (void)chain;
    (void)waits;
    (void)step;
    (void)id;
    return error(errc::internal, "this backend replays no chains of requests");
  }
  // Packed batches as graphs: a batch the ranks agreed to pack (one all_reduce of all their
  // bytes, issue_packed) replayed as one graph of its gather, all_reduce and scatter, where a
  // program repeats it on the same buffers. Issuing a packed batch of 256 small all_reduces cost
  // the issuing thread 68-96 us in NCCL's and CUDA's host calls on two H200s joined by NV18
  // NVLink; a launch costs a few. Keyed by every request's shape
  // and buffers; batches of up to graph_limit() bytes packed; the steps as for one request
  // (eager goes as issue_packed and is remembered).
  virtual bool graph_packs() const { return false; }
  // `kept`, where not null, is the batch's key as this backend made it before (a prepared call's
  // batch, whose entries never change), used as it is; or, empty, where to keep the one made now.
  virtual graph_holding graph_lookup_packed(std::span<const coll_request* const> batch,
                                            std::vector<std::uint64_t>* kept) {
    (void)batch;
    (void)kept;
    return {};
  }
  virtual result<void> issue_packed_graph(std::span<coll_request* const> batch, const member_waits& waits,
                                          graph_step step, std::uint64_t id) {
    (void)step;
    (void)id;
    return issue_packed(batch, waits);
  }
  // (A reference into the request's state: valid while the request holds it.)
  virtual const std::vector<std::shared_ptr<void>>& events(const coll_request& r) const = 0;
  // True once the request's work has finished (and its results are in place).
  virtual result<bool> test(coll_request& r) = 0;
  // All_reduces (a packed batch counting once) reduced through shared memory (the host backend).
  virtual std::uint64_t shared_memory_reductions() const { return 0; }
  // Of those, the ones that read and wrote the ranks' buffers where they are (shm_allreduce.hpp).
  virtual std::uint64_t shared_memory_direct() const { return 0; }
  // An error the communicator reported on its own (NCCL async errors); none on the host backend.
  virtual std::optional<error> async_error() = 0;
  // Stops the communicator; requests in flight never complete. Idempotent.
  virtual void abort() = 0;
  // Collective: the backend of the sub-world for `color` (nullptr for a negative color).
  virtual result<std::unique_ptr<comm_backend>> split(int color, int key, clock::time_point deadline) = 0;
  // Whether shrink() can make the survivors' communicator out of this one after a failure
  // (NCCL >= 2.27, one device per rank). Such a backend is kept, not aborted, when its world fails
  // under ATOMR_ON_FAILURE=continue.
  virtual bool can_shrink() const { return false; }
  // Collective over the survivors: a backend of this one's ranks without `excluded` (this
  // backend's ranks), over `control` (the survivors' communicator, which it does not own). The
  // unfinished work of this one is ended, and this one is aborted.
  virtual result<std::unique_ptr<comm_backend>> shrink(const std::vector<int>& excluded, MPI_Comm control,
                                                       clock::time_point deadline) {
    (void)excluded;
    (void)control;
    (void)deadline;
    return error(errc::unavailable, "this backend cannot shrink its communicator");
  }
};

}  // namespace atomr::cluster::detail
