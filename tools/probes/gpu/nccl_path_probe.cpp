// Probe (not a test): what raw NCCL costs per 8 B all_reduce under the conditions atomr's world
// runs it in, one condition at a time, at 2 ranks (one GPU each), blocking communicator. Each
// mode runs `iters` operations back to back (then one stream synchronize) and each waited for
// (cudaStreamSynchronize), and prints the mean microseconds per operation (max over ranks).
// Modes:
//   malloc     buffers from cudaMalloc (what bench coll's raw column uses)
//   ipc_pool   buffers from a cudaMemPool with POSIX file descriptor handles, peer access granted
//              (what atomr's device actor allocates from)
//   def_pool   buffers from the device's default pool (cudaMallocAsync)
//   spin_pause   malloc, with a second thread spinning on an atomic (the pause hint) meanwhile
//   spin_nopause the same without the pause hint; spin_yield: sched_yield between looks;
//   spin_sleep   the second thread sleeps 20 us between looks
//   pin_*        the main thread pinned to one CPU (pin_alone), the second thread (a spinner, or
//                the issuer of a hand-off) pinned to the CPU next to it (_adj: m^1) or half the
//                machine away (_far: m + N/2): which CPUs share a core shows as a cost
//   handoff    malloc, issued by a second thread that takes each operation from a ring the
//              main thread fills (the engine's caller and issuing thread, without the engine)
//   graph      malloc, one all_reduce captured in a CUDA graph, launched each time (uniform
//              over the ranks, as NCCL requires)
//   graph_agree    graph, each launch after an 8-byte MPI_Allreduce among the ranks (what a
//                  graph keyed by the caller's buffers would need to agree that every rank
//                  holds one); agree: that MPI_Allreduce alone
//   graph_copy     a graph of copy-in, the all_reduce on a fixed staging buffer, copy-out: the
//                  shape that keeps a graph's NCCL pointers the same on every rank whatever
//                  buffers the caller passes; graph_copy_upd points its copies at one of two
//                  buffer sets per launch (cudaGraphExecMemcpyNodeSetParams1D), as that design must
//   graph_runK     malloc, K all_reduces (K = 2, 4, 8, 16) captured one after the other in one
//                  graph, launched once per K operations: what a back-to-back run of requests
//                  replayed as one graph would cost the GPUs per operation
//   mpirun -np 2 nccl_path_probe [iters]
// Needs two GPUs (one per rank).
#include <cuda_runtime.h>
#include <immintrin.h>
#include <mpi.h>
#include <nccl.h>
#include <pthread.h>
#include <sched.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "probe_check.hpp"
#include "probe_pool.hpp"

namespace {

using clock_type = std::chrono::steady_clock;

struct setup {
  ncclComm_t comm = nullptr;
  cudaStream_t stream = nullptr;
  float* malloc_buf = nullptr;
  float* ipc_buf = nullptr;
  float* def_buf = nullptr;
  cudaGraphExec_t graph = nullptr;
  // graph_runK: K all_reduces in one graph, by K.
  std::vector<std::pair<int, cudaGraphExec_t>> run_graphs;
  int device = 0;
  // graph_copy: two user buffer sets (send at [0, 2), recv at [4, 6)) and the staging buffer.
  float* user[2] = {nullptr, nullptr};
  float* stage = nullptr;
  cudaGraphExec_t copy_graph = nullptr;
  cudaGraphNode_t copy_in = nullptr;
  cudaGraphNode_t copy_out = nullptr;
};

// Points the copy graph's copies at user buffer set `which`.
void point_copies(setup& s, int which) {
  float* u = s.user[which];
  CK(cudaGraphExecMemcpyNodeSetParams1D(s.copy_graph, s.copy_in, s.stage, u, 8, cudaMemcpyDeviceToDevice));
  CK(cudaGraphExecMemcpyNodeSetParams1D(s.copy_graph, s.copy_out, u + 4, s.stage + 4, 8, cudaMemcpyDeviceToDevice));
}

float* buffer_for(setup& s, const std::string& mode) {
  if (mode == "ipc_pool") return s.ipc_buf;
  if (mode == "def_pool") return s.def_buf;
  return s.malloc_buf;
}

void pin_to(std::thread::native_handle_type t, int cpu) {
  cpu_set_t set;
  CPU_ZERO(&set);
  CPU_SET(cpu, &set);
  CK(pthread_setaffinity_np(t, sizeof(set), &set));
}

// For pinned modes: the main thread's CPU, and where the second thread goes (-1: anywhere).
struct placement {
  int main = -1;
  int other = -1;
};

placement placement_for(const std::string& mode, int rank) {
  const int n = static_cast<int>(sysconf(_SC_NPROCESSORS_ONLN));
  placement p;
  if (mode.rfind("pin_", 0) != 0 || n < 16) return p;
  p.main = (2 + 4 * rank) % n;
  if (mode.find("_adj") != std::string::npos) p.other = p.main ^ 1;
  if (mode.find("_far") != std::string::npos) p.other = (p.main + n / 2) % n;
  return p;
}

void issue(setup& s, float* buf) { CK(ncclAllReduce(buf, buf + 4, 2, ncclFloat32, ncclSum, s.comm, s.stream)); }

// graph_runK's K, or 0.
int run_length(const std::string& mode) {
  return mode.rfind("graph_run", 0) == 0 ? std::atoi(mode.c_str() + std::strlen("graph_run")) : 0;
}

cudaGraphExec_t run_graph(const setup& s, int k) {
  for (const auto& [n, g] : s.run_graphs) {
    if (n == k) return g;
  }
  std::printf("probe: no run graph of %d\n", k);
  MPI_Abort(MPI_COMM_WORLD, 1);
  return nullptr;
}

double run_mode(setup& s, const std::string& mode, int iters, bool each, int rank) {
  float* buf = buffer_for(s, mode);
  const placement where = placement_for(mode, rank);
  cpu_set_t saved;
  CK(sched_getaffinity(0, sizeof(saved), &saved));
  if (where.main >= 0) pin_to(pthread_self(), where.main);
  const bool spins = mode.find("spin") != std::string::npos;
  const bool hands_off = mode.find("handoff") != std::string::npos;
  std::atomic<bool> stop{false};
  std::atomic<long> spin_word{0};
  std::thread other;
  // handoff: the ring's slots are sequence numbers; the issuer runs until it issued `iters`.
  constexpr int k_ring = 1024;
  std::vector<std::atomic<long>> ring(k_ring);
  for (auto& r : ring) r.store(-1);
  std::atomic<long> issued{0};
  if (spins) {
    other = std::thread([&] {
      const bool pause = mode.find("nopause") == std::string::npos;
      while (!stop.load(std::memory_order_relaxed)) {
        spin_word.fetch_add(0, std::memory_order_relaxed);
        if (mode == "spin_yield") {
          sched_yield();
        } else if (mode == "spin_sleep") {
          std::this_thread::sleep_for(std::chrono::microseconds(20));
        } else if (pause) {
          _mm_pause();
        }
      }
    });
    if (where.other >= 0) pin_to(other.native_handle(), where.other);
  }
  MPI_Barrier(MPI_COMM_WORLD);
  if (hands_off) {
    other = std::thread([&] {
      CK(cudaSetDevice(s.device));
      for (long i = 0; i < iters; ++i) {
        auto& slot = ring[static_cast<std::size_t>(i % k_ring)];
        while (slot.load(std::memory_order_acquire) != i) _mm_pause();
        issue(s, buf);
        issued.store(i + 1, std::memory_order_release);
      }
    });
    if (where.other >= 0) pin_to(other.native_handle(), where.other);
  }
  const auto t0 = clock_type::now();
  for (int i = 0; i < iters; ++i) {
    if (mode == "agree" || mode == "graph_agree") {
      std::uint64_t mine = 0x5eedULL + static_cast<std::uint64_t>(i);
      std::uint64_t all = 0;
      CK(MPI_Allreduce(&mine, &all, 1, MPI_UINT64_T, MPI_BAND, MPI_COMM_WORLD));
      if (all != mine) {
        std::printf("probe: the ranks disagreed at %d\n", i);
        MPI_Abort(MPI_COMM_WORLD, 1);
      }
      if (mode == "graph_agree") CK(cudaGraphLaunch(s.graph, s.stream));
    } else if (mode == "graph") {
      CK(cudaGraphLaunch(s.graph, s.stream));
    } else if (const int k = run_length(mode); k > 0) {
      if (i % k == 0) CK(cudaGraphLaunch(run_graph(s, k), s.stream));
    } else if (mode == "graph_copy") {
      CK(cudaGraphLaunch(s.copy_graph, s.stream));
    } else if (mode == "graph_copy_upd") {
      point_copies(s, i & 1);
      CK(cudaGraphLaunch(s.copy_graph, s.stream));
    } else if (hands_off) {
      // (The ring never laps the issuer: at most k_ring ahead.)
      while (i >= k_ring && issued.load(std::memory_order_acquire) <= i - k_ring) _mm_pause();
      ring[static_cast<std::size_t>(i % k_ring)].store(i, std::memory_order_release);
      if (each) {
        while (issued.load(std::memory_order_acquire) <= i) _mm_pause();
      }
    } else {
      issue(s, buf);
    }
    // (A run graph is waited for once per launch: its K operations each cost a K-th of that.)
    if (each && (run_length(mode) == 0 || i % run_length(mode) == run_length(mode) - 1)) {
      CK(cudaStreamSynchronize(s.stream));
    }
  }
  if (hands_off) {
    while (issued.load(std::memory_order_acquire) < iters) _mm_pause();
  }
  CK(cudaStreamSynchronize(s.stream));
  const double us = std::chrono::duration<double, std::micro>(clock_type::now() - t0).count() / iters;
  stop = true;
  if (other.joinable()) other.join();
  CK(sched_setaffinity(0, sizeof(saved), &saved));
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
  const int device = rank % devices;
  CK(cudaSetDevice(device));
  setup s{};
  s.device = device;
  CK(cudaStreamCreateWithFlags(&s.stream, cudaStreamNonBlocking));
  CK(cudaMalloc(&s.malloc_buf, 64));
  CK(cudaMemset(s.malloc_buf, 0, 64));
  // atomr's pool (src/local/device/cuda_backend.cpp): shareable, kept, peer access granted.
  cudaMemPool_t pool = make_actor_like_pool(device);
  CK(cudaMallocFromPoolAsync(reinterpret_cast<void**>(&s.ipc_buf), 64, pool, s.stream));
  CK(cudaMallocAsync(reinterpret_cast<void**>(&s.def_buf), 64, s.stream));
  CK(cudaMemsetAsync(s.ipc_buf, 0, 64, s.stream));
  CK(cudaMemsetAsync(s.def_buf, 0, 64, s.stream));
  CK(cudaStreamSynchronize(s.stream));
  ncclUniqueId id;
  if (rank == 0) CK(ncclGetUniqueId(&id));
  MPI_Bcast(&id, sizeof id, MPI_BYTE, 0, MPI_COMM_WORLD);
  ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
  config.blocking = 1;
  CK(ncclCommInitRankConfig(&s.comm, size, id, rank, &config));
  run_mode(s, "malloc", 200, false, rank);  // connects, before the capture
  cudaGraph_t graph = nullptr;
  CK(cudaStreamBeginCapture(s.stream, cudaStreamCaptureModeThreadLocal));
  issue(s, s.malloc_buf);
  CK(cudaStreamEndCapture(s.stream, &graph));
  CK(cudaGraphInstantiate(&s.graph, graph, 0));
  for (const int k : {2, 4, 8, 16}) {
    cudaGraph_t g = nullptr;
    cudaGraphExec_t exec = nullptr;
    CK(cudaStreamBeginCapture(s.stream, cudaStreamCaptureModeThreadLocal));
    for (int j = 0; j < k; ++j) issue(s, s.malloc_buf);
    CK(cudaStreamEndCapture(s.stream, &g));
    std::size_t nodes = 0;
    CK(cudaGraphGetNodes(g, nullptr, &nodes));
    if (rank == 0) std::printf("run graph of %d: %zu nodes\n", k, nodes);
    CK(cudaGraphInstantiate(&exec, g, 0));
    CK(cudaGraphDestroy(g));
    s.run_graphs.emplace_back(k, exec);
  }
  // The copy graph: copy-in, the all_reduce on the staging buffer, copy-out.
  for (auto& u : s.user) {
    CK(cudaMalloc(&u, 64));
    CK(cudaMemset(u, 0, 64));
  }
  CK(cudaMalloc(&s.stage, 64));
  cudaGraph_t copy_graph = nullptr;
  CK(cudaStreamBeginCapture(s.stream, cudaStreamCaptureModeThreadLocal));
  CK(cudaMemcpyAsync(s.stage, s.user[0], 8, cudaMemcpyDeviceToDevice, s.stream));
  CK(ncclAllReduce(s.stage, s.stage + 4, 2, ncclFloat32, ncclSum, s.comm, s.stream));
  CK(cudaMemcpyAsync(s.user[0] + 4, s.stage + 4, 8, cudaMemcpyDeviceToDevice, s.stream));
  CK(cudaStreamEndCapture(s.stream, &copy_graph));
  {
    std::size_t n = 0;
    CK(cudaGraphGetNodes(copy_graph, nullptr, &n));
    std::vector<cudaGraphNode_t> nodes(n);
    CK(cudaGraphGetNodes(copy_graph, nodes.data(), &n));
    for (auto node : nodes) {
      cudaGraphNodeType type{};
      CK(cudaGraphNodeGetType(node, &type));
      if (type != cudaGraphNodeTypeMemcpy) continue;
      std::size_t deps = 0;
      std::size_t dependents = 0;
      CK(cudaGraphNodeGetDependencies(node, nullptr, nullptr, &deps));
      CK(cudaGraphNodeGetDependentNodes(node, nullptr, nullptr, &dependents));
      if (deps == 0) s.copy_in = node;
      if (dependents == 0) s.copy_out = node;
    }
    if (rank == 0) std::printf("copy graph: %zu nodes\n", n);
    if (s.copy_in == nullptr || s.copy_out == nullptr) {
      std::printf("probe: the copy graph's memcpy nodes were not found\n");
      MPI_Abort(MPI_COMM_WORLD, 1);
    }
  }
  CK(cudaGraphInstantiate(&s.copy_graph, copy_graph, 0));
  for (const char* warm :
       {"ipc_pool", "def_pool", "graph", "graph_agree", "graph_copy", "graph_copy_upd", "graph_run16"}) {
    run_mode(s, warm, 200, false, rank);
  }
  // The updated copies move the right bytes: each rank's (rank + 1) summed into set 1's recv.
  {
    const float in[2] = {static_cast<float>(rank + 1), static_cast<float>(rank + 1)};
    CK(cudaMemcpy(s.user[1], in, sizeof in, cudaMemcpyHostToDevice));
    point_copies(s, 1);
    CK(cudaGraphLaunch(s.copy_graph, s.stream));
    CK(cudaStreamSynchronize(s.stream));
    float out[2] = {0, 0};
    CK(cudaMemcpy(out, s.user[1] + 4, sizeof out, cudaMemcpyDeviceToHost));
    const float want = static_cast<float>(size * (size + 1) / 2);
    std::printf("rank %d graph_copy_upd check: %g %g (want %g) %s\n", rank, out[0], out[1], want,
                out[0] == want && out[1] == want ? "ok" : "WRONG");
  }
  // ATOMR_PROBE_MODES=short: the buffer and graph modes only.
  const char* which = std::getenv("ATOMR_PROBE_MODES");
  const bool short_list = which != nullptr && std::string(which) == "short";
  std::vector<const char*> modes = {"malloc",      "graph", "graph_run2", "graph_run4",     "graph_run8", "graph_run16",
                                    "graph_agree", "agree", "graph_copy", "graph_copy_upd", "ipc_pool"};
  if (!short_list) {
    for (const char* m : {"spin_pause", "spin_nopause", "spin_yield", "spin_sleep", "handoff", "pin_alone",
                          "pin_spin_adj", "pin_spin_far", "pin_handoff_adj", "pin_handoff_far"}) {
      modes.push_back(m);
    }
  }
  modes.push_back("malloc");
  for (int round = 0; round < 3; ++round) {
    for (const char* m : modes) {
      const double b2b = run_mode(s, m, iters, false, rank);
      const double each = run_mode(s, m, iters, true, rank);
      double b2b_max = 0, each_max = 0;
      MPI_Reduce(&b2b, &b2b_max, 1, MPI_DOUBLE, MPI_MAX, 0, MPI_COMM_WORLD);
      MPI_Reduce(&each, &each_max, 1, MPI_DOUBLE, MPI_MAX, 0, MPI_COMM_WORLD);
      if (rank == 0) {
        std::printf("round %d %-15s back to back %7.2f us   each waited for %7.2f us\n", round, m, b2b_max, each_max);
      }
    }
  }
  CK(cudaGraphExecDestroy(s.copy_graph));
  CK(cudaGraphDestroy(copy_graph));
  for (auto& [k, g] : s.run_graphs) CK(cudaGraphExecDestroy(g));
  CK(cudaGraphExecDestroy(s.graph));
  CK(cudaGraphDestroy(graph));
  CK(cudaFree(s.malloc_buf));
  CK(cudaFreeAsync(s.ipc_buf, s.stream));
  CK(cudaFreeAsync(s.def_buf, s.stream));
  CK(cudaStreamSynchronize(s.stream));
  ncclCommFinalize(s.comm);
  ncclCommDestroy(s.comm);
  MPI_Finalize();
  return 0;
}
