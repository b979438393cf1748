// The router's lifecycle (start, failures, stop) and its public facade. The transport itself is
// described in router_core_impl.hpp.
#include "atomr/cluster/router.hpp"

#include "atomr/cluster/liveness.hpp"
#include "atomr/cluster/router/tunables.hpp"
#include "router_core_impl.hpp"

namespace atomr::cluster {

namespace routing {

std::string actor_text(std::uint64_t actor) {
  char buf[32];
  std::snprintf(buf, sizeof(buf), "#%llx", static_cast<unsigned long long>(actor));
  return buf;
}

router_core_impl::router_core_impl(MPI_Comm comm, int rank, int size, local::actor_system& system,
                                   router_options options)
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

result<void> router_core_impl::listen_for_failures() {
  ATOMR_ASSIGN_OR_RETURN(listener_,
                         add_failure_listener(comm_, [weak = weak_from_this()](int peer, const std::string& text) {
                           if (auto core = std::static_pointer_cast<router_core_impl>(weak.lock())) {
                             core->peer_failed(peer, text);
                           }
                         }));
  return ok();
}

result<void> router_core_impl::stop() {
  if (stopped_once_.exchange(true)) return stop_result_;
  remove_failure_listener(listener_);
  // Sends stay open until every rank has entered stop() (the progress thread's barrier): a rank
  // that is still waiting for an answer from this one gets it.
  stop_requested_.store(true, std::memory_order_release);
  wake();
  if (thread_.joinable()) thread_.join();
  // Asks still open get their answer now.
  fail_open_asks("the router of rank " + std::to_string(rank_) + " stopped before ", " answered");
  release_requests();
  return stop_result_;
}

void router_core_impl::fail_open_asks(const std::string& prefix, const std::string& suffix) {
  std::unordered_map<std::uint64_t, pending_ask> open;
  {
    std::lock_guard lock(pending_mutex_);
    open.swap(pending_);
    due_.clear();
  }
  for (auto& [id, p] : open) p.handler(error(errc::unavailable, prefix + p.target() + suffix));
}

// After the progress thread ended: every request it left is cancelled or freed, and the
// communicator freed unless a barrier may still complete on it.
void router_core_impl::release_requests() {
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
}

void router_core_impl::peer_failed(int peer, const std::string& why) {
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

router_stats router_core_impl::stats() const {
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

void router_core_impl::fail_transport(const error& e) {
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
  fail_open_asks("ask to ", " failed: the router's transport failed: " + e.message());
}

}  // namespace routing

namespace {

using routing::router_core_impl;

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
