// Probe (not a test): can one thread that drives two GPUs (one process, two blocking
// communicators from ncclCommInitAll) replay an NCCL all_reduce as CUDA graphs, and what does
// it cost next to the eager group? Modes, each `iters` operations back to back then one
// synchronize (and each waited for, `-z 1` style):
//   eager       ncclGroupStart; ncclAllReduce per device; ncclGroupEnd (what raw NCCL does)
//   per_device  one capture per device's stream, both begun before the group and ended after
//               it; replayed with one cudaGraphLaunch per device on its own stream
//   fork_join   one capture begun on device 0's stream, device 1's stream joined by an event
//               and joined back at the end; replayed with one cudaGraphLaunch on device 0's stream
// Each mode checks its result: every element of the output is the sum of both inputs.
//   mpirun -np 1 multi_gpu_graph_probe [iters]
// Needs two GPUs.
#include <cuda_runtime.h>
#include <mpi.h>
#include <nccl.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "probe_check.hpp"

namespace {

using clock_type = std::chrono::steady_clock;
constexpr int k_devs = 2;

struct dev {
  ncclComm_t comm;
  cudaStream_t stream;
  float* send;
  float* recv;
};

void enqueue(std::vector<dev>& d, std::size_t n) {
  CK(ncclGroupStart());
  for (auto& x : d) CK(ncclAllReduce(x.send, x.recv, n, ncclFloat32, ncclSum, x.comm, x.stream));
  CK(ncclGroupEnd());
}

void sync_all(std::vector<dev>& d) {
  for (int i = 0; i < k_devs; ++i) {
    CK(cudaSetDevice(i));
    CK(cudaStreamSynchronize(d[static_cast<std::size_t>(i)].stream));
  }
}

// Prints what a captured graph holds (once per mode): what each launch replays.
void describe(const char* mode, std::size_t i, cudaGraph_t g) {
  std::size_t n = 0;
  CK(cudaGraphGetNodes(g, nullptr, &n));
  std::vector<cudaGraphNode_t> nodes(n);
  if (n > 0) CK(cudaGraphGetNodes(g, nodes.data(), &n));
  std::printf("# %s graph %zu: %zu nodes, types:", mode, i, n);
  for (auto node : nodes) {
    cudaGraphNodeType t{};
    CK(cudaGraphNodeGetType(node, &t));
    std::printf(" %d", static_cast<int>(t));
  }
  std::printf(" (0 kernel, 1 memcpy, 2 memset, 3 host, 4 child, 5 empty, 6 wait event, 7 event record)\n");
}
bool described[2] = {false, false};

struct graphs {
  std::vector<cudaGraphExec_t> exec;  // per device (per_device) or one (fork_join)
};

graphs capture(std::vector<dev>& d, std::size_t n, bool fork_join) {
  graphs g;
  std::vector<cudaGraph_t> raw;
  if (!fork_join) {
    for (int i = 0; i < k_devs; ++i) {
      CK(cudaSetDevice(i));
      CK(cudaStreamBeginCapture(d[static_cast<std::size_t>(i)].stream, cudaStreamCaptureModeThreadLocal));
    }
    enqueue(d, n);
    for (int i = 0; i < k_devs; ++i) {
      CK(cudaSetDevice(i));
      cudaGraph_t one = nullptr;
      CK(cudaStreamEndCapture(d[static_cast<std::size_t>(i)].stream, &one));
      raw.push_back(one);
    }
  } else {
    cudaEvent_t fork = nullptr, join = nullptr;
    CK(cudaSetDevice(0));
    CK(cudaEventCreateWithFlags(&fork, cudaEventDisableTiming));
    CK(cudaSetDevice(1));
    CK(cudaEventCreateWithFlags(&join, cudaEventDisableTiming));
    CK(cudaSetDevice(0));
    CK(cudaStreamBeginCapture(d[0].stream, cudaStreamCaptureModeThreadLocal));
    CK(cudaEventRecord(fork, d[0].stream));
    CK(cudaStreamWaitEvent(d[1].stream, fork, 0));
    enqueue(d, n);
    CK(cudaEventRecord(join, d[1].stream));
    CK(cudaStreamWaitEvent(d[0].stream, join, 0));
    cudaGraph_t one = nullptr;
    CK(cudaStreamEndCapture(d[0].stream, &one));
    raw.push_back(one);
  }
  for (std::size_t i = 0; i < raw.size(); ++i) {
    if (!described[fork_join ? 1 : 0]) describe(fork_join ? "fork_join" : "per_device", i, raw[i]);
    CK(cudaSetDevice(static_cast<int>(i)));
    cudaGraphExec_t e = nullptr;
    CK(cudaGraphInstantiate(&e, raw[i], 0));
    CK(cudaGraphDestroy(raw[i]));
    CK(cudaSetDevice(0));
    g.exec.push_back(e);
  }
  described[fork_join ? 1 : 0] = true;
  return g;
}

void launch(std::vector<dev>& d, const graphs& g) {
  for (std::size_t i = 0; i < g.exec.size(); ++i) CK(cudaGraphLaunch(g.exec[i], d[i].stream));
}

// Fills device i's input with i + 1 + j % 7 and clears the output; checks the sum afterwards.
void fill(std::vector<dev>& d, std::size_t n) {
  std::vector<float> h(n);
  for (int i = 0; i < k_devs; ++i) {
    for (std::size_t j = 0; j < n; ++j) h[j] = static_cast<float>(i + 1 + static_cast<int>(j % 7));
    CK(cudaSetDevice(i));
    CK(cudaMemcpy(d[static_cast<std::size_t>(i)].send, h.data(), n * sizeof(float), cudaMemcpyHostToDevice));
    CK(cudaMemset(d[static_cast<std::size_t>(i)].recv, 0, n * sizeof(float)));
  }
}

long wrong(std::vector<dev>& d, std::size_t n) {
  std::vector<float> h(n);
  long bad = 0;
  for (int i = 0; i < k_devs; ++i) {
    CK(cudaSetDevice(i));
    CK(cudaMemcpy(h.data(), d[static_cast<std::size_t>(i)].recv, n * sizeof(float), cudaMemcpyDeviceToHost));
    for (std::size_t j = 0; j < n; ++j) {
      if (h[j] != static_cast<float>(3 + 2 * static_cast<int>(j % 7))) ++bad;
    }
  }
  return bad;
}

double run(std::vector<dev>& d, const std::string& mode, std::size_t n, int iters, bool each, long& bad) {
  graphs g;
  if (mode != "eager") g = capture(d, n, mode == "fork_join");
  fill(d, n);
  for (int i = 0; i < 20; ++i) {
    if (mode == "eager") {
      enqueue(d, n);
    } else {
      launch(d, g);
    }
  }
  sync_all(d);
  bad = wrong(d, n);
  CK(cudaSetDevice(0));
  const auto t0 = clock_type::now();
  for (int i = 0; i < iters; ++i) {
    if (mode == "eager") {
      enqueue(d, n);
    } else {
      launch(d, g);
    }
    if (each) sync_all(d);
  }
  sync_all(d);
  const auto t1 = clock_type::now();
  for (auto e : g.exec) CK(cudaGraphExecDestroy(e));
  return std::chrono::duration<double, std::micro>(t1 - t0).count() / iters;
}

}  // namespace

int main(int argc, char** argv) {
  CK(MPI_Init(&argc, &argv));
  const int iters = argc > 1 ? std::atoi(argv[1]) : 2000;
  int visible = 0;
  CK(cudaGetDeviceCount(&visible));
  if (visible < k_devs) {
    std::printf("multi_gpu_graph_probe: needs %d GPUs, %d visible\n", k_devs, visible);
    MPI_Finalize();
    return 1;
  }
  std::vector<dev> d(k_devs);
  std::vector<ncclComm_t> comms(k_devs);
  int ids[k_devs] = {0, 1};
  CK(ncclCommInitAll(comms.data(), k_devs, ids));
  constexpr std::size_t most = 1 << 18;  // 1 MiB of floats
  for (int i = 0; i < k_devs; ++i) {
    auto& x = d[static_cast<std::size_t>(i)];
    x.comm = comms[static_cast<std::size_t>(i)];
    CK(cudaSetDevice(i));
    CK(cudaStreamCreateWithFlags(&x.stream, cudaStreamNonBlocking));
    CK(cudaMalloc(&x.send, most * sizeof(float)));
    CK(cudaMalloc(&x.recv, most * sizeof(float)));
  }
  std::printf("# mode        bytes  each  us/op  wrong\n");
  for (const std::size_t bytes : {std::size_t{8}, std::size_t{4096}, std::size_t{262144}, std::size_t{1} << 20}) {
    for (const bool each : {false, true}) {
      for (const char* mode : {"eager", "per_device", "fork_join", "eager", "per_device", "fork_join"}) {
        long bad = 0;
        const double us = run(d, mode, bytes / sizeof(float), each ? iters / 4 : iters, each, bad);
        std::printf("%-11s %8zu  %4d  %6.2f  %ld\n", mode, bytes, each ? 1 : 0, us, bad);
      }
    }
  }
  for (int i = 0; i < k_devs; ++i) {
    CK(cudaSetDevice(i));
    CK(ncclCommDestroy(comms[static_cast<std::size_t>(i)]));
  }
  MPI_Finalize();
  return 0;
}
