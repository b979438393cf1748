// The world's progress thread: it issues accepted requests in order (packing small all_reduces
// the ranks agree on), watches them finish, and is the watchdog: deadlines and NCCL's
// asynchronous errors fail the world. It never blocks in MPI or NCCL; everything it waits for is
// polled, so a missing rank is noticed by its deadline.
#pragma once

#include <array>
#include <atomic>
#include <condition_variable>
#include <deque>
#include <functional>
#include <map>
#include <mutex>
#include <thread>

#include "atomr/cluster/engine/comm_backend.hpp"
#include "atomr/cluster/engine/graph_pacer.hpp"
#include "atomr/cluster/engine/group_cache.hpp"
#include "atomr/cluster/engine/latency_window.hpp"
#include "atomr/cluster/engine/pack_policy.hpp"
#include "atomr/cluster/engine/slow_spans.hpp"
#include "atomr/cluster/mpi/host_allreduce.hpp"
#include "atomr/cluster/mpi/shm_allreduce.hpp"
#include "atomr/cluster/mpi/wait_assist.hpp"
#include "atomr/cluster/request_trace.hpp"

namespace atomr::cluster {

namespace detail {
// A fresh world id (rank 0 makes it; the others take it by broadcast).
std::uint64_t new_world_id();
}  // namespace detail

class world_engine {
 public:
  // `id` is the same on every rank of the world and differs between worlds: failure notices from
  // other ranks carry it, so a late notice for an earlier world on a reused communicator is ignored.
  // `votes`: the shared-memory channel the CUDA graph votes go through (open_vote_channel), or
  // nullptr (by MPI point-to-point messages on `control`).
  world_engine(MPI_Comm control, std::unique_ptr<detail::comm_backend> backend, std::vector<local::device> members,
               world_options options, std::uint64_t id, std::unique_ptr<detail::shm_reducer> votes = nullptr);
  ~world_engine();
  // Collective over `control` (bounded by `deadline`; its ranks agree by messages on `parent`, as
  // shm_reducer::open does): a shared-memory channel for the graph votes of a world on `control`,
  // where every rank's backend votes (`votes`), every rank is on one node and ATOMR_COLL_VOTE_SHM
  // allows everywhere; else nullptr.
  static result<std::unique_ptr<detail::shm_reducer>> open_vote_channel(MPI_Comm parent, MPI_Comm control, bool votes,
                                                                        std::chrono::steady_clock::time_point deadline);

  detail::comm_backend& backend() { return *backend_; }
  const std::vector<local::device>& members() const { return members_; }
  const world_options& options() const { return options_; }
  MPI_Comm control() const { return control_; }
  std::optional<error> failure() const;

  // Takes a validated request; its future fails at once if the world has failed.
  future<void> submit(std::unique_ptr<detail::coll_request> r);
  // Several at once: the progress thread takes them in one go. `together` (from together_id(),
  // or 0) names the per-request group they came with; one call may hand its requests over in parts.
  // `more_coming`: a part that is not the call's last (the caller goes on making requests).
  // Gives the futures of the requests that have one (a submit_group call's last only), in order.
  std::vector<future<void>> submit_all(std::vector<std::unique_ptr<detail::coll_request>> rs, std::uint64_t together,
                                       bool more_coming = false);
  std::uint64_t together_id() { return next_together_.fetch_add(1, std::memory_order_relaxed); }
  // A call carried as one request (detail::bulk_call, made by world::submit_call): gives the
  // futures of its entries that have one, then the carrier's if it has one.
  std::vector<future<void>> submit_bulk(std::unique_ptr<detail::coll_request> carrier, std::uint64_t together,
                                        bool more_coming);
  // An empty bulk call for the next call to fill: a finished call's, kept for its capacity (a
  // fresh block of 1024 entries was a quarter megabyte to allocate and fault in), or a new one.
  std::shared_ptr<detail::bulk_call> take_bulk();
  // A long per-request group of small all_reduces is handed over in parts of this many.
  static constexpr std::size_t k_submit_part = 128;
  // Entries per bulk call (detail::bulk_call): a call is handed over a bulk call at a time, so
  // that the engine agrees on and issues the first while the caller makes the next (made whole
  // first, 1000 x 2 KiB ran 30-40 % slower at one rank on the 2-core machine). The same on every
  // rank (ranks may set call_batch unalike: their cuts are merged).
  static constexpr std::size_t k_bulk_most = 256;
  // Whether `r` is a small all_reduce this world packs with others.
  bool packs(const detail::coll_request& r) const { return packable(r); }
  // Whether an all_reduce of `bytes` would pack (a call's plan is made before its requests).
  bool packs_shape(coll_kind k, std::size_t bytes) const {
    return detail::pack_policy::packs(k, bytes, options_.pack_limit, backend_->members());
  }
  world_stats stats() const;
  // The repeated submit_group calls kept as prepared calls, or null where that is off
  // (world_options::group_cache; bulk calls off or check mode make no bulk calls to keep).
  detail::group_cache* group_cache() {
    return options_.group_cache && options_.bulk && !options_.check ? &group_cache_ : nullptr;
  }
  // Runs `f` on the progress thread once everything submitted before has finished.
  result<void> when_idle(std::function<result<void>()> f);
  // Fails the world from any thread (a device rebuild, for one). `may_keep`: the backend may be
  // kept for a shrink (can_shrink(), ATOMR_ON_FAILURE=continue) rather than aborted.
  void fail_from_outside(error e, bool may_keep = true);
  // True once the world failed and its backend was kept for a shrink, not aborted.
  bool kept_after_failure() const { return kept_.load(std::memory_order_acquire); }
  // MPI_COMM_WORLD's rank of each rank of the control communicator.
  const std::vector<int>& world_ranks() const { return world_ranks_; }

 private:
  void accept(std::unique_ptr<detail::coll_request> r, std::chrono::steady_clock::time_point deadline,
              std::uint64_t together);
  // Accepts (under mutex_), then issues on the calling thread if the progress thread is not
  // (where `more_coming`, it only starts the part and leaves the rest to the progress thread).
  template <typename Accept>
  void hand_over(Accept&& accept_all, bool more_coming = false);
  void run();
  // A caller waiting on one of this world's futures polls for it here (local::progress_hook):
  // it does the progress thread's issuing and completing itself when nobody else is.
  void assist();
  class assist_hook;
  static assist_hook* keep_forever(world_engine* e);
  // Kept forever, as every future of this world may point at it (its done mark, see resolving_).
  assist_hook* hook_;
  std::shared_ptr<assist_hook> assist_hook_;  // (owns nothing: the hook is kept forever; none without assist)
  detail::assist_stamp assisted_;             // when a caller last assisted
  bool take_inbox();                          // true if it took any request
  void take_inbox_locked();                   // under mutex_ and issue_mutex_
  // Issues what is ready in queue_; `seal_now`: seal what it issued (else it stays unsealed, for
  // whoever polls next: an assisting caller's wait, which seals or asks whether the streams ran
  // dry, or the progress thread, which seals).
  void issue_ready(bool seal_now = true);
  // Starts issuing the head of queue_ (ready or not): issues it, holds it back, or starts the
  // exchange that agrees on its batch; false while nothing can be done yet.
  bool start_issue();
  // How many requests from a head that does not pack go with it (a run of sends and receives,
  // or its per-request group); nullopt while one of them waits for an earlier write.
  std::optional<std::size_t> unpacked_batch(const detail::coll_request& head);
  // Starts the exchange in which ranks agree on the batch from the head (`batch`: the head's
  // group, where it does not pack), or issues at once where the outcome is known here; true.
  bool start_exchange(detail::coll_request& head, std::size_t batch);
  // Packing plans: one exchange agrees how up to `k_plan_most` queued all_reduces are batched.
  std::size_t plan_offer(std::uint8_t* cuts) const;
  bool issue_planned();
  void finish_exchange();
  void issue_batch(std::size_t n);
  // by_caller: an assisting caller, not the progress thread (counted in stats().assisted).
  // poll_idle: the caller waits for its request; an unsealed head is looked for by asking
  // whether the backend's queues ran dry (finish_if_idle), not by sealing it.
  void complete_finished(bool by_caller = false, bool poll_idle = false);
  void check_health();
  void fail_world(error cause, const detail::coll_request* culprit, bool tell_peers = true, bool may_keep = true);
  bool keep_on_failure_ = false;   // ATOMR_ON_FAILURE=continue and the backend can shrink
  std::atomic<bool> kept_{false};  // failed, and the backend kept for a shrink
  bool outside_may_keep_ = true;   // (under mutex_) with outside_failure_
  // Failure notices: a rank whose world fails tells the others at once (a point-to-point message
  // on the control communicator), so they fail too instead of waiting for their deadlines.
  void tell_peers(const error& cause);
  void poll_notices();
  // Writes by buffer and sequence number.
  using write_list = std::vector<std::pair<local::buffer_block*, std::uint64_t>>;
  // Whether `r` can be issued now; `ahead`: writes of requests issued just before it in the
  // same graph (a chain), which count as enqueued.
  bool ready(const detail::coll_request& r, detail::member_waits& waits, const write_list* ahead = nullptr) const;
  std::size_t p2p_prefix() const;
  // Bulk calls (world_bulk.cpp). The head is a bulk call: agrees on its batches, then issues the
  // next one (start_issue's part); false while nothing can be done yet.
  bool start_bulk();
  // The next batch's length at the head bulk call.
  std::size_t bulk_batch_length() const;
  // Whether the request's work is done (a bulk call: every batch's, where the backend does not
  // keep them in order).
  result<bool> test_request(detail::coll_request& r);
  // The last sequence number a request covers (a bulk call's: its last entry's).
  static std::uint64_t last_seq(const detail::coll_request& r);
  // Frees up to `budget` requests' worth of retired_ front (a bulk call counts its entries).
  void free_front(std::size_t budget);
  std::mutex spare_mutex_;
  // Finished bulk calls kept for their capacity (a call of 1000 is four of them), at most
  // k_spare_bulks (under spare_mutex_). They go there whole: the caller that takes one lets go of
  // its entries (their buffers) on its own thread, where the program made and holds them, and
  // the progress thread does so once nothing is open (spares_full_: some spare holds entries).
  // (Freed on the progress thread, a call's 1000 entries took it as long as issuing them, and
  // the caller's next call found no spare and faulted a fresh block in.)
  static constexpr std::size_t k_spare_bulks = 8;
  std::vector<std::shared_ptr<detail::bulk_call>> spare_bulks_;
  std::atomic<bool> spares_full_{false};
  void empty_spares();  // (the progress thread, nothing open)
  // How many requests from the head go in one group (see coll_request::together); nullopt while
  // one of them waits for an earlier write, so that every rank groups the same requests.
  std::optional<std::size_t> group_prefix() const;
  bool packable(const detail::coll_request& r) const;
  bool groupable(const detail::coll_request& r) const;
  void publish_writes(detail::coll_request& r, const std::vector<std::shared_ptr<void>>& events);
  std::size_t member_of(const local::buffer_block& b) const;
  // Whether the request queued behind the head already ends the head's packed batch.
  bool head_is_cut();

  MPI_Comm control_;
  std::unique_ptr<detail::comm_backend> backend_;
  std::vector<local::device> members_;
  world_options options_;
  std::vector<std::uint64_t> watches_;
  // Liveness (ATOMR_ON_FAILURE=continue): a failed rank of this world fails it at once, named.
  std::uint64_t failure_listener_ = 0;

  mutable std::mutex mutex_;
  std::condition_variable wake_;
  std::deque<std::unique_ptr<detail::coll_request>> inbox_;
  std::vector<std::function<void()>> idle_tasks_;
  std::optional<error> failure_;
  std::optional<error> outside_failure_;
  std::uint64_t next_seq_ = 1;
  bool accept_direct_ = false;  // (under mutex_ and issue_mutex_) accept() queues into queue_
  std::atomic<std::uint64_t> next_together_{1};
  const std::uint64_t id_;
  // Counted with atomics: callers and the progress thread never wait on each other for them.
  struct counters {
    std::atomic<std::uint64_t> requests{0}, issues{0}, packed{0}, grouped{0}, agreements{0}, assisted{0};
    std::atomic<std::uint64_t> graph_votes{0}, graph_captures{0}, graph_launches{0}, graph_chained{0};
    std::atomic<std::uint64_t> graph_votes_shared{0};
    std::atomic<std::uint64_t> most_unfreed{0};
  } stats_;
  // (Declared after members_: its kept calls let go of their buffers before the devices go.)
  detail::group_cache group_cache_;
  // Set (under mutex_) while inbox_ holds requests: the busy progress thread looks here instead
  // of taking the lock the callers submit under.
  // (On a cache line of its own: the idle progress thread reads it in a tight loop.)
  alignas(64) std::atomic<bool> inbox_flag_{false};
  bool stopping_ = false;

  // Held by whoever issues: the progress thread, or a caller that found it free (see hand_over).
  // It guards everything below, and the backend's calls.
  std::mutex issue_mutex_;
  // Set (under mutex_) when a caller issued: the progress thread must poll what it issued.
  alignas(64) std::atomic<bool> kick_{false};
  // Whether the engine is busy in the sense of hand_over (an agreement out, requests queued or
  // the packing window full), as the issuing side last left it: a caller that reads it set
  // leaves its request to the progress thread without trying issue_mutex_. (Written only when it
  // changes: in a back-to-back stream it stays set, and callers stop pulling the lock's line
  // away from the issuing thread on every submission.)
  alignas(64) std::atomic<bool> deep_{false};
  bool busy_for_callers() const;  // under issue_mutex_
  void note_depth() {             // under issue_mutex_
    const bool deep = busy_for_callers();
    if (deep_.load(std::memory_order_relaxed) != deep) deep_.store(deep, std::memory_order_relaxed);
  }
  std::deque<std::unique_ptr<detail::coll_request>> queue_;
  // The per-request group whose last request entered queue_ last: all of that call is queued, so
  // its small all_reduces need not wait in the packing window for more to come.
  std::uint64_t queued_call_end_ = 0;
  void enqueue(std::unique_ptr<detail::coll_request> r) {
    if (r->ends_call) queued_call_end_ = r->together;
    queue_.push_back(std::move(r));
  }
  // Scratch lists of the issuing side, kept for their capacity (under issue_mutex_).
  detail::member_waits scratch_waits_, scratch_mine_;
  std::vector<std::unique_ptr<detail::coll_request>> scratch_batch_;
  std::vector<detail::coll_request*> scratch_raw_;
  std::vector<const detail::coll_request*> scratch_const_;  // (start_pack_vote's)
  std::deque<std::unique_ptr<detail::coll_request>> in_flight_;
  // Finished and resolved requests not yet freed: freeing 400 requests (their buffers' and
  // batch's references) took the progress thread 80-100 us, during which the next batch's plan
  // waited. They are freed a few at a time between turns (see free_retired).
  std::deque<std::unique_ptr<detail::coll_request>> retired_;
  // Finished requests of per-request groups whose futures are not settled yet. Requests finish in
  // order, so one store of the last finished sequence number (the done mark, which the futures
  // of per-request groups read: promise::set_done_mark) tells all their waiters at once; settling
  // each future comes after, off the path of the next batch and of the callers. Fulfilling each
  // of 1000 futures (its lock and condition variable) before the packing window reopened held
  // back the next batch's plan and the last batch's callers. A request submitted alone is
  // fulfilled as it finishes: with every request on the mark, small collectives back to back
  // run 0.5-1 us slower on two H100s joined by NV18 NVLink.
  std::deque<std::unique_ptr<detail::coll_request>> resolving_;
  // How many finished requests one turn settles while other work is open: the rest wait for the
  // next turn, after the plan exchange under way has been looked at (resolving 400 futures in one
  // go held the next batch's agreement back by as long, when each was fulfilled).
  static constexpr std::size_t k_resolve_chunk = 256;
  // How many retired requests one turn frees (freeing 400 took 80-100 us; see free_retired).
  static constexpr std::size_t k_free_chunk = 64;
  // The most retired requests kept unfreed (see free_retired).
  static constexpr std::size_t k_retired_most = 1024;
  // How many requests ahead the loops over a queue ask for a request's lines (and half as many
  // for its buffers'): see coll_request::prefetch.
  static constexpr std::size_t k_prefetch_ahead = 16;
  // The most in flight that a waiting caller completes by asking whether the streams ran dry.
  static constexpr std::size_t k_idle_poll_most = 64;
  // How many in-flight requests one turn looks at (each look is a flag or an event query shared
  // by a seal's requests).
  static constexpr std::size_t k_finish_most = 1024;
  // Settled at once where a look finished no more than this many (and by a caller that finished
  // them itself); a longer run is settled at the end of the progress thread's turn.
  static constexpr std::size_t k_caller_resolves = 8;
  // How many finished futures one turn settles while a call planned whole comes in (its next
  // part waits for the turn's end; the done mark has told their waiters already).
  static constexpr std::size_t k_planned_resolves = 8;
  // How many requests submitted alone one look fulfils (the rest wait for the next look).
  static constexpr std::size_t k_fulfil_most = 64;
  std::size_t last_finished_ = 0;  // by the last complete_finished
  std::size_t last_alone_ = 0;     // of them, submitted alone
  // Fulfils up to `most` futures of resolving_ (in order) and retires their requests.
  void resolve_finished(std::size_t most);
  // Frees a chunk of retired_ (all of it where `all`).
  void free_retired(bool all);
  // Requests queued or in flight, or an exchange under way (under issue_mutex_).
  bool has_open() const {
    return !queue_.empty() || !in_flight_.empty() || exchange_ || !background_.empty() || graph_vote_ ||
           !planned_.empty();
  }
  // Work for the progress thread: anything open, or futures to fulfil.
  bool has_work() const { return has_open() || !resolving_.empty(); }
  // On a stream-ordered backend: the requests issued since the last seal (the tail of in_flight_)
  // and the writes they make, by buffer and sequence number. Until the seal their writes are not
  // published: other devices wait for it, while this world's own later requests, which run
  // after them on the same streams, are ready at once (see ready()).
  std::vector<detail::coll_request*> unsealed_;
  std::vector<std::pair<local::buffer_block*, std::uint64_t>> unsealed_writes_;
  std::vector<std::pair<local::buffer_block*, std::uint64_t>> scratch_latest_;  // (seal)
  bool unsealed_covers(const local::buffer_block* b, std::uint64_t seq) const;
  // (unsealed_ not empty) Whether the unsealed requests are all that is in flight, and few enough
  // to resolve in one turn: then "the streams ran dry" (finish_if_idle) completes every one.
  bool idle_poll_covers() const;
  // After complete_finished, where the backend does not order requests (the host backend): what
  // finished may be what the head of the queue waited for (a run of requests on one buffer), so
  // the head is issued in this look or turn, not the next one. (On a stream-ordered backend the
  // head never waits for a completion.)
  void issue_released();
  // Records the completion of the unsealed requests and publishes their writes.
  void seal();
  struct exchange;
  void finish_bulk_exchange(exchange& ex);  // (a bulk call's, see start_bulk)
  // A later bulk call of a run at the head takes its agreed cuts from run_cuts_; false (the
  // world failed, naming it) where it is not the one the run expects next.
  bool take_run_cuts(detail::coll_request& head);
  // Posts the offer of the run the head bulk call begins (its cuts, plan_length of them); true.
  bool post_bulk_offer(const detail::coll_request& head);
  static error came_between_run(const detail::coll_request& r);
  // The error of a call that ranks made differently: a bulk call here, requests made one by one
  // there, or the other way round (see k_offer_bulk).
  static error mixed_call(const detail::coll_request& head);
  std::unique_ptr<exchange> exchange_;
  // Exchanges whose outcome this rank already knows (it offered one request: the plan can only
  // be that request alone), so it issued without waiting for them; they finish in the background.
  std::deque<std::unique_ptr<exchange>> background_;
  void finish_background();
  static void settle_merged(exchange& ex);
  // Whether a packable request skips the exchange; nullopt until the exchanges it depends on are in.
  std::optional<bool> in_latency_window(std::uint64_t seq) const;
  detail::latency_window latency_window_;
  // CUDA graphs (comm_backend::graph_limit). A request the backend could replay as a graph waits
  // at the head of the queue for a vote: every rank says which capture it holds for the request's
  // buffers, whether it issued them before, and how many requests it would issue in one group
  // from the head (one all_reduce of these numbers, see graph_vote). Then all ranks issue the
  // shortest group proposed, or, alone, launch the capture they all hold, capture a new one
  // together when every rank issued these buffers before, or issue as usual. One vote also
  // decides the requests queued behind the head that every rank will issue alone (a run, up to
  // k_graph_run_most): back to back, a vote per request cost more than NCCL's host path saves.
  static constexpr std::size_t k_graph_run_most = 32;
  // A run is also cut into chains of k_graph_chain requests from its head (comm_backend's
  // graph_chains): each chain every rank holds is one graph launch, and the GPUs run its requests
  // closer together than one graph each.
  static constexpr std::size_t k_graph_chain = 8;
  static constexpr std::size_t k_graph_chains_most = k_graph_run_most / k_graph_chain;
  static constexpr std::size_t k_chain_fields = 6 + 3 * (k_graph_run_most - 1);
  struct graph_vote {
    // Reduced with MPI_MAX. [0..3]: for the head, the highest capture held, minus the lowest, 1 if
    // a rank has not issued the request's buffers before, and minus the shortest group; [4]:
    // minus the shortest run; [5]: 1 if the head came through the latency window here with a
    // per-request group (the window closes); then three numbers (as [0..2]) for each request of
    // the run after the head; then, from k_chain_fields, four for each chain of the run: as
    // [0..2] for the chain's graph, and 1 if a rank cannot issue the chain at once (a request of
    // it waits for something other than the run's requests before it).
    std::int64_t value[k_chain_fields + 4 * k_graph_chains_most] = {};
    // Through the ranks' shared memory where they are on one node (vote_shm_), else by
    // point-to-point recursive doubling (host_allreduce): Open MPI's MPI_Iallreduce took 1-2 us
    // longer at 2 ranks, on the path of every waited-for request.
    std::shared_ptr<detail::shm_reduction> shared;
    std::unique_ptr<detail::host_allreduce> reduction;
    // A packed batch's vote: its length (0: a vote on a head issued alone, with its run). Only
    // [0..2] count, for the batch's graph.
    std::size_t packed = 0;
  };
  // The votes' shared-memory channel (nullptr: by MPI). One vote is in flight at a time, and every
  // rank holds the same votes in the same order, so each is the channel's next reduction everywhere.
  std::unique_ptr<detail::shm_reducer> vote_shm_;
  // Advances the vote under way; true once its outcome is in.
  result<bool> vote_done(graph_vote& v);
  // Decisions a vote made for requests behind its head, in order, until each reaches the head.
  struct graph_decision {
    std::uint64_t seq;
    detail::comm_backend::graph_step step;
    std::uint64_t id;
    std::size_t chain = 1;  // requests from `seq` that go in one graph (1: the request alone)
    bool packed = false;    // the packed batch from `seq` (issue_packed_graph)
  };
  std::deque<graph_decision> graph_planned_;
  // Issues the head bulk call's next batch, of `n` entries, as `d` decided (none: as usual).
  void issue_bulk_batch(std::size_t n, std::optional<graph_decision> d);
  // How many requests from the head this rank will issue alone, each in turn (the head counts).
  std::size_t graph_run_local() const;
  std::unique_ptr<graph_vote> graph_vote_;
  std::optional<graph_decision> graph_decided_;
  // For each chain of the first `run` queued requests: whether it can be issued at once, every
  // request of it ready once the run's requests before it are issued (this rank's say in the vote).
  void chains_ready(std::size_t run, bool* ready_out) const;
  mutable write_list ahead_writes_;  // (scratch of chains_ready and issue_batch)
  // Drops the plan's entries of the requests a chain took from behind the head.
  void take_planned(std::size_t n);
  // The k_graph_chain queued requests from queue_[first].
  std::array<const detail::coll_request*, k_graph_chain> chain_at(std::size_t first) const;
  bool graph_voted_ = false;  // the next issue_batch is the outcome of a vote
  // Whether a request's shape could be replayed (kind and size: the same on every rank). Such a
  // request is issued alone or at the head of a group the ranks voted on, never inside a group
  // one rank made up alone: all ranks must vote on the same requests.
  bool graph_shape(const detail::coll_request& r) const;
  // issue_batch's look before issuing `n` requests from the head: true if a vote started instead.
  // (n becomes 1 where the head skips its vote.)
  bool graph_vote_first(std::size_t& n);
  void start_graph_vote(std::size_t n, bool window);
  // A packed batch of `n` from the head (agreed on by every rank) that may replay as one graph:
  // backend graph_packs(), its pack within graph_limit(), and its shape's pace not skipping.
  bool pack_graph_shape(std::size_t n) const;
  // (kept_key: the batch's key kept by a prepared call, see bulk_call::batch_keys; or null.)
  void start_pack_vote(std::span<const detail::coll_request* const> batch,
                       std::vector<std::uint64_t>* kept_key = nullptr);
  // Starts `vote` (its values filled) on the vote channel, by MPI, or, alone, finishes it.
  void send_graph_vote(std::unique_ptr<graph_vote> vote);
  void finish_pack_vote(const graph_vote& vote);
  bool window_head_ = false;  // the head being issued came through the latency window
  void finish_graph_vote();
  // Per request shape: which votes are skipped (shapes whose votes launch nothing).
  detail::graph_pacer graph_pacer_;
  // ATOMR_TRACE: this rank's request timeline, as it stands, to its file.
  void write_trace() const;
  // ATOMR_TRACE: the progress loop's phases that took long (see slow_spans.hpp).
  using slow_phase = detail::slow_phase;
  detail::slow_span_counts slow_spans_;
  // Advances an exchange; true once its plan is in.
  result<bool> exchange_done(exchange& ex);
  std::uint64_t next_exchange_ = 0;  // exchanges posted (their tags)
  // Posts this rank's offer; false (the world failed) if MPI refused it.
  bool post_exchange(exchange& ex, const detail::coll_request* head);
  // The agreed plan for the requests at the head of queue_: 1 where a request starts a batch.
  std::deque<std::uint8_t> planned_;
  // The per-request group whose plan, offered whole (detail::call_plan), planned_ holds: its batches
  // wait for the caller's later parts. 0: planned_ covers queued requests only.
  std::uint64_t planned_call_ = 0;
  // The agreed cuts of a run of bulk calls (detail::bulk_call::plan_length) for its bulk calls
  // after the first: the sequence number the next one starts at, its first entry's bit in cuts,
  // and the entries left.
  struct run_cuts {
    std::uint64_t next_seq = 0;
    std::size_t at = 0;
    std::size_t left = 0;
    std::array<std::uint8_t, detail::call_plan::k_most / 8> cuts{};
  } run_cuts_;
  int control_size_ = 1;
  int control_rank_ = 0;
  std::vector<int> world_ranks_;
  std::chrono::steady_clock::time_point last_probe_{};
  std::chrono::steady_clock::time_point last_health_{};
  alignas(64) std::atomic<bool> outside_flag_{false};        // outside_failure_ was set (read without the lock)
  std::vector<std::unique_ptr<std::vector<char>>> notices_;  // sent: kept until MPI is done with them
  std::vector<MPI_Request> notice_requests_;
  std::uint64_t completed_seq_ = 0;  // the last request completed here
  // A failure notice from another rank, with the last request that rank completed.
  std::optional<std::pair<std::uint64_t, error>> peer_failure_;
  // The CPUs that take the node's GPU interrupts (local::gpu_interrupt_cpus; ATOMR_AVOID_IRQ_CPUS):
  // a CUDA graph launch raises one as it completes, and a thread polling on such a CPU (this
  // rank's GPU's or another's) stalls 35-45 us per request on KVM guests. The progress
  // thread keeps off them, as does the thread that creates the world (the caller, usually),
  // where their affinity allows.
  std::vector<int> irq_cpus_;
  std::vector<int> gpu_interrupt_cpus() const;
  std::thread thread_;
};

}  // namespace atomr::cluster
