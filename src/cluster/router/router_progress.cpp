// The progress thread: its loop, and one turn of it (callers' hand-offs, corks, chunks to MPI,
// finished sends, the receive ring). A caller waiting for a reply may take the receives' part.
#include "atomr/common/spin.hpp"
#include "router_core_impl.hpp"

namespace atomr::cluster::routing {

result<void> router_core_impl::start_transport() {
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

void router_core_impl::assist() noexcept {
  assisted_.mark();
  std::unique_lock receiving(recv_mutex_, std::try_to_lock);
  if (!receiving.owns_lock() || !receiving_open_ || assist_error_) return;
  bool active = false;
  // An MPI error here is the progress thread's to act on (it fails the transport).
  if (auto r = receive_packets(active); !r) assist_error_ = std::move(r).error_value();
}

void router_core_impl::run() {
  progress_id_.store(std::this_thread::get_id(), std::memory_order_relaxed);
  const spin_relax relax;
  auto last_activity = std::chrono::steady_clock::now();
  drain_state drain;
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
    if (stop_requested_.load(std::memory_order_acquire) && drain_turn(drain, now, active) == drain_step::end) return;
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
inline void router_core_impl::take_staging(int p, peer_out& o) {
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

inline result<void> router_core_impl::progress_once(bool& active, std::chrono::steady_clock::time_point now) {
  // Take in what callers handed over: sends still in flight, and the peers with news in staging.
  // (Read first: the exchange writes the line that senders write, and most turns find no news.)
  if (has_output_.load(std::memory_order_relaxed) && has_output_.exchange(false, std::memory_order_acq_rel)) {
    take_handoffs(active);
  }
  if (!staged_peers_.empty()) take_due_staging(active, now);
  ATOMR_TRY(send_chunks(active));
  if (!send_requests_.empty()) ATOMR_TRY(finish_sends(active));
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

// Callers' direct sends still in flight, and the peers whose staging got its first envelope.
inline void router_core_impl::take_handoffs(bool& active) {
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

// The corks: takes the staging of the peers whose packet is due (see enqueue); the others stay
// listed.
inline void router_core_impl::take_due_staging(bool& active, std::chrono::steady_clock::time_point now) {
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

// Hands chunks to MPI, for the peers with something to send (listed by take_staging; a peer leaves
// the list once its queue is empty).
inline result<void> router_core_impl::send_chunks(bool& active) {
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
  return ok();
}

// Finished sends: their buffers released (or kept as spares), the peers' queues given room.
inline result<void> router_core_impl::finish_sends(bool& active) {
  int done = 0;
  completed_.resize(send_requests_.size());
  ATOMR_TRY(ATOMR_MPI_CHECK(MPI_Testsome(static_cast<int>(send_requests_.size()), send_requests_.data(), &done,
                                         completed_.data(), MPI_STATUSES_IGNORE)));
  if (done > 0 && done != MPI_UNDEFINED) {
    active = true;
    release_finished_sends(done);
  }
  return ok();
}

void router_core_impl::release_finished_sends(int done) {
  bool freed = false;
  for (int i = 0; i < done; ++i) {
    auto& slot = send_slots_[static_cast<std::size_t>(completed_[static_cast<std::size_t>(i)])];
    --in_flight_per_peer_[static_cast<std::size_t>(slot.peer)];
    if (--slot.buffer->chunks_open == 0 && slot.buffer->offset == slot.buffer->bytes.size()) {
      out_[static_cast<std::size_t>(slot.peer)]->queued.fetch_sub(slot.buffer->messages, std::memory_order_acq_rel);
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

// Receives, strictly in posting order (under recv_mutex_: the progress thread, or a caller).
inline result<void> router_core_impl::receive_packets(bool& active) {
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

}  // namespace atomr::cluster::routing
