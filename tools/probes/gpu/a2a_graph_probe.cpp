// Probe (not a test): raw NCCL's 8 B all_to_all (a group of ncclSend/ncclRecv, as atomr issues
// it) and all_reduce at 2 ranks (one GPU each, blocking communicator), each waited for, issued
// eagerly or replayed from a CUDA graph. It prints, per rank, what each graph holds and the
// medians and 90th percentiles of two spans per operation: the issuing call (launch) and issue to
// the stream found idle (cudaStreamQuery in a loop: done). atomr's graphed all_to_all, waited
// for, can settle into a mode in which one rank finds its stream idle about 30 us after the
// other; this asks whether raw NCCL in a graph does the same.
// Modes: eager, graph, graph_agree (an 8-byte MPI_Allreduce before each launch: atomr's vote);
// graph_ev: an event recorded after the launch, cudaEventQuery in a loop instead (atomr's seal);
// graph_ev2: the same, but a second thread polls the event and raises a flag the first spins on
// (atomr's progress thread watching what a caller issued).
// Buffers from cudaMalloc, or with `pool` from a memory pool as atomr's device actor makes them.
//   mpirun -np 2 a2a_graph_probe [iters] [pool]
// Needs two GPUs (one per rank).
#include <cuda_runtime.h>
#include <mpi.h>
#include <nccl.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <thread>
#include <vector>

#include "probe_check.hpp"

namespace {

using clk = std::chrono::steady_clock;

struct setup {
  ncclComm_t comm = nullptr;
  cudaStream_t stream = nullptr;
  float* send = nullptr;
  float* recv = nullptr;
  int rank = 0;
  int size = 0;
  int device = 0;
  cudaEvent_t event = nullptr;
  // graph_ev2's poller: the main thread raises `go` after recording the event; the poller
  // queries it until it passed and raises `passed`.
  std::atomic<int> go{0};
  std::atomic<int> passed{0};
  std::atomic<bool> stop{false};
};

void poller(setup* s) {
  CK(cudaSetDevice(s->device));
  int seen = 0;
  while (!s->stop.load(std::memory_order_acquire)) {
    const int g = s->go.load(std::memory_order_acquire);
    if (g == seen) continue;
    cudaError_t q;
    while ((q = cudaEventQuery(s->event)) == cudaErrorNotReady) {
    }
    CK(q);
    seen = g;
    s->passed.store(g, std::memory_order_release);
  }
}

void issue(setup& s, const std::string& op) {
  if (op == "all_reduce") {
    CK(ncclAllReduce(s.send, s.recv, 2, ncclFloat32, ncclSum, s.comm, s.stream));
    return;
  }
  CK(ncclGroupStart());
  for (int p = 0; p < s.size; ++p) {
    CK(ncclSend(s.send + p, 1, ncclFloat32, p, s.comm, s.stream));
    CK(ncclRecv(s.recv + p, 1, ncclFloat32, p, s.comm, s.stream));
  }
  CK(ncclGroupEnd());
}

std::string describe(cudaGraph_t g) {
  std::size_t n = 0;
  CK(cudaGraphGetNodes(g, nullptr, &n));
  std::vector<cudaGraphNode_t> nodes(n);
  if (n > 0) CK(cudaGraphGetNodes(g, nodes.data(), &n));
  int kernel = 0, host = 0, event = 0, other = 0;
  for (auto node : nodes) {
    cudaGraphNodeType t{};
    CK(cudaGraphNodeGetType(node, &t));
    if (t == cudaGraphNodeTypeKernel)
      ++kernel;
    else if (t == cudaGraphNodeTypeHost)
      ++host;
    else if (t == cudaGraphNodeTypeEventRecord || t == cudaGraphNodeTypeWaitEvent)
      ++event;
    else
      ++other;
  }
  char buf[160];
  std::snprintf(buf, sizeof buf, "%zu nodes: %d kernel, %d host, %d event, %d other", n, kernel, host, event, other);
  return buf;
}

double pct(std::vector<double> v, double p) {
  std::sort(v.begin(), v.end());
  return v[static_cast<std::size_t>(p * static_cast<double>(v.size() - 1))];
}

double us(clk::time_point a, clk::time_point b) { return std::chrono::duration<double, std::micro>(b - a).count(); }

void run(setup& s, const std::string& op, const std::string& mode, cudaGraphExec_t exec, int iters, bool print) {
  std::vector<double> launch, done, total;
  launch.reserve(iters);
  done.reserve(iters);
  total.reserve(iters);
  for (int i = 0; i < iters; ++i) {
    const auto t0 = clk::now();
    if (mode == "graph_agree") {
      long long v = i, out = 0;
      CK(MPI_Allreduce(&v, &out, 1, MPI_LONG_LONG, MPI_MAX, MPI_COMM_WORLD));
    }
    const auto t1 = clk::now();
    if (mode == "eager") {
      issue(s, op);
    } else {
      CK(cudaGraphLaunch(exec, s.stream));
    }
    const auto t2 = clk::now();
    if (mode == "graph_ev") {
      CK(cudaEventRecord(s.event, s.stream));
      cudaError_t q;
      while ((q = cudaEventQuery(s.event)) == cudaErrorNotReady) {
      }
      CK(q);
    } else if (mode == "graph_ev2") {
      CK(cudaEventRecord(s.event, s.stream));
      const int g = s.go.load(std::memory_order_relaxed) + 1;
      s.go.store(g, std::memory_order_release);
      while (s.passed.load(std::memory_order_acquire) != g) {
      }
    } else {
      cudaError_t q;
      while ((q = cudaStreamQuery(s.stream)) == cudaErrorNotReady) {
      }
      CK(q);
    }
    const auto t3 = clk::now();
    launch.push_back(us(t1, t2));
    done.push_back(us(t2, t3));
    total.push_back(us(t0, t3));
  }
  if (!print) return;
  std::printf(
      "rank %d %-10s %-11s launch p50 %6.2f p90 %6.2f | done p50 %6.2f p90 %6.2f | per op p50 %6.2f p90 %6.2f\n",
      s.rank, op.c_str(), mode.c_str(), pct(launch, 0.5), pct(launch, 0.9), pct(done, 0.5), pct(done, 0.9),
      pct(total, 0.5), pct(total, 0.9));
}

}  // namespace

int main(int argc, char** argv) {
  int provided = 0;
  MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided);
  setup s;
  MPI_Comm_rank(MPI_COMM_WORLD, &s.rank);
  MPI_Comm_size(MPI_COMM_WORLD, &s.size);
  const int iters = argc > 1 ? std::atoi(argv[1]) : 2000;
  const bool pooled = argc > 2 && std::string(argv[2]) == "pool";
  int devices = 0;
  CK(cudaGetDeviceCount(&devices));
  s.device = s.rank % devices;
  CK(cudaSetDevice(s.device));
  CK(cudaStreamCreateWithFlags(&s.stream, cudaStreamNonBlocking));
  if (pooled) {
    // atomr's device actor's pool (src/local/device/cuda_backend.cpp): shareable, kept.
    cudaMemPool_t pool = nullptr;
    cudaMemPoolProps props{};
    props.allocType = cudaMemAllocationTypePinned;
    props.handleTypes = cudaMemHandleTypePosixFileDescriptor;
    props.location.type = cudaMemLocationTypeDevice;
    props.location.id = s.device;
    CK(cudaMemPoolCreate(&pool, &props));
    std::uint64_t keep = ~std::uint64_t{0};
    CK(cudaMemPoolSetAttribute(pool, cudaMemPoolAttrReleaseThreshold, &keep));
    CK(cudaMallocFromPoolAsync(reinterpret_cast<void**>(&s.send), 64 * sizeof(float), pool, s.stream));
    CK(cudaMallocFromPoolAsync(reinterpret_cast<void**>(&s.recv), 64 * sizeof(float), pool, s.stream));
    CK(cudaStreamSynchronize(s.stream));
  } else {
    CK(cudaMalloc(&s.send, 64 * sizeof(float)));
    CK(cudaMalloc(&s.recv, 64 * sizeof(float)));
  }
  if (s.rank == 0) std::printf("buffers: %s\n", pooled ? "pool (POSIX fd handles)" : "cudaMalloc");
  CK(cudaMemset(s.send, 0, 64 * sizeof(float)));
  CK(cudaMemset(s.recv, 0, 64 * sizeof(float)));
  CK(cudaEventCreateWithFlags(&s.event, cudaEventDisableTiming));
  std::thread poll_thread(poller, &s);
  ncclUniqueId id;
  if (s.rank == 0) CK(ncclGetUniqueId(&id));
  CK(MPI_Bcast(&id, sizeof id, MPI_BYTE, 0, MPI_COMM_WORLD));
  ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
  config.blocking = 1;
  CK(ncclCommInitRankConfig(&s.comm, s.size, id, s.rank, &config));
  for (const std::string op : {"all_to_all", "all_reduce"}) {
    run(s, op, "eager", nullptr, 200, false);  // connects, before the capture
    cudaGraph_t graph = nullptr;
    CK(cudaStreamBeginCapture(s.stream, cudaStreamCaptureModeThreadLocal));
    issue(s, op);
    CK(cudaStreamEndCapture(s.stream, &graph));
    std::printf("rank %d %s graph: %s\n", s.rank, op.c_str(), describe(graph).c_str());
    cudaGraphExec_t exec = nullptr;
    CK(cudaGraphInstantiate(&exec, graph, 0));
    CK(cudaGraphDestroy(graph));
    for (const std::string mode : {"eager", "graph", "graph_agree", "graph_ev", "graph_ev2", "eager", "graph",
                                   "graph_agree", "graph_ev", "graph_ev2"}) {
      CK(MPI_Barrier(MPI_COMM_WORLD));
      run(s, op, mode, exec, 200, false);
      run(s, op, mode, exec, iters, true);
    }
    CK(cudaGraphExecDestroy(exec));
  }
  s.stop.store(true, std::memory_order_release);
  poll_thread.join();
  CK(ncclCommDestroy(s.comm));
  MPI_Finalize();
  return 0;
}
