// The router's transport: one progress thread per rank drives MPI on a communicator of the
// router's own. Outbound, callers append encoded envelopes to a per-peer staging buffer under that
// peer's lock (which orders them); the progress thread takes the whole buffer and sends it in
// chunks of at most packet_bytes, several in flight per peer. Inbound, a ring of receives of
// packet_bytes is preposted with MPI_ANY_SOURCE and completed strictly in posting order, which is
// the order MPI matched them in, so each sender's chunks are read in the order sent; a
// stream_reader per sender cuts them back into envelopes, which are delivered in order.
//
// router_core_impl is defined across the router's files by purpose: router.cpp (lifecycle and the
// public facade), router_send.cpp (callers' way out), router_progress.cpp (the progress thread's
// turn), router_delivery.cpp (inbound envelopes to actors), router_asks.cpp (open asks and their
// deadlines), router_drain.cpp (stopping: the barrier and the goodbyes). A member that only one of
// them calls on a per-message path is declared inline here and defined in that file, so it stays
// inlinable there.
#pragma once

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstring>
#include <deque>
#include <limits>
#include <mutex>
#include <optional>
#include <shared_mutex>
#include <thread>
#include <unordered_map>

#include "atomr/cluster/mpi/wait_assist.hpp"
#include "atomr/cluster/mpi_check.hpp"
#include "atomr/cluster/router.hpp"
#include "atomr/cluster/router/stream.hpp"
#include "atomr/common/log.hpp"
#include "atomr/common/log_budget.hpp"

namespace atomr::cluster::routing {

using serialization::envelope_header;
using serialization::k_envelope_header_size;
constexpr int k_packet_tag = 7;
// At stop each rank tells each peer, on this tag, how many packets it sent it; the peer stops
// once it has received them all (even from a stream it could not read), so nothing is left
// unreceived on the communicator when it is freed.
constexpr int k_goodbye_tag = 8;
constexpr int k_send_window = 8;  // chunks in flight per peer

inline auto logger() { return log::get("router"); }

std::string actor_text(std::uint64_t actor);

class router_core_impl;

// Feeds one sender's envelopes to the core.
class delivery_sink final : public detail::stream_sink {
 public:
  delivery_sink(router_core_impl& core, int source) : core_(core), source_(source) {}
  void message(const envelope_header& h, std::span<const std::byte> payload) override;
  void oversized(const envelope_header& h) override;
  void corrupt(const error& why) override;

 private:
  router_core_impl& core_;
  int source_;
};

class router_core_impl final : public detail::router_core {
 public:
  router_core_impl(MPI_Comm comm, int rank, int size, local::actor_system& system, router_options options);
  ~router_core_impl() override = default;

  // --- router_core -------------------------------------------------------------------------------
  int rank() const noexcept override { return rank_; }
  int size() const noexcept override { return size_; }
  local::actor_system& system() noexcept override { return system_; }
  const serialization::wire_limits& limits() const noexcept override { return limits_; }
  result<void> submit(int peer, std::vector<std::byte>&& envelope) override;
  std::shared_ptr<local::progress_hook> waiter_hook() override { return hook_; }
  std::uint64_t expect_reply(int peer, const std::string& name, detail::reply_handler handler,
                             std::chrono::steady_clock::duration timeout) override;
  void abandon_reply(std::uint64_t correlation, error why) override { complete(correlation, std::move(why)); }
  result<void> publish(std::uint64_t actor, std::shared_ptr<detail::inbound_target> target) override;
  std::shared_ptr<detail::inbound_target> find(std::uint64_t actor) const override {
    std::shared_lock lock(targets_mutex_);
    const auto it = targets_.find(actor);
    return it == targets_.end() ? nullptr : it->second;
  }
  void send_reply(const envelope_header& asked, result<std::vector<std::byte>> value) override;

  // A caller waiting for a reply takes in the packets that have come itself, when the progress
  // thread is not doing so: the reply then reaches its future on its own thread, without the
  // progress thread's turn and a hand-off between cores.
  void assist() noexcept;

  // --- lifecycle ---------------------------------------------------------------------------------
  result<void> start_transport();
  result<void> listen_for_failures();
  result<void> stop();
  void peer_failed(int peer, const std::string& why);
  router_stats stats() const;
  const router_options& options() const noexcept { return options_; }

  // --- inbound (progress thread, or an assisting caller) -----------------------------------------
  inline void deliver(int source, const envelope_header& h, std::span<const std::byte> payload);
  void oversized(int source, const envelope_header& h);
  void corrupt(int source, const error& why);

 private:
  // Laid out by who writes what: a stream of tells writes only the senders' lines, so the
  // progress thread, which reads the middle line every turn while the peer is listed, does not
  // pull a line back and forth with the sender on every tell (the staged byte count and the last
  // send time used to share that line and were written per tell).
  struct peer_out {
    // Senders (under mutex).
    std::mutex mutex;
    std::vector<std::byte> staging;    // envelopes back to back, in the order accepted
    std::size_t staged = 0;            // envelopes in staging
    std::int64_t last_send_ns = 0;     // the last envelope accepted
    std::uint64_t direct_packets = 0;  // packets callers handed to MPI themselves
    std::string failure;
    bool closed = false;  // goodbye staged, nothing may follow it
    std::atomic<std::size_t> queued{0};
    // What the progress thread looks at to decide when to take the staging: written by senders
    // only at a packet's first envelope, at half a packet, and at its first ask or reply.
    alignas(64) std::atomic<std::int64_t> first_staged_ns{0};  // when staging got its first envelope
    std::atomic<bool> half_full{false};                        // staging holds half a packet
    std::atomic<bool> urgent{false};                           // staging holds an ask or a reply
    // Written by the progress thread (and by a failure).
    alignas(64) std::atomic<int> taken_unsent{0};  // buffers the progress thread took and has not fully sent
    std::atomic<bool> failed{false};
  };
  struct outgoing {
    std::vector<std::byte> bytes;
    std::size_t offset = 0;  // next byte to send
    std::size_t messages = 0;
    int chunks_open = 0;  // chunks handed to MPI, not complete
  };
  struct send_slot {
    int peer = 0;
    std::shared_ptr<outgoing> buffer;
  };
  struct pending_ask {
    int peer;
    std::string name;  // the actor's (errors say "actor \"name\" on rank N")
    detail::reply_handler handler;
    std::chrono::steady_clock::time_point due;  // its deadline (in due_ until answered)
    std::int64_t timeout_ms = 0;
    std::string target() const { return "actor \"" + name + "\" on rank " + std::to_string(peer); }
  };
  // A deadline in due_, a min-heap by time. Answered asks leave theirs behind (no search on the
  // hot path); expire_asks skips them, and push_due rebuilds the heap from pending_ whenever it
  // has grown to twice the open asks.
  struct due_entry {
    std::chrono::steady_clock::time_point at;
    std::uint64_t correlation;
    bool operator>(const due_entry& o) const { return at > o.at; }
  };
  // What the progress thread keeps while it stops (router_drain.cpp).
  struct drain_state {
    std::optional<std::chrono::steady_clock::time_point> deadline;
    bool said_goodbye = false;
  };
  friend class delivery_sink;

  // --- outbound (router_send.cpp) -----------------------------------------------------------------
  inline result<void> enqueue(int peer, std::vector<std::byte>&& envelope, bool may_block);
  inline result<void> send_direct(int peer, peer_out& o, std::vector<std::byte>&& envelope);
  result<void> wait_for_room(int peer, peer_out& o);

  void signal_output() {
    // seq_cst with the progress thread's sleeping_/has_output_ pair: one of the two sees the other.
    has_output_.store(true);
    if (sleeping_.load()) wake();
  }

  // The flags field of the envelope starting at `at` in `bytes` (one this rank encoded), 0 if short.
  static std::uint16_t envelope_flags(const std::vector<std::byte>& bytes, std::size_t at) {
    std::uint16_t flags = 0;
    if (bytes.size() >= at + k_envelope_header_size) {
      std::memcpy(&flags, bytes.data() + at + serialization::k_envelope_flags_offset, sizeof(flags));
    }
    return flags;
  }
  static bool is_ask_or_reply(std::uint16_t flags) {
    return (flags & (serialization::k_flag_ask | serialization::k_flag_reply)) != 0;
  }

  static std::int64_t now_ns() { return std::chrono::steady_clock::now().time_since_epoch().count(); }

  void wake() {
    std::lock_guard lock(wake_mutex_);
    wake_cv_.notify_one();
  }

  // --- asks (router_asks.cpp) ---------------------------------------------------------------------
  // Under pending_mutex_: whether `peer` failed (then `why` holds the error).
  bool failed_peer_reason(int peer, std::optional<error>& why);
  // Under pending_mutex_.
  void push_due(std::chrono::steady_clock::time_point at, std::uint64_t correlation);

  // The open ask `correlation` taken out (none if answered already, or not from `peer` when given).
  std::optional<pending_ask> take_pending(std::uint64_t correlation, int peer = -1) {
    std::lock_guard lock(pending_mutex_);
    const auto it = pending_.find(correlation);
    if (it == pending_.end() || (peer >= 0 && it->second.peer != peer)) return std::nullopt;
    std::optional<pending_ask> p(std::move(it->second));
    pending_.erase(it);
    return p;
  }

  void complete(std::uint64_t correlation, result<std::span<const std::byte>> value) {
    if (auto p = take_pending(correlation)) p->handler(std::move(value));
  }

  // Fails the asks whose deadline has passed (the progress thread, every turn it finds one due):
  // the router keeps its own deadlines, so an ask costs no timer of the actor system (a lock, an
  // allocation, and an entry that stayed queued until its time even after the answer came).
  void expire_asks(std::chrono::steady_clock::time_point now) {
    if (now.time_since_epoch().count() < next_due_ns_.load(std::memory_order_relaxed)) return;
    expire_due(now);
  }
  void expire_due(std::chrono::steady_clock::time_point now);
  // Every open ask answered with `why` (the router stopped, or its transport failed).
  void fail_open_asks(const std::string& prefix, const std::string& suffix);

  // --- inbound (router_delivery.cpp) --------------------------------------------------------------
  inline void deliver_reply(int source, const envelope_header& h, std::span<const std::byte> payload);
  void refuse(const envelope_header& h, const error& why);
  std::string unknown_actor(std::uint64_t actor) const;

  // Actors given messages from the packet in hand are woken once, at its end (or every 64
  // messages), not once per message: each wake-up can cost the progress thread a system call.
  void defer_wake(const std::shared_ptr<detail::inbound_target>& target) {
    if (std::find(to_wake_.begin(), to_wake_.end(), target) == to_wake_.end()) to_wake_.push_back(target);
    if (++deferred_ >= 64) wake_actors();
  }
  void wake_actors() {
    for (auto& t : to_wake_) t->flush();
    to_wake_.clear();
    deferred_ = 0;
  }

  std::shared_ptr<detail::inbound_target> cached_find(std::uint64_t actor) {
    // Streams of many messages go to one actor: skip the shared lock while it stays the same
    // and alive. (The cache holds a reference; a stopped actor drops out at the alive() check.)
    if (cache_ && cache_actor_ == actor && cache_->alive()) return cache_;
    cache_ = find(actor);
    cache_actor_ = actor;
    if (cache_ && !cache_->alive()) cache_.reset();
    return cache_;
  }

  // --- the progress thread (router_progress.cpp) --------------------------------------------------
  result<void> post_receive(std::size_t i) {
    return ATOMR_MPI_CHECK(MPI_Irecv(recv_buffers_[i].data(), static_cast<int>(options_.packet_bytes), MPI_BYTE,
                                     MPI_ANY_SOURCE, k_packet_tag, comm_, &recv_requests_[i]));
  }
  void run();
  inline void take_staging(int p, peer_out& o);
  inline result<void> progress_once(bool& active, std::chrono::steady_clock::time_point now);
  inline void take_handoffs(bool& active);
  inline void take_due_staging(bool& active, std::chrono::steady_clock::time_point now);
  inline result<void> send_chunks(bool& active);
  inline result<void> finish_sends(bool& active);
  void release_finished_sends(int done);
  inline result<void> receive_packets(bool& active);

  // --- stopping (router_drain.cpp) ----------------------------------------------------------------
  enum class drain_step { go_on, end };
  // The progress thread's turn while stop() waits: the barrier, then the goodbyes.
  drain_step drain_turn(drain_state& state, std::chrono::steady_clock::time_point now, bool& active);
  bool finished_goodbyes();
  bool any_peer_failed() const;
  bool nothing_to_send() const;
  result<void> say_goodbye();
  // Collects goodbyes; true when each live peer's has come and all its packets are in.
  result<bool> poll_goodbyes();
  bool heard_all_goodbyes();
  std::string drain_status() const;
  void release_requests();
  void fail_transport(const error& e);

  MPI_Comm comm_;
  const int rank_;
  const int size_;
  local::actor_system& system_;
  const router_options options_;
  const serialization::wire_limits limits_;

  std::atomic<bool> accepting_{true};
  std::atomic<bool> stop_requested_{false};
  std::atomic<bool> stopped_once_{false};
  std::uint64_t listener_ = 0;
  MPI_Request stop_barrier_ = MPI_REQUEST_NULL;
  result<void> stop_result_ = ok();

  std::vector<std::unique_ptr<peer_out>> out_;
  std::atomic<bool> has_output_{false};
  std::mutex room_mutex_;
  std::condition_variable room_;
  std::mutex wake_mutex_;
  std::condition_variable wake_cv_;
  std::atomic<bool> sleeping_{false};

  std::mutex pending_mutex_;
  std::unordered_map<std::uint64_t, pending_ask> pending_;
  std::vector<due_entry> due_;  // under pending_mutex_
  // The earliest deadline in due_ (ns since the clock's epoch; max when none): the progress thread
  // looks at due_ only once it has passed. May be early (an answered ask), never late.
  std::atomic<std::int64_t> next_due_ns_{std::numeric_limits<std::int64_t>::max()};
  std::atomic<std::uint64_t> next_correlation_{1};

  mutable std::shared_mutex targets_mutex_;
  std::unordered_map<std::uint64_t, std::shared_ptr<detail::inbound_target>> targets_;
  std::unordered_map<std::uint64_t, std::string> stopped_;  // names of published actors that stopped

  // Progress thread only.
  std::thread thread_;
  std::atomic<std::thread::id> progress_id_{};
  std::vector<std::deque<std::shared_ptr<outgoing>>> sending_;
  std::vector<int> sending_peers_;    // the peers whose sending_ queue may be non-empty
  std::vector<char> sending_listed_;  // per peer: in sending_peers_
  std::mutex dirty_mutex_;            // (taken inside a peer_out's mutex, never the other way)
  std::vector<int> dirty_;            // peers whose staging got its first envelope since taken
  std::vector<int> dirty_taken_;      // the progress thread's copy (kept to reuse its memory)
  std::vector<int> in_flight_per_peer_;
  std::vector<MPI_Request> send_requests_;
  std::vector<send_slot> send_slots_;
  std::vector<int> completed_;
  std::vector<std::vector<std::byte>> spare_;
  std::vector<std::vector<std::byte>> recv_buffers_;
  std::vector<MPI_Request> recv_requests_;
  std::size_t head_ = 0;
  std::vector<detail::stream_reader> readers_;
  std::vector<char> goodbye_from_;
  std::vector<int> staged_peers_;           // the peers whose staging waits to be taken
  std::vector<char> staged_listed_;         // per peer: in staged_peers_
  std::vector<std::int64_t> last_take_ns_;  // per peer: when its staging was last taken (see progress_once)
  struct handed_off {
    int peer = 0;
    MPI_Request request = MPI_REQUEST_NULL;
    std::shared_ptr<outgoing> buffer;
  };
  std::mutex handoff_mutex_;
  std::vector<handed_off> handoff_;           // callers' direct sends still in flight (under handoff_mutex_)
  std::vector<handed_off> handoff_taken_;     // the progress thread's copy
  std::vector<std::uint64_t> goodbye_sent_;   // what the goodbye to each peer says (kept for MPI)
  std::vector<std::uint64_t> packets_to_;     // packets the progress thread sent to each peer
  std::vector<std::uint64_t> packets_from_;   // packets received from each peer
  std::vector<std::uint64_t> goodbye_count_;  // packets each peer says it sent here
  std::vector<MPI_Request> goodbye_requests_;
  MPI_Request goodbye_recv_ = MPI_REQUEST_NULL;
  std::uint64_t goodbye_value_ = 0;
  // What wait() on an ask's future calls (local::progress_hook): assist, while the router lives.
  class receive_hook final : public local::progress_hook {
   public:
    explicit receive_hook(std::weak_ptr<router_core_impl> core) : core_(std::move(core)) {}
    void progress() noexcept override {
      if (auto core = core_.lock()) core->assist();
    }

   private:
    std::weak_ptr<router_core_impl> core_;  // (a future may outlive the router)
  };
  std::shared_ptr<receive_hook> hook_;
  // Held by whoever takes in packets (the progress thread or an assisting caller); guards the
  // receive ring, the stream readers and everything delivery touches below.
  std::mutex recv_mutex_;
  bool receiving_open_ = true;              // under recv_mutex_: false once the progress thread ended
  local::producer_tokens delivery_tokens_;  // under recv_mutex_: what deliveries enqueue with
  std::optional<error> assist_error_;       // under recv_mutex_: an MPI error met by a caller
  detail::assist_stamp assisted_;           // when a caller last assisted: receiving is left to it meanwhile
  std::vector<std::shared_ptr<detail::inbound_target>> to_wake_;
  int deferred_ = 0;
  std::shared_ptr<detail::inbound_target> cache_;
  std::uint64_t cache_actor_ = 0;

  // A sender flooding a missing or full actor must not flood the log: 10 dead-letter lines a
  // second, the rest counted (stats().dead_letters has them all).
  log_budget dead_letter_log_{10, std::chrono::seconds(1)};
  std::atomic<std::uint64_t> sent_{0}, received_{0}, dead_letters_{0}, malformed_{0}, packets_sent_{0},
      packets_received_{0}, direct_sent_{0};
  std::atomic<std::int64_t> last_packet_ns_{0};
};

}  // namespace atomr::cluster::routing
