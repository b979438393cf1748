// Callers' way out: staging envelopes per peer, or a direct send to a quiet peer, and replies.
#include "router_core_impl.hpp"

namespace atomr::cluster::routing {

// Two ways out. A caller whose peer is quiet (nothing staged or unsent, nothing accepted in the
// last direct_gap) hands its envelope to MPI itself: no hand-off to the progress thread, which is
// what an ask or a reply across ranks waits for. Otherwise the envelope is staged behind the
// others, and the progress thread sends the staging as one packet once it is half a packet, holds
// an ask or a reply, or is `cork` old: a stream of tells goes out as packets of many envelopes,
// so that neither side pays an MPI message per tell. Both ways keep the order per peer: a caller
// sends itself only when nothing older is staged or unsent.
inline result<void> router_core_impl::enqueue(int peer, std::vector<std::byte>&& envelope, bool may_block) {
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
inline result<void> router_core_impl::send_direct(int peer, peer_out& o, std::vector<std::byte>&& envelope) {
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

result<void> router_core_impl::submit(int peer, std::vector<std::byte>&& envelope) {
  if (peer < 0 || peer >= size_) {
    return error(errc::invalid_argument,
                 "rank " + std::to_string(peer) + " is not in the job (" + std::to_string(size_) + " ranks)");
  }
  if (!accepting_.load(std::memory_order_acquire)) {
    return error(errc::unavailable, "the router of rank " + std::to_string(rank_) + " has stopped");
  }
  return enqueue(peer, std::move(envelope), std::this_thread::get_id() != progress_id_.load(std::memory_order_relaxed));
}

void router_core_impl::send_reply(const envelope_header& asked, result<std::vector<std::byte>> value) {
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

result<void> router_core_impl::wait_for_room(int peer, peer_out& o) {
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

}  // namespace atomr::cluster::routing
