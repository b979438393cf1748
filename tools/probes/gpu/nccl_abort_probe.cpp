// Probe (not a test): what ncclCommAbort from another thread does to a communicator whose peer is
// stuck, at three moments: "init" (the peer never calls ncclCommInitRankConfig), "first" (the
// peer never makes the first collective, so the connection is never set up) and "steady" (the
// peer stops taking part after 100 collectives). Rank 1 is the stuck peer: it waits in an
// MPI_Barrier that rank 0 enters when it is done. Rank 0 makes the call on its main thread; a
// watchdog thread calls ncclCommAbort 2 s later and reports whether and how the call returned.
//   mpirun -np 2 nccl_abort_probe <init|first|steady> <blocking 0|1>
// Needs two GPUs (one per rank).
#include <cuda_runtime.h>
#include <mpi.h>
#include <nccl.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <thread>

#include "probe_check.hpp"

namespace {

using clock_type = std::chrono::steady_clock;

double ms_since(clock_type::time_point t0) {
  return std::chrono::duration<double, std::milli>(clock_type::now() - t0).count();
}

void settle(ncclComm_t c) {
  ncclResult_t s = ncclInProgress;
  while (s == ncclInProgress) CK(ncclCommGetAsyncError(c, &s));
  CK(s);
}

}  // namespace

int main(int argc, char** argv) {
  int provided = 0;
  MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided);
  int rank = 0, size = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  if (argc < 3 || size != 2) {
    if (rank == 0) std::printf("usage: mpirun -np 2 nccl_abort_probe <init|first|steady> <blocking 0|1>\n");
    MPI_Finalize();
    return 2;
  }
  const std::string moment = argv[1];
  const int blocking = std::atoi(argv[2]);
  CK(cudaSetDevice(rank));
  cudaStream_t stream;
  CK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  float* buf = nullptr;
  CK(cudaMalloc(&buf, 4096));
  ncclUniqueId id;
  if (rank == 0) CK(ncclGetUniqueId(&id));
  MPI_Bcast(&id, sizeof id, MPI_BYTE, 0, MPI_COMM_WORLD);
  ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
  config.blocking = blocking;
  std::atomic<ncclComm_t> comm{nullptr};
  ncclComm_t raw = nullptr;
  auto init = [&] {
    const auto r = ncclCommInitRankConfig(&raw, 2, id, rank, &config);
    if (r != ncclSuccess && r != ncclInProgress) return r;
    comm.store(raw);
    return ncclSuccess;
  };
  auto all_reduce = [&] {
    auto r = ncclAllReduce(buf, buf, 2, ncclFloat, ncclSum, comm.load(), stream);
    if (r == ncclInProgress) {
      ncclResult_t s = ncclInProgress;
      while (s == ncclInProgress) ncclCommGetAsyncError(comm.load(), &s);
      r = s;
    }
    return r;
  };

  // Both ranks take part up to the moment.
  if (moment != "init") {
    CK(init());
    settle(comm.load());
  }
  if (moment == "steady") {
    for (int i = 0; i < 100; ++i) CK(all_reduce());
    CK(cudaStreamSynchronize(stream));
  }
  if (rank == 1) {
    // The stuck peer: it waits for rank 0 to finish.
    MPI_Barrier(MPI_COMM_WORLD);
    // Its communicator is left as it is: its peer aborted, so destroying it could wait.
    MPI_Finalize();
    return 0;
  }
  // Nothing may hang the machine: report and leave if the call is still blocked 20 s on.
  std::atomic<bool> returned{false};
  std::thread guard([&] {
    for (int i = 0; i < 200 && !returned.load(); ++i) std::this_thread::sleep_for(std::chrono::milliseconds(100));
    if (!returned.load()) {
      std::printf("probe %s blocking=%d: the call was still blocked 20 s after it started (18 s after the abort)\n",
                  moment.c_str(), blocking);
      std::fflush(stdout);
      std::_Exit(3);
    }
  });
  const auto t0 = clock_type::now();
  double abort_at = -1, abort_took = -1;
  bool had_handle = false;
  std::thread watchdog([&] {
    std::this_thread::sleep_for(std::chrono::seconds(2));
    if (returned.load()) return;
    const auto c = comm.load();
    had_handle = c != nullptr || raw != nullptr;
    const auto a0 = clock_type::now();
    abort_at = ms_since(t0);
    if (c != nullptr) {
      ncclCommAbort(c);
    } else if (raw != nullptr) {
      ncclCommAbort(raw);  // the handle NCCL wrote before the call returned
    }
    abort_took = ms_since(a0);
  });
  ncclResult_t r = ncclSuccess;
  cudaError_t device = cudaSuccess;
  if (moment == "init") {
    r = init();
    if (r == ncclSuccess && comm.load() != nullptr) {
      ncclResult_t s = ncclInProgress;
      while (s == ncclInProgress && ncclCommGetAsyncError(comm.load(), &s) == ncclSuccess) {
      }
      r = s;
    }
  } else {
    r = all_reduce();
    if (r == ncclSuccess) {
      // Enqueued: the kernel waits on the device for the stuck peer.
      cudaEvent_t ev;
      CK(cudaEventCreateWithFlags(&ev, cudaEventDisableTiming));
      CK(cudaEventRecord(ev, stream));
      while ((device = cudaEventQuery(ev)) == cudaErrorNotReady && ms_since(t0) < 15'000) {
      }
    }
  }
  const double call_ms = ms_since(t0);
  returned.store(true);
  watchdog.join();
  std::printf(
      "probe %s blocking=%d: the call returned after %.1f ms with %s (ncclResult %d), device %s; abort at %.1f ms "
      "took %.1f ms%s\n",
      moment.c_str(), blocking, call_ms, ncclGetErrorString(r), static_cast<int>(r), cudaGetErrorName(device), abort_at,
      abort_took, moment == "init" ? (had_handle ? " (handle was set)" : " (no handle yet)") : "");
  std::fflush(stdout);
  guard.join();
  MPI_Barrier(MPI_COMM_WORLD);
  MPI_Finalize();
  return 0;
}
