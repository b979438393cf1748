// Probe (not a test): what the issuing thread spends on the driver calls around a packed
// all_reduce (the NCCL backend's issue_packed, without NCCL), for k small buffers on one GPU.
// Each step is timed on the host, median over `rounds` batches, in two conditions: the stream
// idle, and the stream still running earlier work (a kernel that spins for 200 us, as a batch
// issued behind one in flight finds it). Where the pack buffer and table come from:
//   default   cudaMallocAsync: the device's default pool, which returns freed memory to the
//             driver at every synchronization (what issue_packed did)
//   kept      cudaMallocFromPoolAsync from a pool of its own that keeps freed memory
// and how the descriptor table gets to the device:
//   pageable  cudaMemcpyAsync from a std::vector (what issue_packed does)
//   pinned    cudaMemcpyAsync from page-locked memory (cudaHostAlloc, kept)
//   mapped    none: the kernel reads the table from mapped page-locked memory
//   pack_issue_probe [rounds] [k...]
#include <cuda_runtime.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <utility>
#include <vector>

#include "uploaded_copy.cuh"

#define CK(x)                                                                                 \
  do {                                                                                        \
    const cudaError_t r_ = (x);                                                               \
    if (r_ != cudaSuccess) {                                                                  \
      std::printf("probe: %s failed: %s at line %d\n", #x, cudaGetErrorString(r_), __LINE__); \
      std::exit(1);                                                                           \
    }                                                                                         \
  } while (0)

namespace {

using atomr::probes::copy_desc;
using clk = std::chrono::steady_clock;

__device__ unsigned long long now_ns() {
  unsigned long long t;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
  return t;
}

__global__ void spin(unsigned long long ns) {
  const auto start = now_ns();
  while (now_ns() - start < ns) {
  }
}

double us(clk::time_point a, clk::time_point b) { return std::chrono::duration<double, std::micro>(b - a).count(); }

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

}  // namespace

int main(int argc, char** argv) {
  const int rounds = argc > 1 ? std::atoi(argv[1]) : 200;
  std::vector<int> ks;
  for (int i = 2; i < argc; ++i) ks.push_back(std::atoi(argv[i]));
  if (ks.empty()) ks = {128, 384, 1000};
  const std::size_t bytes = 2048;
  const int most = *std::max_element(ks.begin(), ks.end());
  CK(cudaSetDevice(0));
  cudaStream_t s;
  CK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
  std::vector<void*> bufs(most);
  for (auto& b : bufs) CK(cudaMalloc(&b, bytes));
  cudaDeviceProp prop{};
  CK(cudaGetDeviceProperties(&prop, 0));
  copy_desc* pinned = nullptr;
  CK(cudaHostAlloc(reinterpret_cast<void**>(&pinned), 2 * most * sizeof(copy_desc), cudaHostAllocMapped));
  std::printf("pack_issue_probe: %s, %d rounds, %zu B buffers; median us on the host per batch\n", prop.name, rounds,
              bytes);
  cudaMemPool_t kept = nullptr;
  cudaMemPoolProps props{};
  props.allocType = cudaMemAllocationTypePinned;
  props.location.type = cudaMemLocationTypeDevice;
  props.location.id = 0;
  CK(cudaMemPoolCreate(&kept, &props));
  auto keep = ~std::uint64_t{0};
  CK(cudaMemPoolSetAttribute(kept, cudaMemPoolAttrReleaseThreshold, &keep));
  std::printf("%6s %-8s %-9s %-5s %8s %8s %8s %8s %8s %8s\n", "k", "pool", "table", "busy", "malloc", "upload",
              "gather", "scatter", "free", "total");
  for (const int k : ks) {
    for (const auto& [pool, mode] : std::vector<std::pair<std::string, std::string>>{
             {"default", "pageable"}, {"kept", "pageable"}, {"kept", "pinned"}, {"kept", "mapped"}}) {
      for (const bool busy : {false, true}) {
        std::vector<double> t_malloc, t_upload, t_gather, t_scatter, t_free, t_total;
        for (int r = 0; r < rounds; ++r) {
          if (busy) spin<<<1, 1, 0, s>>>(200000);
          const auto t0 = clk::now();
          const std::size_t total = k * bytes;
          void* pack = nullptr;
          void* descs = nullptr;
          const std::size_t desc_bytes = 2 * k * sizeof(copy_desc);
          if (pool == "default") {
            CK(cudaMallocAsync(&pack, total, s));
            if (mode != "mapped") CK(cudaMallocAsync(&descs, desc_bytes, s));
          } else {
            CK(cudaMallocFromPoolAsync(&pack, total, kept, s));
            if (mode != "mapped") CK(cudaMallocFromPoolAsync(&descs, desc_bytes, kept, s));
          }
          const auto t1 = clk::now();
          std::vector<copy_desc> table;  // built as issue_packed builds it
          copy_desc* host = mode == "pageable" ? nullptr : pinned;
          if (!host) {
            table.resize(2 * k);
            host = table.data();
          }
          auto* base = static_cast<std::byte*>(pack);
          for (int i = 0; i < k; ++i) host[i] = {bufs[i], base + i * bytes, bytes};
          for (int i = 0; i < k; ++i) host[k + i] = {base + i * bytes, bufs[i], bytes};
          if (mode == "mapped") {
            CK(cudaHostGetDevicePointer(&descs, pinned, 0));
          } else {
            CK(cudaMemcpyAsync(descs, host, desc_bytes, cudaMemcpyHostToDevice, s));
          }
          const auto t2 = clk::now();
          const auto* d = static_cast<const copy_desc*>(descs);
          CK(atomr::probes::launch_batched_copy(d, k, s));
          const auto t3 = clk::now();
          CK(atomr::probes::launch_batched_copy(d + k, k, s));
          const auto t4 = clk::now();
          CK(cudaFreeAsync(pack, s));
          if (mode != "mapped") CK(cudaFreeAsync(descs, s));
          const auto t5 = clk::now();
          // (The pinned table is reused next round: wait, as a pool of tables would.)
          CK(cudaStreamSynchronize(s));
          t_malloc.push_back(us(t0, t1));
          t_upload.push_back(us(t1, t2));
          t_gather.push_back(us(t2, t3));
          t_scatter.push_back(us(t3, t4));
          t_free.push_back(us(t4, t5));
          t_total.push_back(us(t0, t5));
        }
        std::printf("%6d %-8s %-9s %-5s %8.2f %8.2f %8.2f %8.2f %8.2f %8.2f\n", k, pool.c_str(), mode.c_str(),
                    busy ? "yes" : "no", median(t_malloc), median(t_upload), median(t_gather), median(t_scatter),
                    median(t_free), median(t_total));
      }
    }
  }
  return 0;
}
