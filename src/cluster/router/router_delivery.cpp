// Inbound envelopes to their actors: published targets, delivery with the decode context set,
// replies to open asks, and refusals.
#include "router_core_impl.hpp"

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

namespace routing {

result<void> router_core_impl::publish(std::uint64_t actor, std::shared_ptr<detail::inbound_target> target) {
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

inline void router_core_impl::deliver(int source, const envelope_header& h, std::span<const std::byte> payload) {
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
    refuse(h, error(errc::unavailable, unknown_actor(h.destination.actor)));
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

// Why nothing here takes messages for `actor`: it stopped, or it never was.
std::string router_core_impl::unknown_actor(std::uint64_t actor) const {
  std::string who;
  std::shared_lock lock(targets_mutex_);
  const auto it = stopped_.find(actor);
  who = it == stopped_.end() ? "no actor " + actor_text(actor) : "actor \"" + it->second + "\"";
  if (it != stopped_.end()) {
    who += " on rank " + std::to_string(rank_) + " stopped";
  } else {
    who += " on rank " + std::to_string(rank_);
  }
  return who;
}

void delivery_sink::message(const envelope_header& h, std::span<const std::byte> payload) {
  core_.deliver(source_, h, payload);
}
void delivery_sink::oversized(const envelope_header& h) { core_.oversized(source_, h); }
void delivery_sink::corrupt(const error& why) { core_.corrupt(source_, why); }

void router_core_impl::oversized(int source, const envelope_header& h) {
  malformed_.fetch_add(1, std::memory_order_relaxed);
  const error why(errc::protocol, "rank " + std::to_string(source) + " sent a payload of " +
                                      std::to_string(h.payload_length) + " bytes, over this rank's limit of " +
                                      std::to_string(limits_.max_payload_bytes) + " (ATOMR_WIRE_MAX_PAYLOAD)");
  logger()->warn("{}; skipped", why.message());
  if ((h.flags & serialization::k_flag_ask) && static_cast<int>(h.source.rank) == source) send_reply(h, why);
}

void router_core_impl::corrupt(int source, const error& why) {
  malformed_.fetch_add(1, std::memory_order_relaxed);
  logger()->error("the byte stream from rank {} is malformed ({}); nothing more from rank {} is read", source,
                  why.message(), source);
}

inline void router_core_impl::deliver_reply(int source, const envelope_header& h, std::span<const std::byte> payload) {
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

void router_core_impl::refuse(const envelope_header& h, const error& why) {
  if (h.flags & serialization::k_flag_ask) {
    send_reply(h, why);
    return;
  }
  dead_letters_.fetch_add(1, std::memory_order_relaxed);
  const auto left_out = dead_letter_log_.admit();
  if (!left_out) return;
  if (*left_out == 0) {
    logger()->warn("dead letter: message type id {} from rank {}: {}", h.type_id, h.source.rank, why.message());
  } else {
    logger()->warn("dead letter: message type id {} from rank {}: {} ({} more dead letters not logged before it)",
                   h.type_id, h.source.rank, why.message(), *left_out);
  }
}

}  // namespace routing

}  // namespace atomr::cluster
