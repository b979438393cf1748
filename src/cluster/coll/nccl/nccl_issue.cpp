// The NCCL backend's requests: each as NCCL calls on its members' streams (in one group where
// several calls make one request), small all_reduces packed into one buffer, the seal that gives a
// run of requests its completion events, and the tests of those events.
#include <nccl.h>

#include <array>
#include <chrono>
#include <vector>

#include "atomr/cluster/nccl_check.hpp"
#include "atomr/common/context.hpp"
#include "atomr/local/cuda_check.hpp"
#include "nccl_backend_impl.hpp"

namespace atomr::cluster::detail {

result<void> nccl_backend::issue(coll_request& r, const member_waits& waits) {
  coll_request* one[] = {&r};
  return issue_together(one, waits, members_.size() > 1 || r.spec.kind == coll_kind::all_to_all);
}

result<void> nccl_backend::issue_group(std::span<coll_request* const> batch, const member_waits& waits) {
  return issue_together(batch, waits, true);
}

// Enqueues the requests' calls (in one NCCL group if `grouped`) after `waits`; they share the
// events recorded after them.
result<void> nccl_backend::issue_together(std::span<coll_request* const> batch, const member_waits& waits,
                                          bool grouped) {
  ATOMR_TRY(wait_for(waits));
  stall_watch::scope guard(watch_, batch.front()->deadline, "an NCCL call (waiting for a peer to connect)");
  if (grouped) ATOMR_TRY(ATOMR_NCCL_CHECK(ncclGroupStart()));
  result<void> enqueued = ok();
  for (auto* r : batch) {
    enqueued = enqueue(*r);
    if (!enqueued) break;
  }
  if (grouped) ATOMR_TRY(ATOMR_NCCL_CHECK(ncclGroupEnd()));
  ATOMR_TRY(enqueued);
  coll_request::stamp_all(batch, trace_stage::called);
  // The requests issued until the next seal share one state: the seal's events cover all of
  // them (one allocation and one events list per seal, not per request).
  if (!open_) open_ = std::make_shared<nccl_state>();
  for (auto* r : batch) r->state = open_;
  return ok();
}

// The NCCL calls of one request, for every local member (inside the caller's group, if any).
result<void> nccl_backend::enqueue(coll_request& r) {
  const auto t = nccl_type(r.spec.type);
  const auto op = nccl_op(r.spec.params.op);
  const std::size_t n = r.count;
  const std::size_t bytes = r.bytes();
  // (No cudaSetDevice: NCCL's calls take the device from the communicator, and one per call and
  // member was a runtime call on every request's path that raw NCCL does not make.)
  for (std::size_t i = 0; i < members_.size(); ++i) {
    auto& m = members_[i];
    auto* send = r.spec.send.empty() ? nullptr : static_cast<std::byte*>(r.spec.send[i]->ptr);
    auto* recv = r.spec.recv.empty() ? nullptr : static_cast<std::byte*>(r.spec.recv[i]->ptr);
    const bool in_place = send != nullptr && send == recv;
    const int me = ranks_[i];
    const int root = r.spec.params.root;
    switch (r.spec.kind) {
      case coll_kind::all_reduce:
        ATOMR_TRY(ATOMR_NCCL_CHECK(ncclAllReduce(send, recv, n, t, op, m.comm, m.stream)));
        break;
      case coll_kind::broadcast:
        ATOMR_TRY(ATOMR_NCCL_CHECK(ncclBroadcast(send, recv, n, t, root, m.comm, m.stream)));
        break;
      case coll_kind::reduce:
        ATOMR_TRY(ATOMR_NCCL_CHECK(ncclReduce(send, recv, n, t, op, root, m.comm, m.stream)));
        break;
      case coll_kind::all_gather:
        if (in_place) send = recv + bytes * static_cast<std::size_t>(me);
        ATOMR_TRY(ATOMR_NCCL_CHECK(ncclAllGather(send, recv, n, t, m.comm, m.stream)));
        break;
      case coll_kind::reduce_scatter:
        if (in_place) recv = send + bytes * static_cast<std::size_t>(me);
        ATOMR_TRY(ATOMR_NCCL_CHECK(ncclReduceScatter(send, recv, n, t, op, m.comm, m.stream)));
        break;
      case coll_kind::all_to_all:
        for (int p = 0; p < size_; ++p) {
          const auto off = bytes * static_cast<std::size_t>(p);
          ATOMR_TRY(ATOMR_NCCL_CHECK(ncclSend(send + off, n, t, p, m.comm, m.stream)));
          ATOMR_TRY(ATOMR_NCCL_CHECK(ncclRecv(recv + off, n, t, p, m.comm, m.stream)));
        }
        break;
      case coll_kind::send:
        ATOMR_TRY(ATOMR_NCCL_CHECK(ncclSend(send, n, t, (root + static_cast<int>(i)) % size_, m.comm, m.stream)));
        break;
      case coll_kind::recv:
        ATOMR_TRY(ATOMR_NCCL_CHECK(ncclRecv(recv, n, t, (root + static_cast<int>(i)) % size_, m.comm, m.stream)));
        break;
      case coll_kind::barrier:
        ATOMR_TRY(ATOMR_NCCL_CHECK(ncclAllReduce(m.scratch, m.scratch, 1, ncclInt32, ncclSum, m.comm, m.stream)));
        break;
    }
  }
  return ok();
}

result<void> nccl_backend::issue_packed(std::span<coll_request* const> batch, const member_waits& waits) {
  // ATOMR_TRACE: where a batch's issue goes, step by step (logged when the backend ends).
  pack_clock lap(batch.front()->traced ? &pack_timing_ : nullptr);
  ATOMR_TRY(wait_for(waits));
  auto& m = members_[0];
  ATOMR_TRY(ATOMR_CUDA_CHECK(cudaSetDevice(m.device)));
  lap(0);
  const std::size_t total = lay_out_pack(batch);
  lap(1);
  auto st = std::make_shared<nccl_state>();
  void* pack = nullptr;
  ATOMR_TRY(ATOMR_CUDA_CHECK(cudaMallocFromPoolAsync(&pack, total, m.pack_pool, m.stream)));
  lap(2);
  // ATOMR_TRACE: the batch's steps on the GPU, by timing events (read once they are done).
  std::array<cudaEvent_t, 4> stamps{};
  const bool stamped = batch.front()->traced && take_stamps(stamps);
  if (stamped) ATOMR_TRY(ATOMR_CUDA_CHECK(cudaEventRecord(stamps[0], m.stream)));
  ATOMR_TRY(gather_pack(pack));
  if (stamped) ATOMR_TRY(ATOMR_CUDA_CHECK(cudaEventRecord(stamps[1], m.stream)));
  lap(3);
  stall_watch::scope guard(watch_, batch.front()->deadline, "a packed NCCL all_reduce (waiting for a peer)");
  ATOMR_TRY(all_reduce_pack(batch, pack, total));
  coll_request::stamp_all(batch, trace_stage::called);
  lap(4);
  if (stamped) ATOMR_TRY(ATOMR_CUDA_CHECK(cudaEventRecord(stamps[2], m.stream)));
  ATOMR_TRY(scatter_pack(batch, pack));
  if (stamped) {
    ATOMR_TRY(ATOMR_CUDA_CHECK(cudaEventRecord(stamps[3], m.stream)));
    gpu_stamps_.push_back(stamps);
    harvest_gpu_times();
  }
  ATOMR_TRY(ATOMR_CUDA_CHECK(cudaFreeAsync(pack, m.stream)));
  give_state(batch, st);
  lap(5);
  lap.done(batch.size());
  return ok();
}

result<void> nccl_backend::seal(std::span<coll_request* const> issued) {
  if (issued.empty()) return ok();
  std::vector<std::shared_ptr<void>> events;
  events.reserve(members_.size());
  for (auto& m : members_) {
    ATOMR_TRY(ATOMR_CUDA_CHECK(cudaSetDevice(m.device)));
    ATOMR_ASSIGN_OR_RETURN(auto e, m.events->take());
    ATOMR_TRY(ATOMR_CUDA_CHECK(cudaEventRecord(static_cast<cudaEvent_t>(e.get()), m.stream)));
    events.push_back(std::move(e));
  }
  nccl_state* last = nullptr;  // a packed batch's requests share one state, as do the others
  for (auto* r : issued) {
    auto* st = static_cast<nccl_state*>(r->state.get());
    if (st != last) st->events = events;
    last = st;
  }
  open_.reset();
  return ok();
}

result<bool> nccl_backend::finish_if_idle(std::span<coll_request* const> unsealed) {
  if (unsealed.empty()) return false;
  for (auto& m : members_) {
    const auto q = cudaStreamQuery(m.stream);
    if (q == cudaErrorNotReady) return false;
    if (q != cudaSuccess) {
      context::scoped_device scope(m.device);
      return ATOMR_CUDA_CHECK(q).error_value();
    }
  }
  for (auto* r : unsealed) static_cast<nccl_state*>(r->state.get())->finished = true;
  open_.reset();  // later issues start a state of their own
  return true;
}

result<bool> nccl_backend::test(coll_request& r) {
  auto* st = static_cast<nccl_state*>(r.state.get());
  if (st->finished) return true;
  if (st->events.empty()) return false;  // not sealed yet
  // The requests of one seal share its events: once one of them passed, so did the rest.
  // (last_passed_ holds the event, so the pool cannot hand it to a later seal meanwhile.)
  if (st->events.front() == last_passed_) {
    st->finished = true;
    return true;
  }
  for (std::size_t i = 0; i < st->events.size(); ++i) {
    const auto q = cudaEventQuery(static_cast<cudaEvent_t>(st->events[i].get()));
    if (q == cudaErrorNotReady) return false;
    if (q != cudaSuccess) {
      context::scoped_device scope(members_[i].device);
      return ATOMR_CUDA_CHECK(q).error_value();
    }
  }
  st->finished = true;
  last_passed_ = st->events.front();
  return true;
}

// A packed batch's slots, 16-byte aligned (the copies stay wide): pack_entries_ gets each
// request's send buffer and offset. Returns the pack's size.
std::size_t nccl_backend::lay_out_pack(std::span<coll_request* const> batch) {
  auto& table = pack_entries_;
  table.clear();
  std::size_t total = 0;
  for (std::size_t i = 0; i < batch.size(); ++i) {
    if (i + 8 < batch.size()) batch[i + 8]->prefetch_buffers();  // their pointers, read below
    table.push_back({batch[i]->spec.send[0]->ptr, total, batch[i]->bytes()});
    total += (batch[i]->bytes() + 15) / 16 * 16;
  }
  return total;
}

// The table goes with the kernels as their parameters: no allocation, no upload, and the
// scratch is free again as soon as the launch returns.
result<void> nccl_backend::gather_pack(void* pack) {
  const int k = static_cast<int>(pack_entries_.size());
  return ATOMR_CUDA_CHECK(launch_pack_copy(pack_entries_.data(), k, pack, true, members_[0].stream));
}

result<void> nccl_backend::all_reduce_pack(std::span<coll_request* const> batch, void* pack, std::size_t total) {
  // The slots' padding is reduced too (garbage in, garbage out, never copied back).
  const auto type = batch.front()->spec.type;
  const std::size_t elems = total / local::size_of(type);
  auto& m = members_[0];
  return ATOMR_NCCL_CHECK(
      ncclAllReduce(pack, pack, elems, nccl_type(type), nccl_op(batch.front()->spec.params.op), m.comm, m.stream));
}

result<void> nccl_backend::scatter_pack(std::span<coll_request* const> batch, void* pack) {
  for (std::size_t i = 0; i < batch.size(); ++i) pack_entries_[i].user = batch[i]->spec.recv[0]->ptr;
  const int k = static_cast<int>(pack_entries_.size());
  return ATOMR_CUDA_CHECK(launch_pack_copy(pack_entries_.data(), k, pack, false, members_[0].stream));
}

result<void> nccl_backend::wait_for(const member_waits& waits) {
  for (std::size_t i = 0; i < members_.size() && i < waits.size(); ++i) {
    if (waits[i].empty()) continue;
    auto& m = members_[i];
    ATOMR_TRY(ATOMR_CUDA_CHECK(cudaSetDevice(m.device)));
    for (const auto& e : waits[i]) {
      if (m.waited.seen(e)) continue;
      ATOMR_TRY(ATOMR_CUDA_CHECK(cudaStreamWaitEvent(m.stream, static_cast<cudaEvent_t>(e.get()), 0)));
      m.waited.remember(e);
    }
  }
  return ok();
}

bool nccl_backend::take_stamps(std::array<cudaEvent_t, 4>& out) {
  for (auto& e : out) {
    if (!free_stamps_.empty()) {
      e = free_stamps_.back();
      free_stamps_.pop_back();
    } else if (cudaEventCreate(&e) != cudaSuccess) {
      return false;
    }
  }
  return true;
}

// Reads the batches whose stamps are done, in order.
void nccl_backend::harvest_gpu_times() {
  auto& t = pack_timing_;
  while (!gpu_stamps_.empty() && cudaEventQuery(gpu_stamps_.front()[3]) == cudaSuccess) {
    const auto st = gpu_stamps_.front();
    gpu_stamps_.pop_front();
    float ms[4] = {0, 0, 0, 0};
    cudaEventElapsedTime(&ms[0], st[0], st[1]);
    cudaEventElapsedTime(&ms[1], st[1], st[2]);
    cudaEventElapsedTime(&ms[2], st[2], st[3]);
    if (last_stamp_ != nullptr) cudaEventElapsedTime(&ms[3], last_stamp_, st[0]);
    for (std::size_t i = 0; i < 4; ++i) t.gpu_us[i] += 1e3 * static_cast<double>(ms[i]);
    ++t.gpu_batches;
    if (last_stamp_ != nullptr) free_stamps_.push_back(last_stamp_);
    free_stamps_.insert(free_stamps_.end(), st.begin(), st.begin() + 3);
    last_stamp_ = st[3];
  }
}

}  // namespace atomr::cluster::detail
