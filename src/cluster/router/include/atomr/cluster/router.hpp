// The router: actors reachable from every rank of the job. Each rank runs one (router::start,
// collective). A local actor is published under a name (or made reachable by id when a ref to it
// is sent); any rank then addresses it with a cluster_ref<Msg>, whose tell/ask look like
// actor_ref's. Refs travel inside messages: a cluster_ref sent to another rank works there.
//
//   // rank 1
//   router->publish("counter", counter_ref);
//   // any rank
//   auto counter = router->lookup<counter_msg>(1, "counter");
//   counter.tell(add{5});
//   auto total = counter.ask<int>([](auto reply) { return get{std::move(reply)}; }, 1s).get();
//
// What crosses ranks: a message type is sendable (sendable.hpp: atomr's registry, or a program's
// ATOMR_WIRE_MESSAGE); an actor's Msg is one sendable type or a std::variant of them; a reply
// type R is anything Cereal serializes. Anything else is a compile error. reply_to<R> and
// cluster_ref<Msg> members serialize too (a reply_to answers the remote asker; a ref stays usable).
//
// Guarantees, while both ranks live:
// - Per sender and receiver, messages arrive in the order sent, each exactly once. ("Sender" is
//   whatever sends in a known order: one thread, or one actor, whose handlers run one at a time.)
//   MPI keeps order and delivery per pair on the router's own communicator; the router keeps one
//   ordered stream per peer and delivers it in order on its progress thread.
// - A message to an actor that does not exist or has stopped: an ask fails with errc::unavailable
//   ("no actor \"x\" on rank 3", "actor \"x\" on rank 3 stopped"); a tell is logged as a dead
//   letter on the receiving rank. A message the actor's Msg does not accept, or bytes that do not
//   decode, fail the ask likewise (errc::invalid_argument / errc::protocol) and are logged; the
//   router never crashes or stalls on bad bytes.
// - An ask has a deadline like a local one (errc::timeout). When liveness or the program reports a
//   rank failed (peer_failed), asks waiting on it fail at once and sends to it are refused, with
//   the rank named.
// - Each peer's outbound queue holds at most `queue_limit` messages not yet handed to MPI; at the
//   bound a send waits (overflow::block, up to block_timeout, then errc::timeout) or fails at once
//   with errc::resource_exhausted (overflow::fail). ATOMR_ROUTER_QUEUE / ATOMR_ROUTER_OVERFLOW.
// - Payloads up to ATOMR_WIRE_MAX_PAYLOAD (64 MiB by default) are sent, split into packets and put
//   back together; a larger one is refused at the sender (errc::invalid_argument).
// - stop() is collective: messages accepted before it are delivered, then every rank's router
//   says goodbye to every peer, drains what its peers sent, and stops. Asks still unanswered then
//   fail with errc::unavailable.
//
// Threads: one progress thread per router drives MPI (staged sends, preposted receives) and
// delivers inbound messages to mailboxes. It spins while there is traffic and backs off to short
// sleeps when idle (ATOMR_ROUTER_IDLE_US). A sender whose peer is quiet (nothing staged or unsent
// to it, and nothing sent for ATOMR_ROUTER_DIRECT_US) calls MPI_Isend itself: an ask or reply
// then costs no thread hand-off. Dense streams are staged and sent as packets of many envelopes,
// each packet at most ATOMR_ROUTER_CORK_US late, or ATOMR_ROUTER_STREAM_CORK_US while a stream
// flows to that peer (asks and replies are never held back).
// An actor spawned with spawn_options::direct is delivered to without its mailbox when it is
// idle: the thread that takes the packet in (the progress thread, or a caller waiting for a
// reply) runs its handler, and a reply it sends goes straight to MPI. Its handlers must be short
// and must not wait (see spawn_options::direct); order and exactly-once hold as for any actor.
#pragma once

#include <mpi.h>

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <type_traits>
#include <variant>
#include <vector>

#include "atomr/common/result.hpp"
#include "atomr/local/actors.hpp"
#include "atomr/serialization/envelope.hpp"
#include "atomr/serialization/sendable.hpp"

namespace atomr::cluster {

using serialization::actor_address;

// The type id of a reply's value in an envelope (its type is the asker's R).
inline constexpr std::uint32_t k_reply_type_id = 4;

enum class overflow { block, fail };

struct router_options {
  std::size_t queue_limit = 65536;                 // ATOMR_ROUTER_QUEUE: messages per peer not yet sent
  overflow on_full = overflow::block;              // ATOMR_ROUTER_OVERFLOW: block | fail
  std::chrono::milliseconds block_timeout{10000};  // how long a blocked send waits for room
  std::size_t packet_bytes = 64 * 1024;            // ATOMR_ROUTER_PACKET: the largest MPI message
  std::chrono::microseconds idle_after{2000};      // ATOMR_ROUTER_IDLE_US: spin this long after traffic
  // A caller sends itself when its peer got nothing for this long (0: never; see router.cpp).
  std::chrono::microseconds direct_gap{2};  // ATOMR_ROUTER_DIRECT_US
  std::chrono::microseconds cork{2};        // ATOMR_ROUTER_CORK_US: the longest a staged tell waits
  // The same while a stream flows to the peer (its last packet left less than this long before the
  // staging began): packets then grow, and a tell stream runs at MPI's own message rate.
  std::chrono::microseconds stream_cork{32};       // ATOMR_ROUTER_STREAM_CORK_US
  std::chrono::milliseconds drain_timeout{30000};  // stop(): how long to wait for peers' goodbyes
  // The above from the environment (a bad value is an error naming the variable).
  static result<router_options> from_environment();
};

struct router_stats {
  std::uint64_t sent = 0;          // envelopes handed to MPI
  std::uint64_t received = 0;      // envelopes received (delivered or not)
  std::uint64_t dead_letters = 0;  // tells to no actor / a stopped actor
  std::uint64_t malformed = 0;     // envelopes or streams refused as malformed or oversized
  std::uint64_t packets_sent = 0;
  std::uint64_t packets_received = 0;
  std::uint64_t direct = 0;  // envelopes the calling thread handed to MPI itself
  // When the progress thread last took a packet from MPI (steady clock, ns since its epoch; the
  // ranks of a node share it): lets a benchmark split an ask into its hops.
  std::int64_t last_packet_ns = 0;
};

namespace detail {

// A published local actor as the progress thread sees it: it decodes a payload as one of the
// actor's message types and tells the actor.
class inbound_target {
 public:
  virtual ~inbound_target() = default;
  virtual const std::string& name() const = 0;
  virtual bool alive() const = 0;
  // errc::invalid_argument: the type is not one the actor accepts; errc::protocol: bad payload;
  // errc::unavailable (or the mailbox's error): the actor refused it.
  // The message is enqueued without waking the actor (true: flush() wakes it, after a packet's
  // worth), or a direct actor handled it on this thread (false: nothing to wake).
  virtual result<bool> deliver(std::uint32_t type_id, std::span<const std::byte> payload) = 0;
  virtual void flush() = 0;
  // The local actor's id (unique in this process).
  virtual std::uint64_t actor_id() const = 0;
  // Runs f once the actor has terminated.
  virtual void when_stopped(std::function<void()> f) const = 0;
};

// Decoding context of the message being delivered (thread-local on the progress thread): what a
// reply_to or cluster_ref inside the payload binds to.
class router_core;
struct decode_context {
  router_core* core = nullptr;
  serialization::envelope_header header;
  bool reply_bound = false;
};
decode_context* current_decode() noexcept;
// Encoding context: the router whose message is being encoded (a local ref inside is published).
router_core* current_encode() noexcept;

// No decoding under way on this thread for the scope: a direct actor's handler runs inside a
// delivery, and what it decodes or sends is its own.
class decode_pause {
 public:
  decode_pause() noexcept;
  ~decode_pause();
  decode_pause(const decode_pause&) = delete;
  decode_pause& operator=(const decode_pause&) = delete;

 private:
  decode_context* saved_;
};

struct encode_scope {
  explicit encode_scope(router_core* core);
  ~encode_scope();
  encode_scope(const encode_scope&) = delete;
  encode_scope& operator=(const encode_scope&) = delete;
  router_core* previous;
};

// Wraps a reply's value bytes (or an error) into the asker's future.
using reply_handler = std::function<void(result<std::span<const std::byte>>)>;

// What the templates below need; implemented in router.cpp.
class router_core : public std::enable_shared_from_this<router_core> {
 public:
  virtual ~router_core() = default;
  virtual int rank() const noexcept = 0;
  virtual int size() const noexcept = 0;
  virtual local::actor_system& system() noexcept = 0;
  virtual const serialization::wire_limits& limits() const noexcept = 0;

  // Sends an encoded envelope (header + payload) to `peer`. Errors: unavailable (stopped, peer
  // failed), resource_exhausted / timeout (queue full), invalid_argument (bad peer).
  virtual result<void> submit(int peer, std::vector<std::byte>&& envelope) = 0;
  // Registers an ask to the actor published as `name` on `peer`, awaiting a reply; returns its
  // correlation id. The handler runs once: on the reply, at the deadline, or when the peer fails
  // or the router stops. (Errors name the actor; the text is built only then.)
  virtual std::uint64_t expect_reply(int peer, const std::string& name, reply_handler handler,
                                     std::chrono::steady_clock::duration timeout) = 0;
  // Fails a registered ask (its send was refused).
  virtual void abandon_reply(std::uint64_t correlation, error why) = 0;
  // Publishes `target` under `actor` (a named_actor() id, or the actor's own id). Errors:
  // invalid_argument (the name is taken by another live actor).
  virtual result<void> publish(std::uint64_t actor, std::shared_ptr<inbound_target> target) = 0;
  // The live target published under `actor`, if any.
  virtual std::shared_ptr<inbound_target> find(std::uint64_t actor) const = 0;
  // Sends a reply to the asker of `header`: the value's encoding after k_envelope_header_size
  // bytes of room for the header (so it is sent without a copy), or an error.
  virtual void send_reply(const serialization::envelope_header& asked, result<std::vector<std::byte>> value) = 0;
  // What an asker's future does while its caller waits: takes in the packets that have come
  // (the reply among them) on the caller's thread (see local::progress_hook).
  virtual std::shared_ptr<local::progress_hook> waiter_hook() = 0;
};

// An empty envelope buffer: room for the header, and capacity for most messages' payloads (one
// allocation, no regrowth while the payload is encoded behind the header).
inline std::vector<std::byte> envelope_buffer() {
  std::vector<std::byte> out;
  out.reserve(256);
  out.resize(serialization::k_envelope_header_size);
  return out;
}

// Encodes `message` as an envelope to `route`'s destination (type id from the registry).
template <serialization::sendable T>
result<std::vector<std::byte>> encode_envelope_of(const serialization::envelope_route& route, const T& message,
                                                  const serialization::wire_limits& limits,
                                                  std::uint32_t type_id = serialization::message_id<T>()) {
  std::vector<std::byte> out = envelope_buffer();
  try {
    serialization::encode_into(out, message);
  } catch (const std::exception& e) {
    return error(errc::invalid_argument,
                 "cannot encode " + std::string(serialization::message_name<T>()) + ": " + e.what());
  }
  const std::size_t payload = out.size() - serialization::k_envelope_header_size;
  if (payload > limits.max_payload_bytes) {
    return error(errc::invalid_argument, "cannot send " + std::string(serialization::message_name<T>()) +
                                             ": payload of " + std::to_string(payload) +
                                             " bytes exceeds the limit of " + std::to_string(limits.max_payload_bytes) +
                                             " (ATOMR_WIRE_MAX_PAYLOAD)");
  }
  serialization::envelope_header h;
  h.flags = route.flags;
  h.type_id = type_id;
  h.payload_length = static_cast<std::uint32_t>(payload);
  h.correlation_id = route.correlation_id;
  h.source = route.source;
  h.destination = route.destination;
  serialization::detail::write_header(out.data(), h);
  return out;
}

template <typename T>
struct variant_traits : std::false_type {};
template <typename... Ts>
struct variant_traits<std::variant<Ts...>> : std::true_type {
  static constexpr bool all_sendable = (serialization::sendable<Ts> && ...);
};

}  // namespace detail

// An actor's message type that can cross ranks: one sendable type, or a variant of them.
template <typename Msg>
concept remote_message = serialization::sendable<Msg> || detail::variant_traits<Msg>::all_sendable;

namespace detail {

// f(the alternative held), or f(msg) when Msg is not a variant.
template <typename Msg, typename F>
decltype(auto) visit_message(const Msg& msg, F&& f) {
  if constexpr (variant_traits<Msg>::value) {
    return std::visit(std::forward<F>(f), msg);
  } else {
    return std::forward<F>(f)(msg);
  }
}

// Calls f(std::type_identity<T>) for each type a Msg can hold.
template <typename Msg, typename F>
void for_each_alternative(F&& f) {
  if constexpr (variant_traits<Msg>::value) {
    [&]<typename... Ts>(std::type_identity<std::variant<Ts...>>) {
      (f(std::type_identity<Ts>{}), ...);
    }(std::type_identity<Msg>{});
  } else {
    f(std::type_identity<Msg>{});
  }
}

template <remote_message Msg>
class typed_target final : public inbound_target {
 public:
  typed_target(local::actor_ref<Msg> ref, std::string name, const serialization::wire_limits& limits)
      : ref_(std::move(ref)), name_(std::move(name)), limits_(limits) {}
  const std::string& name() const override { return name_; }
  bool alive() const override { return ref_.alive(); }
  std::uint64_t actor_id() const override { return ref_.id(); }
  void flush() override { ref_.flush(); }
  void when_stopped(std::function<void()> f) const override {
    ref_.on_terminated().then([f = std::move(f)](const result<local::terminated>&) { f(); });
  }
  const local::actor_ref<Msg>& ref() const { return ref_; }

  result<bool> deliver(std::uint32_t type_id, std::span<const std::byte> payload) override {
    bool known = false;
    result<bool> outcome = true;
    for_each_alternative<Msg>([&]<typename T>(std::type_identity<T>) {
      if (known || serialization::message_id<T>() != type_id) return;
      known = true;
      auto value = serialization::decode<T>(payload, serialization::message_name<T>(), limits_);
      if (!value) {
        outcome = std::move(value).error_value();
        return;
      }
      Msg msg(std::move(*value));
      {
        // A direct actor that is idle handles it here and now (spawn_options::direct).
        const decode_pause pause;
        if (ref_.try_receive_here(msg)) {
          outcome = false;
          return;
        }
      }
      if (auto queued = ref_.tell_deferred(std::move(msg)); !queued) outcome = std::move(queued).error_value();
    });
    if (!known) {
      return error(errc::invalid_argument,
                   "actor \"" + name_ + "\" does not accept message type id " + std::to_string(type_id));
    }
    return outcome;
  }

 private:
  local::actor_ref<Msg> ref_;
  std::string name_;
  serialization::wire_limits limits_;
};

}  // namespace detail

// A ref to an actor anywhere in the job: on this rank it is the local actor_ref; elsewhere the
// router carries its messages. Cheap to copy; safe from any thread; sendable inside messages.
template <remote_message Msg>
class cluster_ref {
 public:
  cluster_ref() = default;
  cluster_ref(std::shared_ptr<detail::router_core> core, actor_address address, std::string name,
              local::actor_ref<Msg> local = {})
      : core_(std::move(core)), address_(address), name_(std::move(name)), local_(std::move(local)) {}

  // Enqueues `msg` for the actor (locally, or through the router). Errors: those of actor_ref::tell
  // here; for a remote actor, the router's (unavailable, resource_exhausted, timeout,
  // invalid_argument for an oversized payload). Delivery failures on the far side are dead letters.
  result<void> tell(Msg msg) const {
    if (local_.valid()) return local_.tell(std::move(msg));
    if (!core_) return error(errc::unavailable, "tell through an empty cluster_ref");
    return detail::visit_message(msg, [&](const auto& alt) { return send(alt, 0, 0); });
  }

  // Like actor_ref::ask: make(reply_to<R>) builds the message; the future fails with
  // errc::timeout after `timeout`, errc::unavailable if the actor is not there or stops, and
  // never hangs.
  template <typename R, typename F>
  local::future<R> ask(F&& make, std::chrono::steady_clock::duration timeout) const {
    if (local_.valid()) return local_.template ask<R>(std::forward<F>(make), timeout);
    local::promise<R> answer;
    if (core_) answer.set_progress_hook(core_->waiter_hook());
    auto reply = answer.get_future();
    if (!core_) {
      answer.set_error(error(errc::unavailable, "ask through an empty cluster_ref"));
      return reply;
    }
    // The reply_to in the message stays behind unused: the answer comes back by correlation id.
    Msg msg = make(local::reply_to<R>());
    auto shared = std::make_shared<local::promise<R>>(std::move(answer));
    const std::uint64_t correlation = core_->expect_reply(
        static_cast<int>(address_.rank), name_,
        [shared, core = core_.get(), name = name_, rank = address_.rank](result<std::span<const std::byte>> bytes) {
          if (!bytes) {
            shared->set_error(std::move(bytes).error_value());
            return;
          }
          using wire_type = std::conditional_t<std::is_void_v<R>, std::uint8_t, R>;
          // (The core runs this handler, so it is alive.)
          auto value = serialization::decode<wire_type>(*bytes, "reply", core->limits());
          if (!value) {
            shared->set_error(value.error_value().with_context("reading the reply of actor \"" + name + "\" on rank " +
                                                               std::to_string(rank)));
            return;
          }
          if constexpr (std::is_void_v<R>) {
            shared->set_value();
          } else {
            shared->set_value(std::move(*value));
          }
        },
        timeout);
    auto sent =
        detail::visit_message(msg, [&](const auto& alt) { return send(alt, serialization::k_flag_ask, correlation); });
    if (!sent) core_->abandon_reply(correlation, std::move(sent).error_value());
    return reply;
  }

  bool valid() const noexcept { return local_.valid() || core_ != nullptr; }
  bool is_local() const noexcept { return local_.valid(); }
  int rank() const noexcept { return static_cast<int>(address_.rank); }
  const actor_address& address() const noexcept { return address_; }
  const std::string& name() const noexcept { return name_; }
  // The local actor_ref when the actor lives on this rank (invalid otherwise).
  const local::actor_ref<Msg>& local() const noexcept { return local_; }
  // "actor \"x\" on rank 3".
  std::string describe() const { return "actor \"" + name_ + "\" on rank " + std::to_string(address_.rank); }

  // Internal: serialization (router.hpp's save/load below).
  const std::shared_ptr<detail::router_core>& core() const noexcept { return core_; }

 private:
  template <typename T>
  result<void> send(const T& message, std::uint16_t flags, std::uint64_t correlation) const {
    serialization::envelope_route route;
    route.source = {static_cast<std::uint32_t>(core_->rank()), 0};
    if (const auto* cell = local::cell_base::current()) route.source.actor = cell->id();
    route.destination = address_;
    route.flags = flags;
    route.correlation_id = correlation;
    detail::encode_scope scope(core_.get());
    auto bytes = detail::encode_envelope_of(route, message, core_->limits());
    if (!bytes) return bytes.error_value().with_context("sending to " + describe());
    auto sent = core_->submit(rank(), std::move(*bytes));
    if (!sent) return sent.error_value().with_context("sending to " + describe());
    return ok();
  }

  std::shared_ptr<detail::router_core> core_;
  actor_address address_;
  std::string name_;
  local::actor_ref<Msg> local_;
};

class router {
 public:
  // Collective over `world` (every rank calls it): duplicates the communicator, agrees on the
  // packet size, posts receives and starts the progress thread. `system` delivers inbound
  // messages and runs ask deadlines; it must outlive the router. Without options, they come from
  // the environment (ATOMR_ROUTER_*; a bad value is an error naming the variable).
  static result<std::unique_ptr<router>> start(MPI_Comm world, local::actor_system& system);
  static result<std::unique_ptr<router>> start(MPI_Comm world, local::actor_system& system, router_options options);
  ~router();  // stop(), errors logged
  router(const router&) = delete;
  router& operator=(const router&) = delete;

  // Collective: delivers what was accepted, says goodbye to every peer, waits for theirs (up to
  // drain_timeout; the error names the ranks not heard from), and stops. Idempotent.
  result<void> stop();

  int rank() const noexcept { return core_->rank(); }
  int size() const noexcept { return core_->size(); }

  // Makes `ref` reachable from every rank as {this rank, name}. Errors: invalid_argument (the
  // name is published by another live actor). The entry goes when the actor stops.
  template <remote_message Msg>
  result<void> publish(const std::string& name, const local::actor_ref<Msg>& ref) {
    if (!ref.valid()) return error(errc::invalid_argument, "publish \"" + name + "\": empty actor_ref");
    return core_->publish(serialization::named_actor(name),
                          std::make_shared<detail::typed_target<Msg>>(ref, name, core_->limits()));
  }

  // The actor published as `name` on `rank`. No round trip: if there is none, asks fail with
  // "no actor \"name\" on rank N" and tells become dead letters there.
  template <remote_message Msg>
  cluster_ref<Msg> lookup(int rank, const std::string& name) const {
    const actor_address address{static_cast<std::uint32_t>(rank), serialization::named_actor(name)};
    local::actor_ref<Msg> local;
    if (rank == core_->rank()) local = local_ref<Msg>(address.actor);
    return cluster_ref<Msg>(core_, address, name, std::move(local));
  }

  // A cluster_ref to a local actor (reachable from other ranks once the ref is sent there).
  template <remote_message Msg>
  cluster_ref<Msg> ref(const local::actor_ref<Msg>& local) const {
    return cluster_ref<Msg>(core_, actor_address{static_cast<std::uint32_t>(core_->rank()), local.id()}, local.name(),
                            local);
  }

  // Fails every ask waiting on `rank` and refuses sends to it from now on, naming `why` (called by
  // liveness when a rank is declared failed, or by the program).
  void peer_failed(int rank, const std::string& why);

  router_stats stats() const;
  const router_options& options() const noexcept;
  const std::shared_ptr<detail::router_core>& core() const noexcept { return core_; }

 private:
  explicit router(std::shared_ptr<detail::router_core> core) : core_(std::move(core)) {}
  template <typename Msg>
  local::actor_ref<Msg> local_ref(std::uint64_t actor) const {
    auto target = std::dynamic_pointer_cast<detail::typed_target<Msg>>(core_->find(actor));
    return target ? target->ref() : local::actor_ref<Msg>();
  }
  std::shared_ptr<detail::router_core> core_;
};

namespace detail {

// The answer of an ask from another rank: encoded and sent back by correlation id (on the thread
// that answers). Nothing is sent once the router is gone.
template <typename R>
class remote_reply final : public local::reply_sink<R> {
 public:
  remote_reply(std::weak_ptr<router_core> core, const serialization::envelope_header& asked)
      : core_(std::move(core)), asked_(asked) {}
  void answer(result<R> value) noexcept override {
    const auto core = core_.lock();
    if (!core) return;
    if (!value) {
      core->send_reply(asked_, std::move(value).error_value());
      return;
    }
    try {
      std::vector<std::byte> bytes = envelope_buffer();
      if constexpr (std::is_void_v<R>) {
        serialization::encode_into(bytes, std::uint8_t{0});
      } else {
        serialization::encode_into(bytes, *value);
      }
      core->send_reply(asked_, std::move(bytes));
    } catch (const std::exception& e) {
      core->send_reply(asked_, error(errc::invalid_argument, std::string("cannot encode the reply: ") + e.what()));
    }
  }

 private:
  std::weak_ptr<router_core> core_;
  serialization::envelope_header asked_;
};

}  // namespace detail

}  // namespace atomr::cluster

// Cereal hooks: how a reply_to and a cluster_ref cross ranks.
namespace atomr::local {

// A reply_to carries no bytes: the envelope's correlation id names the ask. Decoded on the
// receiving rank it becomes a reply_to whose answer (value or error) goes back to the asker
// through the router (cluster::detail::remote_reply); outside a router's decoding (a tell, a
// test) it becomes a reply_to nobody waits for.
template <typename Archive, typename R>
void save(Archive&, const reply_to<R>&) {}

template <typename Archive, typename R>
void load(Archive&, reply_to<R>& reply) {
  auto* ctx = cluster::detail::current_decode();
  if (ctx == nullptr || (ctx->header.flags & serialization::k_flag_ask) == 0 || ctx->reply_bound) {
    reply = reply_to<R>();
    return;
  }
  ctx->reply_bound = true;
  reply = reply_to<R>(std::make_unique<cluster::detail::remote_reply<R>>(ctx->core->weak_from_this(), ctx->header));
}

}  // namespace atomr::local

namespace atomr::cluster {

// A cluster_ref is its address and name. Sending a ref to a local actor publishes the actor by id
// so the receiver can reach it; decoding one on its home rank gives back the local ref.
template <typename Archive, typename Msg>
void save(Archive& ar, const cluster_ref<Msg>& ref) {
  auto* core = detail::current_encode();
  if (ref.is_local() && core != nullptr) {
    (void)core->publish(ref.address().actor,
                        std::make_shared<detail::typed_target<Msg>>(ref.local(), ref.name(), core->limits()));
  }
  ar(ref.address().rank, ref.address().actor, ref.name());
}

template <typename Archive, typename Msg>
void load(Archive& ar, cluster_ref<Msg>& ref) {
  actor_address address;
  std::string name;
  ar(address.rank, address.actor, name);
  auto* ctx = detail::current_decode();
  if (ctx == nullptr) {
    ref = cluster_ref<Msg>(nullptr, address, std::move(name));
    return;
  }
  local::actor_ref<Msg> local;
  if (static_cast<int>(address.rank) == ctx->core->rank()) {
    if (auto t = std::dynamic_pointer_cast<detail::typed_target<Msg>>(ctx->core->find(address.actor))) {
      local = t->ref();
    }
  }
  ref = cluster_ref<Msg>(ctx->core->shared_from_this(), address, std::move(name), std::move(local));
}

}  // namespace atomr::cluster
