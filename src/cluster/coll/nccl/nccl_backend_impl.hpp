// The NCCL backend's class, private to this folder. Its methods are defined by topic:
// nccl_backend.cpp (creation, teardown, split, shrink, abort), nccl_issue.cpp (requests, packed
// batches, seals and completion) and nccl_graphs.cpp (CUDA graph capture and replay).
#pragma once

#include <cuda_runtime.h>
#include <nccl.h>

#include <array>
#include <atomic>
#include <chrono>
#include <deque>
#include <memory>
#include <optional>
#include <span>
#include <vector>

#include "atomr/cluster/engine/comm_backend.hpp"
#include "atomr/cluster/liveness/stall_watch.hpp"
#include "atomr/local/device/cuda_events.hpp"
#include "atomr/local/device/wait_memo.hpp"
#include "batched_copy.hpp"
#include "graph_cache.hpp"

namespace atomr::cluster::detail {

inline ncclDataType_t nccl_type(local::dtype t) {
  switch (t) {
    case local::dtype::i8: return ncclInt8;
    case local::dtype::u8: return ncclUint8;
    case local::dtype::i32: return ncclInt32;
    case local::dtype::u32: return ncclUint32;
    case local::dtype::i64: return ncclInt64;
    case local::dtype::u64: return ncclUint64;
    case local::dtype::f16: return ncclFloat16;
    case local::dtype::bf16: return ncclBfloat16;
    case local::dtype::f32: return ncclFloat32;
    case local::dtype::f64: return ncclFloat64;
  }
  return ncclUint8;
}

inline ncclRedOp_t nccl_op(reduce_op op) {
  switch (op) {
    case reduce_op::sum: return ncclSum;
    case reduce_op::prod: return ncclProd;
    case reduce_op::min: return ncclMin;
    case reduce_op::max: return ncclMax;
    case reduce_op::avg: return ncclAvg;
  }
  return ncclSum;
}

struct member {
  int device = -1;
  ncclComm_t comm = nullptr;
  cudaStream_t stream = nullptr;
  std::shared_ptr<local::cuda_event_pool> events;
  int* scratch = nullptr;  // one int for barrier()
  // Where packed all_reduces take their pack buffer and copy table: a pool of the backend's own
  // that keeps freed memory. (The device's default pool returns it to the driver at every
  // synchronization, so each packed batch mapped fresh memory: cudaMallocAsync took 80-86 us a
  // batch on an H100, tests/gpu/probes/pack_issue_probe.cu, against 2.5-5 us from a kept pool.)
  cudaMemPool_t pack_pool = nullptr;
  local::wait_memo waited;  // events the stream already waited on
};

struct nccl_state {
  std::vector<std::shared_ptr<void>> events;  // per member, from the seal (empty until then)
  bool finished = false;                      // the events passed: a packed batch asks once
};

class nccl_backend final : public comm_backend {
 public:
  nccl_backend(MPI_Comm control, std::vector<member> ms, int size, std::size_t graph_bytes);
  ~nccl_backend() override;

  world_backend kind() const override { return world_backend::nccl; }
  int size() const override { return size_; }
  int rank(std::size_t m) const override { return ranks_[m]; }
  std::size_t members() const override { return members_.size(); }
  const void* origin(std::size_t m) const override { return members_[m].stream; }

  result<void> issue(coll_request& r, const member_waits& waits) override;

  result<void> issue_group(std::span<coll_request* const> batch, const member_waits& waits) override;

  // Several members each replay their own graph (graph_cache).
  std::size_t graph_limit() const override { return graph_bytes_; }

  graph_holding graph_lookup(const coll_request& r) override;

  result<void> issue_graph(coll_request& r, const member_waits& waits, graph_step step, std::uint64_t id) override;

  // (Streams keep a chain's requests in order: chains only need graphs.)
  bool graph_chains() const override { return graph_limit() > 0; }

  graph_holding graph_lookup_chain(std::span<const coll_request* const> chain) override;

  void graph_note_chain(std::span<const coll_request* const> chain) override;

  result<void> issue_graph_chain(std::span<coll_request* const> chain, const member_waits& waits, graph_step step,
                                 std::uint64_t id) override;

  // Enqueues the requests' calls (in one NCCL group if `grouped`) after `waits`; they share the
  // events recorded after them.
  result<void> issue_together(std::span<coll_request* const> batch, const member_waits& waits, bool grouped);

  // The NCCL calls of one request, for every local member (inside the caller's group, if any).
  result<void> enqueue(coll_request& r);

  result<void> issue_packed(std::span<coll_request* const> batch, const member_waits& waits) override;

  // Packed batches replay as graphs where one member packs (issue_packed's only case) and graphs
  // are on; the engine keeps their pack within graph_limit().
  bool graph_packs() const override { return graph_limit() > 0 && members_.size() == 1; }

  graph_holding graph_lookup_packed(std::span<const coll_request* const> batch,
                                    std::vector<std::uint64_t>* kept) override;

  result<void> issue_packed_graph(std::span<coll_request* const> batch, const member_waits& waits, graph_step step,
                                  std::uint64_t id) override;

  bool stream_ordered() const override { return true; }

  result<void> seal(std::span<coll_request* const> issued) override;

  result<bool> finish_if_idle(std::span<coll_request* const> unsealed) override;

  const std::vector<std::shared_ptr<void>>& events(const coll_request& r) const override {
    return static_cast<const nccl_state*>(r.state.get())->events;
  }

  result<bool> test(coll_request& r) override;

  std::optional<error> async_error() override;

  // From the progress thread (the watchdog) or the stall watch's thread, whichever comes first.
  void abort() override;

  bool can_shrink() const override;

  result<std::unique_ptr<comm_backend>> shrink(const std::vector<int>& excluded, MPI_Comm control,
                                               clock::time_point deadline) override;

  result<std::unique_ptr<comm_backend>> split(int color, int key, clock::time_point deadline) override;

  // Streams, event pools and barrier scratch for communicators just made.
  static result<void> prepare(std::vector<member>& ms);

 private:
  // A packed batch's slots, 16-byte aligned (the copies stay wide): pack_entries_ gets each
  // request's send buffer and offset. Returns the pack's size.
  std::size_t lay_out_pack(std::span<coll_request* const> batch);
  // The table goes with the kernels as their parameters: no allocation, no upload, and the
  // scratch is free again as soon as the launch returns.
  result<void> gather_pack(void* pack);
  result<void> all_reduce_pack(std::span<coll_request* const> batch, void* pack, std::size_t total);
  result<void> scatter_pack(std::span<coll_request* const> batch, void* pack);

  result<void> wait_for(const member_waits& waits);

  // ATOMR_TRACE: a packed batch's issue, step by step (see issue_packed), summed over the batches.
  struct pack_timing {
    std::uint64_t batches = 0;
    std::uint64_t requests = 0;
    std::array<double, 6> us{};
    // On the GPU: gather, NCCL, scatter, and the idle time since the batch before ended.
    std::uint64_t gpu_batches = 0;
    std::array<double, 4> gpu_us{};
  } pack_timing_;
  std::deque<std::array<cudaEvent_t, 4>> gpu_stamps_;  // recorded, not read yet (oldest first)
  std::vector<cudaEvent_t> free_stamps_;
  cudaEvent_t last_stamp_ = nullptr;  // the end of the last batch read (kept until the next is)
  bool take_stamps(std::array<cudaEvent_t, 4>& out);
  // Reads the batches whose stamps are done, in order.
  void harvest_gpu_times();
  // Adds the time since the last lap to step `i` (nothing where `to` is null).
  class pack_clock {
   public:
    explicit pack_clock(pack_timing* to) : to_(to), last_(to ? clock::now() : clock::time_point{}) {}
    void operator()(std::size_t i) {
      if (to_ == nullptr) return;
      const auto now = clock::now();
      to_->us[i] += std::chrono::duration<double, std::micro>(now - last_).count();
      last_ = now;
    }
    void done(std::size_t requests) {
      if (to_ == nullptr) return;
      ++to_->batches;
      to_->requests += requests;
    }

   private:
    pack_timing* to_;
    clock::time_point last_;
  };

  MPI_Comm control_;
  std::vector<member> members_;
  std::vector<int> ranks_;
  int size_;
  std::size_t graph_bytes_;            // the largest request replayed as a CUDA graph (0: none)
  std::vector<cudaStream_t> streams_;  // members_' streams and devices, in order (for graphs)
  std::vector<int> devices_;
  graph_cache graphs_;
  std::atomic<bool> aborted_{false};
  std::shared_ptr<void> last_passed_;     // member 0's event of the last seal seen complete
  std::shared_ptr<nccl_state> open_;      // shared by the requests issued since the last seal
  std::vector<pack_entry> pack_entries_;  // a packed batch's table, scratch (the issuing thread's)
  graph_cache::key pack_key_;             // the packed batch last looked up, and its first request
  std::uint64_t pack_key_seq_ = 0;
  stall_watch watch_;  // last: its thread stops before the members it aborts go
};

}  // namespace atomr::cluster::detail
