// Stopping: once every rank has entered stop() (a barrier), each tells each peer how many packets
// it sent it, and stops when it has said its own goodbyes and received every peer's packets.
#include "router_core_impl.hpp"

namespace atomr::cluster::routing {

router_core_impl::drain_step router_core_impl::drain_turn(drain_state& state, std::chrono::steady_clock::time_point now,
                                                          bool& active) {
  if (!state.deadline) {
    state.deadline = now + options_.drain_timeout;
    // With a failed rank there is no barrier to be had: close at once.
    if (any_peer_failed()) {
      accepting_.store(false, std::memory_order_release);
    } else if (auto b = ATOMR_MPI_CHECK(MPI_Ibarrier(comm_, &stop_barrier_)); !b) {
      fail_transport(b.error_value());
      return drain_step::end;
    }
  }
  if (stop_barrier_ != MPI_REQUEST_NULL) {
    int all_stopping = 0;
    if (auto t = ATOMR_MPI_CHECK(MPI_Test(&stop_barrier_, &all_stopping, MPI_STATUS_IGNORE)); !t) {
      fail_transport(t.error_value());
      return drain_step::end;
    }
    if (all_stopping) {
      accepting_.store(false, std::memory_order_release);
      active = true;
    } else if (now > *state.deadline) {
      stop_result_ = error(errc::timeout, "router stop: not every rank called stop() within " +
                                              std::to_string(options_.drain_timeout.count()) + " ms");
      return drain_step::end;
    }
  } else if (!state.said_goodbye && nothing_to_send()) {
    if (auto g = say_goodbye(); !g) {
      fail_transport(g.error_value());
      return drain_step::end;
    }
    state.said_goodbye = true;
    active = true;
  } else if (state.said_goodbye && nothing_to_send() && finished_goodbyes()) {
    return drain_step::end;
  } else if (now > *state.deadline) {
    stop_result_ = error(errc::timeout, "router stop: " + drain_status() + " after " +
                                            std::to_string(options_.drain_timeout.count()) + " ms");
    return drain_step::end;
  }
  return drain_step::go_on;
}

bool router_core_impl::finished_goodbyes() {
  auto done = poll_goodbyes();
  if (!done) {
    fail_transport(done.error_value());
    return true;
  }
  return *done;
}

bool router_core_impl::any_peer_failed() const {
  for (const auto& o : out_) {
    if (o->failed.load()) return true;
  }
  return false;
}

bool router_core_impl::nothing_to_send() const {
  if (!send_requests_.empty() || has_output_.load() || !staged_peers_.empty()) return false;
  for (const int p : sending_peers_) {
    if (!sending_[static_cast<std::size_t>(p)].empty()) return false;
  }
  for (std::size_t p = 0; p < out_.size(); ++p) {  // (only while stopping: the cost does not matter)
    if (out_[p]->queued.load() != 0 && !out_[p]->failed.load()) return false;
  }
  return true;
}

result<void> router_core_impl::say_goodbye() {
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
result<bool> router_core_impl::poll_goodbyes() {
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
    ATOMR_TRY(ATOMR_MPI_CHECK(
        MPI_Testall(static_cast<int>(goodbye_requests_.size()), goodbye_requests_.data(), &all, MPI_STATUSES_IGNORE)));
    if (!all) return false;
    goodbye_requests_.clear();
  }
  return heard_all_goodbyes();
}

bool router_core_impl::heard_all_goodbyes() {
  std::lock_guard receiving(recv_mutex_);  // (packets_from_ is counted by whoever receives)
  for (int p = 0; p < size_; ++p) {
    const auto i = static_cast<std::size_t>(p);
    if (out_[i]->failed.load()) continue;
    if (!goodbye_from_[i] || packets_from_[i] < goodbye_count_[i]) return false;
  }
  return true;
}

std::string router_core_impl::drain_status() const {
  std::string silent;
  for (int p = 0; p < size_; ++p) {
    if (goodbye_from_[static_cast<std::size_t>(p)] || out_[static_cast<std::size_t>(p)]->failed.load()) continue;
    silent += silent.empty() ? "" : ", ";
    silent += std::to_string(p);
  }
  if (silent.empty()) return "messages to peers still unsent or unreceived";
  return "no goodbye from rank(s) " + silent + " (did every rank call stop()?)";
}

}  // namespace atomr::cluster::routing
