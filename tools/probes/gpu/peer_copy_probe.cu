// Probe (not a test): what each thing the device actor adds to a peer copy costs next to the raw
// copy, in one process with two GPUs (GPU 0 -> GPU 1, pulled on a stream of GPU 1, as
// `atomr bench p2p` does). Bandwidth: `iters` copies back to back, then one stream synchronize;
// latency: each copy waited for. Memory and extras per mode:
//   malloc          cudaMalloc + cudaDeviceEnablePeerAccess (bench p2p's raw column)
//   pool            a pool like the device actor's (POSIX fd handles, peer access granted)
//   pool_plain      a pool without shareable handles (peer access granted)
//   malloc_event    malloc, + cudaEventRecord after each copy
//   malloc_wait     malloc, + cudaStreamWaitEvent on an old event of GPU 0 before each copy
//   pool_all        pool + event after + wait before (what the device actor does)
//   pool_all_waiter pool_all, with a second thread blocking in cudaEventSynchronize on each event
//   pool_async_event / _waiter  pool, cudaMemcpyAsync, an event after each copy / and the second
//                   thread synchronizing each event (the device actor's copies back to back);
//                   _newest: that thread synchronizes only the newest event issued so far
// and the copy itself by cudaMemcpyPeerAsync (the default), cudaMemcpyAsync with
// cudaMemcpyDefault (`_async`), or a copy kernel on GPU 1 reading GPU 0's memory (`_kernel`).
// Latency waits: stream = cudaStreamSynchronize, event_sync = cudaEventSynchronize on an event
// after the copy, event_query = spin on cudaEventQuery, thread = another thread in
// cudaEventSynchronize that sets a flag the caller spins on (the device actor's hop).
//   peer_copy_probe [bytes...]
// Needs two GPUs.
#include <cuda_runtime.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <thread>
#include <vector>

#define CK(x)                                                                                 \
  do {                                                                                        \
    const cudaError_t r_ = (x);                                                               \
    if (r_ != cudaSuccess) {                                                                  \
      std::printf("probe: %s failed: %s at line %d\n", #x, cudaGetErrorString(r_), __LINE__); \
      std::exit(1);                                                                           \
    }                                                                                         \
  } while (0)

namespace {

using clock_type = std::chrono::steady_clock;

double since(clock_type::time_point t0) {
  return std::chrono::duration<double, std::micro>(clock_type::now() - t0).count();
}

cudaMemPool_t make_pool(int device, int peer, bool shareable = true) {
  cudaMemPoolProps props{};
  props.allocType = cudaMemAllocationTypePinned;
  props.handleTypes = shareable ? cudaMemHandleTypePosixFileDescriptor : cudaMemHandleTypeNone;
  props.location.type = cudaMemLocationTypeDevice;
  props.location.id = device;
  cudaMemPool_t pool = nullptr;
  CK(cudaMemPoolCreate(&pool, &props));
  cudaMemAccessDesc access{};
  access.location.type = cudaMemLocationTypeDevice;
  access.location.id = peer;
  access.flags = cudaMemAccessFlagsProtReadWrite;
  CK(cudaMemPoolSetAccess(pool, &access, 1));
  return pool;
}

struct buffers {
  void* from = nullptr;  // on GPU 0
  void* to = nullptr;    // on GPU 1
};

struct rig {
  cudaStream_t stream0 = nullptr, stream1 = nullptr;
  cudaEvent_t old0 = nullptr;  // recorded once on GPU 0
  std::vector<cudaEvent_t> events;
  buffers malloc_bufs, pool_bufs, plain_bufs;
};

// 16 B per thread per step, grid-stride; the tail byte by byte.
__global__ void copy_kernel(int4* __restrict__ to, const int4* __restrict__ from, std::size_t n16,
                            unsigned char* __restrict__ to_tail, const unsigned char* __restrict__ from_tail,
                            std::size_t tail) {
  const std::size_t stride = static_cast<std::size_t>(gridDim.x) * blockDim.x;
  for (std::size_t i = static_cast<std::size_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n16; i += stride) {
    to[i] = from[i];
  }
  if (blockIdx.x == 0 && threadIdx.x < tail) to_tail[threadIdx.x] = from_tail[threadIdx.x];
}

void kernel_copy(void* to, const void* from, std::size_t bytes, cudaStream_t stream) {
  const std::size_t n16 = bytes / 16;
  const int threads = 512;
  const std::size_t want = (n16 + threads - 1) / threads;
  const int blocks = static_cast<int>(std::max<std::size_t>(1, std::min<std::size_t>(want, 132 * 4)));
  copy_kernel<<<blocks, threads, 0, stream>>>(static_cast<int4*>(to), static_cast<const int4*>(from), n16,
                                              static_cast<unsigned char*>(to) + n16 * 16,
                                              static_cast<const unsigned char*>(from) + n16 * 16, bytes % 16);
  CK(cudaGetLastError());
}

rig make_rig(std::size_t max_bytes, int max_iters) {
  rig r;
  CK(cudaSetDevice(0));
  CK(cudaStreamCreateWithFlags(&r.stream0, cudaStreamNonBlocking));
  CK(cudaMalloc(&r.malloc_bufs.from, max_bytes));
  CK(cudaMemset(r.malloc_bufs.from, 1, max_bytes));
  cudaMemPool_t pool0 = make_pool(0, 1);
  CK(cudaMallocFromPoolAsync(&r.pool_bufs.from, max_bytes, pool0, r.stream0));
  CK(cudaMemsetAsync(r.pool_bufs.from, 1, max_bytes, r.stream0));
  cudaMemPool_t plain0 = make_pool(0, 1, false);
  CK(cudaMallocFromPoolAsync(&r.plain_bufs.from, max_bytes, plain0, r.stream0));
  CK(cudaMemsetAsync(r.plain_bufs.from, 1, max_bytes, r.stream0));
  CK(cudaEventCreateWithFlags(&r.old0, cudaEventDisableTiming));
  CK(cudaEventRecord(r.old0, r.stream0));
  CK(cudaStreamSynchronize(r.stream0));
  CK(cudaSetDevice(1));
  CK(cudaStreamCreateWithFlags(&r.stream1, cudaStreamNonBlocking));
  CK(cudaMalloc(&r.malloc_bufs.to, max_bytes));
  const cudaError_t e = cudaDeviceEnablePeerAccess(0, 0);
  if (e != cudaErrorPeerAccessAlreadyEnabled) CK(e);
  cudaGetLastError();
  cudaMemPool_t pool1 = make_pool(1, 0);
  CK(cudaMallocFromPoolAsync(&r.pool_bufs.to, max_bytes, pool1, r.stream1));
  cudaMemPool_t plain1 = make_pool(1, 0, false);
  CK(cudaMallocFromPoolAsync(&r.plain_bufs.to, max_bytes, plain1, r.stream1));
  CK(cudaStreamSynchronize(r.stream1));
  r.events.resize(static_cast<std::size_t>(max_iters));
  for (auto& ev : r.events) CK(cudaEventCreateWithFlags(&ev, cudaEventDisableTiming));
  return r;
}

enum class memory { malloc, pool, plain };
enum class method { peer, async, kernel };

struct mode {
  std::string name;
  memory mem;
  bool event_after, wait_before, waiter_thread;
  method how = method::peer;
  bool newest = false;  // the waiter synchronizes only the newest event issued so far
};

// One copy of `m`'s kind; returns the event recorded after it (or nullptr).
cudaEvent_t issue(rig& r, const mode& m, std::size_t bytes, int i) {
  const buffers& b = m.mem == memory::pool ? r.pool_bufs : m.mem == memory::plain ? r.plain_bufs : r.malloc_bufs;
  if (m.wait_before) CK(cudaStreamWaitEvent(r.stream1, r.old0, 0));
  if (m.how == method::peer) {
    CK(cudaMemcpyPeerAsync(b.to, 1, b.from, 0, bytes, r.stream1));
  } else if (m.how == method::async) {
    CK(cudaMemcpyAsync(b.to, b.from, bytes, cudaMemcpyDefault, r.stream1));
  } else {
    kernel_copy(b.to, b.from, bytes, r.stream1);
  }
  if (!m.event_after) return nullptr;
  cudaEvent_t ev = r.events[static_cast<std::size_t>(i) % r.events.size()];
  CK(cudaEventRecord(ev, r.stream1));
  return ev;
}

// Bandwidth in GB/s: iters copies back to back; with waiter_thread another thread synchronizes
// on each event in order meanwhile (as the completion waiter does).
double bandwidth(rig& r, const mode& m, std::size_t bytes, int iters) {
  issue(r, m, bytes, 0);
  CK(cudaStreamSynchronize(r.stream1));
  std::atomic<int> issued{0};
  std::thread waiter;
  if (m.waiter_thread) {
    waiter = std::thread([&] {
      CK(cudaSetDevice(1));
      for (int i = 0; i < iters; ++i) {
        int seen = 0;
        while ((seen = issued.load(std::memory_order_acquire)) <= i) {
        }
        if (m.newest) i = seen - 1;  // (every event before it completed first: one stream)
        CK(cudaEventSynchronize(r.events[static_cast<std::size_t>(i) % r.events.size()]));
      }
    });
  }
  const auto t0 = clock_type::now();
  for (int i = 0; i < iters; ++i) {
    issue(r, m, bytes, i);
    issued.store(i + 1, std::memory_order_release);
  }
  CK(cudaStreamSynchronize(r.stream1));
  const double us = since(t0);
  if (waiter.joinable()) waiter.join();
  return static_cast<double>(bytes) * iters / us / 1e3;
}

double latency(rig& r, const mode& m, std::size_t bytes, int iters, const std::string& how) {
  std::atomic<int> issued{0}, done{0};
  std::atomic<bool> stop{false};
  std::thread waiter;
  if (how == "thread") {
    waiter = std::thread([&] {
      CK(cudaSetDevice(1));
      for (int i = 0; i < iters; ++i) {
        while (issued.load(std::memory_order_acquire) <= i) {
        }
        CK(cudaEventSynchronize(r.events[static_cast<std::size_t>(i) % r.events.size()]));
        done.store(i + 1, std::memory_order_release);
      }
    });
  }
  mode with_event = m;
  with_event.event_after = how != "stream" || m.event_after;
  const auto t0 = clock_type::now();
  for (int i = 0; i < iters; ++i) {
    cudaEvent_t ev = issue(r, with_event, bytes, i);
    if (how == "stream") {
      CK(cudaStreamSynchronize(r.stream1));
    } else if (how == "event_sync") {
      CK(cudaEventSynchronize(ev));
    } else if (how == "event_query") {
      cudaError_t q;
      while ((q = cudaEventQuery(ev)) == cudaErrorNotReady) {
      }
      CK(q);
    } else {
      issued.store(i + 1, std::memory_order_release);
      while (done.load(std::memory_order_acquire) <= i) {
      }
    }
  }
  const double us = since(t0) / iters;
  stop = true;
  if (waiter.joinable()) waiter.join();
  return us;
}

}  // namespace

int main(int argc, char** argv) {
  int count = 0;
  CK(cudaGetDeviceCount(&count));
  if (count < 2) {
    std::printf("peer_copy_probe: needs 2 GPUs, found %d\n", count);
    return 0;
  }
  std::vector<std::size_t> sizes;
  for (int i = 1; i < argc; ++i) sizes.push_back(std::strtoull(argv[i], nullptr, 0));
  if (sizes.empty()) sizes = {4096, 65536, 1 << 20, 16 << 20, 64 << 20, 256 << 20};
  std::size_t max_bytes = 0;
  for (auto s : sizes) max_bytes = std::max(max_bytes, s);
  rig r = make_rig(max_bytes, 2000);
  CK(cudaSetDevice(1));
  const std::vector<mode> modes = {
      {"malloc", memory::malloc, false, false, false},
      {"pool", memory::pool, false, false, false},
      {"pool_plain", memory::plain, false, false, false},
      {"malloc_async", memory::malloc, false, false, false, method::async},
      {"pool_async", memory::pool, false, false, false, method::async},
      {"malloc_kernel", memory::malloc, false, false, false, method::kernel},
      {"pool_kernel", memory::pool, false, false, false, method::kernel},
      {"malloc_event", memory::malloc, true, false, false},
      {"malloc_wait", memory::malloc, false, true, false},
      {"pool_all", memory::pool, true, true, false},
      {"pool_all_waiter", memory::pool, true, true, true},
      {"pool_async_event", memory::pool, true, false, false, method::async},
      {"pool_async_waiter", memory::pool, true, false, true, method::async},
      {"pool_async_newest", memory::pool, true, false, true, method::async, true},
  };
  for (int round = 0; round < 2; ++round) {
    for (const std::size_t bytes : sizes) {
      const int iters =
          static_cast<int>(std::min<std::size_t>(2000, std::max<std::size_t>(10, (std::size_t{4} << 30) / bytes)));
      const int lat_iters = std::min(iters, 1000);
      std::printf("round %d bytes %zu iters %d\n", round, bytes, iters);
      for (const auto& m : modes) {
        std::printf("  bw %-16s %9.2f GB/s\n", m.name.c_str(), bandwidth(r, m, bytes, iters));
      }
      if (bytes > (16u << 20)) continue;
      for (const char* how : {"stream", "thread"}) {
        for (const auto& m : modes) {
          if (m.waiter_thread || m.event_after != m.wait_before) continue;
          std::printf("  lat %-12s %-16s %8.2f us\n", how, m.name.c_str(), latency(r, m, bytes, lat_iters, how));
        }
      }
    }
  }
  return 0;
}
