// `atomr bench p2p`: GPU-to-GPU copies. Raw: cudaMemcpyPeerAsync on a stream of the destination
// GPU with peer access enabled, as nccl-tests and p2pBandwidthLatencyTest do. atomr: the
// destination device actor's copy_from_peer, the same direction (pull). Both in the same run:
// bandwidth with copies issued back to back then one wait, and latency with each copy waited for.
#include "bench/bench_p2p.hpp"

#include <chrono>

#if ATOMR_HAVE_CUDA
#include <cuda_runtime_api.h>

#include "atomr/local/cuda_check.hpp"
#include "atomr/local/device/device.hpp"
#endif

namespace atomr::apps::bench {

#if ATOMR_HAVE_CUDA
namespace {

using clock = std::chrono::steady_clock;
namespace al = atomr::local;

double seconds(clock::time_point t0) { return std::chrono::duration<double>(clock::now() - t0).count(); }

int iterations_for(std::size_t bytes) {
  const std::size_t target = std::size_t{4} << 30;  // about 4 GiB moved per measurement
  return static_cast<int>(std::clamp<std::size_t>(target / std::max<std::size_t>(bytes, 1), 10, 2000));
}

class raw_peer {
 public:
  static result<raw_peer> make(int src, int dst, std::size_t max_bytes) {
    raw_peer r;
    r.src_ = src;
    r.dst_ = dst;
    ATOMR_TRY(ATOMR_CUDA_CHECK(cudaSetDevice(src)));
    ATOMR_TRY(ATOMR_CUDA_CHECK(cudaMalloc(&r.from_, max_bytes)));
    ATOMR_TRY(ATOMR_CUDA_CHECK(cudaMemset(r.from_, 1, max_bytes)));
    ATOMR_TRY(ATOMR_CUDA_CHECK(cudaSetDevice(dst)));
    ATOMR_TRY(ATOMR_CUDA_CHECK(cudaMalloc(&r.to_, max_bytes)));
    int can = 0;
    ATOMR_TRY(ATOMR_CUDA_CHECK(cudaDeviceCanAccessPeer(&can, dst, src)));
    if (can) {
      const cudaError_t status = cudaDeviceEnablePeerAccess(src, 0);
      if (status != cudaErrorPeerAccessAlreadyEnabled) ATOMR_TRY(ATOMR_CUDA_CHECK(status));
      cudaGetLastError();
    }
    ATOMR_TRY(ATOMR_CUDA_CHECK(cudaStreamCreateWithFlags(&r.stream_, cudaStreamNonBlocking)));
    return r;
  }
  raw_peer() = default;
  raw_peer(raw_peer&& o) noexcept { *this = std::move(o); }
  raw_peer& operator=(raw_peer&& o) noexcept {
    std::swap(src_, o.src_);
    std::swap(dst_, o.dst_);
    std::swap(from_, o.from_);
    std::swap(to_, o.to_);
    std::swap(stream_, o.stream_);
    return *this;
  }
  ~raw_peer() {
    if (stream_) cudaStreamDestroy(stream_);
    if (to_) cudaFree(to_);
    if (from_) cudaFree(from_);
  }

  result<double> bandwidth_seconds(std::size_t bytes, int iterations) {
    ATOMR_TRY(ATOMR_CUDA_CHECK(cudaSetDevice(dst_)));
    ATOMR_TRY(copy(bytes));
    ATOMR_TRY(ATOMR_CUDA_CHECK(cudaStreamSynchronize(stream_)));
    const auto t0 = clock::now();
    for (int i = 0; i < iterations; ++i) ATOMR_TRY(copy(bytes));
    ATOMR_TRY(ATOMR_CUDA_CHECK(cudaStreamSynchronize(stream_)));
    return seconds(t0);
  }
  result<double> latency_seconds(std::size_t bytes, int iterations) {
    ATOMR_TRY(ATOMR_CUDA_CHECK(cudaSetDevice(dst_)));
    const auto t0 = clock::now();
    for (int i = 0; i < iterations; ++i) {
      ATOMR_TRY(copy(bytes));
      ATOMR_TRY(ATOMR_CUDA_CHECK(cudaStreamSynchronize(stream_)));
    }
    return seconds(t0);
  }

 private:
  result<void> copy(std::size_t bytes) {
    return ATOMR_CUDA_CHECK(cudaMemcpyPeerAsync(to_, dst_, from_, src_, bytes, stream_));
  }
  int src_ = 0, dst_ = 0;
  void* from_ = nullptr;
  void* to_ = nullptr;
  cudaStream_t stream_ = nullptr;
};

}  // namespace

result<std::vector<p2p_row>> run_p2p_benchmarks(int src, int dst, std::size_t min_bytes, std::size_t max_bytes,
                                                std::size_t factor) {
  ATOMR_ASSIGN_OR_RETURN(raw_peer raw, raw_peer::make(src, dst, max_bytes));
  al::actor_system sys;
  ATOMR_ASSIGN_OR_RETURN(al::device from, al::device::start(sys, src, al::device_kind::cuda));
  ATOMR_ASSIGN_OR_RETURN(al::device to, al::device::start(sys, dst, al::device_kind::cuda));
  std::vector<p2p_row> rows;
  for (std::size_t bytes = min_bytes; bytes <= max_bytes; bytes *= factor) {
    p2p_row row;
    row.bytes = bytes;
    row.iterations = iterations_for(bytes);
    const int lat_iters = std::min(row.iterations, 1000);
    ATOMR_ASSIGN_OR_RETURN(const double raw_bw, raw.bandwidth_seconds(bytes, row.iterations));
    ATOMR_ASSIGN_OR_RETURN(const double raw_lat, raw.latency_seconds(bytes, lat_iters));

    ATOMR_ASSIGN_OR_RETURN(auto a, from.allocate<std::uint8_t>(bytes).get());
    ATOMR_ASSIGN_OR_RETURN(auto b, to.allocate<std::uint8_t>(bytes).get());
    ATOMR_TRY(from.fill_bytes(a, 1).get());
    ATOMR_TRY(to.copy_from_peer(b, a).get());  // warm-up, enables peer access
    ATOMR_ASSIGN_OR_RETURN(const auto before_bw, to.stats().get());
    auto t0 = clock::now();
    std::vector<local::future<void>> inflight;
    inflight.reserve(static_cast<std::size_t>(row.iterations));
    for (int i = 0; i < row.iterations; ++i) inflight.push_back(to.copy_from_peer(b, a));
    for (auto& f : inflight) ATOMR_TRY(f.get());
    const double atomr_bw = seconds(t0);
    ATOMR_ASSIGN_OR_RETURN(const auto before_lat, to.stats().get());
    t0 = clock::now();
    for (int i = 0; i < lat_iters; ++i) ATOMR_TRY(to.copy_from_peer(b, a).get());
    const double atomr_lat = seconds(t0);
    ATOMR_ASSIGN_OR_RETURN(const auto after_lat, to.stats().get());
    row.bw_inline = static_cast<double>(before_lat.operations_inline - before_bw.operations_inline) / row.iterations;
    row.lat_inline = static_cast<double>(after_lat.operations_inline - before_lat.operations_inline) / lat_iters;

    const double moved = static_cast<double>(bytes) * row.iterations;
    row.raw_gbps = moved / raw_bw / 1e9;
    row.atomr_gbps = moved / atomr_bw / 1e9;
    row.raw_us = raw_lat / lat_iters * 1e6;
    row.atomr_us = atomr_lat / lat_iters * 1e6;
    rows.push_back(row);
    if (bytes > max_bytes / factor) break;  // no overflow past max
  }
  return rows;
}
#else
result<std::vector<p2p_row>> run_p2p_benchmarks(int, int, std::size_t, std::size_t, std::size_t) {
  return error(errc::unavailable, "atomr bench p2p needs a CUDA build and two GPUs");
}
#endif

}  // namespace atomr::apps::bench
