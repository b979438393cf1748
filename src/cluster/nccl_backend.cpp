// The NCCL backend: one communicator per local member, each with its own non-blocking stream.
// Communicators are blocking by default (ATOMR_NCCL_BLOCKING): a nonblocking one hands every
// group launch to a thread of NCCL's and costs tens of microseconds per call (docs/benchmarks.md).
// A blocking call only blocks while a peer has not connected (first use, split, init, finalize);
// the stall watch bounds those by their deadline and aborts the communicator. Work stuck on the
// device is the watchdog's, as before: it aborts the communicator from the progress thread. Requests wait on their
// buffers' last writes with cudaStreamWaitEvent and run as NCCL calls (in one group when several calls make one
// request). The engine seals each run of requests it issued with one event per member (seal): that event is both
// their completion (polled by the progress thread) and the "last write" later readers of their recv buffers wait on.
#include <nccl.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <limits>
#include <mutex>
#include <thread>
#include <vector>

#include "atomr/cluster/mpi_check.hpp"
#include "atomr/cluster/nccl_check.hpp"
#include "atomr/common/context.hpp"
#include "atomr/common/lap_timer.hpp"
#include "atomr/common/log.hpp"
#include "atomr/common/tunables.hpp"
#include "atomr/local/cuda_check.hpp"
#include "atomr/local/device/cuda_events.hpp"
#include "atomr/local/device/wait_memo.hpp"
#include "batched_copy.hpp"
#include "comm_backend.hpp"
#include "graph_cache.hpp"
#include "nccl_retire.hpp"
#include "stall_watch.hpp"

namespace atomr::cluster::detail {
namespace {

#define ATOMR_NCCL_ISSUE(call) track((call), #call, __FILE__, __LINE__)

ncclDataType_t nccl_type(local::dtype t) {
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

ncclRedOp_t nccl_op(reduce_op op) {
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

// Nonblocking communicators finish some calls in the background; wait for them, bounded.
result<void> settle(const std::vector<member>& ms, clock::time_point deadline, const std::string& what) {
  for (const auto& m : ms) {
    while (true) {
      ncclResult_t state = ncclSuccess;
      ATOMR_TRY(ATOMR_NCCL_CHECK(ncclCommGetAsyncError(m.comm, &state)));
      if (state == ncclSuccess) break;
      if (state != ncclInProgress) {
        return atomr::detail::nccl_failure(state, what.c_str(), __FILE__, __LINE__);
      }
      if (clock::now() >= deadline) {
        return error(errc::timeout, what + " did not finish by its deadline on device " + std::to_string(m.device) +
                                        " (a rank did not take part?)");
      }
      std::this_thread::yield();
    }
  }
  return ok();
}

// How long a blocked call may stay blocked after its communicator was aborted before the job is
// ended (see stall_watch).
constexpr std::chrono::milliseconds k_stall_grace{10'000};

// The NCCL unique ids of a new world. Up to ATOMR_NCCL_SCALABLE_RANKS GPUs: one, made by rank 0
// and broadcast (ncclCommInitRankConfig). From there: one per ATOMR_NCCL_RANKS_PER_ID GPUs, each
// made by a different rank spread over the world, so that no one bootstrap root talks to every
// rank (ncclCommInitRankScalable). The ids meet in one bitwise-or all_reduce (the other ranks add
// zeros): log P steps, and the bytes do not grow with P, as a gather of every rank's would.
struct unique_id_set {
  std::vector<ncclUniqueId> ids;
  bool scalable = false;  // ncclCommInitRankScalable (with ids.size() ids), else ncclCommInitRankConfig
};

result<unique_id_set> unique_ids(MPI_Comm control, int rank, int ranks, int total, clock::time_point deadline) {
  ATOMR_ASSIGN_OR_RETURN(const auto from, tunable_int(tunables::nccl_scalable_ranks));
  ATOMR_ASSIGN_OR_RETURN(const auto per_id, tunable_int(tunables::nccl_ranks_per_id));
  if (from < 0) return error(errc::invalid_argument, "ATOMR_NCCL_SCALABLE_RANKS must not be negative");
  if (per_id < 1) return error(errc::invalid_argument, "ATOMR_NCCL_RANKS_PER_ID must be at least 1");
  std::size_t count = 1;
  bool scalable = false;
#if NCCL_VERSION_CODE >= NCCL_VERSION(2, 23, 0)
  scalable = from > 0 && total >= from;
  if (scalable) count = static_cast<std::size_t>((total + per_id - 1) / per_id);
#endif
  count = std::min<std::size_t>(count, static_cast<std::size_t>(ranks));
  std::vector<ncclUniqueId> ids(count);
  std::memset(ids.data(), 0, count * sizeof(ncclUniqueId));
  // Id i is made by rank i * ranks / count.
  result<void> made = ok();
  for (std::size_t i = 0; i < count; ++i) {
    if (static_cast<int>(i * static_cast<std::size_t>(ranks) / count) == rank) {
      made = ATOMR_NCCL_CHECK(ncclGetUniqueId(&ids[i]));
    }
  }
  ATOMR_TRY(agree(control, made, deadline, "making the NCCL unique id"));
  MPI_Request q = MPI_REQUEST_NULL;
  if (!scalable) {
    ATOMR_TRY(ATOMR_MPI_CHECK(MPI_Ibcast(ids.data(), sizeof(ncclUniqueId), MPI_BYTE, 0, control, &q)));
    ATOMR_TRY(wait_mpi(q, deadline, "broadcasting the NCCL unique id"));
  } else {
    ATOMR_TRY(ATOMR_MPI_CHECK(MPI_Iallreduce(MPI_IN_PLACE, ids.data(), static_cast<int>(count * sizeof(ncclUniqueId)),
                                             MPI_BYTE, MPI_BOR, control, &q)));
    ATOMR_TRY(wait_mpi(q, deadline, "sharing the NCCL unique ids"));
    log::get("cluster")->debug("NCCL world of {} GPUs: ncclCommInitRankScalable with {} unique ids", total, count);
  }
  return unique_id_set{std::move(ids), scalable};
}

result<int> blocking_from_environment() {
  ATOMR_ASSIGN_OR_RETURN(const auto v, tunable_int(tunables::nccl_blocking));
  if (v != 0 && v != 1) return error(errc::invalid_argument, "ATOMR_NCCL_BLOCKING must be 0 or 1");
  return static_cast<int>(v);
}

// The largest request replayed as a CUDA graph (0: none), from ATOMR_NCCL_GRAPHS and
// ATOMR_NCCL_GRAPH_BYTES.
result<std::size_t> graph_bytes_from_environment() {
  ATOMR_ASSIGN_OR_RETURN(const auto on, tunable_int(tunables::nccl_graphs));
  if (on != 0 && on != 1) return error(errc::invalid_argument, "ATOMR_NCCL_GRAPHS must be 0 or 1");
  ATOMR_ASSIGN_OR_RETURN(const auto bytes, tunable_int(tunables::nccl_graph_bytes));
  if (bytes < 0) return error(errc::invalid_argument, "ATOMR_NCCL_GRAPH_BYTES must not be negative");
  return on == 1 ? static_cast<std::size_t>(bytes) : 0;
}

struct nccl_state {
  std::vector<std::shared_ptr<void>> events;  // per member, from the seal (empty until then)
  bool finished = false;                      // the events passed: a packed batch asks once
};

class nccl_backend final : public comm_backend {
 public:
  nccl_backend(MPI_Comm control, std::vector<member> ms, int size, int blocking, std::size_t graph_bytes)
      : control_(control),
        members_(std::move(ms)),
        size_(size),
        blocking_(blocking),
        graph_bytes_(graph_bytes),
        watch_([this] { abort(); }, k_stall_grace) {
    for (auto& m : members_) {
      int r = 0;
      ncclCommUserRank(m.comm, &r);
      ranks_.push_back(r);
      streams_.push_back(m.stream);
      devices_.push_back(m.device);
    }
  }
  ~nccl_backend() override {
    if (pack_timing_.batches > 0) {
      if (!aborted_) {
        cudaSetDevice(members_[0].device);
        cudaStreamSynchronize(members_[0].stream);
        harvest_gpu_times();
      }
      const auto& t = pack_timing_;
      const double n = static_cast<double>(t.batches);
      log::get("cluster")->info(
          "packed NCCL batches issued while tracing: {} of {:.0f} requests on average; us a batch: waits and device "
          "{:.1f}, slots and table {:.1f}, pack buffer {:.1f}, gather {:.1f}, NCCL call {:.1f}, scatter and free "
          "{:.1f}",
          t.batches, static_cast<double>(t.requests) / n, t.us[0] / n, t.us[1] / n, t.us[2] / n, t.us[3] / n,
          t.us[4] / n, t.us[5] / n);
      if (t.gpu_batches > 0) {
        const double g = static_cast<double>(t.gpu_batches);
        log::get("cluster")->info(
            "on the GPU, us a packed batch ({} timed): gather {:.1f}, NCCL {:.1f}, scatter {:.1f}; idle "
            "before it {:.1f} (since the batch before it ended)",
            t.gpu_batches, t.gpu_us[0] / g, t.gpu_us[1] / g, t.gpu_us[2] / g, t.gpu_us[3] / g);
      }
    }
    for (auto& stamps : gpu_stamps_) {
      for (auto* e : stamps) cudaEventDestroy(e);
    }
    for (auto* e : free_stamps_) cudaEventDestroy(e);
    if (last_stamp_ != nullptr) cudaEventDestroy(last_stamp_);
    // Where the teardown's time goes (debug log), as for the creation.
    lap_timer laps;
    double drain_ms = 0;
    double finalize_ms = 0;
    {
      // Finalizing waits for the peers (a blocking communicator, in the call).
      const auto deadline = clock::now() + std::chrono::seconds(10);
      stall_watch::scope guard(watch_, deadline, "ncclCommFinalize");
      // NCCL's finalize waits until no CUDA graph refers to the communicator.
      if (!aborted_) {
        for (auto& m : members_) {
          cudaSetDevice(m.device);
          cudaStreamSynchronize(m.stream);
        }
        graphs_.drop_all();
      }
      drain_ms = laps.lap();
      for (auto& m : members_) {
        cudaSetDevice(m.device);
        if (!aborted_) ncclCommFinalize(m.comm);
      }
      if (!aborted_) (void)settle(members_, deadline, "ncclCommFinalize");
      finalize_ms = laps.lap();
    }
    watch_.stop();  // an abort the watch started has finished: the communicators are settled
    // Finalized, they are destroyed on a thread of their own (nccl_retire.hpp says why). abort()
    // already freed aborted ones.
    std::vector<retired_comm> retired;
    if (!aborted_) {
      for (std::size_t i = 0; i < members_.size(); ++i)
        retired.push_back({members_[i].comm, members_[i].device, ranks_[i]});
    }
    retire_nccl_comms(retired);
    for (auto& m : members_) {
      cudaSetDevice(m.device);
      cudaFree(m.scratch);
      cudaStreamDestroy(m.stream);
      // (Frees still queued on the stream of an aborted communicator complete first: the pool
      // goes once nothing is outstanding.)
      if (m.pack_pool) cudaMemPoolDestroy(m.pack_pool);
    }
    log::get("cluster")->debug(
        "NCCL backend down (ms): streams and graphs {:.1f}, ncclCommFinalize {:.1f}, the rest {:.1f}{}", drain_ms,
        finalize_ms, laps.lap(), aborted_ ? " (aborted; nothing to destroy)" : " (communicators retired)");
  }

  world_backend kind() const override { return world_backend::nccl; }
  int size() const override { return size_; }
  int rank(std::size_t m) const override { return ranks_[m]; }
  std::size_t members() const override { return members_.size(); }
  const void* origin(std::size_t m) const override { return members_[m].stream; }

  result<void> issue(coll_request& r, const member_waits& waits) override {
    coll_request* one[] = {&r};
    return issue_together(one, waits, members_.size() > 1 || r.spec.kind == coll_kind::all_to_all);
  }

  result<void> issue_group(std::span<coll_request* const> batch, const member_waits& waits) override {
    return issue_together(batch, waits, true);
  }

  // Graphs need a blocking communicator (a nonblocking one may still be enqueuing when the
  // capture ends). Several members each replay their own graph (graph_cache).
  std::size_t graph_limit() const override { return blocking_ == 1 ? graph_bytes_ : 0; }

  graph_holding graph_lookup(const coll_request& r) override {
    const auto h = graphs_.lookup(graph_cache::key_of(r.spec, r.count));
    return {h.capture, h.seen};
  }

  result<void> issue_graph(coll_request& r, const member_waits& waits, graph_step step, std::uint64_t id) override {
    const auto k = graph_cache::key_of(r.spec, r.count);
    if (step == graph_step::eager) {
      ATOMR_TRY(issue(r, waits));
      graphs_.note_issued(k);
      return ok();
    }
    ATOMR_TRY(wait_for(waits));
    if (step == graph_step::launch) {
      ATOMR_TRY(graphs_.launch(k, id, streams_));
    } else {
      std::vector<std::shared_ptr<local::buffer_block>> blocks(r.spec.send.begin(), r.spec.send.end());
      blocks.insert(blocks.end(), r.spec.recv.begin(), r.spec.recv.end());
      stall_watch::scope guard(watch_, r.deadline, "an NCCL call captured into a CUDA graph");
      const bool grouped = members_.size() > 1 || r.spec.kind == coll_kind::all_to_all;
      auto calls = [&]() -> result<void> {
        if (grouped) ATOMR_TRY(ATOMR_NCCL_ISSUE(ncclGroupStart()));
        auto enqueued = enqueue(r);
        if (grouped) ATOMR_TRY(ATOMR_NCCL_ISSUE(ncclGroupEnd()));
        return enqueued;
      };
      ATOMR_TRY(graphs_.capture_and_launch(k, id, streams_, devices_, std::move(blocks), calls));
    }
    r.stamp(trace_stage::called);
    if (!open_) open_ = std::make_shared<nccl_state>();
    r.state = open_;
    return ok();
  }

  // (Streams keep a chain's requests in order: chains only need graphs.)
  bool graph_chains() const override { return graph_limit() > 0; }

  graph_holding graph_lookup_chain(std::span<const coll_request* const> chain) override {
    const auto h = graphs_.lookup(graph_cache::key_of_chain(chain));
    return {h.capture, h.seen};
  }

  void graph_note_chain(std::span<const coll_request* const> chain) override {
    graphs_.note_issued(graph_cache::key_of_chain(chain));
  }

  result<void> issue_graph_chain(std::span<coll_request* const> chain, const member_waits& waits, graph_step step,
                                 std::uint64_t id) override {
    if (chain.empty() || step == graph_step::eager) {
      return error(errc::internal, "a chain of requests goes as a graph, captured or launched");
    }
    const auto k = graph_cache::key_of_chain(std::span<const coll_request* const>(chain.data(), chain.size()));
    ATOMR_TRY(wait_for(waits));
    if (step == graph_step::launch) {
      ATOMR_TRY(graphs_.launch(k, id, streams_));
    } else {
      std::vector<std::shared_ptr<local::buffer_block>> blocks;
      for (const auto* r : chain) {
        blocks.insert(blocks.end(), r->spec.send.begin(), r->spec.send.end());
        blocks.insert(blocks.end(), r->spec.recv.begin(), r->spec.recv.end());
      }
      stall_watch::scope guard(watch_, chain.front()->deadline, "NCCL calls captured into a CUDA graph");
      // Each request's calls as it would make them alone, one after another on the stream.
      auto calls = [&]() -> result<void> {
        for (auto* r : chain) {
          const bool grouped = members_.size() > 1 || r->spec.kind == coll_kind::all_to_all;
          if (grouped) ATOMR_TRY(ATOMR_NCCL_ISSUE(ncclGroupStart()));
          auto enqueued = enqueue(*r);
          if (grouped) ATOMR_TRY(ATOMR_NCCL_ISSUE(ncclGroupEnd()));
          ATOMR_TRY(enqueued);
        }
        return ok();
      };
      ATOMR_TRY(graphs_.capture_and_launch(k, id, streams_, devices_, std::move(blocks), calls));
    }
    if (!open_) open_ = std::make_shared<nccl_state>();
    for (auto* r : chain) {
      r->stamp(trace_stage::called);
      r->state = open_;
    }
    return ok();
  }

  // Enqueues the requests' calls (in one NCCL group if `grouped`) after `waits`; they share the
  // events recorded after them.
  result<void> issue_together(std::span<coll_request* const> batch, const member_waits& waits, bool grouped) {
    ATOMR_TRY(wait_for(waits));
    stall_watch::scope guard(watch_, batch.front()->deadline, "an NCCL call (waiting for a peer to connect)");
    if (grouped) ATOMR_TRY(ATOMR_NCCL_ISSUE(ncclGroupStart()));
    result<void> enqueued = ok();
    for (auto* r : batch) {
      enqueued = enqueue(*r);
      if (!enqueued) break;
    }
    if (grouped) ATOMR_TRY(ATOMR_NCCL_ISSUE(ncclGroupEnd()));
    ATOMR_TRY(enqueued);
    coll_request::stamp_all(batch, trace_stage::called);
    ATOMR_TRY(finish_nccl(batch.front()->deadline));
    // The requests issued until the next seal share one state: the seal's events cover all of
    // them (one allocation and one events list per seal, not per request).
    if (!open_) open_ = std::make_shared<nccl_state>();
    for (auto* r : batch) r->state = open_;
    return ok();
  }

  // The NCCL calls of one request, for every local member (inside the caller's group, if any).
  result<void> enqueue(coll_request& r) {
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
          ATOMR_TRY(ATOMR_NCCL_ISSUE(ncclAllReduce(send, recv, n, t, op, m.comm, m.stream)));
          break;
        case coll_kind::broadcast:
          ATOMR_TRY(ATOMR_NCCL_ISSUE(ncclBroadcast(send, recv, n, t, root, m.comm, m.stream)));
          break;
        case coll_kind::reduce:
          ATOMR_TRY(ATOMR_NCCL_ISSUE(ncclReduce(send, recv, n, t, op, root, m.comm, m.stream)));
          break;
        case coll_kind::all_gather:
          if (in_place) send = recv + bytes * static_cast<std::size_t>(me);
          ATOMR_TRY(ATOMR_NCCL_ISSUE(ncclAllGather(send, recv, n, t, m.comm, m.stream)));
          break;
        case coll_kind::reduce_scatter:
          if (in_place) recv = send + bytes * static_cast<std::size_t>(me);
          ATOMR_TRY(ATOMR_NCCL_ISSUE(ncclReduceScatter(send, recv, n, t, op, m.comm, m.stream)));
          break;
        case coll_kind::all_to_all:
          for (int p = 0; p < size_; ++p) {
            const auto off = bytes * static_cast<std::size_t>(p);
            ATOMR_TRY(ATOMR_NCCL_ISSUE(ncclSend(send + off, n, t, p, m.comm, m.stream)));
            ATOMR_TRY(ATOMR_NCCL_ISSUE(ncclRecv(recv + off, n, t, p, m.comm, m.stream)));
          }
          break;
        case coll_kind::send:
          ATOMR_TRY(ATOMR_NCCL_ISSUE(ncclSend(send, n, t, (root + static_cast<int>(i)) % size_, m.comm, m.stream)));
          break;
        case coll_kind::recv:
          ATOMR_TRY(ATOMR_NCCL_ISSUE(ncclRecv(recv, n, t, (root + static_cast<int>(i)) % size_, m.comm, m.stream)));
          break;
        case coll_kind::barrier:
          ATOMR_TRY(ATOMR_NCCL_ISSUE(ncclAllReduce(m.scratch, m.scratch, 1, ncclInt32, ncclSum, m.comm, m.stream)));
          break;
      }
    }
    return ok();
  }

  result<void> issue_packed(std::span<coll_request* const> batch, const member_waits& waits) override {
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
    ATOMR_TRY(finish_nccl(batch.front()->deadline));
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

  // Packed batches replay as graphs where one member packs (issue_packed's only case) and graphs
  // are on; the engine keeps their pack within graph_limit().
  bool graph_packs() const override { return graph_limit() > 0 && members_.size() == 1; }

  graph_holding graph_lookup_packed(std::span<const coll_request* const> batch,
                                    std::vector<std::uint64_t>* kept) override {
    if (kept != nullptr && !kept->empty()) {
      pack_key_.v.assign(kept->begin(), kept->end());
    } else {
      pack_key_ = graph_cache::key_of_packed(batch);
      if (kept != nullptr) kept->assign(pack_key_.v.begin(), pack_key_.v.end());
    }
    pack_key_seq_ = batch.front()->seq;
    const auto h = graphs_.lookup(pack_key_);
    return {h.capture, h.seen};
  }

  result<void> issue_packed_graph(std::span<coll_request* const> batch, const member_waits& waits, graph_step step,
                                  std::uint64_t id) override {
    // (The vote looked the batch up just before: its key is kept.)
    if (pack_key_seq_ != batch.front()->seq || pack_key_.v.size() < 2 || pack_key_.v[1] != batch.size()) {
      pack_key_ = graph_cache::key_of_packed(std::span<const coll_request* const>(batch.data(), batch.size()));
    }
    pack_key_seq_ = 0;
    if (step == graph_step::eager) {
      ATOMR_TRY(issue_packed(batch, waits));
      graphs_.note_issued(pack_key_);
      return ok();
    }
    ATOMR_TRY(wait_for(waits));
    auto& m = members_[0];
    ATOMR_TRY(ATOMR_CUDA_CHECK(cudaSetDevice(m.device)));
    if (step == graph_step::launch) {
      ATOMR_TRY(graphs_.launch(pack_key_, id, streams_));
    } else {
      const std::size_t total = lay_out_pack(batch);
      // The graph's own pack buffer, allocated before the capture and freed after the graph's
      // last launch (stream-ordered: every launch is on this stream).
      void* pack = nullptr;
      ATOMR_TRY(ATOMR_CUDA_CHECK(cudaMallocFromPoolAsync(&pack, total, m.pack_pool, m.stream)));
      std::shared_ptr<void> scratch(pack, [stream = m.stream](void* p) { (void)cudaFreeAsync(p, stream); });
      std::vector<std::shared_ptr<local::buffer_block>> blocks;
      blocks.reserve(2 * batch.size());
      for (const auto* r : batch) {
        blocks.push_back(r->spec.send[0]);
        blocks.push_back(r->spec.recv[0]);
      }
      stall_watch::scope guard(watch_, batch.front()->deadline, "a packed NCCL all_reduce captured into a CUDA graph");
      auto calls = [&]() -> result<void> {
        ATOMR_TRY(gather_pack(pack));
        ATOMR_TRY(all_reduce_pack(batch, pack, total));
        return scatter_pack(batch, pack);
      };
      ATOMR_TRY(
          graphs_.capture_and_launch(pack_key_, id, streams_, devices_, std::move(blocks), calls, std::move(scratch)));
    }
    coll_request::stamp_all(batch, trace_stage::called);
    auto st = std::make_shared<nccl_state>();
    give_state(batch, st);
    return ok();
  }

  bool stream_ordered() const override { return true; }

  result<void> seal(std::span<coll_request* const> issued) override {
    if (issued.empty()) return ok();
    ATOMR_TRY(finish_nccl(issued.front()->deadline));
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

  result<bool> finish_if_idle(std::span<coll_request* const> unsealed) override {
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

  const std::vector<std::shared_ptr<void>>& events(const coll_request& r) const override {
    return static_cast<const nccl_state*>(r.state.get())->events;
  }

  result<bool> test(coll_request& r) override {
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

  std::optional<error> async_error() override {
    if (aborted_) return std::nullopt;
    for (const auto& m : members_) {
      ncclResult_t state = ncclSuccess;
      const auto r = ncclCommGetAsyncError(m.comm, &state);
      if (r != ncclSuccess) return atomr::detail::nccl_failure(r, "ncclCommGetAsyncError", __FILE__, __LINE__);
      if (state != ncclSuccess && state != ncclInProgress) {
        context::scoped_device scope(m.device);
        return atomr::detail::nccl_failure(state, "the NCCL communicator (asynchronous error)", __FILE__, __LINE__);
      }
    }
    return std::nullopt;
  }

  // From the progress thread (the watchdog) or the stall watch's thread, whichever comes first.
  void abort() override {
    if (aborted_.exchange(true)) return;
    // NCCL's abort waits until no CUDA graph refers to the communicator: drop them first (work
    // they launched ends with the abort).
    graphs_.drop_all();
    for (auto& m : members_) {
      cudaSetDevice(m.device);
      ncclCommAbort(m.comm);
    }
  }

  bool can_shrink() const override {
#if NCCL_VERSION_CODE >= NCCL_VERSION(2, 27, 0)
    // The library in use, not only the headers, must have it (2.27 added ncclCommShrink). With one
    // device per rank, this backend's ranks are the control communicator's.
    int version = 0;
    return members_.size() == 1 && ncclGetVersion(&version) == ncclSuccess && version >= NCCL_VERSION(2, 27, 0);
#else
    return false;
#endif
  }

  result<std::unique_ptr<comm_backend>> shrink(const std::vector<int>& excluded, MPI_Comm control,
                                               clock::time_point deadline) override {
#if NCCL_VERSION_CODE >= NCCL_VERSION(2, 27, 0)
    if (!can_shrink() || aborted_) return error(errc::unavailable, "ncclCommShrink: the communicator is gone");
    ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
    config.blocking = blocking_;
    std::vector<member> subs(1);
    member& m = members_.front();
    subs[0].device = m.device;
    context::scoped_device scope(m.device);
    auto made = [&]() -> result<void> {
      stall_watch::scope guard(watch_, deadline, "ncclCommShrink");
      ATOMR_TRY(ATOMR_CUDA_CHECK(cudaSetDevice(m.device)));
      // NCCL_SHRINK_ABORT: the parent's unfinished work (waiting on the failed ranks) is ended first.
      ATOMR_TRY(
          ATOMR_NCCL_CHECK(ncclCommShrink(m.comm, const_cast<int*>(excluded.data()), static_cast<int>(excluded.size()),
                                          &subs[0].comm, &config, NCCL_SHRINK_ABORT)));
      return settle(subs, deadline, "ncclCommShrink");
    }();
    if (made && aborted_) made = error(errc::timeout, "ncclCommShrink did not finish by its deadline");
    if (!made) {
      if (subs[0].comm != nullptr) ncclCommAbort(subs[0].comm);
      abort();
      return made.error_value();
    }
    abort();  // the parent: the shrink ended its work
    ATOMR_TRY(prepare(subs));
    int count = 0;
    ATOMR_TRY(ATOMR_NCCL_CHECK(ncclCommCount(subs[0].comm, &count)));
    return std::unique_ptr<comm_backend>(new nccl_backend(control, std::move(subs), count, blocking_, graph_bytes_));
#else
    (void)excluded;
    (void)control;
    (void)deadline;
    return error(errc::unavailable, "this NCCL has no ncclCommShrink (2.27 added it)");
#endif
  }

  result<std::unique_ptr<comm_backend>> split(int color, int key, clock::time_point deadline) override {
    ATOMR_TRY(agree(control_, ok(), deadline, "splitting the world"));
    log::get("cluster")->debug("splitting the NCCL communicators: color {}, key {}", color, key);
    ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
    config.blocking = blocking_;
    std::vector<member> subs(members_.size());
    stall_watch::scope guard(watch_, deadline, "ncclCommSplit");
    ATOMR_TRY(ATOMR_NCCL_CHECK(ncclGroupStart()));
    for (std::size_t i = 0; i < members_.size(); ++i) {
      subs[i].device = members_[i].device;
      ATOMR_TRY(ATOMR_CUDA_CHECK(cudaSetDevice(members_[i].device)));
      ATOMR_TRY(ATOMR_NCCL_CHECK(ncclCommSplit(members_[i].comm, color < 0 ? NCCL_SPLIT_NOCOLOR : color,
                                               key * static_cast<int>(members_.size()) + static_cast<int>(i),
                                               &subs[i].comm, &config)));
    }
    ATOMR_TRY(ATOMR_NCCL_CHECK(ncclGroupEnd()));
    // Nonblocking: the group finishes in the background and only then are the new handles
    // written, so wait on the parents before touching them.
    auto settled = settle(members_, deadline, "ncclCommSplit");
    if (settled && color >= 0) settled = settle(subs, deadline, "ncclCommSplit");
    log::get("cluster")->debug("ncclCommSplit returned: {}", settled ? "ok" : settled.error_value().describe());
    // Every rank agrees, those left out too, so that one rank's failure fails the split everywhere.
    ATOMR_TRY(agree(control_, settled, deadline, "splitting the NCCL communicators"));
    if (color < 0) return std::unique_ptr<comm_backend>();
    ATOMR_TRY(prepare(subs));
    int count = 0;
    ATOMR_TRY(ATOMR_NCCL_CHECK(ncclCommCount(subs[0].comm, &count)));
    return std::unique_ptr<comm_backend>(new nccl_backend(control_, std::move(subs), count, blocking_, graph_bytes_));
  }

  // Streams, event pools and barrier scratch for communicators just made.
  static result<void> prepare(std::vector<member>& ms) {
    for (auto& m : ms) {
      ATOMR_TRY(ATOMR_CUDA_CHECK(cudaSetDevice(m.device)));
      ATOMR_TRY(ATOMR_CUDA_CHECK(cudaStreamCreateWithFlags(&m.stream, cudaStreamNonBlocking)));
      ATOMR_TRY(ATOMR_CUDA_CHECK(cudaMalloc(reinterpret_cast<void**>(&m.scratch), sizeof(int))));
      m.events = std::make_shared<local::cuda_event_pool>();
      cudaMemPoolProps props{};
      props.allocType = cudaMemAllocationTypePinned;
      props.handleTypes = cudaMemHandleTypeNone;
      props.location.type = cudaMemLocationTypeDevice;
      props.location.id = m.device;
      ATOMR_TRY(ATOMR_CUDA_CHECK(cudaMemPoolCreate(&m.pack_pool, &props)));
      // What it keeps is bounded by the packed batches in flight at once (at most k_plan_most
      // small all_reduces each).
      std::uint64_t keep = std::numeric_limits<std::uint64_t>::max();
      ATOMR_TRY(ATOMR_CUDA_CHECK(cudaMemPoolSetAttribute(m.pack_pool, cudaMemPoolAttrReleaseThreshold, &keep)));
    }
    return ok();
  }

 private:
  // A packed batch's slots, 16-byte aligned (the copies stay wide): pack_entries_ gets each
  // request's send buffer and offset. Returns the pack's size.
  std::size_t lay_out_pack(std::span<coll_request* const> batch) {
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
  result<void> gather_pack(void* pack) {
    const int k = static_cast<int>(pack_entries_.size());
    return ATOMR_CUDA_CHECK(launch_pack_copy(pack_entries_.data(), k, pack, true, members_[0].stream));
  }
  result<void> all_reduce_pack(std::span<coll_request* const> batch, void* pack, std::size_t total) {
    // The slots' padding is reduced too (garbage in, garbage out, never copied back).
    const auto type = batch.front()->spec.type;
    const std::size_t elems = total / local::size_of(type);
    auto& m = members_[0];
    return ATOMR_NCCL_ISSUE(
        ncclAllReduce(pack, pack, elems, nccl_type(type), nccl_op(batch.front()->spec.params.op), m.comm, m.stream));
  }
  result<void> scatter_pack(std::span<coll_request* const> batch, void* pack) {
    for (std::size_t i = 0; i < batch.size(); ++i) pack_entries_[i].user = batch[i]->spec.recv[0]->ptr;
    const int k = static_cast<int>(pack_entries_.size());
    return ATOMR_CUDA_CHECK(launch_pack_copy(pack_entries_.data(), k, pack, false, members_[0].stream));
  }

  result<void> wait_for(const member_waits& waits) {
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

  // A nonblocking communicator may still be enqueuing (connection setup on first use): the
  // event must come after the work, so wait for that first. Only a call that answered
  // ncclInProgress leaves work behind; asking every communicator after every call would cost
  // each request a round of ncclCommGetAsyncError.
  result<void> finish_nccl(clock::time_point deadline) {
    if (!in_progress_) return ok();
    in_progress_ = false;
    return settle(members_, deadline, "enqueuing an NCCL call");
  }

  // ATOMR_NCCL_ISSUE: an enqueuing call, checked like ATOMR_NCCL_CHECK, that notes ncclInProgress.
  result<void> track(ncclResult_t status, const char* call, const char* file, int line) {
    if (status == ncclInProgress) in_progress_ = true;
    return atomr::detail::check_nccl(status, call, file, line);
  }

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
  bool take_stamps(std::array<cudaEvent_t, 4>& out) {
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
  void harvest_gpu_times() {
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
  int blocking_;
  std::size_t graph_bytes_;            // the largest request replayed as a CUDA graph (0: none)
  std::vector<cudaStream_t> streams_;  // members_' streams and devices, in order (for graphs)
  std::vector<int> devices_;
  graph_cache graphs_;
  std::atomic<bool> aborted_{false};
  bool in_progress_ = false;              // an enqueuing call answered ncclInProgress since the last settle
  std::shared_ptr<void> last_passed_;     // member 0's event of the last seal seen complete
  std::shared_ptr<nccl_state> open_;      // shared by the requests issued since the last seal
  std::vector<pack_entry> pack_entries_;  // a packed batch's table, scratch (the issuing thread's)
  graph_cache::key pack_key_;             // the packed batch last looked up, and its first request
  std::uint64_t pack_key_seq_ = 0;
  stall_watch watch_;  // last: its thread stops before the members it aborts go
};

}  // namespace

void connect_nccl_at_init() {
  static std::once_flag once;
  std::call_once(once, [] {
    const char* set = std::getenv("NCCL_RUNTIME_CONNECT");
    if (set != nullptr && *set != '\0') {
      log::get("cluster")->debug("NCCL_RUNTIME_CONNECT={} (the user's): atomr leaves it", set);
      return;
    }
    ::setenv("NCCL_RUNTIME_CONNECT", "0", 0);
  });
}

result<std::unique_ptr<comm_backend>> make_nccl_backend(MPI_Comm control, const std::vector<int>& devices,
                                                        clock::time_point deadline) {
  connect_nccl_at_init();
  // Where the creation's time goes (debug log): NCCL's own init is most of it.
  lap_timer laps;
  int rank = 0;
  int ranks = 0;
  ATOMR_TRY(ATOMR_MPI_CHECK(MPI_Comm_rank(control, &rank)));
  ATOMR_TRY(ATOMR_MPI_CHECK(MPI_Comm_size(control, &ranks)));
  // Member counts of all ranks: the collective rank of this rank's first member.
  int mine = static_cast<int>(devices.size());
  std::vector<int> counts(static_cast<std::size_t>(ranks));
  {
    MPI_Request q = MPI_REQUEST_NULL;
    ATOMR_TRY(ATOMR_MPI_CHECK(MPI_Iallgather(&mine, 1, MPI_INT, counts.data(), 1, MPI_INT, control, &q)));
    ATOMR_TRY(wait_mpi(q, deadline, "exchanging device counts"));
  }
  int first = 0;
  for (int r = 0; r < rank; ++r) first += counts[static_cast<std::size_t>(r)];
  int total = 0;
  for (int c : counts) total += c;

  const double counts_ms = laps.lap();
  ATOMR_ASSIGN_OR_RETURN(const auto ids, unique_ids(control, rank, ranks, total, deadline));
  const double ids_ms = laps.lap();

  ATOMR_ASSIGN_OR_RETURN(const int blocking, blocking_from_environment());
  ATOMR_ASSIGN_OR_RETURN(const auto graph_bytes, graph_bytes_from_environment());
  std::vector<member> ms(devices.size());
  auto init = [&]() -> result<void> {
    ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
    config.blocking = blocking;
    // A blocking init returns only when every rank has joined; the handles are NCCL's until
    // then, so a stall past the deadline ends the job (after the grace) instead of hanging it.
    // NCCL writes each handle before the blocking group returns (the probe in
    // tests/gpu/probes saw it), and aborting it makes the blocked init return an error.
    stall_watch init_watch(
        [&ms] {
          for (auto& m : ms) {
            if (ncclComm_t c = std::atomic_ref<ncclComm_t>(m.comm).load(); c != nullptr) ncclCommAbort(c);
          }
        },
        k_stall_grace);
    auto run = [&]() -> result<void> {
      stall_watch::scope guard(init_watch, deadline, "ncclCommInitRankConfig");
      ATOMR_TRY(ATOMR_NCCL_CHECK(ncclGroupStart()));
      for (std::size_t i = 0; i < devices.size(); ++i) {
        ms[i].device = devices[i];
        context::scoped_device scope(devices[i]);
        ATOMR_TRY(ATOMR_CUDA_CHECK(cudaSetDevice(devices[i])));
        const int me = first + static_cast<int>(i);
        if (!ids.scalable) {
          ATOMR_TRY(ATOMR_NCCL_CHECK(ncclCommInitRankConfig(&ms[i].comm, total, ids.ids.front(), me, &config)));
        } else {
#if NCCL_VERSION_CODE >= NCCL_VERSION(2, 23, 0)
          auto* list = const_cast<ncclUniqueId*>(ids.ids.data());
          ATOMR_TRY(ATOMR_NCCL_CHECK(
              ncclCommInitRankScalable(&ms[i].comm, total, me, static_cast<int>(ids.ids.size()), list, &config)));
#endif
        }
      }
      ATOMR_TRY(ATOMR_NCCL_CHECK(ncclGroupEnd()));
      return settle(ms, deadline, "ncclCommInitRankConfig");
    };
    auto done = run();
    if (init_watch.fired()) {
      init_watch.stop();  // its abort has finished
      // The watch aborted the communicators: they are gone.
      for (auto& m : ms) m.comm = nullptr;
      return error(errc::timeout,
                   "ncclCommInitRankConfig did not finish within the init deadline (a rank did not "
                   "join); the communicators were aborted");
    }
    return done;
  };
  auto initialized = init();
  const double init_ms = laps.lap();
  if (!initialized) {
    for (auto& m : ms) {
      if (m.comm != nullptr) ncclCommAbort(m.comm);
      m.comm = nullptr;
    }
  }
  ATOMR_TRY(agree(control, initialized, deadline, "initializing NCCL"));
  ATOMR_TRY(nccl_backend::prepare(ms));
  log::get("cluster")->debug(
      "NCCL backend up (ms): device counts {:.1f}, unique id {:.1f}, ncclCommInitRankConfig {:.1f}, agreeing and "
      "preparing {:.1f}",
      counts_ms, ids_ms, init_ms, laps.lap());
  return std::unique_ptr<comm_backend>(new nccl_backend(control, std::move(ms), total, blocking, graph_bytes));
}

}  // namespace atomr::cluster::detail
