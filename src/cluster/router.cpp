// The router's transport: one progress thread per rank drives MPI on a communicator of the
// router's own. Outbound, callers append encoded envelopes to a per-peer staging buffer under that
// peer's lock (which orders them); the progress thread takes the whole buffer and sends it in
// chunks of at most packet_bytes, several in flight per peer. Inbound, a ring of receives of
// packet_bytes is preposted with MPI_ANY_SOURCE and completed strictly in posting order, which is
// the order MPI matched them in, so each sender's chunks are read in the order sent; a
// stream_reader per sender cuts them back into envelopes, which are delivered in order.
#include "atomr/cluster/router.hpp"

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <cstring>
#include <deque>
#include <limits>
#include <mutex>
#include <shared_mutex>
#include <thread>
#include <unordered_map>

#include "atomr/cluster/liveness.hpp"
#include "atomr/cluster/mpi_check.hpp"
#include "atomr/common/log.hpp"
#include "atomr/common/spin.hpp"
#include "atomr/common/tunables.hpp"
#include "router_stream.hpp"
#include "wait_assist.hpp"

namespace atomr::cluster {

namespace detail {
namespace {
thread_local decode_context* t_decode = nullptr;
thread_local router_core* t_encode = nullptr;
}  // namespace

decode_context* current_decode() noexcept { return t_decode; }
router_core* current_encode() noexcept { return t_encode; }
decode_pause::decode_pause() noexcept : saved_(std::exchange(t_decode, nullptr)) {}
decode_pause::~decode_pause() { t_decode = saved_; }
encode_scope::encode_scope(router_core* core) : previous(t_encode) { t_encode = core; }
encode_scope::~encode_scope() { t_encode = previous; }
}  // namespace detail

namespace {

using serialization::envelope_header;
using serialization::k_envelope_header_size;
constexpr int k_packet_tag = 7;
// At stop each rank tells each peer, on this tag, how many packets it sent it; the peer stops
// once it has received them all (even from a stream it could not read), so nothing is left
// unreceived on the communicator when it is freed.
constexpr int k_goodbye_tag = 8;
constexpr int k_send_window = 8;  // chunks in flight per peer

auto logger() { return log::get("router"); }

std::string actor_text(std::uint64_t actor) {
  char buf[32];
  std::snprintf(buf, sizeof(buf), "#%llx", static_cast<unsigned long long>(actor));
  return buf;
}

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
  router_core_impl(MPI_Comm comm, int rank, int size, local::actor_system& system, router_options options)
      : comm_(comm),
        rank_(rank),
        size_(size),
        system_(system),
        options_(options),
        limits_(serialization::default_wire_limits()) {
    for (int p = 0; p < size_; ++p) {
      out_.push_back(std::make_unique<peer_out>());
      readers_.emplace_back(limits_);
    }
    sending_.resize(static_cast<std::size_t>(size_));
    sending_listed_.assign(static_cast<std::size_t>(size_), 0);
    in_flight_per_peer_.assign(static_cast<std::size_t>(size_), 0);
    goodbye_from_.assign(static_cast<std::size_t>(size_), 0);
    packets_to_.assign(static_cast<std::size_t>(size_), 0);
    goodbye_sent_.assign(static_cast<std::size_t>(size_), 0);
    staged_listed_.assign(static_cast<std::size_t>(size_), 0);
    last_take_ns_.assign(static_cast<std::size_t>(size_), std::numeric_limits<std::int64_t>::min() / 2);
    packets_from_.assign(static_cast<std::size_t>(size_), 0);
    goodbye_count_.assign(static_cast<std::size_t>(size_), 0);
  }

  ~router_core_impl() override = default;

  // --- router_core -------------------------------------------------------------------------------
  int rank() const noexcept override { return rank_; }
  int size() const noexcept override { return size_; }
  local::actor_system& system() noexcept override { return system_; }
  const serialization::wire_limits& limits() const noexcept override { return limits_; }

  result<void> submit(int peer, std::vector<std::byte>&& envelope) override {
    if (peer < 0 || peer >= size_) {
      return error(errc::invalid_argument,
                   "rank " + std::to_string(peer) + " is not in the job (" + std::to_string(size_) + " ranks)");
    }
    if (!accepting_.load(std::memory_order_acquire)) {
      return error(errc::unavailable, "the router of rank " + std::to_string(rank_) + " has stopped");
    }
    return enqueue(peer, std::move(envelope),
                   std::this_thread::get_id() != progress_id_.load(std::memory_order_relaxed));
  }

  std::shared_ptr<local::progress_hook> waiter_hook() override { return hook_; }

  // A caller waiting for a reply takes in the packets that have come itself, when the progress
  // thread is not doing so: the reply then reaches its future on its own thread, without the
  // progress thread's turn and a hand-off between cores.
  void assist() noexcept {
    assisted_.mark();
    std::unique_lock receiving(recv_mutex_, std::try_to_lock);
    if (!receiving.owns_lock() || !receiving_open_ || assist_error_) return;
    bool active = false;
    // An MPI error here is the progress thread's to act on (it fails the transport).
    if (auto r = receive_packets(active); !r) assist_error_ = std::move(r).error_value();
  }

  std::uint64_t expect_reply(int peer, const std::string& name, detail::reply_handler handler,
                             std::chrono::steady_clock::duration timeout) override {
    const std::uint64_t correlation = next_correlation_.fetch_add(1, std::memory_order_relaxed);
    const auto due = std::chrono::steady_clock::now() + timeout;
    const auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(timeout).count();
    std::optional<error> refused;
    {
      std::lock_guard lock(pending_mutex_);
      if (failed_peer_reason(peer, refused)) {
        // Answered below, after the lock.
      } else {
        pending_.emplace(correlation, pending_ask{peer, name, std::move(handler), due, ms});
        push_due(due, correlation);
        const auto ns = due.time_since_epoch().count();
        if (ns < next_due_ns_.load(std::memory_order_relaxed)) next_due_ns_.store(ns, std::memory_order_relaxed);
        return correlation;
      }
    }
    handler(std::move(*refused));
    return correlation;
  }

  void abandon_reply(std::uint64_t correlation, error why) override { complete(correlation, std::move(why)); }

  result<void> publish(std::uint64_t actor, std::shared_ptr<detail::inbound_target> target) override {
    {
      std::unique_lock lock(targets_mutex_);
      const auto it = targets_.find(actor);
      if (it != targets_.end() && it->second->alive()) {
        if (it->second->actor_id() == target->actor_id()) return ok();
        return error(errc::invalid_argument, "the name \"" + target->name() + "\" is already published on rank " +
                                                 std::to_string(rank_) + " by another actor");
      }
      targets_[actor] = target;
      stopped_.erase(actor);
    }
    target->when_stopped([weak = weak_from_this(), actor, id = target->actor_id(), name = target->name()] {
      auto core = std::static_pointer_cast<router_core_impl>(weak.lock());
      if (!core) return;
      std::unique_lock lock(core->targets_mutex_);
      const auto it = core->targets_.find(actor);
      if (it != core->targets_.end() && it->second->actor_id() == id) {
        core->targets_.erase(it);
        core->stopped_[actor] = name;
      }
    });
    return ok();
  }

  std::shared_ptr<detail::inbound_target> find(std::uint64_t actor) const override {
    std::shared_lock lock(targets_mutex_);
    const auto it = targets_.find(actor);
    return it == targets_.end() ? nullptr : it->second;
  }

  void send_reply(const envelope_header& asked, result<std::vector<std::byte>> value) override {
    serialization::envelope_route route;
    route.source = asked.destination;
    route.destination = asked.source;
    route.flags = serialization::k_flag_reply;
    route.correlation_id = asked.correlation_id;
    std::vector<std::byte> out;
    if (value && value->size() < k_envelope_header_size) {
      value = error(errc::internal, "a reply's bytes came without room for the envelope header");
    }
    if (value) {
      const std::size_t payload = value->size() - k_envelope_header_size;
      envelope_header h;
      h.flags = route.flags;
      h.type_id = k_reply_type_id;
      h.payload_length = static_cast<std::uint32_t>(payload);
      h.correlation_id = route.correlation_id;
      h.source = route.source;
      h.destination = route.destination;
      if (payload > limits_.max_payload_bytes) {
        value =
            error(errc::invalid_argument, "the reply of " + std::to_string(payload) + " bytes exceeds the limit of " +
                                              std::to_string(limits_.max_payload_bytes) + " (ATOMR_WIRE_MAX_PAYLOAD)");
      } else {
        out = std::move(*value);
        serialization::detail::write_header(out.data(), h);
      }
    }
    if (!value) {
      auto encoded = detail::encode_envelope_of(route, serialization::to_reply(value.error_value()), limits_);
      if (!encoded) return;
      out = std::move(*encoded);
    }
    // Replies are sent even while stopping (the asker is still draining) and never wait for room:
    // the progress thread itself may be the one answering.
    if (auto sent = enqueue(static_cast<int>(asked.source.rank), std::move(out), false); !sent) {
      logger()->debug("reply to rank {} not sent: {}", asked.source.rank, sent.error_value().describe());
    }
  }

  // --- lifecycle ---------------------------------------------------------------------------------
  result<void> start_transport() {
    const std::size_t ring = std::clamp<std::size_t>(static_cast<std::size_t>(4 * (size_ - 1)), 16, 256);
    recv_buffers_.resize(ring);
    recv_requests_.assign(ring, MPI_REQUEST_NULL);
    for (std::size_t i = 0; i < ring; ++i) {
      recv_buffers_[i].resize(options_.packet_bytes);
      ATOMR_TRY(post_receive(i));
    }
    if (detail::wait_assist_enabled())
      hook_ = std::make_shared<receive_hook>(std::static_pointer_cast<router_core_impl>(shared_from_this()));
    thread_ = std::thread([this] {
      run();
      // Callers stop taking in packets before stop() cancels the receives.
      std::lock_guard receiving(recv_mutex_);
      receiving_open_ = false;
    });
    return ok();
  }

  result<void> listen_for_failures() {
    ATOMR_ASSIGN_OR_RETURN(listener_,
                           add_failure_listener(comm_, [weak = weak_from_this()](int peer, const std::string& text) {
                             if (auto core = std::static_pointer_cast<router_core_impl>(weak.lock())) {
                               core->peer_failed(peer, text);
                             }
                           }));
    return ok();
  }

  result<void> stop() {
    if (stopped_once_.exchange(true)) return stop_result_;
    remove_failure_listener(listener_);
    // Sends stay open until every rank has entered stop() (the progress thread's barrier): a rank
    // that is still waiting for an answer from this one gets it.
    stop_requested_.store(true, std::memory_order_release);
    wake();
    if (thread_.joinable()) thread_.join();
    // Asks still open get their answer now.
    std::unordered_map<std::uint64_t, pending_ask> open;
    {
      std::lock_guard lock(pending_mutex_);
      open.swap(pending_);
      due_.clear();
    }
    for (auto& [id, p] : open) {
      p.handler(error(errc::unavailable,
                      "the router of rank " + std::to_string(rank_) + " stopped before " + p.target() + " answered"));
    }
    for (auto& r : recv_requests_) {
      if (r == MPI_REQUEST_NULL) continue;
      MPI_Cancel(&r);
      MPI_Wait(&r, MPI_STATUS_IGNORE);
    }
    for (auto& h : handoff_) {
      send_requests_.push_back(h.request);
      send_slots_.push_back({h.peer, std::move(h.buffer)});
    }
    handoff_.clear();
    for (auto& r : send_requests_) {
      if (r != MPI_REQUEST_NULL) MPI_Request_free(&r);
    }
    // A barrier still open (a rank did not reach stop() within the drain timeout) cannot be freed
    // or cancelled: MPI forbids both for a nonblocking collective, and Open MPI aborts the job
    // with MPI_ERR_REQUEST (seen under TSan at 4 ranks). It is left to complete when the late
    // rank arrives; only its handle is dropped. Its communicator is kept too (never freed): Open
    // MPI's libnbc went on with the barrier when the late rank came, on the freed communicator,
    // and the next MPI call of the process crashed in mca_pml_ob1_isend (router_test at 4 ranks
    // under TSan, one rank 30 s late on a loaded 2-core machine).
    bool barrier_open = false;
    if (stop_barrier_ != MPI_REQUEST_NULL) {
      int done = 0;
      MPI_Test(&stop_barrier_, &done, MPI_STATUS_IGNORE);
      barrier_open = done == 0;
      stop_barrier_ = MPI_REQUEST_NULL;
    }
    if (goodbye_recv_ != MPI_REQUEST_NULL) {
      MPI_Cancel(&goodbye_recv_);
      MPI_Wait(&goodbye_recv_, MPI_STATUS_IGNORE);
    }
    for (auto& r : goodbye_requests_) {
      if (r != MPI_REQUEST_NULL) MPI_Request_free(&r);
    }
    if (barrier_open) {
      comm_ = MPI_COMM_NULL;  // (kept for the late barrier: a communicator, not freed, until MPI_Finalize)
    } else {
      MPI_Comm_free(&comm_);
    }
    return stop_result_;
  }

  void peer_failed(int peer, const std::string& why) {
    if (peer < 0 || peer >= size_) return;
    {
      std::lock_guard lock(out_[static_cast<std::size_t>(peer)]->mutex);
      auto& o = *out_[static_cast<std::size_t>(peer)];
      if (o.failed.load()) return;
      o.failure = why;
      o.failed.store(true, std::memory_order_release);
    }
    std::vector<pending_ask> doomed;
    {
      std::lock_guard lock(pending_mutex_);
      for (auto it = pending_.begin(); it != pending_.end();) {
        if (it->second.peer == peer) {
          doomed.push_back(std::move(it->second));
          it = pending_.erase(it);
        } else {
          ++it;
        }
      }
    }
    for (auto& p : doomed) {
      p.handler(error(errc::unavailable, "ask to " + p.target() + " failed: " + why));
    }
    room_.notify_all();
    wake();
  }

  router_stats stats() const {
    router_stats s;
    s.sent = sent_.load();
    s.received = received_.load();
    s.dead_letters = dead_letters_.load();
    s.malformed = malformed_.load();
    s.packets_sent = packets_sent_.load();
    s.packets_received = packets_received_.load();
    s.last_packet_ns = last_packet_ns_.load(std::memory_order_relaxed);
    s.direct = direct_sent_.load();
    return s;
  }
  const router_options& options() const noexcept { return options_; }

  // --- inbound (progress thread) -----------------------------------------------------------------
  void deliver(int source, const envelope_header& h, std::span<const std::byte> payload) {
    received_.fetch_add(1, std::memory_order_relaxed);
    if (static_cast<int>(h.source.rank) != source || static_cast<int>(h.destination.rank) != rank_) {
      malformed_.fetch_add(1, std::memory_order_relaxed);
      logger()->warn("rank {} sent an envelope addressed from rank {} to rank {}; dropped", source, h.source.rank,
                     h.destination.rank);
      return;
    }
    if (h.flags & serialization::k_flag_reply) {
      deliver_reply(source, h, payload);
      return;
    }
    const bool ask = (h.flags & serialization::k_flag_ask) != 0;
    auto target = cached_find(h.destination.actor);
    if (!target) {
      std::string who;
      {
        std::shared_lock lock(targets_mutex_);
        const auto it = stopped_.find(h.destination.actor);
        who = it == stopped_.end() ? "no actor " + actor_text(h.destination.actor) : "actor \"" + it->second + "\"";
        if (it != stopped_.end()) {
          who += " on rank " + std::to_string(rank_) + " stopped";
        } else {
          who += " on rank " + std::to_string(rank_);
        }
      }
      refuse(h, error(errc::unavailable, who));
      return;
    }
    detail::decode_context ctx{this, h, false};
    detail::decode_context* const previous = std::exchange(detail::t_decode, &ctx);
    auto delivered = target->deliver(h.type_id, payload);
    detail::t_decode = previous;
    if (delivered && *delivered) defer_wake(target);
    if (!delivered) {
      if (delivered.error_value().code() == errc::protocol) {
        malformed_.fetch_add(1, std::memory_order_relaxed);
        logger()->warn("rank {} sent bytes that do not decode: {}", source, delivered.error_value().message());
      }
      if (ctx.reply_bound) return;  // the dropped reply_to has answered the asker
      refuse(h, delivered.error_value().with_context("delivering to actor \"" + target->name() + "\" on rank " +
                                                     std::to_string(rank_)));
      return;
    }
    if (ask && !ctx.reply_bound) {
      send_reply(h, error(errc::invalid_argument, "actor \"" + target->name() + "\" on rank " + std::to_string(rank_) +
                                                      " was asked with message type id " + std::to_string(h.type_id) +
                                                      ", which carries no reply_to"));
    }
  }

  void oversized(int source, const envelope_header& h) {
    malformed_.fetch_add(1, std::memory_order_relaxed);
    const error why(errc::protocol, "rank " + std::to_string(source) + " sent a payload of " +
                                        std::to_string(h.payload_length) + " bytes, over this rank's limit of " +
                                        std::to_string(limits_.max_payload_bytes) + " (ATOMR_WIRE_MAX_PAYLOAD)");
    logger()->warn("{}; skipped", why.message());
    if ((h.flags & serialization::k_flag_ask) && static_cast<int>(h.source.rank) == source) send_reply(h, why);
  }

  void corrupt(int source, const error& why) {
    malformed_.fetch_add(1, std::memory_order_relaxed);
    logger()->error("the byte stream from rank {} is malformed ({}); nothing more from rank {} is read", source,
                    why.message(), source);
  }

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
  friend class delivery_sink;

  // Under pending_mutex_: whether `peer` failed (then `why` holds the error).
  bool failed_peer_reason(int peer, std::optional<error>& why) {
    if (peer < 0 || peer >= size_) return false;
    auto& o = *out_[static_cast<std::size_t>(peer)];
    if (!o.failed.load(std::memory_order_acquire)) return false;
    std::lock_guard lock(o.mutex);
    why = error(errc::unavailable, "rank " + std::to_string(peer) + " failed: " + o.failure);
    return true;
  }

  // Two ways out. A caller whose peer is quiet (nothing staged or unsent, nothing accepted in the
  // last direct_gap) hands its envelope to MPI itself: no hand-off to the progress thread, which is
  // what an ask or a reply across ranks waits for. Otherwise the envelope is staged behind the
  // others, and the progress thread sends the staging as one packet once it is half a packet, holds
  // an ask or a reply, or is `cork` old: a stream of tells goes out as packets of many envelopes,
  // so that neither side pays an MPI message per tell. Both ways keep the order per peer: a caller
  // sends itself only when nothing older is staged or unsent.
  result<void> enqueue(int peer, std::vector<std::byte>&& envelope, bool may_block) {
    auto& o = *out_[static_cast<std::size_t>(peer)];
    if (may_block && o.queued.load(std::memory_order_acquire) >= options_.queue_limit) {
      ATOMR_TRY(wait_for_room(peer, o));
    }
    bool first = false;
    {
      std::lock_guard lock(o.mutex);
      if (o.failed.load(std::memory_order_relaxed)) {
        return error(errc::unavailable, "rank " + std::to_string(peer) + " failed: " + o.failure);
      }
      if (o.closed) {
        return error(errc::unavailable, "the router of rank " + std::to_string(rank_) + " has said goodbye to rank " +
                                            std::to_string(peer) + " (stopped)");
      }
      const std::int64_t now = now_ns();
      const bool quiet = now - o.last_send_ns >= options_.direct_gap.count() * 1000;
      o.last_send_ns = now;
      if (quiet && options_.direct_gap.count() > 0 && o.staged == 0 &&
          o.taken_unsent.load(std::memory_order_acquire) == 0 && envelope.size() <= options_.packet_bytes) {
        return send_direct(peer, o, std::move(envelope));
      }
      const std::size_t envelope_at = o.staging.size();
      if (o.staging.empty()) {
        o.staging.swap(envelope);
      } else {
        o.staging.insert(o.staging.end(), envelope.begin(), envelope.end());
      }
      if (o.staging.size() * 2 >= options_.packet_bytes && !o.half_full.load(std::memory_order_relaxed)) {
        o.half_full.store(true, std::memory_order_relaxed);
      }
      if (o.staged++ == 0) {
        // The first envelope since the progress thread last took this peer's: list the peer, so
        // that the progress thread looks at the peers with output, not at every peer.
        o.first_staged_ns.store(now, std::memory_order_relaxed);
        std::lock_guard listed(dirty_mutex_);
        dirty_.push_back(peer);
        first = true;
      }
      if (!o.urgent.load(std::memory_order_relaxed) && is_ask_or_reply(envelope_flags(o.staging, envelope_at))) {
        o.urgent.store(true, std::memory_order_relaxed);
        first = true;
      }
      o.queued.fetch_add(1, std::memory_order_acq_rel);
    }
    // Only news wakes the progress thread: a tell behind others already staged costs the caller
    // no write to a line the progress thread spins on.
    if (first) signal_output();
    return ok();
  }

  // Under o.mutex (which orders it against the other senders to this peer).
  result<void> send_direct(int peer, peer_out& o, std::vector<std::byte>&& envelope) {
    MPI_Request r;
    ATOMR_TRY(ATOMR_MPI_CHECK(
        MPI_Isend(envelope.data(), static_cast<int>(envelope.size()), MPI_BYTE, peer, k_packet_tag, comm_, &r)));
    ++o.direct_packets;
    sent_.fetch_add(1, std::memory_order_relaxed);
    packets_sent_.fetch_add(1, std::memory_order_relaxed);
    direct_sent_.fetch_add(1, std::memory_order_relaxed);
    int done = 0;
    const auto tested = ATOMR_MPI_CHECK(MPI_Test(&r, &done, MPI_STATUS_IGNORE));
    if (tested && done) return ok();  // (small messages: copied out at once)
    // Still in flight (or its test failed): the progress thread sees it through, keeping the
    // bytes alive until then.
    auto buffer = std::make_shared<outgoing>();
    buffer->bytes = std::move(envelope);
    buffer->offset = buffer->bytes.size();
    buffer->chunks_open = 1;
    {
      std::lock_guard lock(handoff_mutex_);
      handoff_.push_back({peer, r, std::move(buffer)});
    }
    signal_output();
    return tested;
  }

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

  result<void> wait_for_room(int peer, peer_out& o) {
    const std::string full = "the router's queue to rank " + std::to_string(peer) + " is full (" +
                             std::to_string(options_.queue_limit) + " messages, ATOMR_ROUTER_QUEUE)";
    if (options_.on_full == overflow::fail) return error(errc::resource_exhausted, full);
    std::unique_lock lock(room_mutex_);
    const bool room = room_.wait_for(lock, options_.block_timeout, [&] {
      return o.queued.load(std::memory_order_acquire) < options_.queue_limit || o.failed.load() || !accepting_.load();
    });
    if (!room) {
      return error(errc::timeout, full + "; no room within " + std::to_string(options_.block_timeout.count()) + " ms");
    }
    return ok();
  }

  void wake() {
    std::lock_guard lock(wake_mutex_);
    wake_cv_.notify_one();
  }

  // Under pending_mutex_.
  void push_due(std::chrono::steady_clock::time_point at, std::uint64_t correlation) {
    if (due_.size() >= 64 && due_.size() >= 2 * pending_.size()) {
      due_.clear();
      for (const auto& [id, p] : pending_) due_.push_back({p.due, id});
      std::make_heap(due_.begin(), due_.end(), std::greater<>());
    }
    due_.push_back({at, correlation});
    std::push_heap(due_.begin(), due_.end(), std::greater<>());
  }

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
    std::vector<pending_ask> late;
    {
      std::lock_guard lock(pending_mutex_);
      while (!due_.empty() && due_.front().at <= now) {
        const auto it = pending_.find(due_.front().correlation);
        std::pop_heap(due_.begin(), due_.end(), std::greater<>());
        due_.pop_back();
        if (it == pending_.end()) continue;
        late.push_back(std::move(it->second));
        pending_.erase(it);
      }
      next_due_ns_.store(
          due_.empty() ? std::numeric_limits<std::int64_t>::max() : due_.front().at.time_since_epoch().count(),
          std::memory_order_relaxed);
    }
    for (auto& p : late) {
      p.handler(error(errc::timeout,
                      "ask to " + p.target() + " got no reply within " + std::to_string(p.timeout_ms) + " ms"));
    }
  }

  void deliver_reply(int source, const envelope_header& h, std::span<const std::byte> payload) {
    auto p = take_pending(h.correlation_id, source);
    if (!p) {
      // Late (after the deadline) or not ours: nothing waits for it.
      logger()->debug("reply {} from rank {} matches no open ask; dropped", h.correlation_id, source);
      return;
    }
    if (h.type_id == k_reply_type_id) {
      p->handler(payload);
      return;
    }
    if (h.type_id == serialization::message_id<serialization::error_reply>()) {
      auto reply = serialization::decode<serialization::error_reply>(payload, "error_reply", limits_);
      if (!reply) {
        p->handler(reply.error_value().with_context("reading the error reply of " + p->target()));
        return;
      }
      error e = serialization::to_error(*reply);
      // The far rank knows a named actor it never had only by its id; this side knows the name.
      const std::string unknown = "no actor " + actor_text(h.source.actor) + " on rank " + std::to_string(source);
      if (e.code() == errc::unavailable && e.message() == unknown) e = error(errc::unavailable, "no " + p->target());
      p->handler(std::move(e));
      return;
    }
    p->handler(
        error(errc::protocol, "the reply of " + p->target() + " has message type id " + std::to_string(h.type_id)));
  }

  void refuse(const envelope_header& h, const error& why) {
    if (h.flags & serialization::k_flag_ask) {
      send_reply(h, why);
      return;
    }
    dead_letters_.fetch_add(1, std::memory_order_relaxed);
    logger()->warn("dead letter: message type id {} from rank {}: {}", h.type_id, h.source.rank, why.message());
  }

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

  result<void> post_receive(std::size_t i) {
    return ATOMR_MPI_CHECK(MPI_Irecv(recv_buffers_[i].data(), static_cast<int>(options_.packet_bytes), MPI_BYTE,
                                     MPI_ANY_SOURCE, k_packet_tag, comm_, &recv_requests_[i]));
  }

  // --- the progress thread -----------------------------------------------------------------------
  void run() {
    progress_id_.store(std::this_thread::get_id(), std::memory_order_relaxed);
    const spin_relax relax;
    auto last_activity = std::chrono::steady_clock::now();
    std::optional<std::chrono::steady_clock::time_point> drain_deadline;
    bool said_goodbye = false;
    for (;;) {
      bool active = false;
      // One clock read a turn (on a VM a read costs tens of nanoseconds, and the turn is short).
      const auto turn = std::chrono::steady_clock::now();
      auto step = progress_once(active, turn);
      if (!step) {
        fail_transport(step.error_value());
        return;
      }
      const auto now = turn;
      expire_asks(now);
      if (stop_requested_.load(std::memory_order_acquire)) {
        if (!drain_deadline) {
          drain_deadline = now + options_.drain_timeout;
          // With a failed rank there is no barrier to be had: close at once.
          if (any_peer_failed()) {
            accepting_.store(false, std::memory_order_release);
          } else if (auto b = ATOMR_MPI_CHECK(MPI_Ibarrier(comm_, &stop_barrier_)); !b) {
            fail_transport(b.error_value());
            return;
          }
        }
        if (stop_barrier_ != MPI_REQUEST_NULL) {
          int all_stopping = 0;
          if (auto t = ATOMR_MPI_CHECK(MPI_Test(&stop_barrier_, &all_stopping, MPI_STATUS_IGNORE)); !t) {
            fail_transport(t.error_value());
            return;
          }
          if (all_stopping) {
            accepting_.store(false, std::memory_order_release);
            active = true;
          } else if (now > *drain_deadline) {
            stop_result_ = error(errc::timeout, "router stop: not every rank called stop() within " +
                                                    std::to_string(options_.drain_timeout.count()) + " ms");
            return;
          }
        } else if (!said_goodbye && nothing_to_send()) {
          if (auto g = say_goodbye(); !g) {
            fail_transport(g.error_value());
            return;
          }
          said_goodbye = true;
          active = true;
        } else if (said_goodbye && nothing_to_send() && finished_goodbyes()) {
          return;
        } else if (now > *drain_deadline) {
          stop_result_ = error(errc::timeout, "router stop: " + drain_status() + " after " +
                                                  std::to_string(options_.drain_timeout.count()) + " ms");
          return;
        }
      }
      if (active) {
        last_activity = now;
        continue;
      }
      if (now - last_activity < options_.idle_after) {
        relax();
        continue;
      }
      // Idle: sleep briefly (a sender wakes us at once; receives are looked at every 100 us).
      std::unique_lock lock(wake_mutex_);
      sleeping_.store(true);
      if (!has_output_.load() && !stop_requested_.load()) {
        wake_cv_.wait_for(lock, std::chrono::microseconds(100));
      }
      sleeping_.store(false);
    }
  }

  // Moves a peer's staging to its send queue (progress thread).
  void take_staging(int p, peer_out& o) {
    std::vector<std::byte> bytes;
    std::size_t messages = 0;
    {
      std::lock_guard lock(o.mutex);
      if (o.staged == 0) return;
      bytes.swap(o.staging);
      messages = o.staged;
      o.staged = 0;
      o.half_full.store(false, std::memory_order_relaxed);
      o.urgent.store(false, std::memory_order_relaxed);
      o.taken_unsent.fetch_add(1, std::memory_order_acq_rel);
      if (!spare_.empty()) {
        o.staging.swap(spare_.back());
        spare_.pop_back();
      }
    }
    auto buffer = std::make_shared<outgoing>();
    buffer->bytes = std::move(bytes);
    buffer->messages = messages;
    sending_[static_cast<std::size_t>(p)].push_back(std::move(buffer));
    if (!sending_listed_[static_cast<std::size_t>(p)]) {
      sending_listed_[static_cast<std::size_t>(p)] = 1;
      sending_peers_.push_back(p);
    }
  }

  result<void> progress_once(bool& active, std::chrono::steady_clock::time_point now) {
    // Take in what callers handed over: sends still in flight, and the peers with news in staging.
    // (Read first: the exchange writes the line that senders write, and most turns find no news.)
    if (has_output_.load(std::memory_order_relaxed) && has_output_.exchange(false, std::memory_order_acq_rel)) {
      {
        std::lock_guard lock(handoff_mutex_);
        handoff_taken_.swap(handoff_);
      }
      for (auto& h : handoff_taken_) {
        ++in_flight_per_peer_[static_cast<std::size_t>(h.peer)];
        send_requests_.push_back(h.request);
        send_slots_.push_back({h.peer, std::move(h.buffer)});
        active = true;
      }
      handoff_taken_.clear();
      {
        std::lock_guard listed(dirty_mutex_);
        dirty_taken_.swap(dirty_);
      }
      for (const int p : dirty_taken_) {
        if (!staged_listed_[static_cast<std::size_t>(p)]) {
          staged_listed_[static_cast<std::size_t>(p)] = 1;
          staged_peers_.push_back(p);
        }
      }
      dirty_taken_.clear();
    }
    // Take the staging of the peers whose packet is due (see enqueue); the others stay listed.
    if (!staged_peers_.empty()) {
      const std::int64_t turn_ns = now.time_since_epoch().count();
      const std::int64_t cork_ns = options_.cork.count() * 1000;
      const std::int64_t stream_cork_ns = options_.stream_cork.count() * 1000;
      for (std::size_t i = 0; i < staged_peers_.size();) {
        const int p = staged_peers_[i];
        auto& o = *out_[static_cast<std::size_t>(p)];
        // A staging begun soon after the peer's last packet left is part of a stream: it may wait
        // longer, so that a stream goes in packets of many tells (a packet costs both progress
        // threads far more than a tell in it). A burst after a quiet spell leaves after `cork`.
        const std::int64_t first = o.first_staged_ns.load(std::memory_order_relaxed);
        const std::int64_t hold =
            first - last_take_ns_[static_cast<std::size_t>(p)] < stream_cork_ns ? stream_cork_ns : cork_ns;
        const bool due = o.urgent.load(std::memory_order_relaxed) || o.half_full.load(std::memory_order_relaxed) ||
                         turn_ns - first >= hold || stop_requested_.load(std::memory_order_relaxed);
        if (!due) {
          ++i;
          active = true;  // (keeps the thread looking: the packet is due within `cork`)
          continue;
        }
        staged_listed_[static_cast<std::size_t>(p)] = 0;
        staged_peers_[i] = staged_peers_.back();
        staged_peers_.pop_back();
        last_take_ns_[static_cast<std::size_t>(p)] = turn_ns;
        take_staging(p, o);
        active = true;
      }
    }
    // Hand chunks to MPI, for the peers with something to send (listed above; a peer leaves the
    // list once its queue is empty).
    for (std::size_t i = 0; i < sending_peers_.size();) {
      const int p = sending_peers_[i];
      auto& queue = sending_[static_cast<std::size_t>(p)];
      if (queue.empty()) {
        sending_listed_[static_cast<std::size_t>(p)] = 0;
        sending_peers_[i] = sending_peers_.back();
        sending_peers_.pop_back();
        continue;
      }
      ++i;
      while (!queue.empty() && in_flight_per_peer_[static_cast<std::size_t>(p)] < k_send_window) {
        auto& front = queue.front();
        if (out_[static_cast<std::size_t>(p)]->failed.load(std::memory_order_acquire)) {
          // Nothing more goes to a failed rank; its queue is released.
          out_[static_cast<std::size_t>(p)]->queued.fetch_sub(front->messages);
          out_[static_cast<std::size_t>(p)]->taken_unsent.fetch_sub(1, std::memory_order_acq_rel);
          queue.pop_front();
          continue;
        }
        const std::size_t n = std::min(options_.packet_bytes, front->bytes.size() - front->offset);
        MPI_Request r;
        ATOMR_TRY(ATOMR_MPI_CHECK(
            MPI_Isend(front->bytes.data() + front->offset, static_cast<int>(n), MPI_BYTE, p, k_packet_tag, comm_, &r)));
        front->offset += n;
        ++front->chunks_open;
        ++packets_to_[static_cast<std::size_t>(p)];
        ++in_flight_per_peer_[static_cast<std::size_t>(p)];
        send_requests_.push_back(r);
        send_slots_.push_back({p, front});
        packets_sent_.fetch_add(1, std::memory_order_relaxed);
        active = true;
        if (front->offset == front->bytes.size()) {
          // Its last byte is with MPI: a caller may now send to this peer itself (after it).
          queue.pop_front();
          out_[static_cast<std::size_t>(p)]->taken_unsent.fetch_sub(1, std::memory_order_acq_rel);
        }
      }
    }
    // Finished sends.
    if (!send_requests_.empty()) {
      int done = 0;
      completed_.resize(send_requests_.size());
      ATOMR_TRY(ATOMR_MPI_CHECK(MPI_Testsome(static_cast<int>(send_requests_.size()), send_requests_.data(), &done,
                                             completed_.data(), MPI_STATUSES_IGNORE)));
      if (done > 0 && done != MPI_UNDEFINED) {
        active = true;
        bool freed = false;
        for (int i = 0; i < done; ++i) {
          auto& slot = send_slots_[static_cast<std::size_t>(completed_[static_cast<std::size_t>(i)])];
          --in_flight_per_peer_[static_cast<std::size_t>(slot.peer)];
          if (--slot.buffer->chunks_open == 0 && slot.buffer->offset == slot.buffer->bytes.size()) {
            out_[static_cast<std::size_t>(slot.peer)]->queued.fetch_sub(slot.buffer->messages,
                                                                        std::memory_order_acq_rel);
            sent_.fetch_add(slot.buffer->messages, std::memory_order_relaxed);
            if (slot.buffer->bytes.capacity() <= options_.packet_bytes * 4 && spare_.size() < 64) {
              slot.buffer->bytes.clear();
              spare_.push_back(std::move(slot.buffer->bytes));
            }
            freed = true;
          }
          slot.buffer.reset();
        }
        // Compact: drop the completed (null) requests, keeping the others' order.
        std::size_t w = 0;
        for (std::size_t i = 0; i < send_requests_.size(); ++i) {
          if (send_requests_[i] == MPI_REQUEST_NULL) continue;
          if (w != i) {
            send_requests_[w] = send_requests_[i];
            send_slots_[w] = std::move(send_slots_[i]);
          }
          ++w;
        }
        send_requests_.resize(w);
        send_slots_.resize(w);
        if (freed) {
          std::lock_guard lock(room_mutex_);
          room_.notify_all();
        }
      }
    }
    // Receives, unless a caller waiting for a reply is taking them in itself (see assist).
    if (!assisted_.recent(now)) {
      std::unique_lock receiving(recv_mutex_, std::try_to_lock);
      if (receiving.owns_lock()) {
        if (assist_error_) return std::exchange(assist_error_, std::nullopt).value();
        ATOMR_TRY(receive_packets(active));
      }
    }
    return ok();
  }

  // Receives, strictly in posting order (under recv_mutex_: the progress thread, or a caller).
  result<void> receive_packets(bool& active) {
    // Whichever thread delivers, each actor's mailbox sees one producer: the order holds.
    const local::producer_tokens::scope tokens(&delivery_tokens_);
    for (int looked = 0; looked < static_cast<int>(recv_requests_.size()); ++looked) {
      int flag = 0;
      MPI_Status status;
      ATOMR_TRY(ATOMR_MPI_CHECK(MPI_Test(&recv_requests_[head_], &flag, &status)));
      if (!flag) break;
      active = true;
      packets_received_.fetch_add(1, std::memory_order_relaxed);
      last_packet_ns_.store(now_ns(), std::memory_order_relaxed);
      int count = 0;
      MPI_Get_count(&status, MPI_BYTE, &count);
      const int source = status.MPI_SOURCE;
      if (source >= 0 && source < size_) {
        ++packets_from_[static_cast<std::size_t>(source)];
        delivery_sink sink(*this, source);
        readers_[static_cast<std::size_t>(source)].feed(
            std::span<const std::byte>(recv_buffers_[head_].data(), static_cast<std::size_t>(count)), sink);
        wake_actors();
      }
      ATOMR_TRY(post_receive(head_));
      head_ = (head_ + 1) % recv_requests_.size();
    }
    return ok();
  }

  bool finished_goodbyes() {
    auto done = poll_goodbyes();
    if (!done) {
      fail_transport(done.error_value());
      return true;
    }
    return *done;
  }

  bool any_peer_failed() const {
    for (const auto& o : out_) {
      if (o->failed.load()) return true;
    }
    return false;
  }

  bool nothing_to_send() const {
    if (!send_requests_.empty() || has_output_.load() || !staged_peers_.empty()) return false;
    for (const int p : sending_peers_) {
      if (!sending_[static_cast<std::size_t>(p)].empty()) return false;
    }
    for (std::size_t p = 0; p < out_.size(); ++p) {  // (only while stopping: the cost does not matter)
      if (out_[p]->queued.load() != 0 && !out_[p]->failed.load()) return false;
    }
    return true;
  }

  result<void> say_goodbye() {
    for (int p = 0; p < size_; ++p) {
      auto& o = *out_[static_cast<std::size_t>(p)];
      {
        // No caller sends to p after this: the count is final.
        std::lock_guard lock(o.mutex);
        o.closed = true;
        goodbye_sent_[static_cast<std::size_t>(p)] = packets_to_[static_cast<std::size_t>(p)] + o.direct_packets;
      }
      if (o.failed.load()) continue;
      MPI_Request r;
      ATOMR_TRY(ATOMR_MPI_CHECK(
          MPI_Isend(&goodbye_sent_[static_cast<std::size_t>(p)], 1, MPI_UINT64_T, p, k_goodbye_tag, comm_, &r)));
      goodbye_requests_.push_back(r);
    }
    return ok();
  }

  // Collects goodbyes; true when each live peer's has come and all its packets are in.
  result<bool> poll_goodbyes() {
    for (;;) {
      if (goodbye_recv_ == MPI_REQUEST_NULL) {
        ATOMR_TRY(ATOMR_MPI_CHECK(
            MPI_Irecv(&goodbye_value_, 1, MPI_UINT64_T, MPI_ANY_SOURCE, k_goodbye_tag, comm_, &goodbye_recv_)));
      }
      int flag = 0;
      MPI_Status status;
      ATOMR_TRY(ATOMR_MPI_CHECK(MPI_Test(&goodbye_recv_, &flag, &status)));
      if (!flag) break;
      if (status.MPI_SOURCE >= 0 && status.MPI_SOURCE < size_) {
        goodbye_from_[static_cast<std::size_t>(status.MPI_SOURCE)] = 1;
        goodbye_count_[static_cast<std::size_t>(status.MPI_SOURCE)] = goodbye_value_;
      }
    }
    if (!goodbye_requests_.empty()) {
      int all = 0;
      ATOMR_TRY(ATOMR_MPI_CHECK(MPI_Testall(static_cast<int>(goodbye_requests_.size()), goodbye_requests_.data(), &all,
                                            MPI_STATUSES_IGNORE)));
      if (!all) return false;
      goodbye_requests_.clear();
    }
    return heard_all_goodbyes();
  }

  bool heard_all_goodbyes() {
    std::lock_guard receiving(recv_mutex_);  // (packets_from_ is counted by whoever receives)
    for (int p = 0; p < size_; ++p) {
      const auto i = static_cast<std::size_t>(p);
      if (out_[i]->failed.load()) continue;
      if (!goodbye_from_[i] || packets_from_[i] < goodbye_count_[i]) return false;
    }
    return true;
  }

  std::string drain_status() const {
    std::string silent;
    for (int p = 0; p < size_; ++p) {
      if (goodbye_from_[static_cast<std::size_t>(p)] || out_[static_cast<std::size_t>(p)]->failed.load()) continue;
      silent += silent.empty() ? "" : ", ";
      silent += std::to_string(p);
    }
    if (silent.empty()) return "messages to peers still unsent or unreceived";
    return "no goodbye from rank(s) " + silent + " (did every rank call stop()?)";
  }

  void fail_transport(const error& e) {
    logger()->error("router progress failed: {}; the router stops", e.describe());
    stop_result_ = e;
    accepting_.store(false);
    for (int p = 0; p < size_; ++p) {
      auto& o = *out_[static_cast<std::size_t>(p)];
      std::lock_guard lock(o.mutex);
      o.failure = "the router's transport failed: " + e.message();
      o.failed.store(true);
    }
    room_.notify_all();
    // The progress thread ends here, and with it the deadlines it keeps: answer every open ask now.
    std::unordered_map<std::uint64_t, pending_ask> open;
    {
      std::lock_guard lock(pending_mutex_);
      open.swap(pending_);
      due_.clear();
    }
    for (auto& [id, p] : open) {
      p.handler(
          error(errc::unavailable, "ask to " + p.target() + " failed: the router's transport failed: " + e.message()));
    }
  }

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

  std::atomic<std::uint64_t> sent_{0}, received_{0}, dead_letters_{0}, malformed_{0}, packets_sent_{0},
      packets_received_{0}, direct_sent_{0};
  std::atomic<std::int64_t> last_packet_ns_{0};
};

void delivery_sink::message(const envelope_header& h, std::span<const std::byte> payload) {
  core_.deliver(source_, h, payload);
}
void delivery_sink::oversized(const envelope_header& h) { core_.oversized(source_, h); }
void delivery_sink::corrupt(const error& why) { core_.corrupt(source_, why); }

result<std::size_t> size_tunable(const tunable& t, std::size_t minimum) {
  ATOMR_ASSIGN_OR_RETURN(std::int64_t v, tunable_int(t));
  if (v < static_cast<std::int64_t>(minimum)) {
    return error(errc::invalid_argument,
                 std::string(t.env) + "=" + std::to_string(v) + ": must be at least " + std::to_string(minimum));
  }
  return static_cast<std::size_t>(v);
}

}  // namespace

result<router_options> router_options::from_environment() {
  router_options o;
  ATOMR_ASSIGN_OR_RETURN(o.queue_limit, size_tunable(tunables::router_queue, 1));
  ATOMR_ASSIGN_OR_RETURN(o.packet_bytes, size_tunable(tunables::router_packet, 4096));
  if (o.packet_bytes > (std::size_t{1} << 30)) {
    return error(errc::invalid_argument,
                 "ATOMR_ROUTER_PACKET=" + std::to_string(o.packet_bytes) + ": at most 1073741824 bytes");
  }
  ATOMR_ASSIGN_OR_RETURN(std::size_t idle, size_tunable(tunables::router_idle, 0));
  o.idle_after = std::chrono::microseconds(idle);
  ATOMR_ASSIGN_OR_RETURN(std::size_t gap, size_tunable(tunables::router_direct, 0));
  o.direct_gap = std::chrono::microseconds(gap);
  ATOMR_ASSIGN_OR_RETURN(std::size_t cork, size_tunable(tunables::router_cork, 0));
  o.cork = std::chrono::microseconds(cork);
  ATOMR_ASSIGN_OR_RETURN(std::size_t stream_cork, size_tunable(tunables::router_stream_cork, 0));
  o.stream_cork = std::chrono::microseconds(stream_cork);
  const std::string policy = tunable_value(tunables::router_overflow);
  if (policy == "block") {
    o.on_full = overflow::block;
  } else if (policy == "fail") {
    o.on_full = overflow::fail;
  } else {
    return error(errc::invalid_argument, "ATOMR_ROUTER_OVERFLOW=" + policy + ": expected block or fail");
  }
  return o;
}

result<std::unique_ptr<router>> router::start(MPI_Comm world, local::actor_system& system) {
  ATOMR_ASSIGN_OR_RETURN(router_options options, router_options::from_environment());
  return start(world, system, options);
}

result<std::unique_ptr<router>> router::start(MPI_Comm world, local::actor_system& system, router_options options) {
  ATOMR_ASSIGN_OR_RETURN(const own_comm own, duplicate_comm(world));
  MPI_Comm comm = own.comm;
  const int rank = own.rank;
  const int size = own.size;
  // Receives are posted at the packet size, so every rank must use rank 0's.
  unsigned long long packet = options.packet_bytes;
  ATOMR_TRY(ATOMR_MPI_CHECK(MPI_Bcast(&packet, 1, MPI_UNSIGNED_LONG_LONG, 0, comm)));
  if (packet != options.packet_bytes) {
    log::get("router")->warn("packet size {} differs from rank 0's {}; using rank 0's", options.packet_bytes, packet);
    options.packet_bytes = packet;
  }
  auto core = std::make_shared<router_core_impl>(comm, rank, size, system, options);
  ATOMR_TRY(core->start_transport());
  ATOMR_TRY(core->listen_for_failures());
  log::get("router")->debug("router up: {} ranks, packets of {} bytes", size, options.packet_bytes);
  return std::unique_ptr<router>(new router(std::move(core)));
}

router::~router() {
  if (auto r = stop(); !r) log::get("router")->error("router stop: {}", r.error_value().describe());
}

result<void> router::stop() { return static_cast<router_core_impl&>(*core_).stop(); }

void router::peer_failed(int rank, const std::string& why) {
  static_cast<router_core_impl&>(*core_).peer_failed(rank, why);
}

router_stats router::stats() const { return static_cast<const router_core_impl&>(*core_).stats(); }

const router_options& router::options() const noexcept {
  return static_cast<const router_core_impl&>(*core_).options();
}

}  // namespace atomr::cluster
