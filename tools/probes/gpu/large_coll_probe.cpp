// Probe (not a test): raw NCCL's large collectives at 2 ranks (one GPU each) on buffers from
// cudaMalloc (bench coll's raw column) against buffers from a memory pool with POSIX file
// descriptor handles and peer access (what atomr's device actor allocates from), with and
// without an event recorded after each operation (what the world does), and on a second
// communicator of the same ranks (bench coll's raw column has its own), in rounds taking turns.
// Each timing is `iters` operations back to back then one stream synchronize; prints the median
// over rounds of the mean microseconds per operation (max over ranks), and malloc's time over
// each other mode's (bench coll's raw/atomr ratio).
//   mpirun -np 2 large_coll_probe [iters] [rounds] [bytes...]
#include <cuda_runtime.h>
#include <mpi.h>
#include <nccl.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "probe_check.hpp"
#include "probe_pool.hpp"

namespace {

struct buffers {
  float* send = nullptr;
  float* recv = nullptr;
};

enum class op { all_reduce, reduce_scatter, all_gather, broadcast };
const char* name_of(op o) {
  switch (o) {
    case op::all_reduce: return "all_reduce";
    case op::reduce_scatter: return "reduce_scatter";
    case op::all_gather: return "all_gather";
    case op::broadcast: return "broadcast";
  }
  return "?";
}

// `bytes` as bench coll sizes its rows: the larger of each operation's buffers.
void issue(op o, const buffers& b, std::size_t bytes, int ranks, ncclComm_t comm, cudaStream_t stream) {
  const std::size_t n = bytes / sizeof(float);
  switch (o) {
    case op::all_reduce: CK(ncclAllReduce(b.send, b.recv, n, ncclFloat32, ncclSum, comm, stream)); break;
    case op::reduce_scatter:
      CK(ncclReduceScatter(b.send, b.recv, n / static_cast<std::size_t>(ranks), ncclFloat32, ncclSum, comm, stream));
      break;
    case op::all_gather:
      CK(ncclAllGather(b.send, b.recv, n / static_cast<std::size_t>(ranks), ncclFloat32, comm, stream));
      break;
    case op::broadcast: CK(ncclBroadcast(b.send, b.recv, n, ncclFloat32, 0, comm, stream)); break;
  }
}

}  // namespace

int main(int argc, char** argv) {
  int provided = 0;
  MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided);
  int rank = 0, ranks = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &ranks);
  const int iters = argc > 1 ? std::atoi(argv[1]) : 50;
  const int rounds = argc > 2 ? std::atoi(argv[2]) : 4;
  std::vector<std::size_t> sizes;
  for (int i = 3; i < argc; ++i) sizes.push_back(std::strtoull(argv[i], nullptr, 0));
  if (sizes.empty()) sizes = {std::size_t{64} << 20, std::size_t{1} << 30};
  const std::size_t most = *std::max_element(sizes.begin(), sizes.end());
  int devices = 0;
  CK(cudaGetDeviceCount(&devices));
  const int device = rank % devices;
  CK(cudaSetDevice(device));
  cudaStream_t stream = nullptr;
  CK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));

  buffers plain, pooled;
  CK(cudaMalloc(reinterpret_cast<void**>(&plain.send), most));
  CK(cudaMalloc(reinterpret_cast<void**>(&plain.recv), most));
  // atomr's pool (src/local/device/cuda_backend.cpp): shareable, kept, peer access granted.
  cudaMemPool_t pool = make_actor_like_pool(device);
  CK(cudaMallocFromPoolAsync(reinterpret_cast<void**>(&pooled.send), most, pool, stream));
  CK(cudaMallocFromPoolAsync(reinterpret_cast<void**>(&pooled.recv), most, pool, stream));
  for (const auto& b : {plain, pooled}) {
    CK(cudaMemsetAsync(b.send, 0, most, stream));
    CK(cudaMemsetAsync(b.recv, 0, most, stream));
  }
  CK(cudaStreamSynchronize(stream));
  std::vector<cudaEvent_t> events(static_cast<std::size_t>(iters));
  for (auto& e : events) CK(cudaEventCreateWithFlags(&e, cudaEventDisableTiming));

  ncclUniqueId id{};
  if (rank == 0) CK(ncclGetUniqueId(&id));
  CK(MPI_Bcast(&id, sizeof(id), MPI_BYTE, 0, MPI_COMM_WORLD));
  ncclComm_t comm = nullptr;
  CK(ncclCommInitRank(&comm, ranks, id, rank));
  // A second communicator of the same ranks (bench coll's raw column runs on one of its own).
  ncclUniqueId id2{};
  if (rank == 0) CK(ncclGetUniqueId(&id2));
  CK(MPI_Bcast(&id2, sizeof(id2), MPI_BYTE, 0, MPI_COMM_WORLD));
  ncclComm_t comm2 = nullptr;
  CK(ncclCommInitRank(&comm2, ranks, id2, rank));

  struct mode {
    const char* name;
    const buffers* b;
    bool events;
    ncclComm_t comm;
  };
  const mode modes[] = {{"malloc", &plain, false, comm},
                        {"pool", &pooled, false, comm},
                        {"pool_event", &pooled, true, comm},
                        {"malloc_event", &plain, true, comm},
                        {"malloc_comm2", &plain, false, comm2}};
  for (const op o : {op::all_reduce, op::reduce_scatter, op::all_gather, op::broadcast}) {
    for (const std::size_t bytes : sizes) {
      std::vector<std::vector<double>> us(std::size(modes));
      for (int round = 0; round < rounds; ++round) {
        for (std::size_t m = 0; m < std::size(modes); ++m) {
          for (int w = 0; w < 3; ++w) issue(o, *modes[m].b, bytes, ranks, modes[m].comm, stream);
          CK(cudaStreamSynchronize(stream));
          CK(MPI_Barrier(MPI_COMM_WORLD));
          const auto t0 = std::chrono::steady_clock::now();
          for (int i = 0; i < iters; ++i) {
            issue(o, *modes[m].b, bytes, ranks, modes[m].comm, stream);
            if (modes[m].events) CK(cudaEventRecord(events[static_cast<std::size_t>(i)], stream));
          }
          CK(cudaStreamSynchronize(stream));
          double mine =
              std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0).count() / iters;
          double most_us = 0;
          CK(MPI_Allreduce(&mine, &most_us, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD));
          us[m].push_back(most_us);
        }
      }
      if (rank == 0) {
        std::printf("%-15s %11zu", name_of(o), bytes);
        double base = 0;
        for (std::size_t m = 0; m < std::size(modes); ++m) {
          auto v = us[m];
          std::sort(v.begin(), v.end());
          const double median = v[v.size() / 2];
          if (m == 0) base = median;
          std::printf("  %s %.2f us (%.4f)", modes[m].name, median, base / median);
        }
        std::printf("\n");
        std::fflush(stdout);
      }
    }
  }
  CK(ncclCommDestroy(comm2));
  CK(ncclCommDestroy(comm));
  MPI_Finalize();
  return 0;
}
