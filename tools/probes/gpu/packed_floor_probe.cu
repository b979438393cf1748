// Probe (not a test): the floor for k small all_reduces in one go at 2 ranks (one GPU each,
// blocking communicator), raw CUDA and NCCL without atomr's engine, and what each step of a
// packed batch costs the issuing thread. Each round is timed from a barrier to the stream's
// synchronize; a round's time is the slower rank's; the median and minimum over rounds print.
// Modes:
//   group             one NCCL group of k ncclAllReduce calls (nccl-tests' -m k)
//   pack:B:T:P        k requests in batches of B, each: gather into a pack buffer, one in-place
//                     ncclAllReduce, scatter back (atomr's packed batch), where the copy table
//                     T = upload (allocated from a pool and uploaded from pageable memory: what
//                     issue_packed did) or param (the kernels' parameters), and the pack buffer
//                     P = pool (allocated and freed a batch from a pool that keeps memory) or fixed
//   graph:B           the same packed batches (param tables, fixed pack buffer), each captured
//                     once as a CUDA graph and launched (a design that replays a call repeated
//                     on the same buffers)
//   nccl_host:N       200 back-to-back ncclAllReduce of N bytes on one buffer: the host call alone
//   nccl_host_pool:N  the same, each on a pack buffer fresh from the pool (a new address a call)
//   mpirun -np 2 packed_floor_probe [rounds] [k] [bytes]
// On two H200s joined by NV18 NVLink (100 rounds of 1000 x 2 KiB, medians) one NCCL group takes
// about 825 us, batches of 256 with kernel-parameter tables 120 us, and one batch of 1000 as a
// CUDA graph 39 us.
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

#include "batched_copy.hpp"
#include "probe_check.hpp"
#include "uploaded_copy.cuh"

namespace {

using atomr::cluster::detail::pack_entry;
using atomr::probes::copy_desc;
using clk = std::chrono::steady_clock;

double us(clk::time_point a, clk::time_point b) { return std::chrono::duration<double, std::micro>(b - a).count(); }

double median(std::vector<double> v) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

// The slower rank's value.
double slowest(double v) {
  double m = 0;
  CK(MPI_Allreduce(&v, &m, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD));
  return m;
}

struct setup {
  int k;
  std::size_t bytes;
  ncclComm_t comm;
  cudaStream_t s;
  cudaMemPool_t pool;
  std::vector<void*> send, recv;
  void* fixed;  // a pack buffer for the whole k
};

// Host time per batch of each step, summed over the rounds' batches.
struct steps {
  std::vector<double> gather, nccl, scatter;
};

void run_packed(setup& u, int batch, bool param, bool pool, steps& st) {
  std::vector<pack_entry> entries;
  std::vector<copy_desc> descs;
  for (int first = 0; first < u.k; first += batch) {
    const int n = std::min(batch, u.k - first);
    const std::size_t slot = (u.bytes + 15) / 16 * 16;
    const std::size_t total = slot * static_cast<std::size_t>(n);
    const auto t0 = clk::now();
    void* pack = u.fixed;
    if (pool) CK(cudaMallocFromPoolAsync(&pack, total, u.pool, u.s));
    void* table = nullptr;
    if (param) {
      entries.clear();
      for (int i = 0; i < n; ++i) entries.push_back({u.send[first + i], slot * i, u.bytes});
      CK(atomr::cluster::detail::launch_pack_copy(entries.data(), n, pack, true, u.s));
    } else {
      descs.clear();
      auto* base = static_cast<std::byte*>(pack);
      for (int i = 0; i < n; ++i) descs.push_back({u.send[first + i], base + slot * i, u.bytes});
      for (int i = 0; i < n; ++i) descs.push_back({base + slot * i, u.recv[first + i], u.bytes});
      CK(cudaMallocFromPoolAsync(&table, descs.size() * sizeof(copy_desc), u.pool, u.s));
      CK(cudaMemcpyAsync(table, descs.data(), descs.size() * sizeof(copy_desc), cudaMemcpyHostToDevice, u.s));
      CK(atomr::probes::launch_batched_copy(static_cast<copy_desc*>(table), n, u.s));
    }
    const auto t1 = clk::now();
    CK(ncclAllReduce(pack, pack, total / sizeof(float), ncclFloat, ncclSum, u.comm, u.s));
    const auto t2 = clk::now();
    if (param) {
      for (int i = 0; i < n; ++i) entries[i].user = u.recv[first + i];
      CK(atomr::cluster::detail::launch_pack_copy(entries.data(), n, pack, false, u.s));
    } else {
      CK(atomr::probes::launch_batched_copy(static_cast<copy_desc*>(table) + n, n, u.s));
      CK(cudaFreeAsync(table, u.s));
    }
    if (pool) CK(cudaFreeAsync(pack, u.s));
    const auto t3 = clk::now();
    st.gather.push_back(us(t0, t1));
    st.nccl.push_back(us(t1, t2));
    st.scatter.push_back(us(t2, t3));
  }
}

// One graph per batch of B (param tables, fixed pack buffer), captured on first use.
void run_graphs(setup& u, int batch, std::vector<cudaGraphExec_t>& execs, steps& st) {
  int g = 0;
  for (int first = 0; first < u.k; first += batch, ++g) {
    const auto t0 = clk::now();
    if (static_cast<int>(execs.size()) <= g) {
      setup one = u;
      one.k = std::min(batch, u.k - first);
      one.send.assign(u.send.begin() + first, u.send.begin() + first + one.k);
      one.recv.assign(u.recv.begin() + first, u.recv.begin() + first + one.k);
      steps ignored;
      CK(cudaStreamBeginCapture(u.s, cudaStreamCaptureModeThreadLocal));
      run_packed(one, one.k, true, false, ignored);
      cudaGraph_t graph = nullptr;
      CK(cudaStreamEndCapture(u.s, &graph));
      cudaGraphExec_t exec = nullptr;
      CK(cudaGraphInstantiate(&exec, graph, 0));
      CK(cudaGraphDestroy(graph));
      execs.push_back(exec);
    }
    CK(cudaGraphLaunch(execs[g], u.s));
    st.gather.push_back(us(t0, clk::now()));
  }
}

void run_group(setup& u) {
  CK(ncclGroupStart());
  for (int i = 0; i < u.k; ++i) {
    CK(ncclAllReduce(u.send[i], u.recv[i], u.bytes / sizeof(float), ncclFloat, ncclSum, u.comm, u.s));
  }
  CK(ncclGroupEnd());
}

// Whether every rank's recv buffers hold the sum (inputs: rank + i, as filled below).
bool check(setup& u, int size) {
  std::vector<float> got(u.bytes / sizeof(float));
  for (int i = 0; i < u.k; i += 97) {
    CK(cudaMemcpy(got.data(), u.recv[i], u.bytes, cudaMemcpyDeviceToHost));
    const float want = static_cast<float>(size * (size - 1) / 2 + size * i);
    for (float g : got) {
      if (g != want) return false;
    }
  }
  return true;
}

}  // namespace

int main(int argc, char** argv) {
  CK(MPI_Init(&argc, &argv));
  int rank = 0, size = 0;
  CK(MPI_Comm_rank(MPI_COMM_WORLD, &rank));
  CK(MPI_Comm_size(MPI_COMM_WORLD, &size));
  const int rounds = argc > 1 ? std::atoi(argv[1]) : 100;
  setup u{};
  u.k = argc > 2 ? std::atoi(argv[2]) : 1000;
  u.bytes = argc > 3 ? static_cast<std::size_t>(std::atol(argv[3])) : 2048;
  int devices = 0;
  CK(cudaGetDeviceCount(&devices));
  CK(cudaSetDevice(rank % devices));
  CK(cudaStreamCreateWithFlags(&u.s, cudaStreamNonBlocking));
  ncclUniqueId id;
  if (rank == 0) CK(ncclGetUniqueId(&id));
  CK(MPI_Bcast(&id, sizeof(id), MPI_BYTE, 0, MPI_COMM_WORLD));
  CK(ncclCommInitRank(&u.comm, size, id, rank));
  cudaMemPoolProps props{};
  props.allocType = cudaMemAllocationTypePinned;
  props.location.type = cudaMemLocationTypeDevice;
  props.location.id = rank % devices;
  CK(cudaMemPoolCreate(&u.pool, &props));
  auto keep = ~std::uint64_t{0};
  CK(cudaMemPoolSetAttribute(u.pool, cudaMemPoolAttrReleaseThreshold, &keep));
  for (int i = 0; i < u.k; ++i) {
    void* a = nullptr;
    void* b = nullptr;
    CK(cudaMalloc(&a, u.bytes));
    CK(cudaMalloc(&b, u.bytes));
    std::vector<float> v(u.bytes / sizeof(float), static_cast<float>(rank + i));
    CK(cudaMemcpy(a, v.data(), u.bytes, cudaMemcpyHostToDevice));
    u.send.push_back(a);
    u.recv.push_back(b);
  }
  CK(cudaMalloc(&u.fixed, (u.bytes + 15) / 16 * 16 * static_cast<std::size_t>(u.k)));
  if (rank == 0) {
    std::printf("packed_floor_probe: %d ranks, %d rounds, %d x %zu B; us, the slower rank's\n", size, rounds, u.k,
                u.bytes);
    std::printf("%-24s %9s %9s | host us a batch (median, slower rank): %8s %8s %8s\n", "mode", "median", "min",
                "gather", "nccl", "scatter");
  }
  std::vector<std::string> modes = {"group"};
  for (const int b : {256, 1000}) {
    for (const char* t : {"upload", "param"}) {
      for (const char* p : {"pool", "fixed"}) modes.push_back("pack:" + std::to_string(b) + ":" + t + ":" + p);
    }
  }
  modes.push_back("graph:256");
  modes.push_back("graph:1000");
  modes.push_back("group");
  std::vector<cudaGraphExec_t> execs;
  for (const std::string& mode : modes) {
    std::vector<double> total;
    steps st;
    bool right = true;
    for (int r = 0; r < rounds + 5; ++r) {
      CK(cudaMemsetAsync(u.recv[0], 0, u.bytes, u.s));
      CK(cudaStreamSynchronize(u.s));
      CK(MPI_Barrier(MPI_COMM_WORLD));
      const auto t0 = clk::now();
      steps one;
      if (mode == "group") {
        run_group(u);
      } else if (mode.rfind("graph:", 0) == 0) {
        if (r == 0) {
          for (auto e : execs) CK(cudaGraphExecDestroy(e));
          execs.clear();
        }
        run_graphs(u, std::atoi(mode.c_str() + 6), execs, one);
      } else {
        const int b = std::atoi(mode.c_str() + 5);
        run_packed(u, b, mode.find(":param") != std::string::npos, mode.find(":pool") != std::string::npos, one);
      }
      CK(cudaStreamSynchronize(u.s));
      const double t = slowest(us(t0, clk::now()));
      if (r < 5) continue;  // warm-up
      total.push_back(t);
      st.gather.insert(st.gather.end(), one.gather.begin(), one.gather.end());
      st.nccl.insert(st.nccl.end(), one.nccl.begin(), one.nccl.end());
      st.scatter.insert(st.scatter.end(), one.scatter.begin(), one.scatter.end());
      if (r == 5) right = check(u, size);
    }
    const double g = slowest(median(st.gather)), n = slowest(median(st.nccl)), s = slowest(median(st.scatter));
    int ok = right ? 1 : 0, all_ok = 0;
    CK(MPI_Allreduce(&ok, &all_ok, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD));
    if (rank == 0) {
      std::printf("%-24s %9.1f %9.1f | %49s %8.2f %8.2f %8.2f%s\n", mode.c_str(), median(total),
                  *std::min_element(total.begin(), total.end()), "", g, n, s, all_ok ? "" : "  WRONG VALUES");
    }
  }
  // The host call alone, by size.
  for (const bool pool : {false, true}) {
    for (const std::size_t n : {std::size_t{8}, std::size_t{2048}, std::size_t{512 * 1024}, std::size_t{2 << 20}}) {
      if (n > (u.bytes + 15) / 16 * 16 * static_cast<std::size_t>(u.k)) continue;
      std::vector<double> calls;
      CK(cudaStreamSynchronize(u.s));
      CK(MPI_Barrier(MPI_COMM_WORLD));
      const auto t0 = clk::now();
      for (int i = 0; i < 200; ++i) {
        void* buf = u.fixed;
        if (pool) CK(cudaMallocFromPoolAsync(&buf, n, u.pool, u.s));
        const auto a = clk::now();
        CK(ncclAllReduce(buf, buf, n / sizeof(float) > 0 ? n / sizeof(float) : 1, ncclFloat, ncclSum, u.comm, u.s));
        calls.push_back(us(a, clk::now()));
        if (pool) CK(cudaFreeAsync(buf, u.s));
      }
      CK(cudaStreamSynchronize(u.s));
      const double per_op = slowest(us(t0, clk::now()) / 200);
      const double host = slowest(median(calls));
      if (rank == 0) {
        std::printf("%-24s per op %8.2f us; host call median %8.2f us\n",
                    ((pool ? "nccl_host_pool:" : "nccl_host:") + std::to_string(n)).c_str(), per_op, host);
      }
    }
  }
  CK(ncclCommDestroy(u.comm));
  CK(MPI_Finalize());
  return 0;
}
