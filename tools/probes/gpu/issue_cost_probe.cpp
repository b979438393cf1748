// Probe (not a test): what each driver call a collective engine may add to an NCCL call costs on
// the machine it runs on, at 2 ranks (one GPU each), 8 B all_reduce on a blocking communicator.
// Each mode runs `iters` operations back to back (then one stream synchronize) and each waited
// for; it prints the mean microseconds per operation. Modes:
//   raw        ncclAllReduce only (waited for: cudaStreamSynchronize)
//   event      + cudaEventRecord after each (waited for: spin on cudaEventQuery)
//   event_poll + cudaEventRecord after each and one cudaEventQuery of an earlier event
//   stream_q   waited for: spin on cudaStreamQuery (no event)
//   flag       + cuStreamWriteValue32 of a sequence number to pinned host memory after each
//              (waited for: spin on that memory, no driver call)
//   poller     raw, with a second thread spinning on cudaEventQuery of an old event meanwhile
//   poller_pause  the same, with 2 us of pause between the other thread's queries
//   mapped_lazy  event recorded every 16th operation only
//   mpirun -np 2 issue_cost_probe [iters]
// Needs two GPUs (one per rank).
#include <cuda.h>
#include <cuda_runtime.h>
#include <mpi.h>
#include <nccl.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <thread>
#include <vector>

#include "probe_check.hpp"

namespace {

using clock_type = std::chrono::steady_clock;

struct setup {
  ncclComm_t comm;
  cudaStream_t stream;
  float* buf;
  std::vector<cudaEvent_t> events;
  volatile std::uint32_t* flag;  // pinned, mapped
  CUdeviceptr flag_dev;
};

void spin_event(cudaEvent_t e) {
  while (true) {
    const auto q = cudaEventQuery(e);
    if (q == cudaSuccess) return;
    if (q != cudaErrorNotReady) CK(q);
  }
}

double run_mode(setup& s, const std::string& mode, int iters, bool each) {
  std::atomic<bool> stop{false};
  std::thread other;
  if (mode == "poller" || mode == "poller_pause") {
    const bool pause = mode == "poller_pause";
    CK(cudaEventRecord(s.events.back(), s.stream));
    CK(cudaStreamSynchronize(s.stream));
    other = std::thread([&, pause] {
      while (!stop.load(std::memory_order_relaxed)) {
        (void)cudaEventQuery(s.events.back());
        if (pause) {
          const auto until = clock_type::now() + std::chrono::microseconds(2);
          while (clock_type::now() < until) {
          }
        }
      }
    });
  }
  MPI_Barrier(MPI_COMM_WORLD);
  const auto t0 = clock_type::now();
  const std::size_t ne = s.events.size() - 1;
  for (int i = 0; i < iters; ++i) {
    CK(ncclAllReduce(s.buf, s.buf + 4, 2, ncclFloat32, ncclSum, s.comm, s.stream));
    cudaEvent_t e = s.events[static_cast<std::size_t>(i) % ne];
    if (mode == "event" || mode == "event_poll") CK(cudaEventRecord(e, s.stream));
    if (mode == "mapped_lazy" && (i % 16 == 15 || each)) CK(cudaEventRecord(e, s.stream));
    if (mode == "event_poll" && i >= 2) {
      const auto q = cudaEventQuery(s.events[static_cast<std::size_t>(i - 2) % ne]);
      if (q != cudaSuccess && q != cudaErrorNotReady) CK(q);
    }
    if (mode == "flag") {
      CK(cuStreamWriteValue32(s.stream, s.flag_dev, static_cast<cuuint32_t>(i + 1), CU_STREAM_WRITE_VALUE_DEFAULT));
    }
    if (!each) continue;
    if (mode == "event" || mode == "event_poll" || mode == "mapped_lazy") {
      spin_event(e);
    } else if (mode == "stream_q") {
      while (true) {
        const auto q = cudaStreamQuery(s.stream);
        if (q == cudaSuccess) break;
        if (q != cudaErrorNotReady) CK(q);
      }
    } else if (mode == "flag") {
      while (*s.flag != static_cast<std::uint32_t>(i + 1)) {
      }
    } else {
      CK(cudaStreamSynchronize(s.stream));
    }
  }
  CK(cudaStreamSynchronize(s.stream));
  const double us = std::chrono::duration<double, std::micro>(clock_type::now() - t0).count() / iters;
  stop = true;
  if (other.joinable()) other.join();
  if (mode == "flag") *s.flag = 0;
  return us;
}

}  // namespace

int main(int argc, char** argv) {
  int provided = 0;
  MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided);
  int rank = 0, size = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  const int iters = argc > 1 ? std::atoi(argv[1]) : 5000;
  int devices = 0;
  CK(cudaGetDeviceCount(&devices));
  CK(cudaSetDevice(rank % devices));
  setup s{};
  CK(cudaStreamCreateWithFlags(&s.stream, cudaStreamNonBlocking));
  CK(cudaMalloc(&s.buf, 64));
  CK(cudaMemset(s.buf, 0, 64));
  s.events.resize(64);
  for (auto& e : s.events) CK(cudaEventCreateWithFlags(&e, cudaEventDisableTiming));
  void* host = nullptr;
  CK(cudaHostAlloc(&host, 64, cudaHostAllocMapped));
  s.flag = static_cast<volatile std::uint32_t*>(host);
  *s.flag = 0;
  void* dev = nullptr;
  CK(cudaHostGetDevicePointer(&dev, host, 0));
  s.flag_dev = reinterpret_cast<CUdeviceptr>(dev);
  ncclUniqueId id;
  if (rank == 0) CK(ncclGetUniqueId(&id));
  MPI_Bcast(&id, sizeof id, MPI_BYTE, 0, MPI_COMM_WORLD);
  ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
  config.blocking = 1;
  CK(ncclCommInitRankConfig(&s.comm, size, id, rank, &config));
  for (const char* warm : {"raw", "event"}) run_mode(s, warm, 500, false);
  const char* modes[] = {"raw", "event", "event_poll", "stream_q", "flag", "poller", "poller_pause", "mapped_lazy"};
  for (int round = 0; round < 2; ++round) {
    for (const char* m : modes) {
      const double b2b = run_mode(s, m, iters, false);
      const double each = run_mode(s, m, iters, true);
      double b2b_max = 0, each_max = 0;
      MPI_Reduce(&b2b, &b2b_max, 1, MPI_DOUBLE, MPI_MAX, 0, MPI_COMM_WORLD);
      MPI_Reduce(&each, &each_max, 1, MPI_DOUBLE, MPI_MAX, 0, MPI_COMM_WORLD);
      if (rank == 0)
        std::printf("round %d %-13s back to back %7.2f us   each waited for %7.2f us\n", round, m, b2b_max, each_max);
    }
  }
  ncclCommFinalize(s.comm);
  ncclCommDestroy(s.comm);
  MPI_Finalize();
  return 0;
}
