// The NCCL backend: one communicator per local member, each with its own non-blocking stream.
// Communicators are blocking: a nonblocking one hands every group launch to a thread of NCCL's and
// costs tens of microseconds per call (64 us against 9.5 for an 8 B all_reduce on two H200s).
// A blocking call only blocks while a peer has not connected (first use, split, init, finalize);
// the stall watch bounds those by their deadline and aborts the communicator. Work stuck on the
// device is the watchdog's, as before: it aborts the communicator from the progress thread. Requests wait on their
// buffers' last writes with cudaStreamWaitEvent and run as NCCL calls (in one group when several calls make one
// request). The engine seals each run of requests it issued with one event per member (seal): that event is both
// their completion (polled by the progress thread) and the "last write" later readers of their recv buffers wait on.
#include "atomr/cluster/nccl/nccl_backend.hpp"

#include <nccl.h>

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <mutex>
#include <thread>
#include <vector>

#include "atomr/cluster/liveness/stall_watch.hpp"
#include "atomr/cluster/mpi/agree_settings.hpp"
#include "atomr/cluster/mpi_check.hpp"
#include "atomr/cluster/nccl/retire.hpp"
#include "atomr/cluster/nccl/tunables.hpp"
#include "atomr/cluster/nccl_check.hpp"
#include "atomr/common/context.hpp"
#include "atomr/common/lap_timer.hpp"
#include "atomr/common/log.hpp"
#include "atomr/local/cuda_check.hpp"
#include "nccl_backend_impl.hpp"

namespace atomr::cluster::detail {
namespace {

// After a setup call (init, split, shrink, finalize): each communicator's asynchronous error, with
// any work NCCL still finishes in the background waited out, bounded by the deadline.
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

// The largest request replayed as a CUDA graph (0: none), from ATOMR_NCCL_GRAPHS and
// ATOMR_NCCL_GRAPH_BYTES.
result<std::size_t> graph_bytes_from_environment() {
  ATOMR_ASSIGN_OR_RETURN(const auto on, tunable_int(tunables::nccl_graphs));
  if (on != 0 && on != 1) return error(errc::invalid_argument, "ATOMR_NCCL_GRAPHS must be 0 or 1");
  ATOMR_ASSIGN_OR_RETURN(const auto bytes, tunable_int(tunables::nccl_graph_bytes));
  if (bytes < 0) return error(errc::invalid_argument, "ATOMR_NCCL_GRAPH_BYTES must not be negative");
  return on == 1 ? static_cast<std::size_t>(bytes) : 0;
}

}  // namespace

nccl_backend::nccl_backend(MPI_Comm control, std::vector<member> ms, int size, std::size_t graph_bytes)
    : control_(control),
      members_(std::move(ms)),
      size_(size),
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

nccl_backend::~nccl_backend() {
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
        t.batches, static_cast<double>(t.requests) / n, t.us[0] / n, t.us[1] / n, t.us[2] / n, t.us[3] / n, t.us[4] / n,
        t.us[5] / n);
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

std::optional<error> nccl_backend::async_error() {
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
void nccl_backend::abort() {
  if (aborted_.exchange(true)) return;
  // NCCL's abort waits until no CUDA graph refers to the communicator: drop them first (work
  // they launched ends with the abort).
  graphs_.drop_all();
  for (auto& m : members_) {
    cudaSetDevice(m.device);
    ncclCommAbort(m.comm);
  }
}

bool nccl_backend::can_shrink() const {
#if NCCL_VERSION_CODE >= NCCL_VERSION(2, 27, 0)
  // The library in use, not only the headers, must have it (2.27 added ncclCommShrink). With one
  // device per rank, this backend's ranks are the control communicator's.
  int version = 0;
  return members_.size() == 1 && ncclGetVersion(&version) == ncclSuccess && version >= NCCL_VERSION(2, 27, 0);
#else
  return false;
#endif
}

result<std::unique_ptr<comm_backend>> nccl_backend::shrink(const std::vector<int>& excluded, MPI_Comm control,
                                                           clock::time_point deadline) {
#if NCCL_VERSION_CODE >= NCCL_VERSION(2, 27, 0)
  if (!can_shrink() || aborted_) return error(errc::unavailable, "ncclCommShrink: the communicator is gone");
  ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
  config.blocking = 1;
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
  return std::unique_ptr<comm_backend>(new nccl_backend(control, std::move(subs), count, graph_bytes_));
#else
  (void)excluded;
  (void)control;
  (void)deadline;
  return error(errc::unavailable, "this NCCL has no ncclCommShrink (2.27 added it)");
#endif
}

result<std::unique_ptr<comm_backend>> nccl_backend::split(int color, int key, clock::time_point deadline) {
  ATOMR_TRY(agree(control_, ok(), deadline, "splitting the world"));
  log::get("cluster")->debug("splitting the NCCL communicators: color {}, key {}", color, key);
  ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
  config.blocking = 1;
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
  auto settled = settle(members_, deadline, "ncclCommSplit");
  if (settled && color >= 0) settled = settle(subs, deadline, "ncclCommSplit");
  log::get("cluster")->debug("ncclCommSplit returned: {}", settled ? "ok" : settled.error_value().describe());
  // Every rank agrees, those left out too, so that one rank's failure fails the split everywhere.
  ATOMR_TRY(agree(control_, settled, deadline, "splitting the NCCL communicators"));
  if (color < 0) return std::unique_ptr<comm_backend>();
  ATOMR_TRY(prepare(subs));
  int count = 0;
  ATOMR_TRY(ATOMR_NCCL_CHECK(ncclCommCount(subs[0].comm, &count)));
  return std::unique_ptr<comm_backend>(new nccl_backend(control_, std::move(subs), count, graph_bytes_));
}

// Streams, event pools and barrier scratch for communicators just made.
result<void> nccl_backend::prepare(std::vector<member>& ms) {
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
  ATOMR_TRY(agree_settings(control, tunables::k_nccl, deadline, "starting the NCCL backend"));
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

  ATOMR_ASSIGN_OR_RETURN(const auto graph_bytes, graph_bytes_from_environment());
  std::vector<member> ms(devices.size());
  auto init = [&]() -> result<void> {
    ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
    config.blocking = 1;
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
  return std::unique_ptr<comm_backend>(new nccl_backend(control, std::move(ms), total, graph_bytes));
}

}  // namespace atomr::cluster::detail
