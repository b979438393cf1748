// The transfer thread: posts the registry's MPI sends and receives and completes them in any order.
#include <list>

#include "atomr/common/spin.hpp"
#include "registry_state.hpp"

namespace atomr::cluster::detail {

void transfer_thread::post(op o) {
  {
    std::lock_guard lock(mutex_);
    if (!stopping_) {
      incoming_.push_back(std::move(o));
      cv_.notify_one();
      return;
    }
  }
  o.done(error(errc::aborted, "the buffer registry stopped"));
}

void transfer_thread::run() {
  const spin_relax relax;
  std::list<op> active;
  for (;;) {
    std::vector<op> fresh;
    std::vector<std::pair<int, error>> failed;
    {
      std::unique_lock lock(mutex_);
      if (active.empty()) {
        cv_.wait(lock, [&] { return stopping_ || !incoming_.empty(); });
      }
      if (stopping_ && incoming_.empty() && active.empty()) return;
      if (stopping_) {
        // Whatever is still in flight will not finish: the registry is going away.
        for (auto& o : incoming_) o.done(error(errc::aborted, "the buffer registry stopped"));
        incoming_.clear();
        for (auto& o : active) {
          if (!o.is_send) MPI_Cancel(&o.request);
          MPI_Request_free(&o.request);
          o.done(error(errc::aborted, "the buffer registry stopped"));
        }
        return;
      }
      fresh.swap(incoming_);
      failed = failed_;  // a failed peer stays failed
    }
    for (auto& o : fresh) {
      const int count = static_cast<int>(o.bytes);
      auto posted = o.is_send ? ATOMR_MPI_CHECK(MPI_Isend(o.data, count, MPI_BYTE, o.peer, o.tag, comm_, &o.request))
                              : ATOMR_MPI_CHECK(MPI_Irecv(o.data, count, MPI_BYTE, o.peer, o.tag, comm_, &o.request));
      if (!posted) {
        o.done(posted.error_value());
        continue;
      }
      active.push_back(std::move(o));
    }
    for (auto it = active.begin(); it != active.end();) {
      std::optional<error> peer_failure;
      for (auto& [peer, why] : failed) {
        if (peer == it->peer) peer_failure = why;
      }
      if (peer_failure) {
        MPI_Cancel(&it->request);
        MPI_Request_free(&it->request);
        it->done(*peer_failure);
        it = active.erase(it);
        continue;
      }
      int flag = 0;
      MPI_Status status;
      auto tested = ATOMR_MPI_CHECK(MPI_Test(&it->request, &flag, &status));
      if (!tested || flag) {
        if (tested && !it->is_send) {
          int got = 0;
          MPI_Get_count(&status, MPI_BYTE, &got);
          if (static_cast<std::size_t>(got) != it->bytes) {
            tested = error(errc::protocol, "rank " + std::to_string(it->peer) + " sent " + std::to_string(got) +
                                               " bytes for a fetch of " + std::to_string(it->bytes));
          }
        }
        it->done(std::move(tested));
        it = active.erase(it);
        continue;
      }
      ++it;
    }
    if (!active.empty()) relax();
  }
}

}  // namespace atomr::cluster::detail
